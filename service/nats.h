/* An application actor placed "nats" (docs/topology.md): its instances are
 * wherever in a fleet a program subscribes to the actor's NATS subject in
 * its queue group (m0_actor_run with nats://HOST:PORT/SUBJECT), and the
 * host reaches them all through one NATS connection, not one link per
 * instance: N hosts and M instances make N + M connections, not N x M.
 *
 * Design notes
 * - To its loops the actor is `lanes` thread-like slots (the topology's
 *   key, default 2) whose
 *   inbox is this forwarder's: a lane is not an instance but one batch in
 *   flight per loop, so a loop has at most that many REQUESTs out at once,
 *   whichever instances take them. The loops' batching, deadlines (504),
 *   queue bound (503) and 502s are theirs, unchanged (actors/asks.c).
 * - The forwarder's thread publishes each REQUEST's wire payload (the
 *   batch, no envelope: its from and to are this host's addresses) as a
 *   NATS request to the subject, its reply subject the connection's own
 *   inbox prefix and a token. NATS's queue group gives it to one instance.
 *   One subscription (<prefix>.*) takes every answer, on libnats's thread:
 *   the token finds the entry (the loop that asked, the lane, the REQUEST
 *   kept for its ids), and the answer goes to that loop as a REPLY from
 *   the lane. An answer whose token is not in flight (late, evicted, made
 *   up) is dropped and counted (unknown), and so is a REQUEST's answer
 *   whose token is not the latest sent for its (loop, lane): its batch
 *   timed out and a newer one is out on the lane, which this answer would
 *   free under it (actors/asks.c frees a lane at any REPLY from it).
 * - What comes back is from a peer: a reply batch that does not decode
 *   whole answers every request of its REQUEST 502 (counted bad_reply);
 *   NATS's "no responders" status (no instance subscribed) answers them
 *   503 at once (counted no_instance): as when no instance is connected,
 *   the actor is unavailable, which a retry may find otherwise, not a bad
 *   gateway answer.
 * - The lanes are live while the connection is up. Its loss makes them
 *   leave (service/left.c): what was in flight answers 502 at once, new
 *   requests 503; libnats reconnects (bus/natsopt.h) and they are live
 *   again.
 * - A MESSAGE (m0_send, m0_call by name) goes the same way with the header
 *   M0-Kind: message; a call's RETURN comes back on its token, a send is
 *   published with no reply subject.
 * - The pending table is a ring indexed by the token, of M0__NATS_PENDING
 *   entries or, past that, the power of two at least 2 x loops x lanes: a
 *   loop has at most `lanes` REQUESTs out, so an entry reused while its
 *   answer is still awaited only happens to an answer long past its
 *   deadline.
 * - Memory against a flooding or a silent peer: libnats holds at most
 *   65536 answers / 64 MiB for the answers' callback (NATS_PENDING_*,
 *   libnats's own defaults, set explicitly: an unbounded queue grows with
 *   whatever a peer sends while the callback lags). Past either libnats
 *   drops them (a slow consumer): each dropped answer is counted as the
 *   actor's refusal (reason reply), and its batch answers 504 at its
 *   deadline. An instance (natsrun.c) holds as much of its requests.
 * - Closing: once `closing` is set no callback touches s or an inbox (the
 *   host frees them after m0__nats_close, even when libnats has not
 *   finished closing within NATS_CLOSE_MS and n is left alive).
 *
 * Thread safety: open and close from the host's thread; the forwarder and
 * libnats's callbacks touch the table under mu. */
#ifndef M0_SERVICE_NATS_H
#define M0_SERVICE_NATS_H

#include <nats/nats.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "runtime/inbox.h"
#include "service/service.h"

#define M0__NATS_LANES_MAX 64 /* M0__SLOTS */
#define M0__NATS_PENDING 4096 /* a power of two: the least the ring is */

typedef struct m0__nats_pending {
  uint64_t token; /* 0: free */
  uint32_t to;    /* the loop (or caller) that asked */
  uint16_t kind;  /* M0__K_REQUEST or M0__K_MESSAGE */
  int lane;
  nng_msg *req;   /* the REQUEST (its ids, for a 502 or 503 of each) */
} m0__nats_pending;

typedef struct m0__nats_latest {
  uint64_t key;   /* (loop << 8 | lane) + 1; 0: free */
  uint64_t token; /* the latest REQUEST sent from that loop on that lane */
} m0__nats_latest;

typedef struct m0__nats {
  m0__service *s;
  char url[256], shown[256], subject[128], prefix[96]; /* shown: url, its password "***" (stderr) */
  natsOptions *opts;
  natsConnection *nc;
  natsSubscription *sub;
  m0__inbox in; /* the lanes' inbox: REQUEST and MESSAGE from loops and callers */
  pthread_t fwd;
  bool fwd_started, in_made;
  atomic_bool quit, closing, up;
  pthread_mutex_t mu;
  pthread_cond_t over;          /* libnats's last callbacks (m0__nats_close waits) */
  bool sub_over, conn_over;     /* under mu */
  uint64_t next; /* the last token given (under mu) */
  size_t npend;           /* a power of two, >= M0__NATS_PENDING and 2 x loops x lanes */
  m0__nats_pending *pend; /* [npend] */
  m0__nats_latest *latest; /* [npend], open addressing (under mu) */
  int64_t dropped;        /* libnats's slow-consumer drops counted so far (its error callback only) */
} m0__nats;

/* Sets s up as a nats actor's lanes and connects to url (a server not up
 * yet is retried in the background: the lanes are live once it is). 0, or
 * a negative m0__err with the reason on stderr; *out is set either way,
 * for m0__nats_close. */
int m0__nats_open(m0__nats **out, m0__service *s, const char *url, const char *subject, int lanes);
/* Stops the forwarder, closes the connection, frees what is in flight and
 * n (NULL: nothing). */
void m0__nats_close(m0__nats *n);

/* Whether url is an instance's NATS URL (nats:// or tls://). */
bool m0__nats_url(const char *url);
/* m0_actor_run for a nats URL, nats://HOST:PORT/SUBJECT (service/natsrun.c):
 * the same returns (78: a URL or subject that is none, make refused). */
int m0__nats_run(const m0_actor_kind *kind, const char *url, int instance);

#endif
