#include "runtime/admit.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "runtime/kinds.h"
#include "base/errors.h"
#include "base/ids.h"
#include "base/num.h"
#include "transport/page.h"
#include "base/clock.h"

_Static_assert(M0__REFUSE_COUNT_ <= M0__PAGE_REFUSAL_REASONS, "the page counts every reason");

const char *m0__refusal_name(int reason) {
  switch (reason) {
#define M0__REFUSAL_CASE(name, text) case M0__REFUSE_##name: return text;
    M0__REFUSALS(M0__REFUSAL_CASE)
#undef M0__REFUSAL_CASE
  default: return "?";
  }
}

/* ---- the accept lists ---- */

#define S (1u << M0__ORIGIN_SELF)
#define F (1u << M0__ORIGIN_FAMILY)
#define L (1u << M0__ORIGIN_LOCAL)
#define O (1u << M0__ORIGIN_OUTSIDE)
#define R(role) (1u << (role))

/* One rule: at a mailbox of role `at`, kind `kind` is taken from these
 * origins, sent by an actor of one of these roles. A pair not listed is
 * never taken. This is ARCHITECTURE.md's table of kinds, as code. */
typedef struct rule {
  uint8_t at, kind;
  uint8_t origins;
  uint16_t senders;
} rule;

#define HOST_TOP (R(M0__ROLE_COORD) | R(M0__ROLE_WORKER))
/* An application actor's own socket is an APP id with slot 0xfff (actors/
 * service.c); its rules are not its instances'. */
#define ROLE_SOCKET 15
#define ANY_APP R(M0__ROLE_APP)

static const rule rules[] = {
    /* the coordinator (under prefork, the supervisor) */
    {M0__ROLE_COORD, M0__K_READY, S, R(M0__ROLE_LOOP) | R(M0__ROLE_POOL) | R(M0__ROLE_PRODUCER) | ANY_APP},
    {M0__ROLE_COORD, M0__K_READY, F, R(M0__ROLE_WORKER)},
    {M0__ROLE_COORD, M0__K_FAILED, S, R(M0__ROLE_LOOP) | R(M0__ROLE_POOL) | R(M0__ROLE_PRODUCER) | ANY_APP},
    {M0__ROLE_COORD, M0__K_STOPPED, S, R(M0__ROLE_LOOP) | R(M0__ROLE_PRODUCER)},
    {M0__ROLE_COORD, M0__K_DIED, S, R(M0__ROLE_LOOP) | R(M0__ROLE_POOL) | R(M0__ROLE_PRODUCER) | ANY_APP},
    {M0__ROLE_COORD, M0__K_LEAVING, S, R(M0__ROLE_LOOP)},
    /* a worker's own coordinator: its actors, and GO from the supervisor */
    {M0__ROLE_WORKER, M0__K_READY, S, R(M0__ROLE_LOOP) | R(M0__ROLE_POOL) | ANY_APP},
    {M0__ROLE_WORKER, M0__K_FAILED, S, R(M0__ROLE_LOOP) | R(M0__ROLE_POOL) | ANY_APP},
    {M0__ROLE_WORKER, M0__K_STOPPED, S, R(M0__ROLE_LOOP)},
    {M0__ROLE_WORKER, M0__K_DIED, S, R(M0__ROLE_LOOP) | R(M0__ROLE_POOL) | ANY_APP},
    {M0__ROLE_WORKER, M0__K_LEAVING, S, R(M0__ROLE_LOOP)},
    {M0__ROLE_WORKER, M0__K_GO, F, R(M0__ROLE_COORD)},
    /* a loop */
    {M0__ROLE_LOOP, M0__K_GO, S, HOST_TOP},
    {M0__ROLE_LOOP, M0__K_STOP, S, HOST_TOP},
    {M0__ROLE_LOOP, M0__K_HANDOFF, S, R(M0__ROLE_LOOP)},
    {M0__ROLE_LOOP, M0__K_RESULT, S, R(M0__ROLE_POOL)},
    {M0__ROLE_LOOP, M0__K_REPLY, S, ANY_APP},
    {M0__ROLE_LOOP, M0__K_STREAM, S, ANY_APP},
    {M0__ROLE_LOOP, M0__K_ANSWER, S, 0xffff},
    {M0__ROLE_LOOP, M0__K_CHUNK, S, 0xffff},
    /* frames: from any publisher of the host, and from publishers on this
     * machine (m0pub); never from the network */
    {M0__ROLE_LOOP, M0__K_FRAME, S | F, 0xffff},
    {M0__ROLE_LOOP, M0__K_FRAME, L, R(M0__ROLE_EXTERNAL)},
    /* tracing switched while the host runs: from m0trace on this machine
     * (and the host's own processes), never from the network */
    {M0__ROLE_LOOP, M0__K_TRACE, S | F | L, R(M0__ROLE_EXTERNAL)},
    {M0__ROLE_COORD, M0__K_TRACE, L, R(M0__ROLE_EXTERNAL)}, /* the prefork supervisor's own tracer */
    /* a pool thread */
    {M0__ROLE_POOL, M0__K_JOB, S, R(M0__ROLE_LOOP)},
    {M0__ROLE_POOL, M0__K_STOP, S, R(M0__ROLE_LOOP)},
    /* the producer */
    {M0__ROLE_PRODUCER, M0__K_GO, S, HOST_TOP},
    {M0__ROLE_PRODUCER, M0__K_STOP, S, HOST_TOP},
    /* an application actor's socket (its instances dial in): replies and
     * frames from its instances */
    {ROLE_SOCKET, M0__K_REPLY, S | L | O, ANY_APP},
    {ROLE_SOCKET, M0__K_RETURN, S | L | O, ANY_APP},
    {ROLE_SOCKET, M0__K_STREAM, S | L | O, ANY_APP}, /* a reply in pieces (service/wire.h) */
    /* an instance's own send or call (service/remote.h): from 0, as a
     * PUBLISH may be, or its id */
    {ROLE_SOCKET, M0__K_MESSAGE, S | L | O, ANY_APP | R(0)},
    /* a frame's `from` is 0 or an instance's id: the host knows the
     * instance by its pipe (proved: service.c), and one that only publishes
     * never learns its id (docs/wire.md, PUBLISH) */
    {ROLE_SOCKET, M0__K_PUBLISH, S | L | O, ANY_APP | R(0)},
    /* an instance's proof, the answer to its socket's challenge (runtime/proof.h) */
    {ROLE_SOCKET, M0__K_HELLO, S | L | O, ANY_APP},
    /* under --workers, a worker's door: the supervisor's relay introduces
     * each leg (which instance it carries: service/relay.h) */
    {ROLE_SOCKET, M0__K_READY, F, R(M0__ROLE_COORD)},
    /* an instance: requests, messages and STOP from the host (a thread
     * instance's from this process; a spawned or outside one's from the
     * host it dialed): a loop's requests, a caller's (service/post.h) asks
     * and messages, and under --workers a worker's asker as the relay
     * names it (service/relay.h) */
    {M0__ROLE_APP, M0__K_REQUEST, S | L | O, R(M0__ROLE_LOOP) | R(M0__ROLE_CALLER) | R(M0__ROLE_RELAYED) | ANY_APP},
    {M0__ROLE_APP, M0__K_MESSAGE, S | L | O, R(M0__ROLE_CALLER) | R(M0__ROLE_RELAYED) | ANY_APP},
    {M0__ROLE_APP, M0__K_STOP, S | L | O, HOST_TOP | R(M0__ROLE_LOOP) | ANY_APP},
    {M0__ROLE_APP, M0__K_CREDIT, S | L | O, R(M0__ROLE_LOOP)}, /* a stream's room, or its client gone */
    {M0__ROLE_APP, M0__K_HELLO, S | L | O, ANY_APP},
};

int m0__admit(uint32_t self, const m0__env *e, int origin) {
  int at = M0__ACTOR_ROLE(self), from = M0__ACTOR_ROLE(e->from);
  if (at == M0__ROLE_APP && (M0__ACTOR_INDEX(self) & 0xfff) == 0xfff) at = ROLE_SOCKET;
  bool kind_known = false;
  for (size_t i = 0; i < sizeof rules / sizeof *rules; i++) {
    const rule *r = &rules[i];
    if (r->at != at || r->kind != e->kind || !(r->origins & (1u << origin))) continue;
    kind_known = true;
    if (from < 16 && (r->senders & (1u << from))) return 0;
  }
  return kind_known ? M0__REFUSE_ADDRESS : M0__REFUSE_KIND;
}

#undef S
#undef F
#undef L
#undef O

/* ---- counting and saying ---- */

static m0__refusal_line local_lines[M0__PAGE_REFUSAL_LINES];
static m0__refusal_line *lines = local_lines;
static int nlines = M0__PAGE_REFUSAL_LINES;

/* The hosts of this process that count here (host/process.c). The tables
 * are keyed by actor id, which two hosts of one process share, so they are
 * the process's: the first host's page holds them until every host left. */
static pthread_mutex_t users_mu = PTHREAD_MUTEX_INITIALIZER;
static int users;

bool m0__refusals_attach(m0__refusal_line *l, int n) {
  pthread_mutex_lock(&users_mu);
  bool first = users++ == 0;
  if (first && l && n > 0) {
    lines = l;
    nlines = n;
  }
  pthread_mutex_unlock(&users_mu);
  return first;
}

bool m0__refusals_release(void) {
  pthread_mutex_lock(&users_mu);
  bool last = users > 0 && --users == 0;
  pthread_mutex_unlock(&users_mu);
  return last;
}

/* The actor's line: found, or taken (a compare-and-swap on a free one, so
 * two processes never take the same line for two actors); the last line
 * is everyone else's. */
static m0__refusal_line *line_of(uint32_t actor) {
  uint64_t want = (uint64_t)actor + 1;
  for (int i = 0; i < nlines - 1; i++) {
    uint64_t cur = atomic_load_explicit(&lines[i].actor, memory_order_acquire);
    if (cur == want) return &lines[i];
    if (cur == 0) {
      uint64_t zero = 0;
      if (atomic_compare_exchange_strong(&lines[i].actor, &zero, want) || zero == want) return &lines[i];
    }
  }
  atomic_store(&lines[nlines - 1].actor, UINT64_MAX);
  return &lines[nlines - 1];
}

/* Who was told about when: a small table by actor and peer, the oldest
 * entry replaced. */
#define SAID 32
static struct {
  uint64_t hash;
  int64_t at;
} said[SAID];
static pthread_mutex_t said_mu = PTHREAD_MUTEX_INITIALIZER;

/* A peer is its host, not its connection: a tcp peer's port is left out,
 * so a flood of fresh connections from one address is named once too. A
 * refused dial (no proof, no slot) is keyed by the actor and reason alone:
 * 2,000 dials from 2,000 addresses are one line, not 2,000. */
static bool say_now(uint32_t self, int reason, const char *peer) {
  uint64_t h = (1469598103934665603ull ^ self) * 1099511628211ull; /* FNV-1a over the actor and the peer */
  bool dial = reason == M0__REFUSE_PROOF || reason == M0__REFUSE_INSTANCES || reason == M0__REFUSE_PIPES ||
              reason == M0__REFUSE_HANDSHAKE;
  if (dial) h = (h ^ (uint64_t)(reason + 1)) * 1099511628211ull;
  const char *end = dial ? peer
                    : strncmp(peer, "tcp peer ", 9) == 0 && strrchr(peer, ':') ? strrchr(peer, ':')
                                                                                 : peer + strlen(peer);
  for (const char *p = peer; p < end; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
  int64_t t = m0__now_ms();
  bool say = true;
  pthread_mutex_lock(&said_mu);
  int oldest = 0;
  for (int i = 0; i < SAID; i++) {
    if (said[i].hash == h && said[i].at) {
      say = t - said[i].at >= M0__REFUSAL_LOG_MS;
      if (say) said[i].at = t;
      pthread_mutex_unlock(&said_mu);
      return say;
    }
    if (said[i].at < said[oldest].at) oldest = i;
  }
  said[oldest].hash = h;
  said[oldest].at = t;
  pthread_mutex_unlock(&said_mu);
  return say;
}

static const char *why(int reason) {
  switch (reason) {
  case M0__REFUSE_MALFORMED: return "not an m0 envelope";
  case M0__REFUSE_SEAL: return "a seal that is not this host's key's for this message";
  case M0__REFUSE_REPLAY: return "a sealed message seen before, or sealed before this mailbox opened";
  case M0__REFUSE_UNEXPECTED: return "a message its actor was not waiting for, or a descriptor that is no connection";
  case M0__REFUSE_KIND: return "a kind this actor never takes from there";
  case M0__REFUSE_ADDRESS: return "addressed to another actor, or from one that never sends it";
  case M0__REFUSE_FRAME: return "a frame that does not decode";
  case M0__REFUSE_FRAME_ID: return "a frame id not taken from the counter, or one already written";
  case M0__REFUSE_REPLY: return "a reply to no request in flight with that instance";
  case M0__REFUSE_BATCH: return "a reply batch that does not decode (its head, or a record)";
  case M0__REFUSE_STATUS: return "a reply status the host does not pass (answered 502)";
  case M0__REFUSE_STALE: return "a frame numbered at or below the first id this loop serves";
  case M0__REFUSE_CONTROL: return "a tracing control the tracer refused";
  case M0__REFUSE_PROOF: return "an instance without the actor's secret: a wrong proof, none in time, or a message "
                                "before it";
  case M0__REFUSE_INSTANCES: return "every instance slot, or every proof in progress, is taken";
  case M0__REFUSE_PIPES: return "every pipe this mailbox takes from outside its process is taken";
  case M0__REFUSE_HANDSHAKE: return "no TLS handshake and SP greeting within the bound, or past the connections "
                                    "still greeting on that port";
  default: return "?";
  }
}

void m0__refused(uint32_t self, int reason, int kind, const char *peer) {
  if (reason < 0 || reason >= M0__REFUSE_COUNT_) return;
  atomic_fetch_add_explicit(&line_of(self)->n[reason], 1, memory_order_relaxed);
  if (!say_now(self, reason, peer)) return;
  char name[48];
  m0__actor_name(self, name, sizeof name);
  bool dial = reason == M0__REFUSE_PROOF || reason == M0__REFUSE_INSTANCES || reason == M0__REFUSE_PIPES ||
              reason == M0__REFUSE_HANDSHAKE;
  fprintf(stderr,
          "m0: %s refused a %s%s from %s (%s: %s); refusals are counted in m0_refused_total, and this "
          "%s is named again at most every %d s\n",
          name, kind ? m0__kind_name(kind) : dial ? "dial" : "malformed", kind || !dial ? " message" : "", peer,
          m0__refusal_name(reason), why(reason), dial ? "reason" : "peer", M0__REFUSAL_LOG_MS / 1000);
}

void m0__refusals_each(void (*cb)(void *arg, uint32_t actor, int reason, uint64_t n), void *arg) {
  for (int i = 0; i < nlines; i++) {
    uint64_t a = atomic_load(&lines[i].actor);
    if (!a) continue;
    for (int r = 0; r < M0__REFUSE_COUNT_; r++) {
      uint64_t n = atomic_load_explicit(&lines[i].n[r], memory_order_relaxed);
      if (n) cb(arg, a == UINT64_MAX ? UINT32_MAX : (uint32_t)(a - 1), r, n);
    }
  }
}
