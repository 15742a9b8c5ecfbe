#include "service/stream.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/errors.h"
#include "runtime/actor.h"
#include "service/wire.h"

#define STREAM_LOW (64u << 10) /* m0_writer_wait returns once at most this much is not granted back */

typedef struct rwriter {
  m0_writer base;
  m0__streams *sx;
  uint64_t id;
  uint32_t from, to;
  uint64_t sent, granted; /* bytes sent; bytes the loop allows (the window, then each MORE) */
  bool gone;
  struct rwriter *next;
} rwriter;

struct m0__streams {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  m0__streams_send send; /* NULL once the instance ended */
  void *ctx;
  pthread_t serving;     /* the thread that takes CREDITs */
  int refs;              /* the instance's, and each writer's */
  rwriter *open;
};

/* ---- the one m0_writer: each call passed to its kind ---- */

int m0_writer_write(m0_writer *w, const void *p, size_t n) { return w && w->ops->write(w, p, n) == 0 ? 0 : -1; }
int m0_writer_wait(m0_writer *w, unsigned timeout_ms) { return w && w->ops->wait(w, timeout_ms) == 0 ? 0 : -1; }
int m0_writer_end(m0_writer *w) { return w && w->ops->finish(w, 1) == 0 ? 0 : -1; }
int m0_writer_abort(m0_writer *w) { return w && w->ops->finish(w, 2) == 0 ? 0 : -1; }

/* ---- an instance's streams ---- */

static void streams_unref(m0__streams *sx) { /* under mu; unlocks */
  bool last = --sx->refs == 0;
  pthread_mutex_unlock(&sx->mu);
  if (!last) return;
  pthread_mutex_destroy(&sx->mu);
  pthread_cond_destroy(&sx->cv);
  free(sx);
}

m0__streams *m0__streams_new(m0__streams_send send, void *ctx) {
  m0__streams *sx = calloc(1, sizeof *sx);
  if (!sx) return NULL;
  pthread_mutex_init(&sx->mu, NULL);
  m0__cond_init_monotonic(&sx->cv);
  sx->send = send;
  sx->ctx = ctx;
  sx->serving = pthread_self();
  sx->refs = 1;
  return sx;
}

void m0__streams_close(m0__streams *sx) {
  if (!sx) return;
  pthread_mutex_lock(&sx->mu);
  sx->send = NULL;
  for (rwriter *w = sx->open; w; w = w->next) w->gone = true;
  pthread_cond_broadcast(&sx->cv);
  streams_unref(sx);
}

int m0__streams_credit(m0__streams *sx, uint32_t from, const uint8_t *payload, size_t len) {
  uint32_t op, bytes;
  uint64_t id;
  if (m0__wire_credit_read(payload, len, &op, &id, &bytes) != 0) return M0__EBADMSG;
  pthread_mutex_lock(&sx->mu);
  for (rwriter *w = sx->open; w; w = w->next) {
    if (w->id != id || w->to != from) continue;
    if (op == M0__CREDIT_GONE) w->gone = true;
    else if ((uint32_t)(bytes - (uint32_t)w->granted) < (1u << 31)) /* the room in all, mod 2^32: an old one is none */
      w->granted += (uint32_t)(bytes - (uint32_t)w->granted);
    pthread_cond_broadcast(&sx->cv);
  }
  pthread_mutex_unlock(&sx->mu);
  return 0;
}

/* A STREAM of w's: op with p (DATA). Under mu. */
static int rw_send(rwriter *w, uint32_t op, const void *p, size_t n) {
  m0__streams *sx = w->sx;
  nng_msg *m;
  if (!sx->send) return M0__ECLOSED;
  int rv = m0__wire_stream_new(&m, op, w->id, 0, NULL, 0, p, n);
  if (rv != 0) return rv;
  if ((rv = sx->send(sx->ctx, w->from, w->to, m)) != 0) nng_msg_free(m);
  return rv;
}

static int rw_write(m0_writer *base, const void *p, size_t n) {
  rwriter *w = (rwriter *)base;
  if (n && !p) return M0__EINVALID;
  if (n == 0) return 0;
  m0__streams *sx = w->sx;
  pthread_mutex_lock(&sx->mu);
  uint64_t room = w->granted - w->sent;
  int rv = 0;
  /* A piece is sent whole or not at all: one over the window could never be. */
  if (w->gone) errno = EPIPE, rv = -1;
  else if (n > M0__STREAM_WINDOW) errno = EMSGSIZE, rv = -1;
  else if (n > room) errno = EAGAIN, rv = -1;
  /* Not sent: the instance ended (EPIPE), no memory, or its link did not
   * take it in time (EAGAIN, as for no room: wait, then write again). */
  else if ((rv = rw_send(w, M0__STREAM_DATA, p, n)) != 0)
    errno = rv == M0__ECLOSED ? EPIPE : rv == M0__ENOMEM ? ENOMEM : EAGAIN, rv = -1;
  else w->sent += n;
  pthread_mutex_unlock(&sx->mu);
  return rv;
}

static int rw_wait(m0_writer *base, unsigned timeout_ms) {
  rwriter *w = (rwriter *)base;
  m0__streams *sx = w->sx;
  struct timespec until = m0__timespec_in(timeout_ms);
  pthread_mutex_lock(&sx->mu);
  bool serving = pthread_equal(pthread_self(), sx->serving); /* no CREDIT is taken while it waits */
  int rc = 0;
  while (!w->gone && !serving && w->sent + M0__STREAM_WINDOW - w->granted > STREAM_LOW && rc == 0)
    rc = pthread_cond_timedwait(&sx->cv, &sx->mu, &until);
  int rv = w->gone ? (errno = EPIPE, -1)
           : w->sent + M0__STREAM_WINDOW - w->granted > STREAM_LOW ? (errno = ETIMEDOUT, -1) : 0;
  pthread_mutex_unlock(&sx->mu);
  return rv;
}

static int rw_finish(m0_writer *base, int how) {
  rwriter *w = (rwriter *)base;
  m0__streams *sx = w->sx;
  pthread_mutex_lock(&sx->mu);
  bool gone = w->gone;
  /* Sent even when the client went: the loop lets go of the request then. */
  int rv = rw_send(w, how == 2 ? M0__STREAM_ABORT : M0__STREAM_END, NULL, 0);
  for (rwriter **at = &sx->open; *at; at = &(*at)->next)
    if (*at == w) {
      *at = w->next;
      break;
    }
  free(w);
  streams_unref(sx);
  return gone || rv != 0 ? -1 : 0;
}

static const m0__writer_ops rw_ops = {rw_write, rw_wait, rw_finish};

m0_writer *m0__streams_open(m0__streams *sx, uint32_t from, uint32_t to, uint64_t id, int status,
                            const m0_header *hdrs, size_t n) {
  if (!sx || status < 200 || status > 599 || status == 204 || status == 205 || status == 304) return NULL;
  rwriter *w = calloc(1, sizeof *w);
  nng_msg *m;
  if (!w) return NULL;
  if (m0__wire_stream_new(&m, M0__STREAM_OPEN, id, status, hdrs, n, NULL, 0) != 0) {
    free(w);
    return NULL;
  }
  *w = (rwriter){{&rw_ops}, sx, id, from, to, 0, M0__STREAM_WINDOW, false, NULL};
  pthread_mutex_lock(&sx->mu);
  if (!sx->send || sx->send(sx->ctx, from, to, m) != 0) {
    pthread_mutex_unlock(&sx->mu);
    nng_msg_free(m);
    free(w);
    return NULL;
  }
  w->next = sx->open;
  sx->open = w;
  sx->refs++;
  pthread_mutex_unlock(&sx->mu);
  return &w->base;
}
