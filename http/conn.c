/* The connection state machine of the per-loop server: accept, read, parse,
 * answer (on the loop or through the pool), write, time out, close, drain.
 * A parsed request's way to its answer (and every way out of http/: the
 * loop's ops table) is in http/dispatch.c, the writing in http/write.c,
 * streams in http/stream.c, the access log in http/accesslog.c.
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
 * - Output (http/write.c): built in the loop's shared scratch queue, written
 *   at the end of the callback. A client that does not read stops being read
 *   from (backpressure) once its queue passes CONN_OUT_HIGH.
 * - Timeouts are deadlines checked by one sweep timer per loop, so a request
 *   costs a store, not a timer restart. Each deadline is set once, when its
 *   phase begins.
 * - Bytes move through the loop's transport (http/io.h: libuv's, or
 *   io_uring's), one table for every connection of the loop.
 * - Close: the transport's close, and the memory is freed in its callback
 *   (m0__conn_closed) only; a
 *   connection closed while its request is with the pool is a zombie, freed
 *   when the answer comes back, since the pool still holds its pointer.
 */
#include "http/conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/errors.h"
#include "http/accesslog.h"
#include "http/conn_state.h"
#include "http/h2.h"
#include "http/io.h"
#include "http/query.h"
#include "http/stream.h"
#include "http/tls_io.h"
#include "http/websocket.h"
#include "http/views.h"

#define CONN_ROOM 4096          /* free bytes wanted in a connection's own buffer */
#define CONN_OUT_HIGH (1u << 20) /* queued output beyond which we stop reading */
#define CONN_LINGER_MS 1000      /* reading-and-discarding after an error answer */
/* At the drain, a keep-alive connection answered this recently may have its
 * next request on the way (a client that sends back to back): it gets the
 * fresh connections' grace; one idle longer is closed at once. A second, not
 * 100 ms: beside stress-ng a client that sends back to back took longer
 * than 100 ms between an answer and its next request, which met the close
 * (test_reload under ASan: 6 of 57,000 requests needed RFC 9112's retry). */
#define CONN_DRAIN_RECENT_MS 1000

static void conn_process(m0__conn *c, char *buf, size_t len);

/* ---- lifecycle ------------------------------------------------------- */

static void conn_release(m0__conn *c) {
  m0__http *h = c->h;
  m0__parser_fini(&c->p);
  if (c->ws) m0__ws_free(c->ws);
  if (c->h2) m0__h2_free(c->h2);
  free(c->in);
  m0__outq_free(&c->q[0]);
  m0__outq_free(&c->q[1]);
  free(c);
  h->nconns--;
  h->stats.closed++;
  if (h->ops->closed) h->ops->closed(h);
}

void m0__conn_closed(m0__conn *c) {
  if (c->waiting) c->zombie = true; /* the pool still holds a pointer to it */
  else conn_release(c);
}

void m0__conn_close(m0__conn *c) {
  if (c->closing) return;
  c->closing = true;
  m0__http *h = c->h;
  if (c->ws) m0__ws_gone(c->ws); /* its on_close, before its subscriptions go */
  m0__stream_forget(c);
  if (c->prev) c->prev->next = c->next;
  else h->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  if (c->writer) h->ops->writer_gone(h, c); /* its writer stops here, and says so to the application */
  m0__conn_write_close(c); /* a file piece may be waiting for the socket */
  c->io_ops->close(c);
}

/* The last response is written: close now, or linger after an error so the
 * client reads our answer instead of a reset. */
void m0__conn_finish(m0__conn *c) {
  if (c->closing) return;
  if (!c->linger || c->phase == PHASE_LINGER || c->eof) {
    m0__conn_close(c);
    return;
  }
  c->phase = PHASE_LINGER;
  c->deadline = uv_now(c->h->uv) + CONN_LINGER_MS;
  if (c->io_ops->shutdown(c) != 0) m0__conn_close(c);
}

/* ---- requests -------------------------------------------------------- */

/* The request's answer is begun: its latency and status class (status < 0:
 * counted already, a writer's at its head), by its route. */
void m0__conn_latency(m0__conn *c, int status) {
  m0__http *h = c->h;
  m0__latency *row = h->latency ? h->latency[c->route] : NULL;
  if (!row) return;
  m0__latency_add(row, m0__latency_now_ns() - c->t0_ns);
  if (status >= 0) m0__latency_status(row, status);
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
        m0__conn_close(c);
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

/* A request is answered: the connection idles until the next, unless it
 * became a stream, or its answers pile up. false when parsing stops here. */
static bool conn_next(m0__conn *c) {
  m0__http *h = c->h;
  c->phase = PHASE_IDLE;
  if (c->stream) {
    c->deadline = UINT64_MAX; /* a stream has no timeout; the heartbeat finds dead peers */
    return false;
  }
  c->deadline = uv_now(h->uv) + h->keepalive_timeout_ms;
  /* The answers of one read collect in the scratch while nothing is in
   * flight: past the mark, write them now, so the rest waits in q[0] and
   * what follows counts against the mark below (else one read of pipelined
   * requests could queue any amount). A queue whose reference slots are
   * all taken counts as full too: the next body would be copied (a file
   * piece read into memory). */
  if (!c->writing && (m0__outq_bytes(&h->scratch) > CONN_OUT_HIGH || h->scratch.nrefs == M0__OUT_REFS)) {
    m0__conn_flush(c);
    if (c->closing) return false;
  }
  if (m0__conn_queued(c) > CONN_OUT_HIGH || (c->writing && c->q[1 - c->qi].nrefs == M0__OUT_REFS)) {
    /* The client is not reading its answers: stop reading its requests. */
    c->paused = true;
    c->io_ops->read_stop(c);
    c->deadline = uv_now(h->uv) + h->body_timeout_ms;
    return false;
  }
  return true;
}

/* Deadlines follow the phase of a request begun; each is set once, when
 * its phase begins. */
static void conn_deadline(m0__conn *c) {
  m0__http *h = c->h;
  if (c->close_after || c->waiting || m0__parser_idle(&c->p)) return;
  if (!c->p.headers_done && c->phase != PHASE_HEAD) {
    if (c->phase != PHASE_FRESH) c->deadline = uv_now(h->uv) + h->header_timeout_ms;
    c->phase = PHASE_HEAD;
  } else if (c->p.headers_done && c->phase != PHASE_BODY) {
    c->phase = PHASE_BODY;
    c->deadline = uv_now(h->uv) + h->body_timeout_ms;
  }
}

/* Parses and answers every whole request in buf[c->parse_off, len). */
static void conn_process(m0__conn *c, char *buf, size_t len) {
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
    m0__conn_dispatch(c, buf);
    m0__parser_next(&c->p);
    c->continued = false;
    if (c->waiting || !conn_next(c)) break;
  }
  conn_deadline(c);
  conn_keep(c, buf, len, off);
}

void m0__conn_unpause(m0__conn *c) {
  c->paused = false;
  conn_process(c, c->in, c->in_len);
  if (!c->closing && !c->paused && !c->close_after && !c->waiting && c->io_ops->read_start(c) != 0) m0__conn_close(c);
}

/* ---- reading --------------------------------------------------------- */

/* Room for the next read: the loop's buffer, or after the bytes a partial
 * request keeps ({NULL, 0}: no memory). */
void m0__conn_alloc(m0__conn *c, char **base, size_t *len) {
  if (c->in_len == 0 || c->phase == PHASE_LINGER) {
    *base = c->h->rbuf;
    *len = M0__RBUF_SIZE;
    return;
  }
  if (c->in_cap - c->in_len < CONN_ROOM) {
    size_t cap = c->in_len + 4 * CONN_ROOM;
    char *nb = realloc(c->in, cap);
    if (!nb) {
      *base = NULL;
      *len = 0;
      return;
    }
    c->in = nb;
    c->in_cap = cap;
  }
  *base = c->in + c->in_len;
  *len = c->in_cap - c->in_len;
}

/* Bytes that landed elsewhere than m0__conn_alloc said (a transport's own
 * buffer) go after what a partial request keeps. false: no memory. */
static bool conn_append(m0__conn *c, const char *buf, size_t n) {
  if (c->in_cap - c->in_len < n) {
    size_t cap = c->in_len + n + CONN_ROOM;
    char *nb = realloc(c->in, cap);
    if (!nb) return false;
    c->in = nb;
    c->in_cap = cap;
  }
  memcpy(c->in + c->in_len, buf, n);
  c->in_len += n;
  return true;
}

void m0__conn_read(m0__conn *c, char *buf, ssize_t nread) {
  _Atomic uint64_t *busy = c->h->busy_since;
  if (busy && !atomic_load_explicit(busy, memory_order_relaxed))
    atomic_store_explicit(busy, uv_now(c->h->uv) | 1, memory_order_relaxed);
  if (nread == 0) return;
  if (nread < 0) {
    /* EOF: requests already read were answered; a half-read one cannot be.
     * Close once what is queued is written: answers still on their way
     * out (an error's too, after which there is nothing to linger for) go
     * first. A transport without try_write (io_uring) has them in flight
     * far more often than libuv, whose write took them at once. */
    if (nread == M0__IO_EOF && (c->writing || (m0__parser_idle(&c->p) && c->waiting && !c->linger))) {
      c->close_on_complete = c->close_after = true;
      c->eof = true;
    } else m0__conn_close(c);
    return;
  }
  if (c->h2) { /* draining too: its answers need the client's WINDOW_UPDATEs */
    m0__h2_read(c, buf, (size_t)nread);
    m0__conn_flush(c);
    return;
  }
  if (c->phase == PHASE_LINGER || c->close_after) return; /* discarding */
  if (c->ws) {
    m0__ws_read(c->ws, buf, (size_t)nread);
    return;
  }
  if (c->stream) return; /* a stream reads nothing more */
  if (c->h->http2 && c->phase == PHASE_FRESH && m0__h2_begin(c, buf, (size_t)nread)) return;
  if (c->in && buf == c->in + c->in_len) {
    c->in_len += (size_t)nread;
    conn_process(c, c->in, c->in_len);
  } else if (c->in_len == 0) { /* the loop's buffer, or a transport's own */
    c->parse_off = 0;
    conn_process(c, buf, (size_t)nread);
  } else if (conn_append(c, buf, (size_t)nread)) {
    conn_process(c, c->in, c->in_len);
  } else {
    m0__conn_close(c);
    return;
  }
  m0__conn_flush(c);
}

/* ---- the server ------------------------------------------------------ */

/* A server given no table: every seam absent (http/conn.h). */
static const m0__http_ops conn_no_ops;

int m0__http_init(m0__http *h, uv_loop_t *uv, const m0__http_config *cfg, const m0__http_ops *ops, void *owner) {
  h->uv = uv;
  h->ops = ops ? ops : &conn_no_ops;
  h->ws_ops = &m0__ws_stream_ops;
  h->res_ops = m0__conn_res_ops(h->ops);
  h->owner = owner;
  h->app = cfg->app;
  h->state = cfg->state;
  h->worker = cfg->worker;
  h->lim = cfg->lim;
  h->header_timeout_ms = cfg->header_timeout_ms;
  h->body_timeout_ms = cfg->body_timeout_ms;
  h->keepalive_timeout_ms = cfg->keepalive_timeout_ms;
  h->drain_fresh_ms = cfg->drain_fresh_ms;
  h->max_keepalive_requests = cfg->max_keepalive_requests;
  h->heartbeat_ms = cfg->heartbeat_ms;
  h->access_log = cfg->access_log;
  h->pool = cfg->pool && h->ops->defer;
  h->metrics_path = cfg->metrics_path && cfg->metrics_path[0] && h->ops->metrics ? cfg->metrics_path : NULL;
  h->metrics_len = h->metrics_path ? strlen(h->metrics_path) : 0;
  h->proxies = cfg->proxies;
  h->history_max = cfg->history_max;
  h->history_bytes_max = cfg->history_bytes_max;
  h->ws_max_message = cfg->ws_max_message;
  h->busy_since = cfg->busy_since;
  h->chan_lines = cfg->chan_lines;
  h->latency = cfg->latency;
  h->figures = cfg->figures;
  h->http2 = cfg->http2;
  h->https_port = cfg->https_port;
  h->rbuf = malloc(M0__RBUF_SIZE);
  memset(&h->scratch, 0, sizeof h->scratch);
  memset(&h->spans, 0, sizeof h->spans);
  if (!h->rbuf) return M0__ENOMEM;
  /* HTTPS: libuv's socket under the TLS engine, whatever --io asked (no
   * ring is made: its handles would outlive an m0__io_fini here). */
  int rv = m0__io_init(h, cfg->tls ? M0__IO_EPOLL : (m0__io_mode)cfg->io, NULL, 0);
  if (rv == 0 && cfg->tls) rv = m0__io_tls_init(h, cfg->tls);
  return rv;
}

void m0__http_fini(m0__http *h) {
  h->latency = NULL; /* the loop's (actors/loop.c frees it); the shared page's rows stay */
  if (h->io == &m0__io_tls_ops) m0__io_tls_fini(h);
  m0__io_fini(h);
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
  socklen_t len = sizeof ss;
  c->peer[0] = 0;
  c->peer_port = 0;
  int fd = c->io_ops->fd(c);
  if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &len) != 0) return;
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

int m0__http_adopt(m0__http *h, int fd, bool plain) {
  m0__conn *c = calloc(1, sizeof *c);
  if (!c) {
    close(fd);
    return M0__ENOMEM;
  }
  c->h = h;
  c->plain = plain;
  c->io_ops = plain ? &m0__io_uv_ops : h->io;
  int rv = c->io_ops->open(c, fd); /* the descriptor is the transport's from here */
  if (rv == 0) rv = c->io_ops->read_start(c);
  if (rv != 0) {
    c->closing = true;
    h->nconns++; /* m0__conn_closed counts it out again */
    c->io_ops->close(c);
    return M0__ETRANSPORT; /* the socket could not be opened or read */
  }
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
void m0__conn_answered(m0__conn *c, bool ok) {
  m0__http *h = c->h;
  if (!ok) {
    m0__conn_close(c);
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
    if (!c->closing && !c->close_after && !c->waiting && !c->paused && c->io_ops->read_start(c) != 0) m0__conn_close(c);
  }
  m0__conn_flush(c);
}

/* Whether a waiting connection can still take its answer (a zombie's memory
 * is released here: nobody else holds it now). */
bool m0__conn_unwait(m0__conn *c, int status) {
  c->waiting = false;
  if (c->zombie) {
    conn_release(c);
    return false;
  }
  if (c->closing) return false;
  c->h->stats.requests++;
  m0__conn_latency(c, status);
  return true;
}

void m0__http_abort(m0__http *h, m0__conn *c) {
  if (c->h2_proxy) m0__h2_complete(c, NULL, 0, -1, 0, 0); /* an HTTP/2 stream's: reset */
  else m0__conn_close(c);
}

/* A response written in pieces (c->writer) waits for no request, so its
 * connection's deadline and last_write are free: they hold when the bytes
 * it has queued last moved (the socket took some) and how many were left
 * then. A client that takes none of them within the body timeout (the
 * bound on a client that does not read its answers, as conn_next's pause)
 * is stuck: closed, like nginx's send_timeout. One with nothing queued is
 * waiting on its writer, not stuck. */
static bool conn_stuck_writer(m0__conn *c, uint64_t now) {
  size_t left = c->writing ? c->io_ops->queued(c) + m0__conn_queued(c) : 0;
  if (left == 0 || left != c->last_write) {
    c->last_write = left;
    c->deadline = now + c->h->body_timeout_ms;
    return false;
  }
  return now >= c->deadline;
}

void m0__http_sweep(m0__http *h) {
  uint64_t now = uv_now(h->uv);
  if (h->heartbeat_ms) m0__stream_beat(h, now);
  m0__stream_graph(h, now);
  m0__conn *next;
  for (m0__conn *c = h->conns; c; c = next) {
    next = c->next;
    if (c->waiting && c->writer && !c->closing && conn_stuck_writer(c, now)) {
      h->stats.timeouts++;
      m0__conn_close(c); /* its writer gone: a stream cut, its instance told (actors/streamed.c) */
      continue;
    }
    if (c->h2 && !c->closing && m0__h2_tick(c, now)) continue; /* HTTP/2: held DATA; GOAWAY when idle */
    if (c->phase == PHASE_IDLE && !c->writing && c->io_ops->rest) c->io_ops->rest(c);
    if (now < c->deadline || c->waiting) continue;
    if ((c->phase == PHASE_HEAD || c->phase == PHASE_BODY) && !c->writing && !c->paused) {
      h->stats.timeouts++;
      conn_error(c, c->in, 408, c->phase == PHASE_HEAD ? "header timeout" : "body timeout");
      m0__conn_flush(c);
    } else {
      m0__conn_close(c); /* idle keep-alive, silent fresh connection, linger over, stuck writer */
    }
  }
}

void m0__conn_keepalive(m0__conn *c) {
  int fd = c->io_ops->fd(c), on = 1, idle = 60;
  if (fd < 0) return;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
}

/* Whether bytes the loop has not read yet wait in the kernel for c: the
 * client's next request is already on its way. */
static bool conn_input_waits(m0__conn *c) {
  if (c->io_ops->input_waits) return c->io_ops->input_waits(c);
  int fd = c->io_ops->fd(c), n = 0;
  return fd >= 0 && ioctl(fd, FIONREAD, &n) == 0 && n > 0;
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
    if (c->h2) { /* GOAWAY with the last stream id: its streams were answered */
      m0__h2_drain(c);
      m0__conn_flush(c);
      continue;
    }
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
      m0__conn_close(c);
    } else {
      c->close_after = c->close_after || c->writing; /* else: Connection: close on its answer */
    }
  }
}
