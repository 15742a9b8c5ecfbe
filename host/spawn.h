/* One spawn for every process the host starts: prefork workers
 * (host/supervisor.c), a next generation and the master's first one
 * (host/reload.c), the doctor a reload asks (host/reload.c) and the
 * instances of actors placed `process` (host/children.c). Always fork then
 * exec (posix_spawn): nng is not fork-safe (GUIDE.md).
 *
 * Design notes
 * - One environment filter: the child gets this process's environment less
 *   m0's private variables (M0__*, which the spec's extra ones replace),
 *   less systemd's activation and notify socket (the listener travels by
 *   number in M0__*, and only the main pid speaks to systemd), less the
 *   host's M0_TLS_* when the spec says so (an actor instance gets the
 *   host's identity in its extra variables, or none).
 * - One descriptor list: exactly the descriptors named there are inherited
 *   (every other one is close-on-exec in the host), each at the number the
 *   list gives it; dup2 onto itself clears close-on-exec.
 * - Signals: with reset_signals no signal is blocked in the child and the
 *   host's handled ones start at their default (an ignored signal stays
 *   ignored across exec otherwise).
 * - Spawn from a thread that lives as long as the host: a worker's
 *   PR_SET_PDEATHSIG (host/serve.c) fires when the THREAD that spawned it
 *   ends, not its process. (Tried: each worker spawned from a thread of its
 *   own, joined after, so that they exec side by side; the workers got that
 *   SIGTERM while starting.)
 */
#ifndef M0_HOST_SPAWN_H
#define M0_HOST_SPAWN_H

#include <stdbool.h>
#include <sys/types.h>

/* fd of an m0__spawn_fd that opens /dev/null (write only) at `at`. */
#define M0__SPAWN_DEVNULL (-2)

typedef struct m0__spawn_fd {
  int fd; /* this process's descriptor (< 0 and not M0__SPAWN_DEVNULL: skipped) */
  int at; /* its number in the child */
} m0__spawn_fd;

typedef struct m0__spawn_spec {
  const char *path;        /* NULL: /proc/self/exe */
  char *const *argv;       /* NULL-terminated */
  char *const *extra;      /* NULL-terminated NAME=value added to the filtered environment ("" skipped); may be NULL */
  const m0__spawn_fd *fds; /* the descriptor list */
  int nfds;
  bool drop_tls;      /* the host's M0_TLS_* do not reach the child */
  bool own_group;     /* a process group of its own */
  bool reset_signals; /* nothing blocked, the host's handled signals at default */
} m0__spawn_spec;

/* Spawns s. 0 and *pid set, or an errno value (nothing spawned).
 * Thread safety: any thread; reads environ (setenv on another thread
 * meanwhile is the caller's race, as with any exec). */
int m0__spawn(const m0__spawn_spec *s, pid_t *pid);

#endif
