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

static bool post_answer(void *arg, uint32_t from, uint32_t to, nng_msg *ret);

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
  if (!(p->boxes = m0__boxes_new(&p->callers, trace))) return M0__ENOMEM;
  p->boxes->answer = post_answer; /* a connected instance's call to a mailbox is answered on its link */
  p->boxes->answer_arg = p;
  pthread_mutex_init(&p->book_mu, NULL);
  p->trace = trace;
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
  m0__boxes_stop(p->boxes); /* first: a mailbox's reply reaches no caller after */
  m0__callers_fini(&p->callers);
  pthread_mutex_destroy(&p->book_mu);
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
  m0__service *svc; /* an actor's instance, or */
  int box;          /* a mailbox, held (m0__box_hold) until target_done; -1 none */
  int k;            /* the instance's slot */
  uint32_t gen;     /* its generation when picked */
  uint32_t id;      /* the instance's or mailbox's id: whom an answer must come from */
} target;

/* "echo" (any live instance, as a route picks), "echo.2" (that one), or a
 * mailbox's name: 0, or an errno. */
static int target_find(m0__post *p, const char *actor, target *t) {
  const char *dot = strchr(actor, '.');
  size_t n = dot ? (size_t)(dot - actor) : strlen(actor);
  *t = (target){.box = -1};
  for (int i = 0; i < p->nall && !t->svc; i++)
    if (strlen(p->all[i]->name) == n && !strncmp(p->all[i]->name, actor, n)) t->svc = p->all[i];
  if (!t->svc) {
    t->box = dot ? -1 : m0__box_hold(p->boxes, actor, n);
    t->id = M0__ACTOR_ID(M0__ROLE_MAILBOX, t->box);
    return t->box >= 0 ? 0 : ENOENT;
  }
  m0__service *s = t->svc;
  if (!dot) {
    bool full = false;
    t->k = m0__service_pick(s, &full, &t->gen);
    t->id = m0__service_slot_id(s, t->k);
    return t->k >= 0 ? 0 : full ? EAGAIN : EHOSTDOWN;
  }
  char *end;
  long k = strtol(dot + 1, &end, 10);
  if (*end || end == dot + 1 || k < 0 || k >= s->nslots) return ENOENT;
  m0__slot *sl = &s->slots[k];
  t->k = (int)k;
  t->id = m0__service_slot_id(s, t->k);
  t->gen = atomic_load_explicit(&sl->gen, memory_order_acquire);
  if (!atomic_load_explicit(&sl->live, memory_order_acquire)) return EHOSTDOWN;
  return atomic_load(&sl->inflight) < s->queue ? 0 : EAGAIN;
}

/* A mailbox found is given back (a send no longer holds it). */
static void target_done(m0__post *p, const target *t) {
  if (t->box >= 0) m0__box_release(p->boxes, t->box);
}

/* Whether the target is still the one found (an instance's slot not
 * replaced since). */
static bool target_same(const target *t) {
  return !t->svc || atomic_load(&t->svc->slots[t->k].gen) == t->gen;
}

/* A MESSAGE into mailbox t->box, within its bound. 0 or an errno. */
static int box_send(m0__post *p, m0__caller *c, const target *t, m0__trace_id trace, nng_msg *m) {
  m0__box *x = &p->boxes->box[t->box];
  if (atomic_fetch_add(&x->queued, 1) >= M0__BOX_QUEUE) {
    atomic_fetch_sub(&x->queued, 1);
    return EAGAIN;
  }
  m0__peer to;
  m0__peer_direct(&to, t->id, &x->inbox);
  if (m0__send_msg(&c->self, &to, M0__K_MESSAGE, trace.hi, trace.lo, m) == 0) return 0;
  atomic_fetch_sub(&x->queued, 1);
  return ENOMEM;
}

/* m sent from caller c to t's instance, counted in flight when `counted`
 * (a call gives its count back when it ends; a thread instance, a send's
 * once taken; a connected instance's send is not counted: its window
 * bounds it). A
 * MESSAGE to a connected instance waits for its window until deadline
 * (service.h), which it holds until its answer, or `until`. 0, or an errno
 * (m is still the caller's). */
static int target_send(m0__post *p, m0__caller *c, const target *t, int kind, m0__trace_id trace, nng_msg *m,
                       int64_t deadline, int64_t until, bool counted) {
  if (t->box >= 0) return kind == M0__K_MESSAGE ? box_send(p, c, t, trace, m) : ENOENT; /* no ask of a mailbox */
  m0__service *s = t->svc;
  m0__slot *sl = &s->slots[t->k];
  bool window = s->connected && kind == M0__K_MESSAGE;
  if (window && !m0__service_window_take(s, t->k, t->gen, deadline, until))
    return target_same(t) ? EAGAIN : EHOSTDOWN;
  m0__peer to;
  if (s->connected) m0__peer_pipe(&to, t->id, s->self.mailbox, m0__slot_pipe(sl));
  else m0__peer_direct(&to, t->id, sl->inbox);
  if (counted) atomic_fetch_add(&sl->inflight, 1);
  int rv = m0__send_msg(&c->self, &to, kind, trace.hi, trace.lo, m);
  if (rv == 0) return 0;
  if (counted) atomic_fetch_sub(&sl->inflight, 1);
  if (window) m0__service_window_give(s, t->k);
  return rv == M0__ENOMEM ? ENOMEM : EAGAIN; /* the instance's socket did not take it in time */
}

/* How long a send waits for a connected instance's window: as long as a
 * loop's send waits for a socket (runtime/actor.h's send timeout); and how
 * long the window waits for a send's acknowledgement before the next
 * message goes anyway (an instance that answers none still takes messages,
 * one a second, rather than none ever again). */
#define POST_SEND_WAIT_MS 100
#define POST_SEND_ANSWER_MS 1000
/* How long a connected instance's own call, passed on, is waited for here:
 * its own bound is the instance's, which the host is not told. */
#define POST_FORWARD_MS 60000
/* The name an instance's MESSAGE gives to have the host monitor an actor
 * for it (docs/wire.md, Monitors): no actor's or mailbox's ("." is not in
 * their names). */
#define POST_MONITOR "m0.monitor"

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
  nng_msg *m = NULL;
  if (why == 0 && (why = m0__wire_message_new(&m, 0, type, NULL, data, len)) != 0) why = wire_errno(why);
  m0__caller *c = why == 0 ? m0__caller_take(&p->callers, p == post_here ? post_as : 0) : NULL;
  if (why == 0)
    why = c ? target_send(p, c, &t, M0__K_MESSAGE, m0__current_trace, m, m0__now_ms() + POST_SEND_WAIT_MS,
                          m0__now_ms() + POST_SEND_ANSWER_MS, t.box < 0 && !t.svc->connected)
            : EAGAIN;
  if (c) m0__caller_give(&p->callers, c);
  target_done(p, &t);
  if (why == 0) return 0;
  if (m) nng_msg_free(m);
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

/* An answer the caller does not take (another call's, another instance's,
 * or from a slot since replaced): counted and named like the loops' (as
 * `reply` at the caller, or at the instance it acts for: runtime/admit.h). */
static void call_refused(m0__post *p, const m0__caller *c, const m0__env *e) {
  char who[48];
  atomic_fetch_add(&p->callers.dropped, 1);
  m0__actor_name(e->from, who, sizeof who);
  m0__refused(c->self.id, M0__REFUSE_REPLY, e->kind, who);
}

/* Waits on c's inbox until deadline for t's answer to w. 0 or an errno. */
static int call_wait(m0__post *p, m0__caller *c, const target *t, waiter *w, int64_t deadline) {
  for (;;) {
    nng_msg *n = m0__inbox_take(&c->inbox);
    if (!n) {
      int64_t left = deadline - m0__now_ms();
      if (left <= 0) return ETIMEDOUT;
      struct pollfd pf = {.fd = c->inbox.efd, .events = POLLIN};
      (void)poll(&pf, 1, (int)left);
      continue;
    }
    m0__env e = {0};
    const uint8_t *payload;
    size_t len;
    bool mine = false;
    int rv = 0;
    if (m0__env_read(nng_msg_body(n), nng_msg_len(n), &e, &payload, &len) == 0 && e.kind == w->kind &&
        e.from == t->id && target_same(t))
      rv = w->take(w, payload, len, &mine);
    nng_msg_free(n);
    if (mine) return rv;
    call_refused(p, c, &e); /* a late answer, or not the asked instance's */
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
  if (r.code == M0__RETURN_REFUSED) return r.data.n >= 4 ? (int)m0__le_get32((const uint8_t *)r.data.p) : EAGAIN;
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
    target_done(p, &t);
    nng_msg_free(m);
    return post_fail(why);
  }
  atomic_store(&c->call, w->call);
  if (t.svc) atomic_fetch_add(&t.svc->st->asking, 1); /* /metrics' in flight, with the loops' (host/metrics.c) */
  int64_t deadline = m0__now_ms() + (timeout_ms ? timeout_ms : 1000);
  if ((why = target_send(p, c, &t, kind, trace, m, deadline, deadline, true)) != 0) {
    nng_msg_free(m);
  } else {
    why = call_wait(p, c, &t, w, deadline);
    m0__slot *sl = t.svc ? &t.svc->slots[t.k] : NULL;
    if (sl && atomic_load(&sl->inflight) > 0) atomic_fetch_sub(&sl->inflight, 1);
  }
  if (t.svc) atomic_fetch_sub(&t.svc->st->asking, 1);
  target_done(p, &t);
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

static int reply_take(waiter *w, const uint8_t *payload, size_t len, bool *mine) {
  m0__wire_rd r;
  static _Thread_local m0__wire_reply rep;
  if (m0__wire_open(&r, payload, len) != 0 || m0__wire_next_reply(&r, &rep) == 0 || !rep.id_read ||
      rep.id != w->call)
    return 0;
  *mine = true;
  if (!rep.hdrs || rep.status < 200 || rep.status > 599) return ENODATA;
  return m0__wire_reply_copy(&rep, w->out);
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

/* ---- mailboxes: a thread of the program receives (service/boxes.h) ---- */

/* 1..48 bytes of [a-z0-9_-], as an actor's name. */
static bool name_ok(const char *name) {
  size_t n = name ? strlen(name) : 0;
  if (n == 0 || n > M0__NAME_MAX) return false;
  for (size_t i = 0; i < n; i++)
    if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') || name[i] == '_' || name[i] == '-'))
      return false;
  return true;
}

int m0__post_box_open(m0__post *p, const char *name) {
  if (!p) return post_fail(ENOENT);
  if (!name_ok(name)) return post_fail(EINVAL);
  for (int i = 0; i < p->nall; i++)
    if (!strcmp(p->all[i]->name, name)) return post_fail(EEXIST); /* an actor's name */
  int i = m0__box_open(p->boxes, name);
  return i >= 0 ? i : post_fail(-i);
}

/* ---- monitors ---- */

int m0__post_watch(m0__post *p, const char *actor, const char *watcher) {
  if (!p) return post_fail(ENOENT);
  for (int i = 0; i < p->nall; i++)
    if (!strcmp(p->all[i]->name, actor)) {
      int rv = name_ok(watcher) ? m0__boxes_watch(p->boxes, i, watcher) : -EINVAL;
      return rv == 0 || rv == -EEXIST ? 0 : post_fail(-rv);
    }
  return post_fail(ENOENT);
}

static void post_note(void *arg, const m0__service *s, int k, uint32_t type, const char *why) {
  m0__post *p = arg;
  char note[512], who[64];
  if (k >= 0) snprintf(who, sizeof who, "\"%s.%d\"", s->name, k);
  else snprintf(who, sizeof who, "null");
  int n = snprintf(note, sizeof note, "{\"actor\":\"%s\",\"instance\":%s,%s}", s->name, who, why);
  if (n < 0 || (size_t)n >= sizeof note) return;
  m0__watch w[M0__WATCHES];
  int nw = 0;
  pthread_mutex_lock(&p->boxes->mu);
  for (int i = 0; i < p->boxes->nwatch; i++)
    if (p->boxes->watch[i].actor == s->index) w[nw++] = p->boxes->watch[i];
  pthread_mutex_unlock(&p->boxes->mu);
  int saved = errno;
  for (int i = 0; i < nw; i++)
    if (m0__post_send(p, w[i].watcher, type, note, (size_t)n) != 0) atomic_fetch_add(&p->boxes->missed, 1);
  errno = saved;
}

/* ---- an instance on a connection sends and calls (service/remote.h) ---- */

/* Connected instance `to`'s link (its pipe on its actor's socket), as a
 * peer; false when it is no connected instance of this host's. */
static bool post_link(const m0__post *p, uint32_t to, m0__peer *out) {
  int idx = M0__ACTOR_INDEX(to), k = idx & 0xfff;
  if (M0__ACTOR_ROLE(to) != M0__ROLE_APP || (idx >> 12) >= p->nall) return false;
  m0__service *s = p->all[idx >> 12];
  if (!s->connected || k >= s->nslots) return false;
  nng_pipe pipe = m0__slot_pipe(&s->slots[k]);
  if (nng_pipe_id(pipe) <= 0) return false;
  m0__peer_pipe(out, to, s->self.mailbox, pipe);
  return true;
}

/* The book of calls passed on: (asker, call) -> the one who must answer it,
 * until when. false when full (every entry still waited for). */
static bool book_add(m0__post *p, uint32_t asker, uint64_t call, uint32_t answerer, int64_t until) {
  int64_t now = m0__now_ms();
  bool added = false;
  pthread_mutex_lock(&p->book_mu);
  for (int i = 0; i < M0__FORWARDS && !added; i++)
    if (!p->book[i].call || p->book[i].until < now) {
      p->book[i] = (m0__forward){asker, answerer, call, until};
      added = true;
    }
  pthread_mutex_unlock(&p->book_mu);
  return added;
}

/* Whether asker's call `call` waits for answerer's answer (then it waits no
 * more). */
static bool book_take(m0__post *p, uint32_t asker, uint64_t call, uint32_t answerer) {
  bool found = false;
  pthread_mutex_lock(&p->book_mu);
  for (int i = 0; i < M0__FORWARDS && !found; i++) {
    m0__forward *f = &p->book[i];
    if (f->call == call && f->asker == asker && f->target == answerer) {
      f->call = 0;
      found = true;
    }
  }
  pthread_mutex_unlock(&p->book_mu);
  return found;
}

/* The hooks' answer: a RETURN from `from` to connected instance `to`, taken
 * only for a call of `to`'s this host passed on to `from` and still in the
 * book (a forged or late one is not: the service counts it). */
static bool post_answer(void *arg, uint32_t from, uint32_t to, nng_msg *ret) {
  m0__post *p = arg;
  m0__peer back;
  if (nng_msg_len(ret) < M0__ENV_HEADER + M0__WIRE_RETURN_FIXED || !post_link(p, to, &back)) return false;
  uint64_t call = m0__le_get64((const uint8_t *)nng_msg_body(ret) + M0__ENV_HEADER);
  if (!call || !book_take(p, to, call, from)) return false;
  m0__caller *c = m0__caller_take(&p->callers, from);
  bool sent = c && m0__send_msg(&c->self, &back, M0__K_RETURN, 0, 0, ret) == 0;
  if (c) m0__caller_give(&p->callers, c);
  if (!sent) nng_msg_free(ret); /* the asker's link is gone: nobody waits */
  return true;
}

/* The host's own RETURN to instance `from`'s call, back on its link. */
static void post_return(m0__post *p, m0__caller *c, uint32_t from, uint64_t call, uint32_t code, const void *data,
                        size_t n) {
  m0__peer back;
  nng_msg *m;
  if (!call || !post_link(p, from, &back) || m0__wire_return_new(&m, call, 0, code, data, n) != 0) return;
  if (m0__send_msg(&c->self, &back, M0__K_RETURN, 0, 0, m) != 0) nng_msg_free(m);
}

/* A call of instance `from` the host could not pass on: a RETURN saying
 * why (an errno), back on its link. */
static void post_refuse(m0__post *p, m0__caller *c, uint32_t from, uint64_t call, int err) {
  uint8_t why[4];
  m0__le_put32(why, (uint32_t)err);
  post_return(p, c, from, call, M0__RETURN_REFUSED, why, 4);
}

/* Slot k's instance asks the host to monitor the actor msg's data names
 * for its own actor (docs/wire.md, Monitors): s is the watcher, so the
 * notes go to s's instances as sends. Answered 0 (empty) or refused with
 * the errno m0_monitor would give. */
static void post_monitor(m0__post *p, m0__service *s, int k, const m0__wire_message *msg) {
  uint32_t from = m0__service_slot_id(s, k);
  char actor[M0__WIRE_NAME_MAX + 1];
  int why = msg->data.n && msg->data.n <= M0__WIRE_NAME_MAX ? 0 : EINVAL;
  if (!why) {
    memcpy(actor, msg->data.p, msg->data.n);
    actor[msg->data.n] = 0;
    why = m0__post_watch(p, actor, s->name) == 0 ? 0 : errno;
  }
  m0__caller *c = m0__caller_take(&p->callers, from);
  if (!c) return; /* no caller free: the instance's call waits out its bound */
  if (why) post_refuse(p, c, from, msg->call, why);
  else post_return(p, c, from, msg->call, M0__RETURN_ANSWERED, NULL, 0);
  m0__caller_give(&p->callers, c);
}

/* Slot k's instance sends or calls `name`: passed on from the instance's
 * id; a call is written in the book, so that its answer (a RETURN to that
 * id) goes back on its link (post_answer). A call's count in flight is not
 * kept (nobody here waits to give it back). Runs on the service's reply
 * thread: a window busy past 100 ms refuses. A MESSAGE that does not decode
 * is refused and counted (`message`). */
static void post_message(void *arg, m0__service *s, int k, m0__msg *m) {
  m0__post *p = arg;
  m0__wire_message msg;
  char name[M0__WIRE_NAME_MAX + 1], peer[96];
  uint32_t from = m0__service_slot_id(s, k);
  if (m0__wire_message_read(m->payload, m->len, &msg) != 0 || !msg.name.n) {
    atomic_fetch_add(&s->st->refused, 1);
    m0__msg_peer(m, peer, sizeof peer);
    m0__refused(s->self.id, M0__REFUSE_MESSAGE, M0__K_MESSAGE, peer);
    m0__msg_free(m);
    return;
  }
  memcpy(name, msg.name.p, msg.name.n);
  name[msg.name.n] = 0;
  if (!strcmp(name, POST_MONITOR)) {
    post_monitor(p, s, k, &msg);
    m0__msg_free(m);
    return;
  }
  m0__caller *c = m0__caller_take(&p->callers, from);
  target t = {.box = -1};
  nng_msg *out = NULL;
  int64_t now = m0__now_ms();
  int why = c ? target_find(p, name, &t) : EAGAIN;
  if (why == 0 && (why = m0__wire_message_new(&out, msg.call, msg.type, NULL, msg.data.p, msg.data.n)) != 0)
    why = wire_errno(why);
  if (why == 0 && msg.call && !book_add(p, from, msg.call, t.id, now + POST_FORWARD_MS)) why = EAGAIN;
  m0__trace_id trace = {m->env.trace_hi, m->env.trace_lo};
  if (why == 0)
    why = target_send(p, c, &t, M0__K_MESSAGE, trace, out, now + POST_SEND_WAIT_MS,
                      now + (msg.call ? POST_FORWARD_MS : POST_SEND_ANSWER_MS), !msg.call && t.box < 0 && !t.svc->connected);
  if (why != 0) {
    if (out) nng_msg_free(out);
    if (msg.call) book_take(p, from, msg.call, t.id);
    if (c) post_refuse(p, c, from, msg.call, why);
  }
  target_done(p, &t);
  if (c) m0__caller_give(&p->callers, c);
  m0__msg_free(m);
}

const m0__service_hooks m0__post_hooks = {.note = post_note, .answer = post_answer, .message = post_message};
