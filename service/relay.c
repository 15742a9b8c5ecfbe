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
 * and where it dialed from (relay.h). A leg that cannot take it now is told
 * at its next connection. */
static void leg_introduce(m0__relay *r, int k, m0__relay_leg *l) {
  uint8_t intro[M0__INTRO_MAX], seal[M0__SEAL_LEN];
  char where[48];
  m0__pipe_where(r->leg_pipe[k], r->host, where, sizeof where);
  size_t len = m0__intro_write(intro, k, where);
  nng_msg *m;
  if (nng_msg_alloc(&m, M0__ENV_HEADER) != 0) return;
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
  }
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
  nng_socket_set_int(l->sock, NNG_OPT_SENDBUF, 16); /* a REPLY is put, never waited for (its worker may be gone) */
  nng_socket_set_ms(l->sock, NNG_OPT_SENDTIMEO, 100);
  if (nng_dial(l->sock, r->doors[w], NULL, NNG_FLAG_NONBLOCK) != 0 ||
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

/* A REQUEST batch from a worker, for slot k's instance. */
static void relay_request(m0__relay *r, int k, nng_msg *m) {
  m0__env e;
  uint32_t len;
  if (nng_msg_len(m) < M0__ENV_HEADER || m0__env_read_header(nng_msg_body(m), &e, &len) != 0 ||
      e.kind != M0__K_REQUEST || e.flags != 0 || r->leg_pipe[k] == 0) {
    atomic_fetch_add(&r->dropped, 1);
    nng_msg_free(m);
    return;
  }
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

/* A REPLY from slot k's instance (its `from` stamped by the service), on
 * the leg to the worker its `to` names. */
static void relay_reply_out(m0__relay *r, nng_msg *m) {
  const uint8_t *h = nng_msg_body(m);
  int k = M0__ACTOR_INDEX(m0__le_get32(h + 8)) & 0xfff, w = M0__ACTOR_INDEX(m0__le_get32(h + 12));
  m0__relay_leg *l = k < M0__SLOTS && w < r->nworkers ? leg_of(r, k, w) : NULL;
  if (!l || !l->open || nng_sendmsg(l->sock, m, NNG_FLAG_NONBLOCK) != 0) {
    atomic_fetch_add(&r->dropped, 1);
    nng_msg_free(m);
  }
}

static void *relay_thread(void *arg) {
  m0__relay *r = arg;
  int nfds = 2 + M0__SLOTS * r->nworkers;
  struct pollfd *pf = calloc((size_t)nfds, sizeof *pf);
  int *which = calloc((size_t)nfds, sizeof *which);
  if (!pf || !which) {
    fprintf(stderr, "m0: actor %s: the relay has no memory; its instances serve no worker\n", r->svc->name);
    free(pf);
    free(which);
    return NULL;
  }
  while (!atomic_load(&r->closing)) {
    int n = 0;
    pf[n++] = (struct pollfd){.fd = r->wake, .events = POLLIN};
    pf[n++] = (struct pollfd){.fd = r->replies.efd, .events = POLLIN};
    for (int i = 0; i < M0__SLOTS * r->nworkers; i++)
      if (r->legs[i].open) which[n] = i, pf[n++] = (struct pollfd){.fd = r->legs[i].fd, .events = POLLIN};
    if (poll(pf, (nfds_t)n, -1) < 0 && errno != EINTR) break;
    if (pf[0].revents) {
      uint64_t v;
      if (read(r->wake, &v, sizeof v) < 0 && errno != EAGAIN) break;
      if (atomic_load(&r->closing)) break;
      relay_match(r);
      for (int i = 0; i < M0__SLOTS * r->nworkers; i++)
        if (r->legs[i].open && atomic_exchange(&r->legs[i].introduce, false))
          leg_introduce(r, i / r->nworkers, &r->legs[i]);
    }
    nng_msg *m;
    while ((m = m0__inbox_take(&r->replies)) != NULL) relay_reply_out(r, m);
    for (int i = 2; i < n; i++) {
      if (!pf[i].revents) continue;
      m0__relay_leg *l = &r->legs[which[i]];
      while (l->open && nng_recvmsg(l->sock, &m, NNG_FLAG_NONBLOCK) == 0)
        relay_request(r, which[i] / r->nworkers, m);
    }
  }
  free(pf);
  free(which);
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
  r->inbox_made = m0__inbox_init(&r->replies) == 0;
  if (!r->doors || !r->legs || !r->leg_pipe || !r->inbox_made ||
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

int m0__relay_reply(m0__relay *r, uint32_t to, nng_msg *m) {
  if (M0__ACTOR_ROLE(to) != M0__ROLE_LOOP || M0__ACTOR_INDEX(to) >= r->nworkers) return M0__EINVALID;
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
                    "worker's message that was no REQUEST, or an instance's queue full)\n", r->svc->name, dropped);
  if (r->wake >= 0) close(r->wake);
  r->wake = -1;
  if (r->inbox_made) m0__inbox_fini(&r->replies);
  r->inbox_made = false;
  free(r->doors);
  free(r->legs);
  free(r->leg_pipe);
  r->doors = NULL;
  r->legs = NULL;
  r->leg_pipe = NULL;
  r->svc->relay = NULL;
  r->svc = NULL;
}
