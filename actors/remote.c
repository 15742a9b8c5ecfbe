/* m0_actor_run: one instance of an application actor outside the host — in
 * a process the host spawned (placement "process") or in any program
 * (placement "external"). It speaks the wire of docs/wire.md over a pair1
 * socket dialed to the actor's URL, with the same core as a thread instance
 * (actors/instance.h).
 *
 * Design notes
 * - The dial does not need the host to be up: nng redials in the
 *   background, and a host that restarts is found again.
 * - SIGTERM and SIGINT end it between batches: their handler writes a pipe
 *   that is polled beside the socket's receive descriptor, so no timer is
 *   needed to notice them.
 */
#include <errno.h>
#include <fcntl.h>
#include <nng/nng.h>
#include <nng/protocol/pair1/pair.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "actors/envelope.h"
#include "actors/instance.h"
#include "actors/kinds.h"
#include "actors/wire.h"
#include "base/errors.h"
#include "base/nng_compat.h"
#include "m0/m0.h"

static int stop_pipe[2] = {-1, -1};

static void on_stop_signal(int sig) {
  int saved = errno;
  if (write(stop_pipe[1], "x", 1) < 0) { /* the pipe is full: a stop is already pending */
  }
  errno = saved;
}

/* The next message, or NULL when a signal asked to stop or the socket closed. */
static nng_msg *remote_next(nng_socket sock, int rfd) {
  for (;;) {
    nng_msg *m;
    if (nng_recvmsg(sock, &m, NNG_FLAG_NONBLOCK) == 0) return m;
    struct pollfd pf[2] = {{.fd = rfd, .events = POLLIN}, {.fd = stop_pipe[0], .events = POLLIN}};
    int rv = poll(pf, 2, -1);
    if (rv < 0 && errno == EINTR) continue;
    if (rv < 0 || pf[1].revents) return NULL;
  }
}

int m0_actor_run(const m0_actor_kind *kind, const char *url, int instance) {
  if (!kind || !kind->receive || !url) return 1;
  nng_socket sock;
  int rfd;
  if (nng_pair1_open(&sock) != 0) {
    fprintf(stderr, "m0: actor %s: cannot open a pair1 socket\n", kind->name);
    return 1;
  }
  nng_socket_set_ms(sock, NNG_OPT_RECONNMINT, 10);
  nng_socket_set_ms(sock, NNG_OPT_RECONNMAXT, 200);
  int rv = nng_dial(sock, url, NULL, 0);
  if (rv != 0) rv = nng_dial(sock, url, NULL, NNG_FLAG_NONBLOCK); /* not up yet: redialed in the background */
  if (rv != 0 || nng_socket_get_int(sock, NNG_OPT_RECVFD, &rfd) != 0) {
    fprintf(stderr, "m0: actor %s cannot dial %s: %s\n", kind->name, url, nng_strerror(rv ? rv : NNG_EINVAL));
    m0__socket_close(sock);
    return 1;
  }
  if (stop_pipe[0] < 0 && pipe2(stop_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    m0__socket_close(sock);
    return 1;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);

  char err[512] = "";
  m0_actor_ctx ctx = {.actor = kind->name, .instance = instance, .instances = 0, .config = NULL};
  void *state = NULL;
  if (kind->make && !(state = kind->make(&ctx, err, sizeof err))) {
    fprintf(stderr, "m0: actor %s: %s\n", kind->name, err[0] ? err : "make failed");
    m0__socket_close(sock);
    return 78;
  }
  uint64_t seq = 0;
  nng_msg *m;
  while ((m = remote_next(sock, rfd)) != NULL) {
    m0__env e;
    const uint8_t *payload;
    size_t len;
    if (m0__env_read(nng_msg_body(m), nng_msg_len(m), &e, &payload, &len) != 0) {
      fprintf(stderr, "m0: actor %s: dropped a malformed message\n", kind->name);
      nng_msg_free(m);
      continue;
    }
    if (e.kind == M0__K_STOP) {
      nng_msg_free(m);
      break;
    }
    nng_msg *out;
    if (e.kind != M0__K_REQUEST || m0__wire_batch_new(&out, 256) != 0) {
      nng_msg_free(m);
      continue;
    }
    if (m0__instance_answer(kind, state, payload, len, out, NULL) < 0)
      fprintf(stderr, "m0: actor %s: a malformed request batch\n", kind->name);
    /* The answer goes back to whoever asked: from and to swapped. */
    m0__env r = {.kind = M0__K_REPLY, .from = e.to, .to = e.from, .seq = ++seq, .trace_hi = e.trace_hi,
                 .trace_lo = e.trace_lo};
    m0__env_write(nng_msg_body(out), &r, (uint32_t)(nng_msg_len(out) - M0__ENV_HEADER));
    nng_msg_free(m);
    if (nng_sendmsg(sock, out, 0) != 0) nng_msg_free(out);
  }
  if (kind->free && state) kind->free(state);
  m0__socket_close(sock);
  return 0;
}
