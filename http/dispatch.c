/* A parsed request to its answer: the request as the view sees it, the
 * route, and every way out of http/ (the loop's ops table, m0__http_ops),
 * and the answers that come back later (m0__http_complete, m0__http_answer,
 * m0__http_resume). The connection's state machine is in http/conn.c.
 *
 * Design notes
 * - A request leaves http/ only through h->ops, the one const table the loop
 *   gave at its init (actors/loop_http.c): defer (a pool), to_actor (an
 *   application actor), defer_view and writer_begin (through the response's
 *   own table, dispatch_res_ops), metrics, graph, served.
 * - A view's answer reaches the loop's seams through that response table:
 *   one pointer per request, chosen at the server's init.
 * - A request that left waits (conn_wait): its connection parses nothing
 *   more until its answer comes back, so pipelined answers keep their order.
 * Everything here runs on the connection's loop.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "http/accesslog.h"
#include "base/errors.h"
#include "http/conn.h"
#include "http/conn_state.h"
#include "http/h2.h"
#include "http/plain.h"
#include "http/query.h"
#include "http/route_stream.h"
#include "http/stream.h"
#include "http/views.h"
#include "http/websocket.h"

/* ---- the response's seams (m0_response's table) ------------------------ */

static m0_deferred *dispatch_defer_begin(void *ctx, m0_response *res, unsigned timeout_ms) {
  m0__conn *c = ctx;
  return c->h->ops->defer_view(c->h, c, res, timeout_ms);
}

static m0_writer *dispatch_writer_begin(void *ctx, m0_response *res, int status, const char *content_type,
                                        void (*on_gone)(void *arg), void *arg) {
  m0__conn *c = ctx;
  m0_writer *w = c->h->ops->writer_begin(c->h, c, res, status, content_type, on_gone, arg);
  if (w && c->h->latency && c->h->latency[c->route])
    m0__latency_status(c->h->latency[c->route], status); /* its head is written */
  return w;
}

static char *dispatch_graph(void *ctx, const char *records_of) {
  m0__conn *c = ctx;
  return c->h->ops->graph(c->h, records_of);
}

/* A loop's (every seam there), and a server's given none (a harness's). */
static const m0__response_ops dispatch_res_ops = {m0__stream_begin, m0__stream_write, m0__ws_begin,
                                                  dispatch_defer_begin, dispatch_writer_begin, dispatch_graph};
static const m0__response_ops dispatch_res_streams = {m0__stream_begin, m0__stream_write, m0__ws_begin,
                                                      NULL, NULL, NULL};

const m0__response_ops *m0__conn_res_ops(const m0__http_ops *ops) {
  return ops->defer_view && ops->writer_begin && ops->graph ? &dispatch_res_ops : &dispatch_res_streams;
}

/* ---- the request ------------------------------------------------------- */

/* The request the parser just completed, its spans into buf; client is
 * where the client's address is written when it came through a proxy. */
static void dispatch_request(m0__conn *c, const char *buf, m0_request *req, char *client) {
  m0__http *h = c->h;
  const m0__parser *p = &c->p;
  memset(req, 0, sizeof *req);
  req->method = (m0_str){buf + p->method.off, p->method.len};
  req->target = (m0_str){buf + p->url.off, p->url.len};
  const char *q = memchr(req->target.p, '?', req->target.n);
  req->path = (m0_str){req->target.p, q ? (size_t)(q - req->target.p) : req->target.n};
  req->query = q ? (m0_str){q + 1, req->target.n - req->path.n - 1} : (m0_str){q, 0};
  req->version_minor = p->version_minor;
  for (int i = 0; i < p->nheaders; i++) {
    h->hdrs[i].name = (m0_str){buf + p->hs->name[i].off, p->hs->name[i].len};
    h->hdrs[i].value = (m0_str){buf + p->hs->value[i].off, p->hs->value[i].len};
  }
  req->headers = h->hdrs;
  req->nheaders = (size_t)p->nheaders;
  req->body = (m0_str){p->body.p, p->body.len};
  req->trace_hi = p->trace_hi;
  req->trace_lo = p->trace_lo;
  req->peer = c->peer;
  req->peer_port = c->peer_port;
  req->client = c->peer;
  if (h->proxies.n) { /* only behind proxies the operator named: the headers are anyone's words otherwise */
    m0__client_addr(&h->proxies, c->peer, req, client);
    req->client = client;
  }
}

/* Whether the request just counted is the connection's last. Draining for
 * the next generation, requests pipelined behind this one (their bytes are
 * here) are answered too, the last saying close. */
static bool dispatch_last(const m0__conn *c) {
  const m0__http *h = c->h;
  return !c->p.keep_alive || (h->draining && !(h->handover && c->more_in)) || c->close_after ||
         (h->max_keepalive_requests > 0 && c->nreq >= (uint64_t)h->max_keepalive_requests);
}

/* The answer begun on the loop, with the seams a view may use. A request
 * that brought a traceparent is answered with it (every path: the pool and
 * an application actor take res->extra with the request), so the client can
 * find its request by id in m0trace and the access log. m0 makes no span of
 * its own: the parent id and flags are the client's. */
static void dispatch_response(m0__conn *c, m0_request *req, m0_response *res, bool last) {
  m0__http *h = c->h;
  const m0__parser *p = &c->p;
  m0__response_init(res, m0__conn_target(c), &h->date, p->version_minor, p->is_head, last);
  res->ops = h->res_ops;
  res->ops_ctx = c;
  res->req = req;
  if (p->trace_hi || p->trace_lo) {
    char tp[56];
    snprintf(tp, sizeof tp, "00-%016llx%016llx-%016llx-%02x", (unsigned long long)p->trace_hi,
             (unsigned long long)p->trace_lo, (unsigned long long)p->trace_parent, p->trace_flags);
    m0_response_header(res, "traceparent", tp);
  }
}

/* A route matched: to its actor, to the pool, or its view on the loop.
 * true when the request left the loop (the connection waits). */
static bool dispatch_found(m0__conn *c, const m0__match *m, m0_request *req, m0_response *res) {
  m0__http *h = c->h;
  const m0_app *app = h->app;
  req->params = m->params;
  req->nparams = m->nparams;
  c->route = (int)(m->route - app->routes);
  if (m->route->stream) {
    m0__route_stream_answer(m->route, req, res); /* on the loop: a stream or a socket lives on it */
  } else if (m->route->actor) {
    if (h->ops->to_actor && h->ops->to_actor(h, c, req, m->route, res) == 0) return true;
    if (!res->done) m0__respond_status(res, 503, NULL);
  } else if (h->pool && !(m->route->flags & M0_ON_LOOP) &&
             h->ops->defer(h, c, req, (int)(m->route - app->routes), res) == 0) {
    return true;
  } else if (m->route->flags & M0_NEEDS_POOL) {
    /* It blocks: the pool could not take it (no memory for its batch),
     * and on the loop it would hold every connection of the loop. */
    m0_response_header(res, "Retry-After", "1");
    m0__respond_status(res, 503, NULL);
  } else {
    m->route->view(h->state, req, res);
  }
  return false;
}

/* The application's answer: its routes, or its one handler. true when the
 * request left the loop. */
static bool dispatch_app(m0__conn *c, m0_request *req, m0_response *res) {
  m0__http *h = c->h;
  const m0_app *app = h->app;
  if (app->routes && c->p.asterisk) {
    /* OPTIONS * asks about the server, not a resource (RFC 9110 9.3.7): no route is "*" */
    m0__respond_status(res, 204, NULL);
  } else if (app->routes) {
    m0__match m;
    m0__views_match(app->routes, app->nroutes, req->method, req->path, &m);
    if (m.kind == M0__VIEW_FOUND) return dispatch_found(c, &m, req, res);
    if (m.kind == M0__VIEW_NOT_FOUND) m0__respond_status(res, 404, NULL);
    else m0__respond_status(res, m.kind == M0__VIEW_OPTIONS ? 204 : 405, m.allow);
  } else if (h->pool && h->ops->defer(h, c, req, -1, res) == 0) {
    return true;
  } else {
    app->handle(h->state, req, res);
  }
  return false;
}

/* Answers the request, or sends it away. true when it left the loop. */
static bool dispatch_answer(m0__conn *c, m0_request *req, m0_response *res) {
  m0__http *h = c->h;
  /* A dot-segment ("." or "..", %2E spelled too) is refused before anything
   * routes the path: the router matches req->path raw, and a view that
   * joined it to a directory would climb out (docs/http.md, The path). */
  if (m0__path_dot_segment(req->path)) {
    res->close = true; /* a refusal, as the parser's are */
    m0__respond_status(res, 400, NULL);
  } else if (!m0__http_host_answer(c, req, res) &&
             !(h->app->before_request && h->app->before_request(h->state, req, res))) {
    return dispatch_app(c, req, res);
  }
  return false;
}

/* The request went away (the pool, an actor, a deferred view, a writer):
 * read and parse nothing more until its answer comes back, so answers
 * leave in order. */
static void conn_wait(m0__conn *c, bool last) {
  c->waiting = true;
  c->close_on_complete = last;
  c->phase = PHASE_WAIT;
  c->io_ops->read_stop(c);
}

/* A request answered here: counted, logged, and what follows it. */
static void dispatch_served(m0__conn *c, const m0_request *req, m0_response *res, bool last) {
  m0__http *h = c->h;
  const m0__parser *p = &c->p;
  h->stats.requests++;
  m0__conn_latency(c, res->status);
  size_t bytes = res->head ? 0 : res->body_len;
  if (h->access_log)
    m0__access_log_line(h->worker, req->method, req->path, res->status, bytes, p->trace_hi, p->trace_lo, NULL);
  if (h->ops->served) h->ops->served(h, req, p->trace_flags, res->status, bytes);
  if (c->stream) {
    m0__stream_replay(c); /* Last-Event-ID's frames, behind the view's own (http/stream.c) */
    if (c->closing) return;
  }
  if (c->ws) { /* a WebSocket outlives the request count; at the drain it goes with 1001 */
    if (h->draining) m0__ws_goodbye(c->ws, 1001, "the server is going away");
  } else if (c->stream && h->draining) {
    m0__stream_goodbye(c); /* begun as the drain did: told like the streams open then */
  } else if (last || res->close) {
    c->close_after = true; /* res->close: a refusal (a dot-segment) */
  }
}

void m0__conn_dispatch(m0__conn *c, const char *buf) {
  m0__http *h = c->h;
  c->t0_ns = m0__latency_now_ns();
  c->route = (int)h->app->nroutes;
  m0_request req;
  char client[M0__ADDR_TEXT];
  dispatch_request(c, buf, &req, client);
  c->nreq++;
  bool last = dispatch_last(c);
  m0_response res;
  dispatch_response(c, &req, &res, last);
  m0__current_trace = (m0__trace_id){c->p.trace_hi, c->p.trace_lo};
  bool away = dispatch_answer(c, &req, &res);
  m0__current_trace = (m0__trace_id){0, 0};
  if (away) {
    conn_wait(c, last);
    return;
  }
  if (res.deferred) { /* m0_defer or a writer: answered later (m0__http_answer, m0__http_resume) */
    conn_wait(c, last || res.close); /* res.close: a writer to HTTP/1.0 ends with the close */
    return;
  }
  if (!res.done) {
    fprintf(stderr, "m0: loop %d: the view for %.*s %.*s returned without answering; sent 500\n",
            h->worker, (int)req.method.n, req.method.p, (int)req.path.n, req.path.p);
    m0__respond_status(&res, 500, NULL);
  }
  dispatch_served(c, &req, &res, last);
}

/* ---- the answers that come later --------------------------------------- */

/* A pool's answer's status, from its status line (0: none there). */
static int dispatch_status_of(const char *resp, size_t n) {
  if (n < 12 || memcmp(resp, "HTTP/1.", 7) != 0) return 0;
  return (resp[9] - '0') * 100 + (resp[10] - '0') * 10 + (resp[11] - '0');
}

void m0__http_complete(m0__http *h, m0__conn *c, const void *resp, size_t n, int fd, uint64_t off, uint64_t flen) {
  if (c->h2_proxy) { /* an HTTP/2 stream's (http/h2.c) */
    m0__h2_complete(c, resp, n, fd, off, flen);
    return;
  }
  if (!m0__conn_unwait(c, dispatch_status_of(resp, n))) {
    if (fd >= 0) close(fd);
    return;
  }
  m0__outq *q = m0__conn_target(c);
  bool ok = m0__outq_append(q, resp, n) == 0;
  if (fd >= 0) {
    if (ok) ok = m0__outq_file(q, fd, off, (size_t)flen) == 0; /* the queue owns fd from here */
    else close(fd);
  }
  m0__conn_answered(c, ok);
}

/* The answer's headers into res, Content-Type aside (m0_respond's to write,
 * copied to ctype). false when one cannot be written as it is. */
static bool answer_headers(m0_response *res, const m0__answer *a, char *ctype, size_t cn) {
  bool ok = true;
  for (size_t i = 0; ok && i < a->nhdrs; i++) {
    const m0_header *x = &a->hdrs[i];
    if (x->name.n == 12 && strncasecmp(x->name.p, "content-type", 12) == 0) continue;
    ok = m0__response_header_n(res, x->name.p, x->name.n, x->value.p, x->value.n) == 0;
  }
  for (size_t i = 0; i < a->nhdrs; i++)
    if (a->hdrs[i].name.n == 12 && strncasecmp(a->hdrs[i].name.p, "content-type", 12) == 0) {
      if (a->hdrs[i].value.n >= cn) ok = false; /* m0_respond's limit: not dropped, refused */
      else snprintf(ctype, cn, "%.*s", (int)a->hdrs[i].value.n, a->hdrs[i].value.p);
    }
  return ok;
}

void m0__answer_write(m0_response *res, const m0__answer *a) {
  if (a->extra_len && a->extra_len <= sizeof res->extra) { /* lines m0_response_header checked on the loop */
    memcpy(res->extra, a->extra, a->extra_len);
    res->extra_len = a->extra_len;
  }
  char ctype[128] = "";
  bool ok = answer_headers(res, a, ctype, sizeof ctype);
  if (ok) ok = m0_respond(res, a->status, ctype[0] ? ctype : NULL, a->body, a->blen, M0_BODY_COPY) == 0;
  if (!ok && !res->done) m0__respond_status(res, 502, NULL); /* headers over the block's limit */
}

long m0__http_answer(m0__http *h, m0__conn *c, const m0__answer *a, int *status) {
  *status = a->status;
  if (c->h2_proxy) return m0__h2_answer(c, a, status);
  if (!m0__conn_unwait(c, a->status)) return M0__ECLOSED;
  m0_response res;
  m0__response_init(&res, m0__conn_target(c), &h->date, a->version_minor, a->head, a->close);
  m0__answer_write(&res, a);
  *status = res.status;
  m0__conn_answered(c, true);
  return res.head ? 0 : (long)res.body_len;
}

void m0__http_resume(m0__http *h, m0__conn *c) {
  (void)h;
  if (c->h2_proxy) {
    if (!m0__h2_pieces_end(c)) m0__h2_complete(c, NULL, 0, -1, 0, 0); /* a writer's end: http/h2_stream.c */
  }
  else if (m0__conn_unwait(c, -1)) m0__conn_answered(c, true);
}
