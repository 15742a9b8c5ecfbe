/* The libuv transport (http/io.h): a uv_tcp_t per connection, read by
 * uv_read_start into the buffer the connection asks for, written by
 * uv_write / uv_try_write (one piece by send(2): io_uv_try_write). What
 * conn.c and write.c called directly before the seam. Everything here runs
 * on the connection's loop. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/errors.h"
#include "http/conn_state.h"
#include "http/io.h"

static m0__conn *io_uv_conn(void *handle) { return (m0__conn *)handle; } /* the slot is first, tcp first in it */
static uv_stream_t *io_uv_stream(const m0__conn *c) { return (uv_stream_t *)&c->io.uv.tcp; }

static void io_uv_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  m0__conn_alloc(io_uv_conn(handle), &buf->base, &buf->len); /* NULL, 0: libuv reports UV_ENOBUFS */
}

static void io_uv_on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  m0__conn_read(io_uv_conn(stream), buf->base, nread); /* a tail call */
}

static int io_uv_open(m0__conn *c, int fd) {
  uv_tcp_init(c->h->uv, &c->io.uv.tcp);
  int rv = uv_tcp_open(&c->io.uv.tcp, fd);
  if (rv != 0) {
    close(fd); /* not the handle's yet */
    return M0__ETRANSPORT;
  }
  uv_tcp_nodelay(&c->io.uv.tcp, 1);
  return 0;
}

static int io_uv_read_start(m0__conn *c) {
  return uv_read_start(io_uv_stream(c), io_uv_alloc, io_uv_on_read) ? M0__ETRANSPORT : 0;
}

static void io_uv_read_stop(m0__conn *c) { uv_read_stop(io_uv_stream(c)); }

static void io_uv_on_write(uv_write_t *req, int status) {
  m0__conn *c = req->data;
  m0__conn_wrote(c, status < 0 ? status : (ssize_t)c->io.uv.wbytes);
}

static int io_uv_write(m0__conn *c, const uv_buf_t *iov, unsigned n) {
  size_t total = 0;
  for (unsigned i = 0; i < n; i++) total += iov[i].len;
  c->io.uv.wbytes = total;
  c->io.uv.wreq.data = c;
  return uv_write(&c->io.uv.wreq, io_uv_stream(c), iov, n, io_uv_on_write) ? M0__ETRANSPORT : 0;
}

/* One piece (most writes: an answer in the scratch, a stream's frame) goes
 * by send(2): the socket layer without the file layer's write path that
 * libuv's write(2) takes, ~5 % less CPU a write (bench/floor_fanout.c's
 * send mode against its write). Only where libuv would write now (nothing
 * queued, no connect under way); several pieces go by libuv's writev. */
static int io_uv_try_write(m0__conn *c, const uv_buf_t *iov, unsigned n) {
  uv_stream_t *s = io_uv_stream(c);
  int fd;
  if (n == 1 && !s->write_queue_size && !s->connect_req && uv_fileno((uv_handle_t *)s, &fd) == 0) {
    size_t len = iov[0].len < INT_MAX ? iov[0].len : INT_MAX; /* the count must fit the int returned */
    ssize_t w;
    do w = send(fd, iov[0].base, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    if (w >= 0) return (int)w;
    return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno; /* libuv's codes are -errno on unix */
  }
  int w = uv_try_write(s, iov, n);
  return w == UV_EAGAIN || w == UV_ENOSYS ? 0 : w;
}

/* The request is the shutdown's own (malloc'd, not in every connection):
 * libuv calls this before the handle's close callback, UV_ECANCELED when
 * closed first, so c is still there. */
static void io_uv_on_shutdown(uv_shutdown_t *req, int status) {
  m0__conn *c = req->data;
  free(req);
  if (status < 0) m0__conn_close(c);
}

int m0__io_uv_shutdown(m0__conn *c, uv_stream_t *stream) {
  uv_shutdown_t *req = malloc(sizeof *req);
  if (!req) return M0__ENOMEM;
  req->data = c;
  if (uv_shutdown(req, stream, io_uv_on_shutdown) != 0) {
    free(req);
    return M0__ETRANSPORT;
  }
  return 0;
}

static int io_uv_shutdown(m0__conn *c) { return m0__io_uv_shutdown(c, io_uv_stream(c)); }

static void io_uv_on_close(uv_handle_t *handle) { m0__conn_closed(io_uv_conn(handle)); }

static void io_uv_close(m0__conn *c) { uv_close((uv_handle_t *)&c->io.uv.tcp, io_uv_on_close); }

static int io_uv_fd(const m0__conn *c) {
  uv_os_fd_t fd;
  return uv_fileno((const uv_handle_t *)&c->io.uv.tcp, &fd) == 0 ? fd : -1;
}

static size_t io_uv_queued(const m0__conn *c) { return uv_stream_get_write_queue_size(io_uv_stream(c)); }

const m0__io_ops m0__io_uv_ops = {
    .name = "epoll",
    .plain = true,
    .open = io_uv_open,
    .read_start = io_uv_read_start,
    .read_stop = io_uv_read_stop,
    .write = io_uv_write,
    .try_write = io_uv_try_write,
    .shutdown = io_uv_shutdown,
    .close = io_uv_close,
    .fd = io_uv_fd,
    .queued = io_uv_queued,
};
