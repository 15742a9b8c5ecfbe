/* libFuzzer: WebSocket's pure parts (http/ws.c), which read what any client
 * sends once a connection is upgraded. The input is read as a frame header
 * (with and without deflate), its payload unmasked whole and in two pieces
 * (which must agree), as UTF-8 whole and split (which must agree), as a
 * close payload, as a Sec-WebSocket-Extensions offer, and as a compressed
 * message inflated under a small bound; what inflates is deflated again and
 * must inflate back to itself. Any crash, leak, undefined behaviour or
 * abort is a finding. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/errors.h"
#include "http/ws.h"

#define FUZZ_MAX 4096

static void check_frame(const uint8_t *d, size_t n, bool deflate) {
  m0__ws_frame f;
  int rv = m0__ws_frame_parse(d, n, deflate, 1u << 20, &f);
  if (rv < 0) {
    if (rv != -M0__WS_PROTOCOL && rv != -M0__WS_TOO_BIG) abort();
    return;
  }
  if (rv == 0) return;
  if ((size_t)rv != f.hlen || f.hlen > M0__WS_HEADER_MAX || f.hlen > n || !f.masked || f.len > (1u << 20)) abort();
  if ((f.opcode & 8) && (f.len > 125 || !f.fin || f.rsv1)) abort();
  if (f.rsv1 && !deflate) abort();
  /* the header writer gives the same length form back */
  uint8_t h[M0__WS_HEADER_MAX];
  size_t hl = m0__ws_frame_header(h, f.opcode, f.fin, f.rsv1, f.len);
  if (hl + 4 != f.hlen || h[0] != d[0] || h[1] != (d[1] & 0x7f) || memcmp(h + 2, d + 2, hl - 2)) abort();
  size_t plen = n - f.hlen;
  uint8_t *a = malloc(plen + 1), *b = malloc(plen + 1);
  memcpy(a, d + f.hlen, plen);
  memcpy(b, d + f.hlen, plen);
  m0__ws_unmask(a, plen, f.mask, 0);
  size_t cut = plen ? d[0] % (plen + 1) : 0;
  m0__ws_unmask(b, cut, f.mask, 0);
  m0__ws_unmask(b + cut, plen - cut, f.mask, cut);
  if (memcmp(a, b, plen)) abort();
  free(a);
  free(b);
}

static void check_utf8(const uint8_t *d, size_t n) {
  m0__utf8 u = {0}, v = {0};
  bool ok = m0__utf8_feed(&u, d, n);
  size_t cut = n ? d[n - 1] % (n + 1) : 0;
  bool ok2 = m0__utf8_feed(&v, d, cut);
  ok2 = ok2 && m0__utf8_feed(&v, d + cut, n - cut);
  if (ok != ok2 || (ok && m0__utf8_done(&u) != m0__utf8_done(&v))) abort();
}

static void check_close(const uint8_t *d, size_t n) {
  int code = 0;
  int rv = m0__ws_close_parse(d, n, &code);
  if (rv != 0 && rv != -M0__WS_PROTOCOL && rv != -M0__WS_BAD_DATA) abort();
  if (rv == 0 && n == 0 && code != M0__WS_NO_STATUS) abort();
  if (rv == 0 && n >= 2 && (code < 1000 || code > 4999)) abort();
}

static void check_pmd(const uint8_t *d, size_t n) {
  m0__ws_pmd_params p;
  char resp[128];
  if (!m0__ws_pmd_negotiate((const char *)d, n, &p, resp, sizeof resp)) return;
  if (strlen(resp) >= sizeof resp || strncmp(resp, "permessage-deflate; server_no_context_takeover", 46)) abort();
  if (p.client_bits < 8 || p.client_bits > 15) abort();
}

static void check_inflate(const uint8_t *d, size_t n) {
  m0__ws_pmd_params p = {.client_no_context = n && (d[0] & 1), .client_bits = 15};
  m0__ws_inflater *in = m0__ws_inflater_new(&p);
  m0__ws_deflater *de = m0__ws_deflater_new();
  if (!in || !de) abort();
  m0__buf out = {0}, c = {0}, back = {0};
  int rv = m0__ws_inflate(in, d, n, &out, FUZZ_MAX);
  if (rv != 0 && rv != -M0__WS_TOO_BIG && rv != -M0__WS_PROTOCOL) abort();
  if (rv != 0 && out.len != 0) abort();
  if (rv == 0) {
    if (out.len > FUZZ_MAX) abort();
    /* a second message on the same stream must not break it */
    m0__buf_clear(&back);
    (void)m0__ws_inflate(in, d, n, &back, FUZZ_MAX);
    if (m0__ws_deflate(de, (const uint8_t *)out.p, out.len, &c)) abort();
    m0__ws_pmd_params q = {.client_no_context = true, .client_bits = 15};
    m0__ws_inflater *in2 = m0__ws_inflater_new(&q);
    m0__buf_clear(&back);
    if (m0__ws_inflate(in2, (const uint8_t *)c.p, c.len, &back, FUZZ_MAX)) abort();
    if (back.len != out.len || (out.len && memcmp(back.p, out.p, out.len))) abort();
    m0__ws_inflater_free(in2);
  }
  m0__buf_free(&out);
  m0__buf_free(&c);
  m0__buf_free(&back);
  m0__ws_inflater_free(in);
  m0__ws_deflater_free(de);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  check_frame(d, n, false);
  check_frame(d, n, true);
  check_utf8(d, n);
  check_close(d, n);
  check_pmd(d, n);
  check_inflate(d, n);
  return 0;
}
