#include "service/post.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "runtime/admit.h"
#include "runtime/trace.h"
#include "http/response.h"
#include "service/wire.h"

/* ---- the process's posts ---- */

/* The one list of the process's hosts' posts (service/post.h): a thread
 * that names no host is given the only one. */
static pthread_mutex_t posts_mu = PTHREAD_MUTEX_INITIALIZER;
static m0__post *posts;
static _Thread_local m0__post *post_here;
static _Thread_local uint32_t post_as; /* the thread instance this thread is (its id), or 0 */

int m0__post_init(m0__post *p, m0__service *const *all, int nall, m0__tracer *trace) {
  memset(p, 0, sizeof *p);
  m0__callers_init(&p->callers, trace);
  p->all = all;
  p->nall = nall;
  pthread_mutex_lock(&posts_mu);
  p->next = posts;
  posts = p;
  pthread_mutex_unlock(&posts_mu);
  return 0;
}

void m0__post_fini(m0__post *p) {
  pthread_mutex_lock(&posts_mu);
  for (m0__post **at = &posts; *at; at = &(*at)->next)
    if (*at == p) {
      *at = p->next;
      break;
    }
  pthread_mutex_unlock(&posts_mu);
  m0__callers_fini(&p->callers);
}

void m0__post_enter(m0__post *p, uint32_t as) {
  post_here = p;
  post_as = as;
}

m0__post *m0__post_current(void) {
  if (post_here) return post_here;
  pthread_mutex_lock(&posts_mu);
  m0__post *p = posts && !posts->next ? posts : NULL;
  pthread_mutex_unlock(&posts_mu);
  return p;
}

/* ---- names ---- */

typedef struct target {
  m0__service *svc;
  int k;        /* the instance's slot */
  uint32_t gen; /* its generation when picked */
} target;

/* "echo" (any live instance, as a route picks) or "echo.2" (that one): 0,
 * or an errno. */
static int target_find(const m0__post *p, const char *actor, target *t) {
  const char *dot = strchr(actor, '.');
  size_t n = dot ? (size_t)(dot - actor) : strlen(actor);
  t->svc = NULL;
  for (int i = 0; i < p->nall && !t->svc; i++)
    if (strlen(p->all[i]->name) == n && !strncmp(p->all[i]->name, actor, n)) t->svc = p->all[i];
  if (!t->svc) return ENOENT;
  m0__service *s = t->svc;
  if (!dot) {
    bool full = false;
    t->k = m0__service_pick(s, &full, &t->gen);
    return t->k >= 0 ? 0 : full ? EAGAIN : EHOSTDOWN;
  }
  char *end;
  long k = strtol(dot + 1, &end, 10);
  if (*end || end == dot + 1 || k < 0 || k >= s->nslots) return ENOENT;
  m0__slot *sl = &s->slots[k];
  t->k = (int)k;
  t->gen = atomic_load_explicit(&sl->gen, memory_order_acquire);
  if (!atomic_load_explicit(&sl->live, memory_order_acquire)) return EHOSTDOWN;
  return atomic_load(&sl->inflight) < s->queue ? 0 : EAGAIN;
}

/* m sent from caller c to t's instance, counted in flight (a call gives
 * its count back when it ends; a thread instance, a send's once taken). A
 * MESSAGE to a connected instance waits for its window until deadline
 * (service.h). 0, or an errno (m is still the caller's). */
static int target_send(m0__caller *c, const target *t, int kind, m0__trace_id trace, nng_msg *m, int64_t deadline) {
  m0__service *s = t->svc;
  m0__slot *sl = &s->slots[t->k];
  bool window = s->connected && kind == M0__K_MESSAGE;
  if (window && !m0__service_window_take(s, t->k, t->gen, deadline))
    return atomic_load(&sl->gen) == t->gen ? EAGAIN : EHOSTDOWN;
  m0__peer to;
  if (s->connected) m0__peer_pipe(&to, m0__service_slot_id(s, t->k), s->self.mailbox, m0__slot_pipe(sl));
  else m0__peer_direct(&to, m0__service_slot_id(s, t->k), sl->inbox);
  atomic_fetch_add(&sl->inflight, 1);
  int rv = m0__send_msg(&c->self, &to, kind, trace.hi, trace.lo, m);
  if (rv == 0) return 0;
  atomic_fetch_sub(&sl->inflight, 1);
  if (window) m0__service_window_give(s, t->k);
  return rv == M0__ENOMEM ? ENOMEM : EAGAIN; /* the instance's socket did not take it in time */
}

/* How long a send waits for a connected instance's window: as long as a
 * loop's send waits for a socket (runtime/actor.h's send timeout). */
#define POST_SEND_WAIT_MS 100

/* The edge of the post: errno set to err, and the m0__err that says it. */
static int post_fail(int err) {
  errno = err;
  switch (err) {
  case ENOMEM: return M0__ENOMEM;
  case EMSGSIZE: return M0__ETOOBIG;
  case ETIMEDOUT: return M0__ETIMEDOUT;
  case ENOENT: return M0__EINVALID;
  default: return M0__ECLOSED;
  }
}

/* A wire builder's m0__err as an errno. */
static int wire_errno(int rv) { return rv == M0__ETOOBIG ? EMSGSIZE : ENOMEM; }

int m0__post_send(m0__post *p, const char *actor, uint32_t type, const void *data, size_t len) {
  if (!p || !actor) return post_fail(ENOENT);
  target t;
  int why = target_find(p, actor, &t);
  if (why != 0) return post_fail(why);
  nng_msg *m;
  if ((why = m0__wire_message_new(&m, 0, type, NULL, data, len)) != 0) return post_fail(wire_errno(why));
  m0__caller *c = m0__caller_take(&p->callers, p == post_here ? post_as : 0);
  why = c ? target_send(c, &t, M0__K_MESSAGE, m0__current_trace, m, m0__service_now_ms() + POST_SEND_WAIT_MS)
          : EAGAIN;
  if (c) m0__caller_give(&p->callers, c);
  if (why == 0) return 0;
  nng_msg_free(m);
  return post_fail(why);
}

/* ---- waiting for the answer ---- */

/* What a call waits for: its kind (RETURN, or REPLY for an ask), and what
 * it fills when the answer comes (take: 0, or an errno). */
typedef struct waiter {
  int kind;
  uint64_t call;
  int (*take)(struct waiter *w, const uint8_t *payload, size_t len, bool *mine);
  void *out;
} waiter;

/* Waits on c's inbox until deadline for t's answer to w. 0 or an errno. */
static int call_wait(m0__post *p, m0__caller *c, const target *t, waiter *w, int64_t deadline) {
  uint32_t from = m0__service_slot_id(t->svc, t->k);
  const m0__slot *sl = &t->svc->slots[t->k];
  for (;;) {
    nng_msg *n = m0__inbox_take(&c->inbox);
    if (!n) {
      int64_t left = deadline - m0__service_now_ms();
      if (left <= 0) return ETIMEDOUT;
      struct pollfd pf = {.fd = c->inbox.efd, .events = POLLIN};
      (void)poll(&pf, 1, (int)left);
      continue;
    }
    m0__env e;
    const uint8_t *payload;
    size_t len;
    bool mine = false;
    int rv = 0;
    if (m0__env_read(nng_msg_body(n), nng_msg_len(n), &e, &payload, &len) == 0 && e.kind == w->kind &&
        e.from == from && atomic_load(&sl->gen) == t->gen)
      rv = w->take(w, payload, len, &mine);
    nng_msg_free(n);
    if (mine) return rv;
    atomic_fetch_add(&p->callers.dropped, 1); /* a late answer, or not the asked instance's */
  }
}

typedef struct message_out {
  uint32_t *type;
  m0_str *data;
  void **mem;
} message_out;

static int message_take(waiter *w, const uint8_t *payload, size_t len, bool *mine) {
  m0__wire_message r;
  if (m0__wire_return_read(payload, len, &r) != 0 || r.call != w->call) return 0;
  *mine = true;
  if (r.code != M0__RETURN_ANSWERED) return ENODATA;
  message_out *o = w->out;
  char *mem = malloc(r.data.n ? r.data.n : 1);
  if (!mem) return ENOMEM;
  if (r.data.n) memcpy(mem, r.data.p, r.data.n);
  *o->type = r.type;
  *o->data = (m0_str){mem, r.data.n};
  *o->mem = mem;
  return 0;
}

/* Sends m (kind) to actor as call w and waits for its answer. 0 or a
 * negative m0__err with errno. m is consumed. */
static int post_call(m0__post *p, const char *actor, int kind, m0__trace_id trace, nng_msg *m, waiter *w,
                     unsigned timeout_ms) {
  target t;
  int why = target_find(p, actor, &t);
  m0__caller *c = why == 0 ? m0__caller_take(&p->callers, p == post_here ? post_as : 0) : NULL;
  if (why == 0 && !c) why = EAGAIN;
  if (why != 0) {
    nng_msg_free(m);
    return post_fail(why);
  }
  atomic_store(&c->call, w->call);
  atomic_fetch_add(&t.svc->st->asking, 1); /* /metrics' in flight, with the loops' (host/metrics.c) */
  int64_t deadline = m0__service_now_ms() + (timeout_ms ? timeout_ms : 1000);
  if ((why = target_send(c, &t, kind, trace, m, deadline)) != 0) {
    nng_msg_free(m);
  } else {
    why = call_wait(p, c, &t, w, deadline);
    m0__slot *sl = &t.svc->slots[t.k];
    if (atomic_load(&sl->inflight) > 0) atomic_fetch_sub(&sl->inflight, 1);
  }
  atomic_fetch_sub(&t.svc->st->asking, 1);
  m0__caller_give(&p->callers, c);
  return why == 0 ? 0 : post_fail(why);
}

int m0__post_call(m0__post *p, const char *actor, uint32_t type, const void *data, size_t len, unsigned timeout_ms,
                  uint32_t *out_type, m0_str *out_data, void **out_mem) {
  if (!p || !actor) return post_fail(ENOENT);
  message_out o = {out_type, out_data, out_mem};
  waiter w = {M0__K_RETURN, atomic_fetch_add(&p->calls, 1) + 1, message_take, &o};
  nng_msg *m;
  int why = m0__wire_message_new(&m, w.call, type, NULL, data, len);
  return why ? post_fail(wire_errno(why)) : post_call(p, actor, M0__K_MESSAGE, m0__current_trace, m, &w, timeout_ms);
}

/* ---- m0_ask: an HTTP-shaped call ---- */

/* The reply's status, headers and body, copied into one block. */
static int answer_copy(const m0__wire_reply *r, m0_answer *out) {
  size_t bytes = r->nhdrs * sizeof(m0_header) + r->body.n;
  for (size_t i = 0; i < r->nhdrs; i++) bytes += r->hdrs[i].name.n + r->hdrs[i].value.n;
  char *mem = malloc(bytes ? bytes : 1);
  if (!mem) return ENOMEM;
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

static int reply_take(waiter *w, const uint8_t *payload, size_t len, bool *mine) {
  m0__wire_rd r;
  static _Thread_local m0__wire_reply rep;
  if (m0__wire_open(&r, payload, len) != 0 || m0__wire_next_reply(&r, &rep) == 0 || !rep.id_read ||
      rep.id != w->call)
    return 0;
  *mine = true;
  if (!rep.hdrs || rep.status < 200 || rep.status > 599) return ENODATA;
  return answer_copy(&rep, w->out);
}

int m0__post_ask(m0__post *p, const char *actor, const m0_request *req, unsigned timeout_ms, m0_answer *out) {
  if (!p || !actor || !req) return post_fail(ENOENT);
  m0_request q = *req;
  q.params = NULL; /* path parameters are the route's, not the actor's */
  q.nparams = 0;
  waiter w = {M0__K_REPLY, atomic_fetch_add(&p->calls, 1) + 1, reply_take, out};
  nng_msg *m;
  int why = m0__wire_batch_new(&m, 256);
  if (why == 0 && (why = m0__wire_request_add(m, w.call, &q)) != 0) nng_msg_free(m);
  m0__trace_id trace = {req->trace_hi, req->trace_lo};
  return why ? post_fail(wire_errno(why)) : post_call(p, actor, M0__K_REQUEST, trace, m, &w, timeout_ms);
}
