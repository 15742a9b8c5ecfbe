/* The top actor's skeleton: what every process's top actor hosts besides
 * its own actors, written once for the coordinator (host/coordinator.c:
 * single, threads, a prefork worker, the embedded host) and the supervisor
 * (host/supervisor.c: prefork's top). Its mailbox; the publisher and the
 * fleet's bus; the producer; the application's actors (host/appactors.h);
 * the wait, with a reload's turns taken; the drain's first steps and the
 * serving's end around the drain (a next generation stopped with it and
 * waited for); the close in its order; the teardown, bounded.
 *
 * Design notes
 * - The close's order (runtime/handle.h): every peer before any mailbox; the
 *   bus before the publisher its callbacks fan out through; the supervisor's
 *   relays (it has no thread instance) before the publisher their PUBLISH
 *   frames go through; a process's thread instances after the handles are
 *   joined (their inboxes are freed with them).
 * - The teardown is bounded (M0__TOP_TEARDOWN_MS): nng 1.5.2's close can
 *   wait for ever on its reaper (nanomsg/nng#1543, fixed in 1.8: a task
 *   prepared and never run), and a top process that said it drained then
 *   never exited is worse than one that exits without freeing. Past the
 *   bound a watchdog thread says so, removes the run directory and exits
 *   with the drain's code. An embedded host is never exited: it has none.
 * - M0__TOP_GROUP names the same fields two ways (Linux's struct_group): a
 *   top actor's struct holds them as its own members and as one m0__top,
 *   which the functions here take.
 */
#ifndef M0_HOST_TOP_H
#define M0_HOST_TOP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "bus/bus.h"
#include "actors/producer.h"
#include "host/appactors.h"
#include "host/process.h"

/* How long the close and the teardown may take once the drain is over:
 * five times the longest nng teardown seen on a loaded machine (0.9 s),
 * so that a slow one (ThreadSanitizer, CPU hogs beside it) is never cut
 * short: the bound is there so that a stuck one ends. */
#define M0__TOP_TEARDOWN_MS 5000

typedef struct m0__top_guard {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool armed, done, tearing; /* tearing: the process's own teardown began */
  int64_t until;
  int code;
} m0__top_guard;

#define M0__TOP_FIELDS                                                                        \
  m0__process *proc;                                                                         \
  long drain_ms;                                                                             \
  m0__actor self;                                                                            \
  m0_publisher pub;                                                                          \
  bool pub_open;                                                                             \
  m0__bus bus; /* the fleet's (bus/bus.h), when the topology names one */                 \
  bool bus_open;                                                                             \
  bool has_producer;                                                                         \
  bool prod_done; /* said STOPPED (or cannot be told), counted */                            \
  m0__producer_run prod;                                                                     \
  m0__peer prod_peer;                                                                        \
  m0__app_actors aa; /* the application's actors here (host/appactors.h) */                  \
  bool actors_stopped; /* told to stop, once */                                              \
  bool serving;        /* between the banner and the drain: a reload may start (host/reload.h) */ \
  m0__top_guard guard;

typedef struct m0__top {
  M0__TOP_FIELDS
} m0__top;

/* In a top actor's struct: the fields, and `top` over them. */
#define M0__TOP_GROUP        \
  union {                    \
    m0__top top;             \
    struct {                 \
      M0__TOP_FIELDS         \
    };                       \
  }

/* The top's mailbox at the topology's id. 0 or M0__ETRANSPORT (said). */
int m0__top_open_self(m0__top *t, uint32_t id, const char *who);
/* The publisher (frames sent as `sender`) and, when the configuration names
 * one, the bus; `bridge`: this process holds the producer and consumes the
 * fleet's stream (bus/bus.h). 0 or a negative m0__err (said). */
int m0__top_open_publisher(m0__top *t, uint32_t sender, bool bridge);
/* The producer's handle set up (not opened) when the application has one
 * and wants it here; false when not. */
bool m0__top_producer(m0__top *t, const m0_producer *def, const m0_ctx *base);

/* Waits until deadline (host/process.h, m0__process_wait) and takes a
 * reload's turns: SIGHUP/SIGUSR2 asks for the next generation
 * (M0__WAIT_RELOAD returned, done); the next generation serving is this
 * one's stop while it serves (M0__WAIT_STOP), else M0__WAIT_NEXT, done. */
int m0__top_wait(m0__top *t, int64_t deadline, m0__msg *m);

/* The drain's first steps: no spawned instance restarted, the bus
 * stopped, STOP to the producer first (it lets the next generation's
 * number: actors/producer.c). True when the producer was told and its
 * STOPPED is to be waited for. */
bool m0__top_drain_begin(m0__top *t);
/* The application's actors told to stop, once (after the loops drained:
 * no request is inside one); spawned ones waited for until deadline. */
void m0__top_stop_actors(m0__top *t, int64_t deadline);
/* Waits, taking messages, until every thread instance has ended or until. */
void m0__top_wait_actors(m0__top *t, int64_t until);
/* Names each thread instance still running; returns how many. */
int m0__top_name_actors(m0__top *t);
/* The producer named when it is not done (prod_done: its STOPPED came, or
 * its thread ended); true if so. */
bool m0__top_name_producer(m0__top *t);

/* The serving's end: "m0: <what> (bound B ms)", STOPPING=1 to systemd
 * (the top of a service that was not handed over), a next generation
 * stopped too, drain(arg, bound), the next generation waited for within
 * the bound, and "m0: drained, exit 0" at the top. Returns drain's. */
int m0__top_serve_end(m0__top *t, const char *what, int (*drain)(void *arg, int64_t bound), void *arg);

/* The close and the teardown begin: bounded from now (not embedded). Armed
 * already (at the drain's end, host/coord_drain.c), only rc is taken: the
 * bound runs from the first arming. */
void m0__top_guard_arm(m0__top *t, int rc);
/* Closes what the top hosts when every handle in hs has ended (the
 * caller's own peers closed first); otherwise only joins those that ended.
 * Returns whether all had ended. */
bool m0__top_close(m0__top *t, m0__handle **hs, int n);
/* The process's teardown (host/process.h), then the guard let go. Not clean
 * and not embedded: exits at once with rc (or M0__ESTUCK). */
void m0__top_end(m0__top *t, bool clean, int rc);

#endif
