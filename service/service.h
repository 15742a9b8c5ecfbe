/* An application actor in this process: its instances, however they are
 * placed, as up to M0__SLOTS slots the loops choose between, and — for
 * instances in other processes (spawned, or external) — the one socket they
 * dial and the thread that takes their replies.
 *
 * Design notes
 * - A slot is an instance: a thread of this process (its direct inbox) or a
 *   connection to the service's pair1 socket (its nng pipe). Loops read the
 *   slots without a lock: `live`, `gen` and `inflight` are atomics. A slot
 *   whose instance leaves is marked not live and its generation moves on,
 *   and every loop of the process is handed an empty REPLY from it: the loop
 *   then sees which of its requests were with it (each gets 502 at once) and
 *   never sends to it again. A loop's tick looks too, should that be lost.
 * - Load is shared by least in flight: a loop adds a request to the batch of
 *   the live slot with the fewest requests in flight across every loop.
 * - pair1 in polyamorous mode drops a message when its pipe's queue (2
 *   deep, in front of the socket's kernel buffer) is full. Each loop has at
 *   most one REQUEST out to an instance, so with one or two loops nothing
 *   can be dropped; with more, and an instance that stops reading, a REQUEST
 *   can be (nng counts it, tx_drop) and its requests answer 504 at their
 *   deadline. An instance answers each REQUEST with one REPLY
 *   (docs/wire.md).
 * - Replies from connected instances are taken by one thread per service
 *   (nng's blocking receive, which its close ends), stamped with the slot
 *   they came from (whatever the sender wrote as `from`) and handed to the
 *   inbox of the loop named by the envelope's `to` — the REQUEST's `from`
 *   the instance was told to answer to — or of the thread instance that
 *   asked (m0_ask), when `to` names one.
 * - Over plain tcp an instance proves it holds the actor's secret before it
 *   takes a slot (runtime/proof.h): its pipe waits in `proving`, without a
 *   slot, while the gate thread sends it a challenge (a HELLO); the reply
 *   thread checks its answer and gives it a slot. A wrong answer, none
 *   within M0__PROOF_MS, or a REPLY or PUBLISH before it closes the pipe,
 *   refused (proof). Until then it is sent nothing else and nothing it
 *   sends reaches a loop or a stream.
 * - A dial past the free slots (or the proofs in progress) is closed at
 *   once, refused (instances); refused dials are said once per actor and
 *   reason (runtime/admit.h), not once per address.
 */
#ifndef M0_SERVICE_SERVICE_H
#define M0_SERVICE_SERVICE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "runtime/actor.h"
#include "runtime/inbox.h"
#include "runtime/proof.h"
#include "m0/m0.h"
#include "base/clock.h"
#include "transport/page.h"

#define M0__SLOTS 64

typedef struct m0__slot {
  atomic_int live;      /* an instance is there and may be sent requests */
  atomic_uint gen;      /* moves on each time the slot is given up */
  atomic_int inflight;  /* requests batched or sent to it and not answered, from every loop */
  atomic_uint pipe;     /* connected instances: its nng pipe's id (0: none); written under mu, read by loops */
  m0__inbox *inbox;     /* thread instances */
  char where[48];       /* a worker's door: where the relayed instance dialed from (under mu; "" unknown) */
  int messages;         /* connected: MESSAGEs sent and not answered (under mu; m0__service_window_take) */
  int64_t message_until; /* past it the last one's answer is not waited for (under mu) */
} m0__slot;

/* What /metrics says of one actor (all counters since start): its line on
 * the shared page (transport/page.h), where every process of the host adds. */
typedef m0__actor_line m0__service_stats;

typedef struct m0__service {
  int index;          /* in the process's list: M0__APP_INDEX's actor */
  char name[49];
  bool connected;     /* instances dial in (process, external); else threads */
  bool spawned;       /* placed process: the host spawns its instances (else external); the observer */
  int queue;          /* requests in flight per instance before 503 */
  char url[M0__URL_MAX];
  m0__slot slots[M0__SLOTS];
  int nslots;         /* threads: how many; connected: M0__SLOTS */
  atomic_int used;    /* slots below this have ever held an instance: what a pick walks */
  pthread_mutex_t mu; /* slot assignment on pipe events */
  pthread_cond_t left; /* an instance's pipe went (for m0__service_await_instances) */
  pthread_cond_t room; /* a MESSAGE answered, or its instance gone (m0__service_window_take) */
  m0__actor self;     /* connected: the pair1 socket, as a mailbox (traced) */
  pthread_t rx;
  bool rx_started;
  m0__inbox **loop_inbox; /* [nloops]: where replies for loop i go */
  int nloops;
  int loop_base;          /* the first loop's index (a worker's loop is its worker's) */
  m0__service_stats *st;      /* the page's line for this actor, or own until a page is given (host/appactors.c) */
  int row;                    /* that line's index, its actor's row (transport/page.h, m0__page_rows), or -1 */
  m0__service_stats own;
  _Atomic uint64_t own_restarts;
  _Atomic uint64_t *restarts; /* its spawned instances started again (host/children.c): the shared page's
                               * word for this actor (the whole host's, under prefork the supervisor's
                               * count), or st.restarts */
  _Atomic uint64_t *pids; /* [M0__PAGE_SLOTS]: the page's words for its instances' pids (the observer;
                           * not a door's: its instances are the supervisor's), or NULL */
  m0_publisher *pub;      /* where instances' PUBLISH frames go: the process's publisher */
  struct m0__callers *callers; /* the host's (service/callers.h): where a RETURN or an ask's REPLY goes */
  const struct m0__service_hooks *hooks; /* what it asks of its host (below); NULL: nothing */
  void *hooks_arg;
  /* Under --workers (service/relay.h): in the supervisor, the relay its
   * REPLYs go to (it has no loops); in a worker, door is set: its
   * connections are the relay's legs, whose instances it never stops.
   * m0__relay_init sets the relay and its two entries the service calls
   * (m0__relay_wake, m0__relay_reply), so the service includes no relay. */
  struct m0__relay *relay;
  void (*relay_wake)(struct m0__relay *r);
  int (*relay_reply)(struct m0__relay *r, uint32_t to, nng_msg *m);
  bool door;
  unsigned unmet[M0__SLOTS]; /* a door: legs connected, not yet introduced (their pipes; under mu) */
  /* Instances that must prove themselves (set before m0__service_listen;
   * NULL: none must, as over ipc, tls+tcp or a trusted network). */
  const m0__secret *secret;
  struct m0__proving {
    unsigned pipe;     /* 0: a free entry */
    bool added, sent;  /* nng added the pipe (it may be sent to); its challenge went */
    int64_t deadline;  /* monotonic ms: closed if not proved by then */
    size_t n;
    uint8_t challenge[M0__CHALLENGE_MAX];
  } proving[M0__SLOTS]; /* under mu */
  pthread_cond_t gate_cv; /* a pipe to challenge, or the close */
  pthread_t gate;
  bool gate_started, gate_stop;
  /* Across a reload (m0__service_listen_later, m0__service_hand_over): an
   * ask finding no live instance waits for one until this (CLOCK_MONOTONIC
   * ms; 0: never), while the instances move from the old generation. */
  _Atomic int64_t expect_until;
  bool stable;            /* its URL is the next generation's too (set before it listens): a reload moves its instances */
  bool leaving;           /* handed over: a pipe dialing in is closed (it redials the next generation; under mu) */
  pthread_t binder;       /* listen_later: binds the URL once the old generation released it */
  bool binder_started;
  _Atomic bool binder_stop;
} m0__service;

/* The wait of an ask for an instance of an actor whose instances are
 * moving to this generation (after it binds their URL), and the bound on
 * binding it (the old generation releases it at the end of its drain). */
#define M0__REJOIN_MS 1000
#define M0__REBIND_MS 60000

/* The relay's introduction of a leg to a worker's door (a READY, sealed, from
 * the supervisor): which of the supervisor's slots its instance holds, so a
 * worker's slot k is the supervisor's slot k (one name, echo.k, everywhere),
 * and where the instance dialed from. A leg is no slot until introduced.
 *   u8 slot, u8 n, n bytes of where (printable) */
#define M0__INTRO_MAX (2 + 47)
size_t m0__intro_write(uint8_t out[M0__INTRO_MAX], int slot, const char *where);
/* Where the instance on pipe pipe_id dialed from: its remote IP, or host
 * (ipc, inproc: this machine). */
void m0__pipe_where(unsigned pipe_id, const char *host, char *out, size_t n);

/* Sets up the service (no socket yet). loop_inbox is kept, not copied. */
void m0__service_init(m0__service *s, int index, const char *name, int queue, m0__inbox **loop_inbox, int nloops,
                      int loop_base);
/* Connected instances: listens at url and starts the reply thread. 0 or
 * M0__ETRANSPORT / M0__ENOMEM (said on stderr). */
int m0__service_listen(m0__service *s, const char *url, m0__tracer *trace, m0_publisher *pub);
/* A next generation's listen at a URL its predecessor still holds (the one
 * stable URL per actor: docs/actors.md): the socket opens now, and a thread
 * binds url as soon as it is free — for ipc, once the path is gone (nng
 * unlinks it at the old listener's close, so binding over a path still
 * there could be unlinked under the new listener), or stale for 500 ms; for
 * tcp, once the port binds — trying every 10 ms for M0__REBIND_MS, then
 * said on stderr. Asks wait for an instance (expect_until) until it has
 * bound and M0__REJOIN_MS after. 0 or M0__ETRANSPORT / M0__ENOMEM. */
int m0__service_listen_later(m0__service *s, const char *url, m0__tracer *trace, m0_publisher *pub);
/* Every connected instance is sent STOP (it finishes, replies, leaves);
 * none from a worker's door (the supervisor stops them). With reload, the
 * STOP says the host reloads (payload: one byte, 1: docs/wire.md) and a pipe
 * that dials in from now on is closed, to redial the next generation. */
void m0__service_stop_instances(m0__service *s, bool reload);
/* The URL released early (the gate stopped, the socket closed), for the
 * next generation to bind; m0__service_close still joins the rest. */
void m0__service_release(m0__service *s);
/* Waits until every connected instance has left, or deadline (ms,
 * m0__now_ms's clock): a STOP is queued on a socket whose close would
 * discard it, so the drain gives it the time to go. Those still connected
 * at the deadline are said on stderr. */
void m0__service_await_instances(m0__service *s, int64_t deadline);
/* Closes the socket and joins the reply thread. */
void m0__service_close(m0__service *s);
/* Live instances now. */
int m0__service_live(m0__service *s);
/* The slot a loop sends the next request to: the live one with the fewest
 * in flight, or -1 (none live; *full set when every live one is at its
 * queue bound instead). *gen is the slot's generation, read before it was
 * seen live: an instance that leaves after the pick moves the generation on
 * from it, so its requests are answered 502 (read after, a request picked
 * just as its instance left could wait for its 504). */
int m0__service_pick(m0__service *s, bool *full, uint32_t *gen);
/* Slot k's instance left (service/left.c): the slot not live, then a new
 * generation, its count in flight 0. A connected one's under mu. */
void m0__service_slot_left(m0__service *s, int k);
/* Every loop of this process told that slot k's instance left (not under
 * mu): an empty REPLY from the slot into its inbox. Thread safety: any. */
void m0__service_tell_left(m0__service *s, int k);
/* Thread instance k's serving ended: both of the above, as when a connected
 * instance's pipe goes; why (NULL: "its thread ended") is the monitors'
 * reason, JSON-safe. Thread safety: the instance's thread. */
void m0__service_slot_ended(m0__service *s, int k, const char *why);
/* service.c's own, for service/rebind.c (a next generation's listen):
 * the socket's pipe events, the reply thread and the gate's thread (the
 * clock of the deadlines is base/clock.h's). */
void m0__service_on_pipe(nng_pipe p, nng_pipe_ev ev, void *arg);
void *m0__service_rx(void *arg);
void *m0__service_gate(void *arg);
/* Slot k's connection (connected instances). */
static inline nng_pipe m0__slot_pipe(const m0__slot *sl) {
  nng_pipe p = NNG_PIPE_INITIALIZER;
  p.id = atomic_load_explicit(&sl->pipe, memory_order_acquire);
  return p;
}
/* The actor id of slot k's instance. */
uint32_t m0__service_slot_id(const m0__service *s, int k);
/* A connected instance's MESSAGE window: one MESSAGE is with it at a time
 * (pair1's polyamorous mode drops what does not fit its pipe's short
 * queue, so the host never has more in it than its loops' requests and one
 * message), answered by the instance's RETURN (docs/wire.md), or not
 * waited for past `until` (a call's bound, a second for a send: an
 * instance that answers none still gets messages, slowly). take waits
 * until slot k's window is free, up to deadline (m0__now_ms's
 * clock): true when taken; false at the deadline or when the instance of
 * generation gen is gone. give: the MESSAGE's RETURN came (or it was not
 * sent). Thread safety: any thread. */
#define M0__MESSAGE_WINDOW 1
bool m0__service_window_take(m0__service *s, int k, uint32_t gen, int64_t deadline, int64_t until);
void m0__service_window_give(m0__service *s, int k);

/* What a service asks of the host it serves: the post (service/post.h)
 * answers, one table set before anything listens. Any thread; never under
 * the service's mu. */
typedef struct m0__service_hooks {
  /* Slot k's instance came (M0_MSG_UP), left (M0_MSG_DOWN) or, spawned,
   * exited (M0_MSG_EXITED, k -1): the monitors' note; what is its last JSON
   * fields. */
  void (*note)(void *arg, const struct m0__service *s, int k, uint32_t type, const char *what);
  /* A RETURN from `from` to `to`, which is no loop or caller of this
   * process: the answer to a connected instance's own call this host passed
   * on (service/post.h), which goes back on its link when that call is
   * still waiting for `from`'s answer. ret is a whole message (its header
   * space first). true: taken; false: still the caller's. */
  bool (*answer)(void *arg, uint32_t from, uint32_t to, nng_msg *ret);
  /* A MESSAGE slot k's connected instance sent (its own send or call, by
   * name): the hook's from here (it frees m). */
  void (*message)(void *arg, struct m0__service *s, int k, m0__msg *m);
} m0__service_hooks;

static inline void m0__service_noted(const struct m0__service *s, int k, uint32_t type, const char *what) {
  if (s->hooks && s->hooks->note) s->hooks->note(s->hooks_arg, s, k, type, what);
}

/* The hooks' answer, when set. */
static inline bool m0__service_answered(const struct m0__service *s, uint32_t from, uint32_t to, nng_msg *ret) {
  return s->hooks && s->hooks->answer && s->hooks->answer(s->hooks_arg, from, to, ret);
}

/* The inbox a reply addressed to `to` goes into: a loop's of this service's
 * process, or a waiting caller's (service/post.h); NULL for anything else. */
m0__inbox *m0__service_reply_inbox(const m0__service *s, uint32_t to);

#endif
