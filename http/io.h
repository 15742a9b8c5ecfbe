/* A connection's byte transport: the one table of operations the
 * connection (http/conn.c, http/write.c) moves its bytes through, and the
 * calls a transport makes back into the connection. Two tables today:
 * libuv's (http/io_uv.c: a uv_tcp_t, epoll) and io_uring's (http/io_ring.c:
 * one ring per loop). TLS is a third (http/tls_io.c): a libuv socket with
 * the engine between it and the connection, so HTTPS runs on libuv whatever
 * --io asks (making it a filter over either table is the way to io_uring).
 *
 * Design notes (the contract)
 * - Everything runs on the connection's loop. A connection uses the table
 *   chosen at m0__io_init (h->io), or libuv's when it came on the plain
 *   listener beside HTTPS; it keeps which in c->io_ops, and its transport
 *   state in its m0__conn's io slot (http/conn_state.h).
 * - open takes the descriptor whatever it returns; after a failed open or
 *   read_start the caller still calls close, and on_closed follows.
 * - Reading: between read_start and read_stop the transport calls
 *   m0__conn_alloc (a hint: where the connection wants the next bytes; a
 *   transport with buffers of its own may ignore it) and m0__conn_read with
 *   bytes, M0__IO_EOF or another negative error (0 bytes: nothing). The bytes are the
 *   transport's or the hint's, valid only during the call: the connection
 *   copies what it keeps. After read_stop returns, m0__conn_read is not
 *   called until the next read_start (bytes that arrive meanwhile wait in
 *   the transport, as they would in the kernel). read_start never calls
 *   m0__conn_read inside itself.
 * - Writing: at most one write in flight per connection (the connection
 *   keeps it so). write returns 0 and m0__conn_wrote runs once later with
 *   the bytes written (all of them, or fewer: the connection writes the rest
 *   again) or a negative error; or it returns an error and nothing runs.
 *   The iov's memory stays the connection's and untouched until then.
 *   try_write (NULL: takes nothing) writes what the socket takes now, with
 *   no write in flight, and returns the count or a negative error.
 * - shutdown: the write side ends after the write in flight; an error then
 *   closes the connection (m0__conn_close). queued: bytes a write in flight
 *   has not passed to the kernel yet.
 * - close: every operation naming the connection is ended (a write in
 *   flight completes with an error first), then m0__conn_closed runs, once,
 *   never inside close: only then may the connection's memory go.
 * - fd: the kernel socket beneath (-1 once closed), for what only it can
 *   do: FIONREAD at the drain, keep-alive probes, the peer's address, and
 *   sendfile of a file piece (with a poll of the loop on a duplicate for
 *   writable) when plain is set. A filter whose bytes on the socket are not
 *   the connection's (TLS) clears plain, and takes an iov's bytes before
 *   its write returns: write.c gives it file pieces read into a buffer it
 *   frees on that return.
 * - A descriptor handed to another loop (transport/handoff.c) is handed
 *   before it is adopted: no transport has seen it yet.
 */
#ifndef M0_HTTP_IO_H
#define M0_HTTP_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <uv.h>

#include "http/server.h"

#define M0__IO_EOF UV_EOF /* m0__conn_read's end of input */

typedef struct m0__io_ops {
  const char *name; /* the doctor's io: "epoll" (libuv) or "uring" */
  bool plain;       /* the socket carries the connection's bytes as they are (sendfile may write them) */
  int (*open)(m0__conn *c, int fd);
  int (*read_start)(m0__conn *c);
  void (*read_stop)(m0__conn *c);
  int (*write)(m0__conn *c, const uv_buf_t *iov, unsigned n);
  int (*try_write)(m0__conn *c, const uv_buf_t *iov, unsigned n);
  int (*shutdown)(m0__conn *c);
  void (*close)(m0__conn *c);
  int (*fd)(const m0__conn *c);
  size_t (*queued)(const m0__conn *c);
  /* Whether bytes the connection has not been given yet wait for it (the
   * drain keeps such a connection for its next request); NULL: the
   * kernel's count (FIONREAD on fd). */
  bool (*input_waits)(const m0__conn *c);
  /* The connection waits for its next request (the sweep says so, at most
   * a second into the wait): memory the transport makes again when bytes
   * come may go. NULL: none held. */
  void (*rest)(m0__conn *c);
} m0__io_ops;

/* The io_uring state of one connection: lives in its io slot. */
typedef struct m0__io_ring_conn {
  int fd;
  unsigned inflight;   /* operations submitted whose last completion has not come */
  bool armed;          /* a receive is submitted */
  bool reading;        /* between read_start and read_stop */
  bool closing, sending, shut_after, ready_listed;
  int end;             /* an end of input (EOF, error) met while not reading: 0 none */
  char *stash;         /* bytes received while not reading, for the next read_start */
  size_t stash_len;
  size_t want;         /* bytes of the write in flight */
  m0__conn *rnext;     /* in the ring's list of connections with something to do next turn */
} m0__io_ring_conn;

/* The libuv state of one connection. tcp first: its address is the connection's. */
typedef struct m0__io_uv_conn {
  uv_tcp_t tcp;
  uv_write_t wreq;
  size_t wbytes; /* of the uv_write in flight */
} m0__io_uv_conn;

/* The HTTPS transport's (http/tls_io.c): libuv's, and the engine's state. */
typedef struct m0__io_tls_conn {
  m0__io_uv_conn uv; /* first */
  struct m0__tls_conn *s;
} m0__io_tls_conn;

typedef union m0__io_slot {
  m0__io_uv_conn uv;
  m0__io_ring_conn ring;
  m0__io_tls_conn tls;
} m0__io_slot;

/* Which transport: asked at the start (--io), what a loop got. */
typedef enum m0__io_mode { M0__IO_EPOLL = 0, M0__IO_URING = 1, M0__IO_AUTO = 2 } m0__io_mode;

/* Sets h->io (and h->io_ctx) for mode: auto takes io_uring when a ring can
 * be made and has the operations needed, else libuv, with why (if why is
 * not NULL) saying what was refused. uring: the ring or an error. 0 or
 * M0__ETRANSPORT / M0__ENOMEM (why says). */
int m0__io_init(m0__http *h, m0__io_mode mode, char *why, size_t why_len);
void m0__io_fini(m0__http *h);
/* Whether this process can run the io_uring transport: 0, or
 * M0__ETRANSPORT with why (a ring made and dropped: the check and the
 * doctor ask it). */
int m0__io_ring_probe(char *why, size_t why_len);
/* --io's text: its m0__io_mode, or M0__EINVALID. */
int m0__io_mode_parse(const char *s);
/* The check io (config/checks.c): whether --io's text v can be served
 * here, with detail (the path taken, why not io_uring) and fix. io_uring
 * asked for must be allowed (a kernel without it, a seccomp profile that
 * refuses it); auto says which it takes and why. */
bool m0__io_check(const char *v, char *detail, size_t dlen, char *fix, size_t flen);
/* The transport mode would give here: "uring" or "epoll" (why, when auto
 * falls back or uring is refused). */
const char *m0__io_path(int mode, char *why, size_t why_len);

extern const m0__io_ops m0__io_uv_ops;
/* libuv's shutdown of the write side of stream, c's socket (an error then
 * closes c): its table's, and TLS's after the close_notify. */
int m0__io_uv_shutdown(m0__conn *c, uv_stream_t *stream);
extern const m0__io_ops m0__io_ring_ops;
int m0__io_ring_init(m0__http *h, char *why, size_t why_len);
void m0__io_ring_fini(m0__http *h);

/* The connection's side, called by the transports. */
void m0__conn_alloc(m0__conn *c, char **base, size_t *len);
void m0__conn_read(m0__conn *c, char *buf, ssize_t n);
void m0__conn_wrote(m0__conn *c, ssize_t n);
void m0__conn_closed(m0__conn *c);

#endif
