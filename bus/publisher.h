/* The publisher: the producer's only way out, also given to handlers in
 * ctx.publisher. Ids come from the shared page's counter; a frame travels to
 * every loop as a FRAME message on the bus (push/pull: never dropped
 * silently; a loop that cannot take it is a refusal the caller sees). */
#ifndef M0_BUS_PUBLISHER_H
#define M0_BUS_PUBLISHER_H

#include <pthread.h>
#include <stdatomic.h>

#include "runtime/actor.h"
#include "http/response.h"
#include "m0/m0.h"
#include "transport/page.h"
#include "transport/topology.h"


struct m0_publisher {
  pthread_mutex_t mu; /* sends come from any thread; one sender actor */
  m0__actor self;     /* the sending actor's id and sequence (no mailbox) */
  const m0__topology *topo; /* where each loop's mailbox is */
  m0__peer *loops;          /* one per loop; open once connected */
  int nloops;
  m0__page *page;
  /* An instance's publisher outside the host (service/remote.c): frames go
   * to the host over the instance's link as PUBLISH, and the host numbers
   * them; no page, no loops. */
  bool linked;
  nng_socket link;
  atomic_ulong refused;
  atomic_ulong published;
  /* The fleet's bus (bus/bus.h), when the host has one: m0_publish
   * sends there instead of to the loops. Set once, before any publish. */
  struct m0__bus *bus;
};

/* Opens the publisher: the producer's actor and a peer per loop, none dialed yet. */
int m0__publisher_open(m0_publisher *pub, const m0__topology *t, m0__page *page, m0__tracer *trace,
                       uint32_t sender);
/* Dials loop i (again: a respawned worker's loop is a new listener), or
 * hangs up on it (its worker died). Dialed only once that loop's mailbox is
 * open (runtime/actor.c, m0__peer_open); until then a frame for it is a
 * refusal, as for a loop that cannot take it. */
int m0__publisher_connect(m0_publisher *pub, int i);
void m0__publisher_disconnect(m0_publisher *pub, int i);
void m0__publisher_close(m0_publisher *pub);


/* A checked frame to every loop this publisher reaches, numbered id (0: an
 * unnumbered local frame, bus/bus.h). m0_publish's path without a bus,
 * and the bus's for a fleet frame or a local-only one. false (counted) when
 * a loop was not reached or refused it. Thread safety: any thread. */
bool m0__publisher_fanout(m0_publisher *pub, const char *channel, size_t chlen, uint64_t id, const void *frame,
                          size_t len);

/* An instance's publisher over its link to the host (pub zeroed first). */
void m0__publisher_link(m0_publisher *pub, nng_socket link, uint32_t sender);
/* m0_publisher_attach without the fleet's bus: the serving generation's
 * loops, dialed at their outside mailboxes (m0trace's way in). Freed by
 * m0_publisher_detach. */
m0_publisher *m0__publisher_attach_loops(const char *run_dir, char *err, size_t errlen);
/* The serving generation's coordinator, when its mailbox is in the run
 * directory (under prefork: the supervisor, which has no loop): p dialed
 * to it. false when it has none there. */
bool m0__publisher_coordinator(m0_publisher *pub, const char *run_dir, m0__peer *p);
/* Sends one message of `kind` to every attached loop; how many took it. */
int m0__publisher_tell(m0_publisher *pub, int kind, const void *payload, size_t len);

/* FRAME payload: u64 id, u16 channel length (little-endian), channel, frame
 * bytes. encode appends it to a message being built: 0 or M0__ENOMEM. */
int m0__frame_encode(nng_msg *m, uint64_t id, const char *channel, size_t chlen, const void *frame, size_t flen);
int m0__frame_decode(const uint8_t *p, size_t n, uint64_t *id, const char **channel, size_t *chlen,
                     const uint8_t **frame, size_t *flen);

#endif
