/* m0_actor_run: one instance of an application actor outside the host — in
 * a process the host spawned (placement "process") or in any program
 * (placement "external"). It speaks the wire of docs/wire.md over a pair1
 * socket dialed to the actor's URL, with the same core as a thread instance
 * (service/instance.h).
 *
 * Design notes
 * - The dial does not need the host to be up: nng redials in the
 *   background, and a host that restarts is found again.
 * - Over plain tcp the host asks it to prove it holds the actor's secret
 *   (runtime/proof.h): a HELLO whose payload it answers with its HMAC. The
 *   secret is M0__ACTOR_SECRET's (a spawned instance's, taken out of the
 *   environment at once, so the application's own children never see it)
 *   or the key file M0_ACTOR_SECRET_FILE names (an outside one).
 * - A STOP that says the host reloads (docs/wire.md) is no end: the
 *   connection is closed and the dialer redials the same URL, which the
 *   next generation binds once the old one has let it go (redials every
 *   10 ms at first, at most 100 ms apart).
 * - SIGTERM and SIGINT end it between batches. They are blocked before
 *   nng starts its threads (which inherit the mask) and read from a
 *   signalfd polled beside the socket's receive descriptor: no handler runs
 *   on an nng thread and interrupts its system calls (with a handler, the
 *   close after a drain's STOP and SIGTERM hung in nng 1.5.2 in 3 of 8
 *   drains), and no timer is needed to notice them.
 * - Its own sends and calls (service/remote.h) go to the host over this
 *   link as MESSAGEs naming their actor; a call waits on the link for its
 *   RETURN (matched by its call id), and what else comes meanwhile — the
 *   host's requests, messages, a STOP — is kept, in order, and taken
 *   before anything newer once the call is over.
 */
#include <errno.h>
#include <nng/nng.h>
#include <nng/protocol/pair1/pair.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/signalfd.h>
#include <time.h>
#include <string.h>
#include <unistd.h>

#include "runtime/envelope.h"
#include "service/instance.h"
#include "service/nats.h"
#include "service/remote.h"
#include "service/stream.h"
#include "runtime/kinds.h"
#include "runtime/proof.h"
#include "bus/publisher.h"
#include "service/wire.h"
#include "base/errors.h"
#include "base/nng_compat.h"
#include "m0/m0.h"
#include "transport/links.h"
#include "transport/topology.h"
#include "base/clock.h"

#define REMOTE_REJOIN_MS 2000

/* The connections up now, counted from nng's pipe events. */
static void remote_pipe(nng_pipe p, nng_pipe_ev ev, void *arg) {
  (void)p;
  atomic_fetch_add((atomic_int *)arg, ev == NNG_PIPE_EV_ADD_POST ? 1 : -1);
}

/* The next message, or NULL when a signal asked to stop or the socket
 * closed; *idle set (and NULL) when nothing came within wait_ms (-1: no
 * bound). */
static nng_msg *remote_next(nng_socket sock, int rfd, int sfd, int wait_ms, bool *idle) {
  *idle = false;
  for (;;) {
    nng_msg *m;
    if (nng_recvmsg(sock, &m, NNG_FLAG_NONBLOCK) == 0) return m;
    struct pollfd pf[2] = {{.fd = rfd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
    int rv = poll(pf, 2, wait_ms);
    if (rv < 0 && errno == EINTR) continue;
    if (rv == 0) {
      *idle = true;
      return NULL;
    }
    if (rv < 0 || pf[1].revents) return NULL;
  }
}

/* nng 1.5.2's close of this dialing pair1 socket, right after the host's
 * STOP, hangs now and then in a wait of nng's own (seen in about 1 of 10
 * drains, in both a spawned and an external instance, with or without a
 * signal; gdb: nng_close -> a condition variable, the reaper waiting too):
 * the close runs on a thread of its own and is waited for up to 100 ms (it
 * takes microseconds when it works); past that the instance returns anyway
 * and leaves that thread behind, said on stderr (its process is about to
 * exit: m0_actor_run is an instance's main). */
typedef struct closing {
  nng_socket sock;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  bool left; /* the waiter gave up: the close's thread frees it */
} closing;

static void closing_free(closing *c) {
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->cv);
  free(c);
}

static void *close_thread(void *arg) {
  closing *c = arg;
  m0__socket_close(c->sock);
  pthread_mutex_lock(&c->mu);
  c->done = true;
  bool left = c->left;
  pthread_cond_signal(&c->cv);
  pthread_mutex_unlock(&c->mu);
  if (left) closing_free(c);
  return NULL;
}

static void close_bounded(nng_socket sock) {
  closing *c = calloc(1, sizeof *c); /* each close its own: two instances of one program close at once */
  if (!c) {
    m0__socket_close(sock);
    return;
  }
  c->sock = sock;
  pthread_mutex_init(&c->mu, NULL);
  m0__cond_init_monotonic(&c->cv);
  pthread_t t;
  if (pthread_create(&t, NULL, close_thread, c) != 0) {
    closing_free(c);
    m0__socket_close(sock);
    return;
  }
  struct timespec until = m0__timespec_in(100);
  pthread_mutex_lock(&c->mu);
  while (!c->done && pthread_cond_timedwait(&c->cv, &c->mu, &until) == 0) {
  }
  bool done = c->done;
  c->left = !done;
  pthread_mutex_unlock(&c->mu);
  if (done) {
    pthread_join(t, NULL);
    closing_free(c);
  } else {
    pthread_detach(t);
    fprintf(stderr, "m0: nng did not close an actor's socket within 100 ms (nng 1.5.2's close hang); leaving it\n");
  }
}

/* This instance's secret, if it was given one: 0 (none is none), or 78
 * (a key file that is no key: said on stderr). */
static int remote_secret(const char *actor, m0__secret *sec) {
  sec->len = 0;
  const char *given = getenv("M0__ACTOR_SECRET"), *file = getenv("M0_ACTOR_SECRET_FILE");
  if (given) {
    int rv = m0__secret_from_text(given, sec);
    unsetenv("M0__ACTOR_SECRET");
    if (rv != 0) fprintf(stderr, "m0: actor %s: M0__ACTOR_SECRET is not 16 to 4096 bytes; ignored\n", actor);
    return 0;
  }
  char why[600], fix[600];
  if (file && file[0] && m0__secret_read_file(file, sec, why, sizeof why, fix, sizeof fix) != 0) {
    fprintf(stderr, "m0: actor %s: M0_ACTOR_SECRET_FILE: %s (%s)\n", actor, why, fix);
    return 78;
  }
  return 0;
}

/* The host's challenge (a HELLO): answered with this instance's proof. */
static void remote_prove(const char *actor, const m0__secret *sec, nng_socket sock, const m0__env *e,
                         const uint8_t *c, size_t n, bool *said) {
  nng_msg *out;
  if (!sec->len) {
    if (!*said)
      fprintf(stderr, "m0: actor %s: the host asks this instance to prove it holds the actor's secret, and it has "
                      "none (give its key file in M0_ACTOR_SECRET_FILE, or dial a %s or %s URL)\n",
              actor, m0__url_prefix(M0__URL_TLS_TCP), m0__url_prefix(M0__URL_IPC));
    *said = true;
    return;
  }
  if (nng_msg_alloc(&out, M0__ENV_HEADER + M0__PROOF_MAC) != 0) return;
  m0__env r = {.kind = M0__K_HELLO, .from = e->to, .to = e->from};
  m0__env_write(nng_msg_body(out), &r, M0__PROOF_MAC);
  if (m0__proof_answer(sec, c, n, (uint8_t *)nng_msg_body(out) + M0__ENV_HEADER) != 0 || nng_sendmsg(sock, out, 0) != 0)
    nng_msg_free(out);
}

/* Redials soon after a reload closes the connection (docs/wire.md); pipes
 * counted. */
static void remote_options(nng_socket sock, atomic_int *pipes) {
  nng_socket_set_ms(sock, NNG_OPT_RECONNMINT, 10);
  nng_socket_set_ms(sock, NNG_OPT_RECONNMAXT, 100);
  nng_socket_set_ms(sock, NNG_OPT_SENDTIMEO, 1000); /* a reply or a frame the link cannot take is dropped */
  nng_pipe_notify(sock, NNG_PIPE_EV_ADD_POST, remote_pipe, pipes);
  nng_pipe_notify(sock, NNG_PIPE_EV_REM_POST, remote_pipe, pipes);
}

/* No connection REMOTE_REJOIN_MS after a reload's STOP: nng 1.5.2's dialer
 * now and then stops redialing (about 1 move in 900, seen in both the C and
 * the Python runner), so the socket is made again and dialed. 0, or
 * M0__ETRANSPORT (the old one kept). */
static int remote_reopen(nng_socket *sock, int *rfd, const char *url, atomic_int *pipes, m0_publisher *pub) {
  nng_socket fresh;
  if (nng_pair1_open(&fresh) != 0) return M0__ETRANSPORT;
  atomic_store(pipes, 0); /* the old socket's are gone with it */
  remote_options(fresh, pipes);
  int fd;
  if (m0__link_dial(fresh, url, NNG_FLAG_NONBLOCK) != 0 || nng_socket_get_int(fresh, NNG_OPT_RECVFD, &fd) != 0) {
    m0__socket_close(fresh);
    return M0__ETRANSPORT;
  }
  nng_socket old = *sock;
  pthread_mutex_lock(&pub->mu);
  pub->link = fresh;
  pthread_mutex_unlock(&pub->mu);
  *sock = fresh;
  *rfd = fd;
  close_bounded(old);
  return 0;
}

/* Takes the stop signals that came (so none is left pending), closes the
 * descriptor and gives the thread its mask back. */
static void signals_restore(int sfd, const sigset_t *old) {
  struct signalfd_siginfo si;
  while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
  }
  close(sfd);
  pthread_sigmask(SIG_SETMASK, old, NULL);
}

/* One instance's run (m0_actor_run): its socket, its stop signals, its
 * secret and publisher, and where a reload's move stands. */
typedef struct remote_run {
  const m0_actor_kind *kind;
  const char *url;
  int instance;
  sigset_t old; /* the thread's mask before the stop signals were blocked */
  int sfd, rfd;
  nng_socket sock;
  atomic_int pipes;
  m0__secret sec;
  bool said_no_secret;
  m0_publisher pub;
  void *state;
  uint64_t seq;
  /* A reload's STOP came then, and no connection has lasted since (0:
   * none). One up 300 ms after it is the next generation's (the old one
   * closes a redial at once, and this one's own close is done by then). */
  int64_t moving;
  /* What came while one of its own calls waited (service/remote.h). */
  nng_msg **stash;
  int nstash, capstash;
  uint64_t calls;
  m0__streams *sx; /* its replies that stream (service/stream.h) */
  m0__reply_room room; /* its REPLY batches' room (service/instance.h) */
} remote_run;

/* The instance this thread runs (inside its receive or message), or NULL. */
static _Thread_local remote_run *remote_current;

/* The socket opened, its identity loaded and dialed: 0, or the exit code
 * (said on stderr; the socket and the signals given back). */
static int remote_dial(remote_run *r) {
  const char *name = r->kind->name;
  char terr[1200];
  int code = 0, rv = 0;
  remote_options(r->sock, &r->pipes);
  /* tls+tcp://: this program's identity is M0_TLS_CERT, M0_TLS_KEY and
   * M0_TLS_CA (an outside program has no topology file; a spawned one is
   * given the host's), loaded after the mask (nng's TLS starts its
   * threads). */
  if (m0__link_encrypted(r->url) && m0__links_tls_env(terr, sizeof terr) != 0) {
    fprintf(stderr, "m0: actor %s cannot dial %s: %s\n", name, r->url, terr);
    code = 78;
  } else if (remote_secret(name, &r->sec) != 0) {
    code = 78;
  } else {
    rv = m0__link_dial(r->sock, r->url, 0);
    if (rv != 0) rv = m0__link_dial(r->sock, r->url, NNG_FLAG_NONBLOCK); /* not up yet: redialed in the background */
    if (rv != 0 || nng_socket_get_int(r->sock, NNG_OPT_RECVFD, &r->rfd) != 0) {
      fprintf(stderr, "m0: actor %s cannot dial %s: %s\n", name, r->url, nng_strerror(rv ? rv : NNG_EINVAL));
      code = 1;
    }
  }
  if (code) {
    m0__socket_close(r->sock);
    signals_restore(r->sfd, &r->old);
  }
  return code;
}

/* The stop signals taken as a descriptor, the socket opened, dialed, and
 * the kind's make run: 0, or the exit code (everything given back). */
static int remote_begin(remote_run *r) {
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGTERM);
  sigaddset(&stops, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stops, &r->old);
  r->sfd = signalfd(-1, &stops, SFD_CLOEXEC | SFD_NONBLOCK);
  if (r->sfd < 0 || nng_pair1_open(&r->sock) != 0) {
    fprintf(stderr, "m0: actor %s: cannot open a pair1 socket\n", r->kind->name);
    if (r->sfd >= 0) signals_restore(r->sfd, &r->old);
    else pthread_sigmask(SIG_SETMASK, &r->old, NULL);
    return 1;
  }
  int code = remote_dial(r);
  if (code) return code;
  char err[512] = "";
  /* Frames this instance publishes go to the host, which numbers them. */
  m0__publisher_link(&r->pub, r->sock, M0__ACTOR_ID(M0__ROLE_APP, r->instance & 0xfff));
  m0_actor_ctx ctx = {.actor = r->kind->name, .instance = r->instance, .instances = 0, .config = NULL,
                      .publisher = &r->pub};
  if (r->kind->make && !(r->state = r->kind->make(&ctx, err, sizeof err))) {
    fprintf(stderr, "m0: actor %s: %s\n", r->kind->name, err[0] ? err : "make failed");
    m0__socket_close(r->sock);
    m0__publisher_close(&r->pub);
    signals_restore(r->sfd, &r->old);
    return 78;
  }
  return 0;
}

/* A REQUEST batch answered by the kind, the REPLY sent back to whoever
 * asked (from and to swapped). */
static void remote_answer(remote_run *r, const m0__env *e, const uint8_t *payload, size_t len) {
  nng_msg *out;
  if (m0__instance_reply_new(&r->room, len, &out) != 0) return;
  m0__msg req = {.env = *e, .payload = payload, .len = len};
  if (m0__instance_answer_sx(r->kind, r->state, &req, out, NULL, NULL, NULL, r->sx) < 0)
    fprintf(stderr, "m0: actor %s: a malformed request batch\n", r->kind->name);
  m0__instance_reply_took(&r->room, len, out);
  m0__env rep = {.kind = M0__K_REPLY, .from = e->to, .to = e->from, .seq = ++r->seq, .trace_hi = e->trace_hi,
                 .trace_lo = e->trace_lo};
  m0__env_write(nng_msg_body(out), &rep, (uint32_t)(nng_msg_len(out) - M0__ENV_HEADER));
  if (nng_sendmsg(r->sock, out, 0) != 0) nng_msg_free(out);
}

/* A STREAM to the loop that asked, over the link, from any thread of the
 * instance (an nng socket's send is): under the streams' lock, which
 * m0__streams_close takes before the socket closes. */
static int remote_stream_send(void *ctx, uint32_t from, uint32_t to, nng_msg *m) {
  remote_run *r = ctx;
  m0__env e = {.kind = M0__K_STREAM, .from = from, .to = to};
  m0__env_write(nng_msg_body(m), &e, (uint32_t)(nng_msg_len(m) - M0__ENV_HEADER));
  return nng_sendmsg(r->sock, m, 0) == 0 ? 0 : M0__ETRANSPORT;
}

/* A MESSAGE given to the kind; its RETURN (a call's answer, a send's
 * acknowledgement: docs/wire.md) sent back to its caller. */
static void remote_message(remote_run *r, const m0__env *e, const uint8_t *payload, size_t len) {
  nng_msg *ret;
  m0__msg msg = {.env = *e, .payload = payload, .len = len};
  if (m0__instance_message(r->kind, r->state, &msg, NULL, true, &ret) != 0)
    fprintf(stderr, "m0: actor %s: a malformed message\n", r->kind->name);
  if (!ret) return;
  m0__env out = {.kind = M0__K_RETURN, .from = e->to, .to = e->from, .seq = ++r->seq, .trace_hi = e->trace_hi,
                 .trace_lo = e->trace_lo};
  m0__env_write(nng_msg_body(ret), &out, (uint32_t)(nng_msg_len(ret) - M0__ENV_HEADER));
  if (nng_sendmsg(r->sock, ret, 0) != 0) nng_msg_free(ret);
}

/* One message from the host, taken and freed: false when it is the STOP
 * that ends the run. */
static bool remote_take(remote_run *r, nng_msg *m) {
  const char *name = r->kind->name;
  m0__env e;
  const uint8_t *payload;
  size_t len;
  bool go_on = true;
  if (m0__env_read(nng_msg_body(m), nng_msg_len(m), &e, &payload, &len) != 0) {
    fprintf(stderr, "m0: actor %s: dropped a malformed message\n", name);
  } else if (e.kind == M0__K_STOP && len == 1 && payload[0] == 1) {
    /* The host reloads (docs/wire.md): this connection closed, the
     * dialer redials the same URL, where the next generation listens. */
    fprintf(stderr, "m0: actor %s: the host reloads; redialing %s\n", name, r->url);
    /* Its streams' loops end with this generation: every open writer is
     * gone (EPIPE), and the streams after it are new ones. */
    m0__streams_close(r->sx);
    r->sx = m0__streams_new(remote_stream_send, r);
    nng_pipe_close(nng_msg_get_pipe(m));
    r->moving = m0__now_ms();
  } else if (e.kind == M0__K_STOP) {
    go_on = false;
  } else if (e.kind == M0__K_HELLO) {
    remote_prove(name, &r->sec, r->sock, &e, payload, len, &r->said_no_secret);
  } else if (e.kind == M0__K_REQUEST) {
    remote_answer(r, &e, payload, len);
    m0__instance_reply_keep(&r->room, &m); /* answered: its block is the next REPLY's */
  } else if (e.kind == M0__K_MESSAGE) {
    remote_message(r, &e, payload, len);
  } else if (e.kind == M0__K_CREDIT && r->sx) {
    m0__streams_credit(r->sx, e.from, payload, len); /* a stream's room, or its client gone */
  }
  if (m) nng_msg_free(m);
  return go_on;
}

/* During a reload's move: the connection that lasted ends it, and none
 * REMOTE_REJOIN_MS after the STOP makes the socket again. */
static void remote_move(remote_run *r) {
  if (atomic_load(&r->pipes) > 0 && m0__now_ms() - r->moving >= 300) r->moving = 0;
  if (!r->moving || m0__now_ms() - r->moving < REMOTE_REJOIN_MS) return;
  fprintf(stderr, "m0: actor %s: no connection %d ms after the reload; dialing %s again\n", r->kind->name,
          REMOTE_REJOIN_MS, r->url);
  if (remote_reopen(&r->sock, &r->rfd, r->url, &r->pipes, &r->pub) != 0)
    fprintf(stderr, "m0: actor %s: cannot make a socket to dial again; the old one redials on\n", r->kind->name);
  r->moving = m0__now_ms();
}

/* ---- its own sends and calls ---- */

bool m0__remote_here(void) { return remote_current != NULL; }

static int remote_fail(int err, int code) {
  errno = err;
  return code;
}

/* A MESSAGE (call 0: a send) to `actor`, through the host. */
static int remote_tell(remote_run *r, uint64_t call, const char *actor, uint32_t type, const void *data,
                          size_t len) {
  nng_msg *m;
  int rv = m0__wire_message_new(&m, call, type, actor, data, len);
  if (rv != 0) return remote_fail(rv == M0__ETOOBIG ? EMSGSIZE : ENOMEM, rv);
  m0__env e = {.kind = M0__K_MESSAGE, .seq = ++r->seq, .trace_hi = m0__current_trace.hi,
               .trace_lo = m0__current_trace.lo}; /* from 0: the host knows it by its link */
  m0__env_write(nng_msg_body(m), &e, (uint32_t)(nng_msg_len(m) - M0__ENV_HEADER));
  if (nng_sendmsg(r->sock, m, 0) == 0) return 0;
  nng_msg_free(m);
  return remote_fail(EAGAIN, M0__ECLOSED);
}

int m0__remote_send(const char *actor, uint32_t type, const void *data, size_t len) {
  remote_run *r = remote_current;
  if (!r || !actor) return remote_fail(ENOENT, M0__EINVALID);
  return remote_tell(r, 0, actor, type, data, len);
}

static bool remote_keep(remote_run *r, nng_msg *m) {
  if (r->nstash == r->capstash) {
    int cap = r->capstash ? 2 * r->capstash : 16;
    nng_msg **n = realloc(r->stash, (size_t)cap * sizeof *n);
    if (!n) return false;
    r->stash = n;
    r->capstash = cap;
  }
  r->stash[r->nstash++] = m;
  return true;
}

/* Whether m is the RETURN of call `call`; if so *rv is the call's end (0
 * and the answer copied out, or an errno). */
static bool remote_answered(nng_msg *m, uint64_t call, uint32_t *type, m0_str *data, void **mem, int *rv) {
  m0__env e;
  const uint8_t *payload;
  size_t len;
  m0__wire_message a;
  if (m0__env_read(nng_msg_body(m), nng_msg_len(m), &e, &payload, &len) != 0 || e.kind != M0__K_RETURN ||
      m0__wire_return_read(payload, len, &a) != 0 || a.call != call)
    return false;
  if (a.code == M0__RETURN_REFUSED) *rv = a.data.n >= 4 ? (int)m0__le_get32((const uint8_t *)a.data.p) : EAGAIN;
  else if (a.code != M0__RETURN_ANSWERED) *rv = ENODATA;
  else if (!(*mem = malloc(a.data.n ? a.data.n : 1))) *rv = ENOMEM;
  else {
    if (a.data.n) memcpy(*mem, a.data.p, a.data.n);
    *type = a.type;
    *data = (m0_str){*mem, a.data.n};
    *rv = 0;
  }
  return true;
}

int m0__remote_call(const char *actor, uint32_t type, const void *data, size_t len, unsigned timeout_ms,
                    uint32_t *out_type, m0_str *out_data, void **out_mem) {
  remote_run *r = remote_current;
  if (!r || !actor) return remote_fail(ENOENT, M0__EINVALID);
  uint64_t call = ++r->calls;
  int rv = remote_tell(r, call, actor, type, data, len);
  if (rv != 0) return rv;
  int64_t deadline = m0__now_ms() + (timeout_ms ? timeout_ms : 1000);
  for (;;) {
    int64_t left = deadline - m0__now_ms();
    bool idle;
    nng_msg *m = left > 0 ? remote_next(r->sock, r->rfd, r->sfd, (int)left, &idle) : NULL;
    if (!m) return remote_fail(ETIMEDOUT, M0__ETIMEDOUT); /* or a signal: the run ends after this call */
    int got = EAGAIN;
    if (remote_answered(m, call, out_type, out_data, out_mem, &got)) {
      nng_msg_free(m);
      return got == 0 ? 0 : remote_fail(got, got == ENOMEM ? M0__ENOMEM : M0__ECLOSED);
    }
    if (!remote_keep(r, m)) nng_msg_free(m); /* another call's late RETURN, a request: kept for after */
  }
}

int m0__remote_ask(const char *actor, const m0_request *req, unsigned timeout_ms, m0_answer *out) {
  if (!req) return remote_fail(ENOENT, M0__EINVALID);
  m0_request q = *req;
  q.params = NULL; /* path parameters are the route's, not the actor's */
  q.nparams = 0;
  nng_msg *m;
  int rv = m0__wire_batch_new(&m, 256);
  if (rv == 0 && (rv = m0__wire_request_add(m, 1, &q)) != 0) nng_msg_free(m);
  if (rv != 0) return remote_fail(rv == M0__ETOOBIG ? EMSGSIZE : ENOMEM, rv);
  uint32_t type;
  m0_str data;
  void *mem = NULL;
  rv = m0__remote_call(actor, M0__MSG_ASK, (const uint8_t *)nng_msg_body(m) + M0__ENV_HEADER,
                       nng_msg_len(m) - M0__ENV_HEADER, timeout_ms, &type, &data, &mem);
  nng_msg_free(m);
  if (rv != 0) return rv;
  m0__wire_rd rd;
  m0__wire_reply rep;
  int got = ENODATA; /* an actor that answered the call, not the ask (no kind of ours does) */
  if (type == M0__MSG_ASK && m0__wire_open(&rd, (const uint8_t *)data.p, data.n) == 0 &&
      m0__wire_next_reply(&rd, &rep) == 1 && rep.id == 1)
    got = m0__wire_reply_copy(&rep, out);
  free(mem);
  return got == 0 ? 0 : remote_fail(got, got == ENOMEM ? M0__ENOMEM : M0__EBADMSG);
}

/* The oldest message kept while a call waited. */
static nng_msg *remote_unkeep(remote_run *r) {
  nng_msg *m = r->stash[0];
  memmove(r->stash, r->stash + 1, (size_t)--r->nstash * sizeof *r->stash);
  return m;
}

int m0_actor_run(const m0_actor_kind *kind, const char *url, int instance) {
  if (!kind || !kind->receive || !url) return 1;
  if (m0__nats_url(url)) return m0__nats_run(kind, url, instance); /* placed nats (service/nats.h) */
  /* On this stack, as it was before it became a struct: the socket's pipe
   * callbacks hold &run.pipes until the socket is closed. */
  remote_run run = {.kind = kind, .url = url, .instance = instance};
  remote_run *r = &run;
  int code = remote_begin(r);
  r->sx = code ? NULL : m0__streams_new(remote_stream_send, r); /* NULL: m0_reply_writer says NULL */
  remote_current = r; /* its receive's and message's sends and calls go over its link */
  bool exited = false;
  for (bool go_on = !code; go_on;) {
    bool idle = false; /* set by remote_next, read only when it gave nothing */
    nng_msg *m = r->nstash ? remote_unkeep(r) : remote_next(r->sock, r->rfd, r->sfd, r->moving ? 250 : -1, &idle);
    if (r->moving) remote_move(r);
    if (m) go_on = remote_take(r, m);
    else go_on = idle;
    const char *why = m0__instance_exiting(); /* m0_actor_exit: the host restarts it, or not (exit 1) */
    if (why && !code) {
      fprintf(stderr, "m0: actor %s: instance %d exits: %s\n", kind->name, instance, why);
      m0__instance_exit_clear(); /* a later m0_actor_run on this thread starts afresh */
      exited = true;
      go_on = false;
      code = 1;
    }
  }
  remote_current = NULL;
  m0__streams_close(r->sx); /* before the socket: its writers' sends end here */
  for (int i = 0; i < r->nstash; i++) nng_msg_free(r->stash[i]);
  free(r->stash);
  m0__instance_reply_fini(&r->room);
  if (!code || exited) {
    if (kind->free && r->state) kind->free(r->state);
    close_bounded(r->sock);
    m0__publisher_close(&r->pub);
    signals_restore(r->sfd, &r->old);
  }
  memset(&r->sec, 0, sizeof r->sec);
  return code;
}
