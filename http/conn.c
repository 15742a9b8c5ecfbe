#include "http/conn.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "http/views.h"

#define CONN_ROOM 4096          /* free bytes wanted in a connection's own buffer */
#define CONN_OUT_HIGH (1u << 20) /* queued output beyond which we stop reading */
#define CONN_LINGER_MS 1000      /* reading-and-discarding after an error answer */

typedef enum conn_phase {
  PHASE_FRESH,  /* accepted, nothing read */
  PHASE_IDLE,   /* between requests */
  PHASE_HEAD,   /* inside a request's line and headers */
  PHASE_BODY,   /* inside a request's body */
  PHASE_LINGER, /* answered an error; discarding input until EOF */
  PHASE_WAIT,   /* a request is with the pool */
} conn_phase;

struct m0__conn {
  uv_tcp_t tcp; /* first: the handle's address is the connection's */
  m0__http *h;
  m0__conn *next, *prev;
  m0__parser p;
  char *in; /* only what a partial request needs; NULL most of the time */
  size_t in_len, in_cap, parse_off, req_start;
  m0__outq q[2]; /* q[qi] is being written; q[1-qi] collects meanwhile */
  int qi;
  uv_write_t wreq;
  uv_shutdown_t sreq;
  uint64_t deadline;
  conn_phase phase;
  uint32_t nreq;
  bool writing, close_after, closing, paused, linger, continued;
  bool waiting;           /* a request is with the pool: parse nothing more */
  bool close_on_complete; /* that request's answer is the last */
  bool zombie;            /* closed while waiting: freed by m0__http_complete */
  bool stream;            /* a server-sent-event stream: nothing more is parsed */
  uint64_t last_write;    /* a stream's last frame or beat, for the heartbeat */
  m0__conn *snext, *sprev;
  char channel[M0__CHANNEL_MAX + 1];
};

static void conn_close(m0__conn *c);
static void conn_flush(m0__conn *c);
static void conn_process(m0__conn *c, char *buf, size_t len);
static void conn_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf);
static void conn_on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

/* ---- lifecycle ------------------------------------------------------- */

static void conn_release(m0__conn *c) {
  m0__http *h = c->h;
  m0__parser_fini(&c->p);
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

static void conn_stream_forget(m0__conn *c) {
  m0__http *h = c->h;
  if (c->sprev) c->sprev->snext = c->snext;
  else h->streams = c->snext;
  if (c->snext) c->snext->sprev = c->sprev;
  h->nstreams--;
  c->stream = false;
}

static void conn_close(m0__conn *c) {
  if (c->closing) return;
  c->closing = true;
  m0__http *h = c->h;
  if (c->stream) conn_stream_forget(c);
  if (c->prev) c->prev->next = c->next;
  else h->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  uv_close((uv_handle_t *)&c->tcp, conn_on_close);
}

static void conn_on_shutdown(uv_shutdown_t *req, int status) {
  m0__conn *c = req->data;
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
  c->sreq.data = c;
  if (uv_shutdown(&c->sreq, (uv_stream_t *)&c->tcp, conn_on_shutdown) != 0) conn_close(c);
}

/* ---- output ---------------------------------------------------------- */

/* Where a response goes now: the shared scratch when nothing is in flight
 * (written at the end of this callback), else behind the write in flight. */
static m0__outq *conn_target(m0__conn *c) { return c->writing ? &c->q[1 - c->qi] : &c->h->scratch; }

/* Output queued behind the socket: non-zero only while a write is in flight. */
static size_t conn_queued(const m0__conn *c) { return m0__outq_bytes(&c->q[0]) + m0__outq_bytes(&c->q[1]); }

static void conn_on_write(uv_write_t *req, int status);

static void conn_write(m0__conn *c, int qi) {
  uv_buf_t iov[2 * M0__OUT_REFS + 1];
  int n = m0__outq_iov(&c->q[qi], 0, iov);
  c->qi = qi;
  c->writing = true;
  c->wreq.data = c;
  if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, iov, (unsigned)n, conn_on_write) != 0) {
    c->writing = false;
    conn_close(c);
  }
}

static void conn_on_write(uv_write_t *req, int status) {
  m0__conn *c = req->data;
  c->writing = false;
  m0__outq_clear(&c->q[c->qi]);
  if (c->closing) return;
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
  if (c->close_after && !c->waiting) {
    conn_finish(c);
    return;
  }
  if (c->paused) {
    c->paused = false;
    conn_process(c, c->in, c->in_len);
    if (!c->closing && !c->paused && !c->close_after && !c->waiting)
      uv_read_start((uv_stream_t *)&c->tcp, conn_alloc, conn_on_read);
    conn_flush(c);
  }
}

/* Writes what this callback put in the scratch queue: directly when the
 * socket takes it all (the common case: no copy, no request object), else
 * the rest is moved to the connection and written asynchronously. */
static void conn_flush(m0__conn *c) {
  m0__outq *s = &c->h->scratch;
  size_t total = m0__outq_bytes(s);
  if (c->closing) {
    m0__outq_clear(s);
    return;
  }
  if (c->writing) return; /* the rest goes when the write in flight completes */
  if (!total) {
    if (c->close_after && !c->waiting) conn_finish(c);
    return;
  }
  uv_buf_t iov[2 * M0__OUT_REFS + 1];
  int n = m0__outq_iov(s, 0, iov);
  int w = uv_try_write((uv_stream_t *)&c->tcp, iov, (unsigned)n);
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

/* The client's bytes in a JSON string: escape what would break the line. */
static void conn_log_str(m0_str s) {
  for (size_t i = 0; i < s.n; i++) {
    unsigned char ch = (unsigned char)s.p[i];
    if (ch == '"' || ch == '\\' || ch < 0x20 || ch >= 0x7f) printf("\\u%04x", ch);
    else putchar(ch);
  }
}

/* One JSON line per response. A refused request logs what was read of it,
 * and why. */
static void conn_access_log(m0__conn *c, m0_str method, m0_str path, int status, size_t bytes, const char *error) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  printf("{\"time\":%lld.%03ld,\"worker\":%d,\"method\":\"", (long long)ts.tv_sec, ts.tv_nsec / 1000000,
         c->h->worker);
  conn_log_str(method);
  printf("\",\"path\":\"");
  conn_log_str(path);
  printf("\",\"status\":%d,\"bytes\":%zu", status, bytes);
  if (error) {
    printf(",\"error\":\"");
    conn_log_str((m0_str){error, strlen(error)});
    putchar('"');
  }
  printf("}\n");
}

/* m0_respond_stream on the loop: the connection becomes a stream. */
static int conn_stream_begin(void *ctx, const char *channel) {
  m0__conn *c = ctx;
  m0__http *h = c->h;
  c->stream = true;
  snprintf(c->channel, sizeof c->channel, "%s", channel);
  c->snext = h->streams;
  c->sprev = NULL;
  if (h->streams) h->streams->sprev = c;
  h->streams = c;
  h->nstreams++;
  c->last_write = uv_now(h->uv);
  uv_tcp_keepalive(&c->tcp, 1, 60); /* a peer that vanished is found */
  return 0;
}

/* The request went to the pool: read and parse nothing more until it comes
 * back, so answers leave in order. */
static void conn_wait(m0__conn *c, bool last) {
  c->waiting = true;
  c->close_on_complete = last;
  c->phase = PHASE_WAIT;
  uv_read_stop((uv_stream_t *)&c->tcp);
}

/* Answers the request the parser just completed, into the target queue. */
static void conn_dispatch(m0__conn *c, const char *buf) {
  m0__http *h = c->h;
  m0__parser *p = &c->p;
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
  req.body = (m0_str){p->body, p->body_len};
  req.trace_hi = p->trace_hi;
  req.trace_lo = p->trace_lo;

  c->nreq++;
  bool last = !p->keep_alive || h->draining || c->close_after ||
              (h->max_keepalive_requests > 0 && c->nreq >= (uint64_t)h->max_keepalive_requests);
  m0_response res;
  m0__response_init(&res, conn_target(c), &h->date, p->version_minor, p->is_head, last);
  res.stream_begin = conn_stream_begin;
  res.stream_ctx = c;

  const m0_app *app = h->app;
  m0__current_trace = (m0__trace_id){p->trace_hi, p->trace_lo};
  if (h->metrics && req.path.n == strlen(h->metrics_path) && !memcmp(req.path.p, h->metrics_path, req.path.n)) {
    h->metrics(h, &res);
  } else if (!(app->before_request && app->before_request(h->state, &req, &res))) {
    if (app->routes) {
      m0__match m;
      m0__views_match(app->routes, app->nroutes, req.method, req.path, &m);
      if (m.kind == M0__VIEW_FOUND) {
        req.params = m.params;
        req.nparams = m.nparams;
        if (h->defer && !(m.route->flags & M0_ON_LOOP) &&
            h->defer(h, c, &req, (int)(m.route - app->routes), p->is_head, last) == 0) {
          m0__current_trace = (m0__trace_id){0, 0};
          conn_wait(c, last);
          return;
        }
        m.route->view(h->state, &req, &res);
      } else if (m.kind == M0__VIEW_NOT_FOUND) {
        m0__respond_status(&res, 404, NULL);
      } else {
        m0__respond_status(&res, m.kind == M0__VIEW_OPTIONS ? 204 : 405, m.allow);
      }
    } else if (h->defer && h->defer(h, c, &req, -1, p->is_head, last) == 0) {
      m0__current_trace = (m0__trace_id){0, 0};
      conn_wait(c, last);
      return;
    } else {
      app->handle(h->state, &req, &res);
    }
  }
  m0__current_trace = (m0__trace_id){0, 0};
  if (!res.done) {
    fprintf(stderr, "m0: loop %d: the view for %.*s %.*s returned without answering; sent 500\n",
            h->worker, (int)req.method.n, req.method.p, (int)req.path.n, req.path.p);
    m0__respond_status(&res, 500, NULL);
  }
  h->stats.requests++;
  if (h->access_log) conn_access_log(c, req.method, req.path, res.status, res.head ? 0 : res.body_len, NULL);
  if (last) c->close_after = true;
}

/* Answers a request that cannot be read, then closes. */
static void conn_error(m0__conn *c, const char *buf, int status, const char *why) {
  m0__http *h = c->h;
  m0_response res;
  m0__response_init(&res, conn_target(c), &h->date, 1, false, true);
  m0__respond_status(&res, status, NULL);
  h->stats.errors_4xx++;
  c->close_after = true;
  c->linger = true;
  if (h->access_log) {
    const m0__parser *p = &c->p;
    m0_str method = {buf && p->method.len ? buf + p->method.off : "", buf ? p->method.len : 0};
    m0_str target = {buf && p->url.len ? buf + p->url.off : "", buf ? p->url.len : 0};
    const char *q = target.n ? memchr(target.p, '?', target.n) : NULL;
    if (q) target.n = (size_t)(q - target.p);
    conn_access_log(c, method, target, status, res.body_len, why ? why : "");
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
        m0__outq_append(conn_target(c), cont, sizeof cont - 1);
      }
      break;
    }
    if (r == M0__PARSE_ERROR) {
      conn_error(c, buf, c->p.status, c->p.why);
      break;
    }
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
     * requests could queue any amount). */
    if (!c->writing && m0__outq_bytes(&h->scratch) > CONN_OUT_HIGH) {
      conn_flush(c);
      if (c->closing) break;
    }
    if (conn_queued(c) > CONN_OUT_HIGH) {
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
  if (c->phase == PHASE_LINGER || c->close_after || c->stream) return; /* discarding */
  if (buf->base == c->h->rbuf) {
    c->parse_off = 0;
    conn_process(c, c->h->rbuf, (size_t)nread);
  } else {
    c->in_len += (size_t)nread;
    conn_process(c, c->in, c->in_len);
  }
  conn_flush(c);
}

/* ---- the server ------------------------------------------------------ */

int m0__http_init(m0__http *h) {
  h->rbuf = malloc(M0__RBUF_SIZE);
  memset(&h->scratch, 0, sizeof h->scratch);
  memset(&h->spans, 0, sizeof h->spans);
  return h->rbuf ? 0 : UV_ENOMEM;
}

void m0__http_fini(m0__http *h) {
  free(h->rbuf);
  h->rbuf = NULL;
  m0__outq_free(&h->scratch);
  m0__span_pool_fini(&h->spans);
}

int m0__http_adopt(m0__http *h, int fd) {
  m0__conn *c = calloc(1, sizeof *c);
  if (!c) {
    close(fd);
    return UV_ENOMEM;
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
    return rv;
  }
  uv_tcp_nodelay(&c->tcp, 1);
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

void m0__http_complete(m0__http *h, m0__conn *c, const void *resp, size_t n) {
  c->waiting = false;
  if (c->zombie) {
    conn_release(c);
    return;
  }
  if (c->closing) return;
  h->stats.requests++;
  if (m0__outq_append(conn_target(c), resp, n) != 0) {
    conn_close(c);
    return;
  }
  if (c->close_on_complete || h->draining) c->close_after = true;
  c->phase = PHASE_IDLE;
  c->deadline = uv_now(h->uv) + h->keepalive_timeout_ms;
  if (!c->close_after && conn_queued(c) > CONN_OUT_HIGH) {
    /* The client is not reading its answers: take no more of its requests
     * (reading stopped when this one went to the pool) until it catches up. */
    c->paused = true;
    c->deadline = uv_now(h->uv) + h->body_timeout_ms;
  } else if (!c->close_after) {
    conn_process(c, c->in, c->in_len); /* requests that came while it waited */
    if (!c->closing && !c->close_after && !c->waiting && !c->paused)
      uv_read_start((uv_stream_t *)&c->tcp, conn_alloc, conn_on_read);
  }
  conn_flush(c);
}

/* Appends an event to one stream, unless its queue is full. */
static bool conn_stream_push(m0__conn *c, const char *ev, size_t n) {
  if (c->closing || c->close_after) return true;
  size_t queued = m0__outq_bytes(&c->q[0]) + m0__outq_bytes(&c->q[1]);
  if (queued + n > M0__STREAM_QUEUE) return false;
  if (m0__outq_append(conn_target(c), ev, n) != 0) return false;
  c->last_write = uv_now(c->h->uv);
  conn_flush(c);
  return true;
}

uint64_t m0__http_publish(m0__http *h, const char *channel, size_t chlen, uint64_t id, const void *frame,
                          size_t flen) {
  if (!h->streams) return 0;
  char small[1024];
  size_t cap = flen + 32;
  char *ev = cap <= sizeof small ? small : malloc(cap);
  if (!ev) return (uint64_t)h->nstreams;
  int n = snprintf(ev, cap, "id: %llu\n", (unsigned long long)id);
  memcpy(ev + n, frame, flen);
  memcpy(ev + n + flen, "\n\n", 2);
  size_t len = (size_t)n + flen + 2;
  uint64_t dropped = 0;
  m0__conn *next;
  for (m0__conn *c = h->streams; c; c = next) {
    next = c->snext;
    if (strlen(c->channel) != chlen || memcmp(c->channel, channel, chlen) != 0) continue;
    if (!conn_stream_push(c, ev, len)) dropped++;
  }
  if (ev != small) free(ev);
  h->stats.frames_dropped += dropped;
  return dropped;
}

void m0__http_sweep(m0__http *h) {
  uint64_t now = uv_now(h->uv);
  static const char beat[] = ": beat\n\n";
  if (h->heartbeat_ms) {
    m0__conn *next;
    for (m0__conn *c = h->streams; c; c = next) {
      next = c->snext;
      if (now - c->last_write >= h->heartbeat_ms && !conn_stream_push(c, beat, sizeof beat - 1))
        c->last_write = now; /* full: a beat is pointless; try again a period later */
    }
  }
  m0__conn *next;
  for (m0__conn *c = h->conns; c; c = next) {
    next = c->next;
    if (now < c->deadline || c->waiting) continue;
    if ((c->phase == PHASE_HEAD || c->phase == PHASE_BODY) && !c->writing && !c->paused) {
      h->stats.timeouts++;
      conn_error(c, c->in, 408, c->phase == PHASE_HEAD ? "header timeout" : "body timeout");
      conn_flush(c);
    } else {
      conn_close(c); /* idle keep-alive, silent fresh connection, linger over, stuck writer */
    }
  }
}

void m0__http_drain(m0__http *h) {
  h->draining = true;
  m0__conn *next;
  /* Streams first: a final event that says why, with a retry hint, then the
   * server closes them. The queue cap does not apply to this one. */
  static const char bye[] = "event: m0.closing\ndata: {\"reason\":\"the server is going away\"}\nretry: 1000\n\n";
  for (m0__conn *c = h->streams; c; c = next) {
    next = c->snext;
    if (c->closing) continue;
    m0__outq_append(conn_target(c), bye, sizeof bye - 1);
    conn_stream_forget(c);
    c->close_after = true;
    conn_flush(c);
  }
  uint64_t fresh_by = uv_now(h->uv) + h->drain_fresh_ms;
  for (m0__conn *c = h->conns; c; c = next) {
    next = c->next;
    if (c->phase == PHASE_FRESH && h->drain_fresh_ms) {
      /* Accepted just before the drain, its request may be on its way (closed
       * now, it would be lost): the sweep closes it if none comes in time. */
      if (fresh_by < c->deadline) c->deadline = fresh_by;
    } else if (m0__parser_idle(&c->p) && !c->writing && !c->paused && !c->waiting) conn_close(c);
    else c->close_after = c->close_after || c->writing; /* else: Connection: close on its answer */
  }
}
