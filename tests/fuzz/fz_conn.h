/* What the connection targets (fuzz_conn, fuzz_h2_conn, fuzz_tls_conn)
 * share: the application a real m0 connection serves (an on-loop route, a
 * body echo; anything else is the host's 404/405), its configuration with
 * small limits, and the end of a run: the loop turned until the connection
 * is gone, drained past a bound of turns, its handles closed as the loop
 * closes them (actors/loop.c). Static: each target is its own program. */
#ifndef M0_TESTS_FUZZ_FZ_CONN_H
#define M0_TESTS_FUZZ_FZ_CONN_H

#include <signal.h>
#include <stdlib.h>
#include <uv.h>

#include "http/conn.h"

static void fz_hello(void *state, const m0_request *req, m0_response *res) {
  m0_respond(res, 200, "text/plain", "hi", 2, M0_BODY_STATIC);
}
static void fz_echo(void *state, const m0_request *req, m0_response *res) {
  m0_respond(res, 200, "application/octet-stream", req->body.p, req->body.n, M0_BODY_COPY);
}
static const m0_route fz_routes[] = {{"GET", "/hello", fz_hello, M0_ON_LOOP},
                                     {"POST", "/echo/{x}", fz_echo, 0}};
static const m0_app fz_app = {.name = "fuzz", .routes = fz_routes, .nroutes = 2};

static void fz_closed(m0__http *h) { uv_stop(h->uv); }
static const m0__http_ops fz_ops = {.closed = fz_closed};

/* Every m0 process ignores SIGPIPE (host/signals.c); the harness must too:
 * its own write into a socketpair the connection already closed would kill
 * the run otherwise (a finding of the long run, not of m0). */
static inline void fz_ignore_sigpipe(void) { signal(SIGPIPE, SIG_IGN); }

/* Small limits, keep-alive and pipelining on. */
static inline m0__http_config fz_config(void) {
  return (m0__http_config){.app = &fz_app, .lim = {1024, 256, 2048}, .header_timeout_ms = 1000,
                           .body_timeout_ms = 1000, .keepalive_timeout_ms = 1000, .max_keepalive_requests = 8};
}

/* The client has half-closed: turns the loop until the connection is gone
 * (pump reads what the server wrote after each turn), draining it after a
 * while; a connection that never ends is a finding (abort). */
static inline void fz_until_gone(m0__http *h, uv_loop_t *loop, void (*pump)(void *arg), void *arg) {
  for (int turns = 0; h->nconns > 0 && turns < 10000; turns++) {
    uv_run(loop, UV_RUN_NOWAIT);
    pump(arg);
    if (turns > 100) m0__http_drain(h, false); /* a bound: after a while, drain it */
  }
  if (h->nconns > 0) abort();
}

static void fz_close_handle(uv_handle_t *hd, void *arg) {
  (void)arg;
  if (!uv_is_closing(hd)) uv_close(hd, NULL);
}

/* Closes what is left on the loop (a transport's idle handle), then the
 * connection's state and the loop. */
static inline void fz_end(m0__http *h, uv_loop_t *loop) {
  uv_walk(loop, fz_close_handle, NULL);
  uv_run(loop, UV_RUN_DEFAULT);
  m0__http_fini(h);
  if (uv_loop_close(loop) != 0) abort();
}

#endif
