/* A connection's output (http/conn.c for the state machine around it).
 *
 * Design notes
 * - Responses are built in the loop's shared scratch queue and written at
 *   the end of the callback (m0__conn_flush); only what the socket does not
 *   take is moved to the connection. Bytes go through the loop's transport
 *   (http/io.h). At most one write in flight:
 *   responses made while it flies go to the second queue, written when the
 *   first completes.
 * - A file piece goes by sendfile(2) straight from the page cache, at most
 *   CONN_SENDFILE_TURN bytes per loop turn; a full socket is waited for by a
 *   poll on a duplicate of its descriptor (the transport has the original),
 *   where the transport's bytes are the socket's (io->plain); else (TLS) by
 *   pread into memory, CONN_FILE_PIECE at a time (conn_pump_read).
 * Everything here runs on the connection's loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "base/errors.h"
#include "http/conn.h"
#include "http/conn_state.h"
#include "http/h2.h"
#include "http/io.h"
#include "http/stream.h"

static void wpoll_on_close(uv_handle_t *h);

/* ---- output ---------------------------------------------------------- */

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
  if (c->writer && status == 0) c->h->ops->writer_progress(c->h, c);
  if (status < 0) {
    m0__conn_close(c);
    return;
  }
  int other = 1 - c->qi;
  if (m0__outq_bytes(&c->q[other])) {
    conn_write(c, other);
    return;
  }
  if (c->h2 && m0__h2_sweep(c)) return; /* HTTP/2: the session's next bytes went (http/h2.c) */
  /* The client caught up: give the queues back, it may idle for long. */
  m0__outq_free(&c->q[0]);
  m0__outq_free(&c->q[1]);
  if (c->subs && !c->close_after) {
    m0__stream_caught_up(c); /* a slow subscriber is told what it lost (http/stream.c) */
    if (c->closing || c->writing) return;
  }
  if (c->close_after && !c->waiting) {
    m0__conn_finish(c);
    return;
  }
  if (c->paused) {
    m0__conn_unpause(c);
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
    if ((fd = c->io_ops->fd(c)) < 0 || (fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) return M0__ESYSTEM;
    m0__wpoll *wp = calloc(1, sizeof *wp);
    if (!wp || uv_poll_init(c->h->uv, &wp->poll, fd) != 0) {
      int rv = wp ? M0__ESYSTEM : M0__ENOMEM;
      free(wp);
      close(fd);
      return rv;
    }
    wp->fd = fd;
    wp->poll.data = c;
    c->wp = wp;
  }
  return uv_poll_start(&c->wp->poll, UV_WRITABLE, conn_on_writable) ? M0__ESYSTEM : 0;
}

/* Writes q[qi] from c->qskip on: what is in memory by the transport, a file
 * piece by sendfile(2) straight from the page cache, in queue order. Each
 * step that moves bytes also moves an idle connection's deadline: a client
 * that reads is not idle, one that stops is closed by the sweep. */
#define CONN_SENDFILE_TURN (4u << 20) /* a file's bytes per loop turn: its other connections wait no longer */

/* A file piece for a transport whose socket bytes are not the
 * connection's (io->plain false: TLS), read into memory: such a transport
 * takes an iov's bytes before its write returns (http/tls_io.c encrypts
 * them), so the buffer goes at once; m0__conn_wrote comes as for any
 * write, and the next piece follows. 0, or an error (the response cannot
 * be whole: the file is shorter than its length said). */
#define CONN_FILE_PIECE (64u << 10)

static int conn_pump_read(m0__conn *c, int fd, uint64_t off, size_t left) {
  size_t n = left < CONN_FILE_PIECE ? left : CONN_FILE_PIECE;
  char *buf = malloc(n);
  if (!buf) return M0__ENOMEM;
  ssize_t r;
  do r = pread(fd, buf, n, (off_t)off);
  while (r < 0 && errno == EINTR);
  uv_buf_t b = uv_buf_init(buf, r > 0 ? (unsigned)r : 0);
  int rv = r > 0 ? c->io_ops->write(c, &b, 1) : M0__ESYSTEM;
  free(buf);
  return rv;
}

static void conn_pump(m0__conn *c) {
  m0__outq *q = &c->q[c->qi];
  size_t sent = 0;
  for (;;) {
    uv_buf_t iov[2 * M0__OUT_REFS + 1];
    int n = m0__outq_iov(q, c->qskip, iov);
    if (n > 0) {
      if (c->io_ops->write(c, iov, (unsigned)n) != 0) conn_written(c, -1);
      return;
    }
    int fd, sock;
    uint64_t off;
    size_t left;
    if (!m0__outq_file_at(q, c->qskip, &fd, &off, &left)) {
      conn_written(c, 0);
      return;
    }
    if (!c->io_ops->plain) { /* TLS: the piece read into memory */
      if (conn_pump_read(c, fd, off, left) != 0) conn_written(c, -1);
      return;
    }
    if ((sock = c->io_ops->fd(c)) < 0) {
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

/* The transport's write completed: n bytes of it written (the rest goes
 * again), or failed. */
void m0__conn_wrote(m0__conn *c, ssize_t n) {
  if (n < 0 || c->closing) {
    conn_written(c, n < 0 ? (int)n : 0);
    return;
  }
  c->qskip += (size_t)n;
  if (c->phase == PHASE_IDLE) c->deadline = uv_now(c->h->uv) + c->h->keepalive_timeout_ms;
  conn_pump(c);
}

/* Writes what this callback put in the scratch queue: directly when the
 * socket takes it all (the common case: no copy, no request object), else
 * the rest is moved to the connection and written asynchronously. */
static void conn_send(m0__conn *c, m0__outq *s);

void m0__conn_flush(m0__conn *c) {
  if (c->h2_sse || (c->h2_proxy && c->writer)) { /* an HTTP/2 stream's stand-in: its DATA goes on (http/h2_stream.c) */
    m0__h2_sse_flush(c);
    return;
  }
  if (c->writing && !c->closing) return; /* the scratch is empty: the target was the queue behind the write */
  conn_send(c, &c->h->scratch);
}

void m0__conn_send(m0__conn *c, m0__outq *q) {
  if (c->writing && !c->closing) {
    if (m0__outq_move_tail(&c->q[1 - c->qi], q, 0) != 0) m0__conn_close(c);
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
    if (c->close_after && !c->waiting) m0__conn_finish(c);
    return;
  }
  uv_buf_t iov[2 * M0__OUT_REFS + 1];
  int n = m0__outq_iov(s, 0, iov); /* up to a file piece: conn_pump sends that */
  const m0__io_ops *io = c->io_ops;
  int w = n && io->try_write ? io->try_write(c, iov, (unsigned)n) : 0;
  if (w < 0) {
    m0__outq_clear(s);
    m0__conn_close(c);
    return;
  }
  if ((size_t)w == total) {
    m0__outq_clear(s);
    if (c->close_after && !c->waiting) m0__conn_finish(c);
    return;
  }
  int rv = m0__outq_move_tail(&c->q[0], s, (size_t)w);
  m0__outq_clear(s);
  if (rv) {
    m0__conn_close(c);
    return;
  }
  conn_write(c, 0);
}

void m0__conn_write_close(m0__conn *c) {
  if (!c->wp) return;
  uv_close((uv_handle_t *)&c->wp->poll, wpoll_on_close);
  c->wp = NULL;
}
