/* The io_uring transport (http/io.h): one ring per loop.
 *
 * Design notes
 * - The ring is the loop's: its descriptor is watched by a uv_poll of the
 *   loop (completions make it readable), and what the loop's callbacks
 *   queued during a turn is submitted once, by a uv_prepare just before the
 *   loop waits: a batch of sends and receives per io_uring_enter. Timers,
 *   asyncs and nng stay with libuv. Both handles are unreferenced: the ring
 *   does not keep a finished loop running (its connections are gone by then).
 * - Receives: one multishot recv per connection (a single-shot one re-armed
 *   where the kernel refuses multishot), into the ring's provided buffers.
 *   A buffer goes back to the kernel as soon as the connection has read it:
 *   the connection copies what it keeps (http/conn.c).
 * - read_stop cancels the receive: what comes after stays in the kernel
 *   (backpressure, as libuv's uv_read_stop). Bytes already on their way
 *   (completions before the cancel's) are kept in the connection's stash;
 *   read_start hands the stash over on the next turn (never inside
 *   read_start) and arms the receive again once the cancelled one ended.
 * - Sends: sendmsg with the connection's iovecs, one in flight per
 *   connection (http/write.c keeps it so); the msghdr and iovecs live in the
 *   ring's arena until the submit, when the kernel has copied them
 *   (IORING_FEAT_SUBMIT_STABLE). A short send completes with its count and
 *   the connection sends the rest. There is no try_write: every response
 *   goes by the batch.
 * - Close: a send queued this turn is submitted first (what the socket
 *   takes is sent, as a libuv write's bytes were in the kernel already),
 *   then the connection's operations are cancelled; its descriptor is
 *   closed and m0__conn_closed called (on the next turn, from the prepare)
 *   only once every completion that names it has come: inflight counts the
 *   submitted operations whose last completion is still to come.
 * - user_data is the connection's address with the operation in its low
 *   bits (a connection is malloc'd: 16-aligned); 0 marks a cancel, whose
 *   completion says nothing.
 * Everything here runs on the loop's thread.
 */
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/errors.h"
#include "http/conn_state.h"
#include "http/io.h"

#define RING_ENTRIES 1024
#define RING_BUFS 128          /* provided buffers (a power of two) */
#define RING_BUF_SIZE 16384    /* bytes each */
#define RING_BGID 0
#define RING_MSGS 512          /* sends per submit before the arena is submitted early */
#define RING_IOVS (RING_MSGS * 4)
#define RING_OP_RECV 1u
#define RING_OP_SEND 2u
#define RING_OP_MASK 3u

typedef struct ring_loop {
  struct io_uring ring;
  uv_poll_t poll;
  uv_prepare_t prep;
  m0__http *h;
  struct io_uring_buf_ring *br;
  char *bufs;
  bool multishot; /* the kernel takes IORING_RECV_MULTISHOT (cleared at its first refusal) */
  m0__conn *ready; /* connections with something for the next turn: a stash, an end, a close done */
  unsigned nmsg, niov;
  struct msghdr msgs[RING_MSGS];
  struct iovec iovs[RING_IOVS];
} ring_loop;

static ring_loop *ring_of(const m0__conn *c) { return c->h->io_ctx; }
static m0__io_ring_conn *ring_conn(m0__conn *c) { return &c->io.ring; }

static void ring_submit(ring_loop *r) {
  io_uring_submit(&r->ring);
  /* The kernel has copied the msghdrs of what it took; one it left in the
   * queue (a full completion queue) still points into the arena. */
  if (!io_uring_sq_ready(&r->ring)) r->nmsg = r->niov = 0;
}

static struct io_uring_sqe *ring_sqe(ring_loop *r) {
  struct io_uring_sqe *s = io_uring_get_sqe(&r->ring);
  if (!s) { /* the submission queue is full: hand it to the kernel now */
    ring_submit(r);
    s = io_uring_get_sqe(&r->ring);
  }
  return s;
}

static void ring_list(m0__conn *c) {
  m0__io_ring_conn *rc = ring_conn(c);
  if (rc->ready_listed) return;
  rc->ready_listed = true;
  ring_loop *r = ring_of(c);
  rc->rnext = r->ready;
  r->ready = c;
}

static int ring_arm(m0__conn *c) {
  ring_loop *r = ring_of(c);
  m0__io_ring_conn *rc = ring_conn(c);
  struct io_uring_sqe *s = ring_sqe(r);
  if (!s) return M0__ETRANSPORT;
  if (r->multishot) io_uring_prep_recv_multishot(s, rc->fd, NULL, 0, 0);
  else io_uring_prep_recv(s, rc->fd, NULL, 0, 0);
  s->flags |= IOSQE_BUFFER_SELECT;
  s->buf_group = RING_BGID;
  io_uring_sqe_set_data64(s, (uint64_t)(uintptr_t)c | RING_OP_RECV);
  rc->armed = true;
  rc->inflight++;
  return 0;
}

/* false: no entry for it even after a submit (the kernel refused one: a
 * full completion queue), so the operation stays in flight. */
static bool ring_cancel(m0__conn *c, unsigned op) {
  struct io_uring_sqe *s = ring_sqe(ring_of(c));
  if (!s) return false;
  io_uring_prep_cancel64(s, (uint64_t)(uintptr_t)c | op, 0);
  io_uring_sqe_set_data64(s, 0);
  return true;
}

/* ---- the table ------------------------------------------------------- */

static int ring_open(m0__conn *c, int fd) {
  m0__io_ring_conn *rc = ring_conn(c);
  memset(rc, 0, sizeof *rc);
  rc->fd = fd;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return 0;
}

static int ring_read_start(m0__conn *c) {
  m0__io_ring_conn *rc = ring_conn(c);
  if (rc->closing) return M0__ECLOSED;
  rc->reading = true;
  if (rc->stash_len || rc->end) ring_list(c); /* handed over next turn */
  else if (!rc->armed) return ring_arm(c);
  return 0;
}

/* The receive is cancelled: bytes that come after it stay in the kernel,
 * where the client's flow control sees them (a paused client, a request
 * with the pool). */
static void ring_read_stop(m0__conn *c) {
  m0__io_ring_conn *rc = ring_conn(c);
  if (!rc->reading) return;
  rc->reading = false;
  if (rc->armed) ring_cancel(c, RING_OP_RECV);
}

static int ring_write(m0__conn *c, const uv_buf_t *iov, unsigned n) {
  ring_loop *r = ring_of(c);
  m0__io_ring_conn *rc = ring_conn(c);
  if (rc->closing || rc->sending) return M0__ETRANSPORT;
  if (n > RING_IOVS) n = RING_IOVS; /* the rest goes with the next send */
  if (r->nmsg == RING_MSGS || r->niov + n > RING_IOVS) {
    ring_submit(r);
    /* The kernel took none of the queue, whose msghdrs are in the arena:
     * no room for this one (the connection closes, never an overflow). */
    if (r->nmsg == RING_MSGS || r->niov + n > RING_IOVS) return M0__ETRANSPORT;
  }
  struct io_uring_sqe *s = ring_sqe(r);
  if (!s) return M0__ETRANSPORT;
  struct iovec *v = &r->iovs[r->niov];
  size_t total = 0;
  for (unsigned i = 0; i < n; i++) {
    v[i].iov_base = iov[i].base;
    v[i].iov_len = iov[i].len;
    total += iov[i].len;
  }
  r->niov += n;
  struct msghdr *m = &r->msgs[r->nmsg++];
  memset(m, 0, sizeof *m);
  m->msg_iov = v;
  m->msg_iovlen = n;
  io_uring_prep_sendmsg(s, rc->fd, m, MSG_NOSIGNAL);
  io_uring_sqe_set_data64(s, (uint64_t)(uintptr_t)c | RING_OP_SEND);
  rc->sending = true;
  rc->want = total;
  rc->inflight++;
  return 0;
}

static int ring_shutdown(m0__conn *c) {
  m0__io_ring_conn *rc = ring_conn(c);
  if (rc->sending) {
    rc->shut_after = true;
    return 0;
  }
  return shutdown(rc->fd, SHUT_WR) == 0 ? 0 : M0__ETRANSPORT;
}

static void ring_close(m0__conn *c) {
  m0__io_ring_conn *rc = ring_conn(c);
  if (rc->closing) return;
  rc->closing = true;
  rc->reading = false;
  free(rc->stash);
  rc->stash = NULL;
  rc->stash_len = 0;
  if (rc->sending) {
    /* Its send is submitted now, so what the socket takes goes out as a
     * libuv write would have put it in the kernel before the close; only
     * what waits for room (a client not reading) is cancelled. */
    ring_submit(ring_of(c));
    if (rc->sending && !ring_cancel(c, RING_OP_SEND)) shutdown(rc->fd, SHUT_RDWR);
  }
  /* A cancel the ring cannot take: the shutdown ends the operations still
   * in flight, whose completions then free the connection. */
  if (rc->armed && !ring_cancel(c, RING_OP_RECV)) shutdown(rc->fd, SHUT_RDWR);
  if (rc->inflight == 0) ring_list(c); /* m0__conn_closed next turn, never inside close */
}

static int ring_fd(const m0__conn *c) { return c->io.ring.closing ? -1 : c->io.ring.fd; }

static size_t ring_queued(const m0__conn *c) { return c->io.ring.sending ? c->io.ring.want : 0; }

/* Bytes in the kernel, in the stash, or in a completion the loop has not
 * taken yet (a loop busy in a view when the drain comes). */
static bool ring_input_waits(const m0__conn *c) {
  const m0__io_ring_conn *rc = &c->io.ring;
  int n = 0;
  if (rc->stash_len || (!rc->closing && ioctl(rc->fd, FIONREAD, &n) == 0 && n > 0)) return true;
  ring_loop *r = ring_of(c);
  struct io_uring_cqe *cqe;
  unsigned head;
  io_uring_for_each_cqe(&r->ring, head, cqe) {
    if ((io_uring_cqe_get_data64(cqe) & ~(uint64_t)RING_OP_MASK) == (uint64_t)(uintptr_t)c &&
        (io_uring_cqe_get_data64(cqe) & RING_OP_MASK) == RING_OP_RECV && cqe->res > 0)
      return true;
  }
  return false;
}

const m0__io_ops m0__io_ring_ops = {
    .name = "uring",
    .plain = true,
    .open = ring_open,
    .read_start = ring_read_start,
    .read_stop = ring_read_stop,
    .write = ring_write,
    .try_write = NULL,
    .shutdown = ring_shutdown,
    .close = ring_close,
    .fd = ring_fd,
    .queued = ring_queued,
    .input_waits = ring_input_waits,
};

/* ---- completions ----------------------------------------------------- */

/* Bytes received while not reading: kept for read_start, and the receive
 * cancelled so no more come. false: no memory (the connection closes). */
static bool ring_stash(m0__conn *c, const char *p, size_t n) {
  m0__io_ring_conn *rc = ring_conn(c);
  char *nb = realloc(rc->stash, rc->stash_len + n);
  if (!nb) return false;
  memcpy(nb + rc->stash_len, p, n);
  rc->stash = nb;
  rc->stash_len += n;
  return true;
}

static void ring_give_back(ring_loop *r, unsigned bid) {
  io_uring_buf_ring_add(r->br, r->bufs + (size_t)bid * RING_BUF_SIZE, RING_BUF_SIZE, (unsigned short)bid,
                        io_uring_buf_ring_mask(RING_BUFS), 0);
  io_uring_buf_ring_advance(r->br, 1);
}

/* An end of input (0: EOF, < 0: an error) for the connection, or kept. */
static void ring_end(m0__conn *c, int res) {
  m0__io_ring_conn *rc = ring_conn(c);
  int code = res == 0 ? M0__IO_EOF : res;
  if (rc->closing) return;
  if (rc->reading) m0__conn_read(c, NULL, code);
  else rc->end = code;
}

static void ring_on_recv(ring_loop *r, m0__conn *c, const struct io_uring_cqe *cqe) {
  m0__io_ring_conn *rc = ring_conn(c);
  bool more = cqe->flags & IORING_CQE_F_MORE;
  if (!more) {
    rc->armed = false;
    rc->inflight--;
  }
  if (cqe->flags & IORING_CQE_F_BUFFER) {
    unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
    char *p = r->bufs + (size_t)bid * RING_BUF_SIZE;
    if (cqe->res > 0 && !rc->closing) {
      if (rc->reading && !rc->stash_len) m0__conn_read(c, p, cqe->res);
      else if (!ring_stash(c, p, (size_t)cqe->res)) m0__conn_close(c);
      else if (more) ring_cancel(c, RING_OP_RECV); /* stopped: no more until read_start */
    }
    ring_give_back(r, bid);
  }
  if (more || rc->closing) return;
  if (cqe->res == -EINVAL && r->multishot) r->multishot = false; /* re-armed single-shot below */
  else if (cqe->res == 0 || (cqe->res < 0 && cqe->res != -ENOBUFS && cqe->res != -ECANCELED)) {
    ring_end(c, cqe->res);
    return;
  }
  if (rc->reading && !rc->closing && !rc->stash_len && !rc->armed && ring_arm(c) != 0) m0__conn_close(c);
}

static void ring_on_send(m0__conn *c, int res) {
  m0__io_ring_conn *rc = ring_conn(c);
  rc->sending = false;
  rc->inflight--;
  m0__conn_wrote(c, rc->closing ? UV_ECANCELED : res > 0 ? res : res < 0 ? res : UV_EPIPE);
  if (rc->shut_after && !rc->closing && !rc->sending) {
    rc->shut_after = false;
    if (shutdown(rc->fd, SHUT_WR) != 0) m0__conn_close(c);
  }
}

static void ring_complete(ring_loop *r, const struct io_uring_cqe *cqe) {
  uint64_t d = io_uring_cqe_get_data64(cqe);
  if (!d) return; /* a cancel's */
  m0__conn *c = (m0__conn *)(uintptr_t)(d & ~(uint64_t)RING_OP_MASK);
  if ((d & RING_OP_MASK) == RING_OP_RECV) ring_on_recv(r, c, cqe);
  else ring_on_send(c, cqe->res);
  m0__io_ring_conn *rc = ring_conn(c);
  if (rc->closing && rc->inflight == 0) ring_list(c);
}

/* Takes the completions there are; how many. */
static unsigned ring_reap(ring_loop *r) {
  struct io_uring_cqe *cqe;
  unsigned head, n = 0;
  io_uring_for_each_cqe(&r->ring, head, cqe) {
    ring_complete(r, cqe);
    n++;
  }
  io_uring_cq_advance(&r->ring, n);
  return n;
}

static void ring_on_poll(uv_poll_t *p, int status, int events) {
  (void)status;
  (void)events;
  ring_reap(p->data);
}

/* A listed connection's turn: closed for good, or its stash and end handed
 * over and its receive armed again. */
static void ring_ready(m0__conn *c) {
  m0__io_ring_conn *rc = ring_conn(c);
  if (rc->closing) {
    if (rc->inflight) return; /* listed again by its last completion */
    close(rc->fd);
    rc->fd = -1;
    m0__conn_closed(c); /* c's memory may go here */
    return;
  }
  if (rc->reading && rc->stash_len) {
    char *p = rc->stash;
    size_t n = rc->stash_len;
    rc->stash = NULL;
    rc->stash_len = 0;
    m0__conn_read(c, p, (ssize_t)n);
    free(p);
  }
  if (rc->closing) return;
  if (rc->reading && rc->end) {
    int e = rc->end;
    rc->end = 0;
    m0__conn_read(c, NULL, e);
    return;
  }
  if (rc->reading && !rc->armed && !rc->closing && !rc->end && ring_arm(c) != 0) m0__conn_close(c);
}

static void ring_ready_all(ring_loop *r);

static void ring_on_prepare(uv_prepare_t *p) {
  ring_loop *r = p->data;
  /* The sends of this turn mostly complete inside the submit: their
   * completions are taken here, not after another wait of the loop (a
   * few rounds at most: the loop's other handles wait meanwhile). */
  for (int round = 0; round < 4; round++) {
    ring_ready_all(r);
    if (!io_uring_sq_ready(&r->ring)) return;
    ring_submit(r);
    if (!ring_reap(r)) return;
  }
  ring_ready_all(r); /* what the last round's completions left: submitted before the loop waits */
  if (io_uring_sq_ready(&r->ring)) ring_submit(r);
}

static void ring_ready_all(ring_loop *r) {
  while (r->ready) {
    m0__conn *list = r->ready;
    r->ready = NULL;
    while (list) {
      m0__conn *c = list;
      list = ring_conn(c)->rnext;
      ring_conn(c)->ready_listed = false;
      ring_ready(c);
    }
  }
}

/* ---- the loop's ring ------------------------------------------------- */

static int ring_why(char *why, size_t why_len, const char *what, int err) {
  if (why_len) snprintf(why, why_len, "io_uring: %s: %s", what, strerror(err));
  return M0__ETRANSPORT;
}

/* The operations this transport needs, asked of the kernel. */
static int ring_probe_ops(struct io_uring *ring, char *why, size_t why_len) {
  struct io_uring_probe *pr = io_uring_get_probe_ring(ring);
  if (!pr) return ring_why(why, why_len, "probe", ENOSYS);
  static const int need[] = {IORING_OP_RECV, IORING_OP_SENDMSG, IORING_OP_ASYNC_CANCEL};
  int missing = -1;
  for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
    if (!io_uring_opcode_supported(pr, need[i])) missing = need[i];
  io_uring_free_probe(pr);
  if (missing < 0) return 0;
  if (why_len) snprintf(why, why_len, "io_uring: the kernel lacks operation %d", missing);
  return M0__ETRANSPORT;
}

static int ring_queue_init(struct io_uring *ring) {
  struct io_uring_params p;
  memset(&p, 0, sizeof p);
  p.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN;
  int rv = io_uring_queue_init_params(RING_ENTRIES, ring, &p);
  if (rv == -EINVAL) { /* an older kernel: without the flags */
    memset(&p, 0, sizeof p);
    rv = io_uring_queue_init_params(RING_ENTRIES, ring, &p);
  }
  if (rv == 0 && !(p.features & IORING_FEAT_SUBMIT_STABLE)) {
    io_uring_queue_exit(ring);
    return -ENOSYS; /* the arena's msghdrs must be copied at the submit */
  }
  return rv;
}

static int ring_buffers(ring_loop *r, char *why, size_t why_len) {
  size_t brsz = RING_BUFS * sizeof(struct io_uring_buf);
  void *br = NULL;
  if (posix_memalign(&br, 4096, brsz) != 0 || !(r->bufs = malloc((size_t)RING_BUFS * RING_BUF_SIZE))) {
    free(br);
    return ring_why(why, why_len, "buffers", ENOMEM);
  }
  r->br = br;
  io_uring_buf_ring_init(r->br);
  struct io_uring_buf_reg reg;
  memset(&reg, 0, sizeof reg);
  reg.ring_addr = (uint64_t)(uintptr_t)br;
  reg.ring_entries = RING_BUFS;
  reg.bgid = RING_BGID;
  int rv = io_uring_register_buf_ring(&r->ring, &reg, 0);
  if (rv != 0) return ring_why(why, why_len, "provided buffer ring", -rv);
  for (unsigned i = 0; i < RING_BUFS; i++)
    io_uring_buf_ring_add(r->br, r->bufs + (size_t)i * RING_BUF_SIZE, RING_BUF_SIZE, (unsigned short)i,
                          io_uring_buf_ring_mask(RING_BUFS), (int)i);
  io_uring_buf_ring_advance(r->br, RING_BUFS);
  return 0;
}

static void ring_free(ring_loop *r) {
  free(r->bufs);
  free(r->br);
  free(r);
}

/* A ring whose operations and buffer ring passed (*out), or why not. */
static int ring_make(ring_loop **out, char *why, size_t why_len) {
  ring_loop *r = calloc(1, sizeof *r);
  if (!r) return ring_why(why, why_len, "its state", ENOMEM);
  int rv = ring_queue_init(&r->ring);
  if (rv != 0) {
    free(r);
    return ring_why(why, why_len, "io_uring_queue_init", -rv);
  }
  if ((rv = ring_probe_ops(&r->ring, why, why_len)) != 0 || (rv = ring_buffers(r, why, why_len)) != 0) {
    io_uring_queue_exit(&r->ring);
    ring_free(r);
    return rv;
  }
  *out = r;
  return 0;
}

int m0__io_ring_init(m0__http *h, char *why, size_t why_len) {
  ring_loop *r;
  int rv = ring_make(&r, why, why_len);
  if (rv != 0) return rv;
  r->h = h;
  r->multishot = true;
  if (uv_poll_init(h->uv, &r->poll, r->ring.ring_fd) != 0) {
    io_uring_queue_exit(&r->ring);
    ring_free(r);
    return ring_why(why, why_len, "a poll of the loop on the ring", EBADF);
  }
  r->poll.data = r->prep.data = r;
  uv_prepare_init(h->uv, &r->prep);
  uv_poll_start(&r->poll, UV_READABLE, ring_on_poll);
  uv_prepare_start(&r->prep, ring_on_prepare);
  uv_unref((uv_handle_t *)&r->poll); /* the loop ends when its own handles do */
  uv_unref((uv_handle_t *)&r->prep);
  h->io_ctx = r;
  return 0;
}

/* After the loop is closed (its handles with it): every connection is gone. */
void m0__io_ring_fini(m0__http *h) {
  ring_loop *r = h->io_ctx;
  io_uring_queue_exit(&r->ring);
  ring_free(r);
  h->io_ctx = NULL;
}

int m0__io_ring_probe(char *why, size_t why_len) {
  ring_loop *r;
  int rv = ring_make(&r, why, why_len);
  if (rv != 0) return rv;
  io_uring_queue_exit(&r->ring);
  ring_free(r);
  return 0;
}
