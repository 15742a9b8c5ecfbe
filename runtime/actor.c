#include "runtime/actor.h"

#include <nng/protocol/pair1/pair.h>
#include <nng/protocol/pipeline0/pull.h>
#include <nng/protocol/pipeline0/push.h>
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/admit.h"
#include "runtime/bounds.h"
#include "runtime/edges.h"
#include "runtime/trace.h"
#include "base/errors.h"
#include "transport/links.h"

static const int reach_origins[3] = {M0__ORIGIN_SELF, M0__ORIGIN_LOCAL, M0__ORIGIN_OUTSIDE};
static int reach_origin(const char *url) { return reach_origins[m0__link_reach(url)]; }

/* Socket names, by nng's socket id. nng 1.5.2's statistics do not show
 * NNG_OPT_SOCKNAME (the "name" stat stays as the socket was opened), so the
 * names are kept here: a ring of the latest, since nng never reuses an id
 * and an entry of a closed socket then matches nothing. */
#define SOCKET_NAMES 512
static struct {
  uint32_t id;
  char name[40];
} socket_names[SOCKET_NAMES];
static unsigned socket_names_next;
static pthread_mutex_t socket_names_mu = PTHREAD_MUTEX_INITIALIZER;

void m0__socket_name(nng_socket s, const char *side, uint32_t id) {
  char actor[32];
  m0__actor_name(id, actor, sizeof actor);
  pthread_mutex_lock(&socket_names_mu);
  unsigned at = socket_names_next++ % SOCKET_NAMES;
  socket_names[at].id = (uint32_t)nng_socket_id(s);
  snprintf(socket_names[at].name, sizeof socket_names[at].name, "%s:%s", side, actor);
  pthread_mutex_unlock(&socket_names_mu);
}

bool m0__socket_name_of(uint64_t sock_id, char *out, size_t outlen) {
  bool found = false;
  pthread_mutex_lock(&socket_names_mu);
  for (unsigned k = 0; k < SOCKET_NAMES && k < socket_names_next && !found; k++) {
    unsigned at = (socket_names_next - 1 - k) % SOCKET_NAMES; /* the newest first */
    if (socket_names[at].id == sock_id) found = snprintf(out, outlen, "%s", socket_names[at].name) >= 0;
  }
  pthread_mutex_unlock(&socket_names_mu);
  return found;
}

/* A mailbox: a pull0 socket, or (poly) a pair1 socket in polyamorous mode. */
static int actor_listen(m0__actor *a, uint32_t id, const char *url, m0__tracer *trace, bool poly,
                        nng_pipe_cb on_pipe, void *arg) {
  memset(a, 0, sizeof *a);
  m0__fresh_init(&a->fresh); /* before it listens: a message sealed once a peer could reach it is fresh */
  a->id = id;
  a->trace = trace;
  a->recv_fd = -1;
  snprintf(a->url, sizeof a->url, "%s", url);
  if ((poly ? nng_pair1_open_poly(&a->mailbox) : nng_pull0_open(&a->mailbox)) != 0) return M0__ETRANSPORT;
  m0__socket_name(a->mailbox, "mailbox", id);
  /* No message larger than this mailbox's kinds can carry: nng refuses a
   * bigger one as it comes, before it holds memory for it (runtime/bounds.h). */
  nng_socket_set_size(a->mailbox, NNG_OPT_RECVMAXSZ, m0__bounds_recv_max(id));
  /* A send waits at most this long for the socket's queue: pair1 hands each
   * message to its pipe's queue at once (or drops it, counted by nng as
   * tx_drop, when that queue is full: service/service.h). */
  if (poly) nng_socket_set_ms(a->mailbox, NNG_OPT_SENDTIMEO, 100);
  /* Its pipes counted and capped, on_pipe told of each (runtime/bounds.h). */
  if (m0__bounds_watch(a->mailbox, id, url, on_pipe, arg) != 0 || m0__link_listen(a->mailbox, url) != 0) {
    m0__link_unwatch(a->mailbox);
    m0__socket_close(a->mailbox);
    m0__bounds_unwatch(a->mailbox);
    return M0__ETRANSPORT;
  }
  a->unsealed = reach_origin(url);
  a->open = true;
  return 0;
}

int m0__actor_open(m0__actor *a, uint32_t id, const char *url, m0__tracer *trace) {
  return actor_listen(a, id, url, trace, false, NULL, NULL);
}

int m0__actor_open_poly(m0__actor *a, uint32_t id, const char *url, m0__tracer *trace, nng_pipe_cb on_pipe,
                        void *arg) {
  return actor_listen(a, id, url, trace, true, on_pipe, arg);
}

int m0__actor_listen_also(m0__actor *a, const char *url) {
  if (m0__link_listen(a->mailbox, url) != 0) return M0__ETRANSPORT;
  m0__bounds_listen_also(a->mailbox, url);
  if (reach_origin(url) > a->unsealed) a->unsealed = reach_origin(url);
  return 0;
}

void m0__actor_close(m0__actor *a) {
  if (a->open) {
    m0__link_unwatch(a->mailbox);
    m0__socket_close(a->mailbox);
    m0__bounds_unwatch(a->mailbox);
  }
  a->open = false;
}

int m0__actor_recv_fd(m0__actor *a, int *fd) {
  if (a->recv_fd < 0 && nng_socket_get_int(a->mailbox, NNG_OPT_RECVFD, &a->recv_fd) != 0) {
    a->recv_fd = -1;
    return M0__ETRANSPORT;
  }
  *fd = a->recv_fd;
  return 0;
}

int m0__peer_open(m0__peer *p, uint32_t id, const char *url, int send_timeout_ms) {
  memset(p, 0, sizeof *p);
  p->id = id;
  snprintf(p->url, sizeof p->url, "%s", url);
  if (nng_push0_open(&p->sock) != 0) return M0__ETRANSPORT;
  m0__socket_name(p->sock, "peer", id);
  nng_socket_set_ms(p->sock, NNG_OPT_SENDTIMEO, send_timeout_ms);
  if (send_timeout_ms == 0) nng_socket_set_int(p->sock, NNG_OPT_SENDBUF, 1024);
  nng_socket_set_ms(p->sock, NNG_OPT_RECONNMINT, 5);
  nng_socket_set_ms(p->sock, NNG_OPT_RECONNMAXT, 10);
  /* A listener that is already up connects now. Callers dial only a
   * mailbox known to be open (opened in this process before the dial, or
   * its owner said READY): with nng 1.5.2, every redial attempt against an
   * absent ipc listener costs ~1.3 ms of CPU (its poller spins on the failed
   * socket, its expire thread on the retry timer), so a peer dialed early
   * burned a fifth to a half of a CPU until its listener came. The
   * background redial (5 to 10 ms apart) is what reconnects a peer whose
   * listener went away and comes back: a respawned worker's loop. */
  if (m0__link_dial(p->sock, url, 0) != 0 && m0__link_dial(p->sock, url, NNG_FLAG_NONBLOCK) != 0) {
    m0__socket_close(p->sock);
    return M0__ETRANSPORT;
  }
  p->open = true;
  return 0;
}

void m0__peer_direct(m0__peer *p, uint32_t id, m0__inbox *to) {
  memset(p, 0, sizeof *p);
  p->id = id;
  p->direct = to;
}

void m0__peer_pipe(m0__peer *p, uint32_t id, nng_socket sock, nng_pipe pipe) {
  memset(p, 0, sizeof *p);
  p->id = id;
  p->sock = sock;
  p->pipe = pipe;
}

void m0__peer_close(m0__peer *p) {
  if (p->open) m0__socket_close(p->sock);
  p->open = false;
}

/* The trace hook, one branch when tracing is off: no tracer of this process
 * is on (runtime/trace.h). -DM0_TRACE_HOOK=OFF builds it out, so
 * bench/run_trace can show the branch costs nothing measurable. */
#ifdef M0_NO_TRACE_HOOK
#define TRACE_HOOK(self, recv, e, len) ((void)0)
#else
#define TRACE_HOOK(self, recv, e, len)                                                                           \
  do {                                                                                                           \
    if (atomic_load_explicit(&m0__trace_live, memory_order_relaxed)) m0__trace_record((self)->trace, recv, e, len); \
  } while (0)
#endif

int m0__msg_new(nng_msg **m, size_t reserve) {
  if (reserve > M0__ENV_MAX_PAYLOAD) reserve = M0__ENV_MAX_PAYLOAD;
  if (nng_msg_alloc(m, M0__ENV_HEADER) != 0) return M0__ENOMEM;
  if (reserve && nng_msg_reserve(*m, M0__ENV_HEADER + reserve + M0__SEAL_LEN) != 0) { /* a seal without a copy */
    nng_msg_free(*m);
    return M0__ENOMEM;
  }
  return 0;
}

uint8_t *m0__msg_extend(nng_msg *m, size_t n) {
  size_t len = nng_msg_len(m), cap = nng_msg_capacity(m);
  if (n > cap - len) { /* nng grows a body to the exact size asked: double instead */
    size_t want = cap ? 2 * cap : 4096;
    while (want < len + n) want *= 2;
    if (nng_msg_reserve(m, want) != 0) return NULL;
  }
  if (nng_msg_realloc(m, len + n) != 0) return NULL;
  return (uint8_t *)nng_msg_body(m) + len;
}

int m0__msg_append(nng_msg *m, const void *p, size_t n) {
  uint8_t *at = n ? m0__msg_extend(m, n) : NULL;
  if (n && !at) return M0__ENOMEM;
  if (n) memcpy(at, p, n);
  return 0;
}

uint8_t *m0__msg_payload(nng_msg *m) { return (uint8_t *)nng_msg_body(m) + M0__ENV_HEADER; }
size_t m0__msg_payload_len(nng_msg *m) { return nng_msg_len(m) - M0__ENV_HEADER; }

static bool host_role(uint32_t id) {
  int r = M0__ACTOR_ROLE(id);
  return r == M0__ROLE_COORD || r == M0__ROLE_LOOP || r == M0__ROLE_POOL || r == M0__ROLE_PRODUCER ||
         r == M0__ROLE_WORKER;
}

int m0__send_msg(m0__actor *self, m0__peer *to, int kind, uint64_t trace_hi, uint64_t trace_lo, nng_msg *m) {
  size_t len = m0__msg_payload_len(m);
  if (len > M0__ENV_MAX_PAYLOAD) return M0__ETOOBIG;
  m0__env e = {.kind = (uint16_t)kind, .from = self->id, .to = to->id, .seq = ++self->seq,
               .trace_hi = trace_hi, .trace_lo = trace_lo};
  /* Through a socket to another of the host's actors, the family's seal
   * (runtime/admit.h); never to an application actor's instance. */
  bool seal = !to->direct && nng_pipe_id(to->pipe) <= 0 && m0__family_known() && host_role(to->id);
  if (seal) e.flags = M0__ENV_SEALED;
  m0__env_write(nng_msg_body(m), &e, (uint32_t)len);
  if (seal) { /* over the header as written and the payload: it proves this message (runtime/seal.h) */
    uint8_t *at = m0__msg_extend(m, M0__SEAL_LEN);
    if (!at) return M0__ENOMEM;
    m0__family_seal(nng_msg_body(m), M0__ENV_HEADER + len, at);
  }

  /* Traced and counted on its edge (the observer's, runtime/edges.h) before
   * the hand-over, and nothing touched after it: once handed over, the
   * message may be the receiver's, and its answer may end the drain and
   * unmap the page while a thread that is not the host's (a deferred
   * answer's) is still here. A send that fails takes its count back. */
  TRACE_HOOK(self, false, &e, len);
  m0__edge_sent(e.from, e.to, e.kind);
  if (nng_pipe_id(to->pipe) > 0) nng_msg_set_pipe(m, to->pipe);
  int rv = to->direct ? m0__inbox_put(to->direct, m) : nng_sendmsg(to->sock, m, 0);
  if (rv == 0) return 0;
  m0__edge_unsent(e.from, e.to);
  if (to->direct) return rv;
  if (seal) nng_msg_chop(m, M0__SEAL_LEN); /* still the caller's, as it was given */
  return rv == NNG_ETIMEDOUT ? M0__ETIMEDOUT : rv == NNG_ECLOSED ? M0__ECLOSED : M0__ETRANSPORT;
}

int m0__send(m0__actor *self, m0__peer *to, int kind, uint64_t trace_hi, uint64_t trace_lo,
             const void *payload, size_t len) {
  if (len > M0__ENV_MAX_PAYLOAD) return M0__ETOOBIG;
  nng_msg *m;
  if (m0__msg_new(&m, len) != 0) return M0__ENOMEM;
  int rv = len ? m0__msg_append(m, payload, len) : 0;
  if (rv == 0) rv = m0__send_msg(self, to, kind, trace_hi, trace_lo, m);
  if (rv != 0) nng_msg_free(m);
  return rv;
}

int m0__tell(m0__actor *self, m0__peer *to, int kind, const void *payload, size_t len) {
  int rv = m0__send(self, to, kind, 0, 0, payload, len);
  if (rv != 0) {
    char from[48], dest[48];
    m0__actor_name(self->id, from, sizeof from);
    m0__actor_name(to->id, dest, sizeof dest);
    fprintf(stderr, "m0: %s cannot send %s to %s: %s\n", from, m0__kind_name(kind), dest, m0__strerror(rv));
  }
  return rv;
}

/* nng's non-blocking receive, its errors as ours. */
static int recv_mailbox(m0__actor *self, nng_msg **m, int flags) {
  int rv = nng_recvmsg(self->mailbox, m, flags);
  return rv == 0                                   ? 0
         : rv == NNG_EAGAIN || rv == NNG_ETIMEDOUT ? M0__ETIMEDOUT
         : rv == NNG_ECLOSED                       ? M0__ECLOSED
                                                   : M0__ETRANSPORT;
}

/* A look takes from the inbox, then from the mailbox without blocking. A
 * wait is a poll() on the inbox's eventfd (when there is one) and the
 * mailbox's receive descriptor, bounded by the mailbox's receive timeout:
 * nng cannot wait on both, and a timed nng receive arms a timer whose expiry
 * costs nng 1.5.2's expire thread up to a millisecond of spinning (it takes
 * only deadlines strictly in the past: see ARCHITECTURE.md, Messages, and
 * bench/RESULTS.md, "The measurements behind ARCHITECTURE.md"). */
static int recv_any(m0__actor *self, nng_msg **m, bool wait, bool *from_inbox) {
  if (self->inbox && (*m = m0__inbox_take(self->inbox))) return *from_inbox = true, 0;
  if (!wait) return recv_mailbox(self, m, NNG_FLAG_NONBLOCK);
  int fd;
  nng_duration ms = -1;
  if (m0__actor_recv_fd(self, &fd) != 0) return M0__ETRANSPORT;
  nng_socket_get_ms(self->mailbox, NNG_OPT_RECVTIMEO, &ms);
  for (;;) {
    struct pollfd pf[2] = {{.fd = fd, .events = POLLIN}, {.fd = self->inbox ? self->inbox->efd : -1, .events = POLLIN}};
    int rv = poll(pf, self->inbox ? 2 : 1, ms < 0 ? -1 : (int)ms);
    if (rv < 0 && errno == EINTR) continue;
    if (rv < 0) return M0__ETRANSPORT;
    if (rv == 0) return M0__ETIMEDOUT;
    if (self->inbox && (*m = m0__inbox_take(self->inbox))) return *from_inbox = true, 0;
    if (pf[0].revents && (rv = recv_mailbox(self, m, NNG_FLAG_NONBLOCK)) != M0__ETIMEDOUT) return rv;
  }
}

/* Names the peer on the other end of a pipe, for a refusal's line. */
static void peer_name(nng_pipe p, char *out, size_t n) {
  nng_sockaddr sa;
  if (nng_pipe_id(p) <= 0) {
    snprintf(out, n, "this process");
    return;
  }
  if (nng_pipe_get_addr(p, NNG_OPT_REMADDR, &sa) != 0) { /* it hung up before its message was read */
    snprintf(out, n, "a peer that has hung up (pipe %d)", (int)nng_pipe_id(p));
    return;
  }
  char host[INET6_ADDRSTRLEN];
  if (sa.s_family == NNG_AF_INET && inet_ntop(AF_INET, &sa.s_in.sa_addr, host, sizeof host)) {
    snprintf(out, n, "tcp peer %s:%u", host, (unsigned)ntohs(sa.s_in.sa_port));
  } else if (sa.s_family == NNG_AF_INET6 && inet_ntop(AF_INET6, sa.s_in6.sa_addr, host, sizeof host)) {
    snprintf(out, n, "tcp peer [%s]:%u", host, (unsigned)ntohs(sa.s_in6.sa_port));
  } else if (sa.s_family == NNG_AF_IPC) {
    uint64_t pid = 0;
    nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_PID, &pid);
    snprintf(out, n, "ipc peer pid %llu", (unsigned long long)pid);
  } else {
    snprintf(out, n, "an inproc peer");
  }
}

/* Where a message taken from the mailbox came from (runtime/admit.h), or a
 * refusal: sealed, but not by this host's key for this message (SEAL), or
 * seen before (REPLAY). */
static int origin_of(m0__actor *self, const m0__msg *m, int *refusal) {
  if (!(m->env.flags & M0__ENV_SEALED)) return self->unsealed;
  const uint8_t *seal = m->payload + m->len;
  int origin = m0__family_check(nng_msg_body(m->nmsg), M0__ENV_HEADER + m->len, seal);
  if (origin < 0) *refusal = M0__REFUSE_SEAL;
  else if (!m0__fresh_take(&self->fresh, m->env.from, seal)) *refusal = M0__REFUSE_REPLAY, origin = -1;
  return origin;
}

int m0__recv(m0__actor *self, m0__msg *out, int how) {
  nng_msg *m = NULL;
  int rv;
  bool from_inbox = false;
  if (how == M0__RECV_INBOX) {
    if (!self->inbox || !(m = m0__inbox_take(self->inbox))) return M0__ETIMEDOUT;
    from_inbox = true;
  } else if (how == M0__RECV_BLOCK) {
    if ((rv = recv_mailbox(self, &m, 0)) != 0) return rv;
  } else if ((rv = recv_any(self, &m, how == M0__RECV_WAIT, &from_inbox)) != 0) {
    return rv;
  }
  /* Nothing from a peer is trusted until admitted: its envelope, its seal,
   * then the mailbox's accept list (runtime/admit.h). An inbox is this
   * process's own (what a service's reply thread put there it admitted). */
  out->nmsg = m;
  int refusal = -1;
  if (m0__env_read(nng_msg_body(m), nng_msg_len(m), &out->env, &out->payload, &out->len) != 0) {
    refusal = M0__REFUSE_MALFORMED;
    out->env.kind = 0;
  } else if ((out->origin = from_inbox ? M0__ORIGIN_SELF : origin_of(self, out, &refusal)) < 0) {
    /* refusal says which: SEAL or REPLAY */
  } else if (M0__ACTOR_ROLE(self->id) != M0__ROLE_APP && out->env.to != self->id) {
    refusal = M0__REFUSE_ADDRESS;
  } else if ((rv = m0__admit(self->id, &out->env, out->origin)) != 0) {
    refusal = rv;
  } else if (!from_inbox && (out->env.kind == M0__K_JOB || out->env.kind == M0__K_RESULT ||
                             out->env.kind == M0__K_ANSWER || out->env.kind == M0__K_CHUNK)) {
    /* These carry this process's pointers and travel only through direct
     * inboxes: one through a pipe was forged (a loop answering a forged
     * RESULT's connection address crashed the host). */
    refusal = M0__REFUSE_KIND;
  }
  if (refusal >= 0) {
    char peer[96];
    peer_name(from_inbox ? (nng_pipe){0} : nng_msg_get_pipe(m), peer, sizeof peer);
    m0__refused(self->id, refusal, out->env.kind, peer);
    nng_msg_free(m);
    out->nmsg = NULL;
    return M0__EBADMSG;
  }
  TRACE_HOOK(self, true, &out->env, out->len);
  /* The observer's waiting messages (runtime/edges.h): a host actor's, whose
   * sends are counted; an outside peer's `from` is its own word. */
  if (out->origin <= M0__ORIGIN_FAMILY) m0__edge_taken(out->env.from, out->env.to);
  return 0;
}

void m0__msg_peer(const m0__msg *m, char *out, size_t n) {
  if (m->origin == M0__ORIGIN_SELF || m->origin == M0__ORIGIN_FAMILY) { /* admitted: the sender is who it says */
    char who[48];
    m0__actor_name(m->env.from, who, sizeof who);
    if (m->env.flags & M0__ENV_SEALED)
      snprintf(out, n, "%s of this host (pid %u)", who, (unsigned)m0__seal_pid(m->payload + m->len));
    else
      snprintf(out, n, "%s of this process", who);
    return;
  }
  peer_name(nng_msg_get_pipe(m->nmsg), out, n);
}

void m0__msg_free(m0__msg *m) {
  if (m->nmsg) nng_msg_free(m->nmsg);
  m->nmsg = NULL;
}
