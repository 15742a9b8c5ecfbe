#include "actors/service.h"

#include <stdio.h>
#include <string.h>

#include "actors/admit.h"
#include "actors/edges.h"
#include "actors/publisher.h"
#include "actors/relay.h"
#include "base/errors.h"
#include "base/num.h"

void m0__service_init(m0__service *s, int index, const char *name, int queue, m0__inbox **loop_inbox, int nloops,
                      int loop_base) {
  memset(s, 0, sizeof *s);
  s->index = index;
  snprintf(s->name, sizeof s->name, "%s", name);
  s->queue = queue;
  s->loop_inbox = loop_inbox;
  s->nloops = nloops;
  s->loop_base = loop_base;
  pthread_mutex_init(&s->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->left, &ca);
  pthread_condattr_destroy(&ca);
  m0__app_actor_named(index, name);
}

uint32_t m0__service_slot_id(const m0__service *s, int k) {
  return M0__ACTOR_ID(M0__ROLE_APP, M0__APP_INDEX(s->index, k));
}

m0__inbox *m0__service_reply_inbox(const m0__service *s, uint32_t to) {
  int idx = M0__ACTOR_INDEX(to);
  if (M0__ACTOR_ROLE(to) == M0__ROLE_LOOP) {
    int loop = idx - s->loop_base;
    return loop >= 0 && loop < s->nloops ? s->loop_inbox[loop] : NULL;
  }
  if (M0__ACTOR_ROLE(to) != M0__ROLE_APP || (idx >> 12) >= s->nall) return NULL;
  const m0__service *asker = s->all[idx >> 12];
  int k = idx & 0xfff;
  return !asker->connected && k < asker->nslots ? asker->slots[k].inbox : NULL;
}

int m0__service_live(m0__service *s) {
  int n = 0;
  for (int k = 0; k < s->nslots; k++) n += atomic_load_explicit(&s->slots[k].live, memory_order_relaxed) != 0;
  return n;
}

int m0__service_pick(m0__service *s, bool *full, uint32_t *gen) {
  int best = -1, least = 0;
  uint32_t best_gen = 0;
  bool any = false;
  int used = atomic_load_explicit(&s->used, memory_order_acquire);
  for (int k = 0; k < used; k++) {
    m0__slot *sl = &s->slots[k];
    uint32_t g = atomic_load_explicit(&sl->gen, memory_order_acquire); /* before live: see the header */
    if (!atomic_load_explicit(&sl->live, memory_order_acquire)) continue;
    any = true;
    int n = atomic_load_explicit(&sl->inflight, memory_order_relaxed);
    if (n >= s->queue) continue;
    if (best < 0 || n < least) best = k, least = n, best_gen = g;
  }
  *full = best < 0 && any;
  *gen = best_gen;
  return best;
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

static void on_pipe(nng_pipe p, nng_pipe_ev ev, void *arg) {
  m0__service *s = arg;
  pthread_mutex_lock(&s->mu);
  if (ev == NNG_PIPE_EV_ADD_PRE) {
    m0__slot *free_slot = NULL;
    for (int k = 0; !free_slot && k < s->nslots; k++)
      if (atomic_load(&s->slots[k].pipe) == 0) free_slot = &s->slots[k];
    if (!free_slot) {
      atomic_fetch_add(&s->st.refused, 1);
      pthread_mutex_unlock(&s->mu);
      fprintf(stderr, "m0: actor %s: %d instances are connected already; one more was refused\n", s->name, M0__SLOTS);
      nng_pipe_close(p);
      return;
    }
    atomic_store(&free_slot->pipe, (unsigned)nng_pipe_id(p));
    atomic_store(&free_slot->inflight, 0);
    atomic_store_explicit(&free_slot->live, 1, memory_order_release);
    int k = (int)(free_slot - s->slots);
    if (k >= atomic_load(&s->used)) atomic_store_explicit(&s->used, k + 1, memory_order_release);
  } else if (ev == NNG_PIPE_EV_REM_POST) {
    m0__slot *sl = slot_of_pipe(s, p);
    if (sl) {
      /* Not live first, then a new generation: a loop that reads the new
       * generation also sees the slot gone. The loops' ticks answer 502 for
       * what was with it; its in-flight count starts again from 0. */
      atomic_store_explicit(&sl->live, 0, memory_order_release);
      atomic_fetch_add_explicit(&sl->gen, 1, memory_order_release);
      atomic_store(&sl->pipe, 0);
      atomic_store(&sl->inflight, 0); /* a loop gives nothing back to a slot of another generation */
      pthread_cond_broadcast(&s->left);
    }
  }
  pthread_mutex_unlock(&s->mu);
  /* At ADD_POST, once nng has added the pipe: a request the relay sends it
   * at once finds it. */
  if (s->relay && (ev == NNG_PIPE_EV_ADD_POST || ev == NNG_PIPE_EV_REM_POST)) m0__relay_wake(s->relay);
}

/* A frame from an instance: numbered here, from the shared counter, and
 * published to every loop, as if this process's own code had published it
 * (an instance never names an id: actors/admit.h). */
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

/* The reply thread: each REPLY stamped with its slot and handed to its
 * loop; each PUBLISH put on the bus. */
static void *service_rx(void *arg) {
  m0__service *s = arg;
  for (;;) {
    m0__msg m;
    int rv = m0__recv(&s->self, &m, M0__RECV_BLOCK);
    if (rv == M0__ECLOSED) break;
    if (rv == M0__EBADMSG) {
      atomic_fetch_add(&s->st.refused, 1);
      continue;
    }
    if (rv != 0) continue;
    if (m.env.kind == M0__K_PUBLISH) {
      service_publish(s, &m);
      m0__msg_free(&m);
      continue;
    }
    pthread_mutex_lock(&s->mu);
    m0__slot *sl = slot_of_pipe(s, nng_msg_get_pipe(m.nmsg));
    int k = sl ? (int)(sl - s->slots) : -1;
    pthread_mutex_unlock(&s->mu);
    m0__inbox *to = s->relay ? NULL : m0__service_reply_inbox(s, m.env.to);
    if (k < 0 || m.env.kind != M0__K_REPLY || (!to && !s->relay)) {
      atomic_fetch_add(&s->st.refused, 1);
      m0__msg_free(&m);
      continue;
    }
    m0__le_put32((uint8_t *)nng_msg_body(m.nmsg) + 8, m0__service_slot_id(s, k)); /* the envelope's from */
    if (s->relay) { /* to the worker whose loop asked; its door counts the edge */
      if (m0__relay_reply(s->relay, m.env.to, m.nmsg) == 0)
        m.nmsg = NULL;
      else
        atomic_fetch_add(&s->st.refused, 1);
    } else if (m0__inbox_put(to, m.nmsg) == 0) {
      m.nmsg = NULL;
      m0__edge_sent(m0__service_slot_id(s, k), m.env.to, m.env.kind); /* its sender is outside: counted here (actors/edges.h) */
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
  if (m0__actor_open_poly(&s->self, M0__ACTOR_ID(M0__ROLE_APP, M0__APP_INDEX(s->index, 0xfff)), url, trace) != 0) {
    fprintf(stderr, "m0: actor %s cannot listen at %s\n", s->name, url);
    return M0__ETRANSPORT;
  }
  nng_pipe_notify(s->self.mailbox, NNG_PIPE_EV_ADD_PRE, on_pipe, s);
  nng_pipe_notify(s->self.mailbox, NNG_PIPE_EV_ADD_POST, on_pipe, s);
  nng_pipe_notify(s->self.mailbox, NNG_PIPE_EV_REM_POST, on_pipe, s);
  if (pthread_create(&s->rx, NULL, service_rx, s) != 0) {
    m0__actor_close(&s->self);
    return M0__ENOMEM;
  }
  s->rx_started = true;
  return 0;
}

void m0__service_stop_instances(m0__service *s) {
  if (!s->connected || !s->self.open || s->door) return;
  pthread_mutex_lock(&s->mu);
  for (int k = 0; k < s->nslots; k++) {
    if (atomic_load(&s->slots[k].pipe) == 0) continue;
    m0__peer to;
    m0__peer_pipe(&to, m0__service_slot_id(s, k), s->self.mailbox, m0__slot_pipe(&s->slots[k]));
    m0__send(&s->self, &to, M0__K_STOP, 0, 0, NULL, 0);
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

void m0__service_close(m0__service *s) {
  if (s->self.open) m0__actor_close(&s->self);
  if (s->rx_started) pthread_join(s->rx, NULL);
  s->rx_started = false;
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->left);
}
