/* libFuzzer: the whole connection state machine. The input is written, in
 * pieces its bytes choose, into one end of a socketpair whose other end is a
 * real m0 connection on a real libuv loop (limits small, keep-alive and
 * pipelining on, a views table with an on-loop route and a 404/405 path);
 * then the client half-closes and the loop runs until the connection is
 * gone. Every answer must be a well-formed status line, and the loop must
 * end: a connection that never closes is a finding (the run aborts). The
 * first byte's top bit makes it a connection of the plain listener beside
 * HTTPS (http/plain.c: its requests redirected). */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "tests/fuzz/fz_conn.h"

static char fz_out[1 << 20];
static size_t fz_out_len;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fz_ignore_sigpipe();
  return 0;
}

static void fz_pump(void *arg) {
  int fd = *(int *)arg;
  ssize_t r;
  while ((r = read(fd, fz_out + fz_out_len, sizeof fz_out - fz_out_len)) > 0) fz_out_len += (size_t)r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) return 0;
  uv_loop_t loop;
  uv_loop_init(&loop);
  m0__http h;
  memset(&h, 0, sizeof h);
  m0__http_config cfg = fz_config();
  cfg.https_port = 8443;
  m0__http_init(&h, &loop, &cfg, &fz_ops, NULL);
  /* libuv takes an AF_UNIX stream as a tcp handle's descriptor fine. */
  if (m0__http_adopt(&h, sv[0], size && (data[0] & 0x80)) != 0) {
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
    fz_pump(&sv[1]);
  }
  shutdown(sv[1], SHUT_WR);
  fz_until_gone(&h, &loop, fz_pump, &sv[1]);
  if (fz_out_len && memcmp(fz_out, "HTTP/1.1 ", 9) != 0) abort();
  fz_end(&h, &loop);
  close(sv[1]);
  return 0;
}
