/* The publisher: the producer's only way out, also given to handlers in
 * ctx.publisher. Ids come from the shared page's counter; a frame travels to
 * every loop as a FRAME message on the bus (push/pull: never dropped
 * silently; a loop that cannot take it is a refusal the caller sees). */
#ifndef M0_ACTORS_PUBLISHER_H
#define M0_ACTORS_PUBLISHER_H

#include <pthread.h>
#include <stdatomic.h>

#include "actors/actor.h"
#include "http/response.h"
#include "m0/m0.h"
#include "transport/page.h"
#include "transport/topology.h"

#define M0__FRAME_MAX (64u * 1024u)

struct m0_publisher {
  pthread_mutex_t mu; /* sends come from any thread; one sender actor */
  m0__actor self;     /* the sending actor's id and sequence (no mailbox) */
  const m0__topology *topo; /* where each loop's mailbox is */
  m0__peer *loops;          /* one per loop; open once connected */
  int nloops;
  m0__page *page;
  atomic_ulong refused;
  atomic_ulong published;
};

bool m0__frame_ok(const void *frame, size_t len);

/* FRAME payload: u64 id, u16 channel length, channel, frame bytes. */
int m0__frame_decode(const uint8_t *p, size_t n, uint64_t *id, const char **channel, size_t *chlen,
                     const uint8_t **frame, size_t *flen);

#endif
