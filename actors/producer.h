/* The producer actor: a thread of its own that builds the application's
 * producer state, waits at the barrier, then steps on a fixed-rate schedule
 * (a late step moves the schedule to now; missed steps are not replayed). It
 * sleeps by waiting on its mailbox at most 50 ms at a time, so a STOP ends a
 * long period at once. A failing step stops the producer alone. Across a
 * reload one producer at a time numbers frames: a generation's waits at GO
 * for its predecessor's to let the ids go (actors/producer.c). */
#ifndef M0_ACTORS_PRODUCER_H
#define M0_ACTORS_PRODUCER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "runtime/handle.h"
#include "bus/publisher.h"
#include "transport/topology.h"

/* The producer's whole set-up, filled by its coordinator. */
typedef struct m0__producer_config {
  const m0_producer *def;
  m0_ctx ctx;
  m0_publisher *pub;
  const char *url; /* its mailbox */
  uint32_t coord_id;
  const char *coord_url;
  uint64_t generation; /* its process's (host/reload.h): the hold on the ids it takes (actors/producer.c) */
  long lease_ms;       /* how long it waits for its predecessor's producer to let the ids go */
} m0__producer_config;

typedef struct m0__producer_run {
  m0__handle h; /* first: driven through it (runtime/handle.h); h.in_app: inside its step */
  m0__producer_config cfg; /* a copy of its set-up (m0__producer_init) */
  m0__actor self;
  m0__peer coord;
} m0__producer_run;

/* Sets the producer up from cfg (copied) and ties it to exits; opening and
 * starting it are m0__handle_open and m0__handle_start. */
void m0__producer_init(m0__producer_run *r, const m0__producer_config *cfg, m0__exits *exits);

/* The producer kind (runtime/handle.h): open listens at its mailbox, run is
 * its thread (make, READY or FAILED, wait for GO, steps until STOP, STOPPED),
 * hang_up closes its peer to the coordinator, release its mailbox. */
extern const m0__actor_kind m0__producer_kind;

#endif
