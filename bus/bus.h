/* The fleet's bus: frames shared by every host of a fleet through one NATS
 * subject, numbered by one JetStream stream (docs/behaviour.md, A fleet).
 *
 * Every process that publishes opens one (outbound): m0_publish then sends
 * the frame to the subject instead of to the loops. The process that holds
 * the producer's publisher (the coordinator under single and threads, the
 * supervisor under --workers: its publisher reaches every loop of every
 * worker) opens it as the bridge (inbound too): it makes the stream (or finds
 * it), consumes it with one push consumer (no acks) from the new messages on,
 * and fans each message out to the loops as a FRAME whose id is the
 * message's stream sequence above the stream's base (its creation time), so
 * every host writes the same frames in the same order with the same ids.
 *
 * While the link is down, or the bridge does not consume the stream, a
 * frame published here goes at once to this host's loops only, with id 0
 * (written without an id line, kept out of the history), and never to the
 * fleet later: ids stay single and increasing fleet-wide. libnats
 * reconnects by itself; the bridge then consumes again from the sequence
 * after the last it took, or, when the stream is another one (the server
 * lost its store), from the new stream's start, after an m0.gap (bus.c).
 *
 * A fleet message is from a peer, so hostile until checked: one that does
 * not decode, or whose channel or frame is not one, is refused and counted.
 *
 * Counters live on the shared page (m0__bus_line), so any process's
 * /metrics shows the host's. The bridge also writes the URL and subject
 * there, which is how m0pub finds the bus.
 *
 * Thread safety: m0__bus_publish from any thread; open, stop and close from
 * the owner's thread. libnats's callbacks run on its own threads: the
 * cursor is under fan_mu, and the fan-out takes the publisher's lock as
 * every sender does (fan_mu, then the publisher's: never the other way). */
#ifndef M0_BUS_BUS_H
#define M0_BUS_BUS_H

#include <nats/nats.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "m0/m0.h"
#include "transport/page.h"

#define M0__BUS_MAX_MSGS 100000                       /* the stream keeps at most these … */
#define M0__BUS_MAX_AGE_NS (24ll * 3600 * 1000000000ll) /* … and none older than a day */

/* The fleet's ids: a stream created at UTC millisecond T numbers its
 * message of sequence s as T * M0__BUS_IDS_PER_MS + s (bus/bus.c). */
#define M0__BUS_IDS_PER_MS 1024ull
#define M0__BUS_CHECK_MS 2000 /* the bridge looks at the stream and its consumer this often */
#define M0__BUS_CHAN_SLOTS 2048 /* the channels the bridge has fanned out to (at most 1024 are) */

typedef struct m0__bus_chan {
  uint8_t len; /* 0: a free slot */
  char name[64]; /* M0__CHANNEL_MAX (asserted in bus.c) */
} m0__bus_chan;

/* A subscription's closure: which generation of the consumer it is. Kept
 * until close, since libnats may still be inside a callback of a consumer
 * the bridge has just replaced. */
typedef struct m0__bus_sub {
  struct m0__bus *b;
  uint64_t gen;
  uint64_t start; /* the sequence it was made to start at (0: the new messages) */
  bool took;      /* it has delivered one (under fan_mu) */
  struct m0__bus_sub *next;
} m0__bus_sub;

typedef struct m0__bus {
  natsOptions *opts;
  natsConnection *nc;
  jsCtx *js;
  natsSubscription *sub; /* the bridge's consumer: touched by its setup thread, then by close */
  m0__bus_sub *subs;     /* every consumer's closure, newest first (setup thread, close) */
  m0__bus_line *line;    /* the page's counters */
  m0_publisher *pub;     /* the bridge's fan-out publisher */
  bool bridge;
  char url[256], subject[128], stream[128];
  /* The bridge's setup thread (re)makes the stream and the consumer when
   * the link comes up, and checks them every M0__BUS_CHECK_MS: JetStream's
   * requests are not made on libnats's callback threads. */
  pthread_t setup;
  bool setup_started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool want_setup, want_check, quit;
  bool failing;     /* setup thread: the last try failed, and was said */
  int64_t created;  /* setup thread: the stream consumed (its creation time, ns; 0: none yet) */
  /* The cursor, under fan_mu (libnats's delivery threads, the setup thread). */
  pthread_mutex_t fan_mu;
  uint64_t gen;      /* the consumer whose messages count */
  uint64_t base;     /* id = base + stream sequence */
  uint64_t last_seq; /* the last stream sequence fanned out */
  uint64_t last_id;  /* the last fleet id fanned out */
  bool cursor;       /* last_seq is one: a message taken, or a new stream's start */
  m0__bus_chan *chans; /* [M0__BUS_CHAN_SLOTS], the bridge's */
  int nchans;
  atomic_bool started;      /* the bridge consumes (m0__bus_start) */
  atomic_bool stopping;     /* the bridge takes no more fleet messages */
  atomic_bool closing;      /* our own close: a disconnect is not news */
  _Atomic int64_t said_refused_ms, said_gap_ms;
} m0__bus;

/* Opens the bus to url, publishing into subject. bridge: also consume the
 * fleet's frames and fan them out through fanout (the publisher that
 * reaches every loop), and write url and subject on the page. A server that
 * cannot be reached yet is not an error: the link comes up when it can, and
 * frames are local only until then. Returns 0, or a negative m0__err with
 * the reason in err. */
int m0__bus_open(m0__bus *b, const char *url, const char *subject, m0__page *page, m0_publisher *fanout, bool bridge,
                 char *err, size_t errlen);
/* The bridge begins to consume: once its publisher reaches the loops (after
 * the barrier), so no fleet frame is refused for a loop not dialed yet. */
void m0__bus_start(m0__bus *b);
/* The drain: the bridge takes no more fleet messages (its loops stop). */
void m0__bus_stop(m0__bus *b);
/* Closes the link (pending frames flushed within a bound) and libnats. */
void m0__bus_close(m0__bus *b);

/* m0_publish's path when the process has a bus: to the fleet when the link
 * is up, else to this host's loops through pub, unnumbered. */
bool m0__bus_publish(m0__bus *b, m0_publisher *pub, const char *channel, size_t chlen, const void *frame, size_t len);

#endif
