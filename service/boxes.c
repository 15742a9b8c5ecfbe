#include "service/boxes.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/errors.h"
#include "base/ids.h"
#include "service/wire.h"
#include "base/clock.h"

m0__boxes *m0__boxes_new(m0__callers *callers, m0__tracer *trace) {
  m0__boxes *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  pthread_mutex_init(&b->mu, NULL);
  b->refs = 1;
  b->callers = callers;
  b->trace = trace;
  return b;
}

/* One reference given back; the last frees the table. */
static void boxes_unref(m0__boxes *b) {
  pthread_mutex_lock(&b->mu);
  bool last = --b->refs == 0;
  pthread_mutex_unlock(&b->mu);
  if (!last) return;
  for (int i = 0; i < M0__BOXES; i++)
    if (b->box[i].made) m0__inbox_fini(&b->box[i].inbox);
  pthread_mutex_destroy(&b->mu);
  free(b);
}

void m0__boxes_stop(m0__boxes *b) {
  pthread_mutex_lock(&b->mu);
  atomic_store(&b->stopped, true);
  b->callers = NULL;
  uint64_t one = 1;
  for (int i = 0; i < M0__BOXES; i++) /* a receive waiting wakes, and sees the stop */
    if (b->box[i].name[0] && write(b->box[i].inbox.efd, &one, sizeof one) < 0) {
    }
  pthread_mutex_unlock(&b->mu);
  boxes_unref(b);
}

/* The open box of that name (under mu), or M0__ENOTFOUND. */
static int box_find(const m0__boxes *b, const char *name, size_t n) {
  for (int i = 0; i < M0__BOXES; i++)
    if (b->box[i].name[0] && strlen(b->box[i].name) == n && !memcmp(b->box[i].name, name, n)) return i;
  return M0__ENOTFOUND;
}

int m0__box_open(m0__boxes *b, const char *name) {
  int rv = -ENOSPC;
  pthread_mutex_lock(&b->mu);
  if (box_find(b, name, strlen(name)) >= 0) rv = -EEXIST;
  for (int i = 0; rv == -ENOSPC && i < M0__BOXES; i++) {
    m0__box *x = &b->box[i];
    if (x->name[0]) continue;
    if (!x->made && m0__inbox_init(&x->inbox) != 0) {
      rv = -ENOMEM;
      break;
    }
    x->made = true;
    atomic_store(&x->queued, 0);
    snprintf(x->name, sizeof x->name, "%s", name);
    b->refs++;
    rv = i;
  }
  pthread_mutex_unlock(&b->mu);
  return rv;
}

void m0__box_close(m0__boxes *b, int i) {
  m0__box *x = &b->box[i];
  pthread_mutex_lock(&b->mu);
  x->name[0] = 0; /* no send finds it from now */
  pthread_mutex_unlock(&b->mu);
  while (atomic_load(&x->users) > 0) sched_yield(); /* a send that found it before: one inbox put */
  for (nng_msg *m; (m = m0__inbox_take(&x->inbox));) nng_msg_free(m);
  boxes_unref(b);
}

int m0__box_recv(m0__boxes *b, int i, unsigned timeout_ms, m0__received *out) {
  m0__box *x = &b->box[i];
  int64_t deadline = m0__now_ms() + timeout_ms;
  for (;;) {
    if (atomic_load(&b->stopped)) return errno = ECANCELED, M0__ECLOSED;
    nng_msg *n = m0__inbox_take(&x->inbox);
    if (!n) {
      int64_t left = deadline - m0__now_ms();
      if (left <= 0) return errno = ETIMEDOUT, M0__ETIMEDOUT;
      struct pollfd pf = {.fd = x->inbox.efd, .events = POLLIN};
      (void)poll(&pf, 1, (int)left);
      continue;
    }
    atomic_fetch_sub(&x->queued, 1);
    m0__env e;
    const uint8_t *payload;
    size_t len;
    m0__wire_message msg;
    if (m0__env_read(nng_msg_body(n), nng_msg_len(n), &e, &payload, &len) != 0 ||
        m0__wire_message_read(payload, len, &msg) != 0) {
      nng_msg_free(n); /* only the post puts here: not seen */
      continue;
    }
    char *mem = malloc(msg.data.n ? msg.data.n : 1);
    if (mem && msg.data.n) memcpy(mem, msg.data.p, msg.data.n);
    nng_msg_free(n);
    if (!mem) return errno = ENOMEM, M0__ENOMEM;
    *out = (m0__received){msg.type, {mem, msg.data.n}, mem, msg.call, e.from};
    return 0;
  }
}

int m0__box_reply(m0__boxes *b, int i, const m0__received *call, uint32_t type, const void *data, size_t len) {
  if (!call->call) return errno = EINVAL, M0__EINVALID; /* a send: nobody waits */
  nng_msg *m;
  int rv = m0__wire_return_new(&m, call->call, type, M0__RETURN_ANSWERED, data, len);
  if (rv != 0) return errno = rv == M0__ETOOBIG ? EMSGSIZE : ENOMEM, rv;
  m0__actor self = {.id = M0__ACTOR_ID(M0__ROLE_MAILBOX, i), .trace = b->trace, .recv_fd = -1};
  m0__peer peer;
  /* Under mu: the stop, which takes it too, ends the callers' lives after. */
  pthread_mutex_lock(&b->mu);
  m0__inbox *to = b->callers ? m0__callers_inbox(b->callers, call->from) : NULL;
  m0__peer_direct(&peer, call->from, to);
  if (to) rv = m0__send_msg(&self, &peer, M0__K_RETURN, 0, 0, m);
  else rv = b->callers && b->answer && b->answer(b->answer_arg, self.id, call->from, m) ? 0 : M0__ECLOSED;
  pthread_mutex_unlock(&b->mu);
  if (rv == 0) return 0;
  nng_msg_free(m);
  return errno = EPIPE, M0__ECLOSED; /* the caller gave up, or the host stopped */
}

int m0__box_hold(m0__boxes *b, const char *name, size_t n) {
  pthread_mutex_lock(&b->mu);
  int i = box_find(b, name, n);
  if (i >= 0) atomic_fetch_add(&b->box[i].users, 1);
  pthread_mutex_unlock(&b->mu);
  return i;
}

void m0__box_release(m0__boxes *b, int i) { atomic_fetch_sub(&b->box[i].users, 1); }

int m0__boxes_watch(m0__boxes *b, int actor, const char *watcher) {
  int rv = -ENOSPC;
  pthread_mutex_lock(&b->mu);
  for (int i = 0; i < b->nwatch; i++)
    if (b->watch[i].actor == actor && !strcmp(b->watch[i].watcher, watcher)) rv = -EEXIST;
  if (rv == -ENOSPC && b->nwatch < M0__WATCHES) {
    m0__watch *w = &b->watch[b->nwatch++];
    w->actor = actor;
    snprintf(w->watcher, sizeof w->watcher, "%s", watcher);
    rv = 0;
  }
  pthread_mutex_unlock(&b->mu);
  return rv;
}
