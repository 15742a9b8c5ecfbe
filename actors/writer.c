#include "actors/writer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/errors.h"
#include "http/conn_state.h"
#include "http/h2.h"
#include "service/stream.h"

typedef struct lwriter lwriter;
struct lwriter {
  m0_writer base; /* its ops: lw_ops */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int refs;          /* the application's and the loop's (under mu) */
  bool gone;         /* the client went, or the loop ended: nothing more is sent (under mu) */
  bool ended;        /* m0_writer_end was called: on_gone is not called after it (under mu) */
  bool in_gone;      /* on_gone is running on the loop: m0_writer_end waits for it (under mu) */
  bool loop_alive;   /* the loop's inbox may be sent to (under mu) */
  size_t sent, taken, in_conn; /* bytes: written by the application, taken by the loop, unwritten in the connection */
  m0__inbox *inbox;
  uint32_t loop_id;
  m0__tracer *trace;
  pthread_t loop_thread;
  void (*on_gone)(void *arg);
  void (*on_room)(void *arg); /* the socket took bytes (a streamed reply's credit: actors/streamed.c) */
  void *arg;
  nng_msg *end; /* the END, made at the begin: an end never fails for memory */
  /* the loop's own */
  m0__conn *conn; /* NULL once gone */
  bool chunked, head;
  lwriter *prev, *next; /* the loop's writers */
};

/* The loop's list (its http's writers field). */
static lwriter **writers_of(m0__loop *l) { return (lwriter **)&l->http.writers; }

static void writer_unref(lwriter *w) {
  pthread_mutex_lock(&w->mu);
  bool last = --w->refs == 0;
  pthread_mutex_unlock(&w->mu);
  if (!last) return;
  if (w->end) nng_msg_free(w->end); /* never sent: the loop ended first */
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
  free(w);
}

static size_t writer_queued(const lwriter *w) { return w->sent - w->taken + w->in_conn; }

static void writer_unlink(m0__loop *l, lwriter *w) {
  if (w->prev) w->prev->next = w->next;
  else *writers_of(l) = w->next;
  if (w->next) w->next->prev = w->prev;
  w->prev = w->next = NULL;
}

static nng_msg *writer_msg(lwriter *w, const void *p, size_t n, bool end);
static const m0__writer_ops lw_ops;

/* ---- the loop's side ---- */

m0_writer *m0__writer_begin(m0__http *h, m0__conn *c, m0_response *res, int status, const char *content_type,
                            void (*on_gone)(void *arg), void *arg) {
  m0__loop *l = h->owner;
  if (status < 200 || status > 599 || status == 204 || status == 205 || status == 304) {
    fprintf(stderr, "m0: refused a writer with the status %d (one with a body: 200..599 but 204, 205, 304); "
                    "answered 500\n", status);
    m0__respond_status(res, 500, NULL);
    return NULL;
  }
  lwriter *w = calloc(1, sizeof *w);
  if (!w || !(w->end = writer_msg(w, NULL, 0, true))) {
    free(w);
    return NULL;
  }
  bool chunked = res->version_minor >= 1 && !c->h2_proxy; /* HTTP/2 frames its DATA itself */
  if (!chunked && !c->h2_proxy) res->close = true; /* HTTP/1.0: the end of the body is the close */
  m0__body b = {NULL, 0, M0_BODY_COPY, NULL, -1, 0, chunked ? M0__BODY_CHUNKED : M0__BODY_UNTIL_CLOSE};
  if (m0__respond_body(res, status, content_type, &b) != 0) { /* a bad content type: answered 500 */
    nng_msg_free(w->end);
    free(w);
    return NULL;
  }
  if (c->h2_proxy && m0__h2_pieces_begin(c) != 0) { /* an HTTP/2 stream (http/h2_stream.c), closed meanwhile */
    nng_msg_free(w->end);
    free(w);
    return NULL;
  }
  pthread_mutex_init(&w->mu, NULL);
  m0__cond_init_monotonic(&w->cv);
  w->base.ops = &lw_ops;
  w->refs = 2;
  w->loop_alive = true;
  w->inbox = &l->inbox;
  w->loop_id = l->self.id;
  w->trace = l->trace;
  w->loop_thread = pthread_self();
  w->on_gone = on_gone;
  w->arg = arg;
  w->conn = c;
  w->chunked = chunked;
  w->head = res->head;
  w->next = *writers_of(l);
  if (w->next) w->next->prev = w;
  *writers_of(l) = w;
  c->writer = &w->base;
  res->deferred = true; /* the connection waits for the END */
  return &w->base;
}

/* The connection is closing (the client went, a write failed, the loop
 * ends): the writer is gone, once. */
void m0__writer_gone(m0__http *h, m0__conn *c) {
  lwriter *w = (lwriter *)c->writer;
  c->writer = NULL;
  c->waiting = false; /* nothing will come back for it: its memory goes with the close */
  pthread_mutex_lock(&w->mu);
  w->gone = true;
  w->conn = NULL;
  bool call = w->on_gone && !w->ended; /* an ended writer's arg may be freed already */
  w->in_gone = call;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  if (!call) return;
  w->on_gone(w->arg);
  pthread_mutex_lock(&w->mu);
  w->in_gone = false;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

/* The socket took bytes: a writer waiting for room may go on. */
void m0__writer_progress(m0__http *h, m0__conn *c) {
  lwriter *w = (lwriter *)c->writer;
  pthread_mutex_lock(&w->mu);
  w->in_conn = m0__conn_queued(c);
  if (writer_queued(w) <= M0__WRITER_LOW) pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  if (w->on_room) w->on_room(w->arg);
}

/* CHUNK payload: u64 the writer, u8 end, then the piece. */
#define CHUNK_HEAD 9

/* A piece framed into the connection (on the loop), and counted taken. */
static void writer_put(m0__loop *l, lwriter *w, const void *p, size_t n) {
  m0__conn *c = w->conn;
  if (c && n && !w->head) {
    m0__outq *q = m0__conn_target(c);
    char size[24];
    int sn = snprintf(size, sizeof size, "%zx\r\n", n);
    bool ok = !w->chunked || m0__outq_append(q, size, (size_t)sn) == 0;
    ok = ok && m0__outq_append(q, p, n) == 0;
    ok = ok && (!w->chunked || m0__outq_append(q, "\r\n", 2) == 0);
    m0__conn_flush(c);
    if (!ok) m0__http_abort(&l->http, c); /* out of memory mid-body: the response cannot be whole */
  }
  pthread_mutex_lock(&w->mu);
  w->taken += n;
  if (w->conn) w->in_conn = m0__conn_queued(w->conn);
  if (writer_queued(w) <= M0__WRITER_LOW) pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

/* The end (on the loop): the last chunk, or for an abort the close. */
static void writer_close(m0__loop *l, lwriter *w, bool abort) {
  m0__conn *c = w->conn;
  if (c) {
    c->writer = NULL;
    w->conn = NULL;
    /* An abort writes no last chunk and closes once what was written is
     * sent: the client sees the body cut short, never one that looks whole. */
    if (abort) c->close_on_complete = true;
    else if (w->chunked && !w->head) m0__outq_append(m0__conn_target(c), "0\r\n\r\n", 5);
    m0__http_resume(&l->http, c);
  }
  writer_unlink(l, w);
  writer_unref(w); /* the loop's */
}

void m0__writer_on_chunk(m0__loop *l, const m0__msg *m) {
  if (m->len < CHUNK_HEAD) return;
  uint64_t p;
  memcpy(&p, m->payload, 8);
  lwriter *w = (lwriter *)(uintptr_t)p;
  writer_put(l, w, m->payload + CHUNK_HEAD, m->len - CHUNK_HEAD);
  if (m->payload[8] != 0) writer_close(l, w, m->payload[8] == 2);
}

/* ---- a writer the loop itself writes (a streamed reply: actors/streamed.c) ---- */

void m0__writer_put(m0__loop *l, m0_writer *w, const void *p, size_t n) { writer_put(l, (lwriter *)w, p, n); }

void m0__writer_on_room(m0_writer *w, void (*on_room)(void *arg)) { ((lwriter *)w)->on_room = on_room; }

size_t m0__writer_held(m0_writer *base) {
  lwriter *w = (lwriter *)base;
  return w->conn ? m0__conn_queued(w->conn) : 0;
}

void m0__writer_close(m0__loop *l, m0_writer *base, bool abort) {
  lwriter *w = (lwriter *)base;
  pthread_mutex_lock(&w->mu);
  bool mine = !w->ended; /* once: the loop's part may have gone with the loop */
  w->ended = true;
  pthread_mutex_unlock(&w->mu);
  if (!mine) return;
  if (w->loop_alive) writer_close(l, w, abort);
  writer_unref(w); /* the application's: the loop was it */
}

void m0__writers_free(m0__loop *l) {
  lwriter *w = *writers_of(l), *next;
  for (; w; w = next) {
    next = w->next;
    pthread_mutex_lock(&w->mu);
    w->gone = true;
    w->loop_alive = false; /* its inbox is about to go */
    w->conn = NULL;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    writer_unref(w);
  }
  *writers_of(l) = NULL;
}

/* ---- the application's side ---- */

m0_writer *m0_respond_writer(m0_response *res, int status, const char *content_type, void (*on_gone)(void *arg),
                             void *arg) {
  if (!res || res->done || res->deferred || !res->ops || !res->ops->writer_begin) {
    if (res && !res->done && (!res->ops || !res->ops->writer_begin)) {
      fprintf(stderr, "m0: a writer was begun on a pool thread; answered 409 (begin writers on the loop: an "
                      "M0_ON_LOOP route, and write from any thread)\n");
      m0__respond_status(res, 409, NULL);
    }
    return NULL;
  }
  return res->ops->writer_begin(res->ops_ctx, res, status, content_type, on_gone, arg);
}

/* A CHUNK message for w: a piece, or the end. */
static nng_msg *writer_msg(lwriter *w, const void *p, size_t n, bool end) {
  nng_msg *m;
  if (m0__msg_new(&m, CHUNK_HEAD + n) != 0) return NULL;
  uint64_t self = (uint64_t)(uintptr_t)w;
  uint8_t e = end;
  if (m0__msg_append(m, &self, 8) != 0 || m0__msg_append(m, &e, 1) != 0 || (n && m0__msg_append(m, p, n) != 0)) {
    nng_msg_free(m);
    return NULL;
  }
  return m;
}

/* Sends a piece, or (end: 1, or 2 for an abort) the END made at the begin.
 * Under w->mu. */
static int writer_send(lwriter *w, const void *p, size_t n, int end) {
  nng_msg *m = end ? w->end : writer_msg(w, p, n, false);
  if (!m) return M0__ENOMEM;
  if (end) {
    w->end = NULL;
    m0__msg_payload(m)[8] = (uint8_t)end;
  }
  m0__actor from = {.id = M0__ACTOR_ID(M0__ROLE_EXTERNAL, 0), .trace = w->trace};
  m0__peer to;
  m0__peer_direct(&to, w->loop_id, w->inbox);
  if (m0__send_msg(&from, &to, M0__K_CHUNK, 0, 0, m) != 0) {
    nng_msg_free(m);
    return M0__ETRANSPORT;
  }
  return 0;
}

#define WRITER_MSG_MAX (1u << 20) /* a piece travels in messages of at most 1 MiB */

static int lw_write(m0_writer *base, const void *p, size_t n) {
  lwriter *w = (lwriter *)base;
  if (n && !p) return M0__EINVALID;
  if (n == 0) return 0;
  pthread_mutex_lock(&w->mu);
  int rv = 0;
  size_t queued = writer_queued(w);
  /* Refused only with something queued: a piece larger than the mark on
   * its own is taken (else no wait could ever make room for it). */
  if (w->gone) errno = EPIPE, rv = -1;
  else if (queued > 0 && queued + n > M0__WRITER_HIGH) errno = EAGAIN, rv = -1;
  for (size_t at = 0; rv == 0 && at < n;) {
    size_t k = n - at < WRITER_MSG_MAX ? n - at : WRITER_MSG_MAX;
    if (writer_send(w, (const char *)p + at, k, false) != 0) errno = ENOMEM, rv = -1; /* the part sent stays sent */
    else w->sent += k, at += k;
  }
  pthread_mutex_unlock(&w->mu);
  return rv;
}

static int lw_wait(m0_writer *base, unsigned timeout_ms) {
  lwriter *w = (lwriter *)base;
  struct timespec until = m0__timespec_in(timeout_ms);
  pthread_mutex_lock(&w->mu);
  /* On the loop's own thread nothing can make room while it waits. */
  bool loop = pthread_equal(pthread_self(), w->loop_thread);
  int rc = 0;
  while (!w->gone && !loop && writer_queued(w) > M0__WRITER_LOW && rc == 0)
    rc = pthread_cond_timedwait(&w->cv, &w->mu, &until);
  int rv = w->gone ? (errno = EPIPE, -1) : writer_queued(w) > M0__WRITER_LOW ? (errno = ETIMEDOUT, -1) : 0;
  pthread_mutex_unlock(&w->mu);
  return rv;
}

static int lw_finish(m0_writer *base, int how) {
  lwriter *w = (lwriter *)base;
  pthread_mutex_lock(&w->mu);
  w->ended = true;
  /* An on_gone running now finishes before this returns, so the caller may
   * free its arg then (on the loop's own thread it is this very call). */
  while (w->in_gone && !pthread_equal(pthread_self(), w->loop_thread)) pthread_cond_wait(&w->cv, &w->mu);
  bool gone = w->gone;
  /* The END is what lets the loop go of the writer: sent even when the
   * client went (unless the loop itself ended). */
  int rv = w->loop_alive ? writer_send(w, NULL, 0, how) : M0__ECLOSED;
  pthread_mutex_unlock(&w->mu);
  writer_unref(w); /* the application's */
  return gone || rv ? -1 : 0;
}

static const m0__writer_ops lw_ops = {lw_write, lw_wait, lw_finish};
