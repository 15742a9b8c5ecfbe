/* An actor placed "nats": the host's side (service/nats.h says how). */
#include "service/nats.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/errors.h"
#include "bus/natsopt.h"
#include "runtime/actor.h"
#include "runtime/admit.h"
#include "runtime/edges.h"
#include "runtime/kinds.h"
#include "service/wire.h"

#define NATS_POLL_MS 100   /* the forwarder looks at quit this often */
#define NATS_CLOSE_MS 5000 /* libnats's last callbacks are waited for this long */
#define NATS_PENDING_MSGS 65536           /* answers libnats holds for the callback at most ... */
#define NATS_PENDING_BYTES (64 << 20)     /* ... and their bytes: past either it drops (service/nats.h) */

/* libnats says the answers' subscription or the connection is over: no
 * callback of it runs after this one. */
static void nats_over(m0__nats *n, bool conn) {
  pthread_mutex_lock(&n->mu);
  if (conn) n->conn_over = true;
  else n->sub_over = true;
  pthread_cond_broadcast(&n->over);
  pthread_mutex_unlock(&n->mu);
}
static void nats_sub_over(void *arg) { nats_over(arg, false); }
static void nats_conn_over(natsConnection *nc, void *arg) {
  (void)nc;
  nats_over(arg, true);
}

/* Every lane live (the connection is up) or gone (it is not): a lane that
 * goes is left as an instance leaves (service/left.c), so its loops answer
 * what it had 502 at once. */
static void nats_lanes(m0__nats *n, bool up) {
  m0__service *s = n->s;
  bool was = atomic_exchange(&n->up, up);
  for (int k = 0; k < s->nslots && was != up; k++) {
    if (up) {
      atomic_store_explicit(&s->slots[k].live, 1, memory_order_release);
      m0__service_noted(s, k, M0_MSG_UP, "\"event\":\"up\""); /* monitors hear the lane back, as they heard it go */
    } else {
      m0__service_slot_ended(s, k, "its NATS connection is down");
    }
  }
}

static void nats_on_up(natsConnection *nc, void *arg) {
  (void)nc;
  m0__nats *n = arg;
  if (atomic_load(&n->closing)) return;
  fprintf(stderr, "m0: actor %s: NATS %s is up; serving through subject %s\n", n->s->name, n->shown, n->subject);
  nats_lanes(n, true);
}

static void nats_on_down(natsConnection *nc, void *arg) {
  (void)nc;
  m0__nats *n = arg;
  if (atomic_load(&n->closing)) return;
  fprintf(stderr, "m0: actor %s: NATS %s is down; its requests answer 503 until it is back\n", n->s->name, n->shown);
  nats_lanes(n, false);
}

/* libnats's thread: the answers' subscription past its pending limits,
 * what it dropped counted as the actor's refusals (reason reply). */
static void nats_on_error(natsConnection *nc, natsSubscription *sub, natsStatus err, void *arg) {
  (void)nc;
  m0__nats *n = arg;
  int64_t dropped = 0;
  if (atomic_load(&n->closing) || err != NATS_SLOW_CONSUMER || sub != n->sub ||
      natsSubscription_GetDropped(sub, &dropped) != NATS_OK)
    return;
  uint32_t self = M0__ACTOR_ID(M0__ROLE_APP, M0__APP_INDEX(n->s->index, 0xfff));
  for (; n->dropped < dropped; n->dropped++)
    m0__refused(self, M0__REFUSE_REPLY, M0__K_REPLY, "NATS (answers dropped: slow consumer)");
}

/* m (a whole message, header space first) as `kind` from lane to `to`: a
 * loop's or a waiting caller's inbox, or the answer to a connected
 * instance's own call (service/post.h). Freed when nothing takes it. */
static void nats_deliver(m0__nats *n, uint32_t to, int lane, int kind, nng_msg *m) {
  m0__service *s = n->s;
  uint32_t from = m0__service_slot_id(s, lane);
  m0__env e = {.kind = (uint16_t)kind, .from = from, .to = to};
  m0__env_write(nng_msg_body(m), &e, (uint32_t)(nng_msg_len(m) - M0__ENV_HEADER));
  m0__inbox *in = m0__service_reply_inbox(s, to);
  if (in && m0__inbox_put(in, m) == 0) {
    m0__edge_sent(from, to, kind);
    return;
  }
  if (!in && kind == M0__K_RETURN && m0__service_answered(s, from, to, m)) return;
  nng_msg_free(m);
}

/* Every request of REQUEST req answered `status` (502: its reply did not
 * decode; 503: no instance, or the connection cannot take it). */
static void nats_answer_all(m0__nats *n, const m0__nats_pending *p, int status) {
  m0__wire_rd r;
  m0__wire_request q;
  nng_msg *out;
  const uint8_t *pl = m0__msg_payload(p->req);
  if (m0__wire_batch_new(&out, 64) != 0) return;
  if (m0__wire_open(&r, pl, m0__msg_payload_len(p->req)) == 0)
    while (m0__wire_next_request(&r, &q) == 1) (void)m0__wire_reply_add(out, q.id, status, NULL, 0, NULL, 0);
  uint32_t count = m0__wire_batch_count(out);
  _Atomic uint64_t *c = status == 502 ? &n->s->st->bad_reply : &n->s->st->no_instance;
  atomic_fetch_add_explicit(c, count, memory_order_relaxed);
  nats_deliver(n, p->to, p->lane, M0__K_REPLY, out);
}

/* A RETURN saying the call could not be passed on (no instance, no link). */
static void nats_refuse_call(m0__nats *n, const m0__nats_pending *p, int err) {
  m0__wire_message w;
  const uint8_t *pl = m0__msg_payload(p->req);
  nng_msg *ret;
  uint8_t e[4] = {(uint8_t)err, (uint8_t)(err >> 8), (uint8_t)(err >> 16), (uint8_t)(err >> 24)};
  if (m0__wire_message_read(pl, m0__msg_payload_len(p->req), &w) != 0 ||
      m0__wire_return_new(&ret, w.call, w.type, M0__RETURN_REFUSED, e, sizeof e) != 0)
    return;
  nats_deliver(n, p->to, p->lane, M0__K_RETURN, ret);
}

/* Whether data is a reply batch every record of which decodes. */
static bool nats_reply_ok(const uint8_t *data, size_t len) {
  m0__wire_rd r;
  m0__wire_reply y;
  if (m0__wire_open(&r, data, len) != 0) return false;
  int rv;
  while ((rv = m0__wire_next_reply(&r, &y)) == 1) {
  }
  return rv == 0 && r.p == r.end;
}

/* Under mu. Whether p's token is the latest REQUEST sent for its (loop,
 * lane); set: make it so. A table full of other pairs answers true (no
 * check): more pairs than loops x lanes means callers, not loops. */
static bool nats_latest(m0__nats *n, const m0__nats_pending *p, bool set) {
  uint64_t key = (((uint64_t)p->to << 8) | (uint64_t)p->lane) + 1;
  for (size_t i = 0, h = (size_t)(key * 0x9e3779b97f4a7c15ull >> 40); i < n->npend; i++) {
    m0__nats_latest *l = &n->latest[(h + i) & (n->npend - 1)];
    if (l->key == key || (set && !l->key)) {
      if (!set) return l->token == p->token;
      *l = (m0__nats_latest){.key = key, .token = p->token};
      return true;
    }
    if (!l->key) return true;
  }
  return true;
}

/* The entry of token (taken out of the table), or false. */
static bool nats_take(m0__nats *n, uint64_t token, m0__nats_pending *out) {
  pthread_mutex_lock(&n->mu);
  m0__nats_pending *p = &n->pend[token & (n->npend - 1)];
  bool found = token && p->token == token;
  if (found) {
    *out = *p;
    memset(p, 0, sizeof *p);
  }
  pthread_mutex_unlock(&n->mu);
  return found;
}

/* An answer in its REQUEST's or MESSAGE's kind: a REPLY or a RETURN. */
static void nats_pass(m0__nats *n, const m0__nats_pending *p, const uint8_t *data, size_t len) {
  bool req = p->kind == M0__K_REQUEST;
  m0__wire_message w;
  if (req ? !nats_reply_ok(data, len) : m0__wire_return_read(data, len, &w) != 0) {
    if (req) nats_answer_all(n, p, 502);
    else nats_refuse_call(n, p, EPROTO);
    return;
  }
  nng_msg *m;
  if (m0__msg_new(&m, len) != 0 || m0__msg_append(m, data, len) != 0) {
    if (m) nng_msg_free(m);
    return;
  }
  nats_deliver(n, p->to, p->lane, req ? M0__K_REPLY : M0__K_RETURN, m);
}

/* libnats's thread: one answer on <prefix>.<token>. */
static void nats_on_reply(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *arg) {
  (void)nc;
  (void)sub;
  m0__nats *n = arg;
  if (atomic_load(&n->closing)) { /* the host may be freeing the loops' inboxes and n->s */
    natsMsg_Destroy(msg);
    return;
  }
  const char *subj = natsMsg_GetSubject(msg), *dot = strrchr(subj, '.');
  uint64_t token = dot ? strtoull(dot + 1, NULL, 10) : 0;
  m0__nats_pending p;
  bool found = nats_take(n, token, &p), stale = false;
  if (found && p.kind == M0__K_REQUEST) {
    /* A late answer (its batch timed out, a newer one is out on its lane):
     * passed on, it would free the lane under the newer (actors/asks.c). */
    pthread_mutex_lock(&n->mu);
    stale = !nats_latest(n, &p, false);
    pthread_mutex_unlock(&n->mu);
  }
  if (!found || stale) {
    atomic_fetch_add_explicit(&n->s->st->unknown, 1, memory_order_relaxed);
    if (stale) nng_msg_free(p.req);
  } else {
    if (natsMsg_IsNoResponders(msg)) {
      if (p.kind == M0__K_REQUEST) nats_answer_all(n, &p, 503);
      else nats_refuse_call(n, &p, EHOSTDOWN);
    } else {
      nats_pass(n, &p, (const uint8_t *)natsMsg_GetData(msg), (size_t)natsMsg_GetDataLength(msg));
    }
    nng_msg_free(p.req);
  }
  natsMsg_Destroy(msg);
}

/* A send (a MESSAGE of call 0): published with no reply subject, and its
 * count in flight at its lane given back (service/instance.h). */
static void nats_send(m0__nats *n, int lane, nng_msg *m) {
  natsMsg *nm = NULL;
  const uint8_t *pl = m0__msg_payload(m);
  if (natsMsg_Create(&nm, n->subject, NULL, (const char *)pl, (int)m0__msg_payload_len(m)) == NATS_OK &&
      natsMsgHeader_Set(nm, "M0-Kind", "message") == NATS_OK)
    (void)natsConnection_PublishMsg(n->nc, nm);
  natsMsg_Destroy(nm);
  m0__slot *sl = &n->s->slots[lane];
  if (atomic_load(&sl->inflight) > 0) atomic_fetch_sub(&sl->inflight, 1);
  nng_msg_free(m);
}

/* Publishes p's REQUEST or call with its reply subject. */
static natsStatus nats_publish(m0__nats *n, const m0__nats_pending *p, const char *reply) {
  const char *data = (const char *)m0__msg_payload(p->req);
  int len = (int)m0__msg_payload_len(p->req);
  if (p->kind == M0__K_REQUEST) return natsConnection_PublishRequest(n->nc, n->subject, reply, data, len);
  natsMsg *nm = NULL;
  natsStatus st = natsMsg_Create(&nm, n->subject, reply, data, len);
  if (st == NATS_OK) st = natsMsgHeader_Set(nm, "M0-Kind", "message");
  if (st == NATS_OK) st = natsConnection_PublishMsg(n->nc, nm);
  natsMsg_Destroy(nm);
  return st;
}

/* One REQUEST or call from the lanes' inbox: kept under a fresh token,
 * then published; refused at once when the link cannot take it. */
static void nats_forward(m0__nats *n, const m0__env *e, nng_msg *m) {
  int lane = M0__ACTOR_INDEX(e->to) & 0xfff;
  m0__nats_pending p = {.to = e->from, .kind = e->kind, .lane = lane < n->s->nslots ? lane : 0, .req = m};
  nng_msg *evicted = NULL;
  pthread_mutex_lock(&n->mu);
  p.token = ++n->next;
  m0__nats_pending *at = &n->pend[p.token & (n->npend - 1)];
  if (p.kind == M0__K_REQUEST) nats_latest(n, &p, true);
  evicted = at->req; /* an answer awaited long past its deadline */
  *at = p;
  pthread_mutex_unlock(&n->mu);
  if (evicted) nng_msg_free(evicted);
  char reply[128];
  snprintf(reply, sizeof reply, "%s.%" PRIu64, n->prefix, p.token);
  if (nats_publish(n, &p, reply) == NATS_OK) return;
  if (!nats_take(n, p.token, &p)) return; /* answered already */
  if (p.kind == M0__K_REQUEST) nats_answer_all(n, &p, 503);
  else nats_refuse_call(n, &p, EAGAIN);
  nng_msg_free(p.req);
}

static void nats_take_one(m0__nats *n, nng_msg *m) {
  m0__env e;
  const uint8_t *payload;
  size_t len;
  m0__wire_message w;
  if (m0__env_read(nng_msg_body(m), nng_msg_len(m), &e, &payload, &len) != 0) {
    nng_msg_free(m);
  } else if (e.kind == M0__K_REQUEST) {
    nats_forward(n, &e, m);
  } else if (e.kind == M0__K_MESSAGE && m0__wire_message_read(payload, len, &w) == 0) {
    if (w.call) nats_forward(n, &e, m);
    else nats_send(n, M0__ACTOR_INDEX(e.to) & 0xfff, m);
  } else {
    nng_msg_free(m); /* a STOP: the lanes have no instance to stop */
  }
}

static void *nats_thread(void *arg) {
  m0__nats *n = arg;
  while (!atomic_load(&n->quit)) {
    nng_msg *m;
    while ((m = m0__inbox_take(&n->in)) != NULL) nats_take_one(n, m);
    struct pollfd pf = {.fd = n->in.efd, .events = POLLIN};
    (void)poll(&pf, 1, NATS_POLL_MS);
  }
  return NULL;
}

bool m0__nats_url(const char *url) { return url && (!strncmp(url, "nats://", 7) || !strncmp(url, "tls://", 6)); }

/* The connection and the answers' subscription. */
static int nats_connect(m0__nats *n) {
  natsStatus st = m0__nats_options(&n->opts, n->url, nats_on_down, nats_on_up, nats_on_up, n);
  if (st != NATS_OK) {
    fprintf(stderr, "m0: actor %s: cannot set up the NATS options for %s: %s\n", n->s->name, n->shown,
            natsStatus_GetText(st));
    return M0__EINVALID;
  }
  if (st == NATS_OK) st = natsOptions_SetClosedCB(n->opts, nats_conn_over, n);
  if (st == NATS_OK) st = natsOptions_SetErrorHandler(n->opts, nats_on_error, n);
  /* Each request written at once: libnats's flusher otherwise holds it
   * (p50 4 ms at 16 connections here, against 0.5 ms over ipc). */
  if (st == NATS_OK) st = natsOptions_SetSendAsap(n->opts, true);
  if (st == NATS_OK) st = natsConnection_Connect(&n->nc, n->opts);
  if (st != NATS_OK && st != NATS_NOT_YET_CONNECTED) {
    fprintf(stderr, "m0: actor %s: cannot connect to NATS %s: %s\n", n->s->name, n->shown, natsStatus_GetText(st));
    return M0__ETRANSPORT;
  }
  if (st == NATS_NOT_YET_CONNECTED)
    fprintf(stderr, "m0: actor %s: NATS %s cannot be reached yet; its requests answer 503 until it can\n",
            n->s->name, n->shown);
  natsInbox *ib = NULL;
  char wild[128];
  if (natsInbox_Create(&ib) != NATS_OK) return M0__ENOMEM;
  snprintf(n->prefix, sizeof n->prefix, "%s", (const char *)ib);
  natsInbox_Destroy(ib);
  snprintf(wild, sizeof wild, "%s.*", n->prefix);
  st = natsConnection_Subscribe(&n->sub, n->nc, wild, nats_on_reply, n);
  if (st == NATS_OK) st = natsSubscription_SetPendingLimits(n->sub, NATS_PENDING_MSGS, NATS_PENDING_BYTES);
  if (st == NATS_OK) st = natsSubscription_SetOnCompleteCB(n->sub, nats_sub_over, n);
  if (st != NATS_OK) {
    fprintf(stderr, "m0: actor %s: cannot subscribe to its answers on %s: %s\n", n->s->name, n->shown,
            natsStatus_GetText(st));
    return M0__ETRANSPORT;
  }
  if (natsConnection_Status(n->nc) == NATS_CONN_STATUS_CONNECTED) nats_on_up(n->nc, n);
  return 0;
}

int m0__nats_open(m0__nats **out, m0__service *s, const char *url, const char *subject, int lanes) {
  m0__nats *n = *out = calloc(1, sizeof *n);
  if (!n) return M0__ENOMEM;
  n->s = s;
  snprintf(n->url, sizeof n->url, "%s", url);
  m0__nats_url_shown(url, n->shown, sizeof n->shown);
  snprintf(n->subject, sizeof n->subject, "%s", subject);
  pthread_mutex_init(&n->mu, NULL);
  m0__cond_init_monotonic(&n->over);
  lanes = lanes < 1 ? 1 : lanes > M0__NATS_LANES_MAX ? M0__NATS_LANES_MAX : lanes;
  s->nslots = lanes;
  atomic_store(&s->used, lanes);
  /* Twice what the loops can have out at once, so an entry is reused only
   * long past its deadline (service/nats.h). */
  size_t out_at_once = (size_t)(s->nloops > 0 ? s->nloops : 1) * (size_t)lanes;
  for (n->npend = M0__NATS_PENDING; n->npend < 2 * out_at_once;) n->npend *= 2;
  if (!(n->pend = calloc(n->npend, sizeof *n->pend)) || !(n->latest = calloc(n->npend, sizeof *n->latest)) ||
      m0__inbox_init(&n->in) != 0)
    return M0__ENOMEM;
  n->in_made = true;
  for (int k = 0; k < lanes; k++) s->slots[k].inbox = &n->in;
  int rv = nats_connect(n);
  if (rv != 0) return rv;
  if (pthread_create(&n->fwd, NULL, nats_thread, n) != 0) return M0__ENOMEM;
  n->fwd_started = true;
  return 0;
}

/* Waits for libnats's word that no callback of the subscription and the
 * connection runs any more: true, or false past NATS_CLOSE_MS. */
static bool nats_await_over(m0__nats *n) {
  struct timespec until = m0__timespec_in(NATS_CLOSE_MS);
  pthread_mutex_lock(&n->mu);
  int rv = 0;
  while (rv == 0 && (!n->sub_over || !n->conn_over)) rv = pthread_cond_timedwait(&n->over, &n->mu, &until);
  bool over = n->sub_over && n->conn_over;
  pthread_mutex_unlock(&n->mu);
  return over;
}

void m0__nats_close(m0__nats *n) {
  if (!n) return;
  atomic_store(&n->closing, true);
  atomic_store(&n->quit, true);
  if (n->fwd_started) pthread_join(n->fwd, NULL);
  if (!n->sub) n->sub_over = true;
  if (!n->nc) n->conn_over = true;
  if (n->sub) natsSubscription_Unsubscribe(n->sub);
  if (n->nc) natsConnection_Close(n->nc);
  if (!nats_await_over(n)) {
    /* A loaded machine: a callback may still read n, so it is left to the
     * process's exit. */
    fprintf(stderr, "m0: actor %s: libnats did not close within %d ms; its memory is left to the exit\n",
            n->s->name, NATS_CLOSE_MS);
    return;
  }
  if (n->sub) natsSubscription_Destroy(n->sub);
  if (n->nc) natsConnection_Destroy(n->nc);
  if (n->opts) natsOptions_Destroy(n->opts);
  for (size_t i = 0; n->pend && i < n->npend; i++)
    if (n->pend[i].req) nng_msg_free(n->pend[i].req);
  free(n->pend);
  free(n->latest);
  if (n->in_made) m0__inbox_fini(&n->in);
  pthread_mutex_destroy(&n->mu);
  pthread_cond_destroy(&n->over);
  free(n);
}
