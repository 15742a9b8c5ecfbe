/* The application's side of HTTP (include/m0/m0.h): the request accessors
 * (headers by name, query parameters, integers in a range) and the response
 * writer, byte for byte (status lines and reasons for every status the host
 * emits, bodyless statuses, HEAD, Connection, added headers and their
 * refusals, copied and static bodies, m0_respondf past its stack buffer, a
 * status or Content-Type that would make a broken head, streams), and the
 * output queue a partial write resumes from. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "http/response.h"
#include "m0/m0.h"

static m0_str S(const char *z) { return (m0_str){z, strlen(z)}; }

static bool str_is(m0_str s, const char *z) { return s.p && s.n == strlen(z) && memcmp(s.p, z, s.n) == 0; }

/* ---- requests ---- */

static const m0_header hdrs[] = {
    {{"Host", 4}, {"example", 7}},
    {{"Content-Type", 12}, {"text/plain", 10}},
    {{"X-Empty", 7}, {"", 0}},
    {{"x-dup", 5}, {"first", 5}},
    {{"X-Dup", 5}, {"second", 6}},
};

static void test_request_header(void **st) {
  m0_request r = {.headers = hdrs, .nheaders = 5};
  assert_true(str_is(m0_request_header(&r, "Host"), "example"));
  assert_true(str_is(m0_request_header(&r, "HOST"), "example"));
  assert_true(str_is(m0_request_header(&r, "content-type"), "text/plain"));
  assert_true(str_is(m0_request_header(&r, "x-DUP"), "first")); /* the first of two */
  m0_str e = m0_request_header(&r, "x-empty");
  assert_non_null(e.p); /* present and empty is not absent */
  assert_int_equal(e.n, 0);
  m0_str none = m0_request_header(&r, "Hos"); /* a prefix is another name */
  assert_null(none.p);
  assert_int_equal(none.n, 0);
  assert_null(m0_request_header(&r, "Hostx").p);
  assert_null(m0_request_header(&r, "Accept").p);
  m0_request bare = {0};
  assert_null(m0_request_header(&bare, "Host").p);
}

static void test_request_query(void **st) {
  m0_request r = {.query = S("a=1&flag&b=two&a=3&=x&empty=&ab=9")};
  m0_str v;
  assert_true(m0_request_query(&r, "a", &v));
  assert_true(str_is(v, "1")); /* the first occurrence */
  assert_true(m0_request_query(&r, "b", &v));
  assert_true(str_is(v, "two"));
  assert_true(m0_request_query(&r, "flag", &v)); /* a key without '=' */
  assert_int_equal(v.n, 0);
  assert_true(m0_request_query(&r, "empty", &v));
  assert_int_equal(v.n, 0);
  assert_true(m0_request_query(&r, "ab", &v));
  assert_true(str_is(v, "9"));
  assert_false(m0_request_query(&r, "fla", &v)); /* a prefix is another key */
  assert_false(m0_request_query(&r, "c", &v));
  assert_true(m0_request_query(&r, "", &v)); /* "=x" */
  assert_true(str_is(v, "x"));
  m0_request none = {0};
  assert_false(m0_request_query(&none, "a", &v));
  m0_request empty = {.query = {"", 0}};
  assert_false(m0_request_query(&empty, "a", &v));
  m0_request amps = {.query = S("&&k=v&")};
  assert_true(m0_request_query(&amps, "k", &v));
  assert_true(str_is(v, "v"));
}

static void test_request_query_int(void **st) {
  m0_request r = {.query = S("n=42&neg=-7&zero=0&minus=-&plus=+5&x=4x&e=&big=1234567890123456789&l=123456789012345678"
                             "&flag")};
  long out = -1;
  assert_true(m0_request_query_int(&r, "n", 0, 100, &out));
  assert_int_equal(out, 42);
  assert_true(m0_request_query_int(&r, "neg", -10, 10, &out));
  assert_int_equal(out, -7);
  assert_true(m0_request_query_int(&r, "zero", 0, 0, &out));
  assert_int_equal(out, 0);
  assert_true(m0_request_query_int(&r, "l", 0, 999999999999999999L, &out));
  assert_int_equal(out, 123456789012345678L);
  out = -1;
  assert_false(m0_request_query_int(&r, "n", 0, 41, &out));  /* above max */
  assert_false(m0_request_query_int(&r, "n", 43, 99, &out)); /* below min */
  assert_false(m0_request_query_int(&r, "neg", 0, 10, &out));
  assert_false(m0_request_query_int(&r, "minus", -10, 10, &out)); /* a sign alone */
  assert_false(m0_request_query_int(&r, "plus", 0, 10, &out));
  assert_false(m0_request_query_int(&r, "x", 0, 10, &out));
  assert_false(m0_request_query_int(&r, "e", 0, 10, &out));
  assert_false(m0_request_query_int(&r, "flag", 0, 10, &out));
  assert_false(m0_request_query_int(&r, "big", 0, 9223372036854775807L, &out)); /* 19 digits: not read */
  assert_false(m0_request_query_int(&r, "missing", 0, 10, &out));
  assert_int_equal(out, -1); /* untouched by every refusal */
}

/* ---- responses ---- */

typedef struct resp {
  m0__outq q;
  m0__date date;
  m0_response r;
} resp;

static void resp_init(resp *x, int minor, bool head, bool close) {
  memset(x, 0, sizeof *x);
  m0__response_init(&x->r, &x->q, &x->date, minor, head, close);
}

/* What the queue would write, flattened, NUL-terminated (freed by the caller). */
static char *flat(const m0__outq *q, size_t skip, size_t *n) {
  uv_buf_t iov[2 * M0__OUT_REFS + 1];
  int k = m0__outq_iov(q, skip, iov);
  size_t total = 0;
  for (int i = 0; i < k; i++) total += iov[i].len;
  char *out = malloc(total + 1);
  size_t at = 0;
  for (int i = 0; i < k; i++) {
    memcpy(out + at, iov[i].base, iov[i].len);
    at += iov[i].len;
  }
  out[at] = 0;
  if (n) *n = at;
  return out;
}

/* The expected response: the status line, Server, a Date line (checked for
 * its form: the one this response carries, whatever second it was made in),
 * then `rest`. */
static void assert_response(resp *x, const char *status_line, const char *rest) {
  char *got = flat(&x->q, 0, NULL);
  char head[128];
  snprintf(head, sizeof head, "%s\r\nServer: m0\r\n", status_line);
  size_t hn = strlen(head), dn = strlen("Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n");
  assert_true(strlen(got) >= hn + dn);
  assert_memory_equal(got, head, hn);
  const char *date = got + hn;
  assert_memory_equal(date, "Date: ", 6);
  assert_memory_equal(date + 9, ", ", 2);
  assert_memory_equal(date + dn - 6, " GMT\r\n", 6);
  assert_string_equal(got + hn + dn, rest);
  free(got);
  m0__outq_free(&x->q);
}

static void test_respond_basic(void **st) {
  resp x;
  resp_init(&x, 1, false, false);
  assert_int_equal(m0_respond(&x.r, 200, "application/json", "{\"ok\":true}", 11, M0_BODY_COPY), 0);
  assert_true(x.r.done);
  assert_int_equal(x.r.status, 200);
  assert_int_equal(m0_respond(&x.r, 201, NULL, NULL, 0, M0_BODY_COPY), -1); /* one answer per request */
  assert_response(&x, "HTTP/1.1 200 OK",
                  "Content-Length: 11\r\nContent-Type: application/json\r\n\r\n{\"ok\":true}");
  /* no content type; an empty body still has its length */
  resp_init(&x, 1, false, false);
  m0_respond(&x.r, 201, NULL, NULL, 0, M0_BODY_STATIC);
  assert_response(&x, "HTTP/1.1 201 Created", "Content-Length: 0\r\n\r\n");
  /* the connection closes after it; HTTP/1.0 keeps alive only when said */
  resp_init(&x, 1, false, true);
  m0_respond(&x.r, 200, "text/plain", "x", 1, M0_BODY_COPY);
  assert_response(&x, "HTTP/1.1 200 OK", "Content-Length: 1\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nx");
  resp_init(&x, 0, false, false);
  m0_respond(&x.r, 200, "text/plain", "x", 1, M0_BODY_COPY);
  assert_response(&x, "HTTP/1.1 200 OK",
                  "Content-Length: 1\r\nContent-Type: text/plain\r\nConnection: keep-alive\r\n\r\nx");
  resp_init(&x, 0, false, true);
  m0_respond(&x.r, 200, "text/plain", "x", 1, M0_BODY_COPY);
  assert_response(&x, "HTTP/1.1 200 OK", "Content-Length: 1\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nx");
}

/* HEAD: the length of the body it would get, not the body. 204 and 304
 * carry neither; 205 says Content-Length: 0 and sends nothing; a 1xx, or
 * anything outside 200..599, is refused and answered 500. */
static void test_respond_bodyless(void **st) {
  resp x;
  resp_init(&x, 1, true, false);
  m0_respond(&x.r, 200, "text/plain", "hello", 5, M0_BODY_COPY);
  assert_int_equal(x.r.body_len, 5);
  assert_response(&x, "HTTP/1.1 200 OK", "Content-Length: 5\r\nContent-Type: text/plain\r\n\r\n");
  static char big[4096];
  memset(big, 'b', sizeof big);
  resp_init(&x, 1, true, false);
  m0_respond(&x.r, 200, NULL, big, sizeof big, M0_BODY_STATIC);
  assert_int_equal(x.q.nrefs, 0);
  assert_response(&x, "HTTP/1.1 200 OK", "Content-Length: 4096\r\n\r\n");
  const int none[] = {204, 304};
  const char *lines[] = {"HTTP/1.1 204 No Content", "HTTP/1.1 304 Not Modified"};
  for (int i = 0; i < 2; i++) {
    resp_init(&x, 1, false, false);
    assert_int_equal(m0_respond(&x.r, none[i], "text/plain", "ignored", 7, M0_BODY_COPY), 0);
    assert_int_equal(x.r.body_len, 0);
    assert_response(&x, lines[i], "Content-Type: text/plain\r\n\r\n");
  }
  resp_init(&x, 1, false, false);
  assert_int_equal(m0_respond(&x.r, 205, "text/plain", "ignored", 7, M0_BODY_COPY), 0);
  assert_response(&x, "HTTP/1.1 205 Reset Content", "Content-Length: 0\r\nContent-Type: text/plain\r\n\r\n");
  const int refused[] = {-1, 0, 99, 100, 101, 103, 199, 600, 1000};
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    resp_init(&x, 1, false, false);
    assert_int_equal(m0_respond(&x.r, refused[i], "text/plain", "x", 1, M0_BODY_COPY), -1);
    assert_int_equal(x.r.status, 500);
    assert_response(&x, "HTTP/1.1 500 Internal Server Error",
                    "Content-Length: 26\r\nContent-Type: text/plain\r\n\r\n500 Internal Server Error\n");
  }
}

/* A copied body is the caller's to reuse at once; a static one is written
 * from where it lies (when it is large enough to be worth it). */
static void test_respond_body_modes(void **st) {
  resp x;
  char buf[2048];
  memset(buf, 'c', sizeof buf);
  resp_init(&x, 1, false, false);
  m0_respond(&x.r, 200, NULL, buf, sizeof buf, M0_BODY_COPY);
  assert_int_equal(x.q.nrefs, 0);
  memset(buf, 'X', sizeof buf); /* reused: the response keeps what was given */
  char *got = flat(&x.q, 0, NULL);
  char *body = strstr(got, "\r\n\r\n") + 4;
  assert_int_equal(strlen(body), sizeof buf);
  for (size_t i = 0; i < sizeof buf; i++) assert_int_equal(body[i], 'c');
  free(got);
  m0__outq_free(&x.q);
  static const char stat_body[3000] = "static";
  resp_init(&x, 1, false, false);
  m0_respond(&x.r, 200, NULL, stat_body, sizeof stat_body, M0_BODY_STATIC);
  assert_int_equal(x.q.nrefs, 1);
  assert_ptr_equal(x.q.refs[0].p, stat_body); /* not copied */
  assert_int_equal(m0__outq_bytes(&x.q), x.q.copied.len + sizeof stat_body);
  m0__outq_free(&x.q);
  /* a small static body is copied (cheaper than a reference) */
  resp_init(&x, 1, false, false);
  m0_respond(&x.r, 200, NULL, "tiny", 4, M0_BODY_STATIC);
  assert_int_equal(x.q.nrefs, 0);
  assert_response(&x, "HTTP/1.1 200 OK", "Content-Length: 4\r\n\r\ntiny");
}

/* An owned body: referenced, never copied, freed exactly once, whatever
 * happens to it (written, moved to a connection's queue, not sent, refused). */
static int freed;
static void count_free(void *p) {
  freed++;
  free(p);
}

static char *owned(size_t n) {
  char *p = malloc(n);
  memset(p, 'o', n);
  return p;
}

static void test_respond_owned(void **st) {
  resp x;
  freed = 0;
  resp_init(&x, 1, false, false);
  char *b = owned(4096);
  assert_int_equal(m0_respond_owned(&x.r, 200, NULL, b, 4096, count_free), 0);
  assert_int_equal(x.q.nrefs, 1);
  assert_ptr_equal(x.q.refs[0].p, b); /* not copied */
  assert_int_equal(freed, 0);
  /* moved to another queue after 10 bytes of its head were written: the
   * other queue owns it now */
  m0__outq dst = {0};
  size_t total = m0__outq_bytes(&x.q);
  assert_int_equal(m0__outq_move_tail(&dst, &x.q, 10), 0);
  m0__outq_free(&x.q); /* what it held is dst's: nothing freed here */
  assert_int_equal(freed, 0);
  assert_int_equal(m0__outq_bytes(&dst), total - 10);
  assert_ptr_equal(dst.refs[0].p, b);
  m0__outq_free(&dst);
  assert_int_equal(freed, 1);
  /* moved from inside the body: the rest is referenced, the whole freed once */
  resp_init(&x, 1, false, false);
  b = owned(4096);
  m0_respond_owned(&x.r, 200, NULL, b, 4096, count_free);
  size_t head = x.q.copied.len;
  memset(&dst, 0, sizeof dst);
  assert_int_equal(m0__outq_move_tail(&dst, &x.q, head + 100), 0);
  m0__outq_free(&x.q);
  assert_int_equal(m0__outq_bytes(&dst), 4096 - 100);
  assert_ptr_equal(dst.refs[0].p, b + 100);
  m0__outq_clear(&dst);
  assert_int_equal(freed, 2);
  m0__outq_free(&dst);
  assert_int_equal(freed, 2);
  /* not sent: HEAD, 204, a refused status, a second answer; small: copied */
  resp_init(&x, 1, true, false);
  assert_int_equal(m0_respond_owned(&x.r, 200, NULL, owned(4096), 4096, count_free), 0);
  assert_int_equal(freed, 3);
  assert_response(&x, "HTTP/1.1 200 OK", "Content-Length: 4096\r\n\r\n");
  resp_init(&x, 1, false, false);
  assert_int_equal(m0_respond_owned(&x.r, 204, NULL, owned(4096), 4096, count_free), 0);
  assert_int_equal(freed, 4);
  assert_int_equal(m0_respond_owned(&x.r, 200, NULL, owned(10), 10, count_free), -1); /* answered already */
  assert_int_equal(freed, 5);
  m0__outq_free(&x.q);
  resp_init(&x, 1, false, false);
  assert_int_equal(m0_respond_owned(&x.r, 99, NULL, owned(4096), 4096, count_free), -1);
  assert_int_equal(freed, 6);
  m0__outq_free(&x.q);
  resp_init(&x, 1, false, false);
  assert_int_equal(m0_respond_owned(&x.r, 200, NULL, owned(5), 5, count_free), 0);
  assert_int_equal(freed, 7); /* copied: cheaper than a reference */
  assert_response(&x, "HTTP/1.1 200 OK", "Content-Length: 5\r\n\r\nooooo");
  /* NULL free_fn is free(3) (ASan would see a leak or a bad free) */
  resp_init(&x, 1, false, false);
  assert_int_equal(m0_respond_owned(&x.r, 200, NULL, owned(2048), 2048, NULL), 0);
  m0__outq_free(&x.q);
}

static void test_status_reasons(void **st) {
  /* every status the host itself emits, and the common ones a view uses */
  static const struct {
    int status;
    const char *reason;
  } all[] = {{200, "OK"},
             {201, "Created"},           {202, "Accepted"},
             {204, "No Content"},        {301, "Moved Permanently"},
             {302, "Found"},             {304, "Not Modified"},
             {400, "Bad Request"},       {401, "Unauthorized"},
             {403, "Forbidden"},         {404, "Not Found"},
             {405, "Method Not Allowed"}, {408, "Request Timeout"},
             {409, "Conflict"},          {411, "Length Required"},
             {413, "Content Too Large"}, {414, "URI Too Long"},
             {417, "Expectation Failed"}, {422, "Unprocessable Content"},
             {429, "Too Many Requests"}, {431, "Request Header Fields Too Large"},
             {500, "Internal Server Error"}, {501, "Not Implemented"},
             {503, "Service Unavailable"}, {505, "HTTP Version Not Supported"},
             {206, "Partial Content"},   {303, "See Other"},
             {307, "Temporary Redirect"}, {308, "Permanent Redirect"},
             {410, "Gone"},              {412, "Precondition Failed"},
             {415, "Unsupported Media Type"}, {418, "I'm a teapot"},
             {502, "Bad Gateway"},       {504, "Gateway Timeout"},
             {507, "Insufficient Storage"}, {207, "Multi-Status"},
             {425, "Too Early"},         {508, "Loop Detected"},
             {299, ""},                  {599, ""}}; /* unregistered: no phrase (RFC 9112 section 4) */
  assert_string_equal(m0__status_reason(100), "Continue"); /* the host's own interim answer */
  assert_string_equal(m0__status_reason(101), "Switching Protocols");
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
    assert_string_equal(m0__status_reason(all[i].status), all[i].reason);
    resp x;
    resp_init(&x, 1, false, false);
    assert_int_equal(m0_respond(&x.r, all[i].status, NULL, NULL, 0, M0_BODY_COPY), 0);
    char line[96];
    snprintf(line, sizeof line, "HTTP/1.1 %d %s\r\n", all[i].status, all[i].reason);
    char *got = flat(&x.q, 0, NULL);
    assert_memory_equal(got, line, strlen(line));
    free(got);
    m0__outq_free(&x.q);
  }
}

/* The host's own answers: a short text body naming the status, Allow on
 * 405 and OPTIONS (204: no body). */
static void test_respond_status(void **st) {
  resp x;
  resp_init(&x, 1, false, false);
  m0__respond_status(&x.r, 404, NULL);
  assert_response(&x, "HTTP/1.1 404 Not Found", "Content-Length: 14\r\nContent-Type: text/plain\r\n\r\n404 Not Found\n");
  resp_init(&x, 1, false, true);
  m0__respond_status(&x.r, 405, "GET, HEAD, OPTIONS");
  assert_response(&x, "HTTP/1.1 405 Method Not Allowed",
                  "Content-Length: 23\r\nContent-Type: text/plain\r\nConnection: close\r\nAllow: GET, HEAD, OPTIONS\r\n"
                  "\r\n405 Method Not Allowed\n");
  resp_init(&x, 1, false, false);
  m0__respond_status(&x.r, 204, "POST, OPTIONS");
  assert_response(&x, "HTTP/1.1 204 No Content", "Allow: POST, OPTIONS\r\n\r\n");
}

static void test_response_header(void **st) {
  resp x;
  resp_init(&x, 1, false, false);
  assert_int_equal(m0_response_header(&x.r, "X-One", "1"), 0);
  assert_int_equal(m0_response_header(&x.r, "Cache-Control", "no-store"), 0);
  assert_int_equal(m0_response_header(&x.r, "X-Empty", ""), 0);
  /* refused: what would split the head, or a name with a colon */
  assert_int_equal(m0_response_header(&x.r, "X-Bad", "a\r\nSet-Cookie: x=1"), -1);
  assert_int_equal(m0_response_header(&x.r, "X-Bad", "a\nb"), -1);
  assert_int_equal(m0_response_header(&x.r, "X-Bad\r\nInjected", "v"), -1);
  assert_int_equal(m0_response_header(&x.r, "X-Bad: v\r\n", "v"), -1);
  assert_int_equal(m0_response_header(&x.r, "X:Bad", "v"), -1);
  /* refused: a name that is no token, a control byte, the host's own
   * headers (framing, the connection's, Date, Server) and Content-Type
   * (m0_respond's argument) */
  const char *not_names[] = {"", "X Bad", "X\tBad", "X(Bad)", "X/Bad", "X\"", "\xc3\xa9"};
  for (size_t i = 0; i < sizeof not_names / sizeof *not_names; i++)
    assert_int_equal(m0_response_header(&x.r, not_names[i], "v"), -1);
  assert_int_equal(m0_response_header(&x.r, "X-Bad", "a\x01b"), -1);
  assert_int_equal(m0_response_header(&x.r, "X-Bad", "a\x7f"), -1);
  const char *hosts[] = {"Content-Length", "content-length", "Transfer-Encoding", "Connection", "Keep-Alive",
                         "Proxy-Connection", "Upgrade", "TE", "Trailer", "Date", "SERVER", "Content-Type"};
  for (size_t i = 0; i < sizeof hosts / sizeof *hosts; i++)
    assert_int_equal(m0_response_header(&x.r, hosts[i], "1"), -1);
  assert_int_equal(m0_response_header(NULL, "X", "v"), -1);
  assert_int_equal(m0_response_header(&x.r, NULL, "v"), -1);
  assert_int_equal(m0_response_header(&x.r, "X", NULL), -1);
  /* the block has a limit: a header that would pass it is not added */
  char huge[M0__EXTRA_HEADERS];
  memset(huge, 'h', sizeof huge - 1);
  huge[sizeof huge - 1] = 0;
  assert_int_equal(m0_response_header(&x.r, "X-Huge", huge), -1);
  m0_respond(&x.r, 200, NULL, "ok", 2, M0_BODY_COPY);
  assert_int_equal(m0_response_header(&x.r, "X-Late", "1"), -1); /* after the answer */
  assert_response(&x, "HTTP/1.1 200 OK",
                  "Content-Length: 2\r\nX-One: 1\r\nCache-Control: no-store\r\nX-Empty: \r\n\r\nok");
  /* headers up to the limit all go out */
  resp_init(&x, 1, false, false);
  char v[100];
  memset(v, 'v', sizeof v - 1);
  v[sizeof v - 1] = 0;
  int added = 0;
  while (m0_response_header(&x.r, "X-Fill", v) == 0) added++;
  assert_int_equal(added, M0__EXTRA_HEADERS / (6 + 99 + 4));
  m0_respond(&x.r, 200, NULL, NULL, 0, M0_BODY_COPY);
  char *got = flat(&x.q, 0, NULL);
  int seen = 0;
  for (char *p = got; (p = strstr(p, "X-Fill: ")); p++) seen++;
  assert_int_equal(seen, added);
  free(got);
  m0__outq_free(&x.q);
  /* a value's surrounding spaces and tabs go; inside ones and obs-text stay */
  resp_init(&x, 1, false, false);
  assert_int_equal(m0_response_header(&x.r, "X-Pad", " \t a  b \t "), 0);
  assert_int_equal(m0_response_header(&x.r, "X-Utf8", "\xc3\xa9"), 0);
  assert_int_equal(m0_response_header(&x.r, "X-Blank", " \t "), 0);
  m0_respond(&x.r, 200, NULL, NULL, 0, M0_BODY_COPY);
  assert_response(&x, "HTTP/1.1 200 OK", "Content-Length: 0\r\nX-Pad: a  b\r\nX-Utf8: \xc3\xa9\r\nX-Blank: \r\n\r\n");
}

/* Set replaces every header of the name (any case) with one; remove takes
 * them all out; what is refused changes nothing. */
static void test_response_header_set_remove(void **st) {
  resp x;
  resp_init(&x, 1, false, false);
  assert_int_equal(m0_response_header(&x.r, "Set-Cookie", "a=1"), 0);
  assert_int_equal(m0_response_header(&x.r, "X-Keep", "k"), 0);
  assert_int_equal(m0_response_header(&x.r, "set-cookie", "b=2"), 0);
  assert_int_equal(m0_response_header(&x.r, "X-Set", "old"), 0);
  assert_int_equal(m0_response_header_set(&x.r, "x-set", "new"), 0);
  assert_int_equal(m0_response_header_set(&x.r, "X-Fresh", "f"), 0); /* none before: added */
  assert_int_equal(m0_response_header_set(&x.r, "X-Set", "bad\r\nX: y"), -1);
  assert_int_equal(m0_response_header_set(&x.r, "Content-Length", "9"), -1);
  assert_int_equal(m0_response_header_remove(&x.r, "SET-COOKIE"), 2);
  assert_int_equal(m0_response_header_remove(&x.r, "X-None"), 0);
  assert_int_equal(m0_response_header_remove(&x.r, "X-Kee"), 0); /* a prefix is not the name */
  assert_false(m0__response_has_header(&x.r, "Set-Cookie"));
  assert_true(m0__response_has_header(&x.r, "x-keep"));
  m0_respond(&x.r, 204, NULL, NULL, 0, M0_BODY_COPY);
  assert_int_equal(m0_response_header_set(&x.r, "X-Late", "1"), -1);
  assert_int_equal(m0_response_header_remove(&x.r, "X-Keep"), 0); /* answered: nothing changes */
  assert_response(&x, "HTTP/1.1 204 No Content", "X-Keep: k\r\nx-set: new\r\nX-Fresh: f\r\n\r\n");
  /* a set that would pass the block's limit only after the old ones go fits */
  resp_init(&x, 1, false, false);
  char v[4000];
  memset(v, 'v', sizeof v - 1);
  v[sizeof v - 1] = 0;
  assert_int_equal(m0_response_header(&x.r, "X-A", v), 0);
  assert_int_equal(m0_response_header(&x.r, "X-B", v), 0);
  assert_int_equal(m0_response_header(&x.r, "X-C", v), -1);
  assert_int_equal(m0_response_header_set(&x.r, "X-A", v), 0);
  assert_int_equal(m0_response_header_remove(&x.r, "X-A"), 1);
  m0__outq_free(&x.q);
}

/* A status or Content-Type that would make a broken head is answered 500,
 * never written as given (nor dropped without a word). */
static void test_respond_refusals(void **st) {
  const int bad_status[] = {0, 99, 600, 1000, -200};
  for (int i = 0; i < 5; i++) {
    resp x;
    resp_init(&x, 1, false, false);
    assert_int_equal(m0_respond(&x.r, bad_status[i], "text/plain", "x", 1, M0_BODY_COPY), -1);
    assert_true(x.r.done);
    assert_int_equal(x.r.status, 500);
    assert_response(&x, "HTTP/1.1 500 Internal Server Error",
                    "Content-Length: 26\r\nContent-Type: text/plain\r\n\r\n500 Internal Server Error\n");
  }
  char longct[129];
  memset(longct, 't', 128);
  longct[128] = 0;
  const char *bad_ct[] = {"text/html\r\nSet-Cookie: a=b", "text/plain\n", longct, "text/plain\x01"};
  for (int i = 0; i < 4; i++) {
    resp x;
    resp_init(&x, 1, false, false);
    assert_int_equal(m0_respond(&x.r, 200, bad_ct[i], "x", 1, M0_BODY_COPY), -1);
    assert_int_equal(x.r.status, 500);
    char *got = flat(&x.q, 0, NULL);
    assert_memory_equal(got, "HTTP/1.1 500 ", 13);
    assert_null(strstr(got, "Set-Cookie"));
    assert_null(strstr(got, "ttttt"));
    free(got);
    m0__outq_free(&x.q);
  }
  longct[127] = 0; /* 127 bytes: served as given */
  resp x;
  resp_init(&x, 1, false, false);
  assert_int_equal(m0_respond(&x.r, 200, longct, "x", 1, M0_BODY_COPY), 0);
  char rest[256];
  snprintf(rest, sizeof rest, "Content-Length: 1\r\nContent-Type: %s\r\n\r\nx", longct);
  assert_response(&x, "HTTP/1.1 200 OK", rest);
}

static void test_respondf(void **st) {
  resp x;
  resp_init(&x, 1, false, false);
  assert_int_equal(m0_respondf(&x.r, 200, "application/json", "{\"n\":%d,\"s\":\"%s\"}", 7, "x"), 0);
  assert_response(&x, "HTTP/1.1 200 OK", "Content-Length: 15\r\nContent-Type: application/json\r\n\r\n{\"n\":7,\"s\":\"x\"}");
  /* longer than its stack buffer: the whole body, byte for byte */
  enum { N = 5000 };
  char *pad = malloc(N + 1);
  for (int i = 0; i < N; i++) pad[i] = (char)('a' + i % 26);
  pad[N] = 0;
  resp_init(&x, 1, false, false);
  assert_int_equal(m0_respondf(&x.r, 201, "text/plain", "[%s]", pad), 0);
  char *rest = malloc(N + 128);
  snprintf(rest, N + 128, "Content-Length: %d\r\nContent-Type: text/plain\r\n\r\n[%s]", N + 2, pad);
  assert_response(&x, "HTTP/1.1 201 Created", rest);
  free(rest);
  /* exactly at the stack buffer's edge */
  pad[1023] = 0;
  resp_init(&x, 1, false, false);
  m0_respondf(&x.r, 200, NULL, "%s", pad);
  assert_int_equal(x.r.body_len, 1023);
  m0__outq_free(&x.q);
  pad[1023] = (char)('a' + 1023 % 26);
  pad[1024] = 0;
  resp_init(&x, 1, false, false);
  m0_respondf(&x.r, 200, NULL, "%s", pad);
  assert_int_equal(x.r.body_len, 1024);
  m0__outq_free(&x.q);
  free(pad);
  /* a body that cannot be formatted (a wide character the C locale cannot
   * write): refused, answered 500 */
  static const wchar_t wide[] = {0x263a, 0};
  resp_init(&x, 1, false, false);
  assert_int_equal(m0_respondf(&x.r, 200, "text/plain", "%ls", wide), -1);
  assert_int_equal(x.r.status, 500);
  m0__outq_free(&x.q);
  /* answering twice through respondf is refused like any second answer */
  resp_init(&x, 1, false, false);
  m0_respondf(&x.r, 200, NULL, "one");
  assert_int_equal(m0_respondf(&x.r, 200, NULL, "two"), -1);
  assert_response(&x, "HTTP/1.1 200 OK", "Content-Length: 3\r\n\r\none");
}

/* ---- streams ---- */

static char began_on[80];
static int stream_begin(void *ctx, const char *channel, bool has_last, uint64_t last) {
  (void)has_last;
  (void)last;
  snprintf(began_on, sizeof began_on, "%s", channel);
  return *(int *)ctx;
}
static const m0__response_ops stream_ops = {.stream_begin = stream_begin};

static void test_respond_stream(void **st) {
  int rv_begin = 0;
  resp x;
  resp_init(&x, 1, false, false);
  x.r.ops = &stream_ops;
  x.r.ops_ctx = &rv_begin;
  m0_response_header(&x.r, "X-Worker", "3");
  began_on[0] = 0;
  assert_int_equal(m0_respond_stream(&x.r, "beats"), 0);
  assert_string_equal(began_on, "beats");
  assert_false(x.r.close);
  assert_int_equal(m0_respond_stream(&x.r, "beats"), -1); /* answered already */
  assert_response(&x, "HTTP/1.1 200 OK",
                  "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\n"
                  "X-Worker: 3\r\n\r\n");
  /* HEAD: the stream's headers, no stream, and the connection stays (a HEAD has no body) */
  resp_init(&x, 1, true, false);
  x.r.ops = &stream_ops;
  x.r.ops_ctx = &rv_begin;
  began_on[0] = 0;
  assert_int_equal(m0_respond_stream(&x.r, "beats"), 0);
  assert_string_equal(began_on, "");
  assert_false(x.r.close);
  m0__outq_free(&x.q);
  /* what the loop's stream_begin refuses is returned */
  rv_begin = -1;
  resp_init(&x, 1, false, false);
  x.r.ops = &stream_ops;
  x.r.ops_ctx = &rv_begin;
  assert_int_equal(m0_respond_stream(&x.r, "beats"), -1);
  m0__outq_free(&x.q);
  /* on a pool thread (no stream_begin): 409 */
  resp_init(&x, 1, false, false);
  assert_int_equal(m0_respond_stream(&x.r, "beats"), -1);
  assert_response(&x, "HTTP/1.1 409 Conflict", "Content-Length: 13\r\nContent-Type: text/plain\r\n\r\n409 Conflict\n");
  resp_init(&x, 1, false, false);
  assert_int_equal(m0_respond_stream(&x.r, NULL), -1);
  assert_int_equal(x.r.status, 409);
  m0__outq_free(&x.q);
  /* a channel name that is not one: 500 */
  char c65[66];
  memset(c65, 'c', 65);
  c65[65] = 0;
  const char *bad[] = {NULL, "", "m0.closing", "two words", "tab\there", "del\x7f", c65};
  for (int i = 0; i < 7; i++) {
    resp_init(&x, 1, false, false);
    x.r.ops = &stream_ops;
    x.r.ops_ctx = &rv_begin;
    assert_int_equal(m0_respond_stream(&x.r, bad[i]), -1);
    assert_int_equal(x.r.status, 500);
    assert_false(m0__channel_ok(bad[i]));
    m0__outq_free(&x.q);
  }
  c65[64] = 0;
  assert_true(m0__channel_ok(c65));
  assert_true(m0__channel_ok("m0x"));
  assert_true(m0__channel_ok("a.b-c_d"));
}

/* ---- the output queue ---- */

/* [head A][ref R1][mid B][ref R2][tail C]: every skip (a partial write
 * resumed) yields exactly the rest, and moving the tail keeps references. */
static void test_outq_resume(void **st) {
  static char r1[1500], r2[2500];
  memset(r1, '1', sizeof r1);
  memset(r2, '2', sizeof r2);
  m0__outq q = {0};
  assert_int_equal(m0__outq_append(&q, "AAAA", 4), 0);
  assert_int_equal(m0__outq_ref(&q, r1, sizeof r1), 0);
  assert_int_equal(m0__outq_append(&q, "BB", 2), 0);
  assert_int_equal(m0__outq_ref(&q, r2, sizeof r2), 0);
  assert_int_equal(m0__outq_append(&q, "C", 1), 0);
  size_t total = 4 + sizeof r1 + 2 + sizeof r2 + 1;
  assert_int_equal(m0__outq_bytes(&q), total);
  char *whole = flat(&q, 0, NULL);
  const size_t skips[] = {0, 1, 4, 5, 1504, 1505, 1506, 1507, 4005, 4006, 4007};
  for (size_t i = 0; i < sizeof skips / sizeof *skips; i++) {
    size_t n;
    char *rest = flat(&q, skips[i], &n);
    assert_int_equal(n, total - skips[i]);
    assert_memory_equal(rest, whole + skips[i], n);
    free(rest);
    m0__outq dst = {0};
    assert_int_equal(m0__outq_move_tail(&dst, &q, skips[i]), 0);
    assert_int_equal(m0__outq_bytes(&dst), total - skips[i]);
    rest = flat(&dst, 0, &n);
    assert_memory_equal(rest, whole + skips[i], n);
    free(rest);
    /* a whole referenced piece stays a reference */
    if (skips[i] <= 1506) assert_int_equal(dst.refs[dst.nrefs - 1].p == r2, 1);
    m0__outq_free(&dst);
  }
  free(whole);
  /* a reference is kept as one wherever it lies (here on the stack, above
   * the queue's own buffer) */
  char on_stack[1200];
  memset(on_stack, 's', sizeof on_stack);
  m0__outq sq = {0}, dst = {0};
  m0__outq_append(&sq, "H", 1);
  m0__outq_ref(&sq, on_stack, sizeof on_stack);
  assert_int_equal(m0__outq_move_tail(&dst, &sq, 1), 0);
  assert_int_equal(dst.nrefs, 1);
  assert_ptr_equal(dst.refs[0].p, on_stack);
  assert_int_equal(dst.copied.len, 0);
  m0__outq_free(&sq);
  m0__outq_free(&dst);
  /* more references than slots: the rest is copied, the bytes the same */
  m0__outq_clear(&q);
  assert_int_equal(m0__outq_bytes(&q), 0);
  for (int i = 0; i < M0__OUT_REFS + 3; i++) assert_int_equal(m0__outq_ref(&q, r1, sizeof r1), 0);
  assert_int_equal(q.nrefs, M0__OUT_REFS);
  assert_int_equal(m0__outq_bytes(&q), (M0__OUT_REFS + 3) * sizeof r1);
  size_t n;
  char *all = flat(&q, 0, &n);
  assert_int_equal(n, (M0__OUT_REFS + 3) * sizeof r1);
  for (size_t i = 0; i < n; i++) assert_int_equal(all[i], '1');
  free(all);
  m0__outq_free(&q);
  assert_null(q.copied.p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_request_header),  cmocka_unit_test(test_request_query),
      cmocka_unit_test(test_request_query_int), cmocka_unit_test(test_respond_basic),
      cmocka_unit_test(test_respond_bodyless), cmocka_unit_test(test_respond_body_modes),
      cmocka_unit_test(test_status_reasons),  cmocka_unit_test(test_respond_status),
      cmocka_unit_test(test_response_header), cmocka_unit_test(test_response_header_set_remove),
      cmocka_unit_test(test_respond_refusals), cmocka_unit_test(test_respond_owned),
      cmocka_unit_test(test_respondf),        cmocka_unit_test(test_respond_stream),
      cmocka_unit_test(test_outq_resume),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
