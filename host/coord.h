/* The coordinator's state, shared by its two files: host/coordinator.c
 * (the start, the barrier, serving, the close) and host/coord_drain.c (the
 * waits and the drain). Private to them; host/coordinator.h is the rest of
 * the host's way in. */
#ifndef M0_HOST_COORD_H
#define M0_HOST_COORD_H

#include "actors/loop.h"
#include "actors/pool.h"
#include "host/top.h"

typedef struct m0__proc m0__proc; /* host/coordinator.h, which includes nothing of this */

typedef struct coord {
  /* The process, mailbox, publisher, bus, producer and application actors
   * every top actor hosts (host/top.h), as c->pub or c->top.pub alike. */
  M0__TOP_GROUP;
  m0__proc *p;
  const m0_config *cfg;
  m0__peer up; /* a worker's supervisor */
  m0__loop *loops; /* [here] */
  m0__peer *loop_peers;
  int npool;
  m0__pool_thread *pools; /* [here * npool] */
  bool *loop_done; /* said STOPPED (or died), counted */
  bool stuck; /* someone was named for missing the drain's bound */
  bool recycling; /* a worker leaving at its request count: its siblings serve on */
  int64_t deadline; /* the drain's bound, once a drain began (0 before) */
  bool starting;       /* in the barrier: a thread's end before READY is a failure */
  m0__handle **handles; /* every actor here, for the waits and the close */
  int nhandles;
} coord;

/* A loop whose thread ended without saying STOPPED died: its index, or
 * M0__ENOTFOUND. */
int m0__coord_dead(coord *c);
/* While starting, a thread that ended without STOPPED or FAILED, or NULL. */
m0__handle *m0__coord_ended_starting(coord *c);
/* Waits up to deadline. Returns 1 with a message in m, 2 on a stop, 3 when
 * a loop died (or, while starting, any thread ended), 0 on timeout. */
int m0__coord_wait(coord *c, int64_t deadline, m0__msg *m);
bool m0__coord_all_exited(coord *c);
/* Waits, taking messages and ends as they come, until every thread here
 * has ended or the deadline. */
void m0__coord_wait_exits(coord *c, int64_t deadline);
/* A STOPPED from no actor told to stop: named and counted, never taken. */
void m0__coord_unexpected(coord *c, const m0__msg *m);
/* A worker's loops have drained or been named (its page line's `ended`). */
void m0__coord_ended(coord *c);
/* STOP to every loop and the producer; every STOPPED within the bound;
 * then the pool threads' ends within what is left of it. Returns 0, or
 * M0__ESTUCK when someone did not finish (named on stderr). */
int m0__coord_drain(coord *c, int64_t deadline);

#endif
