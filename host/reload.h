/* Generations: SIGHUP reloads the configuration and SIGUSR2 upgrades the
 * binary, in every mode, without losing a request.
 *
 * Both start the NEXT GENERATION: a new host process (a child of the top
 * process at first; it outlives it) that inherits the listener, the run
 * directory and the shared page by descriptor, runs the ordered checks and
 * every make itself, and says on a pipe when it serves. Only then does this
 * generation drain (streams get m0.closing, in-flight requests finish, within
 * the one bound) and exit 0; the kernel's accept queue belongs to the
 * listener, which both hold, so no connection waits on a process that is
 * going. SIGHUP runs /proc/self/exe after checking the new configuration here
 * first (a refusal is one line; nothing changes); SIGUSR2 runs the file the
 * binary was started from, as it is on disk now.
 *
 * Design notes
 * - What a reload can change: what the process reads at start that is not
 *   the argv or the environment (both are inherited as they are): the
 *   --topology file. What it cannot: the listener (host, port: inherited),
 *   the run directory, the mode and the number of loops or workers (the page
 *   is shared and sized by them; a change is refused with "needs a
 *   restart").
 * - One reload at a time: from the signal until the next generation serves,
 *   and in the next generation until its predecessor has exited (its bank of
 *   page lines is the one the generation after would use), another SIGHUP
 *   or SIGUSR2 is refused with a line.
 * - Event ids stay single and increasing: the counter is the shared page's
 *   word, which every generation uses.
 * - Each generation's ipc sockets are its own: <run-dir>/g<N> for N > 1
 *   (both generations listen at once), the page and the outside publishers'
 *   view (the page's generation word) are shared. An actor's stable URL
 *   (external, or fixed by the file) is the exception: the next generation
 *   binds it once the old one released it (host/appactors.c).
 * - A SIGTERM during a reload drains both generations within the one bound:
 *   the next generation is sent SIGTERM and waited for.
 * - The pid stays: generation 1, once it has handed over and drained,
 *   becomes the master (host/master.h) instead of exiting, and every later
 *   generation says on the master channel when it serves.
 * - "Still draining" is the predecessor's end of the hand-over pipe still
 *   open (a write end polls POLLERR once no reader is left): it closes at
 *   its exit or its exec as the master, whoever its parent is then.
 * - A next generation that has not served within --reload-timeout-ms is
 *   stopped (SIGTERM, then SIGKILL past the drain's bound) and named; this
 *   one serves on and a later SIGHUP may start another.
 * - With --reload-keep-ms the serving generation keeps its predecessor's
 *   binary and configuration, and SIGUSR1 starts a next generation from
 *   them: a reload like the others (host/rollback.h).
 */
#ifndef M0_HOST_RELOAD_H
#define M0_HOST_RELOAD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config/options.h"
#include "host/reload_state.h"

struct m0__process;


/* At m0_serve's start, before anything: the binary's path as it is now (a
 * file renamed over it later is what SIGUSR2 runs; a next generation is
 * told the first one's in M0__EXE, since its own /proc/self/exe may be a
 * file renamed over since: "(deleted)"), the argv, the app. */
void m0__reload_remember(const m0_app *app, int argc, char **argv);
/* The top process of a next generation takes what M0__UPGRADE passes into
 * p (listener, page, run directory, generation). 0: none passed; 1: taken;
 * M0__EINVALID: malformed (said). */
int m0__reload_inherit(struct m0__process *p);
/* A SIGHUP, SIGUSR2 or SIGUSR1 (M0__SIG_HUP/_USR2/_USR1: a rollback)
 * reached the top process: starts the next generation, or says in one line
 * why not (not serving: starting or draining; a reload in progress; a
 * configuration refused; nothing kept). */
void m0__reload_ask(struct m0__process *p, int sig, bool serving);
/* next_fd is readable: true when the next generation serves (the caller
 * drains and exits 0: handed_over is set); false when it ended before it
 * served (said, with its exit; this generation serves on). */
bool m0__reload_next(struct m0__process *p);
/* This generation serves (the banner): tells its predecessor, and the page. */
void m0__reload_serving(struct m0__process *p);
/* The drain begins: a next generation still starting is sent SIGTERM. */
void m0__reload_stop_next(struct m0__process *p);
/* The drain ends: that generation's exit is waited for until deadline
 * (CLOCK_MONOTONIC ms), then it is killed. */
void m0__reload_wait_next(struct m0__process *p, int64_t deadline);
/* The bound on a next generation's start (--reload-timeout-ms): when it
 * passes (CLOCK_MONOTONIC ms; INT64_MAX: no next generation starting),
 * m0__reload_overdue sends it SIGTERM, and past the drain's bound SIGKILL,
 * names it on stderr with its pid, and this generation serves on. */
int64_t m0__reload_deadline(const struct m0__process *p);
void m0__reload_overdue(struct m0__process *p);
/* To systemd (READY=1, RELOADING=1...): generation 1 says it itself, a
 * later one on the master channel (host/master.h). */
void m0__reload_notify(struct m0__process *p, const char *state);
/* After the hand-over, a signal that reached this process (the pid a
 * supervisor knows) is meant for the serving generation: sent on. */
void m0__reload_forward(struct m0__process *p, int sig);
/* --pid-file: written atomically (a temporary file renamed) by generation 1;
 * removed at the top process's exit (this one's, or the master's). 0, or
 * M0__ESYSTEM (said). */
int m0__reload_pidfile_write(const char *path);
void m0__reload_pidfile_remove(const char *path);
/* The end of the top process: generation 1 that handed over becomes the
 * master (an exec of itself: host/master.h), keeping its pid; else the
 * --pid-file is removed. Returns only when it is not (or cannot be) a
 * master. */
void m0__reload_exit(int code);
/* Before the teardown puts the default handlers back: true for generation
 * 1 that will be the master, which blocks the signals from here and keeps
 * its handlers (a thread that has not blocked them writes the pipe, read
 * once more before the exec): none may end it now. */
bool m0__reload_hold(void);
/* PID 1: generation 1 started as a child of the master (host/master.h),
 * with the master channel's end chan (M0__CHAN). Its pid, or M0__ESYSTEM
 * (errno). */
pid_t m0__reload_spawn_first(int chan);
/* The supervisor's waitpid(-1) took pid: true when it was the next
 * generation (its status is kept for m0__reload_next). */
bool m0__reload_reaped(struct m0__process *p, pid_t pid, int status);

/* Ends the process now, without atexit handlers or waiting for threads: for
 * a drain that missed its bound while a thread is still inside the
 * application. Flushes stdio first (and, in a coverage build, gcov's
 * counters, which only a normal exit writes). */
_Noreturn void m0__exit_now(int code);

#endif
