/* HTTP/2 streams whose request leaves the loop: the handler threads, an
 * application actor and m0_defer answer a stand-in (m0__h2_proxy) as they
 * would a connection,
 * and the answer, when it comes, is sent on its stream if that is still
 * open. Design notes in http/h2.c. Everything here runs on the loop. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/errors.h"
#include "http/conn.h"
#include "http/h2.h"
#include "http/h2_state.h"

static m0__conn *h2_proxy_new(m0__h2_stream *st) {
  m0__h2_proxy *px = calloc(1, sizeof *px);
  if (!px) return NULL;
  px->c.h = st->c->h;
  px->c.h2_proxy = true;
  px->c.io_ops = st->c->io_ops;
  px->c.plain = st->c->plain;
  px->c.writing = true; /* its target is its own queue, which nothing writes */
  memcpy(px->c.peer, st->c->peer, sizeof px->c.peer);
  px->st = st;
  st->proxy = px;
  return &px->c;
}

/* The stand-in's end (its answer came, or its request was not taken): its
 * stream, or NULL when that closed meanwhile. */
static m0__h2_stream *h2_proxy_end(m0__conn *pc, bool waited) {
  m0__h2_proxy *px = (m0__h2_proxy *)pc;
  m0__h2_stream *st = px->st;
  m0__outq_free(&pc->q[0]);
  m0__outq_free(&pc->q[1]);
  free(px);
  if (st) {
    st->proxy = NULL;
    if (waited) st->c->h2->waiting--;
  }
  return st;
}

/* m0_defer on a stream: the loop's seam, given the stand-in. */
static m0_deferred *h2_defer_begin(void *ctx, m0_response *res, unsigned timeout_ms) {
  m0__h2_stream *st = ctx;
  m0__http *h = st->c->h;
  m0__conn *pc = h->ops->defer_view ? h2_proxy_new(st) : NULL;
  m0_deferred *d = pc ? h->ops->defer_view(h, pc, res, timeout_ms) : NULL;
  if (pc && !d) h2_proxy_end(pc, false);
  return d;
}

static char *h2_graph(void *ctx, const char *records_of) {
  m0__h2_stream *st = ctx;
  return st->c->h->ops->graph ? st->c->h->ops->graph(st->c->h, records_of) : NULL; /* a harness's: none */
}

/* m0_respond_writer on a stream: the loop's seam, given the stand-in
 * (its pieces: http/h2_stream.c). */
static m0_writer *h2_writer_begin(void *ctx, m0_response *res, int status, const char *content_type,
                                  void (*on_gone)(void *arg), void *arg) {
  m0__h2_stream *st = ctx;
  m0__http *h = st->c->h;
  m0__conn *pc = h->ops->writer_begin ? h2_proxy_new(st) : NULL;
  m0_writer *w = pc ? h->ops->writer_begin(h, pc, res, status, content_type, on_gone, arg) : NULL;
  if (pc && !w) h2_proxy_end(pc, false);
  return w;
}

/* What a view may do over HTTP/2: a stream (SSE) and a writer
 * (http/h2_stream.c), answer later, the graph; not a WebSocket
 * (m0_respond_websocket then answers 500). */
const m0__response_ops m0__h2_res_ops = {m0__h2_stream_begin, m0__h2_stream_write, NULL, h2_defer_begin,
                                         h2_writer_begin, h2_graph};

/* To an application actor's instance. true: it went. */
bool m0__h2_to_actor(m0__h2_stream *st, const m0_request *req, const m0_route *r, m0_response *res) {
  m0__http *h = st->c->h;
  m0__conn *pc = h->ops->to_actor ? h2_proxy_new(st) : NULL;
  if (pc && h->ops->to_actor(h, pc, req, r, res) == 0) return true;
  if (pc) h2_proxy_end(pc, false);
  if (!res->done) m0__respond_status(res, 503, NULL);
  return false;
}

/* To the handler threads (route: -1 for app->handle). true: it went. */
bool m0__h2_to_pool(m0__h2_stream *st, const m0_request *req, int route, m0_response *res) {
  m0__http *h = st->c->h;
  m0__conn *pc = h2_proxy_new(st);
  if (pc && h->ops->defer(h, pc, req, route, res) == 0) return true;
  if (pc) h2_proxy_end(pc, false);
  m0_response_header(res, "Retry-After", "1");
  m0__respond_status(res, 503, NULL);
  return false;
}

/* ---- the answers that come later --------------------------------------- */

/* A waiting stream's answer is in its queue (ok), or none can be: sent,
 * and the connection goes on. */
static void h2_later(m0__h2_stream *st, bool ok) {
  m0__conn *c = st->c;
  c->h->stats.requests++;
  if (!ok || m0__h2_submit(c, st) != 0)
    nghttp2_submit_rst_stream(c->h2->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
  m0__h2_deadline(c);
  m0__h2_sweep(c); /* draining: closed once this stream is sent (m0__h2_pump) */
}

void m0__h2_complete(m0__conn *pc, const void *resp, size_t n, int fd, uint64_t off, uint64_t flen) {
  m0__outq *mine = &pc->q[1 - pc->qi], *out = ((m0__h2_proxy *)pc)->st ? &((m0__h2_proxy *)pc)->st->out : NULL;
  /* No answer given: one written into the stand-in's own queue is it (a
   * writer's begin refused, 501: actors/writer.c), else the stream resets. */
  bool ok = out && !n && fd < 0 && m0__outq_bytes(mine) && m0__outq_move_tail(out, mine, 0) == 0;
  m0__h2_stream *st = h2_proxy_end(pc, true);
  if (!ok) ok = st && n && m0__outq_append(&st->out, resp, n) == 0;
  if (fd >= 0 && ok) ok = m0__outq_file(&st->out, fd, off, (size_t)flen) == 0; /* the queue owns fd */
  else if (fd >= 0) close(fd);
  if (st) h2_later(st, ok);
}

long m0__h2_answer(m0__conn *pc, const m0__answer *a, int *status) {
  m0__h2_stream *st = h2_proxy_end(pc, true);
  if (!st) return M0__ECLOSED;
  m0_response res;
  m0__response_init(&res, &st->out, &st->c->h->date, 1, a->head, false);
  m0__answer_write(&res, a);
  *status = res.status;
  h2_later(st, true);
  return res.head ? 0 : (long)res.body_len;
}

