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

/* Starts the producer thread; it reports READY or FAILED to the coordinator. */
int m0__producer_start(m0__producer_run *r);
void m0__producer_hang_up(m0__producer_run *r);
void m0__producer_release(m0__producer_run *r);

#endif
