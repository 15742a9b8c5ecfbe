#include "actors/instance.h"

#include <stdio.h>
#include <string.h>

#include "actors/wire.h"
#include "base/errors.h"
#include "http/response.h"

/* ---- the reply an instance writes (public: m0_reply_*) ---- */

#define REPLY_STORE 8192

struct m0_reply {
  nng_msg *out;
  uint64_t id;
  bool sent;
  size_t nh, used;
  m0_header hdrs[M0__WIRE_MAX_HEADERS];
  char store[REPLY_STORE];
};

static int reply_add_header(m0_reply *rep, const char *name, size_t nl, const char *value, size_t vl) {
  if (rep->sent || !m0__wire_header_ok(name, nl, value, vl) || rep->nh >= M0__WIRE_MAX_HEADERS ||
      rep->used + nl + vl > REPLY_STORE)
    return -1;
  char *at = rep->store + rep->used;
  memcpy(at, name, nl);
  memcpy(at + nl, value, vl);
  rep->hdrs[rep->nh++] = (m0_header){{at, nl}, {at + nl, vl}};
  rep->used += nl + vl;
  return 0;
}

int m0_reply_header(m0_reply *rep, const char *name, const char *value) {
  if (!rep || !name || !value) return -1;
  return reply_add_header(rep, name, strlen(name), value, strlen(value));
}

int m0_reply_send(m0_reply *rep, int status, const char *content_type, const void *body, size_t len) {
  if (!rep || rep->sent || status < 200 || status > 599 || (len && !body)) return -1;
  size_t nh = rep->nh;
  if (content_type && reply_add_header(rep, "Content-Type", 12, content_type, strlen(content_type)) != 0) return -1;
  if (m0__wire_reply_add(rep->out, rep->id, status, rep->hdrs, rep->nh, body, len) != 0) {
    rep->nh = nh; /* the content type added above goes again: nothing was sent */
    return -1;
  }
  rep->sent = true;
  return 0;
}

/* ---- answering a batch, wherever the instance runs ---- */

int m0__instance_answer(const m0_actor_kind *kind, void *state, const uint8_t *payload, size_t len, nng_msg *out,
                        atomic_bool *in_app) {
  m0__wire_rd r;
  if (m0__wire_open(&r, payload, len) != 0) return M0__EBADMSG;
  static _Thread_local m0__wire_request q;
  static _Thread_local m0_reply rep;
  int n = 0, rv;
  while ((rv = m0__wire_next_request(&r, &q)) == 1) {
    rep.out = out;
    rep.id = q.id;
    rep.sent = false;
    rep.nh = rep.used = 0;
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

static void instance_serve(m0__instance *in) {
  m0__service *s = in->svc;
  m0__slot *sl = &s->slots[in->slot];
  atomic_store_explicit(&sl->live, 1, memory_order_release);
  for (;;) {
    m0__msg m;
    int rv = m0__recv(&in->self, &m, M0__RECV_WAIT);
    if (rv == M0__ETIMEDOUT || rv == M0__EBADMSG) continue;
    if (rv != 0) break;
    if (m.env.kind == M0__K_STOP) {
      m0__msg_free(&m);
      break;
    }
    int loop = M0__ACTOR_INDEX(m.env.from) - s->loop_base;
    if (m.env.kind != M0__K_REQUEST || M0__ACTOR_ROLE(m.env.from) != M0__ROLE_LOOP || loop < 0 || loop >= s->nloops) {
      atomic_fetch_add(&s->st.refused, 1);
      m0__msg_free(&m);
      continue;
    }
    nng_msg *out;
    if (m0__wire_batch_new(&out, 256) != 0) {
      m0__msg_free(&m);
      continue; /* its requests time out: 504 */
    }
    if (m0__instance_answer(in->kind, in->state, m.payload, m.len, out, &in->h.in_app) < 0)
      fprintf(stderr, "m0: %s.%d: a malformed request batch from loop.%d\n", s->name, in->slot, loop + s->loop_base);
    m0__peer to;
    m0__peer_direct(&to, m.env.from, s->loop_inbox[loop]);
    if (m0__send_msg(&in->self, &to, M0__K_REPLY, m.env.trace_hi, m.env.trace_lo, out) != 0) nng_msg_free(out);
    m0__msg_free(&m);
  }
  atomic_store_explicit(&sl->live, 0, memory_order_release);
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
  m0__tell(&in->self, &in->coord, M0__K_READY, NULL, 0);
  instance_serve(in);
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
