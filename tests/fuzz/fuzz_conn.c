/* libFuzzer: the whole connection state machine. The input is written, in
 * pieces its bytes choose, into one end of a socketpair whose other end is a
 * real m0 connection on a real libuv loop (limits small, keep-alive and
 * pipelining on, a views table with an on-loop route and a 404/405 path);
 * then the client half-closes and the loop runs until the connection is
 * gone. Every answer must be a well-formed status line, and the loop must
 * end: a connection that never closes is a finding (the run aborts). */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
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

static char fz_out[1 << 20];
static size_t fz_out_len;

static void fz_closed(m0__http *h) { uv_stop(h->uv); }

/* Every m0 process ignores SIGPIPE (host/signals.c); the harness must too:
 * its own write into a socketpair the connection already closed would kill
 * the run otherwise (a finding of the long run, not of m0). */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  signal(SIGPIPE, SIG_IGN);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) return 0;
  uv_loop_t loop;
  uv_loop_init(&loop);
  m0__http h;
  memset(&h, 0, sizeof h);
  static const m0__http_ops fz_ops = {.closed = fz_closed};
  m0__http_config cfg = {.app = &fz_app, .lim = {1024, 256, 2048}, .header_timeout_ms = 1000,
                         .body_timeout_ms = 1000, .keepalive_timeout_ms = 1000, .max_keepalive_requests = 8};
  m0__http_init(&h, &loop, &cfg, &fz_ops, NULL);
  /* libuv takes an AF_UNIX stream as a tcp handle's descriptor fine. */
  if (m0__http_adopt(&h, sv[0]) != 0) {
    close(sv[1]);
    uv_loop_close(&loop);
    m0__http_fini(&h);
    return 0;
  }
  /* Pieces: a byte of the input picks each piece's length. */
  size_t at = 0;
  fz_out_len = 0;
  while (at < size) {
    size_t n = 1 + data[at] % 64;
    if (n > size - at) n = size - at;
    if (write(sv[1], data + at, n) < 0) break;
    at += n;
    uv_run(&loop, UV_RUN_NOWAIT);
    ssize_t r;
    while ((r = read(sv[1], fz_out + fz_out_len, sizeof fz_out - fz_out_len)) > 0) fz_out_len += (size_t)r;
  }
  shutdown(sv[1], SHUT_WR);
  for (int turns = 0; h.nconns > 0 && turns < 10000; turns++) {
    uv_run(&loop, UV_RUN_NOWAIT);
    ssize_t r;
    while ((r = read(sv[1], fz_out + fz_out_len, sizeof fz_out - fz_out_len)) > 0) fz_out_len += (size_t)r;
    if (turns > 100) m0__http_drain(&h, false); /* a bound: after a while, drain it */
  }
  if (h.nconns > 0) abort(); /* the connection never ended */
  if (fz_out_len && memcmp(fz_out, "HTTP/1.1 ", 9) != 0) abort();
  uv_run(&loop, UV_RUN_NOWAIT);
  close(sv[1]);
  uv_loop_close(&loop);
  m0__http_fini(&h);
  return 0;
}
