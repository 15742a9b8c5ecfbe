/* The connection state machine of the per-loop server: accept, read, parse,
 * answer (on the loop or through the pool), write, time out, close, drain.
 * Streams are in http/stream.c, the access log in http/accesslog.c.
 *
 * Design notes
 * - Everything here runs on one loop's thread. A connection is touched by no
 *   other thread.
 * - Input: a read lands in the loop's shared buffer and the parser keeps
 *   offsets into it. Only the bytes a partial request still needs are copied
 *   to the connection's own buffer (conn_keep), and that buffer is freed when
 *   the connection is idle again: an idle connection holds no input buffer.
 * - One request at a time: the parser pauses at each request's end, the view
 *   answers it into the output queue, and only then is the next parsed.
 *   Pipelined responses therefore go out in order, and all responses of one
 *   read leave in one write. A request with the pool (waiting) stops the
 *   parsing until its answer comes back (m0__http_complete).
 * - Output: responses are built in the loop's shared scratch queue and
 *   written at the end of the callback (m0__conn_flush); only what the socket
 *   does not take is moved to the connection. At most one uv_write in
 *   flight: responses made while it flies go to the second queue, written
 *   when the first completes. A client that does not read stops being read
 *   from (backpressure) once its queue passes CONN_OUT_HIGH.
 * - Timeouts are deadlines checked by one sweep timer per loop, so a request
 *   costs a store, not a timer restart. Each deadline is set once, when its
 *   phase begins.
 * - Close: uv_close, and the memory is freed in the close callback only; a
 *   connection closed while its request is with the pool is a zombie, freed
 *   when the answer comes back, since the pool still holds its pointer.
 */
#include "http/conn.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "base/errors.h"
#include "http/accesslog.h"
#include "http/conn_state.h"
#include "http/query.h"
#include "http/stream.h"
#include "http/websocket.h"
#include "http/views.h"

#define CONN_ROOM 4096          /* free bytes wanted in a connection's own buffer */
#define CONN_OUT_HIGH (1u << 20) /* queued output beyond which we stop reading */
#define CONN_LINGER_MS 1000      /* reading-and-discarding after an error answer */
/* At the drain, a keep-alive connection answered this recently may have its
 * next request on the way (a client that sends back to back): it gets the
 * fresh connections' grace; one idle longer is closed at once. */
#define CONN_DRAIN_RECENT_MS 100

static void conn_close(m0__conn *c);
static void wpoll_on_close(uv_handle_t *h);
static void conn_process(m0__conn *c, char *buf, size_t len);
static void conn_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf);
static void conn_on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

/* ---- lifecycle ------------------------------------------------------- */

static void conn_release(m0__conn *c) {
  m0__http *h = c->h;
  m0__parser_fini(&c->p);
  if (c->ws) m0__ws_free(c->ws);
  free(c->in);
  m0__outq_free(&c->q[0]);
  m0__outq_free(&c->q[1]);
  free(c);
  h->nconns--;
  h->stats.closed++;
  if (h->on_closed) h->on_closed(h);
}

static void conn_on_close(uv_handle_t *handle) {
  m0__conn *c = (m0__conn *)handle;
  if (c->waiting) c->zombie = true; /* the pool still holds a pointer to it */
  else conn_release(c);
}

static void conn_close(m0__conn *c) {
  if (c->closing) return;
  c->closing = true;
  m0__http *h = c->h;
  if (c->ws) m0__ws_gone(c->ws); /* its on_close, before its subscriptions go */
  m0__stream_forget(c);
  if (c->prev) c->prev->next = c->next;
  else h->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  if (c->writer) h->writer_gone(h, c); /* its writer stops here, and says so to the application */
  if (c->wp) { /* a file piece was waiting for the socket */
    uv_close((uv_handle_t *)&c->wp->poll, wpoll_on_close);
    c->wp = NULL;
  }
  uv_close((uv_handle_t *)&c->tcp, conn_on_close);
}

/* The request is the linger's own (malloc'd, not in every m0__conn): libuv
 * calls this before the handle's close callback, UV_ECANCELED when closed
 * first, so c is still there. */
static void conn_on_shutdown(uv_shutdown_t *req, int status) {
  m0__conn *c = req->data;
  free(req);
  if (status < 0) conn_close(c);
}

/* The last response is written: close now, or linger after an error so the
 * client reads our answer instead of a reset. */
static void conn_finish(m0__conn *c) {
  if (c->closing) return;
  if (!c->linger || c->phase == PHASE_LINGER) {
    conn_close(c);
    return;
  }
  c->phase = PHASE_LINGER;
  c->deadline = uv_now(c->h->uv) + CONN_LINGER_MS;
  uv_shutdown_t *req = malloc(sizeof *req);
  if (!req) {
    conn_close(c);
    return;
  }
  req->data = c;
  if (uv_shutdown(req, (uv_stream_t *)&c->tcp, conn_on_shutdown) != 0) {
    free(req);
    conn_close(c);
  }
}

/* ---- output ---------------------------------------------------------- */

static void conn_on_write(uv_write_t *req, int status);
static void conn_pump(m0__conn *c);

static void conn_write(m0__conn *c, int qi) {
  c->qi = qi;
  c->qskip = 0;
  c->writing = true;
  conn_pump(c);
}

/* q[qi] is written (status 0) or cannot be (status < 0): the next queue, or
 * the connection goes on. */
static void conn_written(m0__conn *c, int status) {
  c->writing = false;
  m0__outq_clear(&c->q[c->qi]);
  if (c->closing) return;
  if (c->writer && status == 0) c->h->writer_progress(c->h, c);
  if (status < 0) {
    conn_close(c);
    return;
  }
  int other = 1 - c->qi;
  if (m0__outq_bytes(&c->q[other])) {
    conn_write(c, other);
    return;
  }
  /* The client caught up: give the queues back, it may idle for long. */
  m0__outq_free(&c->q[0]);
  m0__outq_free(&c->q[1]);
  if (c->subs && !c->close_after) {
    m0__stream_caught_up(c); /* a slow subscriber is told what it lost (http/stream.c) */
    if (c->closing || c->writing) return;
  }
  if (c->close_after && !c->waiting) {
    conn_finish(c);
    return;
  }
  if (c->paused) {
    c->paused = false;
    conn_process(c, c->in, c->in_len);
    if (!c->closing && !c->paused && !c->close_after && !c->waiting)
      uv_read_start((uv_stream_t *)&c->tcp, conn_alloc, conn_on_read);
    m0__conn_flush(c);
  }
}

/* The socket takes more: a file piece goes on. */
static void conn_on_writable(uv_poll_t *poll, int status, int events) {
  m0__conn *c = poll->data;
  uv_poll_stop(poll);
  if (status < 0) conn_written(c, status);
  else conn_pump(c);
}

static void wpoll_on_close(uv_handle_t *h) {
  m0__wpoll *wp = (m0__wpoll *)h;
  close(wp->fd);
  free(wp);
}

/* Waits until the socket takes more. libuv watches one handle per
 * descriptor, and the connection's tcp handle has this one: the poll
 * watches a duplicate (epoll reports the same socket through it). */
static int conn_wait_writable(m0__conn *c) {
  if (!c->wp) {
    int fd = -1;
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0 || (fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) return -1;
    m0__wpoll *wp = calloc(1, sizeof *wp);
    if (!wp || uv_poll_init(c->h->uv, &wp->poll, fd) != 0) {
      free(wp);
      close(fd);
      return -1;
    }
    wp->fd = fd;
    wp->poll.data = c;
    c->wp = wp;
  }
  return uv_poll_start(&c->wp->poll, UV_WRITABLE, conn_on_writable);
}

/* Writes q[qi] from c->qskip on: what is in memory by uv_write, a file
 * piece by sendfile(2) straight from the page cache, in queue order. Each
 * step that moves bytes also moves an idle connection's deadline: a client
 * that reads is not idle, one that stops is closed by the sweep. */
#define CONN_SENDFILE_TURN (4u << 20) /* a file's bytes per loop turn: its other connections wait no longer */

static void conn_pump(m0__conn *c) {
  m0__outq *q = &c->q[c->qi];
  size_t sent = 0;
  for (;;) {
    uv_buf_t iov[2 * M0__OUT_REFS + 1];
    int n = m0__outq_iov(q, c->qskip, iov);
    if (n > 0) {
      c->wbytes = 0;
      for (int i = 0; i < n; i++) c->wbytes += iov[i].len;
      c->wreq.data = c;
      if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, iov, (unsigned)n, conn_on_write) != 0) conn_written(c, -1);
      return;
    }
    int fd, sock;
    uint64_t off;
    size_t left;
    if (!m0__outq_file_at(q, c->qskip, &fd, &off, &left)) {
      conn_written(c, 0);
      return;
    }
    if (uv_fileno((uv_handle_t *)&c->tcp, &sock) != 0) {
      conn_written(c, -1);
      return;
    }
    off_t at = (off_t)off;
    ssize_t w = sendfile(sock, fd, &at, left < CONN_SENDFILE_TURN ? left : CONN_SENDFILE_TURN);
    if (w > 0) {
      c->qskip += (size_t)w;
      if (c->phase == PHASE_IDLE) c->deadline = uv_now(c->h->uv) + c->h->keepalive_timeout_ms;
      if ((sent += (size_t)w) < CONN_SENDFILE_TURN) continue;
      /* A fast reader of a large file: the rest at the loop's next turn
       * (the socket is writable, so the poll fires at once). */
      if (conn_wait_writable(c) == 0) return;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN && conn_wait_writable(c) == 0) return; /* the socket is full: on writable */
    /* An error, or 0: the file is shorter than its length said (truncated
     * while it was sent). The response cannot be whole: close. */
    conn_written(c, -1);
    return;
  }
}

static void conn_on_write(uv_write_t *req, int status) {
  m0__conn *c = req->data;
  if (status < 0 || c->closing) {
    conn_written(c, status < 0 ? status : 0);
    return;
  }
  c->qskip += c->wbytes;
  if (c->phase == PHASE_IDLE) c->deadline = uv_now(c->h->uv) + c->h->keepalive_timeout_ms;
  conn_pump(c);
}

/* Writes what this callback put in the scratch queue: directly when the
 * socket takes it all (the common case: no copy, no request object), else
 * the rest is moved to the connection and written asynchronously. */
static void conn_send(m0__conn *c, m0__outq *s);

void m0__conn_flush(m0__conn *c) {
  if (c->writing && !c->closing) return; /* the scratch is empty: the target was the queue behind the write */
  conn_send(c, &c->h->scratch);
}

void m0__conn_send(m0__conn *c, m0__outq *q) {
  if (c->writing && !c->closing) {
    if (m0__outq_move_tail(&c->q[1 - c->qi], q, 0) != 0) conn_close(c);
    m0__outq_clear(q);
    return;
  }
  conn_send(c, q);
}

static void conn_send(m0__conn *c, m0__outq *s) {
  size_t total = m0__outq_bytes(s);
  if (c->closing) {
    m0__outq_clear(s);
    return;
  }
  if (!total) {
    if (c->close_after && !c->waiting) conn_finish(c);
    return;
  }
  uv_buf_t iov[2 * M0__OUT_REFS + 1];
  int n = m0__outq_iov(s, 0, iov); /* up to a file piece: conn_pump sends that */
  int w = n ? uv_try_write((uv_stream_t *)&c->tcp, iov, (unsigned)n) : 0;
  if (w == UV_EAGAIN || w == UV_ENOSYS) w = 0;
  if (w < 0) {
    m0__outq_clear(s);
    conn_close(c);
    return;
  }
  if ((size_t)w == total) {
    m0__outq_clear(s);
    if (c->close_after && !c->waiting) conn_finish(c);
    return;
  }
  int rv = m0__outq_move_tail(&c->q[0], s, (size_t)w);
  m0__outq_clear(s);
  if (rv) {
    conn_close(c);
    return;
  }
  conn_write(c, 0);
}

/* ---- requests -------------------------------------------------------- */

/* The request went to the pool: read and parse nothing more until it comes
 * back, so answers leave in order. */
static void conn_wait(m0__conn *c, bool last) {
  c->waiting = true;
  c->close_on_complete = last;
  c->phase = PHASE_WAIT;
  uv_read_stop((uv_stream_t *)&c->tcp);
}

static m0_deferred *conn_defer_begin(void *ctx, m0_response *res, unsigned timeout_ms) {
  m0__conn *c = ctx;
  return c->h->defer_view(c->h, c, res, timeout_ms);
}

static m0_writer *conn_writer_begin(void *ctx, m0_response *res, int status, const char *content_type,
                                    void (*on_gone)(void *arg), void *arg) {
  m0__conn *c = ctx;
  m0_writer *w = c->h->writer_begin(c->h, c, res, status, content_type, on_gone, arg);
  if (w && c->h->latency && c->h->latency[c->route])
    m0__latency_status(c->h->latency[c->route], status); /* its head is written */
  return w;
}

/* The request's answer is begun: its latency and status class (status < 0:
 * counted already, a writer's at its head), by its route. */
static void conn_latency(m0__conn *c, int status) {
  m0__http *h = c->h;
  m0__latency *row = h->latency ? h->latency[c->route] : NULL;
  if (!row) return;
  m0__latency_add(row, m0__latency_now_ns() - c->t0_ns);
  if (status >= 0) m0__latency_status(row, status);
}

static char *conn_graph(void *ctx, const char *records_of) {
  m0__conn *c = ctx;
  return c->h->graph(c->h, records_of);
}

/* Answers the request the parser just completed, into the target queue. */
static void conn_dispatch(m0__conn *c, const char *buf) {
  m0__http *h = c->h;
  m0__parser *p = &c->p;
  c->t0_ns = m0__latency_now_ns();
  c->route = (int)h->app->nroutes;
  m0_request req;
  memset(&req, 0, sizeof req);
  req.method = (m0_str){buf + p->method.off, p->method.len};
  req.target = (m0_str){buf + p->url.off, p->url.len};
  const char *q = memchr(req.target.p, '?', req.target.n);
  req.path = (m0_str){req.target.p, q ? (size_t)(q - req.target.p) : req.target.n};
  req.query = q ? (m0_str){q + 1, req.target.n - req.path.n - 1} : (m0_str){q, 0};
  req.version_minor = p->version_minor;
  for (int i = 0; i < p->nheaders; i++) {
    h->hdrs[i].name = (m0_str){buf + p->hs->name[i].off, p->hs->name[i].len};
    h->hdrs[i].value = (m0_str){buf + p->hs->value[i].off, p->hs->value[i].len};
  }
  req.headers = h->hdrs;
  req.nheaders = (size_t)p->nheaders;
  req.body = (m0_str){p->body.p, p->body.len};
  req.trace_hi = p->trace_hi;
  req.trace_lo = p->trace_lo;
  req.peer = c->peer;
  req.peer_port = c->peer_port;
  char client[M0__ADDR_TEXT];
  req.client = c->peer;
  if (h->proxies.n) { /* only behind proxies the operator named: the headers are anyone's words otherwise */
    m0__client_addr(&h->proxies, c->peer, &req, client);
    req.client = client;
  }

  c->nreq++;
  /* Draining for the next generation, requests pipelined behind this one
   * (their bytes are here) are answered too, the last saying close. */
  bool last = !p->keep_alive || (h->draining && !(h->handover && c->more_in)) || c->close_after ||
              (h->max_keepalive_requests > 0 && c->nreq >= (uint64_t)h->max_keepalive_requests);
  m0_response res;
  m0__response_init(&res, m0__conn_target(c), &h->date, p->version_minor, p->is_head, last);
  res.stream_begin = m0__stream_begin;
  res.stream_write = m0__stream_write;
  res.ws_begin = m0__ws_begin;
  res.stream_ctx = c;
  if (h->defer_view) res.defer_begin = conn_defer_begin;
  if (h->writer_begin) res.writer_begin = conn_writer_begin;
  if (h->graph) res.graph = conn_graph;
  res.req = &req;
  /* A request that brought a traceparent is answered with it (every path:
   * the pool and an application actor take res.extra with the request), so
   * the client can find its request by id in m0trace and the access log. m0
   * makes no span of its own: the parent id and flags are the client's. */
  if (p->trace_hi || p->trace_lo) {
    char tp[56];
    snprintf(tp, sizeof tp, "00-%016llx%016llx-%016llx-%02x", (unsigned long long)p->trace_hi,
             (unsigned long long)p->trace_lo, (unsigned long long)p->trace_parent, p->trace_flags);
    m0_response_header(&res, "traceparent", tp);
  }

  const m0_app *app = h->app;
  m0__current_trace = (m0__trace_id){p->trace_hi, p->trace_lo};
  /* A dot-segment ("." or "..", %2E spelled too) is refused before anything
   * routes the path: the router matches req->path raw, and a view that
   * joined it to a directory would climb out (docs/http.md, The path). */
  if (m0__path_dot_segment(req.path)) {
    res.close = true; /* a refusal, as the parser's are */
    m0__respond_status(&res, 400, NULL);
  } else if (h->metrics && req.path.n == strlen(h->metrics_path) && !memcmp(req.path.p, h->metrics_path, req.path.n)) {
    h->metrics(h, &res);
  } else if (!(app->before_request && app->before_request(h->state, &req, &res))) {
    if (app->routes && p->asterisk) {
      /* OPTIONS * asks about the server, not a resource (RFC 9110 9.3.7): no route is "*" */
      m0__respond_status(&res, 204, NULL);
    } else if (app->routes) {
      m0__match m;
      m0__views_match(app->routes, app->nroutes, req.method, req.path, &m);
      if (m.kind == M0__VIEW_FOUND) {
        req.params = m.params;
        req.nparams = m.nparams;
        c->route = (int)(m.route - app->routes);
        if (m.route->actor) {
          if (h->to_actor && h->to_actor(h, c, &req, m.route, &res) == 0) {
            m0__current_trace = (m0__trace_id){0, 0};
            conn_wait(c, last);
            return;
          }
          if (!res.done) m0__respond_status(&res, 503, NULL);
        } else if (h->defer && !(m.route->flags & M0_ON_LOOP) &&
                   h->defer(h, c, &req, (int)(m.route - app->routes), &res) == 0) {
          m0__current_trace = (m0__trace_id){0, 0};
          conn_wait(c, last);
          return;
        } else if (m.route->flags & M0_NEEDS_POOL) {
          /* It blocks: the pool could not take it (no memory for its batch),
           * and on the loop it would hold every connection of the loop. */
          m0_response_header(&res, "Retry-After", "1");
          m0__respond_status(&res, 503, NULL);
        } else {
          m.route->view(h->state, &req, &res);
        }
      } else if (m.kind == M0__VIEW_NOT_FOUND) {
        m0__respond_status(&res, 404, NULL);
      } else {
        m0__respond_status(&res, m.kind == M0__VIEW_OPTIONS ? 204 : 405, m.allow);
      }
    } else if (h->defer && h->defer(h, c, &req, -1, &res) == 0) {
      m0__current_trace = (m0__trace_id){0, 0};
      conn_wait(c, last);
      return;
    } else {
      app->handle(h->state, &req, &res);
    }
  }
  m0__current_trace = (m0__trace_id){0, 0};
  if (res.deferred) { /* m0_defer or a writer: answered later (m0__http_answer, m0__http_resume) */
    conn_wait(c, last || res.close); /* res.close: a writer to HTTP/1.0 ends with the close */
    return;
  }
  if (!res.done) {
    fprintf(stderr, "m0: loop %d: the view for %.*s %.*s returned without answering; sent 500\n",
            h->worker, (int)req.method.n, req.method.p, (int)req.path.n, req.path.p);
    m0__respond_status(&res, 500, NULL);
  }
  h->stats.requests++;
  conn_latency(c, res.status);
  if (h->access_log)
    m0__access_log_line(h->worker, req.method, req.path, res.status, res.head ? 0 : res.body_len, p->trace_hi,
                        p->trace_lo, NULL);
  if (h->served) h->served(h, &req, p->trace_flags, res.status, res.head ? 0 : res.body_len);
  if (c->stream) {
    m0__stream_replay(c); /* Last-Event-ID's frames, behind the view's own (http/stream.c) */
    if (c->closing) return;
  }
  if (c->ws) { /* a WebSocket outlives the request count; at the drain it goes with 1001 */
    if (h->draining) m0__ws_goodbye(c->ws, 1001, "the server is going away");
  } else if (c->stream && h->draining) {
    m0__stream_goodbye(c); /* begun as the drain did: told like the streams open then */
  } else if (last || res.close) {
    c->close_after = true; /* res.close: a refusal (a dot-segment) */
  }
}

/* Answers a request that cannot be read, then closes. */
static void conn_error(m0__conn *c, const char *buf, int status, const char *why) {
  m0__http *h = c->h;
  m0_response res;
  m0__response_init(&res, m0__conn_target(c), &h->date, 1, false, true);
  m0__respond_status(&res, status, NULL);
  h->stats.errors_4xx++;
  if (h->latency) m0__latency_status(h->latency[h->app->nroutes], status); /* no route: it was not read */
  c->close_after = true;
  c->linger = true;
  if (h->access_log) {
    const m0__parser *p = &c->p;
    m0_str method = {buf && p->method.len ? buf + p->method.off : "", buf ? p->method.len : 0};
    m0_str target = {buf && p->url.len ? buf + p->url.off : "", buf ? p->url.len : 0};
    const char *q = target.n ? memchr(target.p, '?', target.n) : NULL;
    if (q) target.n = (size_t)(q - target.p);
    m0__access_log_line(h->worker, method, target, status, res.body_len, p->trace_hi, p->trace_lo, why ? why : "");
  }
}

/* Keeps the bytes a partial request still needs in the connection's own
 * buffer: [req_start, keep_end) of a request being parsed (the spans), or
 * [off, len) not parsed yet. Everything else is dropped. */
static void conn_keep(m0__conn *c, char *buf, size_t len, size_t off) {
  size_t from, to;
  bool started = !m0__parser_idle(&c->p);
  if (c->close_after || c->stream) from = to = 0;
  else if (started) {
    from = c->req_start;
    to = c->p.keep_end > from ? c->p.keep_end : from;
    if (off < len) to = len; /* paused mid-buffer with a request begun: keep all */
  } else {
    from = off;
    to = len;
  }
  size_t n = to - from;
  if (n == 0) {
    free(c->in);
    c->in = NULL;
    c->in_len = c->in_cap = c->parse_off = c->req_start = 0;
    return;
  }
  if (buf != c->in) {
    if (n > c->in_cap) {
      char *nb = realloc(c->in, n + CONN_ROOM);
      if (!nb) {
        conn_close(c);
        return;
      }
      c->in = nb;
      c->in_cap = n + CONN_ROOM;
    }
    memcpy(c->in, buf + from, n);
  } else if (from) {
    memmove(c->in, c->in + from, n);
  }
  if (started) m0__parser_shift(&c->p, (uint32_t)from);
  c->in_len = n;
  c->req_start = 0;
  /* Bytes the parser consumed but no span needs (the space after a method,
   * a CR) were dropped with the tail: parsing resumes at the end. */
  c->parse_off = !started ? 0 : off < len ? off - from : n;
}

/* Parses and answers every whole request in buf[c->parse_off, len). */
static void conn_process(m0__conn *c, char *buf, size_t len) {
  m0__http *h = c->h;
  size_t off = c->parse_off;
  while (!c->close_after && !c->closing && !c->waiting && !c->stream) {
    if (m0__parser_idle(&c->p)) c->req_start = off;
    if (off == len) break;
    m0__parse_result r = m0__parser_feed(&c->p, buf, len, &off);
    if (r == M0__PARSE_MORE) {
      if (c->p.headers_done && c->p.expect_continue && !c->continued) {
        c->continued = true;
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        m0__outq_append(m0__conn_target(c), cont, sizeof cont - 1);
      }
      break;
    }
    if (r == M0__PARSE_ERROR) {
      conn_error(c, buf, c->p.status, c->p.why);
      break;
    }
    c->more_in = off < len;
    conn_dispatch(c, buf);
    m0__parser_next(&c->p);
    c->continued = false;
    if (c->waiting) break;
    if (c->stream) {
      c->phase = PHASE_IDLE;
      c->deadline = UINT64_MAX; /* a stream has no timeout; the heartbeat finds dead peers */
      break;
    }
    c->phase = PHASE_IDLE;
    c->deadline = uv_now(h->uv) + h->keepalive_timeout_ms;
    /* The answers of one read collect in the scratch while nothing is in
     * flight: past the mark, write them now, so the rest waits in q[0] and
     * what follows counts against the mark below (else one read of pipelined
     * requests could queue any amount). A queue whose reference slots are
     * all taken counts as full too: the next body would be copied (a file
     * piece read into memory). */
    if (!c->writing && (m0__outq_bytes(&h->scratch) > CONN_OUT_HIGH || h->scratch.nrefs == M0__OUT_REFS)) {
      m0__conn_flush(c);
      if (c->closing) break;
    }
    if (m0__conn_queued(c) > CONN_OUT_HIGH || (c->writing && c->q[1 - c->qi].nrefs == M0__OUT_REFS)) {
      /* The client is not reading its answers: stop reading its requests. */
      c->paused = true;
      uv_read_stop((uv_stream_t *)&c->tcp);
      c->deadline = uv_now(h->uv) + h->body_timeout_ms;
      break;
    }
  }
  /* Deadlines follow the phase; each is set once, when the phase begins. */
  if (!c->close_after && !c->waiting && !m0__parser_idle(&c->p)) {
    if (!c->p.headers_done && c->phase != PHASE_HEAD) {
      if (c->phase != PHASE_FRESH) c->deadline = uv_now(h->uv) + h->header_timeout_ms;
      c->phase = PHASE_HEAD;
    } else if (c->p.headers_done && c->phase != PHASE_BODY) {
      c->phase = PHASE_BODY;
      c->deadline = uv_now(h->uv) + h->body_timeout_ms;
    }
  }
  conn_keep(c, buf, len, off);
}

/* ---- reading --------------------------------------------------------- */

static void conn_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
  m0__conn *c = (m0__conn *)handle;
  if (c->in_len == 0 || c->phase == PHASE_LINGER) {
    *buf = uv_buf_init(c->h->rbuf, M0__RBUF_SIZE);
    return;
  }
  if (c->in_cap - c->in_len < CONN_ROOM) {
    size_t cap = c->in_len + 4 * CONN_ROOM;
    char *nb = realloc(c->in, cap);
    if (!nb) {
      *buf = uv_buf_init(NULL, 0); /* libuv reports UV_ENOBUFS */
      return;
    }
    c->in = nb;
    c->in_cap = cap;
  }
  *buf = uv_buf_init(c->in + c->in_len, (unsigned)(c->in_cap - c->in_len));
}

static void conn_on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  m0__conn *c = (m0__conn *)stream;
  _Atomic uint64_t *busy = c->h->busy_since;
  if (busy && !atomic_load_explicit(busy, memory_order_relaxed))
    atomic_store_explicit(busy, uv_now(c->h->uv) | 1, memory_order_relaxed);
  if (nread == 0) return;
  if (nread < 0) {
    /* EOF: requests already read were answered; a half-read one cannot be.
     * Close once what is queued is written. */
    if (nread == UV_EOF && m0__parser_idle(&c->p) && (c->writing || c->waiting) && !c->linger)
      c->close_on_complete = c->close_after = true;
    else conn_close(c);
    return;
  }
  if (c->phase == PHASE_LINGER || c->close_after) return; /* discarding */
  if (c->ws) {
    m0__ws_read(c->ws, buf->base, (size_t)nread);
    return;
  }
  if (c->stream) return; /* a stream reads nothing more */
  if (buf->base == c->h->rbuf) {
    c->parse_off = 0;
    conn_process(c, c->h->rbuf, (size_t)nread);
  } else {
    c->in_len += (size_t)nread;
    conn_process(c, c->in, c->in_len);
  }
  m0__conn_flush(c);
}

/* ---- the server ------------------------------------------------------ */

int m0__http_init(m0__http *h) {
  h->rbuf = malloc(M0__RBUF_SIZE);
  memset(&h->scratch, 0, sizeof h->scratch);
  memset(&h->spans, 0, sizeof h->spans);
  return h->rbuf ? 0 : M0__ENOMEM;
}

void m0__http_fini(m0__http *h) {
  h->latency = NULL; /* the loop's (actors/loop.c frees it); the shared page's rows stay */
  free(h->rbuf);
  h->rbuf = NULL;
  m0__outq_free(&h->scratch);
  m0__span_pool_fini(&h->spans);
  m0__stream_fini(h);
}

/* The peer's address as text, once per connection (a view may ask for it
 * on any request; a request in the pool cannot ask the socket). */
static void conn_peer(m0__conn *c) {
  struct sockaddr_storage ss;
  int len = sizeof ss;
  c->peer[0] = 0;
  c->peer_port = 0;
  if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) != 0) return;
  if (ss.ss_family == AF_INET) {
    const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
    uv_inet_ntop(AF_INET, &a->sin_addr, c->peer, sizeof c->peer);
    c->peer_port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(a->sin6_addr.s6_addr, mapped, 12) == 0) /* a v4 client of a dual-stack listener */
      uv_inet_ntop(AF_INET, a->sin6_addr.s6_addr + 12, c->peer, sizeof c->peer);
    else uv_inet_ntop(AF_INET6, &a->sin6_addr, c->peer, sizeof c->peer);
    c->peer_port = ntohs(a->sin6_port);
  }
}

int m0__http_adopt(m0__http *h, int fd) {
  m0__conn *c = calloc(1, sizeof *c);
  if (!c) {
    close(fd);
    return M0__ENOMEM;
  }
  c->h = h;
  uv_tcp_init(h->uv, &c->tcp);
  int rv = uv_tcp_open(&c->tcp, fd);
  if (rv != 0) close(fd); /* not the handle's yet */
  if (rv == 0) rv = uv_read_start((uv_stream_t *)&c->tcp, conn_alloc, conn_on_read);
  if (rv != 0) {
    c->closing = true;
    h->nconns++; /* conn_on_close counts it out again */
    uv_close((uv_handle_t *)&c->tcp, conn_on_close); /* closes fd if it took it */
    return M0__ETRANSPORT; /* libuv's reason is rv: the socket could not be opened or read */
  }
  uv_tcp_nodelay(&c->tcp, 1);
  conn_peer(c);
  m0__parser_init(&c->p, &h->lim, &h->spans);
  c->phase = PHASE_FRESH;
  c->deadline = uv_now(h->uv) + h->header_timeout_ms;
  if (h->draining && h->drain_fresh_ms && h->drain_fresh_ms < h->header_timeout_ms)
    c->deadline = uv_now(h->uv) + h->drain_fresh_ms; /* handed in during the drain */
  c->next = h->conns;
  if (h->conns) h->conns->prev = c;
  h->conns = c;
  h->nconns++;
  h->stats.accepted++;
  return 0;
}

/* The connection's answer is in its target queue (or could not be): the
 * connection goes on with what came while it waited. */
static void conn_answered(m0__http *h, m0__conn *c, bool ok) {
  if (!ok) {
    conn_close(c);
    return;
  }
  if (c->close_on_complete || h->draining) c->close_after = true;
  c->phase = PHASE_IDLE;
  c->deadline = uv_now(h->uv) + h->keepalive_timeout_ms;
  if (!c->close_after && m0__conn_queued(c) > CONN_OUT_HIGH) {
    /* The client is not reading its answers: take no more of its requests
     * (reading stopped when this one went to the pool) until it catches up. */
    c->paused = true;
    c->deadline = uv_now(h->uv) + h->body_timeout_ms;
  } else if (!c->close_after) {
    conn_process(c, c->in, c->in_len); /* requests that came while it waited */
    if (!c->closing && !c->close_after && !c->waiting && !c->paused)
      uv_read_start((uv_stream_t *)&c->tcp, conn_alloc, conn_on_read);
  }
  m0__conn_flush(c);
}

/* Whether a waiting connection can still take its answer (a zombie's memory
 * is released here: nobody else holds it now). */
static bool conn_unwait(m0__conn *c, int status) {
  c->waiting = false;
  if (c->zombie) {
    conn_release(c);
    return false;
  }
  if (c->closing) return false;
  c->h->stats.requests++;
  conn_latency(c, status);
  return true;
}

/* A pool's answer's status, from its status line (0: none there). */
static int conn_status_of(const char *resp, size_t n) {
  if (n < 12 || memcmp(resp, "HTTP/1.", 7) != 0) return 0;
  return (resp[9] - '0') * 100 + (resp[10] - '0') * 10 + (resp[11] - '0');
}

void m0__http_complete(m0__http *h, m0__conn *c, const void *resp, size_t n, int fd, uint64_t off, uint64_t flen) {
  if (!conn_unwait(c, conn_status_of(resp, n))) {
    if (fd >= 0) close(fd);
    return;
  }
  m0__outq *q = m0__conn_target(c);
  bool ok = m0__outq_append(q, resp, n) == 0;
  if (fd >= 0) {
    if (ok) ok = m0__outq_file(q, fd, off, (size_t)flen) == 0; /* the queue owns fd from here */
    else close(fd);
  }
  conn_answered(h, c, ok);
}

long m0__http_answer(m0__http *h, m0__conn *c, const m0__answer *a, int *status) {
  *status = a->status;
  if (!conn_unwait(c, a->status)) return -1;
  m0_response res;
  m0__response_init(&res, m0__conn_target(c), &h->date, a->version_minor, a->head, a->close);
  if (a->extra_len && a->extra_len <= sizeof res.extra) { /* lines m0_response_header checked on the loop */
    memcpy(res.extra, a->extra, a->extra_len);
    res.extra_len = a->extra_len;
  }
  bool ok = true;
  for (size_t i = 0; ok && i < a->nhdrs; i++) {
    const m0_header *x = &a->hdrs[i];
    /* Content-Type is m0_respond's to write. */
    if (x->name.n == 12 && strncasecmp(x->name.p, "content-type", 12) == 0) continue;
    ok = m0__response_header_n(&res, x->name.p, x->name.n, x->value.p, x->value.n) == 0;
  }
  char ctype[128] = "";
  for (size_t i = 0; i < a->nhdrs; i++)
    if (a->hdrs[i].name.n == 12 && strncasecmp(a->hdrs[i].name.p, "content-type", 12) == 0) {
      if (a->hdrs[i].value.n >= sizeof ctype) ok = false; /* m0_respond's limit: not dropped, refused */
      else snprintf(ctype, sizeof ctype, "%.*s", (int)a->hdrs[i].value.n, a->hdrs[i].value.p);
    }
  if (ok) ok = m0_respond(&res, a->status, ctype[0] ? ctype : NULL, a->body, a->blen, M0_BODY_COPY) == 0;
  if (!ok && !res.done) m0__respond_status(&res, 502, NULL); /* headers over the block's limit */
  *status = res.status;
  conn_answered(h, c, true);
  return res.head ? 0 : (long)res.body_len;
}

void m0__http_resume(m0__http *h, m0__conn *c) {
  if (conn_unwait(c, -1)) conn_answered(h, c, true);
}

void m0__http_abort(m0__http *h, m0__conn *c) { conn_close(c); }

void m0__http_sweep(m0__http *h) {
  uint64_t now = uv_now(h->uv);
  if (h->heartbeat_ms) m0__stream_beat(h, now);
  m0__stream_graph(h, now);
  m0__conn *next;
  for (m0__conn *c = h->conns; c; c = next) {
    next = c->next;
    if (now < c->deadline || c->waiting) continue;
    if ((c->phase == PHASE_HEAD || c->phase == PHASE_BODY) && !c->writing && !c->paused) {
      h->stats.timeouts++;
      conn_error(c, c->in, 408, c->phase == PHASE_HEAD ? "header timeout" : "body timeout");
      m0__conn_flush(c);
    } else {
      conn_close(c); /* idle keep-alive, silent fresh connection, linger over, stuck writer */
    }
  }
}

/* Whether bytes the loop has not read yet wait in the kernel for c: the
 * client's next request is already on its way. */
static bool conn_input_waits(m0__conn *c) {
  uv_os_fd_t fd;
  int n = 0;
  return uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0 && ioctl(fd, FIONREAD, &n) == 0 && n > 0;
}

void m0__http_drain(m0__http *h, bool handover) {
  h->draining = true;
  h->handover = handover;
  /* Streams first: the walk below would close an idle stream at once,
   * before its closing event. */
  m0__stream_close_all(h);
  m0__conn *next;
  uint64_t now = uv_now(h->uv), fresh_by = now + h->drain_fresh_ms;
  for (m0__conn *c = h->conns; c; c = next) {
    next = c->next;
    bool idle = m0__parser_idle(&c->p) && !c->writing && !c->paused && !c->waiting;
    /* An idle connection's deadline is its last answer's time plus the keep-alive timeout. */
    bool recent = idle && c->phase == PHASE_IDLE && c->deadline + CONN_DRAIN_RECENT_MS > now + h->keepalive_timeout_ms;
    if ((c->phase == PHASE_FRESH || (idle && (recent || conn_input_waits(c)))) && h->drain_fresh_ms) {
      /* Accepted just before the drain, its request may be on its way; kept
       * alive and just answered, or with bytes waiting, its next request may
       * be too (closed now, either would be lost): read and answered with
       * Connection: close, or closed by the sweep if none comes in time. */
      if (fresh_by < c->deadline) c->deadline = fresh_by;
    } else if (idle) {
      /* An idle keep-alive connection closes at once, at a reload too (as
       * nginx's old workers do): kept for one more request, a browser's
       * retry would land on this generation and be closed again; closed, its
       * next request opens a connection to whichever generation listens. */
      conn_close(c);
    } else {
      c->close_after = c->close_after || c->writing; /* else: Connection: close on its answer */
    }
  }
}
