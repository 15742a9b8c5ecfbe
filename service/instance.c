#include "service/instance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "runtime/admit.h"
#include "service/wire.h"
#include "base/errors.h"
#include "http/response.h"

/* ---- the reply an instance writes (public: m0_reply_*) ---- */

#define REPLY_STORE 8192

struct m0_reply {
  nng_msg *out;
  uint64_t id;
  bool sent;
  m0__header_block hb; /* over hdrs and store */
  m0_header hdrs[M0__WIRE_MAX_HEADERS];
  char store[REPLY_STORE];
};

int m0_reply_header(m0_reply *rep, const char *name, const char *value) {
  if (!rep || rep->sent || !name || !value) return -1;
  return m0__header_block_add(&rep->hb, name, strlen(name), value, strlen(value));
}

int m0_reply_send(m0_reply *rep, int status, const char *content_type, const void *body, size_t len) {
  if (!rep || rep->sent || status < 200 || status > 599 || (len && !body)) return -1;
  m0__header_block before = rep->hb;
  if (content_type && m0__header_block_add(&rep->hb, "Content-Type", 12, content_type, strlen(content_type)) != 0)
    return -1;
  if (m0__wire_reply_add(rep->out, rep->id, status, rep->hdrs, rep->hb.n, body, len) != 0) {
    rep->hb = before; /* the content type added above goes again: nothing was sent */
    return -1;
  }
  rep->sent = true;
  return 0;
}

/* ---- answering a batch, wherever the instance runs ---- */

int m0__instance_answer(const m0_actor_kind *kind, void *state, const m0__msg *m, nng_msg *out, atomic_bool *in_app,
                        m0__tracer *trace, m0__trace_ids *others) {
  m0__wire_rd r;
  if (m0__wire_open(&r, m->payload, m->len) != 0) return M0__EBADMSG;
  static _Thread_local m0__wire_request q;
  static _Thread_local m0_reply rep;
  int n = 0, rv;
  while ((rv = m0__wire_next_request(&r, &q)) == 1) {
    rep.out = out;
    rep.id = q.id;
    rep.sent = false;
    rep.hb = (m0__header_block){rep.hdrs, 0, M0__WIRE_MAX_HEADERS, rep.store, 0, REPLY_STORE};
    const m0__env *e = &m->env;
    if (trace && atomic_load_explicit(&m0__trace_live, memory_order_relaxed) && (q.req.trace_hi || q.req.trace_lo) &&
        (q.req.trace_hi != e->trace_hi || q.req.trace_lo != e->trace_lo)) {
      m0__trace_request(trace, true, e, m->len, q.req.trace_hi, q.req.trace_lo);
      (void)m0__trace_ids_add(others, e->trace_hi, e->trace_lo, q.req.trace_hi, q.req.trace_lo);
    }
    if (in_app) atomic_store(in_app, true);
    m0__current_trace = (m0__trace_id){q.req.trace_hi, q.req.trace_lo};
    kind->receive(state, &q.req, &rep);
    m0__current_trace = (m0__trace_id){0, 0};
    if (in_app) atomic_store(in_app, false);
    n += rep.sent;
  }
  return rv < 0 ? rv : n;
}

/* ---- a thread instance ---- */

/* The instance whose receive runs on this thread (m0_ask asks for it). */
static _Thread_local m0__instance *asking;

#define ASK_ID_TOP 0xffffull

/* The next message: what an ask kept aside first, then the inbox and the
 * mailbox. */
static int instance_next(m0__instance *in, m0__msg *m) {
  if (in->nstash) {
    nng_msg *n = in->stash[0];
    memmove(in->stash, in->stash + 1, (size_t)--in->nstash * sizeof *in->stash);
    m->nmsg = n;
    return m0__env_read(nng_msg_body(n), nng_msg_len(n), &m->env, &m->payload, &m->len) == 0 ? 0 : M0__EBADMSG;
  }
  return m0__recv(&in->self, m, M0__RECV_WAIT);
}

/* A REPLY that answers no ask of this instance in flight: a late one, or
 * one from an instance it did not ask (any instance can address a REPLY to
 * any other's slot). Counted and named like the loops' (runtime/admit.h). */
static void ask_refused(const m0__instance *in, const m0__msg *m) {
  char who[48];
  m0__actor_name(m->env.from, who, sizeof who);
  m0__refused(in->self.id, M0__REFUSE_REPLY, M0__K_REPLY, who);
}

static void instance_serve(m0__instance *in) {
  m0__service *s = in->svc;
  m0__slot *sl = &s->slots[in->slot];
  asking = in;
  m0__trace_ids others = {0}; /* while tracing: a REPLY's other requests' ids */
  atomic_store_explicit(&sl->live, 1, memory_order_release);
  for (;;) {
    m0__msg m = {0};
    int rv = instance_next(in, &m);
    if (rv == M0__EBADMSG) m0__msg_free(&m);
    if (rv == M0__ETIMEDOUT || rv == M0__EBADMSG) continue;
    if (rv != 0) break;
    if (m.env.kind == M0__K_STOP) {
      m0__msg_free(&m);
      break;
    }
    m0__inbox *reply_to = m0__service_reply_inbox(s, m.env.from);
    if (m.env.kind != M0__K_REQUEST || !reply_to) { /* a late answer to an ask, or not for an instance */
      atomic_fetch_add(&s->st->refused, m.env.kind != M0__K_REPLY);
      if (m.env.kind == M0__K_REPLY) ask_refused(in, &m);
      m0__msg_free(&m);
      continue;
    }
    nng_msg *out;
    /* Room for replies about the size of the requests: the reply batch is
     * then not grown (and copied) as it is written. */
    if (m0__wire_batch_new(&out, (m.len < (1u << 20) ? m.len : (1u << 20)) + 256) != 0) {
      m0__msg_free(&m);
      continue; /* its requests time out: 504 */
    }
    if (m0__instance_answer(in->kind, in->state, &m, out, &in->h.in_app, in->trace, &others) < 0) {
      char from[48];
      m0__actor_name(m.env.from, from, sizeof from);
      fprintf(stderr, "m0: %s.%d: a malformed request batch from %s\n", s->name, in->slot, from);
    }
    m0__peer to;
    m0__peer_direct(&to, m.env.from, reply_to);
    if (others.n) m0__trace_batch((const uint64_t(*)[2])others.ids, others.n);
    if (m0__send_msg(&in->self, &to, M0__K_REPLY, m.env.trace_hi, m.env.trace_lo, out) != 0) nng_msg_free(out);
    m0__trace_batch(NULL, 0);
    others.n = 0;
    m0__msg_free(&m);
  }
  m0__trace_ids_free(&others);
  atomic_store_explicit(&sl->live, 0, memory_order_release);
  for (int i = 0; i < in->nstash; i++) nng_msg_free(in->stash[i]);
  free(in->stash);
  in->stash = NULL;
  in->nstash = in->capstash = 0;
  asking = NULL;
}

/* ---- asking another actor ---- */

/* Monotonic milliseconds (libuv's clock, which the loops use too). */
static int64_t now_ms(void) { return (int64_t)(uv_hrtime() / 1000000); }

static bool stash_keep(m0__instance *in, nng_msg *m) {
  if (in->nstash == in->capstash) {
    int cap = in->capstash ? 2 * in->capstash : 16;
    nng_msg **n = realloc(in->stash, (size_t)cap * sizeof *n);
    if (!n) return false;
    in->stash = n;
    in->capstash = cap;
  }
  in->stash[in->nstash++] = m;
  return true;
}

/* The reply's status, headers and body, copied into one block. */
static int answer_copy(const m0__wire_reply *r, m0_answer *out) {
  size_t bytes = r->nhdrs * sizeof(m0_header) + r->body.n;
  for (size_t i = 0; i < r->nhdrs; i++) bytes += r->hdrs[i].name.n + r->hdrs[i].value.n;
  char *mem = malloc(bytes ? bytes : 1);
  if (!mem) return -1;
  m0_header *h = (m0_header *)mem;
  char *at = mem + r->nhdrs * sizeof(m0_header);
  for (size_t i = 0; i < r->nhdrs; i++) {
    memcpy(at, r->hdrs[i].name.p, r->hdrs[i].name.n);
    h[i].name = (m0_str){at, r->hdrs[i].name.n};
    at += r->hdrs[i].name.n;
    memcpy(at, r->hdrs[i].value.p, r->hdrs[i].value.n);
    h[i].value = (m0_str){at, r->hdrs[i].value.n};
    at += r->hdrs[i].value.n;
  }
  if (r->body.n) memcpy(at, r->body.p, r->body.n);
  *out = (m0_answer){r->status, h, r->nhdrs, {at, r->body.n}, mem};
  return 0;
}

/* Whether m is the REPLY to ask `id`, from the slot asked (`from`, the id
 * its service stamps on what comes through that slot's pipe) while that
 * slot still holds the instance asked (`gen`); fills out when it is. */
static bool ask_answered(const m0__msg *m, uint64_t id, uint32_t from, const m0__slot *sl, uint32_t gen,
                         m0_answer *out, int *rv) {
  if (m->env.kind != M0__K_REPLY || m->env.from != from || atomic_load(&sl->gen) != gen) return false;
  m0__wire_rd r;
  static _Thread_local m0__wire_reply rep;
  if (m0__wire_open(&r, m->payload, m->len) != 0 || m0__wire_next_reply(&r, &rep) == 0 || !rep.id_read ||
      rep.id != id)
    return false;
  *rv = rep.status >= 200 && rep.status <= 599 && rep.hdrs ? answer_copy(&rep, out) : -1;
  return true;
}

/* The service of the actor named `actor`, or NULL. */
static m0__service *ask_target(const m0__instance *in, const char *actor) {
  for (int i = 0; i < in->svc->nall; i++)
    if (!strcmp(in->svc->all[i]->name, actor)) return in->svc->all[i];
  return NULL;
}

/* The request (its path parameters left out) sent as ask `id` to slot k
 * of t, counted in flight: false when it was not (nothing counted). */
static bool ask_send(m0__instance *in, m0__service *t, int k, uint64_t id, const m0_request *req) {
  m0_request q = *req;
  q.params = NULL;
  q.nparams = 0;
  nng_msg *m;
  if (m0__wire_batch_new(&m, 256) != 0) return false;
  if (m0__wire_request_add(m, id, &q) != 0) {
    nng_msg_free(m);
    return false;
  }
  m0__peer to;
  m0__slot *sl = &t->slots[k];
  if (t->connected) m0__peer_pipe(&to, m0__service_slot_id(t, k), t->self.mailbox, m0__slot_pipe(sl));
  else m0__peer_direct(&to, m0__service_slot_id(t, k), sl->inbox);
  atomic_fetch_add(&sl->inflight, 1);
  atomic_fetch_add(&t->st->asking, 1); /* /metrics' in flight, with the loops' (host/metrics.c) */
  if (m0__send_msg(&in->self, &to, M0__K_REQUEST, req->trace_hi, req->trace_lo, m) != 0) {
    nng_msg_free(m);
    atomic_fetch_sub(&sl->inflight, 1);
    atomic_fetch_sub(&t->st->asking, 1);
    return false;
  }
  return true;
}

/* Waits up to timeout_ms for ask id's REPLY from slot k of t (generation
 * gen), keeping what else comes for later; its count in flight given back.
 * m0_ask's return. */
static int ask_wait(m0__instance *in, m0__service *t, int k, uint32_t gen, uint64_t id, unsigned timeout_ms,
                    m0_answer *out) {
  m0__slot *sl = &t->slots[k];
  int rv = -1;
  int64_t deadline = now_ms() + (timeout_ms ? timeout_ms : 1000);
  for (;;) {
    int64_t left = deadline - now_ms();
    if (left <= 0) break;
    nng_socket_set_ms(in->self.mailbox, NNG_OPT_RECVTIMEO, (nng_duration)left);
    m0__msg r;
    int got = m0__recv(&in->self, &r, M0__RECV_WAIT);
    if (got == M0__ETIMEDOUT || got == M0__EBADMSG) continue;
    if (got != 0) break;
    if (ask_answered(&r, id, m0__service_slot_id(t, k), sl, gen, out, &rv)) {
      m0__msg_free(&r);
      break;
    }
    if (r.env.kind == M0__K_REPLY) ask_refused(in, &r); /* an older ask's late answer, or not the asked one's */
    if (r.env.kind == M0__K_REPLY || !stash_keep(in, r.nmsg)) m0__msg_free(&r);
  }
  nng_socket_set_ms(in->self.mailbox, NNG_OPT_RECVTIMEO, NNG_DURATION_INFINITE);
  if (atomic_load(&sl->inflight) > 0) atomic_fetch_sub(&sl->inflight, 1);
  atomic_fetch_sub(&t->st->asking, 1);
  return rv;
}

int m0_ask(const char *actor, const m0_request *req, unsigned timeout_ms, m0_answer *out) {
  m0__instance *in = asking;
  if (!out) return -1;
  memset(out, 0, sizeof *out);
  if (!in || !actor || !req) return -1;
  m0__service *t = ask_target(in, actor);
  bool full;
  uint32_t gen;
  int k = t ? m0__service_pick(t, &full, &gen) : -1;
  if (k < 0) return -1;
  uint64_t id = (ASK_ID_TOP << 48) | (++in->ask_seq & 0xffffffffffffull);
  if (!ask_send(in, t, k, id, req)) return -1;
  return ask_wait(in, t, k, gen, id, timeout_ms, out);
}

void m0_answer_free(m0_answer *a) {
  if (!a) return;
  free(a->mem_);
  memset(a, 0, sizeof *a);
}

static void instance_run(m0__handle *h) {
  m0__instance *in = (m0__instance *)h;
  char err[512] = "";
  if (m0__peer_open(&in->coord, in->coord_id, in->coord_url, 1000) != 0) {
    fprintf(stderr, "m0: %s.%d cannot reach its coordinator at %s\n", in->svc->name, in->slot, in->coord_url);
    return;
  }
  if (in->kind->make) {
    atomic_store(&h->in_app, true);
    in->state = in->kind->make(&in->ctx, err, sizeof err);
    atomic_store(&h->in_app, false);
    if (!in->state) {
      if (!err[0]) snprintf(err, sizeof err, "actor %s: make failed on instance %d", in->kind->name, in->slot);
      atomic_store(&h->failed, true);
      atomic_store(&h->said_stopped, true);
      m0__tell(&in->self, &in->coord, M0__K_FAILED, err, strlen(err));
      return;
    }
  }
  /* A READY that cannot be sent (said on stderr: descriptors spent, say)
   * ends the thread: serving on, it would hold the barrier for ever. */
  if (m0__tell(&in->self, &in->coord, M0__K_READY, NULL, 0) == 0) instance_serve(in);
  if (in->kind->free && in->state) in->kind->free(in->state);
  in->state = NULL;
  atomic_store(&h->said_stopped, true);
}

static int instance_open(m0__handle *h) {
  m0__instance *in = (m0__instance *)h;
  uint32_t id = m0__service_slot_id(in->svc, in->slot);
  if (m0__actor_open(&in->self, id, in->url, in->trace) != 0) {
    fprintf(stderr, "m0: %s.%d cannot open its mailbox at %s\n", in->svc->name, in->slot, in->url);
    return M0__ETRANSPORT;
  }
  in->self.inbox = &in->inbox;
  in->svc->slots[in->slot].inbox = &in->inbox;
  return 0;
}

static void instance_hang_up(m0__handle *h) { m0__peer_close(&((m0__instance *)h)->coord); }
static void instance_release(m0__handle *h) { m0__actor_close(&((m0__instance *)h)->self); }

const m0__actor_kind m0__instance_kind = {"actor", instance_open, instance_run, instance_hang_up, instance_release};
