/* WebSocket's pure parts (http/ws.h): the accept key, every frame header
 * refusal and the three length forms, unmasking in pieces, UTF-8 in pieces
 * (fail-fast on overlongs, surrogates, past U+10FFFF), close payloads,
 * permessage-deflate's offer parsing (each parameter, bad values,
 * duplicates), the zlib round trip with RFC 7692's own example and the
 * inflate bound, and both window sizes honoured. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/buf.h"
#include "base/errors.h"
#include "http/fields.h"
#include "http/ws.h"

#define PARSE(bytes, deflate, max, f) m0__ws_frame_parse((const uint8_t *)(bytes), sizeof(bytes) - 1, deflate, max, f)

static void test_accept(void **st) {
  char out[29];
  const char *k = "dGhlIHNhbXBsZSBub25jZQ==";
  assert_int_equal(m0__ws_accept(k, strlen(k), out), 0);
  assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
  const char *bad[] = {"", "dGhlIHNhbXBsZSBub25jZQ=", "dGhlIHNhbXBsZSBub25jZQ===", "dGhlIHNhbXBsZSBub25jZ===",
                       "dGhlIHNhbXBsZSBub25j ZQ=", "dGhlIHNhbXBsZSBub25jZQ!!", "dGhlIHNhbXBs\nSBub25jZQ==",
                       "dGhlIHNhbXBsZSBub25jZSBh"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) assert_int_equal(m0__ws_accept(bad[i], strlen(bad[i]), out), M0__EINVALID);
}

static void test_frame_refusals(void **st) {
  m0__ws_frame f;
  /* unmasked */
  assert_int_equal(PARSE("\x81\x05", false, 1000, &f), -M0__WS_PROTOCOL);
  /* RSV2, RSV3 */
  assert_int_equal(PARSE("\xa1\x85", true, 1000, &f), -M0__WS_PROTOCOL);
  assert_int_equal(PARSE("\x91\x85", true, 1000, &f), -M0__WS_PROTOCOL);
  /* RSV1 without deflate, on a continuation, on a control frame */
  assert_int_equal(PARSE("\xc1\x85", false, 1000, &f), -M0__WS_PROTOCOL);
  assert_int_equal(PARSE("\xc0\x85", true, 1000, &f), -M0__WS_PROTOCOL);
  assert_int_equal(PARSE("\xc9\x80", true, 1000, &f), -M0__WS_PROTOCOL);
  /* unknown opcodes */
  const uint8_t ops[] = {3, 4, 5, 6, 7, 0xb, 0xc, 0xd, 0xe, 0xf};
  for (size_t i = 0; i < sizeof ops; i++) {
    uint8_t b[2] = {(uint8_t)(0x80 | ops[i]), 0x80};
    assert_int_equal(m0__ws_frame_parse(b, 2, true, 1000, &f), -M0__WS_PROTOCOL);
  }
  /* fragmented control, control over 125 */
  assert_int_equal(PARSE("\x09\x80", false, 1000, &f), -M0__WS_PROTOCOL);
  assert_int_equal(PARSE("\x88\xfe", false, 1000, &f), -M0__WS_PROTOCOL);
  assert_int_equal(PARSE("\x8a\xfe\x00\x7e", false, 1000, &f), -M0__WS_PROTOCOL);
  /* lengths not in the shortest form, 64-bit top bit */
  assert_int_equal(PARSE("\x82\xfe\x00\x7d", false, 1u << 20, &f), -M0__WS_PROTOCOL);
  assert_int_equal(PARSE("\x82\xff\x00\x00\x00\x00\x00\x00\xff\xff", false, UINT64_MAX, &f), -M0__WS_PROTOCOL);
  assert_int_equal(PARSE("\x82\xff\x80\x00\x00\x00\x00\x01\x00\x00", false, UINT64_MAX, &f), -M0__WS_PROTOCOL);
  /* too big, before the mask has come */
  assert_int_equal(PARSE("\x82\xfe\x01\x00", false, 255, &f), -M0__WS_TOO_BIG);
  assert_int_equal(PARSE("\x82\x8a", false, 9, &f), -M0__WS_TOO_BIG);
  /* a bad first two bytes fail without the rest; a good one waits for it */
  assert_int_equal(PARSE("\x81", false, 1000, &f), 0);
  assert_int_equal(PARSE("\x81\x85\x01\x02\x03", false, 1000, &f), 0);
  assert_int_equal(PARSE("\x82\xfe\x01", false, 1000, &f), 0);
  assert_int_equal(PARSE("\x82\xff\x00\x00\x00\x00\x00\x01\x00", false, UINT64_MAX, &f), 0);
  /* RSV1 on a first data fragment with deflate: allowed */
  assert_int_equal(PARSE("\x41\x85\x01\x02\x03\x04", true, 1000, &f), 6);
  assert_true(f.rsv1 && !f.fin && f.opcode == M0__WS_TEXT);
}

static void test_frame_lengths(void **st) {
  m0__ws_frame f;
  assert_int_equal(PARSE("\x81\xfd\x01\x02\x03\x04", false, 1000, &f), 6);
  assert_true(f.fin && f.masked && f.opcode == M0__WS_TEXT && f.len == 125 && f.hlen == 6);
  assert_memory_equal(f.mask, "\x01\x02\x03\x04", 4);
  assert_int_equal(PARSE("\x82\xfe\x00\x7e\x01\x02\x03\x04", false, 1000, &f), 8);
  assert_true(f.len == 126 && f.opcode == M0__WS_BINARY);
  assert_int_equal(PARSE("\x82\xfe\xff\xff\x01\x02\x03\x04", false, 65535, &f), 8);
  assert_true(f.len == 65535);
  assert_int_equal(PARSE("\x02\xff\x00\x00\x00\x00\x00\x01\x00\x00\x01\x02\x03\x04", false, UINT64_MAX, &f), 14);
  assert_true(f.len == 65536 && !f.fin);
  assert_int_equal(PARSE("\x02\xff\x7f\xff\xff\xff\xff\xff\xff\xff\x01\x02\x03\x04", false, UINT64_MAX, &f), 14);
  assert_true(f.len == 0x7fffffffffffffffull);
  assert_int_equal(PARSE("\x88\x80\x01\x02\x03\x04", false, 0, &f), 6);
  assert_true(f.len == 0 && f.opcode == M0__WS_CLOSE);
}

/* The header writer's output, masked the way a client would, parses back. */
static void test_header_roundtrip(void **st) {
  const uint64_t lens[] = {0, 1, 125, 126, 127, 65535, 65536, 1ull << 32, 0x7fffffffffffffffull};
  const size_t hl[] = {2, 2, 2, 4, 4, 4, 10, 10, 10};
  for (size_t i = 0; i < sizeof lens / sizeof *lens; i++)
    for (int fin = 0; fin < 2; fin++) {
      uint8_t h[M0__WS_HEADER_MAX + 4];
      size_t n = m0__ws_frame_header(h, M0__WS_BINARY, fin, true, lens[i]);
      assert_int_equal(n, hl[i]);
      h[1] |= 0x80;
      memcpy(h + n, "\xa1\xb2\xc3\xd4", 4);
      m0__ws_frame f;
      assert_int_equal(m0__ws_frame_parse(h, n + 4, true, UINT64_MAX, &f), (int)(n + 4));
      assert_true(f.len == lens[i] && f.fin == fin && f.rsv1 && f.opcode == M0__WS_BINARY);
      assert_memory_equal(f.mask, "\xa1\xb2\xc3\xd4", 4);
    }
  uint8_t h[M0__WS_HEADER_MAX];
  assert_int_equal(m0__ws_frame_header(h, M0__WS_PING, true, false, 3), 2);
  assert_memory_equal(h, "\x89\x03", 2);
}

static void test_unmask(void **st) {
  const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};
  /* RFC 6455 section 5.7: "Hello" masked */
  uint8_t p[] = {0x7f, 0x9f, 0x4d, 0x51, 0x58};
  m0__ws_unmask(p, 5, mask, 0);
  assert_memory_equal(p, "Hello", 5);
  /* a long payload unmasked whole and in uneven pieces gives the same */
  uint8_t a[301], b[301], plain[301];
  for (size_t i = 0; i < sizeof a; i++) plain[i] = (uint8_t)(i * 7 + 3), a[i] = b[i] = plain[i] ^ mask[i & 3];
  m0__ws_unmask(a, sizeof a, mask, 0);
  assert_memory_equal(a, plain, sizeof a);
  size_t cuts[] = {0, 1, 3, 4, 13, 14, 100, 255, 301};
  for (size_t c = 0; c + 1 < sizeof cuts / sizeof *cuts; c++)
    m0__ws_unmask(b + cuts[c], cuts[c + 1] - cuts[c], mask, cuts[c]);
  assert_memory_equal(b, plain, sizeof b);
}

static bool utf8_ok(const char *s, size_t n, bool *done) {
  m0__utf8 u = {0};
  bool ok = m0__utf8_feed(&u, (const uint8_t *)s, n);
  *done = m0__utf8_done(&u);
  return ok;
}
#define U8(s, done) utf8_ok(s, sizeof(s) - 1, done)

static void test_utf8(void **st) {
  bool d;
  assert_true(U8("", &d) && d);
  assert_true(U8("plain ascii, long enough for the word path", &d) && d);
  assert_true(U8("\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf", &d) && d);
  assert_true(U8("\xf0\x90\x80\x80\xf3\xbf\xbf\xbf\xf4\x8f\xbf\xbf", &d) && d);
  assert_true(U8("\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5", &d) && d); /* Autobahn 6.2: κόσμε */
  /* invalid, each failing at its first impossible byte */
  assert_false(U8("\xc0\x80", &d));             /* overlong NUL */
  assert_false(U8("\xc0", &d));                 /* C0 is never a lead */
  assert_false(U8("\xc1\xbf", &d));
  assert_false(U8("\xe0\x9f", &d));             /* overlong, at the second byte */
  assert_false(U8("\xed\xa0", &d));             /* surrogate U+D800, at the second byte */
  assert_false(U8("\xed\xa0\x80", &d));
  assert_false(U8("\xed\xbf\xbf", &d));
  assert_false(U8("\xf0\x8f", &d));             /* overlong 4-byte */
  assert_false(U8("\xf4\x90", &d));             /* past U+10FFFF, at the second byte */
  assert_false(U8("\xf4\x90\x80\x80", &d));
  assert_false(U8("\xf5", &d));
  assert_false(U8("\xff", &d));
  assert_false(U8("\x80", &d));                 /* a stray continuation */
  assert_false(U8("ascii ascii ascii \xbf", &d));
  assert_false(U8("\xe2\x82", &d) && d);        /* truncated: valid so far, not done */
  assert_true(U8("\xe2\x82", &d));
  assert_false(d);
  assert_true(U8("a\xf0\x9f\x98", &d));
  assert_false(d);
  assert_false(U8("\xe2\x82x", &d));            /* a lead's sequence cut by ASCII */
  /* split across feeds, at every point */
  const char *s = "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80 end";
  size_t n = strlen(s);
  for (size_t cut = 0; cut <= n; cut++) {
    m0__utf8 u = {0};
    assert_true(m0__utf8_feed(&u, (const uint8_t *)s, cut));
    assert_true(m0__utf8_feed(&u, (const uint8_t *)s + cut, n - cut));
    assert_true(m0__utf8_done(&u));
  }
  /* a surrogate split between feeds still fails at its second byte */
  m0__utf8 u = {0};
  assert_true(m0__utf8_feed(&u, (const uint8_t *)"ok\xed", 3));
  assert_false(m0__utf8_done(&u));
  assert_false(m0__utf8_feed(&u, (const uint8_t *)"\xa0", 1));
  assert_false(m0__utf8_feed(&u, (const uint8_t *)"a", 1)); /* sticky */
}

static void test_close(void **st) {
  int code = 0;
  assert_int_equal(m0__ws_close_parse(NULL, 0, &code), 0);
  assert_int_equal(code, 1005);
  assert_int_equal(m0__ws_close_parse((const uint8_t *)"\x03", 1, &code), -M0__WS_PROTOCOL);
  const int good[] = {1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999, 4000, 4999};
  const int bad[] = {0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535};
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    uint8_t p[2] = {(uint8_t)(good[i] >> 8), (uint8_t)good[i]};
    assert_int_equal(m0__ws_close_parse(p, 2, &code), 0);
    assert_int_equal(code, good[i]);
  }
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    uint8_t p[2] = {(uint8_t)(bad[i] >> 8), (uint8_t)bad[i]};
    assert_int_equal(m0__ws_close_parse(p, 2, &code), -M0__WS_PROTOCOL);
  }
  assert_int_equal(m0__ws_close_parse((const uint8_t *)"\x03\xe8\xce\xba", 4, &code), 0);
  assert_int_equal(m0__ws_close_parse((const uint8_t *)"\x03\xe8\xce", 3, &code), -M0__WS_BAD_DATA);
  assert_int_equal(m0__ws_close_parse((const uint8_t *)"\x03\xe8\xed\xa0\x80", 5, &code), -M0__WS_BAD_DATA);
  assert_true(m0__ws_close_code_ok(1000) && m0__ws_close_code_ok(1001) && m0__ws_close_code_ok(1003));
  assert_true(m0__ws_close_code_ok(1011) && m0__ws_close_code_ok(3000) && m0__ws_close_code_ok(4999));
  assert_false(m0__ws_close_code_ok(1004) || m0__ws_close_code_ok(1005) || m0__ws_close_code_ok(1006));
  assert_false(m0__ws_close_code_ok(1015) || m0__ws_close_code_ok(2999) || m0__ws_close_code_ok(5000));
  assert_false(m0__ws_close_code_ok(999));
}

static bool nego(const char *offer, m0__ws_pmd_params *p, char *resp) {
  memset(p, 0x55, sizeof *p);
  return m0__ws_pmd_negotiate(offer, strlen(offer), p, resp, 256);
}

static void test_pmd_negotiate(void **st) {
  m0__ws_pmd_params p;
  char r[256];
  assert_true(nego("permessage-deflate", &p, r));
  assert_string_equal(r, "permessage-deflate; server_no_context_takeover");
  assert_false(p.client_no_context);
  assert_int_equal(p.client_bits, 15);
  /* what browsers send */
  assert_true(nego("permessage-deflate; client_max_window_bits", &p, r));
  assert_string_equal(r, "permessage-deflate; server_no_context_takeover; client_max_window_bits=15");
  assert_int_equal(p.client_bits, 15);
  assert_true(nego("PerMessage-Deflate ; client_no_context_takeover ;client_max_window_bits=10", &p, r));
  assert_string_equal(r, "permessage-deflate; server_no_context_takeover; client_no_context_takeover; "
                         "client_max_window_bits=10");
  assert_true(p.client_no_context);
  assert_int_equal(p.client_bits, 10);
  /* a quoted value */
  assert_true(nego("permessage-deflate; client_max_window_bits=\"9\"", &p, r));
  assert_int_equal(p.client_bits, 9);
  assert_true(nego("permessage-deflate; server_max_window_bits=\"15\"; server_no_context_takeover", &p, r));
  assert_string_equal(r, "permessage-deflate; server_no_context_takeover; server_max_window_bits=15");
  assert_int_equal(p.server_bits, 15);
  /* no window said: 15 both ways */
  assert_true(nego("permessage-deflate", &p, r));
  assert_int_equal(p.server_bits, 15);
  /* each server window the RFC allows is accepted and echoed (7.1.2.1) */
  for (int b = 8; b <= 15; b++) {
    char o[96], want[128];
    snprintf(o, sizeof o, "permessage-deflate; server_max_window_bits=%d", b);
    snprintf(want, sizeof want, "permessage-deflate; server_no_context_takeover; server_max_window_bits=%d", b);
    assert_true(nego(o, &p, r));
    assert_string_equal(r, want);
    assert_int_equal(p.server_bits, b);
    assert_int_equal(p.client_bits, 15);
    assert_false(p.client_no_context);
  }
  /* Autobahn 13.5's offer: every parameter at once, in any order */
  assert_true(nego("permessage-deflate; client_no_context_takeover; server_max_window_bits=8; "
                   "client_max_window_bits; server_no_context_takeover",
                   &p, r));
  assert_string_equal(r, "permessage-deflate; server_no_context_takeover; client_no_context_takeover; "
                         "server_max_window_bits=8; client_max_window_bits=15");
  assert_int_equal(p.server_bits, 8);
  assert_int_equal(p.client_bits, 15);
  assert_true(p.client_no_context);
  assert_true(nego("permessage-deflate;client_max_window_bits=8;server_max_window_bits=\"9\"", &p, r));
  assert_string_equal(r, "permessage-deflate; server_no_context_takeover; server_max_window_bits=9; "
                         "client_max_window_bits=8");
  assert_int_equal(p.server_bits, 9);
  assert_int_equal(p.client_bits, 8);
  /* bad offers are skipped for the next one */
  const char *bad[] = {
      "permessage-deflate; foo",                          /* unknown */
      "permessage-deflate; client_no_context_takeover; client_no_context_takeover", /* twice */
      "permessage-deflate; client_max_window_bits=16",
      "permessage-deflate; client_max_window_bits=7",
      "permessage-deflate; client_max_window_bits=010",
      "permessage-deflate; client_max_window_bits=\"1 0\"",
      "permessage-deflate; client_max_window_bits=",
      "permessage-deflate; client_max_window_bits=\"10",
      "permessage-deflate; server_max_window_bits",      /* needs a value */
      "permessage-deflate; server_max_window_bits=",
      "permessage-deflate; server_max_window_bits=7",
      "permessage-deflate; server_max_window_bits=16",
      "permessage-deflate; server_max_window_bits=08",
      "permessage-deflate; server_max_window_bits=-9",
      "permessage-deflate; server_max_window_bits=9.0",
      "permessage-deflate; server_max_window_bits=\"\"",
      "permessage-deflate; server_max_window_bits=10; server_max_window_bits=10", /* twice */
      "permessage-deflate; server_max_window_bits=10; server_max_window_bits=12",
      "permessage-deflate; client_max_window_bits; client_max_window_bits",
      "permessage-deflate; client_max_window_bits=9; client_max_window_bits",
      "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
      "permessage-deflate; server_max_window_bits=10; foo=1",
      "permessage-deflate; server_no_context_takeover=1",
      "permessage-deflate; client_no_context_takeover=\"\"",
      "permessage-deflate;",
      "permessage-deflate x",
      "x-webkit-deflate-frame",
      "",
      " , ,",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    if (nego(bad[i], &p, r)) fail_msg("accepted: %s", bad[i]);
    assert_string_equal(r, "");
  }
  /* the first acceptable of several */
  assert_true(nego("foo; bar=\"a,b\", permessage-deflate; server_max_window_bits=16, "
                   "permessage-deflate; client_max_window_bits=12, permessage-deflate",
                   &p, r));
  assert_string_equal(r, "permessage-deflate; server_no_context_takeover; client_max_window_bits=12");
  assert_int_equal(p.client_bits, 12);
  assert_int_equal(p.server_bits, 15);
  /* Autobahn 13.7's: the first offer wins */
  assert_true(nego("permessage-deflate; client_no_context_takeover; client_max_window_bits=9, "
                   "permessage-deflate; client_no_context_takeover; client_max_window_bits, permessage-deflate",
                   &p, r));
  assert_int_equal(p.client_bits, 9);
  assert_true(p.client_no_context);
  /* no room for the answer: declined */
  assert_false(m0__ws_pmd_negotiate("permessage-deflate", 18, &p, r, 10));
}

static void test_deflate_roundtrip(void **st) {
  /* RFC 7692 section 7.2.3.1 */
  m0__ws_pmd_params pp = {.client_no_context = false, .client_bits = 15};
  m0__ws_inflater *in = m0__ws_inflater_new(&pp);
  assert_non_null(in);
  m0__buf out = {0};
  const uint8_t hello[] = {0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00};
  assert_int_equal(m0__ws_inflate(in, hello, sizeof hello, &out, 100), 0);
  assert_int_equal(out.len, 5);
  assert_memory_equal(out.p, "Hello", 5);
  /* section 7.2.3.2: the second "Hello" with the context taken over */
  const uint8_t again[] = {0xf2, 0x00, 0x11, 0x00, 0x00};
  m0__buf_clear(&out);
  assert_int_equal(m0__ws_inflate(in, again, sizeof again, &out, 100), 0);
  assert_int_equal(out.len, 5);
  assert_memory_equal(out.p, "Hello", 5);
  /* a BFINAL block (section 7.2.3.4's form) */
  const uint8_t final_[] = {0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x00};
  m0__buf_clear(&out);
  assert_int_equal(m0__ws_inflate(in, final_, sizeof final_, &out, 100), 0);
  assert_memory_equal(out.p, "Hello", 5);
  /* not deflate */
  m0__buf_clear(&out);
  assert_int_equal(m0__ws_inflate(in, (const uint8_t *)"\xff\xff\xff", 3, &out, 100), -M0__WS_PROTOCOL);
  assert_int_equal(out.len, 0);
  m0__ws_inflater_free(in);

  m0__ws_deflater *de = m0__ws_deflater_new();
  assert_non_null(de);
  pp.client_no_context = true;
  pp.client_bits = 8; /* inflated with 9: see ws.c's design notes */
  in = m0__ws_inflater_new(&pp);
  size_t n = 200000;
  uint8_t *msg = malloc(n);
  for (size_t i = 0; i < n; i++) msg[i] = (uint8_t)((i % 251) ^ (i / 1000));
  m0__buf c = {0};
  for (int round = 0; round < 3; round++) {
    m0__buf_clear(&c);
    m0__buf_clear(&out);
    assert_int_equal(m0__ws_deflate(de, msg, n, &c), 0);
    assert_true(c.len < n);
    assert_true(c.len < 4 || memcmp(c.p + c.len - 4, "\x00\x00\xff\xff", 4) != 0);
    /* the big-window data needs the full window: use a 15-bit inflater */
    m0__ws_pmd_params p15 = {.client_no_context = true, .client_bits = 15};
    m0__ws_inflater *in15 = m0__ws_inflater_new(&p15);
    assert_int_equal(m0__ws_inflate(in15, (uint8_t *)c.p, c.len, &out, n), 0);
    assert_int_equal(out.len, n);
    assert_memory_equal(out.p, msg, n);
    m0__ws_inflater_free(in15);
  }
  /* each message on its own: the same input compresses to the same bytes */
  m0__buf c2 = {0};
  assert_int_equal(m0__ws_deflate(de, (const uint8_t *)"Hello", 5, &c2), 0);
  m0__buf_clear(&c);
  assert_int_equal(m0__ws_deflate(de, (const uint8_t *)"Hello", 5, &c), 0);
  assert_int_equal(c.len, c2.len);
  assert_memory_equal(c.p, c2.p, c.len);
  assert_memory_equal(c.p, hello, sizeof hello);
  m0__buf_clear(&out);
  assert_int_equal(m0__ws_inflate(in, (uint8_t *)c.p, c.len, &out, 5), 0);
  assert_memory_equal(out.p, "Hello", 5);
  /* an empty message */
  m0__buf_clear(&c);
  m0__buf_clear(&out);
  assert_int_equal(m0__ws_deflate(de, (const uint8_t *)"", 0, &c), 0);
  assert_int_equal(m0__ws_inflate(in, (uint8_t *)c.p, c.len, &out, 0), 0);
  assert_int_equal(out.len, 0);
  free(msg);
  m0__buf_free(&c);
  m0__buf_free(&c2);
  m0__buf_free(&out);
  m0__ws_inflater_free(in);
  m0__ws_deflater_free(de);
}

/* A small message that inflates past max is refused as soon as it passes,
 * and what it made is taken back out of the buffer. */
static void test_inflate_bound(void **st) {
  m0__ws_deflater *de = m0__ws_deflater_new();
  m0__ws_pmd_params pp = {.client_no_context = true, .client_bits = 15};
  m0__ws_inflater *in = m0__ws_inflater_new(&pp);
  size_t n = 4u << 20;
  uint8_t *zeros = calloc(1, n);
  m0__buf c = {0}, out = {0};
  assert_int_equal(m0__ws_deflate(de, zeros, n, &c), 0);
  assert_true(c.len < 8192);
  assert_int_equal(m0__buf_append(&out, "kept", 4), 0);
  assert_int_equal(m0__ws_inflate(in, (uint8_t *)c.p, c.len, &out, 1000), -M0__WS_TOO_BIG);
  assert_int_equal(out.len, 4);
  assert_true(out.cap < 64 * 1024); /* it stopped near max, not at 4 MiB */
  assert_int_equal(m0__ws_inflate(in, (uint8_t *)c.p, c.len, &out, n - 1), -M0__WS_TOO_BIG);
  assert_int_equal(m0__ws_inflate(in, (uint8_t *)c.p, c.len, &out, n), 0);
  assert_int_equal(out.len, 4 + n);
  /* exactly max is fine */
  m0__buf_clear(&out);
  m0__buf_clear(&c);
  assert_int_equal(m0__ws_deflate(de, (const uint8_t *)"Hello", 5, &c), 0);
  assert_int_equal(m0__ws_inflate(in, (uint8_t *)c.p, c.len, &out, 5), 0);
  assert_int_equal(m0__ws_inflate(in, (uint8_t *)c.p, c.len, &out, 4), -M0__WS_TOO_BIG);
  free(zeros);
  m0__buf_free(&c);
  m0__buf_free(&out);
  m0__ws_inflater_free(in);
  m0__ws_deflater_free(de);
}

/* Inflates a raw stream (plus the 00 00 ff ff tail) with a zlib inflater of
 * `bits`, 64 bytes of output at a time: zlib checks distances against its
 * window only for what is not in the current output buffer, so a small one
 * makes it hold the stream to the window, as a client inflating in pieces
 * would. The bytes made, or -1 on a zlib error. */
static long raw_inflate(int bits, const m0__buf *c, uint8_t *out, size_t cap) {
  static const uint8_t tail[4] = {0, 0, 0xff, 0xff};
  z_stream z = {0};
  if (inflateInit2(&z, -bits) != Z_OK) return -1;
  size_t made = 0;
  long rv = 0;
  for (int part = 0; part < 2 && rv == 0; part++) {
    z.next_in = (Bytef *)(part ? tail : (const uint8_t *)c->p);
    z.avail_in = (uInt)(part ? 4 : c->len);
    while (z.avail_in && made < cap) {
      z.next_out = out + made;
      z.avail_out = (uInt)(cap - made < 64 ? cap - made : 64);
      uInt room = z.avail_out;
      int zr = inflate(&z, Z_SYNC_FLUSH);
      made += room - z.avail_out;
      if (zr != Z_OK && zr != Z_BUF_ERROR) { rv = -1; break; }
    }
  }
  inflateEnd(&z);
  return rv ? rv : (long)made;
}

/* A server window below 15 bits: which messages the shared deflater may
 * compress for it, and that those inflate with a raw zlib inflater of just
 * that window (a client honouring its own offer), at 8 bits too. */
static void test_server_window(void **st) {
  m0__ws_pmd_params p = {.client_bits = 15, .server_bits = 15};
  assert_true(m0__ws_pmd_fits(&p, 0));
  assert_true(m0__ws_pmd_fits(&p, (size_t)1 << 30));
  p.server_bits = 8;
  assert_true(m0__ws_pmd_fits(&p, 256));
  assert_false(m0__ws_pmd_fits(&p, 257));
  p.server_bits = 14;
  assert_true(m0__ws_pmd_fits(&p, 16384));
  assert_false(m0__ws_pmd_fits(&p, 16385));
  p.server_bits = 0; /* never negotiated */
  assert_false(m0__ws_pmd_fits(&p, 100));

  m0__ws_deflater *de = m0__ws_deflater_new();
  static uint8_t msg[32768], out[32768 + 16];
  for (int bits = 8; bits <= 15; bits++) {
    /* 16 letters at random (so deflate codes them rather than storing them),
     * the last quarter a copy of the first: a match 3/4 of the window back */
    size_t n = (size_t)1 << bits;
    uint32_t x = (uint32_t)bits;
    for (size_t i = 0; i < n; i++) msg[i] = (uint8_t)('a' + ((x = x * 1103515245u + 12345u) >> 28));
    memcpy(msg + n - n / 4, msg, n / 4);
    m0__buf c = {0};
    assert_int_equal(m0__ws_deflate(de, msg, n, &c), 0);
    long got = raw_inflate(bits, &c, out, sizeof out);
    if (got != (long)n) fail_msg("window %d: %ld bytes of %zu", bits, got, n);
    assert_memory_equal(out, msg, n);
    if (bits > 8) assert_int_equal(raw_inflate(bits - 1, &c, out, sizeof out), -1); /* the far match is there */
    /* a message past the window refers further back: an inflater of that window refuses it */
    if (bits < 15) {
      for (size_t i = n; i < 2 * n; i++) msg[i] = (uint8_t)('a' + ((x = x * 1103515245u + 12345u) >> 28));
      memcpy(msg + 2 * n - n / 4, msg, n / 4); /* 7/4 of the window back */
      m0__buf_clear(&c);
      assert_int_equal(m0__ws_deflate(de, msg, 2 * n, &c), 0);
      assert_int_equal(raw_inflate(bits, &c, out, sizeof out), -1);
      assert_int_equal(raw_inflate(bits + 1, &c, out, sizeof out), (long)(2 * n));
    }
    m0__buf_free(&c);
  }
  m0__ws_deflater_free(de);
}

/* The inflater honours client_max_window_bits: a client that keeps its
 * context and compresses with the window it said refers from one message
 * back into the one before, nearly that window back; it inflates. Said 8,
 * the client's zlib makes 9-bit streams (ws.c's design notes): those too. */
static void test_client_window(void **st) {
  static uint8_t r[32768], z[32768];
  for (int bits = 8; bits <= 15; bits++) {
    m0__ws_pmd_params pp = {.client_no_context = false, .client_bits = bits, .server_bits = 15};
    m0__ws_inflater *in = m0__ws_inflater_new(&pp);
    assert_non_null(in);
    z_stream d = {0};
    int zb = bits < 9 ? 9 : bits;
    assert_int_equal(deflateInit2(&d, 9, Z_DEFLATED, -zb, 8, Z_DEFAULT_STRATEGY), Z_OK);
    size_t far = ((size_t)1 << zb) - 270; /* zlib's farthest match: the window less 262 */
    uint32_t x = (uint32_t)bits;
    for (size_t i = 0; i < far; i++) r[i] = (uint8_t)('a' + ((x = x * 1103515245u + 12345u) >> 28));
    m0__buf out = {0};
    for (int m = 0; m < 2; m++) { /* the whole block, then its first 200 bytes again */
      d.next_in = r;
      d.avail_in = (uInt)(m ? 200 : far);
      d.next_out = z;
      d.avail_out = sizeof z;
      assert_int_equal(deflate(&d, Z_SYNC_FLUSH), Z_OK);
      size_t zl = sizeof z - d.avail_out;
      if (m) assert_true(zl < 100); /* it referred back into the first message */
      m0__buf_clear(&out);
      int rv = m0__ws_inflate(in, z, zl - 4, &out, sizeof r);
      if (rv) fail_msg("window %d, message %d: %d", bits, m, rv);
      assert_int_equal(out.len, d.total_in - (m ? far : 0));
      assert_memory_equal(out.p, r, out.len);
    }
    deflateEnd(&d);
    m0__buf_free(&out);
    m0__ws_inflater_free(in);
  }
}

/* The header lists the upgrade and the graph's stream read (http/fields.h). */
static void test_field_has(void **st) {
  static const char conn[] = "keep-alive, Upgrade", accept[] = "text/html;q=0.9 , TEXT/Event-Stream ; q=1";
  assert_true(m0__field_has(conn, sizeof conn - 1, "upgrade"));
  assert_true(m0__field_has(conn, sizeof conn - 1, "keep-alive"));
  assert_false(m0__field_has(conn, sizeof conn - 1, "upgrad"));
  assert_true(m0__field_has(accept, sizeof accept - 1, "text/event-stream"));
  assert_true(m0__field_has(accept, sizeof accept - 1, "text/html"));
  assert_false(m0__field_has(accept, sizeof accept - 1, "text/event"));
  assert_false(m0__field_has("", 0, "upgrade"));
  assert_false(m0__field_has("x-text/event-stream", 19, "text/event-stream"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_field_has),
      cmocka_unit_test(test_accept),          cmocka_unit_test(test_frame_refusals),
      cmocka_unit_test(test_frame_lengths),   cmocka_unit_test(test_header_roundtrip),
      cmocka_unit_test(test_unmask),          cmocka_unit_test(test_utf8),
      cmocka_unit_test(test_close),           cmocka_unit_test(test_pmd_negotiate),
      cmocka_unit_test(test_deflate_roundtrip), cmocka_unit_test(test_inflate_bound),
      cmocka_unit_test(test_server_window),     cmocka_unit_test(test_client_window),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
