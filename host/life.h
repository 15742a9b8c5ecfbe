/* A top process's life once set up (host/process.h made its resources):
 * its waits, which take signals, the stop pipe, children and the next
 * generation's word; its banner once it serves; its teardown. Above
 * host/reload.h, which it drives: a reload acts on the process, the
 * process's life asks for reloads. */
#ifndef M0_HOST_LIFE_H
#define M0_HOST_LIFE_H

#include "host/process.h"

enum {
  M0__WAIT_TIMEOUT = 0,
  M0__WAIT_MSG = 1,
  M0__WAIT_STOP = 2,
  M0__WAIT_EXIT = 3,
  M0__WAIT_CHILD = 4,
  M0__WAIT_RELOAD = 5, /* the top process: SIGHUP or SIGUSR2 (reload_sig); m0__reload_ask */
  M0__WAIT_NEXT = 6,   /* the next generation's pipe: m0__reload_next */
};
/* Waits until deadline (CLOCK_MONOTONIC ms; INT64_MAX: no deadline) for a
 * message on self's mailbox (M0__WAIT_MSG, the message in m, the caller's
 * to free), a stop (M0__WAIT_STOP: SIGTERM, SIGINT, or the embedded stop), a
 * thread's end (M0__WAIT_EXIT: look at the handles), a child's
 * (M0__WAIT_CHILD, the supervisor), a reload asked (M0__WAIT_RELOAD) or
 * the next generation's word (M0__WAIT_NEXT); a worker ignores reloads. self NULL: no mailbox yet. A malformed
 * message is dropped and said. */
int m0__process_wait(m0__process *p, m0__actor *self, int64_t deadline, m0__msg *m);

/* "m0: <app> listening on http://host:port (...)", and READY=1 to systemd
 * when this is the process's top; a worker says only that it serves. */
void m0__process_banner(m0__process *p, int first, int here);
/* After every actor of the process is closed (clean) or given up on. */
void m0__process_teardown(m0__process *p, bool clean);

#endif
