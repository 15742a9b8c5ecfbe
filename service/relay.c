#include "service/relay.h"

#include <errno.h>
#include <nng/protocol/pair1/pair.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "runtime/admit.h"
#include "runtime/envelope.h"
#include "base/errors.h"
#include "base/ids.h"
#include "base/nng_compat.h"
#include "base/num.h"
#include "base/clock.h"
#include "service/wire.h"
#include "transport/links.h"

/* A leg cut because a STREAM could not go on it is dialed again this much
 * later: its worker must have seen the old connection go first (a leg
 * introduced while its slot is still held there is refused, and would
 * carry nothing until it connects again). */
#define RELAY_REDIAL_MS 100
#define RELAY_LEG_SENDBUF 1024 /* messages a leg holds for its worker */
/* A worker slow to read may see the new leg before the old one go, and
 * refuses an introduction for a slot still held: a leg dialed again is
 * introduced again this often, this many times (once taken, the others
 * are refused there, and counted). */
#define RELAY_REINTRO_MS 1000
#define RELAY_REINTROS 3

/* The kinds a leg carries to an instance, each with the kind that comes
 * back for it: the routing below (the book's rewrite of `from`, its
 * restoring of `to`) is every kind's, so a kind is one line here. */
static const struct { uint16_t out, back; } relay_kinds[] = {
    {M0__K_REQUEST, M0__K_REPLY},
    {M0__K_MESSAGE, M0__K_RETURN}, /* a caller's send or call (service/post.h) */
    {M0__K_CREDIT, M0__K_STREAM},  /* a reply in pieces and its room (service/stream.h) */
};

static bool relay_carries(int kind, bool back) {
  for (size_t i = 0; i < sizeof relay_kinds / sizeof *relay_kinds; i++)
    if ((back ? relay_kinds[i].back : relay_kinds[i].out) == kind) return true;
  return false;
}

static m0__relay_leg *leg_of(m0__relay *r, int k, int w) { return &r->legs[k * r->nworkers + w]; }

static void leg_close(m0__relay_leg *l) {
  if (!l->open) return;
  m0__socket_close(l->sock);
  l->open = false;
  l->fd = -1;
}

/* nng's thread: a leg's pipe is up (again: a respawned worker). */
static void on_leg_pipe(nng_pipe p, nng_pipe_ev ev, void *arg) {
  m0__relay_leg *l = arg;
  atomic_store(&l->introduce, true);
  m0__relay_wake(l->r);
}

/* Tells the worker at the other end of slot k's leg l which instance it is
 * and where it dialed from (relay.h). false when the leg did not take it
 * (the caller cuts it: dialed again, it is introduced then). */
static bool leg_introduce(m0__relay *r, int k, m0__relay_leg *l) {
  uint8_t intro[M0__INTRO_MAX], seal[M0__SEAL_LEN];
  char where[48];
  m0__pipe_where(r->leg_pipe[k], r->host, where, sizeof where);
  size_t len = m0__intro_write(intro, k, where);
  nng_msg *m;
  if (nng_msg_alloc(&m, M0__ENV_HEADER) != 0) return false;
  m0__env e = {.kind = M0__K_READY, .flags = M0__ENV_SEALED, .from = M0__ACTOR_ID(M0__ROLE_COORD, 0),
               .to = M0__ACTOR_ID(M0__ROLE_APP, M0__APP_INDEX(r->svc->index, 0xfff)), .seq = ++r->seq};
  m0__env_write(nng_msg_body(m), &e, (uint32_t)len);
  /* Waiting (up to the leg's 100 ms send timeout) rather than dropped: a
   * leg not introduced is no instance to its worker until it connects again. */
  bool ok = nng_msg_append(m, intro, len) == 0;
  if (ok) m0__family_seal(nng_msg_body(m), nng_msg_len(m), seal);
  if (!ok || nng_msg_append(m, seal, sizeof seal) != 0 || nng_sendmsg(l->sock, m, 0) != 0) {
    atomic_fetch_add(&r->dropped, 1);
    nng_msg_free(m);
    return false;
  }
  return true;
}

/* A leg to worker w's door. A worker not listening yet (starting, or being
 * respawned) is redialed by nng in the background, soon: its requests
 * wait for this leg, introduced once its pipe is up. */
static void leg_open(m0__relay *r, m0__relay_leg *l, int w) {
  if (nng_pair1_open(&l->sock) != 0) return;
  atomic_store(&l->introduce, false);
  nng_pipe_notify(l->sock, NNG_PIPE_EV_ADD_POST, on_leg_pipe, l);
  nng_socket_set_ms(l->sock, NNG_OPT_RECONNMINT, 10);
  nng_socket_set_ms(l->sock, NNG_OPT_RECONNMAXT, 200);
  nng_socket_set_size(l->sock, NNG_OPT_RECVMAXSZ, M0__ENV_HEADER + M0__ENV_MAX_PAYLOAD + M0__SEAL_LEN);
  /* A REPLY or STREAM is put, never waited for (its worker may be gone, and
   * this thread serves every worker): room for a stream's bursts (each
   * stream's bytes are bounded by its window, not its messages), past which
   * a STREAM cuts the leg (relay_reply_out). */
  nng_socket_set_int(l->sock, NNG_OPT_SENDBUF, RELAY_LEG_SENDBUF);
  nng_socket_set_ms(l->sock, NNG_OPT_SENDTIMEO, 100);
  if (m0__link_dial(l->sock, r->doors[w], NNG_FLAG_NONBLOCK) != 0 ||
      nng_socket_get_int(l->sock, NNG_OPT_RECVFD, &l->fd) != 0) {
    m0__socket_close(l->sock);
    fprintf(stderr, "m0: actor %s: cannot dial worker %d's door %s\n", r->svc->name, w, r->doors[w]);
    return;
  }
  l->open = true;
}

/* The legs of each slot follow its instance: a slot whose instance left (or
 * was replaced) has its legs closed, so each worker sees that connection go
 * (its requests there answer 502); a new instance gets new legs. */
static void relay_match(m0__relay *r) {
  int used = atomic_load_explicit(&r->svc->used, memory_order_acquire);
  for (int k = 0; k < used; k++) {
    unsigned pipe = atomic_load_explicit(&r->svc->slots[k].pipe, memory_order_acquire);
    if (pipe == r->leg_pipe[k]) continue;
    for (int w = 0; w < r->nworkers; w++) leg_close(leg_of(r, k, w));
    r->leg_pipe[k] = pipe;
    for (int w = 0; pipe && w < r->nworkers; w++) leg_open(r, leg_of(r, k, w), w);
  }
}

/* ---- the book: who asked, in which worker (relay.h) ---- */

static uint32_t book_hash(int w, uint32_t from) {
  uint32_t x = from * 0x9e3779b1u ^ (uint32_t)w * 0x85ebca6bu;
  return x ^ (x >> 15);
}

/* Where (w, from) is in the index, or the empty place it would take. */
static uint32_t *book_place(const m0__relay *r, int w, uint32_t from) {
  uint32_t mask = 2u * (uint32_t)r->book_cap - 1, i = book_hash(w, from) & mask;
  for (;; i = (i + 1) & mask) { /* the index is never more than half full */
    uint32_t row = r->book_index[i];
    if (!row || (r->book[row - 1].from == from && r->book[row - 1].worker == w)) return &r->book_index[i];
  }
}

/* Twice the rows, the index made again. false: at M0__RELAY_BOOK_MAX, or no memory. */
static bool book_grow(m0__relay *r) {
  int cap = r->book_cap * 2;
  if (cap > M0__RELAY_BOOK_MAX) return false;
  m0__relay_asker *book = realloc(r->book, (size_t)cap * sizeof *book);
  if (book) r->book = book;
  uint32_t *index = book ? calloc(2 * (size_t)cap, sizeof *index) : NULL;
  if (!index) return false;
  free(r->book_index);
  r->book_index = index;
  r->book_cap = cap;
  for (int row = 0; row < r->nbook; row++) *book_place(r, r->book[row].worker, r->book[row].from) = (uint32_t)row + 1;
  return true;
}

/* The row of the asker `from` in worker w, written if new; -1 when the
 * book is full (its asks wait out their bound, counted as dropped). */
static int book_row(m0__relay *r, int w, uint32_t from) {
  uint32_t *at = book_place(r, w, from);
  if (*at) return (int)*at - 1;
  if (r->nbook == r->book_cap) {
    if (!book_grow(r)) return M0__ENOMEM;
    at = book_place(r, w, from);
  }
  r->book[r->nbook] = (m0__relay_asker){from, w};
  *at = (uint32_t)++r->nbook;
  return r->nbook - 1;
}

/* The worker a message coming back names in `to`, and `to` as that worker
 * knows it (a loop is its worker's; relayed.n is the book's row n); -1
 * for none. */
static int book_back(const m0__relay *r, uint32_t *to) {
  int i = M0__ACTOR_INDEX(*to);
  if (M0__ACTOR_ROLE(*to) == M0__ROLE_LOOP) return i;
  if (M0__ACTOR_ROLE(*to) != M0__ROLE_RELAYED || i >= r->nbook) return M0__ENOTFOUND;
  *to = r->book[i].from;
  return r->book[i].worker;
}

/* ---- the legs' traffic ---- */

/* A batch from worker w (a REQUEST, or another kind relay_kinds lists),
 * for slot k's instance. A sender that is not a loop is named by its row
 * in the book, which says its worker when the answer comes back. */
static void relay_request(m0__relay *r, int k, int w, nng_msg *m) {
  m0__env e;
  uint32_t len;
  int row = 0;
  if (nng_msg_len(m) < M0__ENV_HEADER || m0__env_read_header(nng_msg_body(m), &e, &len) != 0 ||
      !relay_carries(e.kind, false) || e.flags != 0 || r->leg_pipe[k] == 0 ||
      (M0__ACTOR_ROLE(e.from) != M0__ROLE_LOOP && (row = book_row(r, w, e.from)) < 0)) {
    atomic_fetch_add(&r->dropped, 1);
    nng_msg_free(m);
    return;
  }
  /* Written in place: a door seals nothing it sends an instance. */
  if (M0__ACTOR_ROLE(e.from) != M0__ROLE_LOOP)
    m0__le_put32((uint8_t *)nng_msg_body(m) + 8, M0__ACTOR_ID(M0__ROLE_RELAYED, row));
  nng_pipe p = NNG_PIPE_INITIALIZER;
  p.id = r->leg_pipe[k];
  nng_msg_set_pipe(m, p);
  /* Blocking, as a loop's send is (the poly mailbox's send timeout,
   * 100 ms): the socket takes one message at a time, so a second worker's
   * batch close behind the first would find it busy and, without waiting,
   * be lost. */
  if (nng_sendmsg(r->svc->self.mailbox, m, 0) != 0) {
    atomic_fetch_add(&r->dropped, 1); /* its requests answer 504 at their deadline (service/service.h) */
    nng_msg_free(m);
  }
}

/* The instance whose STREAM (for request id, asked by `asker` as the
 * instance knows it) could not be passed on is told GONE, as the worker's
 * loop would say it: its writer stops (EPIPE) rather than wait for room
 * that never comes. Not waited for: lost, its next DATA is refused by the
 * worker, which says GONE then. */
static void relay_gone(m0__relay *r, int k, uint32_t asker, uint32_t inst, uint64_t id) {
  nng_msg *m;
  if (r->leg_pipe[k] == 0 || nng_msg_alloc(&m, M0__ENV_HEADER + M0__WIRE_CREDIT_LEN) != 0) return;
  m0__env e = {.kind = M0__K_CREDIT, .from = asker, .to = inst, .seq = ++r->seq};
  m0__env_write(nng_msg_body(m), &e, M0__WIRE_CREDIT_LEN);
  m0__wire_credit_put((uint8_t *)nng_msg_body(m) + M0__ENV_HEADER, M0__CREDIT_GONE, id, 0);
  nng_msg_set_pipe(m, (nng_pipe){.id = r->leg_pipe[k]});
  if (nng_sendmsg(r->svc->self.mailbox, m, NNG_FLAG_NONBLOCK) != 0) nng_msg_free(m);
}

/* A REPLY from slot k's instance (its `from` stamped by the service), on
 * the leg to the worker its `to` names, with the `to` that worker's asker
 * gave. true when the leg was cut (to be dialed again). */
static bool relay_reply_out(m0__relay *r, nng_msg *m) {
  uint8_t *h = nng_msg_body(m);
  uint32_t asker = m0__le_get32(h + 12), to = asker, inst = m0__le_get32(h + 8);
  int k = M0__ACTOR_INDEX(inst) & 0xfff, w = book_back(r, &to);
  m0__relay_leg *l = k < M0__SLOTS && w >= 0 && w < r->nworkers ? leg_of(r, k, w) : NULL;
  if (l) m0__le_put32(h + 12, to);
  /* Never waited for: this one thread carries every worker's requests,
   * which a full leg would hold up. */
  bool stream = m0__le_get16(h + 4) == M0__K_STREAM;
  bool sent = l && l->open && nng_sendmsg(l->sock, m, NNG_FLAG_NONBLOCK) == 0;
  if (sent) return false;
  /* A piece of a streamed reply dropped would leave a hole in a body that
   * still looks whole: the leg is cut instead, as when its instance leaves,
   * so its worker closes those connections without the last chunk (a body
   * cut short), and the instance is told the stream is gone. */
  bool cut = stream && l && l->open;
  if (stream && l && nng_msg_len(m) >= M0__ENV_HEADER + 12)
    relay_gone(r, k, asker, inst, m0__le_get64(h + M0__ENV_HEADER + 4));
  if (cut) leg_close(l);
  atomic_fetch_add(&r->dropped, 1);
  nng_msg_free(m);
  return cut;
}

/* The legs of live instances that are not open (cut above, or a dial that
 * failed) are opened again, each to be introduced again (again[leg]). */
static void relay_redial(m0__relay *r, uint8_t *again) {
  int used = atomic_load_explicit(&r->svc->used, memory_order_acquire);
  for (int k = 0; k < used; k++)
    for (int w = 0; r->leg_pipe[k] && w < r->nworkers; w++)
      if (!leg_of(r, k, w)->open) {
        leg_open(r, leg_of(r, k, w), w);
        again[k * r->nworkers + w] = RELAY_REINTROS;
      }
}

/* The legs dialed again are introduced again; true while some are left to. */
static bool relay_reintroduce(m0__relay *r, uint8_t *again) {
  bool left = false;
  for (int i = 0; i < M0__SLOTS * r->nworkers; i++) {
    if (!again[i]) continue;
    if (r->legs[i].open) (void)leg_introduce(r, i / r->nworkers, &r->legs[i]);
    left |= --again[i] > 0;
  }
  return left;
}

/* Milliseconds until the sooner of two times (0: none), for poll: -1 for none. */
static int relay_timeout(int64_t a, int64_t b) {
  int64_t at = !a ? b : !b ? a : a < b ? a : b, now = m0__now_ms();
  return !at ? -1 : at <= now ? 0 : (int)(at - now);
}

/* What is due: cut legs dialed again, and then introduced again. */
static void relay_due(m0__relay *r, uint8_t *again, int64_t *redial_at, int64_t *reintro_at) {
  if (*redial_at && m0__now_ms() >= *redial_at) {
    *redial_at = 0;
    relay_redial(r, again);
    *reintro_at = m0__now_ms() + RELAY_REINTRO_MS;
  }
  if (*reintro_at && m0__now_ms() >= *reintro_at)
    *reintro_at = relay_reintroduce(r, again) ? m0__now_ms() + RELAY_REINTRO_MS : 0;
}

/* Woken: the legs made to match the slots, and each new pipe introduced. */
static void relay_woken(m0__relay *r, int64_t *redial_at) {
  relay_match(r);
  for (int i = 0; i < M0__SLOTS * r->nworkers; i++)
    if (r->legs[i].open && atomic_exchange(&r->legs[i].introduce, false) &&
        !leg_introduce(r, i / r->nworkers, &r->legs[i])) {
      /* A leg never introduced would carry nothing, for good: cut, and dialed again. */
      leg_close(&r->legs[i]);
      if (!*redial_at) *redial_at = m0__now_ms() + RELAY_REDIAL_MS;
    }
}

static void *relay_thread(void *arg) {
  m0__relay *r = arg;
  int nfds = 2 + M0__SLOTS * r->nworkers;
  struct pollfd *pf = calloc((size_t)nfds, sizeof *pf);
  int *which = calloc((size_t)nfds, sizeof *which);
  uint8_t *again = calloc((size_t)(M0__SLOTS * r->nworkers), 1);
  if (!pf || !which || !again) {
    fprintf(stderr, "m0: actor %s: the relay has no memory; its instances serve no worker\n", r->svc->name);
    free(pf);
    free(which);
    free(again);
    return NULL;
  }
  int64_t redial_at = 0, reintro_at = 0; /* legs cut are dialed again, then introduced again (0: none) */
  while (!atomic_load(&r->closing)) {
    int n = 0, timeout = relay_timeout(redial_at, reintro_at);
    pf[n++] = (struct pollfd){.fd = r->wake, .events = POLLIN};
    pf[n++] = (struct pollfd){.fd = r->replies.efd, .events = POLLIN};
    for (int i = 0; i < M0__SLOTS * r->nworkers; i++)
      if (r->legs[i].open) which[n] = i, pf[n++] = (struct pollfd){.fd = r->legs[i].fd, .events = POLLIN};
    if (poll(pf, (nfds_t)n, timeout) < 0 && errno != EINTR) break;
    relay_due(r, again, &redial_at, &reintro_at);
    if (pf[0].revents) {
      uint64_t v;
      if (read(r->wake, &v, sizeof v) < 0 && errno != EAGAIN) break;
      if (atomic_load(&r->closing)) break;
      relay_woken(r, &redial_at);
    }
    nng_msg *m;
    while ((m = m0__inbox_take(&r->replies)) != NULL)
      if (relay_reply_out(r, m) && !redial_at) redial_at = m0__now_ms() + RELAY_REDIAL_MS;
    for (int i = 2; i < n; i++) {
      if (!pf[i].revents) continue;
      m0__relay_leg *l = &r->legs[which[i]];
      while (l->open && nng_recvmsg(l->sock, &m, NNG_FLAG_NONBLOCK) == 0)
        relay_request(r, which[i] / r->nworkers, which[i] % r->nworkers, m);
    }
  }
  free(pf);
  free(which);
  free(again);
  return NULL;
}

int m0__relay_init(m0__relay *r, m0__service *svc, char (*doors)[M0__URL_MAX], int nworkers) {
  memset(r, 0, sizeof *r);
  r->svc = svc;
  r->nworkers = nworkers;
  r->wake = -1;
  r->doors = calloc((size_t)nworkers, sizeof *r->doors);
  r->legs = calloc((size_t)(M0__SLOTS * nworkers), sizeof *r->legs);
  r->leg_pipe = calloc(M0__SLOTS, sizeof *r->leg_pipe);
  r->book_cap = 64;
  r->book = calloc((size_t)r->book_cap, sizeof *r->book);
  r->book_index = calloc(2 * (size_t)r->book_cap, sizeof *r->book_index);
  r->inbox_made = m0__inbox_init(&r->replies) == 0;
  if (!r->doors || !r->legs || !r->leg_pipe || !r->book || !r->book_index || !r->inbox_made ||
      (r->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
    m0__relay_close(r);
    return M0__ENOMEM;
  }
  memcpy(r->doors, doors, (size_t)nworkers * sizeof *r->doors);
  for (int i = 0; i < M0__SLOTS * nworkers; i++) r->legs[i].fd = -1, r->legs[i].r = r;
  if (gethostname(r->host, sizeof r->host - 1) != 0) snprintf(r->host, sizeof r->host, "localhost");
  svc->relay_wake = m0__relay_wake;
  svc->relay_reply = m0__relay_reply;
  svc->relay = r; /* before svc listens: its threads read the three after */
  return 0;
}

int m0__relay_start(m0__relay *r) {
  if (pthread_create(&r->thread, NULL, relay_thread, r) != 0) return M0__ENOMEM;
  r->started = true;
  m0__relay_wake(r); /* instances that dialed before it began */
  return 0;
}

/* Whether `to` may name an asker in a worker: a worker's loop, or a row
 * of the book (the relay's thread alone reads the book: a row not written
 * is dropped there). */
static bool relay_reaches(const m0__relay *r, uint32_t to) {
  int role = M0__ACTOR_ROLE(to), i = M0__ACTOR_INDEX(to);
  return (role == M0__ROLE_LOOP && i < r->nworkers) || (role == M0__ROLE_RELAYED && i < M0__RELAY_BOOK_MAX);
}

int m0__relay_reply(m0__relay *r, uint32_t to, nng_msg *m) {
  if (nng_msg_len(m) < M0__ENV_HEADER || !relay_carries(m0__le_get16(nng_msg_body(m) + 4), true) ||
      !relay_reaches(r, to))
    return M0__EINVALID;
  return m0__inbox_put(&r->replies, m);
}

void m0__relay_wake(m0__relay *r) {
  uint64_t one = 1;
  if (r->wake >= 0 && write(r->wake, &one, sizeof one) < 0) { /* a full counter wakes already */
  }
}

void m0__relay_close(m0__relay *r) {
  if (!r->svc) return; /* never made */
  if (r->started) {
    atomic_store(&r->closing, true);
    m0__relay_wake(r);
    pthread_join(r->thread, NULL);
    r->started = false;
  }
  for (int i = 0; r->legs && i < M0__SLOTS * r->nworkers; i++) leg_close(&r->legs[i]);
  unsigned long long dropped = atomic_load(&r->dropped);
  if (dropped)
    fprintf(stderr, "m0: actor %s: the relay dropped %llu messages (a REPLY for no worker or a gone one, or a "
                    "worker's message that was no REQUEST, from an asker past the book's %d, or an instance's "
                    "queue full)\n", r->svc->name, dropped, M0__RELAY_BOOK_MAX);
  if (r->wake >= 0) close(r->wake);
  r->wake = -1;
  if (r->inbox_made) m0__inbox_fini(&r->replies);
  r->inbox_made = false;
  free(r->doors);
  free(r->legs);
  free(r->leg_pipe);
  free(r->book);
  free(r->book_index);
  r->book = NULL;
  r->book_index = NULL;
  r->nbook = r->book_cap = 0;
  r->doors = NULL;
  r->legs = NULL;
  r->leg_pipe = NULL;
  r->svc->relay = NULL;
  r->svc = NULL;
}
