/* libFuzzer: an HTTP/2 connection whole (http/conn.c, http/h2*.c over
 * libnghttp2), as fuzz_conn drives HTTP/1.1. One end of a socketpair is a
 * real m0 connection with --http2 on a real libuv loop; the client's
 * preface is written first, then the input in pieces its bytes choose (so a
 * frame spans reads, and the next frame or the end lands in the same read as
 * the end of the last), then the client half-closes; past a bound of loop
 * turns the loop drains. Checked: the connection ends, and what the server
 * wrote is whole HTTP/2 frames back to back, the first its SETTINGS, each
 * of a type RFC 9113 defines, no stream id with the reserved bit. Routes:
 * an on-loop one, a body echo, 404/405 paths. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "tests/fuzz/fz_conn.h"

#define FZ_OUT (4u << 20)
static const char fz_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fz_ignore_sigpipe();
  return 0;
}

/* The server's bytes: whole frames back to back (RFC 9113 §4.1), SETTINGS
 * first, known types only, no reserved bit on a stream id. */
static void fz_check_frames(const uint8_t *o, size_t n) {
  size_t at = 0;
  for (int i = 0; at < n; i++) {
    if (n - at < 9) abort(); /* a frame cut short */
    size_t len = (size_t)o[at] << 16 | (size_t)o[at + 1] << 8 | o[at + 2];
    uint8_t type = o[at + 3];
    if (i == 0 && type != 4) abort(); /* the server's preface is a SETTINGS frame */
    if (type > 9) abort();
    if (o[at + 5] & 0x80) abort();
    if (len > n - at - 9) abort();
    at += 9 + len;
  }
}

typedef struct {
  int fd;
  uint8_t *out;
  size_t len;
} fz_sink;

static void fz_pump(void *arg) {
  fz_sink *k = arg;
  ssize_t r;
  while (k->len < FZ_OUT && (r = read(k->fd, k->out + k->len, FZ_OUT - k->len)) > 0) k->len += (size_t)r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) return 0;
  fz_sink k = {sv[1], malloc(FZ_OUT), 0};
  uv_loop_t loop;
  uv_loop_init(&loop);
  m0__http h;
  memset(&h, 0, sizeof h);
  m0__http_config cfg = fz_config();
  cfg.http2 = true;
  m0__http_init(&h, &loop, &cfg, &fz_ops, NULL);
  if (!k.out || m0__http_adopt(&h, sv[0], false) != 0) {
    free(k.out);
    close(sv[1]);
    uv_loop_close(&loop);
    m0__http_fini(&h);
    return 0;
  }
  if (write(sv[1], fz_preface, sizeof fz_preface - 1) < 0) abort();
  size_t at = 0;
  while (at < size) {
    size_t n = 1 + data[at] % 64; /* a byte of the input picks each piece's length */
    if (n > size - at) n = size - at;
    if (write(sv[1], data + at, n) < 0) break;
    at += n;
    uv_run(&loop, UV_RUN_NOWAIT);
    fz_pump(&k);
  }
  shutdown(sv[1], SHUT_WR);
  fz_until_gone(&h, &loop, fz_pump, &k);
  if (k.len < FZ_OUT) fz_check_frames(k.out, k.len);
  fz_end(&h, &loop);
  close(sv[1]);
  free(k.out);
  return 0;
}
