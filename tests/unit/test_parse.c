/* The parser glue: whole requests, requests split at every byte, pipelining,
 * chunked bodies, and the refusals (smuggling, limits). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "http/parse.h"

static const m0__parse_limits lim = {32768, 8192, 1 << 20};

static int feed_all(m0__parser *p, const char *s, size_t *off) {
  return m0__parser_feed(p, s, strlen(s), off);
}

static void span_eq(const char *buf, m0__span s, const char *want) {
  assert_int_equal(s.len, strlen(want));
  assert_memory_equal(buf + s.off, want, s.len);
}

/* An idle parser holds no header spans: they are lent from the pool for one
 * request and given back at its answer, and the pool keeps only a few. */
static void test_span_pool(void **st) {
  (void)st;
  m0__span_pool pool = {0};
  enum { N = M0__SPANS_SPARE + 4 };
  m0__parser ps[N];
  const char *head = "GET / HTTP/1.1\r\nHost: x\r\n"; /* unfinished: spans held */
  for (int i = 0; i < N; i++) {
    m0__parser_init(&ps[i], &lim, &pool);
    assert_null(ps[i].hs);
    size_t off = 0;
    assert_int_equal(feed_all(&ps[i], head, &off), M0__PARSE_MORE);
    assert_non_null(ps[i].hs);
  }
  assert_int_equal(pool.nspare, 0);
  for (int i = 0; i < N; i++) m0__parser_fini(&ps[i]);
  assert_int_equal(pool.nspare, M0__SPANS_SPARE);
  /* a whole request borrows one and gives it back at next() */
  m0__parser p;
  m0__parser_init(&p, &lim, &pool);
  const char *r = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  size_t off = 0;
  assert_int_equal(feed_all(&p, r, &off), M0__PARSE_REQUEST);
  assert_int_equal(pool.nspare, M0__SPANS_SPARE - 1);
  span_eq(r, p.hs->name[0], "Host");
  m0__parser_next(&p);
  assert_null(p.hs);
  assert_int_equal(pool.nspare, M0__SPANS_SPARE);
  m0__parser_fini(&p);
  m0__span_pool_fini(&pool);
  assert_int_equal(pool.nspare, 0);
  assert_null(pool.spare);
}

static void test_simple_get(void **st) {
  m0__parser p;
  m0__parser_init(&p, &lim, NULL);
  const char *r = "GET /a?b=1 HTTP/1.1\r\nHost: x\r\nX-Y: z\r\n\r\n";
  size_t off = 0;
  assert_int_equal(feed_all(&p, r, &off), M0__PARSE_REQUEST);
  assert_int_equal(off, strlen(r));
  span_eq(r, p.method, "GET");
  span_eq(r, p.url, "/a?b=1");
  assert_int_equal(p.nheaders, 2);
  span_eq(r, p.hs->name[1], "X-Y");
  span_eq(r, p.hs->value[1], "z");
  assert_true(p.keep_alive);
  assert_int_equal(p.version_minor, 1);
  m0__parser_fini(&p);
}

/* The same request fed one byte at a time, in one growing buffer. */
static void test_byte_at_a_time(void **st) {
  m0__parser p;
  m0__parser_init(&p, &lim, NULL);
  const char *r = "POST /notes HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello";
  size_t n = strlen(r), off = 0;
  int res = M0__PARSE_MORE;
  for (size_t len = 1; len <= n && res == M0__PARSE_MORE; len++) res = m0__parser_feed(&p, r, len, &off);
  assert_int_equal(res, M0__PARSE_REQUEST);
  span_eq(r, p.url, "/notes");
  span_eq(r, p.hs->value[1], "5");
  assert_int_equal(p.body.len, 5);
  assert_memory_equal(p.body.p, "hello", 5);
  m0__parser_fini(&p);
}

static void test_pipelined(void **st) {
  m0__parser p;
  m0__parser_init(&p, &lim, NULL);
  const char *r = "GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\n\r\n";
  size_t off = 0;
  assert_int_equal(feed_all(&p, r, &off), M0__PARSE_REQUEST);
  span_eq(r, p.url, "/1");
  m0__parser_next(&p);
  assert_true(m0__parser_idle(&p));
  assert_int_equal(feed_all(&p, r, &off), M0__PARSE_REQUEST);
  span_eq(r, p.url, "/2");
  assert_int_equal(off, strlen(r));
  m0__parser_fini(&p);
}

static void test_chunked(void **st) {
  m0__parser p;
  m0__parser_init(&p, &lim, NULL);
  const char *r = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "3\r\nabc\r\n4;ext=1\r\ndefg\r\n0\r\n\r\n";
  size_t off = 0;
  assert_int_equal(feed_all(&p, r, &off), M0__PARSE_REQUEST);
  assert_int_equal(p.body.len, 7);
  assert_memory_equal(p.body.p, "abcdefg", 7);
  m0__parser_fini(&p);
}

/* A shift (the connection compacting its buffer) keeps spans right. */
static void test_shift(void **st) {
  m0__parser p;
  m0__parser_init(&p, &lim, NULL);
  char buf[128] = "xxxxGET /moved HTTP/1.1\r\nHo";
  size_t off = 4;
  assert_int_equal(m0__parser_feed(&p, buf, strlen(buf), &off), M0__PARSE_MORE);
  memmove(buf, buf + 4, strlen(buf) - 3);
  m0__parser_shift(&p, 4);
  off = strlen(buf);
  strcat(buf, "st: h\r\n\r\n");
  assert_int_equal(m0__parser_feed(&p, buf, strlen(buf), &off), M0__PARSE_REQUEST);
  span_eq(buf, p.url, "/moved");
  span_eq(buf, p.hs->name[0], "Host");
  m0__parser_fini(&p);
}

static int refused(const char *r, const m0__parse_limits *l) {
  m0__parser p;
  m0__parser_init(&p, l, NULL);
  size_t off = 0;
  int res = m0__parser_feed(&p, r, strlen(r), &off);
  int status = res == M0__PARSE_ERROR ? p.status : 0;
  m0__parser_fini(&p);
  return status;
}

static void test_refusals(void **st) {
  assert_int_equal(refused("GET / HTTP/1.1\r\n\r\n", &lim), 400); /* no Host */
  assert_int_equal(refused("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", &lim), 400);
  assert_int_equal(refused("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", &lim), 400);
  assert_int_equal(refused("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", &lim), 400);
  assert_int_equal(refused("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +3\r\n\r\nabc", &lim), 400);
  assert_int_equal(refused("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", &lim), 400);
  assert_int_equal(refused("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", &lim), 400);
  assert_int_equal(refused("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", &lim), 400);
  assert_int_equal(refused("GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", &lim), 400); /* obs-fold */
  assert_int_equal(refused("GET / HTTP/1.1\nHost: a\n\n", &lim), 400);                  /* bare LF */
  assert_int_equal(refused("G@T / HTTP/1.1\r\nHost: a\r\n\r\n", &lim), 400);
  assert_int_equal(refused("GET / HTTP/1.1\r\nHost: a\r\nContent-Length : 1\r\n\r\n", &lim), 400);
  m0__parse_limits small = {1024, 256, 10};
  char big[2048];
  snprintf(big, sizeof big, "GET /%0300d HTTP/1.1\r\nHost: a\r\n\r\n", 0);
  assert_int_equal(refused(big, &small), 414);
  snprintf(big, sizeof big, "GET / HTTP/1.1\r\nHost: a\r\nX: %01100d\r\n\r\n", 0);
  assert_int_equal(refused(big, &small), 431);
  assert_int_equal(refused("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n", &small), 413);
}

/* The same request fed one byte at a time, in one growing buffer. */
static int refused_bytewise(const char *r) {
  m0__parser p;
  m0__parser_init(&p, &lim, NULL);
  size_t n = strlen(r), off = 0;
  int res = M0__PARSE_MORE;
  for (size_t len = 1; len <= n && res == M0__PARSE_MORE; len++) res = m0__parser_feed(&p, r, len, &off);
  int status = res == M0__PARSE_ERROR ? p.status : 0;
  m0__parser_fini(&p);
  return status;
}

/* What llhttp 8 (Debian 12's, compiled in strict mode) lets through and
 * llhttp 9 (Debian 13's) refuses, so m0 refuses it itself: both answer the
 * same. And no leniency is ever switched on. */
static void test_same_on_every_llhttp(void **st) {
  m0__parser p;
  m0__parser_init(&p, &lim, NULL);
  assert_int_equal(p.ll.lenient_flags, 0);
  m0__parser_fini(&p);
  static const char *const bad[] = {
      "GET / HTTP/1.1\nHost: a\r\n\r\n",                           /* a bare LF ends the request line */
      "GET / HTTP/1.1\r\nHost: a\r\n\n",                           /* ... the head */
      "\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",                       /* ... an empty line before it */
      "GET / HTTP/1.0\n\n",                                        /* ... a 1.0 request without headers */
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: y\r\n\n", /* ... the trailers */
      "GET / HTTP/1.1\r\nHost: a\r\n: x\r\n\r\n",                 /* an empty field name */
      "GET / HTTP/1.1\r\n:\r\nHost: a\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nContent-Length: 5\r\n\r\n",
      "GET / HTTP/1.1 \r\nHost: a\r\n\r\n",                        /* a malformed request line: 400, not 505 */
      "GET / HTTP/1.1\r\r\nHost: a\r\n\r\n",
      "GET / HTTP/1.10\r\nHost: a\r\n\r\n",
      /* llhttp 8 takes a run of SP between the request line's parts, RTSP/
       * for HTTP/, and skips a bare CR before the request line */
      "GET  / HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET /  HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET / RTSP/1.1\r\nHost: a\r\n\r\n",
      "\rGET / HTTP/1.1\r\nHost: a\r\n\r\n",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_int_equal(refused(bad[i], &lim), 400);
    assert_int_equal(refused_bytewise(bad[i]), 400);
  }
  static const char *const other_version[] = {"GET / HTTP/9.9\r\nHost: a\r\n\r\n", "GET / HTTP/2.0\r\nHost: a\r\n\r\n",
                                              "GET / HTTP/1.2\r\nHost: a\r\n\r\n", "GET / HTTP/0.9\r\n\r\n",
                                              "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"};
  for (size_t i = 0; i < sizeof other_version / sizeof *other_version; i++) {
    assert_int_equal(refused(other_version[i], &lim), 505);
    assert_int_equal(refused_bytewise(other_version[i]), 505);
  }
  /* A bare LF in a body is data, not a line end. */
  assert_int_equal(refused("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\na\nb", &lim), 0);
  assert_int_equal(refused_bytewise("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\na\nb\r\n0\r\n\r\n"), 0);
}

/* A CR read in one feed and its LF in the next, after the connection dropped
 * the bytes no span needs (the CR among them): still a CRLF. */
static void test_crlf_across_feeds(void **st) {
  m0__parser p;
  m0__parser_init(&p, &lim, NULL);
  char buf[128] = "GET /x HTTP/1.1\r";
  size_t off = 0;
  assert_int_equal(m0__parser_feed(&p, buf, strlen(buf), &off), M0__PARSE_MORE);
  strcpy(buf, "GET /x\nHost: h\r\n\r\n"); /* what the connection keeps, then the next read */
  off = 6;
  assert_int_equal(m0__parser_feed(&p, buf, strlen(buf), &off), M0__PARSE_REQUEST);
  span_eq(buf, p.url, "/x");
  span_eq(buf, p.hs->value[0], "h");
  m0__parser_fini(&p);
  /* and a bare LF split the same way is still refused */
  m0__parser_init(&p, &lim, NULL);
  strcpy(buf, "GET /x HTTP/1.1");
  off = 0;
  assert_int_equal(m0__parser_feed(&p, buf, strlen(buf), &off), M0__PARSE_MORE);
  strcpy(buf, "GET /x\nHost: h\r\n\r\n");
  off = 6;
  assert_int_equal(m0__parser_feed(&p, buf, strlen(buf), &off), M0__PARSE_ERROR);
  assert_int_equal(p.status, 400);
  m0__parser_fini(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_span_pool), cmocka_unit_test(test_simple_get), cmocka_unit_test(test_byte_at_a_time), cmocka_unit_test(test_pipelined),
      cmocka_unit_test(test_chunked),    cmocka_unit_test(test_shift),          cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_same_on_every_llhttp), cmocka_unit_test(test_crlf_across_feeds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
