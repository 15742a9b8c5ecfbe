#include "actors/asks_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/admit.h"
#include "actors/asks.h"
#include "actors/deferred.h"
#include "service/service.h"
#include "service/wire.h"
#include "actors/writer.h"
#include "base/clock.h"
#include "base/errors.h"
#include "http/accesslog.h"

#define DEFERRED_TIMEOUT_MS 30000
#define ROUTE_TIMEOUT_MS 1000

/* What this loop has in flight with actor si, on the shared page
 * (transport/page.h): a gauge only this loop stores, in its generation's bank,
 * at the actor's row. */
static void ask_inflight(m0__loop *l, int si, uint64_t delta) {
  int row = l->services[si]->row;
  if (row < 0) return;
  _Atomic uint64_t *w = &l->page->loop_figures[l->index].actor_inflight[l->page->bank][row];
  atomic_store_explicit(w, atomic_load_explicit(w, memory_order_relaxed) + delta, memory_order_relaxed);
}

static void tick_start(m0__loop *l);

/* The table grows by doubling up to cap (a loop's connections, each with at
 * most one request waiting): most loops never wait on anything. */
static bool ask_grow(m0__asks *a) {
  int n = a->len ? 2 * a->len : 64;
  if (n > a->cap) n = a->cap;
  if (n <= a->len) return false;
  ask *t = realloc(a->tab, (size_t)n * sizeof *t);
  if (!t) return false;
  memset(t + a->len, 0, (size_t)(n - a->len) * sizeof *t);
  for (int i = a->len; i < n; i++) t[i].next = i + 1 < n ? i + 1 : a->free_head;
  a->free_head = a->len;
  a->tab = t;
  a->len = n;
  return true;
}

static int ask_take(m0__loop *l, m0__conn *c, const m0_response *res, int svc, unsigned timeout_ms) {
  m0__asks *a = l->asks;
  if (a->free_head < 0 && !ask_grow(a)) return M0__ENOMEM;
  int i = a->free_head;
  ask *e = &a->tab[i];
  e->extra = NULL;
  e->st = NULL;
  e->extra_len = 0;
  e->trace_hi = res->req ? res->req->trace_hi : 0;
  e->trace_lo = res->req ? res->req->trace_lo : 0;
  if (res->extra_len) { /* rare (a before_request that adds headers, a traceparent): its own copy */
    if (!(e->extra = malloc(res->extra_len))) return M0__ENOMEM;
    memcpy(e->extra, res->extra, res->extra_len);
    e->extra_len = res->extra_len;
  }
  a->free_head = e->next;
  e->used = true;
  e->gen++;
  e->svc = (int16_t)svc;
  e->conn = c;
  e->head = res->head;
  e->close = res->close;
  e->version_minor = (uint8_t)res->version_minor;
  e->deadline = uv_now(&l->uv) + timeout_ms;
  e->t0_ns = svc >= 0 ? m0__latency_now_ns() : 0;
  const m0_request *q = res->req;
  e->mlen = q ? (uint16_t)(q->method.n < sizeof e->method ? q->method.n : sizeof e->method) : 0;
  e->plen = q ? (uint16_t)(q->path.n < sizeof e->path ? q->path.n : sizeof e->path) : 0;
  if (e->mlen) memcpy(e->method, q->method.p, e->mlen);
  if (e->plen) memcpy(e->path, q->path.p, e->plen);
  e->prev = -1;
  e->next = a->used_head;
  if (a->used_head >= 0) a->tab[a->used_head].prev = i;
  a->used_head = i;
  a->nused++;
  tick_start(l);
  return i;
}

static void ask_release(m0__asks *a, int i) {
  ask *e = &a->tab[i];
  if (e->prev >= 0) a->tab[e->prev].next = e->next;
  else a->used_head = e->next;
  if (e->next >= 0) a->tab[e->next].prev = e->prev;
  e->used = false;
  e->conn = NULL;
  free(e->extra);
  e->extra = NULL;
  if (e->held) nng_msg_free(e->held); /* parked, answered before an instance came */
  e->held = NULL;
  e->next = a->free_head;
  a->free_head = i;
  a->nused--;
}

/* The request's answer, into its connection and the access log; the entry
 * is released and its instance's in-flight count given back. */
static int ask_answer(m0__loop *l, int i, int status, const m0_header *hdrs, size_t n, const void *body,
                      size_t blen) {
  m0__asks *a = l->asks;
  ask *e = &a->tab[i];
  if (e->svc >= 0 && e->slot < 0) a->nparked[e->svc]--;
  if (e->svc >= 0 && e->slot >= 0) {
    m0__slot *sl = &l->services[e->svc]->slots[e->slot];
    if (atomic_load(&sl->gen) == e->slot_gen && atomic_load(&sl->inflight) > 0) atomic_fetch_sub(&sl->inflight, 1);
  }
  if (e->svc >= 0) {
    ask_inflight(l, e->svc, (uint64_t)-1);
    m0__latency_add(&l->services[e->svc]->st->latency, m0__latency_now_ns() - e->t0_ns);
  }
  if (e->st) { /* its head is out: the stream ends, whole or cut (actors/streamed.c) */
    size_t bytes;
    int said = m0__streamed_close(l, e->st, status != 0, &bytes);
    e = &a->tab[i]; /* the close may have parsed the next pipelined request, as below */
    if (l->http.access_log)
      m0__access_log_line(l->index, (m0_str){e->method, e->mlen}, (m0_str){e->path, e->plen}, said, bytes,
                          e->trace_hi, e->trace_lo, status ? "cut" : NULL);
    ask_release(a, i);
    return status;
  }
  m0__answer ans = {e->version_minor, e->head, e->close, status, hdrs, n, body, blen, e->extra, e->extra_len};
  int written;
  long bytes = m0__http_answer(&l->http, e->conn, &ans, &written);
  /* The answer may have parsed the connection's next pipelined request, which
   * may have taken an entry and grown (moved) the table: e is found again. */
  e = &a->tab[i];
  if (l->http.access_log && bytes >= 0)
    m0__access_log_line(l->index, (m0_str){e->method, e->mlen}, (m0_str){e->path, e->plen}, written, (size_t)bytes,
                        e->trace_hi, e->trace_lo, NULL);
  ask_release(a, i);
  return written;
}

static void ask_fail(m0__loop *l, int i, int status);
void m0__asks_finish(m0__loop *l, int i, int status) {
  if (l->asks->tab[i].st) ask_answer(l, i, status, NULL, 0, NULL, 0);
  else ask_fail(l, i, status);
}

/* An answer the host gives itself. */
static void ask_fail(m0__loop *l, int i, int status) {
  char body[64];
  int n = snprintf(body, sizeof body, "%d %s\n", status, m0__status_reason(status));
  static const m0_header ct = {{"Content-Type", 12}, {"text/plain", 10}};
  ask_answer(l, i, status, &ct, 1, body, (size_t)n);
}

/* ---- asks parked while an actor's instances move (a reload) ---- */

/* src's records after dst's (both batches: service/wire.h). */
static int asks_batch_append(nng_msg *dst, nng_msg *src) {
  uint32_t n = m0__wire_batch_count(src), have = m0__wire_batch_count(dst);
  size_t len = m0__msg_payload_len(src) - M0__WIRE_BATCH_HEAD;
  if (have + n > M0__WIRE_MAX_COUNT || m0__msg_payload_len(dst) + len > M0__ENV_MAX_PAYLOAD) return M0__ETOOBIG;
  uint8_t *at = m0__msg_extend(dst, len);
  if (!at) return M0__ENOMEM;
  memcpy(at, m0__msg_payload(src) + M0__WIRE_BATCH_HEAD, len);
  m0__le_put32(m0__msg_payload(dst) + 4, have + n);
  return 0;
}

/* Actor si's parked requests to the live instance with the fewest in
 * flight, once there is one: into its batch, which the flush sends. */
static void asks_unpark(m0__loop *l, int si) {
  m0__asks *a = l->asks;
  m0__service *s = l->services[si];
  bool full;
  uint32_t gen;
  int k = m0__service_pick(s, &full, &gen);
  if (k < 0) return;
  ask_batch *b = &a->batches[si * M0__SLOTS + k];
  for (int i = a->used_head; i >= 0; i = a->tab[i].next) {
    ask *e = &a->tab[i];
    if (e->svc != si || e->slot >= 0) continue;
    if (!b->msg) {
      b->msg = e->held;
      a->filled[a->nfilled++] = si * M0__SLOTS + k;
    } else if (asks_batch_append(b->msg, e->held) != 0) {
      return; /* the rest next pass, once that batch went */
    } else {
      nng_msg_free(e->held);
    }
    e->held = NULL;
    e->slot = (int16_t)k;
    e->slot_gen = gen;
    if (e->deadline > b->deadline) b->deadline = e->deadline;
    atomic_fetch_add(&s->slots[k].inflight, 1);
    a->nparked[si]--;
  }
}

static void asks_unpark_all(m0__loop *l) {
  m0__asks *a = l->asks;
  for (int si = 0; a->nparked && si < l->nservices; si++)
    if (a->nparked[si] > 0) asks_unpark(l, si);
}

/* A request to actor si, which has no live instance but expects them until
 * until (CLOCK_MONOTONIC ms): it waits, parked, within its route's timeout.
 * 0, or -1 answered. */
static int asks_park(m0__loop *l, m0__conn *c, const m0_request *req, m0_response *res, int si, unsigned timeout_ms,
                     int64_t until) {
  m0__asks *a = l->asks;
  int i = ask_take(l, c, res, si, timeout_ms);
  if (i < 0) return i;
  ask *e = &a->tab[i];
  if (m0__wire_batch_new(&e->held, 512 + req->body.n) != 0 || m0__wire_request_add(e->held, ask_id(a, i), req) != 0) {
    ask_release(a, i);
    m0__respond_status(res, 503, NULL);
    return M0__ENOMEM;
  }
  e->slot = -1;
  a->nparked[si]++;
  int64_t left = until - m0__now_ms();
  uint64_t now = uv_now(&l->uv);
  e->wait_until = left > 0 && now + (uint64_t)left < e->deadline ? now + (uint64_t)left : e->deadline;
  ask_inflight(l, si, 1);
  return 0;
}

/* ---- instances that left, and the tick: deadlines ---- */

/* Slot k of actor si has a new generation: its requests with an older one
 * get 502, no REPLY will come. Run at each REPLY from the slot (its service
 * sends every loop an empty one when the instance leaves) and each tick. */
static void asks_left(m0__loop *l, int si, int k) {
  m0__asks *a = l->asks;
  m0__service *s = l->services[si];
  uint32_t gen = atomic_load(&s->slots[k].gen);
  if (gen == a->swept[si * M0__SLOTS + k]) return; /* generations only move on: nothing older is left */
  a->swept[si * M0__SLOTS + k] = gen;
  for (int i = a->used_head, next; i >= 0; i = next) {
    ask *e = &a->tab[i];
    next = e->next;
    if (e->svc != si || e->slot != k || e->slot_gen == gen) continue;
    atomic_fetch_add(&s->st->died, 1);
    ask_fail(l, i, 502);
  }
}

static void on_tick(uv_timer_t *t) {
  m0__loop *l = t->data;
  m0__asks *a = l->asks;
  uint64_t now = uv_now(&l->uv);
  int next;
  asks_unpark_all(l);
  for (int si = 0; si < l->nservices; si++)
    for (int k = 0; k < atomic_load(&l->services[si]->used); k++) asks_left(l, si, k);
  for (int i = a->used_head; i >= 0; i = next) {
    ask *e = &a->tab[i];
    next = e->next;
    if (e->svc >= 0 && e->slot < 0) { /* parked: no instance came within the wait */
      if (now < e->wait_until) continue;
      atomic_fetch_add(&l->services[e->svc]->st->no_instance, 1);
      ask_fail(l, i, 503);
      continue;
    }
    if (e->st && now < e->deadline) m0__streamed_tick(e->st); /* its room told again if it may be lost */
    if (now < e->deadline) continue;
    if (e->svc >= 0) atomic_fetch_add(&l->services[e->svc]->st->timeout, 1);
    ask_fail(l, i, 504);
  }
  if (a->nused == 0) {
    uv_timer_stop(&a->tick);
    a->ticking = false;
  }
}

static void tick_start(m0__loop *l) {
  m0__asks *a = l->asks;
  if (a->ticking || !a->tick_open) return;
  a->ticking = true;
  uv_timer_start(&a->tick, on_tick, a->tick_ms, a->tick_ms);
}

/* ---- routes served by actors ---- */

int m0__asks_to_actor(m0__http *h, m0__conn *c, const m0_request *req, const m0_route *route, m0_response *res) {
  m0__loop *l = h->owner;
  m0__asks *a = l->asks;
  int si = a->route_svc[route - l->app->routes];
  if (si < 0) return M0__EINVALID; /* no actor of this loop's: 503 */
  m0__service *s = l->services[si];
  bool full;
  uint32_t gen;
  int k = m0__service_pick(s, &full, &gen);
  int64_t until = k < 0 && !full ? atomic_load_explicit(&s->expect_until, memory_order_relaxed) : 0;
  if (until && until > m0__now_ms())
    return asks_park(l, c, req, res, si, route->timeout_ms ? route->timeout_ms : ROUTE_TIMEOUT_MS, until);
  if (k < 0) {
    atomic_fetch_add(full ? &s->st->queue_full : &s->st->no_instance, 1);
    if (full) m0_response_header(res, "Retry-After", "1");
    m0__respond_status(res, 503, NULL);
    return M0__ENOTFOUND; /* answered 503: no instance live, or each at its bound */
  }
  int i = ask_take(l, c, res, si, route->timeout_ms ? route->timeout_ms : ROUTE_TIMEOUT_MS);
  if (i < 0) return i;
  ask_batch *b = &a->batches[si * M0__SLOTS + k];
  if (!b->msg) {
    /* Room for what the last batch to this instance held, in the block of
     * the last REPLY when there is one: nng zeroes what it allocates, and a
     * fresh 4 KiB batch was ~690 instructions per request at 16
     * connections (8 requests a batch; bench/run_actors part 3). */
    size_t room = b->last_len ? b->last_len + 256 : 1024;
    if (a->spare && m0__wire_batch_reuse(a->spare, room) == 0) {
      b->msg = a->spare;
      a->spare = NULL;
    } else if (m0__wire_batch_new(&b->msg, room) != 0) {
      ask_release(a, i);
      m0__respond_status(res, 503, NULL);
      return M0__ENOMEM;
    }
    a->filled[a->nfilled++] = si * M0__SLOTS + k; /* the flush looks only at these */
  }
  if (m0__wire_request_add(b->msg, ask_id(a, i), req) != 0) {
    ask_release(a, i);
    m0__respond_status(res, 503, NULL);
    return M0__ETOOBIG; /* or no memory */
  }
  ask *e = &a->tab[i];
  e->slot = (int16_t)k;
  e->slot_gen = gen;
  if (e->deadline > b->deadline) b->deadline = e->deadline;
  atomic_fetch_add(&s->slots[k].inflight, 1);
  ask_inflight(l, si, 1);
  if (!b->trace_hi && !b->trace_lo) {
    b->trace_hi = req->trace_hi;
    b->trace_lo = req->trace_lo;
  }
  if (atomic_load_explicit(&m0__trace_live, memory_order_relaxed)) /* not kept when out of memory: a record less */
    (void)m0__trace_ids_add(&b->others, b->trace_hi, b->trace_lo, req->trace_hi, req->trace_lo);
  return 0;
}

void m0__asks_flush(m0__loop *l) {
  m0__asks *a = l->asks;
  if (a) asks_unpark_all(l);
  if (!a || a->nfilled == 0) return;
  int kept = 0;
  for (int f = 0; f < a->nfilled; f++) {
    int si = a->filled[f] / M0__SLOTS, k = a->filled[f] % M0__SLOTS;
    m0__service *s = l->services[si];
    ask_batch *b = &a->batches[a->filled[f]];
    m0__slot *sl = &s->slots[k];
    uint32_t gen = atomic_load(&sl->gen);
    /* No REPLY will come when its instance left; none is waited for once
     * every request of the batch has had its 504 (a REPLY the service's
     * thread refused, a REQUEST pair1 dropped). */
    if (b->out && (gen != b->out_gen || uv_now(&l->uv) > b->out_deadline)) b->out = false;
    if (b->out) {
      a->filled[kept++] = a->filled[f]; /* next pass */
      continue;
    }
    if (!atomic_load_explicit(&sl->live, memory_order_acquire)) {
      /* It left before the batch went: the tick answers its requests 502. */
      nng_msg_free(b->msg);
      b->msg = NULL;
      continue;
    }
    m0__peer to;
    if (s->connected) m0__peer_pipe(&to, m0__service_slot_id(s, k), s->self.mailbox, m0__slot_pipe(sl));
    else m0__peer_direct(&to, m0__service_slot_id(s, k), sl->inbox);
    if (b->others.n) m0__trace_batch((const uint64_t(*)[2])b->others.ids, b->others.n);
    uint32_t len = (uint32_t)m0__msg_payload_len(b->msg); /* the message is the send's once sent */
    int rv = m0__send_msg(&l->self, &to, M0__K_REQUEST, b->trace_hi, b->trace_lo, b->msg);
    m0__trace_batch(NULL, 0);
    if (rv != 0) {
      a->filled[kept++] = a->filled[f]; /* still ours: next pass */
      continue;
    }
    b->others.n = 0;
    b->last_len = len;
    b->msg = NULL;
    b->out = true;
    b->out_gen = gen;
    b->out_deadline = b->deadline;
    b->deadline = 0;
    b->trace_hi = b->trace_lo = 0;
  }
  a->nfilled = kept;
}

/* A refusal of what an instance sent: counted on its actor's socket (where
 * the instance's messages come in), or on the loop when no actor is named. */
void m0__asks_refused(const m0__service *s, uint32_t loop_id, int reason, const m0__msg *m) {
  char who[64];
  m0__actor_name(m->env.from, who, sizeof who);
  m0__refused(s ? M0__ACTOR_ID(M0__ROLE_APP, M0__APP_INDEX(s->index, 0xfff)) : loop_id, reason, m->env.kind, who);
}

/* The statuses an actor's reply may carry through the host, which answers
 * as a gateway for another program (RFC 9110 section 15): a final status
 * (1xx are interim, and the exchange is the host's) that IANA's registry
 * defines (m0__status_reason names it), less those it marks deprecated or
 * unused: 305 Use Proxy (15.4.6), 306 (15.4.7), 418 (15.5.19) and 510 Not
 * Extended (obsoleted, RFC 2774 historic). A code the registry does not
 * define (383) tells a client nothing but its class: a reply with one is not
 * passed on (502), so what reaches the client is defined HTTP. */
bool m0__asks_status_passes(int status) {
  if (status < 200 || status > 599 || status == 305 || status == 418 || status == 510) return false;
  return m0__status_reason(status)[0] != 0;
}

/* Where a REPLY came from: actor si's instance k (*s), or nothing for an
 * ANSWER (a deferred view's). false when a REPLY names no instance of this
 * loop's actors (refused). */
static bool asks_reply_from(m0__loop *l, const m0__msg *m, m0__service **s, int *si, int *k) {
  *s = NULL;
  *si = *k = -1;
  if (m->env.kind != M0__K_REPLY) return true;
  int idx = M0__ACTOR_INDEX(m->env.from);
  *si = idx >> 12;
  *k = idx & 0xfff;
  if (M0__ACTOR_ROLE(m->env.from) != M0__ROLE_APP || *si >= l->nservices || *k >= l->services[*si]->nslots) {
    m0__asks_refused(NULL, l->self.id, M0__REFUSE_ADDRESS, m);
    return false;
  }
  *s = l->services[*si];
  l->asks->batches[*si * M0__SLOTS + *k].out = false;
  return true;
}

/* One record of a REPLY or an ANSWER (rv < 0: it does not decode, a status
 * below 200 or above 599 among them), from instance k of s (NULL: a
 * deferred view's). */
static void asks_reply_one(m0__loop *l, const m0__msg *m, m0__service *s, int si, int k, int rv,
                           const m0__wire_reply *rep) {
  int i;
  ask *e = rep->id_read ? ask_find(l->asks, rep->id, &i) : NULL;
  if (e && e->svc != si) e = NULL; /* an actor's reply to a deferred view's id, or the other way round */
  /* A reply names only a request in flight with the instance it came
   * from: another instance's, or its predecessor's on that slot, is not
   * its to answer. */
  if (e && s && (e->slot != k || e->slot_gen != atomic_load(&s->slots[k].gen))) e = NULL;
  if (!e) {
    if (s) atomic_fetch_add(rep->id_read ? &s->st->unknown : &s->st->refused, 1); /* no id: bytes past the last */
    else atomic_fetch_add(&l->page->figures->deferred_late, 1);
    if (s) m0__asks_refused(s, l->self.id, M0__REFUSE_REPLY, m);
  } else if (rv < 0) {
    if (s) atomic_fetch_add(&s->st->bad_reply, 1);
    if (s) m0__asks_refused(s, l->self.id, M0__REFUSE_BATCH, m);
    ask_fail(l, i, 502);
  } else if (s && !m0__asks_status_passes(rep->status)) {
    atomic_fetch_add(&s->st->bad_reply, 1);
    m0__asks_refused(s, l->self.id, M0__REFUSE_STATUS, m);
    ask_fail(l, i, 502);
  } else {
    if (atomic_load_explicit(&m0__trace_live, memory_order_relaxed) && (e->trace_hi || e->trace_lo) &&
        (e->trace_hi != m->env.trace_hi || e->trace_lo != m->env.trace_lo)) /* a batch's other request */
      m0__trace_request(l->trace, true, &m->env, m->len, e->trace_hi, e->trace_lo);
    /* Its headers may still not be writable as they are (502, counted so). */
    bool ok = ask_answer(l, i, rep->status, rep->hdrs, rep->nhdrs, rep->body.p, rep->body.n) == rep->status;
    if (s) atomic_fetch_add(ok ? &s->st->ok : &s->st->bad_reply, 1);
  }
}

void m0__asks_on_answer(m0__loop *l, m0__msg *m) {
  m0__service *s;
  int si, k;
  if (!l->asks || !asks_reply_from(l, m, &s, &si, &k)) return;
  if (s) asks_left(l, si, k); /* at once, not at the next tick */
  m0__wire_rd r;
  static _Thread_local m0__wire_reply rep;
  if (m0__wire_open(&r, m->payload, m->len) != 0) {
    if (s) atomic_fetch_add(&s->st->refused, 1);
    m0__asks_refused(s, l->self.id, M0__REFUSE_BATCH, m);
    return;
  }
  int rv;
  while ((rv = m0__wire_next_reply(&r, &rep)) != 0) {
    asks_reply_one(l, m, s, si, k, rv, &rep);
    if (rv < 0) break; /* the rest of the batch cannot be read: its requests time out */
  }
  if (!l->asks->spare && m->nmsg && nng_msg_capacity(m->nmsg) <= M0__WIRE_SPARE_MAX) {
    /* read through: its block becomes the next batch's */
    l->asks->spare = m->nmsg;
    m->nmsg = NULL;
  }
}

/* ---- deferred views (their handle: actors/deferred.c) ---- */

m0_deferred *m0__asks_defer_view(m0__http *h, m0__conn *c, m0_response *res, unsigned timeout_ms) {
  m0__loop *l = h->owner;
  m0_deferred *d = m0__deferred_new(&l->inbox, l->self.id, l->trace);
  if (!d) return NULL;
  unsigned bound = timeout_ms ? timeout_ms : DEFERRED_TIMEOUT_MS;
  int i = ask_take(l, c, res, -1, bound);
  if (i < 0) {
    free(d);
    return NULL;
  }
  m0__deferred_for(d, ask_id(l->asks, i), bound, &l->page->figures->deferred_late);
  res->deferred = true;
  res->done = true; /* the view answers no more through res */
  return d;
}

/* ---- open and close ---- */

int m0__asks_open(m0__loop *l) {
  m0__asks *a = calloc(1, sizeof *a);
  if (!a) return M0__ENOMEM;
  l->asks = a;
  a->cap = l->ctx.capacity + 16;
  a->free_head = a->used_head = -1;
  a->batches = calloc((size_t)(l->nservices ? l->nservices : 1) * M0__SLOTS, sizeof *a->batches);
  a->route_svc = calloc(l->app->nroutes ? l->app->nroutes : 1, sizeof *a->route_svc);
  a->filled = calloc((size_t)(l->nservices ? l->nservices : 1) * M0__SLOTS, sizeof *a->filled);
  a->nparked = calloc(l->nservices ? (size_t)l->nservices : 1, sizeof *a->nparked);
  a->swept = calloc((size_t)(l->nservices ? l->nservices : 1) * M0__SLOTS, sizeof *a->swept);
  if (!a->batches || !a->route_svc || !a->filled || !a->nparked || !a->swept) return M0__ENOMEM;
  a->local = l->nservices ? l->index - l->services[0]->loop_base : 0;
  /* A respawned loop's start afresh, and rows of actors its bank's last
   * generation had (two reloads ago, gone) with them. */
  for (int row = 0; row < M0__PAGE_APP_ACTORS; row++)
    atomic_store(&l->page->loop_figures[l->index].actor_inflight[l->page->bank][row], 0);
  unsigned shortest = DEFERRED_TIMEOUT_MS;
  for (size_t r = 0; r < l->app->nroutes; r++) {
    const m0_route *rt = &l->app->routes[r];
    a->route_svc[r] = -1;
    for (int si = 0; rt->actor && si < l->nservices; si++)
      if (!strcmp(rt->actor, l->services[si]->name)) a->route_svc[r] = si;
    unsigned t = rt->timeout_ms ? rt->timeout_ms : ROUTE_TIMEOUT_MS;
    if (rt->actor && t < shortest) shortest = t;
  }
  a->tick_ms = shortest / 4 < 10 ? 10 : shortest / 4;
  if (uv_timer_init(&l->uv, &a->tick) != 0) return M0__ENOMEM;
  a->tick.data = l;
  a->tick_open = true;
  return 0;
}

void m0__asks_close(m0__loop *l) {
  m0__asks *a = l->asks;
  if (!a || !a->tick_open) return;
  a->tick_open = false;
  a->ticking = false;
  uv_close((uv_handle_t *)&a->tick, NULL);
}

void m0__asks_free(m0__loop *l) {
  m0__writers_free(l);
  m0__asks *a = l->asks;
  if (!a) return;
  for (int k = 0; a->batches && k < (l->nservices ? l->nservices : 1) * M0__SLOTS; k++) {
    if (a->batches[k].msg) nng_msg_free(a->batches[k].msg);
    m0__trace_ids_free(&a->batches[k].others);
  }
  for (int i = 0; i < a->len; i++) { /* entries still waiting at the close */
    size_t bytes;
    if (a->tab[i].used && a->tab[i].st) m0__streamed_close(l, a->tab[i].st, true, &bytes);
    free(a->tab[i].extra);
    if (a->tab[i].held) nng_msg_free(a->tab[i].held);
  }
  if (a->spare) nng_msg_free(a->spare);
  free(a->nparked);
  free(a->swept);
  free(a->tab);
  free(a->batches);
  free(a->route_svc);
  free(a->filled);
  free(a);
  l->asks = NULL;
}
