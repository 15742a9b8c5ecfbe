#include "service/service.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "runtime/admit.h"
#include "runtime/edges.h"
#include "bus/publisher.h"
#include "base/errors.h"
#include "base/num.h"
#include "service/wire.h"
#include "base/clock.h"

void m0__service_init(m0__service *s, int index, const char *name, int queue, m0__inbox **loop_inbox, int nloops,
                      int loop_base) {
  memset(s, 0, sizeof *s);
  s->index = index;
  snprintf(s->name, sizeof s->name, "%s", name);
  s->queue = queue;
  s->loop_inbox = loop_inbox;
  s->nloops = nloops;
  s->loop_base = loop_base;
  s->restarts = &s->own_restarts;
  s->st = &s->own;
  s->row = -1;
  pthread_mutex_init(&s->mu, NULL);
  m0__cond_init_monotonic(&s->left);
  m0__cond_init_monotonic(&s->room);
  m0__cond_init_monotonic(&s->gate_cv);
  m0__app_actor_named(index, name);
}

/* ---- connected instances: proofs (runtime/proof.h) ---- */

static void slot_take(m0__service *s, int k, unsigned p);

/* Pipe p's proof in progress (under mu), or NULL. */
static struct m0__proving *proving_of(m0__service *s, unsigned p) {
  for (int u = 0; p && u < M0__SLOTS; u++)
    if (s->proving[u].pipe == p) return &s->proving[u];
  return NULL;
}

/* A proof begins for pipe p (under mu): its challenge drawn, its deadline
 * set. NULL: every entry is taken (or getrandom failed). */
static struct m0__proving *proving_new(m0__service *s, unsigned p) {
  struct m0__proving *pv = NULL;
  for (int u = 0; u < M0__SLOTS && !pv; u++)
    if (s->proving[u].pipe == 0) pv = &s->proving[u];
  if (!pv || !(pv->n = m0__proof_challenge(pv->challenge, s->name))) return NULL;
  pv->pipe = p;
  pv->added = pv->sent = false;
  pv->deadline = m0__now_ms() + M0__PROOF_MS;
  return pv;
}

/* A dial refused (no slot, no proof): counted by the actor's socket and
 * said once per actor and reason (runtime/admit.h), and its pipe closed. */
static void dial_refused(m0__service *s, nng_pipe p, int reason, int kind) {
  char where[64], peer[80];
  m0__pipe_where((unsigned)nng_pipe_id(p), "this machine", where, sizeof where);
  snprintf(peer, sizeof peer, "%s (an instance)", where);
  m0__refused(s->self.id, reason, kind, peer);
  nng_pipe_close(p);
}

/* The gate: sends each added pipe its challenge (a HELLO, unsealed: an
 * instance may be any program) and closes those whose time ran out. Its
 * own thread, not nng's pipe callbacks, which must not send. */
void *m0__service_gate(void *arg) {
  m0__service *s = arg;
  pthread_mutex_lock(&s->mu);
  while (!s->gate_stop) {
    struct {
      unsigned pipe;
      size_t n;
      uint8_t c[M0__CHALLENGE_MAX];
    } send[M0__SLOTS];
    unsigned late[M0__SLOTS];
    int nsend = 0, nlate = 0;
    int64_t now = m0__now_ms(), next = now + 1000;
    for (int u = 0; u < M0__SLOTS; u++) {
      struct m0__proving *pv = &s->proving[u];
      if (!pv->pipe) continue;
      if (now >= pv->deadline) {
        late[nlate++] = pv->pipe;
        pv->pipe = 0;
        continue;
      }
      if (pv->deadline < next) next = pv->deadline;
      if (pv->added && !pv->sent) {
        pv->sent = true;
        send[nsend].pipe = pv->pipe;
        send[nsend].n = pv->n;
        memcpy(send[nsend++].c, pv->challenge, pv->n);
      }
    }
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < nsend; i++) {
      nng_msg *m;
      nng_pipe p = NNG_PIPE_INITIALIZER;
      p.id = send[i].pipe;
      if (nng_msg_alloc(&m, M0__ENV_HEADER + send[i].n) != 0) {
        nng_pipe_close(p); /* it redials */
        continue;
      }
      m0__env e = {.kind = M0__K_HELLO, .from = s->self.id, .to = s->self.id};
      m0__env_write(nng_msg_body(m), &e, (uint32_t)send[i].n);
      memcpy((uint8_t *)nng_msg_body(m) + M0__ENV_HEADER, send[i].c, send[i].n);
      nng_msg_set_pipe(m, p);
      /* Blocking: pair1's polyamorous send hands one message at a time to
       * its pipes' queues (a non-blocking one failed with EAGAIN for half
       * of 300 dials at once); a pipe whose queue is full drops it, and
       * its deadline closes it. */
      if (nng_sendmsg(s->self.mailbox, m, 0) != 0) {
        nng_msg_free(m);
        nng_pipe_close(p);
      }
    }
    for (int i = 0; i < nlate; i++) dial_refused(s, (nng_pipe){.id = late[i]}, M0__REFUSE_PROOF, 0);
    pthread_mutex_lock(&s->mu);
    if (nsend || nlate || s->gate_stop) continue;
    bool ready = false;
    for (int u = 0; u < M0__SLOTS; u++) ready |= s->proving[u].pipe && s->proving[u].added && !s->proving[u].sent;
    if (ready) continue;
    struct timespec until = {.tv_sec = next / 1000, .tv_nsec = (next % 1000) * 1000000L};
    pthread_cond_timedwait(&s->gate_cv, &s->mu, &until);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

static void service_refused(m0__service *s, int reason, const m0__msg *m);

/* An instance's answer (a HELLO on pipe p; the reply thread): a slot when
 * it proves the secret, else its pipe closed. */
static void proof_taken(m0__service *s, const m0__msg *m) {
  nng_pipe p = nng_msg_get_pipe(m->nmsg);
  pthread_mutex_lock(&s->mu);
  struct m0__proving *pv = proving_of(s, (unsigned)nng_pipe_id(p));
  if (!pv) { /* proved already (or closed): one more HELLO is counted, not acted on */
    pthread_mutex_unlock(&s->mu);
    service_refused(s, M0__REFUSE_PROOF, m);
    return;
  }
  bool sent = pv->sent;
  bool ok = sent && m0__proof_check(s->secret, pv->challenge, pv->n, m->payload, m->len);
  int k = -1;
  pv->pipe = 0; /* one answer each; one before its challenge is none */
  for (int i = 0; ok && k < 0 && i < s->nslots; i++)
    if (atomic_load(&s->slots[i].pipe) == 0) k = i;
  if (k >= 0) slot_take(s, k, (unsigned)nng_pipe_id(p));
  pthread_mutex_unlock(&s->mu);
  if (k >= 0) {
    if (s->relay) s->relay_wake(s->relay);
    m0__service_noted(s, k, M0_MSG_UP, "\"event\":\"up\"");
    return;
  }
  dial_refused(s, p, ok ? M0__REFUSE_INSTANCES : M0__REFUSE_PROOF, ok ? 0 : M0__K_HELLO);
}

/* A REPLY or PUBLISH from a pipe that has not proved itself (yet):
 * refused and dropped (a frame an instance published from its make, before
 * its answer went, is lost, not its connection). false: the pipe has a
 * slot (or no proof is asked). */
static bool unproved(m0__service *s, const m0__msg *m) {
  if (!s->secret) return false;
  nng_pipe p = nng_msg_get_pipe(m->nmsg);
  pthread_mutex_lock(&s->mu);
  bool has = false;
  for (int k = 0; !has && k < s->nslots; k++) has = (int)atomic_load(&s->slots[k].pipe) == nng_pipe_id(p);
  pthread_mutex_unlock(&s->mu);
  if (has) return false;
  char where[64], peer[80];
  m0__pipe_where((unsigned)nng_pipe_id(p), "this machine", where, sizeof where);
  snprintf(peer, sizeof peer, "%s (an instance)", where);
  atomic_fetch_add(&s->st->refused, 1);
  m0__refused(s->self.id, M0__REFUSE_PROOF, m->env.kind, peer);
  return true;
}

/* ---- connected instances: pipe events (on nng's threads) ----
 *
 * A pipe takes its slot at ADD_PRE, before nng adds it to the socket: a
 * message can come from a pipe only once it is added, so the reply thread
 * finds the slot of every message it receives. (At ADD_POST an instance that
 * sent at once could race it: under ThreadSanitizer a forged REPLY sent right
 * after the dial was received before its pipe had a slot, and dropped as
 * from no instance instead of refused as a reply to no request of its own.) */

static m0__slot *slot_of_pipe(m0__service *s, nng_pipe p) {
  for (int k = 0; k < s->nslots; k++)
    if ((int)atomic_load(&s->slots[k].pipe) == nng_pipe_id(p)) return &s->slots[k];
  return NULL;
}

/* Slot k's instance is on pipe p (under mu). */
static void slot_take(m0__service *s, int k, unsigned p) {
  m0__slot *sl = &s->slots[k];
  atomic_store(&sl->pipe, p);
  atomic_store(&sl->inflight, 0);
  if (s->pids && !s->door && k < M0__PAGE_SLOTS) { /* for every process's observer (transport/page.h) */
    uint64_t pid = 0;
    if (nng_pipe_get_uint64((nng_pipe){.id = p}, NNG_OPT_IPC_PEER_PID, &pid) != 0) pid = 0;
    atomic_store(&s->pids[k], pid);
  }
  atomic_store_explicit(&sl->live, 1, memory_order_release);
  if (k >= atomic_load(&s->used)) atomic_store_explicit(&s->used, k + 1, memory_order_release);
}

/* ADD_PRE (under mu), what becomes of pipe p: */
enum { PIPE_KEPT, PIPE_CLOSE, PIPE_REFUSE };

static int pipe_added(m0__service *s, unsigned p, int *took) {
  if (s->door) { /* a leg: no slot until the relay says which (door_intro) */
    int u = 0;
    while (u < M0__SLOTS && s->unmet[u]) u++;
    if (u == M0__SLOTS) return PIPE_CLOSE;
    s->unmet[u] = p;
    return PIPE_KEPT;
  }
  if (s->leaving) return PIPE_CLOSE; /* an instance that redialed too soon: again, elsewhere */
  m0__slot *free_slot = NULL;
  for (int k = 0; !free_slot && k < s->nslots; k++)
    if (atomic_load(&s->slots[k].pipe) == 0) free_slot = &s->slots[k];
  struct m0__proving *pv = s->secret && free_slot ? proving_new(s, p) : NULL;
  if (!free_slot || (s->secret && !pv)) return PIPE_REFUSE;
  if (!s->secret) slot_take(s, *took = (int)(free_slot - s->slots), p);
  return PIPE_KEPT;
}

/* REM_POST (under mu): pipe p's proof, introduction or slot let go; the
 * slot's index, or -1. */
static int pipe_removed(m0__service *s, nng_pipe p) {
  struct m0__proving *pv = s->secret ? proving_of(s, (unsigned)nng_pipe_id(p)) : NULL;
  if (pv) pv->pipe = 0;
  for (int u = 0; s->door && u < M0__SLOTS; u++)
    if (s->unmet[u] == (unsigned)nng_pipe_id(p)) s->unmet[u] = 0;
  m0__slot *sl = slot_of_pipe(s, p);
  if (!sl) return M0__ENOTFOUND;
  m0__service_slot_left(s, (int)(sl - s->slots));
  atomic_store(&sl->pipe, 0);
  if (s->pids && !s->door && sl - s->slots < M0__PAGE_SLOTS) atomic_store(&s->pids[sl - s->slots], 0);
  sl->where[0] = 0;
  sl->messages = 0;
  pthread_cond_broadcast(&s->left);
  pthread_cond_broadcast(&s->room); /* a caller waiting for its window learns it went */
  return (int)(sl - s->slots);
}

void m0__service_on_pipe(nng_pipe p, nng_pipe_ev ev, void *arg) {
  m0__service *s = arg;
  int fate = PIPE_KEPT, left = -1, took = -1;
  pthread_mutex_lock(&s->mu);
  if (ev == NNG_PIPE_EV_ADD_PRE) fate = pipe_added(s, (unsigned)nng_pipe_id(p), &took);
  else if (ev == NNG_PIPE_EV_ADD_POST && s->secret) {
    struct m0__proving *pv = proving_of(s, (unsigned)nng_pipe_id(p));
    if (pv) {
      pv->added = true;
      pthread_cond_signal(&s->gate_cv);
    }
  } else if (ev == NNG_PIPE_EV_REM_POST) left = pipe_removed(s, p);
  pthread_mutex_unlock(&s->mu);
  if (left >= 0) m0__service_tell_left(s, left); /* after the unlock: the loops' inboxes have locks of their own */
  if (took >= 0) m0__service_noted(s, took, M0_MSG_UP, "\"event\":\"up\"");
  if (fate == PIPE_CLOSE) nng_pipe_close(p);
  else if (fate == PIPE_REFUSE) dial_refused(s, p, M0__REFUSE_INSTANCES, 0);
  /* At ADD_POST, once nng has added the pipe: a request the relay sends it
   * at once finds it. */
  if (s->relay && (ev == NNG_PIPE_EV_ADD_POST || ev == NNG_PIPE_EV_REM_POST)) s->relay_wake(s->relay);
}

/* A frame from an instance: numbered here, from the shared counter, and
 * published to every loop, as if this process's own code had published it
 * (an instance never names an id: runtime/admit.h). */
static void service_publish(m0__service *s, const m0__msg *m) {
  uint64_t id;
  const char *channel;
  size_t chlen, flen;
  const uint8_t *frame;
  char ch[M0__CHANNEL_MAX + 1];
  if (!s->pub || m0__frame_decode(m->payload, m->len, &id, &channel, &chlen, &frame, &flen) != 0 ||
      !m0__channel_ok_n(channel, chlen) || !m0__frame_ok(frame, flen)) {
    char peer[96];
    m0__msg_peer(m, peer, sizeof peer);
    m0__refused(s->self.id, M0__REFUSE_FRAME, M0__K_PUBLISH, peer);
    return;
  }
  memcpy(ch, channel, chlen);
  ch[chlen] = 0;
  m0_publish(s->pub, ch, m0_next_id(s->pub), frame, flen);
}

size_t m0__intro_write(uint8_t out[M0__INTRO_MAX], int slot, const char *where) {
  size_t n = strlen(where);
  if (n > M0__INTRO_MAX - 2) n = M0__INTRO_MAX - 2;
  out[0] = (uint8_t)slot;
  out[1] = (uint8_t)n;
  memcpy(out + 2, where, n);
  return 2 + n;
}

void m0__pipe_where(unsigned pipe_id, const char *host, char *out, size_t n) {
  nng_pipe p = {.id = pipe_id};
  nng_sockaddr sa;
  snprintf(out, n, "%s", host);
  if (nng_pipe_get_addr(p, NNG_OPT_REMADDR, &sa) != 0) return;
  if (sa.s_family == NNG_AF_INET) {
    char ip[INET_ADDRSTRLEN];
    if (inet_ntop(AF_INET, &sa.s_in.sa_addr, ip, sizeof ip)) snprintf(out, n, "%s", ip);
  } else if (sa.s_family == NNG_AF_INET6) {
    char ip[INET6_ADDRSTRLEN];
    if (inet_ntop(AF_INET6, sa.s_in6.sa_addr, ip, sizeof ip)) snprintf(out, n, "%s", ip);
  }
}

/* A door's leg introduced (READY from the supervisor, sealed: m0__recv
 * admitted it from the family only): it holds slot k, where the relay
 * says. Refused when the pipe was introduced already, the slot is taken, or
 * the payload is not one. */
static bool door_intro(m0__service *s, const m0__msg *m) {
  const uint8_t *p = m->payload;
  if (!s->door || m->len < 2 || m->len != 2u + p[1] || p[0] >= M0__SLOTS) return false;
  for (size_t i = 0; i < p[1]; i++)
    if (p[2 + i] <= ' ' || p[2 + i] >= 0x7f) return false;
  unsigned pipe = (unsigned)nng_pipe_id(nng_msg_get_pipe(m->nmsg));
  bool ok = false;
  pthread_mutex_lock(&s->mu);
  for (int u = 0; u < M0__SLOTS && !ok; u++) {
    if (!pipe || s->unmet[u] != pipe || atomic_load(&s->slots[p[0]].pipe) != 0) continue;
    s->unmet[u] = 0;
    m0__slot *sl = &s->slots[p[0]];
    memcpy(sl->where, p + 2, p[1]);
    sl->where[p[1]] = 0;
    slot_take(s, p[0], pipe);
    ok = true;
  }
  pthread_mutex_unlock(&s->mu);
  if (ok) m0__service_noted(s, p[0], M0_MSG_UP, "\"event\":\"up\"");
  return ok;
}

/* A message from an instance refused: in the actor's figures and in
 * m0_refused_total, named at most once per interval (runtime/admit.h). */
static void service_refused(m0__service *s, int reason, const m0__msg *m) {
  char peer[96];
  atomic_fetch_add(&s->st->refused, 1);
  m0__msg_peer(m, peer, sizeof peer);
  m0__refused(s->self.id, reason, m->env.kind, peer);
}

/* A REPLY or RETURN from an instance, stamped with its slot and handed to
 * the loop or caller its `to` names (under --workers, in the supervisor, to
 * the relay); a RETURN frees the slot's MESSAGE window (service.h) and a
 * send's (call 0: the instance took it) ends there. m is freed. */
static void service_answer(m0__service *s, m0__msg *m) {
  pthread_mutex_lock(&s->mu);
  m0__slot *sl = slot_of_pipe(s, nng_msg_get_pipe(m->nmsg));
  int k = sl ? (int)(sl - s->slots) : -1;
  pthread_mutex_unlock(&s->mu);
  /* A RETURN to this process (under --workers, in the supervisor, one to
   * no worker's asker: to one of its instances' own calls) frees the
   * window this process took; a send's ends here. */
  bool ret = m->env.kind == M0__K_RETURN, here = !s->relay || M0__ACTOR_ROLE(m->env.to) != M0__ROLE_RELAYED;
  if (k >= 0 && ret && here) m0__service_window_give(s, k);
  if (k >= 0 && ret && here && m->len >= 8 && m0__le_get64(m->payload) == 0) {
    m0__msg_free(m);
    return;
  }
  m0__inbox *to = s->relay ? NULL : m0__service_reply_inbox(s, m->env.to);
  if (k >= 0 && !to && ret && m0__service_answered(s, m0__service_slot_id(s, k), m->env.to, m->nmsg)) {
    m->nmsg = NULL; /* the answer to a connected instance's own call (service/post.h): on its link */
    m0__msg_free(m);
    return;
  }
  if (k < 0 || (!to && !s->relay)) {
    /* from a pipe no instance holds (a leg not yet introduced), or to no
     * loop or waiting caller of this process */
    service_refused(s, k < 0 ? M0__REFUSE_REPLY : M0__REFUSE_ADDRESS, m);
    m0__msg_free(m);
    return;
  }
  m0__le_put32((uint8_t *)nng_msg_body(m->nmsg) + 8, m0__service_slot_id(s, k)); /* the envelope's from */
  if (s->relay) { /* to the worker whose loop asked; its door counts the edge */
    if (s->relay_reply(s->relay, m->env.to, m->nmsg) == 0) m->nmsg = NULL;
    else service_refused(s, M0__REFUSE_ADDRESS, m); /* to no worker's loop the relay reaches */
  } else if (m0__inbox_put(to, m->nmsg) == 0) {
    m->nmsg = NULL;
    /* its sender is outside: counted here (runtime/edges.h) */
    m0__edge_sent(m0__service_slot_id(s, k), m->env.to, m->env.kind);
  }
  m0__msg_free(m);
}

/* A MESSAGE an instance sent (its own send or call, service/remote.h):
 * the host's to pass on, from the slot its pipe holds. m is freed. */
static void service_message(m0__service *s, m0__msg *m) {
  pthread_mutex_lock(&s->mu);
  m0__slot *sl = slot_of_pipe(s, nng_msg_get_pipe(m->nmsg));
  int k = sl ? (int)(sl - s->slots) : -1;
  pthread_mutex_unlock(&s->mu);
  if (k >= 0 && s->hooks && s->hooks->message) {
    s->hooks->message(s->hooks_arg, s, k, m);
    return;
  }
  /* No post here: a call is told so at once rather than left to its
   * bound. */
  m0__wire_message msg;
  nng_msg *no;
  uint8_t why[4];
  m0__le_put32(why, EOPNOTSUPP);
  m0__peer back;
  m0__peer_pipe(&back, m->env.from, s->self.mailbox, nng_msg_get_pipe(m->nmsg));
  if (k >= 0 && m0__wire_message_read(m->payload, m->len, &msg) == 0 && msg.call &&
      m0__wire_return_new(&no, msg.call, 0, M0__RETURN_REFUSED, why, 4) == 0 &&
      m0__send_msg(&s->self, &back, M0__K_RETURN, 0, 0, no) != 0)
    nng_msg_free(no);
  if (k < 0) service_refused(s, M0__REFUSE_ADDRESS, m);
  m0__msg_free(m);
}

/* The reply thread: each REPLY and RETURN to its loop or caller
 * (service_answer); each PUBLISH put on the bus; at a worker's door, each
 * leg's introduction. */
void *m0__service_rx(void *arg) {
  m0__service *s = arg;
  for (;;) {
    m0__msg m;
    int rv = m0__recv(&s->self, &m, M0__RECV_BLOCK);
    if (rv == M0__ECLOSED) break;
    if (rv == M0__EBADMSG) {
      atomic_fetch_add(&s->st->refused, 1);
      continue;
    }
    if (rv != 0) continue;
    int kind = m.env.kind;
    if (kind == M0__K_HELLO) {
      if (s->secret) proof_taken(s, &m);
      else service_refused(s, M0__REFUSE_KIND, &m); /* no proof was asked: a kind it never takes */
    } else if (kind != M0__K_READY && unproved(s, &m)) {
      /* PUBLISH, REPLY, RETURN: refused until its instance proved itself */
    } else if (kind == M0__K_PUBLISH) {
      service_publish(s, &m);
    } else if (kind == M0__K_READY) {
      if (!door_intro(s, &m)) service_refused(s, M0__REFUSE_ADDRESS, &m); /* introduces no leg of this door */
    } else if (kind == M0__K_MESSAGE) {
      service_message(s, &m); /* frees m */
      continue;
    } else if (kind == M0__K_REPLY || kind == M0__K_RETURN || kind == M0__K_STREAM) {
      service_answer(s, &m); /* frees m */
      continue;
    } else {
      service_refused(s, M0__REFUSE_ADDRESS, &m);
    }
    m0__msg_free(&m);
  }
  return NULL;
}

int m0__service_listen(m0__service *s, const char *url, m0__tracer *trace, m0_publisher *pub) {
  s->connected = true;
  s->pub = pub;
  s->nslots = M0__SLOTS;
  snprintf(s->url, sizeof s->url, "%s", url);
  /* The pipe events from before it listens: an instance (a leg, at a
   * respawned worker's door) that dialed at once had its pipe unheard. */
  if (m0__actor_open_poly(&s->self, M0__ACTOR_ID(M0__ROLE_APP, M0__APP_INDEX(s->index, 0xfff)), url, trace,
                          m0__service_on_pipe, s) != 0) {
    fprintf(stderr, "m0: actor %s cannot listen at %s\n", s->name, url);
    return M0__ETRANSPORT;
  }
  if (pthread_create(&s->rx, NULL, m0__service_rx, s) != 0) {
    m0__actor_close(&s->self);
    return M0__ENOMEM;
  }
  s->rx_started = true;
  if (s->secret && !s->door) {
    if (pthread_create(&s->gate, NULL, m0__service_gate, s) != 0) return M0__ENOMEM; /* closed by m0__service_close */
    s->gate_started = true;
  }
  return 0;
}

void m0__service_stop_instances(m0__service *s, bool reload) {
  if (!s->connected || !s->self.open || s->door) return;
  static const uint8_t reloads[1] = {1}; /* docs/wire.md: the host reloads; redial */
  pthread_mutex_lock(&s->mu);
  s->leaving = reload;
  for (int k = 0; k < s->nslots; k++) {
    if (atomic_load(&s->slots[k].pipe) == 0) continue;
    m0__peer to;
    m0__peer_pipe(&to, m0__service_slot_id(s, k), s->self.mailbox, m0__slot_pipe(&s->slots[k]));
    m0__send(&s->self, &to, M0__K_STOP, 0, 0, reload ? reloads : NULL, reload ? 1 : 0);
  }
  pthread_mutex_unlock(&s->mu);
}

static int connected_now(m0__service *s) {
  int n = 0;
  for (int k = 0; k < s->nslots; k++) n += atomic_load(&s->slots[k].pipe) != 0;
  return n;
}

void m0__service_await_instances(m0__service *s, int64_t deadline) {
  if (!s->connected || !s->self.open || s->door) return;
  struct timespec until = {.tv_sec = deadline / 1000, .tv_nsec = (deadline % 1000) * 1000000L};
  pthread_mutex_lock(&s->mu);
  int n;
  while ((n = connected_now(s)) > 0 && pthread_cond_timedwait(&s->left, &s->mu, &until) == 0) {
  }
  n = connected_now(s);
  pthread_mutex_unlock(&s->mu);
  if (n) fprintf(stderr, "m0: actor %s: %d instances did not leave on STOP within the drain's bound\n", s->name, n);
}

/* The binder first (it starts the others), then the gate (it sends on the
 * socket). */
static void service_threads_stop(m0__service *s) {
  if (s->binder_started) {
    atomic_store(&s->binder_stop, true);
    pthread_join(s->binder, NULL);
    s->binder_started = false;
  }
  if (s->gate_started) {
    pthread_mutex_lock(&s->mu);
    s->gate_stop = true;
    pthread_cond_signal(&s->gate_cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->gate, NULL);
    s->gate_started = false;
  }
}

void m0__service_release(m0__service *s) {
  if (!s->connected || s->door) return;
  service_threads_stop(s);
  if (s->self.open) m0__actor_close(&s->self); /* nng unlinks an ipc path here */
}

void m0__service_close(m0__service *s) {
  service_threads_stop(s);
  if (s->self.open) m0__actor_close(&s->self);
  if (s->rx_started) pthread_join(s->rx, NULL);
  s->rx_started = false;
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->left);
  pthread_cond_destroy(&s->room);
  pthread_cond_destroy(&s->gate_cv);
}
