/* m0_actor_run for an actor placed "nats" (service/nats.h): one instance
 * that serves the actor's subject in its queue group, wherever it runs.
 *
 * Design notes
 * - The URL is the NATS server's and the subject, nats://HOST:PORT/SUBJECT
 *   (tls:// too). The queue group is the subject: every instance of the
 *   actor is in it, so NATS gives each request to one of them, and an
 *   instance joins or leaves by subscribing or going, without any host
 *   knowing how many there are.
 * - A request's payload is the wire's REQUEST batch (docs/wire.md), with
 *   no envelope; its answer, published to the request's reply subject, is
 *   the REPLY batch. A message with the header M0-Kind: message is a
 *   MESSAGE (a send, or a call whose RETURN is the answer). The same core
 *   as every other placement answers them (service/instance.h).
 * - libnats reconnects by itself (bus/natsopt.h) and subscribes again: a
 *   server that restarts is found again, as a host is by an nng dialer.
 * - SIGTERM and SIGINT end it between requests: blocked, and read from a
 *   signalfd each time the wait for the next request (at most
 *   NATSRUN_WAIT_MS) returns. It publishes nothing but answers: its
 *   m0_publish is refused (false), as are m0_send and m0_call from its
 *   receive. m0_actor_exit ends it after the message that called it
 *   (returns 1, out of the queue group): otherwise it would stay
 *   subscribed, answering nothing (instance.c takes no request while the
 *   flag is set).
 */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "bus/natsopt.h"
#include "bus/publisher.h"
#include "runtime/actor.h"
#include "runtime/envelope.h"
#include "runtime/kinds.h"
#include "service/instance.h"
#include "service/nats.h"
#include "service/wire.h"

#define NATSRUN_WAIT_MS 200

typedef struct natsrun {
  const m0_actor_kind *kind;
  void *state;
  natsOptions *opts;
  natsConnection *nc;
  natsSubscription *sub;
  char server[256], shown[256], subject[128]; /* shown: server, its password "***" (stderr) */
  int sfd, instance;
  sigset_t old;
  m0_publisher pub; /* linked to no socket: m0_publish from its receive is refused (false), not a crash */
} natsrun;

static void natsrun_on_up(natsConnection *nc, void *arg) {
  (void)nc;
  natsrun *r = arg;
  fprintf(stderr, "m0: actor %s: NATS %s is up; serving %s\n", r->kind->name, r->shown, r->subject);
}

/* url split into the server and the subject: false when either is none. */
static bool natsrun_split(natsrun *r, const char *url) {
  const char *host = strstr(url, "://"), *slash = host ? strchr(host + 3, '/') : NULL;
  if (!slash || (size_t)(slash - url) >= sizeof r->server || strlen(slash + 1) >= sizeof r->subject) return false;
  snprintf(r->server, sizeof r->server, "%.*s", (int)(slash - url), url);
  snprintf(r->subject, sizeof r->subject, "%s", slash + 1);
  m0__nats_url_shown(r->server, r->shown, sizeof r->shown);
  return m0__nats_url_ok(r->server) && m0__nats_subject_ok(r->subject);
}

/* A REQUEST batch answered into a REPLY batch, published to reply. */
static void natsrun_request(natsrun *r, const char *reply, const uint8_t *data, size_t len) {
  nng_msg *out;
  if (m0__wire_batch_new(&out, (len < (1u << 20) ? len : (1u << 20)) + 256) != 0) return;
  m0__msg req = {.env = {.kind = M0__K_REQUEST}, .payload = data, .len = len};
  if (m0__instance_answer(r->kind, r->state, &req, out, NULL, NULL, NULL) < 0)
    fprintf(stderr, "m0: actor %s: a malformed request batch\n", r->kind->name);
  natsStatus st = natsConnection_Publish(r->nc, reply, m0__msg_payload(out), (int)m0__msg_payload_len(out));
  if (st != NATS_OK) /* over the server's max_payload: the host's clients get 504 (docs/topology.md) */
    fprintf(stderr, "m0: actor %s: an answer of %zu bytes not sent: %s\n", r->kind->name, m0__msg_payload_len(out),
            natsStatus_GetText(st));
  nng_msg_free(out);
}

/* A MESSAGE: a call's RETURN published to reply (a send has none). */
static void natsrun_message(natsrun *r, const char *reply, const uint8_t *data, size_t len) {
  nng_msg *ret = NULL;
  m0__msg msg = {.env = {.kind = M0__K_MESSAGE}, .payload = data, .len = len};
  if (m0__instance_message(r->kind, r->state, &msg, NULL, false, &ret) != 0)
    fprintf(stderr, "m0: actor %s: a malformed message\n", r->kind->name);
  if (!ret) return;
  if (reply) natsConnection_Publish(r->nc, reply, m0__msg_payload(ret), (int)m0__msg_payload_len(ret));
  nng_msg_free(ret);
}

static void natsrun_take(natsrun *r, natsMsg *m) {
  const char *reply = natsMsg_GetReply(m), *kind = NULL;
  const uint8_t *data = (const uint8_t *)natsMsg_GetData(m);
  size_t len = (size_t)natsMsg_GetDataLength(m);
  if (natsMsgHeader_Get(m, "M0-Kind", &kind) == NATS_OK && kind && !strcmp(kind, "message"))
    natsrun_message(r, reply, data, len);
  else if (reply)
    natsrun_request(r, reply, data, len);
}

static bool natsrun_stopped(int sfd) {
  struct pollfd pf = {.fd = sfd, .events = POLLIN};
  return poll(&pf, 1, 0) > 0;
}

/* Connects and subscribes: 0, or the exit code (said on stderr). */
static int natsrun_begin(natsrun *r) {
  natsStatus st = m0__nats_options(&r->opts, r->server, NULL, natsrun_on_up, natsrun_on_up, r);
  if (st == NATS_OK) st = natsOptions_SetSendAsap(r->opts, true); /* each answer at once: see service/nats.c */
  if (st == NATS_OK) {
    st = natsConnection_Connect(&r->nc, r->opts);
    if (st == NATS_NOT_YET_CONNECTED) {
      fprintf(stderr, "m0: actor %s: NATS %s cannot be reached yet; trying on\n", r->kind->name, r->shown);
      st = NATS_OK;
    }
  }
  if (st == NATS_OK) st = natsConnection_QueueSubscribeSync(&r->sub, r->nc, r->subject, r->subject);
  /* Finite, libnats's defaults: past them it drops requests (their batches
   * answer 504 at the host) rather than grow with a flooding host. */
  if (st == NATS_OK) st = natsSubscription_SetPendingLimits(r->sub, 65536, 64 << 20);
  if (st != NATS_OK) {
    fprintf(stderr, "m0: actor %s cannot serve %s on NATS %s: %s\n", r->kind->name, r->subject, r->shown,
            natsStatus_GetText(st));
    return 1;
  }
  if (natsConnection_Status(r->nc) == NATS_CONN_STATUS_CONNECTED) natsrun_on_up(r->nc, r);
  return 0;
}

static void natsrun_end(natsrun *r) {
  if (r->sub) {
    natsSubscription_Unsubscribe(r->sub);
    natsSubscription_Destroy(r->sub);
  }
  if (r->nc) {
    natsConnection_FlushTimeout(r->nc, 500); /* the last answers on their way */
    natsConnection_Destroy(r->nc);
  }
  if (r->opts) natsOptions_Destroy(r->opts);
}

static int natsrun_serve(natsrun *r) {
  while (!natsrun_stopped(r->sfd)) {
    natsMsg *m = NULL;
    natsStatus st = natsSubscription_NextMsg(&m, r->sub, NATSRUN_WAIT_MS);
    if (st == NATS_OK) {
      natsrun_take(r, m);
      natsMsg_Destroy(m);
      const char *why = m0__instance_exiting(); /* m0_actor_exit: out of the queue group, as remote.c's run */
      if (why) {
        fprintf(stderr, "m0: actor %s: instance %d exits: %s\n", r->kind->name, r->instance, why);
        m0__instance_exit_clear(); /* a later m0_actor_run on this thread starts afresh */
        return 1;
      }
    } else if (st != NATS_TIMEOUT && st != NATS_SLOW_CONSUMER) {
      fprintf(stderr, "m0: actor %s: its subscription ended: %s\n", r->kind->name, natsStatus_GetText(st));
      return 1;
    }
  }
  return 0;
}

int m0__nats_run(const m0_actor_kind *kind, const char *url, int instance) {
  natsrun r = {.kind = kind, .sfd = -1, .instance = instance};
  if (!natsrun_split(&r, url)) {
    char shown[512];
    fprintf(stderr, "m0: actor %s: %s is not nats://HOST:PORT/SUBJECT (a subject of tokens of A-Z a-z 0-9 _ - "
                    "separated by dots)\n", kind->name,
            m0__nats_url_shown(url, shown, sizeof shown));
    return 78;
  }
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGTERM);
  sigaddset(&stops, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stops, &r.old); /* before libnats's threads, which inherit it */
  r.sfd = signalfd(-1, &stops, SFD_CLOEXEC | SFD_NONBLOCK);
  char err[512] = "";
  m0__publisher_link(&r.pub, (nng_socket)NNG_SOCKET_INITIALIZER, M0__ACTOR_ID(M0__ROLE_APP, instance & 0xfff));
  m0_actor_ctx ctx = {.actor = kind->name, .instance = instance, .instances = 0, .config = NULL,
                      .publisher = &r.pub};
  int code = r.sfd < 0 ? 1 : 0;
  if (!code && kind->make && !(r.state = kind->make(&ctx, err, sizeof err))) {
    fprintf(stderr, "m0: actor %s: %s\n", kind->name, err[0] ? err : "make failed");
    code = 78;
  }
  if (!code) code = natsrun_begin(&r);
  if (!code) code = natsrun_serve(&r);
  natsrun_end(&r);
  if (kind->free && r.state) kind->free(r.state);
  m0__publisher_close(&r.pub);
  if (r.sfd >= 0) { /* the signal taken: not delivered again once unblocked */
    struct signalfd_siginfo si;
    while (read(r.sfd, &si, sizeof si) == (ssize_t)sizeof si) {
    }
    close(r.sfd);
  }
  pthread_sigmask(SIG_SETMASK, &r.old, NULL);
  return code;
}
