/* embed — a larger program that starts the host inside its own process. It
 * keeps main and its own SIGINT/SIGTERM handler, runs an nng actor of its own
 * (a "ticker" thread with a pull mailbox that main feeds), and that actor
 * publishes into the host's streams. SIGINT or SIGTERM: the program's handler
 * runs (it says so), then the program stops the host within its bound.
 *   GET /events   on the loop: a stream of the ticker's "tick" events
 *   GET /health   on the loop
 * Flags are the host's (--port, --threads, ...).
 */
#include <m0/m0.h>
#include <nng/nng.h>
#include <nng/protocol/pipeline0/pull.h>
#include <nng/protocol/pipeline0/push.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t embed_stop;
static void on_signal(int sig) {
  static const char msg[] = "embed: the program's own signal handler ran\n";
  if (write(2, msg, sizeof msg - 1) < 0) { /* nothing to do */ }
  embed_stop = sig;
}

static void view_events(void *state, const m0_request *req, m0_response *res) { m0_respond_stream(res, "ticks"); }
static void view_health(void *state, const m0_request *req, m0_response *res) {
  m0_respond(res, 200, "application/json", "{\"status\":\"ok\"}", 15, M0_BODY_STATIC);
}
static const m0_route routes[] = {{"GET", "/events", view_events, M0_ON_LOOP},
                                  {"GET", "/health", view_health, M0_ON_LOOP}};
static const m0_app app = {.name = "embed", .routes = routes, .nroutes = 2};

/* nng 1.10 renamed nng_close to nng_socket_close (nng_close goes in nng 2);
 * nng 1.5 has only nng_close. */
#if NNG_MAJOR_VERSION > 1 || (NNG_MAJOR_VERSION == 1 && NNG_MINOR_VERSION >= 10)
#define embed_close nng_socket_close
#else
#define embed_close nng_close
#endif

/* The program's own actor: takes "tick N" messages from its mailbox and
 * publishes each into the host's streams. */
typedef struct ticker {
  nng_socket mailbox;
  m0_publisher *pub;
  long published, refused;
} ticker;

static void *ticker_main(void *arg) {
  ticker *t = arg;
  for (;;) {
    char *buf;
    size_t n;
    if (nng_recv(t->mailbox, &buf, &n, NNG_FLAG_ALLOC) != 0) break; /* closed: done */
    bool stop = n == 4 && memcmp(buf, "stop", 4) == 0;
    if (!stop) {
      char frame[128];
      int len = snprintf(frame, sizeof frame, "event: tick\ndata: %.*s", (int)n, buf);
      if (m0_publish(t->pub, "ticks", m0_next_id(t->pub), frame, (size_t)len)) t->published++;
      else t->refused++;
    }
    nng_free(buf, n);
    if (stop) break;
  }
  return NULL;
}

int main(int argc, char **argv) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  int code;
  char err[1024];
  m0_host *host = m0_host_start(&app, NULL, argc, argv, &code, err, sizeof err);
  if (!host) {
    fprintf(stderr, "embed: the host refused: %s\n", err);
    return code;
  }
  fprintf(stderr, "embed: serving on http://127.0.0.1:%d (run dir %s)\n", m0_host_port(host), m0_host_run_dir(host));

  ticker t = {.pub = m0_host_publisher(host)};
  nng_socket feed;
  pthread_t th;
  if (nng_pull0_open(&t.mailbox) || nng_listen(t.mailbox, "inproc://embed/ticker", NULL, 0) ||
      nng_push0_open(&feed) || nng_dial(feed, "inproc://embed/ticker", NULL, 0) ||
      pthread_create(&th, NULL, ticker_main, &t)) {
    fprintf(stderr, "embed: cannot start the ticker actor\n");
    m0_host_stop(host);
    return 1;
  }
  for (long k = 1; !embed_stop; k++) {
    char msg[32];
    int n = snprintf(msg, sizeof msg, "%ld", k);
    nng_send(feed, msg, (size_t)n, 0);
    usleep(100 * 1000);
  }
  nng_send(feed, "stop", 4, 0);
  pthread_join(th, NULL);
  embed_close(feed);
  embed_close(t.mailbox);
  int rc = m0_host_stop(host);
  fprintf(stderr, "embed: ticker published %ld (%ld refused); host stopped with %d\n", t.published, t.refused, rc);
  return rc;
}
