#include "service/instance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/admit.h"
#include "service/post.h"
#include "service/stream.h"
#include "service/wire.h"
#include "base/errors.h"
#include "http/response.h"

/* ---- the reply an instance writes (public: m0_reply_*) ---- */

#define REPLY_STORE 8192

struct m0_reply {
  nng_msg *out; /* the REPLY batch being written (a request's) */
  nng_msg *ret; /* a call's RETURN, once m0_reply_message made it */
  uint64_t id;  /* the request's, or the call's */
  bool sent;
  bool call;    /* answering a call (m0_reply_message), not a request */
  m0__streams *sx;   /* its instance's streams (service/stream.h), or NULL: none here */
  uint32_t self, to; /* the request's addressee (this instance) and asker: a stream's ends */
  m0__header_block hb; /* over hdrs and store */
  m0_header hdrs[M0__WIRE_MAX_HEADERS];
  char store[REPLY_STORE];
};

int m0_reply_header(m0_reply *rep, const char *name, const char *value) {
  if (!rep || rep->sent || rep->call || !name || !value) return -1;
  return m0__header_block_add(&rep->hb, name, strlen(name), value, strlen(value)) == 0 ? 0 : -1;
}

int m0_reply_send(m0_reply *rep, int status, const char *content_type, const void *body, size_t len) {
  if (!rep || rep->sent || rep->call || status < 200 || status > 599 || (len && !body)) return -1;
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

m0_writer *m0_reply_writer(m0_reply *rep, int status, const char *content_type) {
  if (!rep || rep->sent || rep->call || !rep->sx) return NULL;
  if (content_type && m0__header_block_add(&rep->hb, "Content-Type", 12, content_type, strlen(content_type)) != 0)
    return NULL;
  m0_writer *w = m0__streams_open(rep->sx, rep->self, rep->to, rep->id, status, rep->hdrs, rep->hb.n);
  rep->sent = w != NULL;
  return w;
}

int m0_reply_message(m0_reply *rep, uint32_t type, const void *data, size_t len) {
  if (!rep || rep->sent || !rep->call || (len && !data)) return -1;
  if (m0__wire_return_new(&rep->ret, rep->id, type, M0__RETURN_ANSWERED, data, len) != 0) return -1;
  rep->sent = true;
  return 0;
}

/* ---- m0_actor_exit: the instance ends after the current message ---- */

/* Set only around the kind's receive and message (m0_actor_exit elsewhere
 * is refused), and the word it gave, until the instance's loop took it. */
static _Thread_local bool instance_inside;
static _Thread_local bool instance_exit_set;
static _Thread_local char instance_exit_why[M0__EXIT_WHY_MAX];

int m0_actor_exit(const char *reason) {
  if (!instance_inside) return -1;
  const char *r = reason && reason[0] ? reason : "exit";
  size_t n = 0;
  for (; r[n] && n + 1 < sizeof instance_exit_why; n++)
    instance_exit_why[n] = r[n] < 0x20 || r[n] > 0x7e || r[n] == '"' || r[n] == '\\' ? '_' : r[n];
  instance_exit_why[n] = 0;
  instance_exit_set = true;
  return 0;
}

const char *m0__instance_exiting(void) { return instance_exit_set ? instance_exit_why : NULL; }
void m0__instance_exit_clear(void) { instance_exit_set = false; }

/* ---- answering, wherever the instance runs ---- */

/* An m0_ask from outside the host, come as a call (M0__MSG_ASK): its
 * request batch answered by receive, the reply batch returned as data. An
 * ask that cannot be answered (a batch that does not decode, a reply over
 * the envelope's limit, no memory) is still answered, with no answer: its
 * caller gets ENODATA at once, and the call is not taken for a send. */
static int instance_asked(const m0_actor_kind *kind, void *state, const m0__msg *m, const m0__wire_message *msg,
                          atomic_bool *in_app, nng_msg **ret) {
  nng_msg *out = NULL;
  m0__msg q = *m;
  q.payload = (const uint8_t *)msg->data.p;
  q.len = msg->data.n;
  int rv = m0__wire_batch_new(&out, 256);
  if (rv == 0) rv = m0__instance_answer(kind, state, &q, out, in_app, NULL, NULL);
  if (rv >= 0)
    rv = m0__wire_return_new(ret, msg->call, M0__MSG_ASK, M0__RETURN_ANSWERED,
                             (const uint8_t *)nng_msg_body(out) + M0__ENV_HEADER, nng_msg_len(out) - M0__ENV_HEADER);
  if (out) nng_msg_free(out);
  if (rv < 0 && m0__wire_return_new(ret, msg->call, 0, M0__RETURN_NONE, NULL, 0) != 0) return M0__ENOMEM;
  return 0;
}

int m0__instance_message(const m0_actor_kind *kind, void *state, const m0__msg *m, atomic_bool *in_app, bool ack,
                         nng_msg **ret) {
  m0__wire_message msg;
  *ret = NULL;
  if (m0__wire_message_read(m->payload, m->len, &msg) != 0) return M0__EBADMSG;
  static _Thread_local m0_reply rep;
  rep.out = rep.ret = NULL; /* field by field: zeroing the whole of it (its 8 KiB store) cost a quarter of a send */
  rep.id = msg.call;
  rep.sent = false;
  rep.call = true;
  if (msg.type == M0__MSG_ASK && msg.call) return instance_asked(kind, state, m, &msg, in_app, ret);
  if (kind->message) {
    if (in_app) atomic_store(in_app, true);
    m0__current_trace = (m0__trace_id){m->env.trace_hi, m->env.trace_lo};
    instance_inside = true;
    kind->message(state, msg.type, msg.data, msg.call ? &rep : NULL);
    instance_inside = false;
    m0__current_trace = (m0__trace_id){0, 0};
    if (in_app) atomic_store(in_app, false);
  }
  if (!msg.call && !ack) return 0;
  if (!rep.ret && m0__wire_return_new(&rep.ret, msg.call, 0, M0__RETURN_NONE, NULL, 0) != 0) return M0__ENOMEM;
  *ret = rep.ret;
  return 0;
}


int m0__instance_answer(const m0_actor_kind *kind, void *state, const m0__msg *m, nng_msg *out, atomic_bool *in_app,
                        m0__tracer *trace, m0__trace_ids *others) {
  return m0__instance_answer_sx(kind, state, m, out, in_app, trace, others, NULL);
}

int m0__instance_answer_sx(const m0_actor_kind *kind, void *state, const m0__msg *m, nng_msg *out,
                           atomic_bool *in_app, m0__tracer *trace, m0__trace_ids *others, m0__streams *sx) {
  m0__wire_rd r;
  if (m0__wire_open(&r, m->payload, m->len) != 0) return M0__EBADMSG;
  static _Thread_local m0__wire_request q;
  static _Thread_local m0_reply rep;
  int n = 0, rv = 0;
  /* After a receive that called m0_actor_exit the rest of the batch is
   * not taken: its requests get their 502 when the instance has left. */
  while (!instance_exit_set && (rv = m0__wire_next_request(&r, &q)) == 1) {
    rep.out = out;
    rep.id = q.id;
    rep.sent = rep.call = false;
    rep.sx = M0__ACTOR_ROLE(m->env.from) == M0__ROLE_LOOP ? sx : NULL; /* a stream goes to a connection */
    rep.self = m->env.to;
    rep.to = m->env.from;
    rep.hb = (m0__header_block){rep.hdrs, 0, M0__WIRE_MAX_HEADERS, rep.store, 0, REPLY_STORE};
    const m0__env *e = &m->env;
    if (trace && atomic_load_explicit(&m0__trace_live, memory_order_relaxed) && (q.req.trace_hi || q.req.trace_lo) &&
        (q.req.trace_hi != e->trace_hi || q.req.trace_lo != e->trace_lo)) {
      m0__trace_request(trace, true, e, m->len, q.req.trace_hi, q.req.trace_lo);
      (void)m0__trace_ids_add(others, e->trace_hi, e->trace_lo, q.req.trace_hi, q.req.trace_lo);
    }
    if (in_app) atomic_store(in_app, true);
    m0__current_trace = (m0__trace_id){q.req.trace_hi, q.req.trace_lo};
    instance_inside = true;
    kind->receive(state, &q.req, &rep);
    instance_inside = false;
    m0__current_trace = (m0__trace_id){0, 0};
    if (in_app) atomic_store(in_app, false);
    n += rep.sent;
  }
  return rv < 0 ? rv : n;
}

int m0__instance_reply_new(m0__reply_room *r, size_t req_len, nng_msg **out) {
  size_t want = req_len + 256;
  if (r->req && r->rep / r->req < 64) want = req_len * r->rep / r->req + req_len / 8 + 256;
  if (want > (1u << 20)) want = 1u << 20;
  if (r->spare && m0__wire_batch_reuse(r->spare, want) == 0) {
    *out = r->spare;
    r->spare = NULL;
    return 0;
  }
  return m0__wire_batch_new(out, want);
}

void m0__instance_reply_keep(m0__reply_room *r, nng_msg **req) {
  if (r->spare || !*req || nng_msg_capacity(*req) > M0__WIRE_SPARE_MAX) return;
  r->spare = *req;
  *req = NULL;
}

void m0__instance_reply_fini(m0__reply_room *r) {
  if (r->spare) nng_msg_free(r->spare);
  r->spare = NULL;
}

void m0__instance_reply_took(m0__reply_room *r, size_t req_len, nng_msg *out) {
  r->req = req_len;
  r->rep = m0__msg_payload_len(out);
}

/* ---- a thread instance ---- */

/* A call's MESSAGE answered (its RETURN to the caller), or a send's
 * handled: its count in flight given back (a caller's call gives its own). */
static void instance_message(m0__instance *in, const m0__msg *m) {
  m0__slot *sl = &in->svc->slots[in->slot];
  nng_msg *ret = NULL;
  if (m0__instance_message(in->kind, in->state, m, &in->h.in_app, false, &ret) != 0) {
    char from[48];
    m0__actor_name(m->env.from, from, sizeof from);
    fprintf(stderr, "m0: %s.%d: a malformed message from %s\n", in->svc->name, in->slot, from);
  }
  if (!ret) {
    if (atomic_load(&sl->inflight) > 0) atomic_fetch_sub(&sl->inflight, 1); /* a send's */
    return;
  }
  m0__inbox *caller = m0__service_reply_inbox(in->svc, m->env.from);
  m0__peer to;
  m0__peer_direct(&to, m->env.from, caller);
  if (caller && m0__send_msg(&in->self, &to, M0__K_RETURN, m->env.trace_hi, m->env.trace_lo, ret) == 0) return;
  if (!caller && m0__service_answered(in->svc, m0__service_slot_id(in->svc, in->slot), m->env.from, ret)) return;
  nng_msg_free(ret); /* the caller gave up: nothing waits for it */
}

/* A STREAM of this instance's to the loop that asked (service/stream.h). */
static int instance_stream_send(void *ctx, uint32_t from, uint32_t to, nng_msg *m) {
  m0__instance *in = ctx;
  m0__inbox *box = m0__service_reply_inbox(in->svc, to);
  if (!box) return M0__ENOTFOUND;
  m0__actor self = {.id = from, .trace = in->trace};
  m0__peer p;
  m0__peer_direct(&p, to, box);
  return m0__send_msg(&self, &p, M0__K_STREAM, 0, 0, m);
}

static void instance_serve(m0__instance *in) {
  m0__service *s = in->svc;
  m0__streams *sx = m0__streams_new(instance_stream_send, in); /* NULL: m0_reply_writer says NULL */
  m0__trace_ids others = {0}; /* while tracing: a REPLY's other requests' ids */
  m0__reply_room room = {0};
  m0__post_enter(in->post, m0__service_slot_id(s, in->slot)); /* m0_send, m0_call and m0_ask from receive: this host's */
  m0__service_noted(s, in->slot, M0_MSG_UP, "\"event\":\"up\"");
  for (;;) {
    m0__msg m = {0};
    int rv = m0__recv(&in->self, &m, M0__RECV_WAIT);
    if (rv == M0__EBADMSG) m0__msg_free(&m);
    if (rv == M0__ETIMEDOUT || rv == M0__EBADMSG) continue;
    if (rv != 0) break;
    if (m.env.kind == M0__K_STOP) {
      m0__msg_free(&m);
      break;
    }
    if (m.env.kind == M0__K_MESSAGE) {
      instance_message(in, &m);
      m0__msg_free(&m);
      if (m0__instance_exiting()) break;
      continue;
    }
    if (m.env.kind == M0__K_CREDIT) { /* a stream's room, or its client gone */
      if (sx) m0__streams_credit(sx, m.env.from, m.payload, m.len);
      m0__msg_free(&m);
      continue;
    }
    m0__inbox *reply_to = m0__service_reply_inbox(s, m.env.from);
    if (m.env.kind != M0__K_REQUEST || !reply_to) { /* not for an instance, or from no one waiting */
      atomic_fetch_add(&s->st->refused, 1);
      m0__msg_free(&m);
      continue;
    }
    nng_msg *out;
    if (m0__instance_reply_new(&room, m.len, &out) != 0) {
      m0__msg_free(&m);
      continue; /* its requests time out: 504 */
    }
    if (m0__instance_answer_sx(in->kind, in->state, &m, out, &in->h.in_app, in->trace, &others, sx) < 0) {
      char from[48];
      m0__actor_name(m.env.from, from, sizeof from);
      fprintf(stderr, "m0: %s.%d: a malformed request batch from %s\n", s->name, in->slot, from);
    }
    m0__instance_reply_took(&room, m.len, out);
    m0__instance_reply_keep(&room, &m.nmsg); /* read through: m.payload is not looked at again */
    m0__peer to;
    m0__peer_direct(&to, m.env.from, reply_to);
    if (others.n) m0__trace_batch((const uint64_t(*)[2])others.ids, others.n);
    if (m0__send_msg(&in->self, &to, M0__K_REPLY, m.env.trace_hi, m.env.trace_lo, out) != 0) nng_msg_free(out);
    m0__trace_batch(NULL, 0);
    others.n = 0;
    m0__msg_free(&m);
    if (m0__instance_exiting()) break;
  }
  m0__trace_ids_free(&others);
  m0__instance_reply_fini(&room);
  m0__streams_close(sx); /* its writers' writes fail from here */
  const char *why = m0__instance_exiting();
  snprintf(in->why, sizeof in->why, "%s", why ? why : "");
  m0__instance_exit_clear();
  if (!why && atomic_load(&in->taken_down)) why = "taken down by its supervisor";
  m0__service_slot_ended(s, in->slot, why); /* what the loops still wait for from it: 502 */
}

/* The kind's make: true with in->state (NULL when it has none), or false
 * with its refusal in err. */
static bool instance_make(m0__instance *in, char *err, size_t errlen) {
  err[0] = 0;
  in->state = NULL;
  if (!in->kind->make) return true;
  atomic_store(&in->h.in_app, true);
  in->state = in->kind->make(&in->ctx, err, errlen);
  atomic_store(&in->h.in_app, false);
  if (in->state) return true;
  if (!err[0]) snprintf(err, errlen, "actor %s: make failed on instance %d", in->kind->name, in->slot);
  return false;
}

/* What the ended instance left in its mailbox, let go before it is made
 * again: requests the loops have answered 502 already (the slot's
 * generation moved on at its end), and calls whose answer the post would
 * drop as the old instance's. A STOP among them is kept: false, the host
 * stops (no restart). */
static bool instance_left_over(m0__instance *in) {
  bool stop = false;
  for (;;) {
    m0__msg m = {0};
    int rv = m0__recv(&in->self, &m, M0__RECV_NOWAIT);
    if (rv != 0 && rv != M0__EBADMSG) return !stop;
    stop = stop || (rv == 0 && m.env.kind == M0__K_STOP);
    m0__msg_free(&m);
  }
}

/* Once serving ended: whether its supervisor (or its own budget) makes it
 * again (host/children.c, through in->again), a make refused counted as
 * one more end; true once made again and live. */
static bool instance_again(m0__instance *in) {
  char err[512];
  const char *why = in->why[0] ? in->why : NULL;
  if (!instance_left_over(in)) return false;
  for (;;) {
    bool go = false;
    if (in->gated) {
      bool taken = !why && atomic_exchange(&in->taken_down, false);
      pthread_mutex_lock(&in->gate);
      if (in->again) go = in->again(in->again_arg, in, why, taken);
      pthread_mutex_unlock(&in->gate);
    }
    if (!go) return false;
    if (instance_make(in, err, sizeof err)) break;
    snprintf(in->why, sizeof in->why, "its make refused: %.120s", err);
    for (char *c = in->why; *c; c++) *c = *c < 0x20 || *c > 0x7e || *c == '"' || *c == '\\' ? '_' : *c;
    why = in->why;
  }
  atomic_store_explicit(&in->svc->slots[in->slot].live, 1, memory_order_release);
  return true;
}

static void instance_run(m0__handle *h) {
  m0__instance *in = (m0__instance *)h;
  char err[512];
  if (m0__peer_open(&in->coord, in->coord_id, in->coord_url, 1000) != 0) {
    fprintf(stderr, "m0: %s.%d cannot reach its coordinator at %s\n", in->svc->name, in->slot, in->coord_url);
    return;
  }
  if (!instance_make(in, err, sizeof err)) {
    atomic_store(&h->failed, true);
    atomic_store(&h->said_stopped, true);
    m0__tell(&in->self, &in->coord, M0__K_FAILED, err, strlen(err));
    return;
  }
  /* Live before its READY: once the host says it serves (the barrier, the
   * return of m0_host_start), a call finds the instance; what comes waits
   * in its inbox until it serves. A READY that cannot be sent (said on
   * stderr: descriptors spent, say) ends the thread: serving on, it would
   * hold the barrier for ever. A restart (instance_again) says no READY:
   * the coordinator counts an instance once. */
  m0__slot *sl = &in->svc->slots[in->slot];
  atomic_store_explicit(&sl->live, 1, memory_order_release);
  bool serve = m0__tell(&in->self, &in->coord, M0__K_READY, NULL, 0) == 0;
  if (!serve) atomic_store_explicit(&sl->live, 0, memory_order_release);
  while (serve) {
    instance_serve(in);
    if (in->kind->free && in->state) in->kind->free(in->state);
    in->state = NULL;
    serve = instance_again(in);
  }
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
