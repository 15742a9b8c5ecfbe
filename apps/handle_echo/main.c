/* handle_echo — an app that answers with `handle` instead of a views table:
 * every request, whatever its method and path, reaches the one function (the
 * host answers no 404, 405 or OPTIONS for it; under --blocking-threads every
 * request runs on a pool thread).
 *   /big?n=N[&static=1]  N bytes (0..8 MiB) of the pattern byte i = i % 251,
 *                        copied into the response, or with static=1 written
 *                        from the process's own copy (M0_BODY_STATIC); header
 *                        x-query: the query as sent
 *   /stream              a server-sent-event stream on channel "echo" (a
 *                        stream opens on the loop only: 409 under a pool)
 *   /silent              returns without answering (the host answers 500)
 *   /hold                waits (at most 30 s) for a /release, then answers
 *                        "released\n" (a request that stays in the pool for
 *                        as long as a test needs; only under --blocking-threads
 *                        2 or more, or it holds the loop); /release answers
 *                        "ok\n" (a release before the hold is kept for it)
 *   anything else        200 text/plain: "METHOD TARGET\nworker W thread T\n
 *                        body N\n" and then the N bytes of the request body
 */
#include <m0/m0.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BIG_MAX (8u << 20)

static char pattern[BIG_MAX]; /* filled before serving, read-only after */
static atomic_long releases;  /* /release adds one, a /hold takes one */

typedef struct echo {
  int worker, thread;
} echo;

static void *echo_make(const m0_ctx *ctx, char *err, size_t errlen) {
  echo *e = calloc(1, sizeof *e);
  if (!e) {
    snprintf(err, errlen, "handle_echo: out of memory");
    return NULL;
  }
  e->worker = ctx->worker;
  e->thread = ctx->thread;
  return e;
}

static void echo_free(void *state) { free(state); }

static bool path_is(const m0_request *req, const char *p) {
  return req->path.n == strlen(p) && memcmp(req->path.p, p, req->path.n) == 0;
}

static void echo_handle(void *state, const m0_request *req, m0_response *res) {
  echo *e = state;
  if (path_is(req, "/big")) {
    long n, st = 0;
    if (!m0_request_query_int(req, "n", 0, BIG_MAX, &n)) {
      m0_respondf(res, 400, "text/plain", "want n=0..%u\n", BIG_MAX);
      return;
    }
    m0_request_query_int(req, "static", 0, 1, &st);
    char q[256];
    snprintf(q, sizeof q, "%.*s", (int)req->query.n, req->query.p);
    m0_response_header(res, "x-query", q);
    m0_respond(res, 200, "application/octet-stream", pattern, (size_t)n, st ? M0_BODY_STATIC : M0_BODY_COPY);
    return;
  }
  if (path_is(req, "/stream")) {
    m0_respond_stream(res, "echo");
    return;
  }
  if (path_is(req, "/silent")) return;
  if (path_is(req, "/release")) {
    atomic_fetch_add(&releases, 1);
    m0_respond(res, 200, "text/plain", "ok\n", 3, M0_BODY_STATIC);
    return;
  }
  if (path_is(req, "/hold")) {
    struct timespec ms = {0, 1000000};
    for (int i = 0; i < 30000; i++) {
      long r = atomic_load(&releases);
      if (r > 0 && atomic_compare_exchange_weak(&releases, &r, r - 1)) {
        m0_respond(res, 200, "text/plain", "released\n", 9, M0_BODY_STATIC);
        return;
      }
      nanosleep(&ms, NULL);
    }
    m0_respond(res, 504, "text/plain", "no release within 30 s\n", 23, M0_BODY_STATIC);
    return;
  }
  char head[512];
  int k = snprintf(head, sizeof head, "%.*s %.*s\nworker %d thread %d\nbody %zu\n", (int)req->method.n,
                   req->method.p, (int)req->target.n, req->target.p, e->worker, e->thread, req->body.n);
  if (k < 0 || (size_t)k >= sizeof head) k = (int)sizeof head - 1;
  char *out = malloc((size_t)k + req->body.n);
  if (!out) {
    m0_respond(res, 503, "text/plain", "out of memory\n", 14, M0_BODY_STATIC);
    return;
  }
  memcpy(out, head, (size_t)k);
  if (req->body.n) memcpy(out + k, req->body.p, req->body.n);
  m0_respond(res, 200, "text/plain", out, (size_t)k + req->body.n, M0_BODY_COPY);
  free(out);
}

int main(int argc, char **argv) {
  for (size_t i = 0; i < BIG_MAX; i++) pattern[i] = (char)(i % 251);
  static const m0_app app = {
      .name = "handle_echo",
      .make = echo_make,
      .free = echo_free,
      .handle = echo_handle,
  };
  return m0_serve(&app, NULL, argc, argv);
}
