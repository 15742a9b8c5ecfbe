/* The producer actor: a thread of its own that builds the application's
 * producer state, waits at the barrier, then steps on a fixed-rate schedule
 * (a late step moves the schedule to now; missed steps are not replayed). It
 * sleeps by waiting on its mailbox at most 50 ms at a time, so a STOP ends a
 * long period at once. A failing step stops the producer alone. */
#ifndef M0_ACTORS_PRODUCER_H
#define M0_ACTORS_PRODUCER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "actors/publisher.h"
#include "transport/topology.h"

typedef struct m0__producer_run {
  const m0_producer *def;
  m0_ctx ctx;
  m0_publisher *pub;
  const char *url; /* its mailbox */
  uint32_t coord_id;
  const char *coord_url;
  pthread_t thread;
  bool started;
  atomic_bool exited;
  atomic_bool failed; /* its make refused: no STOPPED will ever come */
  atomic_bool in_step; /* inside the application's step, for the drain's naming */
  m0__actor self;
  m0__peer coord;
} m0__producer_run;

/* Opens the publisher: the producer's actor and a peer per loop, none dialed yet. */
int m0__publisher_open(m0_publisher *pub, const m0__topology *t, m0__page *page, m0__tracer *trace,
                       uint32_t sender);
/* Dials loop i (again: a respawned worker's loop is a new listener), or
 * hangs up on it (its worker died). Dialed only once that loop's mailbox is
 * open (actors/actor.c, m0__peer_open); until then a frame for it is a
 * refusal, as for a loop that cannot take it. */
int m0__publisher_connect(m0_publisher *pub, int i);
void m0__publisher_disconnect(m0_publisher *pub, int i);
void m0__publisher_close(m0_publisher *pub);
/* Starts the producer thread; it reports READY or FAILED to the coordinator. */
int m0__producer_start(m0__producer_run *r);
void m0__producer_hang_up(m0__producer_run *r);
void m0__producer_release(m0__producer_run *r);

#endif
