/* The application's request helpers (include/m0/m0.h, docs/http.md):
 * percent-decoding and what it refuses, the query iterator (repeated keys,
 * empty pairs, "=v"), decoded query values, the decoded path and its
 * dot-segments, cookies read from every Cookie header, and Set-Cookie as
 * formatted byte for byte, with every refusal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http/query.h"
#include "http/response.h"
#include "m0/m0.h"

static m0_str S(const char *z) { return (m0_str){z, strlen(z)}; }

static bool str_is(m0_str s, const char *z) { return s.p && s.n == strlen(z) && memcmp(s.p, z, s.n) == 0; }

/* m0_decode of z into a buffer of cap bytes followed by guard bytes, which
 * must be untouched; the result NUL-terminated into got (when not -1). */
static long dec(const char *z, size_t cap, unsigned flags, char *got) {
  char buf[128];
  assert_true(cap + 8 <= sizeof buf);
  memset(buf, 0x5A, sizeof buf);
  long n = m0_decode(S(z), buf, cap, flags);
  for (size_t i = cap; i < sizeof buf; i++) assert_int_equal((unsigned char)buf[i], 0x5A);
  if (n >= 0) {
    assert_true((size_t)n <= cap);
    memcpy(got, buf, (size_t)n);
    got[n] = 0;
  }
  return n;
}

static void test_decode(void **st) {
  char got[128];
  assert_int_equal(dec("a%20b", 16, 0, got), 3);
  assert_string_equal(got, "a b");
  assert_int_equal(dec("%41%62%4a%4A", 16, 0, got), 4); /* either case of hex */
  assert_string_equal(got, "AbJJ");
  assert_int_equal(dec("a+b", 16, 0, got), 3); /* '+' is itself outside forms */
  assert_string_equal(got, "a+b");
  assert_int_equal(dec("a+b", 16, M0_DECODE_FORM, got), 3);
  assert_string_equal(got, "a b");
  assert_int_equal(dec("%2B+", 16, M0_DECODE_FORM, got), 2); /* an encoded '+' stays '+' */
  assert_string_equal(got, "+ ");
  assert_int_equal(dec("%C3%A9", 16, 0, got), 2); /* bytes, not characters */
  assert_string_equal(got, "\xC3\xA9");
  assert_int_equal(dec("%2F", 16, 0, got), 1); /* '/' outside a path */
  assert_string_equal(got, "/");
  assert_int_equal(dec("%25zz", 16, 0, got), 3); /* %25 is '%', decoded once */
  assert_string_equal(got, "%zz");
  assert_int_equal(dec("", 0, 0, got), 0);
  assert_int_equal(m0_decode((m0_str){NULL, 0}, NULL, 0, 0), 0);
  /* exact room is enough, one byte less is not, and nothing is written past cap */
  assert_int_equal(dec("ab%63", 3, 0, got), 3);
  assert_string_equal(got, "abc");
  assert_int_equal(dec("ab%63", 2, 0, got), -1);
  assert_int_equal(dec("x", 0, 0, got), -1);
}

static void test_decode_refusals(void **st) {
  char got[128];
  const char *bad[] = {"%", "%4", "a%4", "ab%", "%zz", "%g0", "%0g", "% 1", "%00", "a%00b", "%-1", "%+1"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_int_equal(dec(bad[i], 16, 0, got), -1);
    assert_int_equal(dec(bad[i], 16, M0_DECODE_FORM | M0_DECODE_PATH, got), -1);
  }
  char nul[] = {'a', 0, 'b'}; /* a raw NUL is refused like %00 */
  char out[8];
  assert_int_equal(m0_decode((m0_str){nul, 3}, out, sizeof out, 0), -1);
  assert_int_equal(dec("a%2Fb", 16, M0_DECODE_PATH, got), -1);
  assert_int_equal(dec("a%2fb", 16, M0_DECODE_PATH, got), -1);
  assert_int_equal(dec("a/b", 16, M0_DECODE_PATH, got), 3); /* a raw '/' is the path's own */
  assert_int_equal(dec("a%5Cb", 16, M0_DECODE_PATH, got), 3); /* '\' is no separator here */
}

typedef struct pair {
  const char *k, *v;
} pair;

/* Walks q and checks the pairs are exactly want[0..n), each inside q. */
static void walk(const char *q, const pair *want, size_t n) {
  m0_query_iter it;
  m0_str k, v;
  m0_query_init(&it, S(q));
  size_t i = 0;
  while (m0_query_next(&it, &k, &v)) {
    assert_true(i < n);
    assert_true(str_is(k, want[i].k));
    assert_true(str_is(v, want[i].v));
    assert_true(k.p >= q && k.p + k.n <= q + strlen(q));
    assert_true(v.p >= q && v.p + v.n <= q + strlen(q));
    i++;
  }
  assert_int_equal(i, n);
  assert_false(m0_query_next(&it, &k, &v)); /* and stays done */
}

static void test_query_iter(void **st) {
  walk("a=1&b=2&a=3", (pair[]){{"a", "1"}, {"b", "2"}, {"a", "3"}}, 3); /* repeated keys, in order */
  walk("a&&b", (pair[]){{"a", ""}, {"b", ""}}, 2);                    /* the empty pair is skipped */
  walk("=v", (pair[]){{"", "v"}}, 1);
  walk("k=&k", (pair[]){{"k", ""}, {"k", ""}}, 2);
  walk("a=b=c", (pair[]){{"a", "b=c"}}, 1); /* the first '=' splits */
  walk("&x=1&", (pair[]){{"x", "1"}}, 1);
  walk("=", (pair[]){{"", ""}}, 1);
  walk("a=%zz&b=+", (pair[]){{"a", "%zz"}, {"b", "+"}}, 2); /* raw: nothing decoded */
  walk("&&&", NULL, 0);
  walk("", NULL, 0);
  m0_query_iter it;
  m0_str k, v;
  m0_query_init(&it, (m0_str){NULL, 0});
  assert_false(m0_query_next(&it, &k, &v));
  /* a form body walks the same way */
  m0_request r = {.body = S("name=J%C3%B6rg&tags=a&tags=b")};
  m0_query_init(&it, r.body);
  assert_true(m0_query_next(&it, &k, &v));
  assert_true(str_is(k, "name"));
  char buf[16];
  assert_int_equal(m0_decode(v, buf, sizeof buf, M0_DECODE_FORM), 5);
  assert_memory_equal(buf, "J\xC3\xB6rg", 5);
}

static void test_query_decoded(void **st) {
  m0_request r = {.query = S("q=hello+world%21&q=second&na%6De=x&bad=%zz&bad=ok&e=&flag&nul=%00&long=abcdef"
                             "&a+b=sp&%3D=eq&k%00=nul&plus=%2B")};
  char out[64];
  size_t len = 99;
  assert_true(m0_request_query_decoded(&r, "q", out, sizeof out, &len));
  assert_int_equal(len, 12);
  assert_memory_equal(out, "hello world!", 12); /* the first of two */
  assert_true(m0_request_query_decoded(&r, "name", out, sizeof out, &len)); /* matched decoded */
  assert_int_equal(len, 1);
  assert_memory_equal(out, "x", 1);
  assert_true(m0_request_query_decoded(&r, "a b", out, sizeof out, &len)); /* '+' in a key too */
  assert_memory_equal(out, "sp", 2);
  assert_true(m0_request_query_decoded(&r, "=", out, sizeof out, &len));
  assert_memory_equal(out, "eq", 2);
  assert_true(m0_request_query_decoded(&r, "plus", out, sizeof out, &len));
  assert_int_equal(len, 1);
  assert_memory_equal(out, "+", 1);
  assert_true(m0_request_query_decoded(&r, "e", out, sizeof out, &len));
  assert_int_equal(len, 0);
  assert_true(m0_request_query_decoded(&r, "flag", out, sizeof out, &len));
  assert_int_equal(len, 0);
  assert_true(m0_request_query_decoded(&r, "long", out, 6, &len)); /* exact room */
  assert_int_equal(len, 6);
  len = 99;
  assert_false(m0_request_query_decoded(&r, "long", out, 5, &len)); /* one byte short */
  assert_false(m0_request_query_decoded(&r, "bad", out, sizeof out, &len)); /* never the later "ok" */
  assert_false(m0_request_query_decoded(&r, "nul", out, sizeof out, &len));
  assert_false(m0_request_query_decoded(&r, "k", out, sizeof out, &len)); /* "k%00" is no key */
  assert_false(m0_request_query_decoded(&r, "missing", out, sizeof out, &len));
  assert_false(m0_request_query_decoded(&r, "na%6De", out, sizeof out, &len)); /* the raw spelling is not the key */
  assert_int_equal(len, 99); /* untouched by every refusal */
  m0_request none = {0};
  assert_false(m0_request_query_decoded(&none, "q", out, sizeof out, &len));
}

static void test_query_raw(void **st) {
  /* m0_request_query reads the same pairs as the iterator: an empty piece
   * is no pair, so the empty key is "=x"'s, not the gap's. */
  m0_request r = {.query = S("a&&=x&a=2")};
  m0_str v;
  assert_true(m0_request_query(&r, "", &v));
  assert_true(str_is(v, "x"));
  assert_true(m0_request_query(&r, "a", &v));
  assert_int_equal(v.n, 0);
  long n;
  m0_request q = {.query = S("n=%34%32&m=42")};
  assert_false(m0_request_query_int(&q, "n", 0, 100, &n)); /* raw: not decoded */
  assert_true(m0_request_query_int(&q, "m", 0, 100, &n));
  assert_int_equal(n, 42);
}

static bool path_dec(const char *path, size_t cap, char *got) {
  m0_request r = {.path = S(path)};
  char buf[128];
  memset(buf, 0x5A, sizeof buf);
  size_t len = 7777;
  bool ok = m0_request_path_decoded(&r, buf, cap, &len);
  for (size_t i = cap; i < sizeof buf; i++) assert_int_equal((unsigned char)buf[i], 0x5A);
  if (!ok) {
    assert_int_equal(len, 7777);
    return false;
  }
  assert_true(len <= cap);
  memcpy(got, buf, len);
  got[len] = 0;
  return true;
}

static void test_path_decoded(void **st) {
  char got[128];
  assert_true(path_dec("/a%20b/c", 64, got));
  assert_string_equal(got, "/a b/c");
  assert_true(path_dec("/a+b", 64, got)); /* '+' is '+' in a path */
  assert_string_equal(got, "/a+b");
  assert_true(path_dec("/", 64, got));
  assert_string_equal(got, "/");
  assert_true(path_dec("", 0, got));
  assert_string_equal(got, "");
  /* "..?" is no dot-segment (req->path ends before a '?', so one there is a byte of it) */
  const char *fine[] = {"/a/..b", "/a/...", "/.hidden", "/a/%2e%2e%2e", "/a./b", "/..a", "/a//b", "/%2E%2Ex", "/a/..?"};
  for (size_t i = 0; i < sizeof fine / sizeof *fine; i++) assert_true(path_dec(fine[i], 64, got));
  const char *refused[] = {"/a%2Fb", "/a%2fb",  "/%00",   "/a/../b", "/a/./b", "/a/..",   "/..",
                           "/.",     "/%2e%2E/x", "/.%2e", "/%2e",    "/%2E.",  "..",      ".",
                           "/a/%2e/", "/%",      "/%zz",  "a/.."};
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) assert_false(path_dec(refused[i], 64, got));
  assert_true(path_dec("/abc%64", 5, got)); /* exact room */
  assert_string_equal(got, "/abcd");
  assert_false(path_dec("/abc%64", 4, got));
}

static void test_dot_segment(void **st) {
  assert_false(m0__path_dot_segment((m0_str){NULL, 0}));
  assert_false(m0__path_dot_segment(S("/")));
  assert_false(m0__path_dot_segment(S("/a/b.c/d..e/...")));
  assert_false(m0__path_dot_segment(S("/%2e%2e%2e")));
  assert_false(m0__path_dot_segment(S("/%2e%zz")));
  assert_true(m0__path_dot_segment(S(".")));
  assert_true(m0__path_dot_segment(S("..")));
  assert_true(m0__path_dot_segment(S("/x/y/..")));
  assert_true(m0__path_dot_segment(S("../x")));
  assert_true(m0__path_dot_segment(S("/x/%2E")));
  assert_true(m0__path_dot_segment(S("/x/.%2e/y")));
  assert_true(m0__path_dot_segment(S("//./")));
}

/* ---- cookies ---- */

#define H(n, v) {{n, sizeof n - 1}, {v, sizeof v - 1}}
static const m0_header cookie_hdrs[] = {
    H("Host", "example"),
    H("Cookie", "a=1; b=2"),
    H("X-Cookie", "z=9"),
    H("cookie", "c=3;d=\"q v\""),
    H("COOKIE", "  e = 5 ; f=; =g; bare; h=\"\"; i=\"; j=x y;;"),
    H("Cookie", ""),
    H("Cookie", "a=second; k=a=b"),
};

static void test_cookie_read(void **st) {
  m0_request r = {.headers = cookie_hdrs, .nheaders = sizeof cookie_hdrs / sizeof *cookie_hdrs};
  m0_str v;
  assert_true(m0_request_cookie(&r, "a", &v));
  assert_true(str_is(v, "1")); /* the first, over every Cookie header */
  assert_true(m0_request_cookie(&r, "b", &v));
  assert_true(str_is(v, "2"));
  assert_true(m0_request_cookie(&r, "c", &v)); /* no space after ';', header name in any case */
  assert_true(str_is(v, "3"));
  assert_true(m0_request_cookie(&r, "d", &v)); /* the DQUOTEs are not the value */
  assert_true(str_is(v, "q v"));
  assert_true(m0_request_cookie(&r, "e", &v)); /* spaces around name and value */
  assert_true(str_is(v, "5"));
  assert_true(m0_request_cookie(&r, "f", &v)); /* present and empty */
  assert_non_null(v.p);
  assert_int_equal(v.n, 0);
  assert_true(m0_request_cookie(&r, "h", &v));
  assert_int_equal(v.n, 0);
  assert_true(m0_request_cookie(&r, "i", &v)); /* one DQUOTE is no pair of them */
  assert_true(str_is(v, "\""));
  assert_true(m0_request_cookie(&r, "j", &v)); /* read leniently */
  assert_true(str_is(v, "x y"));
  assert_true(m0_request_cookie(&r, "k", &v));
  assert_true(str_is(v, "a=b"));
  assert_false(m0_request_cookie(&r, "bare", &v)); /* no '=': no cookie */
  assert_false(m0_request_cookie(&r, "z", &v));    /* X-Cookie is another header */
  assert_false(m0_request_cookie(&r, "A", &v));    /* names are case-sensitive */
  assert_false(m0_request_cookie(&r, "", &v));     /* "=g" has no name to ask for */
  assert_false(m0_request_cookie(&r, "a b", &v));  /* not a token */
  assert_false(m0_request_cookie(&r, "missing", &v));
  m0_request none = {0};
  assert_false(m0_request_cookie(&none, "a", &v));
}

static void test_cookie_many_headers(void **st) {
  enum { N = 40 };
  static char vals[N][16];
  m0_header h[N];
  for (int i = 0; i < N; i++) {
    int n = snprintf(vals[i], sizeof vals[i], "k%d=v%d", i, i);
    h[i] = (m0_header){{"Cookie", 6}, {vals[i], (size_t)n}};
  }
  m0_request r = {.headers = h, .nheaders = N};
  m0_str v;
  assert_true(m0_request_cookie(&r, "k39", &v));
  assert_true(str_is(v, "v39"));
  assert_true(m0_request_cookie(&r, "k0", &v));
  assert_true(str_is(v, "v0"));
  assert_false(m0_request_cookie(&r, "k40", &v));
}

static void fmt_is(const char *name, const char *value, const m0_cookie_attrs *a, const char *want) {
  char out[512];
  long n = m0_cookie_format(out, sizeof out, name, value, a);
  assert_int_equal(n, (long)strlen(want));
  assert_string_equal(out, want);
  /* exactly its length and a NUL is enough; one byte less is refused */
  assert_int_equal(m0_cookie_format(out, (size_t)n + 1, name, value, a), n);
  assert_int_equal(m0_cookie_format(out, (size_t)n, name, value, a), -1);
}

static void test_cookie_format(void **st) {
  fmt_is("sid", "abc", NULL, "sid=abc");
  fmt_is("sid", "", NULL, "sid=");
  fmt_is("sid", "\"ab\"", NULL, "sid=\"ab\""); /* DQUOTEs kept as given */
  fmt_is("s!#$%&'*+-.^_`|~9", "!#$%&'()*+-./:<=>?@[]^_`{|}~", &(m0_cookie_attrs){0},
         "s!#$%&'*+-.^_`|~9=!#$%&'()*+-./:<=>?@[]^_`{|}~");
  fmt_is("sid", "abc",
         &(m0_cookie_attrs){.path = "/",
                            .domain = "example.com",
                            .has_max_age = true,
                            .max_age = 3600,
                            .expires = 784111777,
                            .secure = true,
                            .http_only = true,
                            .same_site = M0_SAME_SITE_STRICT},
         "sid=abc; Path=/; Domain=example.com; Max-Age=3600; Expires=Sun, 06 Nov 1994 08:49:37 GMT; Secure; "
         "HttpOnly; SameSite=Strict");
  fmt_is("gone", "", &(m0_cookie_attrs){.has_max_age = true, .max_age = 0, .expires = 1},
         "gone=; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:01 GMT");
  fmt_is("l", "1", &(m0_cookie_attrs){.same_site = M0_SAME_SITE_LAX}, "l=1; SameSite=Lax");
  fmt_is("n", "1", &(m0_cookie_attrs){.same_site = M0_SAME_SITE_NONE, .secure = true}, "n=1; Secure; SameSite=None");
  fmt_is("h", "1", &(m0_cookie_attrs){.http_only = true}, "h=1; HttpOnly");
  fmt_is("p", "1", &(m0_cookie_attrs){.path = "/a b/~x"}, "p=1; Path=/a b/~x");
  fmt_is("d", "1", &(m0_cookie_attrs){.domain = ".Example-1.org"}, "d=1; Domain=.Example-1.org");
  fmt_is("__Secure-x", "1", &(m0_cookie_attrs){.secure = true}, "__Secure-x=1; Secure");
  fmt_is("__Host-x", "1", &(m0_cookie_attrs){.secure = true, .path = "/"}, "__Host-x=1; Path=/; Secure");
  fmt_is("big", "1", &(m0_cookie_attrs){.has_max_age = true, .max_age = 2147483647L, .expires = 253402300799LL},
         "big=1; Max-Age=2147483647; Expires=Fri, 31 Dec 9999 23:59:59 GMT");
}

static void test_cookie_refusals(void **st) {
  char out[512];
  const char *names[] = {"", "a b", "a;b", "a=b", "a,b", "a\"b", "a(b", "a/b", "a:b", "\xC3\xA4", "a\tb", "a\x7f"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    assert_int_equal(m0_cookie_format(out, sizeof out, names[i], "v", NULL), -1);
  const char *values[] = {"a b", "a;b", "a,b", "a\\b", "a\"b", "\"", "\"a", "a\"", "\"a b\"", "a\tb", "\x01",
                          "\x7f", "\xC3\xA4", "\"\"\""};
  for (size_t i = 0; i < sizeof values / sizeof *values; i++)
    assert_int_equal(m0_cookie_format(out, sizeof out, "n", values[i], NULL), -1);
  assert_int_equal(m0_cookie_format(out, sizeof out, "n", "\"\"", NULL), 4); /* empty inside DQUOTEs is fine */
  const m0_cookie_attrs bad[] = {
      {.path = ""},
      {.path = "/a;b"},
      {.path = "/a\x01"},
      {.path = "/a\r\nX: y"},
      {.path = "/\xC3\xA4"},
      {.domain = ""},
      {.domain = "ex ample.com"},
      {.domain = "a;b"},
      {.domain = "[::1]"},
      {.has_max_age = true, .max_age = -1},
      {.expires = -1},
      {.expires = 253402300800LL},
      {.same_site = M0_SAME_SITE_NONE},
      {.same_site = (m0_same_site)7},
      {.same_site = (m0_same_site)-1},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) assert_int_equal(m0_cookie_format(out, sizeof out, "n", "v", &bad[i]), -1);
  /* the prefixes' rules (without case, as browsers match them) */
  assert_int_equal(m0_cookie_format(out, sizeof out, "__Secure-x", "1", NULL), -1);
  assert_int_equal(m0_cookie_format(out, sizeof out, "__secure-x", "1", NULL), -1);
  assert_int_equal(m0_cookie_format(out, sizeof out, "__Host-x", "1", &(m0_cookie_attrs){.path = "/"}), -1);
  assert_int_equal(m0_cookie_format(out, sizeof out, "__Host-x", "1", &(m0_cookie_attrs){.secure = true}), -1);
  assert_int_equal(
      m0_cookie_format(out, sizeof out, "__Host-x", "1", &(m0_cookie_attrs){.secure = true, .path = "/a"}), -1);
  assert_int_equal(m0_cookie_format(out, sizeof out, "__HOST-x", "1",
                                    &(m0_cookie_attrs){.secure = true, .path = "/", .domain = "example.com"}),
                   -1);
  assert_int_equal(m0_cookie_format(out, 0, "n", "v", NULL), -1);
  /* a name that only starts like a prefix is an ordinary name */
  assert_int_equal(m0_cookie_format(out, sizeof out, "__Host", "1", NULL), 8);
}

/* Expires against the C library's own calendar, in the C locale. */
static void test_cookie_expires_calendar(void **st) {
  static const int64_t t[] = {1,          59,         86399,      86400,      951782400 /* 2000-02-29 */,
                              951868799,  4107542400 /* 2100-03-01 */, 1709164800 /* 2024-02-29 */,
                              2147483647, 2147483648LL, 253402300799LL, 4102444800LL /* 2100-01-01 */};
  setlocale(LC_TIME, "C");
  for (size_t i = 0; i < sizeof t / sizeof *t + 400; i++) {
    int64_t x = i < sizeof t / sizeof *t ? t[i] : (int64_t)(i * 632198731ULL % 253402300799ULL) + 1;
    char out[128], want[128];
    time_t tt = (time_t)x;
    struct tm tm;
    assert_non_null(gmtime_r(&tt, &tm));
    size_t wn = strftime(want, sizeof want, "x=1; Expires=%a, %d %b %Y %H:%M:%S GMT", &tm);
    assert_int_equal(m0_cookie_format(out, sizeof out, "x", "1", &(m0_cookie_attrs){.expires = x}), (long)wn);
    assert_string_equal(out, want);
  }
}

typedef struct resp {
  m0__outq q;
  m0__date date;
  m0_response r;
} resp;

static char *flat(const m0__outq *q) {
  uv_buf_t iov[2 * M0__OUT_REFS + 1];
  int k = m0__outq_iov(q, 0, iov);
  size_t total = 0;
  for (int i = 0; i < k; i++) total += iov[i].len;
  char *out = malloc(total + 1);
  size_t at = 0;
  for (int i = 0; i < k; i++) {
    memcpy(out + at, iov[i].base, iov[i].len);
    at += iov[i].len;
  }
  out[at] = 0;
  return out;
}

static void test_response_cookie(void **st) {
  resp x;
  memset(&x, 0, sizeof x);
  m0__response_init(&x.r, &x.q, &x.date, 1, false, false);
  assert_int_equal(m0_response_cookie(&x.r, "a", "1", &(m0_cookie_attrs){.path = "/"}), 0);
  assert_int_equal(m0_response_cookie(&x.r, "b c", "2", NULL), -1); /* refused: nothing added */
  assert_int_equal(m0_response_cookie(&x.r, "n", "1", &(m0_cookie_attrs){.same_site = M0_SAME_SITE_NONE}), -1);
  assert_int_equal(m0_response_cookie(&x.r, "b", "2", &(m0_cookie_attrs){.http_only = true}), 0); /* a second one */
  char big[5000];
  memset(big, 'v', sizeof big - 1);
  big[sizeof big - 1] = 0;
  assert_int_equal(m0_response_cookie(&x.r, "big", big, NULL), -1); /* over 4096 bytes */
  assert_int_equal(m0_respond(&x.r, 200, NULL, "", 0, M0_BODY_COPY), 0);
  assert_int_equal(m0_response_cookie(&x.r, "late", "1", NULL), -1); /* answered already */
  char *got = flat(&x.q);
  assert_non_null(strstr(got, "\r\nSet-Cookie: a=1; Path=/\r\nSet-Cookie: b=2; HttpOnly\r\n"));
  assert_null(strstr(got, "b c"));
  assert_null(strstr(got, "n=1"));
  assert_null(strstr(got, "big="));
  assert_null(strstr(got, "late"));
  const char *first = strstr(got, "Set-Cookie");
  assert_null(strstr(strstr(first + 1, "Set-Cookie") + 1, "Set-Cookie")); /* exactly two */
  free(got);
  m0__outq_free(&x.q);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_decode),
      cmocka_unit_test(test_decode_refusals),
      cmocka_unit_test(test_query_iter),
      cmocka_unit_test(test_query_decoded),
      cmocka_unit_test(test_query_raw),
      cmocka_unit_test(test_path_decoded),
      cmocka_unit_test(test_dot_segment),
      cmocka_unit_test(test_cookie_read),
      cmocka_unit_test(test_cookie_many_headers),
      cmocka_unit_test(test_cookie_format),
      cmocka_unit_test(test_cookie_refusals),
      cmocka_unit_test(test_cookie_expires_calendar),
      cmocka_unit_test(test_response_cookie),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
