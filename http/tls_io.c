/* The HTTPS transport (http/io.h's third table): libuv's socket, as
 * http/io_uv.c uses it, with the TLS engine (http/tls.h) between the socket
 * and the connection. A loop whose server was given a TLS context
 * (m0__http_config.tls) uses it for every connection: one listener per
 * host, so a loop is all HTTPS or all plain.
 *
 * Design notes
 * - Reading: ciphertext lands where the connection asked (m0__conn_alloc),
 *   is copied into the engine at once, then decrypted into a fresh ask and
 *   handed up record by record while the connection reads. A connection
 *   that stops reading leaves the rest in the engine (ciphertext, as the
 *   kernel would hold it); read_start lists it on the loop's ready list and
 *   an idle handle hands it up at the next turn (never inside read_start).
 * - Writing: a write encrypts all of its iov at once (the connection's
 *   memory is free again before write returns) and the engine's output is
 *   written at once where the socket takes it (uv_try_write), its rest by
 *   one uv_write at a time, from a buffer of its own; the handshake,
 *   tickets, alerts and close_notify go the same way. The connection's
 *   write is told done (m0__conn_wrote, its plaintext bytes) when the
 *   uv_write that carried the last of its ciphertext completes, or, when
 *   the socket took it all at once, from an idle handle at the next turn
 *   (never inside write). A uv_write for every answer cost one
 *   epoll_ctl each: libuv re-arms the socket at each write's end.
 * - No try_write: what the socket takes now is ciphertext, not the
 *   connection's bytes. plain is false: files are not sendfile'd here.
 * - close: libuv ends a write in flight (ECANCELED, told to the connection
 *   when it carried its bytes) before the close callback, which frees the
 *   engine and then calls m0__conn_closed.
 * Everything here runs on the connection's loop. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/errors.h"
#include "http/conn_state.h"
#include "http/io.h"
#include "http/tls.h"
#include "http/tls_io.h"

typedef struct tls_loop {
  uv_idle_t idle;   /* runs while the ready list is not empty */
  uv_idle_t done;   /* runs while the written list is not empty */
  m0__tls_ctx *x;   /* the process's, shared by its loops */
  m0__conn *ready;  /* connections with bytes to hand up at the next turn */
  m0__conn *written; /* connections whose write the socket took whole, to be told */
} tls_loop;

typedef struct m0__tls_conn {
  m0__tls *t;
  char *out;             /* the ciphertext of the uv_write in flight, or NULL */
  size_t owed;           /* the connection's write: its plaintext bytes */
  bool conn_write;       /* the connection has a write not yet told done */
  bool carried;          /* the uv_write in flight carries the last of it */
  bool reading, listed;
  bool told_later;       /* in the loop's written list */
  m0__conn *rnext;       /* in the loop's ready list */
  m0__conn *wnext;       /* in its written list */
} m0__tls_conn;

static m0__conn *tls_conn(void *handle) { return (m0__conn *)handle; } /* the slot is first, tcp first in it */
static uv_stream_t *tls_stream(const m0__conn *c) { return (uv_stream_t *)&c->io.tls.uv.tcp; }
static m0__tls_conn *tls_state(const m0__conn *c) { return c->io.tls.s; }
static tls_loop *tls_loop_of(const m0__conn *c) { return c->h->io_ctx; }

static void tls_on_write(uv_write_t *req, int status);
static void tls_on_done(uv_idle_t *idle);

/* Writes what the engine has for the socket, unless a write is in flight
 * (its completion comes back here). 0, or M0__ETRANSPORT / M0__ENOMEM. */
static int tls_flush(m0__conn *c) {
  m0__tls_conn *s = tls_state(c);
  size_t n = m0__tls_pending(s->t);
  if (s->out || n == 0 || c->closing) return 0;
  if (!(s->out = malloc(n))) return M0__ENOMEM;
  n = m0__tls_take(s->t, s->out, n);
  uv_buf_t b = uv_buf_init(s->out, (unsigned)n);
  int took = uv_try_write(tls_stream(c), &b, 1);
  if (took == (int)n) { /* all of it: the connection's write, if it was in it, is told at the next turn */
    free(s->out);
    s->out = NULL;
    if (s->conn_write && !s->told_later) {
      tls_loop *l = tls_loop_of(c);
      s->told_later = true;
      s->wnext = l->written;
      l->written = c;
      uv_idle_start(&l->done, tls_on_done);
    }
    return 0;
  }
  if (took > 0) b = uv_buf_init(s->out + took, (unsigned)(n - (size_t)took));
  c->io.tls.uv.wreq.data = c;
  if ((took < 0 && took != UV_EAGAIN) || uv_write(&c->io.tls.uv.wreq, tls_stream(c), &b, 1, tls_on_write) != 0) {
    free(s->out);
    s->out = NULL;
    return M0__ETRANSPORT;
  }
  s->carried = s->conn_write;
  return 0;
}

/* A failure: the connection's write, carried or still waiting behind
 * this one, is told (it may not wait for ever: a close cancels what is in
 * flight, and only that would have told it); else the connection closes. */
static void tls_write_failed(m0__conn *c, int err) {
  m0__tls_conn *s = tls_state(c);
  bool owed = s->conn_write;
  s->conn_write = false;
  if (owed) m0__conn_wrote(c, err);
  else if (!c->closing) m0__conn_close(c);
}

static void tls_on_write(uv_write_t *req, int status) {
  m0__conn *c = req->data;
  m0__tls_conn *s = tls_state(c);
  bool tell = s->carried;
  free(s->out);
  s->out = NULL;
  s->carried = false;
  if (status < 0) {
    tls_write_failed(c, status);
    return;
  }
  if (tell) s->conn_write = false;
  int rv = tls_flush(c);
  if (rv != 0) {
    if (tell) m0__conn_wrote(c, rv);
    else tls_write_failed(c, rv);
    return;
  }
  if (tell) m0__conn_wrote(c, (ssize_t)s->owed);
}

/* The writes the socket took whole since the last turn, told at the
 * start of this one (as tls_on_write tells one a uv_write carried, from
 * libuv's pending phase: an idle handle keeps the poll from blocking, as
 * that queue does). */
static void tls_on_done(uv_idle_t *idle) {
  tls_loop *l = idle->data;
  m0__conn *c = l->written;
  l->written = NULL;
  uv_idle_stop(idle);
  for (m0__conn *next; c; c = next) {
    m0__tls_conn *s = tls_state(c);
    next = s->wnext;
    s->wnext = NULL;
    if (!s->told_later) continue; /* closed by one told before it: told at its close */
    s->told_later = s->conn_write = false;
    int rv = tls_flush(c);
    m0__conn_wrote(c, rv != 0 ? rv : (ssize_t)s->owed);
  }
}

/* Hands decrypted bytes up while the connection reads; writes what the
 * handshake has to say. */
static void tls_deliver(m0__conn *c) {
  m0__tls_conn *s = tls_state(c);
  while (s->reading && !c->closing) {
    char *base;
    size_t len;
    m0__conn_alloc(c, &base, &len);
    if (!base) {
      m0__conn_close(c);
      return;
    }
    long r = m0__tls_read(s->t, base, len);
    if (r == M0__TLS_AGAIN) break;
    if (r < 0) { /* EOF: the close_notify; FAILED: the alert goes if the socket takes it now */
      if (r == M0__TLS_FAILED) {
        /* All of what waits, in order: a ticket made by the same read goes
         * before the alert (the first bytes alone were a cut record). */
        char last[4096];
        size_t n = m0__tls_take(s->t, last, sizeof last);
        uv_buf_t b = uv_buf_init(last, (unsigned)n);
        if (n && !s->out) (void)uv_try_write(tls_stream(c), &b, 1);
      }
      m0__conn_read(c, NULL, r == M0__TLS_EOF ? M0__IO_EOF : UV_EPROTO);
      return;
    }
    m0__conn_read(c, base, r);
  }
  if (!c->closing && tls_flush(c) != 0) m0__conn_close(c);
}

static void tls_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  char *base;
  size_t len;
  m0__conn_alloc(tls_conn(handle), &base, &len);
  *buf = uv_buf_init(base, (unsigned)len);
}

static void tls_on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  m0__conn *c = tls_conn(stream);
  if (nread == 0) return;
  if (nread < 0) {
    m0__conn_read(c, NULL, nread);
    return;
  }
  if (m0__tls_in(tls_state(c)->t, buf->base, (size_t)nread) != 0) {
    m0__conn_close(c);
    return;
  }
  tls_deliver(c);
}

static void tls_on_idle(uv_idle_t *idle) {
  tls_loop *l = idle->data;
  m0__conn *c = l->ready;
  l->ready = NULL;
  uv_idle_stop(idle);
  while (c) {
    m0__conn *next = tls_state(c)->rnext;
    tls_state(c)->listed = false;
    tls_state(c)->rnext = NULL;
    if (!c->closing) tls_deliver(c);
    c = next;
  }
}

/* Out of the loop's lists: a closed connection's write is told at its
 * close (tls_on_close). */
static void tls_unlist(m0__conn *c) {
  m0__tls_conn *s = tls_state(c);
  for (m0__conn **p = &tls_loop_of(c)->ready; s->listed && *p; p = &tls_state(*p)->rnext)
    if (*p == c) {
      *p = s->rnext;
      break;
    }
  for (m0__conn **p = &tls_loop_of(c)->written; s->told_later && *p; p = &tls_state(*p)->wnext)
    if (*p == c) {
      *p = s->wnext;
      break;
    }
  s->listed = s->told_later = false;
}

static int tls_open(m0__conn *c, int fd) {
  c->io.tls.s = NULL;
  uv_tcp_init(c->h->uv, &c->io.tls.uv.tcp);
  if (uv_tcp_open(&c->io.tls.uv.tcp, fd) != 0) {
    close(fd); /* not the handle's yet */
    return M0__ETRANSPORT;
  }
  uv_tcp_nodelay(&c->io.tls.uv.tcp, 1);
  m0__tls_conn *s = calloc(1, sizeof *s);
  if (!s || !(s->t = m0__tls_new(tls_loop_of(c)->x))) {
    free(s);
    return M0__ENOMEM;
  }
  c->io.tls.s = s;
  return 0;
}

static int tls_read_start(m0__conn *c) {
  m0__tls_conn *s = tls_state(c);
  if (!s) return M0__ENOMEM;
  s->reading = true;
  if (uv_read_start(tls_stream(c), tls_alloc, tls_on_read) != 0) return M0__ETRANSPORT;
  if (m0__tls_buffered(s->t) && !s->listed) {
    tls_loop *l = tls_loop_of(c);
    s->listed = true;
    s->rnext = l->ready;
    l->ready = c;
    uv_idle_start(&l->idle, tls_on_idle);
  }
  return 0;
}

static void tls_read_stop(m0__conn *c) {
  tls_state(c)->reading = false;
  uv_read_stop(tls_stream(c));
}

static int tls_write(m0__conn *c, const uv_buf_t *iov, unsigned n) {
  m0__tls_conn *s = tls_state(c);
  size_t total = 0;
  for (unsigned i = 0; i < n; i++) {
    if (m0__tls_write(s->t, iov[i].base, iov[i].len) != 0) return M0__ETRANSPORT;
    total += iov[i].len;
  }
  s->owed = total;
  s->conn_write = true;
  int rv = tls_flush(c);
  if (rv != 0) s->conn_write = false;
  return rv;
}

/* The close_notify, then the write side's end after it (libuv keeps the
 * order of the writes queued before the shutdown). */
static int tls_shutdown(m0__conn *c) {
  m0__tls_conn *s = tls_state(c);
  if (m0__tls_ready(s->t) && m0__tls_close_notify(s->t) == 0 && tls_flush(c) != 0) return M0__ETRANSPORT;
  return m0__io_uv_shutdown(c, tls_stream(c));
}

static void tls_on_close(uv_handle_t *handle) {
  m0__conn *c = tls_conn(handle);
  m0__tls_conn *s = tls_state(c);
  if (s && s->conn_write) { /* taken whole by the socket, not told yet: ended as a cancelled write is */
    s->conn_write = false;
    m0__conn_wrote(c, UV_ECANCELED);
  }
  if (s) {
    m0__tls_free(s->t);
    free(s->out);
    free(s);
    c->io.tls.s = NULL;
  }
  m0__conn_closed(c);
}

/* The close_notify before the close, where the socket takes it now (the
 * end of a response with Connection: close): without it the client cannot
 * tell the end from a cut, and OpenSSL 3.5's clients (Python 3.13's) then
 * drop the session instead of resuming it. */
static void tls_notify_close(m0__conn *c) {
  m0__tls_conn *s = tls_state(c);
  if (!s || s->out || !m0__tls_ready(s->t) || m0__tls_pending(s->t) || m0__tls_close_notify(s->t) != 0) return;
  char b[256];
  uv_buf_t buf = uv_buf_init(b, (unsigned)m0__tls_take(s->t, b, sizeof b));
  if (buf.len && uv_try_write(tls_stream(c), &buf, 1) < 0) { /* a peer gone: nothing to tell it */ }
}

static void tls_close(m0__conn *c) {
  tls_notify_close(c);
  if (tls_state(c)) {
    tls_unlist(c);
    tls_state(c)->reading = false;
  }
  uv_close((uv_handle_t *)&c->io.tls.uv.tcp, tls_on_close);
}

static int tls_fd(const m0__conn *c) {
  uv_os_fd_t fd;
  return uv_fileno((const uv_handle_t *)&c->io.tls.uv.tcp, &fd) == 0 ? fd : -1;
}

static size_t tls_queued(const m0__conn *c) {
  size_t n = uv_stream_get_write_queue_size(tls_stream(c));
  return tls_state(c) ? n + m0__tls_pending(tls_state(c)->t) : n;
}

static void tls_rest(m0__conn *c) {
  if (tls_state(c)) m0__tls_rest(tls_state(c)->t);
}

const char *m0__io_tls_alpn(const m0__conn *c) { return m0__tls_alpn(tls_state(c)->t); }

const m0__io_ops m0__io_tls_ops = {
    .name = "tls",
    .plain = false,
    .open = tls_open,
    .read_start = tls_read_start,
    .read_stop = tls_read_stop,
    .write = tls_write,
    .try_write = NULL,
    .shutdown = tls_shutdown,
    .rest = tls_rest,
    .close = tls_close,
    .fd = tls_fd,
    .queued = tls_queued,
};

int m0__io_tls_init(m0__http *h, m0__tls_ctx *x) {
  tls_loop *l = calloc(1, sizeof *l);
  if (!l) return M0__ENOMEM;
  l->x = x;
  uv_idle_init(h->uv, &l->idle);
  uv_idle_init(h->uv, &l->done);
  l->idle.data = l->done.data = l;
  h->io = &m0__io_tls_ops;
  h->io_ctx = l;
  return 0;
}

void m0__io_tls_fini(m0__http *h) {
  free(h->io_ctx); /* its idle handles were closed with the loop's others */
  h->io_ctx = NULL;
}
