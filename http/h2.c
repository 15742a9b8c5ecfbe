/* HTTP/2 (RFC 9113) on a connection of the per-loop server, with
 * libnghttp2: the frames, HPACK, flow control and the protocol's checks
 * are nghttp2's; what a stream asks is answered through the application's
 * routes, as an HTTP/1.1 request's is.
 *
 * Design notes
 * - A connection becomes HTTP/2 when its first bytes are the preface
 *   (m0__h2_preface, asked by http/conn.c with --http2 only): cleartext prior
 *   knowledge, or TLS whose ALPN chose h2 (the client sends the preface
 *   there too). c->h2 is then the session, and the connection's reads come
 *   here instead of the HTTP/1.1 parser; the transport, the output queues
 *   and the close are the connection's, unchanged.
 * - Memory: the session is the connection's (freed with it, conn_release).
 *   A stream's memory (m0__h2_stream: its header bytes, its body, its answer)
 *   is made at its HEADERS, listed in the session's streams and is
 *   nghttp2's stream user data; it goes in on_stream_close, or with the
 *   session (m0__h2_free: those still open). Nothing else holds it.
 * - An answer is made as for HTTP/1.1: m0_respond and its kin write an
 *   HTTP/1.1 response into the stream's own queue (http/outq.h); its head
 *   becomes the HEADERS (names in lower case, the connection's own fields
 *   dropped) and the rest the DATA, read from the queue by the data
 *   provider (memory, or a file piece by pread): one writer of responses,
 *   one set of body rules.
 * - A request that leaves the loop (the handler threads, an application
 *   actor, m0_defer) is given to the loop's seams with a stand-in for a
 *   connection (m0__h2_proxy, http/h2_away.c): m0__http_complete,
 *   m0__http_answer and m0__http_resume hand its answer back here, sent on
 *   its stream if that is still open. The stand-in is freed by that
 *   answer, which always comes (a timeout answers 504); a stream that
 *   closes first only unlinks it. A stream (SSE) and a reply in pieces (a
 *   writer) are http/h2_stream.c's; a WebSocket is answered 500 (the
 *   response table offers none).
 * - Time: a stream whose request is still coming has its header, then its
 *   body deadline (st->due), reset past it; the connection's deadline is
 *   the earliest of them, else the keep-alive timeout, none while an
 *   answer is away (m0__h2_deadline, http/h2_time.c). At the drain, or idle past it, the
 *   connection is told GOAWAY twice, a round trip apart (http/h2_drain.c),
 *   and goes on reading until its last stream is sent (the client's
 *   WINDOW_UPDATEs), then closes (m0__h2_pump).
 * - Output: what nghttp2 says is appended to the connection's target
 *   queue and written (the loop's one write per callback), up to
 *   H2_OUT_HIGH unwritten (over TLS H2_OUT_HIGH_TLS with the transport's
 *   ciphertext: memory): past it control frames wait in nghttp2's queue
 *   (where its flood guards count them) and DATA is deferred
 *   (NGHTTP2_ERR_DEFERRED); the end of a write (http/write.c), the next
 *   read or the sweep goes on (m0__h2_sweep).
 * - Limits: 100 concurrent streams, a header list no larger than an
 *   HTTP/1.1 head may be (a stream over it is reset: the HPACK bomb), a
 *   body no larger (413) and the bodies of all its streams at once no
 *   larger than H2_BODIES_MAX or one body (413), and nghttp2's flood
 *   guards: outbound control frames queued (PING, SETTINGS ACK floods),
 *   SETTINGS entries, CONTINUATION frames, and ours (http/h2_guard.c): a
 *   rate of RST_STREAM (Rapid Reset), stream ids that go down: past them
 *   the session ends with GOAWAY (ENHANCE_YOUR_CALM for a flood,
 *   PROTOCOL_ERROR) and the connection closes. Each refusal is counted (h2_refused).
 * Everything here runs on the connection's loop.
 */
#include "http/h2.h"

#include <ctype.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/errors.h"
#include "http/accesslog.h"
#include "http/conn_state.h"
#include "http/h2_state.h"
#include "http/plain.h"
#include "http/query.h"
#include "http/tls_io.h"
#include "http/route_stream.h"
#include "http/views.h"
#include "transport/page.h"

#define H2_MAX_STREAMS 100
#define H2_OUT_HIGH (1u << 20) /* unwritten bytes past which DATA waits */
#define H2_OUT_HIGH_TLS (256u << 10) /* with the ciphertext (1 MiB without: 3 MB a client that reads none) */
/* Request bodies one connection's streams may hold at once, beside each
 * one's --max-body-bytes: 100 streams must not hold 100 bodies. */
#define H2_BODIES_MAX (8u << 20)

typedef enum h2_sniffed { H2_NOT, H2_BEGUN, H2_WHOLE } h2_sniffed;

/* Whether a connection's first bytes, a[0, an) then b[0, bn), are the
 * preface, its beginning, or not it. */
static h2_sniffed h2_sniff(const char *a, size_t an, const char *b, size_t bn) {
  static const char pre[] = M0__H2_PREFACE;
  size_t k = an < M0__H2_PREFACE_LEN ? an : M0__H2_PREFACE_LEN;
  if (memcmp(a, pre, k) != 0) return H2_NOT;
  size_t m = bn < M0__H2_PREFACE_LEN - k ? bn : M0__H2_PREFACE_LEN - k;
  if (m && memcmp(b, pre + k, m) != 0) return H2_NOT;
  return k + m == M0__H2_PREFACE_LEN ? H2_WHOLE : H2_BEGUN;
}

/* ---- a stream's request ------------------------------------------------ */

static m0_str h2_str(const m0__h2_stream *st, m0__h2_span sp) { return (m0_str){st->hb.p + sp.off, sp.len}; }

static bool h2_keep(m0__h2_stream *st, m0__h2_span *sp, const uint8_t *p, size_t n) {
  sp->off = (uint32_t)st->hb.len;
  sp->len = (uint32_t)n;
  return m0__buf_append(&st->hb, p, n) == 0;
}

static int h2_on_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *ud) {
  m0__h2 *h2 = ((m0__conn *)ud)->h2;
  if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  m0__h2_stream *st = calloc(1, sizeof *st);
  if (!st) return NGHTTP2_ERR_CALLBACK_FAILURE;
  st->id = f->hd.stream_id;
  st->c = ud;
  st->due = uv_now(st->c->h->uv) + st->c->h->header_timeout_ms; /* as HTTP/1.1's head */
  st->next = h2->streams;
  if (h2->streams) h2->streams->prev = st;
  h2->streams = st;
  nghttp2_session_set_stream_user_data(s, st->id, st);
  return 0;
}

/* The fields a view will see: the header list's, and :authority as Host. */
static int h2_fields(const m0__h2_stream *st) { return st->nheaders + (st->authority.len != 0); }

/* One field of a request's header list. Past the limits (its bytes, or
 * more fields than a view's M0__MAX_HEADERS) the stream is reset, never a
 * field dropped (a temporal failure: nghttp2 sends RST_STREAM and goes on). */
static int h2_on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl,
                        const uint8_t *value, size_t vl, uint8_t flags, void *ud) {
  (void)flags;
  m0__conn *c = ud;
  m0__h2_stream *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
  if (!st || f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0; /* trailers: dropped */
  st->hbytes += nl + vl + 32;
  if (st->hbytes > c->h->lim.max_header_bytes || h2_fields(st) == M0__MAX_HEADERS) {
    st->refused = true;
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  bool ok = true;
  if (nl && name[0] == ':') {
    if (nl == 7 && !memcmp(name, ":method", 7)) ok = h2_keep(st, &st->method, value, vl);
    else if (nl == 5 && !memcmp(name, ":path", 5)) ok = h2_keep(st, &st->path, value, vl);
    else if (nl == 10 && !memcmp(name, ":authority", 10)) ok = h2_keep(st, &st->authority, value, vl);
  } else {
    if (nl == 11 && !memcmp(name, "traceparent", 11))
      m0__traceparent((const char *)value, vl, &st->trace_hi, &st->trace_lo, &st->trace_parent, &st->trace_flags);
    ok = h2_keep(st, &st->name[st->nheaders], name, nl) && h2_keep(st, &st->value[st->nheaders], value, vl);
    st->nheaders++;
  }
  return ok ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
}

static int h2_on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *p, size_t n, void *ud) {
  (void)flags;
  m0__conn *c = ud;
  m0__h2_stream *st = nghttp2_session_get_stream_user_data(s, id);
  if (!st || st->too_big) return 0;
  size_t conn_max = c->h->lim.max_body_bytes > H2_BODIES_MAX ? c->h->lim.max_body_bytes : H2_BODIES_MAX;
  if (st->body.len + n > c->h->lim.max_body_bytes || c->h2->bodies + n > conn_max) {
    st->too_big = true; /* answered 413 at its end; the rest is read and dropped */
    c->h2->bodies -= st->body.len;
    m0__buf_free(&st->body);
    return 0;
  }
  if (m0__buf_append(&st->body, p, n)) return NGHTTP2_ERR_CALLBACK_FAILURE;
  c->h2->bodies += n;
  return 0;
}

/* The request as a view sees it, its spans into the stream's bytes. */
static void h2_request(m0__conn *c, m0__h2_stream *st, m0_request *req) {
  m0__http *h = c->h;
  memset(req, 0, sizeof *req);
  req->method = h2_str(st, st->method);
  req->target = h2_str(st, st->path);
  const char *q = req->target.n ? memchr(req->target.p, '?', req->target.n) : NULL;
  req->path = (m0_str){req->target.p, q ? (size_t)(q - req->target.p) : req->target.n};
  req->query = q ? (m0_str){q + 1, req->target.n - req->path.n - 1} : (m0_str){q, 0};
  req->version_minor = 1;
  size_t n = 0;
  if (st->authority.len) h->hdrs[n++] = (m0_header){{"host", 4}, h2_str(st, st->authority)};
  for (int i = 0; i < st->nheaders && n < M0__MAX_HEADERS; i++)
    h->hdrs[n++] = (m0_header){h2_str(st, st->name[i]), h2_str(st, st->value[i])};
  req->headers = h->hdrs;
  req->nheaders = n;
  req->body = (m0_str){st->body.p, st->body.len};
  req->trace_hi = st->trace_hi;
  req->trace_lo = st->trace_lo;
  req->peer = c->peer;
  req->peer_port = c->peer_port;
  req->client = c->peer;
}

/* The application's answer: at once, or away (true). */
static bool h2_app(m0__h2_stream *st, m0_request *req, m0_response *res) {
  m0__http *h = st->c->h;
  const m0_app *app = h->app;
  if (!app->routes) {
    if (h->pool) return m0__h2_to_pool(st, req, -1, res);
    app->handle(h->state, req, res);
    return false;
  }
  m0__match m;
  m0__views_match(app->routes, app->nroutes, req->method, req->path, &m);
  if (m.kind != M0__VIEW_FOUND) {
    m0__respond_status(res, m.kind == M0__VIEW_NOT_FOUND ? 404 : m.kind == M0__VIEW_OPTIONS ? 204 : 405,
                       m.kind == M0__VIEW_NOT_FOUND ? NULL : m.allow);
    return false;
  }
  req->params = m.params;
  req->nparams = m.nparams;
  const m0_route *r = m.route;
  if (r->actor) return m0__h2_to_actor(st, req, r, res);
  if (r->stream) m0__route_stream_answer(r, req, res); /* SSE: http/h2_stream.c */
  else if (h->pool && !(r->flags & M0_ON_LOOP)) return m0__h2_to_pool(st, req, (int)(r - app->routes), res);
  else if (r->flags & M0_NEEDS_POOL) m0__respond_status(res, 503, NULL);
  else r->view(h->state, req, res);
  return false;
}

/* Answers the stream's request, or sends it away (true). */
static bool h2_answer(m0__h2_stream *st, m0_request *req, m0_response *res) {
  m0__http *h = st->c->h;
  bool away = false;
  if (st->too_big) m0__respond_status(res, 413, NULL);
  else if (!req->method.n || !req->path.n || req->path.p[0] != '/' || m0__path_dot_segment(req->path))
    m0__respond_status(res, 400, NULL);
  else if (!m0__http_host_answer(st->c, req, res) &&
           !(h->app->before_request && h->app->before_request(h->state, req, res)))
    away = h2_app(st, req, res);
  if (away || res->deferred) return true;
  if (!res->done) m0__respond_status(res, 500, NULL); /* a writer, a WebSocket: not over HTTP/2 */
  return false;
}

/* ---- a stream's answer ------------------------------------------------- */

/* Whether the connection holds more unwritten than its mark: its queues, the loop's
 * scratch, over TLS the transport's ciphertext too (a copy, until the socket takes it). */
bool m0__h2_full(m0__conn *c) {
  size_t n = m0__conn_queued(c) + m0__outq_bytes(&c->h->scratch);
  return c->io_ops->plain ? n > H2_OUT_HIGH : n + c->io_ops->queued(c) > H2_OUT_HIGH_TLS;
}

/* DATA from the answer's queue past its head: memory, or a file piece. */
static ssize_t h2_read_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                            nghttp2_data_source *src, void *ud) {
  (void)s;
  (void)id;
  m0__conn *c = ud;
  m0__h2_stream *st = src->ptr;
  if (m0__h2_full(c)) {
    st->deferred = true;
    c->h2->deferred++;
    return NGHTTP2_ERR_DEFERRED;
  }
  size_t want = st->body_len - st->sent < len ? st->body_len - st->sent : len, got = 0;
  while (got < want) {
    size_t at = st->head_len + st->sent + got;
    uv_buf_t iov[2 * M0__OUT_REFS + 1];
    int fd;
    uint64_t off;
    size_t left, k;
    if (m0__outq_iov(&st->out, at, iov) > 0) {
      k = iov[0].len < want - got ? iov[0].len : want - got;
      memcpy(buf + got, iov[0].base, k);
    } else if (m0__outq_file_at(&st->out, at, &fd, &off, &left)) {
      ssize_t r = pread(fd, buf + got, left < want - got ? left : want - got, (off_t)off);
      if (r <= 0) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* shorter than it said: reset */
      k = (size_t)r;
    } else {
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    got += k;
  }
  st->sent += got;
  c->h2->moved_at = uv_now(c->h->uv); /* the send timeout counts from here (http/h2_time.c) */
  if (st->sent == st->body_len) *flags |= NGHTTP2_DATA_FLAG_EOF;
  return (ssize_t)got;
}

/* Whether a response field is the connection's (RFC 9113 8.2.2). */
static bool h2_hop(const char *n, size_t nl) {
  switch (nl) { /* by length first: most fields are none of these */
  case 7: return !strncasecmp(n, "upgrade", 7);
  case 10: return !strncasecmp(n, "connection", 10) || !strncasecmp(n, "keep-alive", 10);
  case 16: return !strncasecmp(n, "proxy-connection", 16);
  case 17: return !strncasecmp(n, "transfer-encoding", 17);
  default: return false;
  }
}

/* The HTTP/1.1 head in st->out as HEADERS, and the rest as DATA. */
int m0__h2_submit(m0__conn *c, m0__h2_stream *st) {
  m0__buf *b = &st->out.copied;
  const char *end = st->head_len >= 16 && st->head_len <= b->len ? b->p + st->head_len - 4 : NULL; /* h2_dispatch's */
  if (!end || memcmp(end, "\r\n\r\n", 4) != 0) end = b->len > 12 ? memmem(b->p, b->len, "\r\n\r\n", 4) : NULL;
  if (!end) return NGHTTP2_ERR_INVALID_ARGUMENT;
  st->head_len = (size_t)(end - b->p) + 4;
  st->body_len = m0__outq_bytes(&st->out) - st->head_len;
  c->h2->moved_at = uv_now(c->h->uv);
  nghttp2_nv nv[M0__MAX_HEADERS + 1];
  size_t n = 0;
  nv[n++] = (nghttp2_nv){(uint8_t *)":status", (uint8_t *)b->p + 9, 7, 3, NGHTTP2_NV_FLAG_NONE};
  char *line = memchr(b->p, '\n', st->head_len) + 1;
  while (line < end + 2 && n <= M0__MAX_HEADERS) {
    char *eol = memchr(line, '\r', (size_t)(end + 2 - line)), *colon = memchr(line, ':', (size_t)(eol - line));
    if (colon && !h2_hop(line, (size_t)(colon - line))) {
      for (char *p = line; p < colon; p++) *p = (char)tolower((unsigned char)*p); /* HTTP/2's field names */
      char *v = colon + 1;
      while (v < eol && (*v == ' ' || *v == '\t')) v++;
      nv[n++] = (nghttp2_nv){(uint8_t *)line, (uint8_t *)v, (size_t)(colon - line), (size_t)(eol - v),
                             NGHTTP2_NV_FLAG_NONE};
    }
    line = eol + 2;
  }
  nghttp2_data_provider dp = {.source.ptr = st, .read_callback = h2_read_body};
  if (st->sse) m0__h2_sse_open(st, &dp); /* SSE: its events (http/h2_stream.c) */
  return nghttp2_submit_response(c->h2->s, st->id, nv, n, st->body_len || st->sse ? &dp : NULL);
}

/* The stream's request is whole: answered, counted and logged. */
static void h2_dispatch(m0__conn *c, m0__h2_stream *st) {
  m0__http *h = c->h;
  m0_request req;
  h2_request(c, st, &req);
  m0_response res;
  bool head = req.method.n == 4 && !memcmp(req.method.p, "HEAD", 4);
  m0__response_init(&res, &st->out, &h->date, 1, head, false);
  res.req = &req;
  res.ops = &m0__h2_res_ops;
  res.ops_ctx = st;
  if (st->trace_hi || st->trace_lo) { /* answered with the client's traceparent, as over HTTP/1.1 (http/dispatch.c) */
    char tp[56];
    snprintf(tp, sizeof tp, "00-%016llx%016llx-%016llx-%02x", (unsigned long long)st->trace_hi,
             (unsigned long long)st->trace_lo, (unsigned long long)st->trace_parent, st->trace_flags);
    m0_response_header(&res, "traceparent", tp);
  }
  m0__current_trace = (m0__trace_id){st->trace_hi, st->trace_lo};
  bool away = h2_answer(st, &req, &res);
  m0__current_trace = (m0__trace_id){0, 0};
  if (away) { /* it waits: no idle timeout while it does (m0__h2_deadline) */
    c->h2->waiting++;
    return;
  }
  h->stats.requests++;
  size_t bytes = res.head ? 0 : res.body_len;
  if (h->access_log)
    m0__access_log_line(h->worker, req.method, req.path, res.status, bytes, st->trace_hi, st->trace_lo, NULL);
  if (h->ops->served) h->ops->served(h, &req, st->trace_flags, res.status, bytes);
  st->head_len = m0__outq_bytes(&st->out) - bytes; /* where the body begins: m0__h2_submit checks it */
  if (m0__h2_submit(c, st) != 0) nghttp2_submit_rst_stream(c->h2->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
}

/* A request's head whole: its body has the body timeout from now, as over
 * HTTP/1.1; its end: no deadline, it is answered. */
static int h2_on_frame(nghttp2_session *s, const nghttp2_frame *f, void *ud) {
  if (f->hd.type == NGHTTP2_PING) return m0__h2_drain_acked(ud, f);
  if (f->hd.type == NGHTTP2_RST_STREAM) return m0__h2_guard_reset(ud); /* Rapid Reset */
  if (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) return 0;
  m0__h2_stream *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
  if (!st) return 0;
  if (!(f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
    if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST)
      st->due = uv_now(st->c->h->uv) + st->c->h->body_timeout_ms;
    return 0;
  }
  st->due = 0;
  if (!st->refused) h2_dispatch(ud, st);
  return 0;
}

static void h2_stream_free(m0__h2 *h2, m0__h2_stream *st) {
  if (st->deferred) h2->deferred--;
  if (st->proxy) { /* its answer will find no stream */
    st->proxy->st = NULL;
    h2->waiting--;
  }
  if (st->sse) m0__h2_sse_end(h2, st); /* out of its channels */
  h2->bodies -= st->body.len;
  if (st->prev) st->prev->next = st->next;
  else h2->streams = st->next;
  if (st->next) st->next->prev = st->prev;
  m0__buf_free(&st->hb);
  m0__buf_free(&st->body);
  m0__outq_free(&st->out);
  free(st);
}

/* A refusal, counted with the loop's (the drain's line) and on the page
 * (m0_http2_refused_total). */
static void h2_refused(m0__conn *c) {
  c->h->stats.errors_4xx++;
  if (c->h->figures) atomic_fetch_add_explicit(&c->h->figures->h2_refused, 1, memory_order_relaxed);
}

/* Whether a reset is the client's fault: nghttp2's (a protocol error, a
 * stream past the 100, a flow-control error) or a header list over the
 * limits; not ours (INTERNAL_ERROR: an answer that could not be made or
 * read, such as a file shorter than it said; CANCEL: a timeout). */
static bool h2_reset_refused(nghttp2_session *s, const nghttp2_frame *f) {
  uint32_t code = f->rst_stream.error_code;
  if (code != NGHTTP2_INTERNAL_ERROR && code != NGHTTP2_CANCEL) return true;
  m0__h2_stream *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
  return st && st->refused; /* h2_on_header's: nghttp2 resets it INTERNAL_ERROR */
}

/* Refusals: a stream reset for the client's fault, a session ended with an
 * error (Rapid Reset, a SETTINGS flood, a bad frame), once. */
static int h2_on_sent(nghttp2_session *s, const nghttp2_frame *f, void *ud) {
  m0__conn *c = ud;
  if (f->hd.type == NGHTTP2_RST_STREAM) m0__h2_guard_sent_reset(c, f->hd.stream_id);
  bool goaway = f->hd.type == NGHTTP2_GOAWAY && f->goaway.error_code != NGHTTP2_NO_ERROR && !c->h2->refused;
  if (goaway) c->h2->refused = true;
  if (goaway || (f->hd.type == NGHTTP2_RST_STREAM && h2_reset_refused(s, f))) h2_refused(c);
  return 0;
}

static int h2_on_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud) {
  (void)code;
  m0__h2_stream *st = nghttp2_session_get_stream_user_data(s, id);
  if (!st) return 0;
  nghttp2_session_set_stream_user_data(s, id, NULL);
  h2_stream_free(((m0__conn *)ud)->h2, st);
  return 0;
}

/* ---- the session ------------------------------------------------------- */

/* What the session has to say, into the connection's target queue, up to
 * H2_OUT_HIGH unwritten: past it the rest stays in nghttp2's queue, where
 * its flood guards count it (a client that sends PINGs and reads none of
 * the ACKs), until the next read or the sweep. The connection closes after
 * its last bytes once the session is over. */
void m0__h2_pump(m0__conn *c) {
  nghttp2_session *s = c->h2->s;
  while (!m0__h2_full(c)) {
    const uint8_t *d;
    ssize_t n = nghttp2_session_mem_send(s, &d);
    if (n <= 0) {
      if (n < 0) c->close_after = true;
      break;
    }
    if (m0__outq_append(m0__conn_target(c), d, (size_t)n) != 0) {
      m0__conn_close(c);
      return;
    }
  }
  if (!nghttp2_session_want_read(s) && !nghttp2_session_want_write(s)) c->close_after = true;
}

static nghttp2_session *h2_session(m0__conn *c) {
  nghttp2_session_callbacks *cb;
  nghttp2_option *opt;
  nghttp2_session *s = NULL;
  if (nghttp2_session_callbacks_new(&cb)) return NULL;
  if (nghttp2_option_new(&opt)) {
    nghttp2_session_callbacks_del(cb);
    return NULL;
  }
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, h2_on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cb, h2_on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, h2_on_data);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, h2_on_frame);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, h2_on_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, h2_on_sent);
  nghttp2_session_callbacks_set_on_begin_frame_callback(cb, m0__h2_guard_begin); /* stream ids */
  nghttp2_option_set_max_outbound_ack(opt, 1000); /* PING / SETTINGS floods */
  nghttp2_option_set_max_settings(opt, 32);
  nghttp2_option_set_max_continuations(opt, 8);
  nghttp2_session_server_new2(&s, cb, c, opt);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cb);
  return s;
}

/* Makes c an HTTP/2 connection (c->h2): the server's SETTINGS queued.
 * 0, or M0__ENOMEM. */
static int h2_start(m0__conn *c) {
  m0__h2 *h2 = calloc(1, sizeof *h2);
  if (!h2) return M0__ENOMEM;
  if (!(h2->s = h2_session(c))) {
    free(h2);
    return M0__ENOMEM;
  }
  c->h2 = h2;
  m0__h2_guard_init(c);
  nghttp2_settings_entry set[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, H2_MAX_STREAMS},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)c->h->lim.max_header_bytes},
  };
  if (nghttp2_submit_settings(h2->s, NGHTTP2_FLAG_NONE, set, sizeof set / sizeof set[0]) != 0) return M0__ENOMEM;
  return 0;
}

/* Streams whose DATA waited go on once the connection's queue is below
 * the mark. Whether one did. */
static bool h2_resume(m0__conn *c) {
  m0__h2 *h2 = c->h2;
  if (!h2->deferred || m0__h2_full(c)) return false;
  for (m0__h2_stream *st = h2->streams; st && h2->deferred; st = st->next) {
    if (!st->deferred) continue;
    st->deferred = false;
    h2->deferred--;
    nghttp2_session_resume_data(h2->s, st->id);
  }
  return true;
}

void m0__h2_read(m0__conn *c, const char *buf, size_t n) {
  if (!nghttp2_session_want_read(c->h2->s)) return; /* the session is over: its last bytes go, then the close */
  ssize_t r = nghttp2_session_mem_recv(c->h2->s, (const uint8_t *)buf, n);
  if (r < 0) { /* a flood, or bytes that are no frame: GOAWAY, if the socket takes it, and the close */
    if (!c->h2->refused) h2_refused(c);
    c->h2->refused = true;
    bool flood = r == NGHTTP2_ERR_FLOODED || r == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS;
    uint32_t code = flood ? NGHTTP2_ENHANCE_YOUR_CALM : NGHTTP2_PROTOCOL_ERROR;
    nghttp2_session_terminate_session(c->h2->s, code);
  }
  m0__h2_sweep(c);
  c->phase = PHASE_IDLE;
  m0__h2_deadline(c);
}

/* The bytes kept so far, then n more: false when out of memory. */
static bool h2_keep_in(m0__conn *c, const char *buf, size_t n) {
  if (c->in && buf == c->in + c->in_len) { /* read where m0__conn_alloc said: after what is kept */
    c->in_len += n;
    return true;
  }
  if (c->in_cap - c->in_len < n) {
    char *nb = realloc(c->in, c->in_len + n);
    if (!nb) return false;
    c->in = nb;
    c->in_cap = c->in_len + n;
  }
  memcpy(c->in + c->in_len, buf, n);
  c->in_len += n;
  return true;
}

bool m0__h2_preface(m0__conn *c, char *buf, size_t n) {
  h2_sniffed s = h2_sniff(c->in ? c->in : "", c->in_len, buf, n);
  if (s == H2_NOT) return false;
  if (!h2_keep_in(c, buf, n) || (s == H2_WHOLE && h2_start(c) != 0)) {
    m0__conn_close(c);
    return true;
  }
  c->parse_off = 0;
  if (s == H2_BEGUN) return true;
  char *in = c->in;
  size_t len = c->in_len;
  c->in = NULL; /* an HTTP/2 connection keeps no input: nghttp2 keeps what a frame needs */
  c->in_len = c->in_cap = 0;
  m0__h2_read(c, in, len);
  free(in);
  m0__conn_flush(c);
  return true;
}

bool m0__h2_begin(m0__conn *c, char *buf, size_t n) {
  if (c->io_ops != &m0__io_tls_ops) return m0__h2_preface(c, buf, n); /* cleartext: prior knowledge */
  if (strcmp(m0__io_tls_alpn(c), "h2") != 0) return false;
  if (h2_start(c) != 0) {
    m0__conn_close(c);
    return true;
  }
  m0__h2_read(c, buf, n); /* the preface, or nghttp2's bad client magic */
  m0__conn_flush(c);
  return true;
}

/* A socket that takes all at once leaves no write to complete, which is
 * what goes on with the rest: a few more rounds here (each up to
 * H2_OUT_HIGH), then the client's next frame or the sweep. */
#define H2_SEND_ROUNDS 8

bool m0__h2_sweep(m0__conn *c) {
  bool went = false;
  for (int i = 0; i < H2_SEND_ROUNDS && !c->closing; i++) {
    h2_resume(c);
    m0__h2_pump(c);
    if (c->writing || !m0__outq_bytes(&c->h->scratch)) break; /* behind a write: its end goes on (http/write.c) */
    went = true;
    m0__conn_flush(c);
  }
  return went || c->closing;
}

void m0__h2_free(m0__h2 *h2) {
  nghttp2_session_del(h2->s);
  while (h2->streams) h2_stream_free(h2, h2->streams); /* those nghttp2 did not close */
  free(h2);
}
