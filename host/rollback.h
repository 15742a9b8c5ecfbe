/* The rollback window (--reload-keep-ms): after a hand-over, what the old
 * generation was (its binary and its configuration) is kept for a while,
 * and SIGUSR1 to the host brings it back as nginx's HUP to an old master
 * does (docs/behaviour.md, Reload and upgrade).
 *
 * Design notes
 * - What is kept is not an idle process but what makes one: a copy of the
 *   old generation's executable and the topology text it read at its
 *   start, each in a memfd the serving generation holds (its predecessor
 *   passes both at the spawn, M0__KEEP). Everything else a generation is
 *   made of is inherited unchanged by every generation (argv, environment,
 *   listener, page, run directory: host/reload.h), so those two are the
 *   whole difference. An idle old generation would hold the same and more
 *   (its threads, nng, its loops torn down and unable to serve again), and
 *   under --workers a supervisor with no workers: the copy is smaller and
 *   cannot half-serve.
 * - A copy, not the path: SIGUSR2 usually follows a rename over the
 *   binary (the old inode is then only reachable through a running
 *   process), and a `cp` over it once the old generation exited rewrites
 *   the file in place (ETXTBSY protects a file only while it runs).
 * - Bringing it back is a reload like any other: the serving generation
 *   starts a next one from the kept copy (/proc/self/fd/N) with the kept
 *   text (M0__TOPOLOGY_FD, which the topology file's reader and the
 *   workers honour), the next one serves, this one drains. So nothing is
 *   lost, every bound of a reload applies, and the one rolled away from is
 *   kept in its turn: SIGUSR1 again goes forward.
 * - The window starts when the next generation serves; it ends after N ms,
 *   at the next hand-over (the generation that kept it drains), or at the
 *   host's exit. Each end is one line on stderr.
 * - Without --reload-keep-ms (0, the default) nothing is copied and
 *   SIGUSR1 is refused with one line (it no longer ends the host). */
#ifndef M0_HOST_ROLLBACK_H
#define M0_HOST_ROLLBACK_H

#include <stddef.h>
#include <stdint.h>

struct m0__process;


/* The top process at its start (m0__reload_inherit): what its predecessor
 * passed (M0__KEEP, M0__ROLLBACK), and a copy of its own topology text
 * when the window is on. */
void m0__rollback_start(struct m0__process *p);
/* This generation serves: the window of what it keeps begins (a line). */
void m0__rollback_serving(struct m0__process *p);
/* It handed over: what it kept is dropped (a line; its successor keeps
 * this one now). */
void m0__rollback_handed(struct m0__process *p);
/* The window's end (INT64_MAX: none), and its passing (a line). */
int64_t m0__rollback_deadline(const struct m0__process *p);
void m0__rollback_overdue(struct m0__process *p);
/* SIGUSR1: the kept executable's path to start (/proc/self/fd/N), or NULL
 * (said in one line: nothing is kept). */
const char *m0__rollback_path(struct m0__process *p, char *buf, size_t n);

/* What a next generation is passed (host/reload.c's spawn): M0__KEEP and,
 * for a rollback, M0__ROLLBACK and M0__TOPOLOGY_FD, with the descriptors
 * they name. */
typedef struct m0__rollback_pass {
  char keep[96], back[48], topo[48];
  char *env[4];  /* NULL-terminated */
  int fds[3];
  int nfds;
  int exe_copy;  /* closed by m0__rollback_passed */
} m0__rollback_pass;
/* Fills pass (back: a rollback). -1: this generation's executable cannot
 * be copied (said; the reload goes on without a window). */
void m0__rollback_pass_make(struct m0__process *p, m0__rollback_pass *pass, int back);
void m0__rollback_passed(m0__rollback_pass *pass);

#endif
