/* HTTP/2 streams that are server-sent-event streams (m0_respond_stream, a
 * route that is a channel) or replies in pieces (a writer: an application
 * actor's, a view's): each event or piece a DATA frame on its stream.
 *
 * Design notes
 * - The channels (http/stream.c) subscribe, queue, cap and tell
 *   connections; an HTTP/2 stream is none, so it is given a stand-in
 *   (h2s_sub: an m0__conn with no socket, c.h2_sse) that http/stream.c
 *   treats as any stream: its fan-out, heartbeat, Last-Event-ID replay,
 *   m0.gap, the drain's goodbye and the subscriber count are the ones
 *   HTTP/1.1's streams have. The stand-in is always "writing", so what it
 *   is given waits in its two queues (c.q[1 - c.qi] collects, c.q[c.qi]
 *   with c.qskip taken is being sent) and is never tried on a socket.
 * - Its stream's DATA is read from those queues by a data provider
 *   (h2s_read): nothing queued is NGHTTP2_ERR_DEFERRED, and the stand-in's
 *   flush (http/write.c's m0__conn_flush sends it here) resumes it a turn
 *   later (h2s_on_idle: never inside nghttp2's own calls, nor under a
 *   fan-out, which frees nothing it walks). Flow control is nghttp2's: a
 *   client that opens no window takes nothing, its stand-in's queue fills to
 *   M0__STREAM_QUEUE and the channel drops its frames and tells it (m0.gap)
 *   once it read what waited (m0__stream_caught_up), as a slow HTTP/1.1
 *   subscriber is.
 * - The stream ends with END_STREAM once the stand-in is told to close
 *   (the drain's m0.closing, c.close_after) and its queues are sent; a
 *   client's RST_STREAM (or the connection's end) closes the stream, and
 *   m0__h2_sse_end takes the stand-in out of its channels at once; its
 *   memory goes in its idle handle's close callback, a turn later (a frame
 *   or a beat may be on the stack: c.closing says it is gone).
 * - While a stream is open its connection counts it among those waiting
 *   (h2->waiting): no keep-alive GOAWAY under a stream.
 * - A writer (actors/writer.c) writes the stand-in its request went away
 *   with (m0__h2_proxy, http/h2_away.c), unchunked: its head goes to the
 *   stream's answer at the begin (m0__h2_pieces_begin), its pieces are read
 *   as an SSE stand-in's are, each read giving the writer its room
 *   (writer_progress, as the end of a socket's write does); its end
 *   (m0__http_resume) ends the stream once all is sent, a cut one with a
 *   reset. The stream's close tells a writer still writing it is gone and
 *   frees the stand-in (m0__h2_sse_end), the writer's later END finding no
 *   connection, as over HTTP/1.1.
 * Everything here runs on the connection's loop.
 */
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "http/conn.h"
#include "http/h2.h"
#include "http/h2_state.h"
#include "http/stream.h"

typedef struct h2s_sub {
  m0__conn c; /* first: what http/stream.c holds */
  uv_idle_t idle;
  m0__h2_stream *st; /* NULL once its stream closed */
} h2s_sub;

/* An application actor's reply in pieces on a stream: its writer
 * (actors/writer.c) writes the stream's stand-in (m0__h2_proxy, whose
 * queues are then what h2s_read takes). */
struct m0__h2_pieces {
  uv_idle_t idle;
  m0__conn *pc;      /* the stand-in: freed here once the stream closed */
  m0__h2_stream *st; /* NULL once its stream closed */
  bool submitted;    /* its HEADERS and data provider */
};

static void h2s_free(uv_handle_t *hd) {
  h2s_sub *px = hd->data;
  m0__outq_free(&px->c.q[0]);
  m0__outq_free(&px->c.q[1]);
  free(px);
}

static void h2s_free_pieces(uv_handle_t *hd) { free(hd->data); }

/* The turn after the stand-in was given bytes: its stream's DATA goes on
 * (resumed at the flush), once for all the connection's streams given
 * bytes in this turn (the first one's sweep sends the others' too). */
static void h2s_on_idle(uv_idle_t *idle) {
  h2s_sub *px = idle->data;
  uv_idle_stop(idle);
  if (!px->st || px->st->c->closing) return;
  m0__conn *c = px->st->c;
  if (nghttp2_session_want_write(c->h2->s)) m0__h2_sweep(c);
}

/* The turn after a writer gave its stand-in bytes (or ended): the head
 * submitted the first time, then the DATA goes on. */
static void h2s_pieces_on_idle(uv_idle_t *idle) {
  struct m0__h2_pieces *p = idle->data;
  uv_idle_stop(idle);
  if (!p->st || p->st->c->closing) return;
  m0__conn *c = p->st->c;
  if (!p->submitted) {
    p->submitted = true;
    if (m0__h2_submit(c, p->st) != 0)
      nghttp2_submit_rst_stream(c->h2->s, NGHTTP2_FLAG_NONE, p->st->id, NGHTTP2_INTERNAL_ERROR);
  }
  nghttp2_session_resume_data(c->h2->s, p->st->id);
  m0__h2_sweep(c);
}

static void h2s_pieces_soon(struct m0__h2_pieces *p) {
  if (p->st && !uv_is_active((uv_handle_t *)&p->idle)) uv_idle_start(&p->idle, h2s_pieces_on_idle);
}

void m0__h2_sse_flush(m0__conn *pc) {
  if (pc->h2_proxy) { /* a writer's stand-in */
    m0__h2_stream *st = ((m0__h2_proxy *)pc)->st;
    if (st && st->pieces) h2s_pieces_soon(st->pieces);
    return;
  }
  h2s_sub *px = (h2s_sub *)pc;
  if (!px->st) return;
  /* At every flush: its DATA may have been read out (deferred) since the last. */
  nghttp2_session_resume_data(px->st->c->h2->s, px->st->id); /* not deferred (or not yet submitted): no harm */
  if (!uv_is_active((uv_handle_t *)&px->idle)) uv_idle_start(&px->idle, h2s_on_idle);
}

/* Up to len bytes of what the stand-in was given, taken from its queues;
 * a queue taken whole is cleared at once (m0__conn_queued then counts only
 * what is left: the cap's and a writer's room). */
static size_t h2s_take(m0__conn *pc, uint8_t *buf, size_t len) {
  size_t got = 0;
  while (got < len) {
    m0__outq *q = &pc->q[pc->qi];
    uv_buf_t iov[2 * M0__OUT_REFS + 1];
    if (!m0__outq_bytes(q) || m0__outq_iov(q, pc->qskip, iov) <= 0) { /* no file piece is ever here */
      if (!m0__outq_bytes(&pc->q[1 - pc->qi])) break;
      pc->qi = 1 - pc->qi; /* the other queue is next */
      continue;
    }
    size_t k = iov[0].len < len - got ? iov[0].len : len - got;
    memcpy(buf + got, iov[0].base, k);
    got += k;
    pc->qskip += k;
    if (pc->qskip == m0__outq_bytes(q)) { /* sent */
      m0__outq_clear(q);
      pc->qskip = 0;
    }
  }
  return got;
}

/* The stream's DATA: what waits in its stand-in; deferred when nothing
 * does (or the connection holds too much unwritten), the end once the
 * stand-in was told to close and all is sent. */
static ssize_t h2s_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                        nghttp2_data_source *src, void *ud) {
  (void)s;
  (void)id;
  m0__conn *c = ud;
  m0__h2_stream *st = src->ptr;
  m0__conn *pc = st->sse;
  if (m0__h2_full(c)) { /* the connection's mark (http/h2.c) */
    st->deferred = true; /* resumed with the others (h2_resume) */
    c->h2->deferred++;
    return NGHTTP2_ERR_DEFERRED;
  }
  size_t got = h2s_take(pc, buf, len);
  if (!m0__conn_queued(pc) && pc->subs) { /* read out: a subscriber that lost frames is told which */
    m0__stream_caught_up(pc);
    got += h2s_take(pc, buf + got, len - got);
  }
  if (got && pc->writer) c->h->ops->writer_progress(c->h, pc); /* room for its writer (on_room: a turn later) */
  if (got) return (ssize_t)got;
  if (!pc->close_after) return NGHTTP2_ERR_DEFERRED;
  if (pc->close_on_complete) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* a writer's abort: cut, reset */
  *flags |= NGHTTP2_DATA_FLAG_EOF;
  return 0;
}

int m0__h2_stream_begin(void *ctx, const char *channel, bool has_last, uint64_t last) {
  m0__h2_stream *st = ctx;
  m0__http *h = st->c->h;
  h2s_sub *px = calloc(1, sizeof *px);
  if (!px) return M0__ENOMEM;
  px->c.h = h;
  px->c.h2_sse = true;
  px->c.io_ops = st->c->io_ops;
  px->c.plain = st->c->plain;
  px->c.writing = true; /* its queues are taken by h2s_read, never written */
  memcpy(px->c.peer, st->c->peer, sizeof px->c.peer);
  px->st = st;
  uv_idle_init(h->uv, &px->idle);
  px->idle.data = px;
  st->sse = &px->c;
  int rv = m0__stream_begin(&px->c, channel, has_last, last);
  if (rv != 0) {
    st->sse = NULL;
    px->st = NULL;
    uv_close((uv_handle_t *)&px->idle, h2s_free);
    return rv;
  }
  st->c->h2->waiting++;
  m0__conn_keepalive(st->c); /* the stand-in has no socket: a peer that vanished is found on the connection's */
  return 0;
}

int m0__h2_stream_write(void *ctx, const void *frame, size_t len) {
  m0__h2_stream *st = ctx;
  return st->sse ? m0__stream_write(st->sse, frame, len) : M0__ECLOSED;
}

void m0__h2_sse_open(m0__h2_stream *st, nghttp2_data_provider *dp) {
  m0__conn *pc = st->sse;
  dp->read_callback = h2s_read;
  if (st->pieces) return;
  m0__stream_replay(pc); /* Last-Event-ID's frames, behind the view's own */
  if (!pc->closing && !pc->close_after && pc->h->draining) m0__stream_goodbye(pc); /* begun as the drain did */
}

/* A writer's stream closed (its end sent, or the client's reset): the
 * writer is told it is gone if it still writes, and the stand-in goes
 * (h2_stream_free unlinked it). */
static void h2s_pieces_end(m0__h2_stream *st) {
  struct m0__h2_pieces *p = st->pieces;
  m0__conn *pc = p->pc;
  st->pieces = NULL;
  st->sse = NULL;
  p->st = NULL;
  if (pc->writer) pc->h->ops->writer_gone(pc->h, pc);
  m0__outq_free(&pc->q[0]);
  m0__outq_free(&pc->q[1]);
  free(pc); /* an m0__h2_proxy, its m0__conn first */
  uv_close((uv_handle_t *)&p->idle, h2s_free_pieces);
}

void m0__h2_sse_end(m0__h2 *h2, m0__h2_stream *st) {
  if (st->pieces) {
    h2s_pieces_end(st);
    return;
  }
  h2s_sub *px = (h2s_sub *)st->sse;
  st->sse = NULL;
  px->st = NULL;
  px->c.closing = true; /* a frame on the stack sees it gone */
  m0__stream_forget(&px->c);
  h2->waiting--;
  uv_close((uv_handle_t *)&px->idle, h2s_free);
}

int m0__h2_pieces_begin(m0__conn *pc) {
  m0__h2_stream *st = ((m0__h2_proxy *)pc)->st;
  struct m0__h2_pieces *p = st ? calloc(1, sizeof *p) : NULL;
  if (!p) return st ? M0__ENOMEM : M0__ECLOSED;
  m0__outq *head = m0__conn_target(pc); /* the head alone: no piece came yet */
  if (m0__outq_move_tail(&st->out, head, 0) != 0) {
    free(p);
    return M0__ENOMEM;
  }
  m0__outq_clear(head);
  st->head_len = m0__outq_bytes(&st->out);
  uv_idle_init(pc->h->uv, &p->idle);
  p->idle.data = p;
  p->pc = pc;
  p->st = st;
  st->pieces = p;
  st->sse = pc;
  st->c->h->stats.requests++;
  h2s_pieces_soon(p);
  return 0;
}

bool m0__h2_pieces_end(m0__conn *pc) {
  m0__h2_stream *st = ((m0__h2_proxy *)pc)->st;
  if (!st || !st->pieces) return false;
  pc->close_after = true; /* sent out, then END_STREAM (or, cut: close_on_complete, a reset) */
  h2s_pieces_soon(st->pieces);
  return true;
}
