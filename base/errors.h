/* The one list of m0's internal error codes. Each is negative; 0 is success. */
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
  X(INVALID, "invalid argument")

enum m0__err {
  M0__OK = 0,
#define M0__ERR_ENUM(name, text) M0__E##name,
  M0__ERR_FIRST_ = -100,
  M0__ERRORS(M0__ERR_ENUM)
#undef M0__ERR_ENUM
};

const char *m0__strerror(int err);

#endif
