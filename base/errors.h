/* The one list of m0's internal error codes. Each is negative; 0 is success.
 * Inside the code every failure is one of these; only the edges (serve,
 * embed) turn them into exit codes, with m0__exit_code. */
#ifndef M0_BASE_ERRORS_H
#define M0_BASE_ERRORS_H

#define M0__ERRORS(X)                                              \
  X(NOMEM, "out of memory")                                        \
  X(BADMSG, "malformed message envelope")                          \
  X(TRANSPORT, "nng transport error")                              \
  X(TIMEDOUT, "timed out")                                         \
  X(CLOSED, "closed")                                              \
  X(BIND, "cannot bind the listener")                              \
  X(RUNDIR, "run directory unusable")                              \
  X(PAGE, "shared page unusable")                                  \
  X(MAKE, "the application's make failed")                         \
  X(TOOBIG, "too big")                                             \
  X(INVALID, "invalid argument")                                   \
  X(DIED, "an actor ended badly")                                  \
  X(STUCK, "not finished within the drain's bound")                \
  X(CONFIG, "the configuration is refused")                        \
  X(SYSTEM, "a system call failed (errno says which)")             \
  X(NOTFOUND, "not found")

enum m0__err {
  M0__OK = 0,
#define M0__ERR_ENUM(name, text) M0__E##name,
  M0__ERR_FIRST_ = -100,
  M0__ERRORS(M0__ERR_ENUM)
#undef M0__ERR_ENUM
};

const char *m0__strerror(int err);
/* The process's exit code for an error, at the edges only (m0_serve,
 * m0_host_start/stop): 0 for 0; 78 (EX_CONFIG) for a refused configuration
 * or make; 1 for the rest. */
int m0__exit_code(int err);

/* When this process is at (or within a few of) its descriptor limit, writes
 * " (out of descriptors: RLIMIT_NOFILE is L and N are open...)" into out and
 * returns true; else out is "" and false. What failed to open says why with
 * it: nng and libuv report a spent limit as little more than "cannot". */
#include <stdbool.h>
#include <stddef.h>
bool m0__fds_spent(char *out, size_t n);

#endif
