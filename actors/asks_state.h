/* The table of requests a loop waits on (actors/asks.c), shared with the
 * streamed replies that keep their entry until their end
 * (actors/streamed.c). The loop's thread only. */
#ifndef M0_ACTORS_ASKS_STATE_H
#define M0_ACTORS_ASKS_STATE_H

#include "actors/loop_state.h"
#include "runtime/trace.h"
#include "service/service.h"

#define ASK_PATH 128

typedef struct ask {
  bool used, head, close;
  uint8_t version_minor;
  int16_t svc; /* -1: a deferred view */
  int16_t slot;
  uint32_t gen;      /* the entry's: part of its id */
  uint32_t slot_gen; /* the slot's when the request was given to it */
  m0__conn *conn;
  uint64_t deadline;
  uint64_t wait_until; /* parked (slot -1): answered 503 past this with no instance come */
  nng_msg *held;       /* parked: its REQUEST, a batch of this one request (NULL otherwise) */
  uint64_t t0_ns; /* taken: its actor's latency counts from here (base/latency.h) */
  uint16_t mlen, plen;
  char method[16], path[ASK_PATH];
  uint64_t trace_hi, trace_lo; /* the request's own trace id, for its log line */
  char *extra; /* the headers added on the loop before it left (before_request, traceparent), or NULL */
  struct m0__streamed *st; /* its reply streams (actors/streamed.c): the head is out */
  size_t extra_len;
  int prev, next; /* the in-use list, or (next) the free list */
} ask;

typedef struct ask_batch {
  nng_msg *msg; /* the REQUEST being filled */
  bool out;     /* this loop's last one is with the instance: no REPLY yet */
  uint32_t out_gen;
  uint64_t deadline;     /* the latest of the batch's requests' */
  uint64_t out_deadline; /* the sent one's: past it, its REPLY is not waited for */
  uint64_t trace_hi, trace_lo; /* the first traced request's: the REQUEST carries it */
  m0__trace_ids others;        /* while tracing: the other requests' ids (runtime/trace.h) */
  uint32_t last_len;           /* the last one sent's payload: the next one's room (asks.c) */
} ask_batch;

typedef struct m0__asks m0__asks;
struct m0__asks {
  ask *tab;
  int len, cap, free_head, used_head, nused; /* len entries made, of at most cap */
  ask_batch *batches; /* [nservices * M0__SLOTS] */
  nng_msg *spare;     /* the last REPLY taken, kept for the next batch's block (asks.c) */
  int *filled;        /* the batches with requests in them, in the order they began */
  int nfilled;
  int *route_svc;     /* [app->nroutes]: the service of an actor route, else -1 */
  uv_timer_t tick;
  uint64_t tick_ms;
  bool tick_open, ticking;
  int local; /* this loop's index among the process's loops: the id's top bits */
  /* [nservices]: how many requests wait for an instance of an actor whose
   * instances are moving to this generation (service/service.h,
   * expect_until): entries with slot -1, each holding its request encoded,
   * appended to a live instance's batch once there is one. */
  int *nparked;
  uint32_t *swept; /* [nservices * M0__SLOTS]: each slot's generation at this loop's last look (asks_left) */
};

static inline uint64_t ask_id(const m0__asks *a, int i) {
  return ((uint64_t)a->local << 48) | ((uint64_t)(a->tab[i].gen & 0xffffff) << 24) | (uint64_t)i;
}

/* The entry an id names, if it is still waited for. */
static inline ask *ask_find(m0__asks *a, uint64_t id, int *idx) {
  int i = (int)(id & 0xffffff);
  if ((int)(id >> 48) != a->local || i >= a->len) return NULL;
  ask *e = &a->tab[i];
  if (!e->used || (e->gen & 0xffffff) != ((id >> 24) & 0xffffff)) return NULL;
  *idx = i;
  return e;
}

/* The request's end: its answer (status: a failure's, 502 or 504), or for
 * a streamed reply its END (0) or its cut (any other); the entry is released. */
void m0__asks_finish(m0__loop *l, int i, int status);
/* Whether a reply's status may pass through the host (asks.c says why). */
bool m0__asks_status_passes(int status);
/* A streamed reply's end (actors/streamed.c, as asks.c releases its
 * request): cut closes the connection without the last chunk; st is freed.
 * Returns the status its head said, and in *bytes the body's bytes, for
 * the access log. */
int m0__streamed_close(m0__loop *l, struct m0__streamed *st, bool cut, size_t *bytes);
/* At each tick of the table: a quiet stream's room is told again. */
void m0__streamed_tick(struct m0__streamed *st);
/* A refusal of what an instance of s (NULL: none named) sent, counted and said. */
void m0__asks_refused(const m0__service *s, uint32_t loop_id, int reason, const m0__msg *m);

#endif
