/* The public API against real requests: a host started in this process
 * (m0_host_start), an app of this file's own, and a client on a socket. What
 * a view reads (headers by any case, the first of two, absent ones; query
 * parameters and integers; path parameters) and what it answers as the
 * client receives it (added headers, a refused header, m0_respondf past its
 * stack buffer, a static body and its HEAD, a status or Content-Type the API
 * refuses: 500 and the connection still serves), with the views on the loop
 * and again on a pool thread. Headers before_request adds reach every answer:
 * a loop view's, a pool thread's and a deferred one's. A stream keeps the
 * Cache-Control its view set (one, not two), and its HEAD is the headers and
 * a close, not a stream that never ends. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "m0/m0.h"

#define BIG 70000
static char pattern[BIG + 1]; /* filled in main, read-only while serving */

static void put(char *out, size_t n, const char *label, m0_str s) {
  size_t k = strlen(out);
  if (s.p) snprintf(out + k, n - k, "%s=%.*s;", label, (int)s.n, s.p);
  else snprintf(out + k, n - k, "%s=(none);", label);
}

static void view_read(void *st, const m0_request *req, m0_response *res) {
  char out[1024] = "";
  put(out, sizeof out, "token", m0_request_header(req, "x-token"));
  put(out, sizeof out, "TOKEN", m0_request_header(req, "X-TOKEN"));
  put(out, sizeof out, "dup", m0_request_header(req, "x-dup"));
  put(out, sizeof out, "empty", m0_request_header(req, "x-empty"));
  put(out, sizeof out, "absent", m0_request_header(req, "x-absent"));
  m0_str q = {NULL, 0};
  put(out, sizeof out, "q", m0_request_query(req, "q", &q) ? q : (m0_str){NULL, 0});
  put(out, sizeof out, "none", m0_request_query(req, "none", &q) ? q : (m0_str){NULL, 0});
  long n = -1;
  bool ok = m0_request_query_int(req, "n", 1, 100, &n);
  size_t k = strlen(out);
  snprintf(out + k, sizeof out - k, "n=%s%ld;params=%zu;", ok ? "" : "refused:", n, req->nparams);
  for (size_t i = 0; i < req->nparams; i++) put(out, sizeof out, "param", req->params[i]);
  put(out, sizeof out, "path", req->path);
  put(out, sizeof out, "query", req->query);
  k = strlen(out);
  snprintf(out + k, sizeof out - k, "peer=%s;port=%s;client=%s;", req->peer, req->peer_port > 0 ? "set" : "none",
           req->client);
  m0_respond(res, 200, "text/plain", out, strlen(out), M0_BODY_COPY);
}

static void view_headers(void *st, const m0_request *req, m0_response *res) {
  int a = m0_response_header(res, "X-One", "1");
  int b = m0_response_header(res, "X-Split", "a\r\nSet-Cookie: stolen=1");
  int c = m0_response_header(res, "Cache-Control", "no-store");
  m0_respondf(res, 200, "text/plain", "%d %d %d", a, b, c);
}

static void view_big(void *st, const m0_request *req, m0_response *res) {
  m0_respondf(res, 200, "application/octet-stream", "<%s>", pattern);
}

static void view_static(void *st, const m0_request *req, m0_response *res) {
  m0_respond(res, 200, "application/octet-stream", pattern, BIG, M0_BODY_STATIC);
}

static void view_owned(void *st, const m0_request *req, m0_response *res) {
  char *body = malloc(BIG);
  memcpy(body, pattern, BIG);
  m0_respond_owned(res, 200, "application/octet-stream", body, BIG, NULL); /* freed by the host */
}

static void view_bad_status(void *st, const m0_request *req, m0_response *res) {
  m0_respond(res, 1000, "text/plain", "x", 1, M0_BODY_COPY);
}

static void view_bad_type(void *st, const m0_request *req, m0_response *res) {
  m0_respond(res, 200, "text/html\r\nSet-Cookie: stolen=1", "x", 1, M0_BODY_COPY);
}

static void view_twice(void *st, const m0_request *req, m0_response *res) {
  m0_respond(res, 202, NULL, "first", 5, M0_BODY_STATIC);
  int rv = m0_respond(res, 200, NULL, "second", 6, M0_BODY_STATIC);
  if (rv != -1) abort(); /* a second answer must be refused */
}

/* Every request passes here first, on the loop. */
static bool before(void *st, const m0_request *req, m0_response *res) {
  m0_response_header(res, "X-Before", "seen");
  return false;
}

static void view_stream(void *st, const m0_request *req, m0_response *res) {
  m0_response_header(res, "Cache-Control", "no-store");
  m0_respond_stream(res, "test");
}

static void view_later(void *st, const m0_request *req, m0_response *res) {
  m0_deferred *d = m0_defer(res, 0);
  if (!d) abort();
  m0_deferred_respond(d, 200, "text/plain", "later", 5);
}

static m0_route routes[] = {
    {"GET", "/read", view_read, 0},
    {"GET", "/read/{a}/{b}", view_read, 0},
    {"GET", "/headers", view_headers, 0},
    {"GET", "/big", view_big, 0},
    {"GET", "/static", view_static, 0},
    {"GET", "/owned", view_owned, 0},
    {"GET", "/bad-status", view_bad_status, 0},
    {"GET", "/bad-type", view_bad_type, 0},
    {"GET", "/twice", view_twice, 0},
    {"GET", "/stream", view_stream, M0_ON_LOOP},
    {"GET", "/later", view_later, M0_ON_LOOP},
};
static const m0_app app = {.name = "test_http_host", .routes = routes, .nroutes = sizeof routes / sizeof *routes,
                           .before_request = before};

/* ---- the client ---- */

typedef struct reply {
  int status;
  char head[4096];
  char *body;
  size_t len;
} reply;

static int connect_to(int port) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct timeval tv = {10, 0};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(connect(s, (struct sockaddr *)&a, sizeof a), 0);
  return s;
}

/* The value of header `name` in r->head, or "" (a static buffer). */
static const char *header(const reply *r, const char *name) {
  static char v[512];
  v[0] = 0;
  size_t n = strlen(name);
  for (const char *p = strstr(r->head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n"))
    if (!strncasecmp(p + 2, name, n) && p[2 + n] == ':') {
      const char *s = p + 3 + n, *e = strstr(s, "\r\n");
      while (*s == ' ') s++;
      snprintf(v, sizeof v, "%.*s", (int)(e - s), s);
      return v;
    }
  return v;
}

/* One response from s: its head, then its Content-Length body (none for HEAD). */
static void read_reply(int s, reply *r, bool head_only) {
  memset(r, 0, sizeof *r);
  size_t cap = 1 << 17, have = 0;
  char *buf = malloc(cap);
  char *end = NULL;
  while (!end) {
    ssize_t n = recv(s, buf + have, cap - have - 1, 0);
    assert_true(n > 0);
    have += (size_t)n;
    buf[have] = 0;
    end = strstr(buf, "\r\n\r\n");
  }
  size_t hn = (size_t)(end - buf) + 2;
  assert_true(hn < sizeof r->head);
  memcpy(r->head, buf, hn);
  r->head[hn] = 0;
  r->status = atoi(r->head + 9);
  size_t len = head_only ? 0 : strtoul(header(r, "Content-Length"), NULL, 10);
  size_t from = hn + 2;
  while (have < from + len) {
    assert_true(have + 1 < cap);
    ssize_t n = recv(s, buf + have, cap - have - 1, 0);
    assert_true(n > 0);
    have += (size_t)n;
  }
  assert_int_equal(have, from + len); /* nothing more than the answer (no body after a HEAD) */
  r->body = malloc(len + 1);
  memcpy(r->body, buf + from, len);
  r->body[len] = 0;
  r->len = len;
  free(buf);
}

static void ask(int s, const char *request, reply *r) {
  assert_int_equal(send(s, request, strlen(request), 0), (ssize_t)strlen(request));
  read_reply(s, r, !strncmp(request, "HEAD ", 5));
}

static void done(reply *r) { free(r->body); }

/* ---- the checks, on one keep-alive connection ---- */

static void check_all(int port) {
  int s = connect_to(port);
  reply r;
  ask(s, "GET /read?q=hello&n=42 HTTP/1.1\r\nHost: t\r\nX-Token: abc\r\nX-Dup: first\r\nx-dup: second\r\n"
         "X-Empty:\r\nX-Forwarded-For: 203.0.113.9\r\n\r\n", &r); /* no proxy is trusted: not believed */
  assert_int_equal(r.status, 200);
  assert_string_equal(r.body, "token=abc;TOKEN=abc;dup=first;empty=;absent=(none);q=hello;none=(none);n=42;params=0;"
                              "path=/read;query=q=hello&n=42;peer=127.0.0.1;port=set;client=127.0.0.1;");
  assert_string_equal(header(&r, "X-Before"), "seen"); /* on the loop and through the pool */
  done(&r);
  ask(s, "GET /later HTTP/1.1\r\nHost: t\r\n\r\n", &r);
  assert_string_equal(r.body, "later");
  assert_string_equal(header(&r, "X-Before"), "seen"); /* a deferred answer */
  done(&r);
  ask(s, "GET /read/x1/y-2?n=500 HTTP/1.1\r\nHost: t\r\n\r\n", &r);
  assert_string_equal(r.body, "token=(none);TOKEN=(none);dup=(none);empty=(none);absent=(none);q=(none);none=(none);"
                              "n=refused:-1;params=2;param=x1;param=y-2;path=/read/x1/y-2;query=n=500;"
                              "peer=127.0.0.1;port=set;client=127.0.0.1;");
  done(&r);
  ask(s, "GET /headers HTTP/1.1\r\nHost: t\r\n\r\n", &r);
  assert_string_equal(r.body, "0 -1 0");
  assert_string_equal(header(&r, "X-One"), "1");
  assert_string_equal(header(&r, "Cache-Control"), "no-store");
  assert_null(strstr(r.head, "Set-Cookie"));
  done(&r);
  ask(s, "GET /big HTTP/1.1\r\nHost: t\r\n\r\n", &r);
  assert_int_equal(r.status, 200);
  assert_int_equal(r.len, BIG + 2);
  assert_int_equal(r.body[0], '<');
  assert_memory_equal(r.body + 1, pattern, BIG);
  assert_int_equal(r.body[BIG + 1], '>');
  done(&r);
  ask(s, "GET /static HTTP/1.1\r\nHost: t\r\n\r\n", &r);
  assert_int_equal(r.len, BIG);
  assert_memory_equal(r.body, pattern, BIG);
  done(&r);
  ask(s, "GET /owned HTTP/1.1\r\nHost: t\r\n\r\n", &r); /* written from the view's buffer, then freed */
  assert_int_equal(r.len, BIG);
  assert_memory_equal(r.body, pattern, BIG);
  done(&r);
  ask(s, "HEAD /owned HTTP/1.1\r\nHost: t\r\n\r\n", &r);
  assert_string_equal(header(&r, "Content-Length"), "70000");
  done(&r);
  ask(s, "HEAD /static HTTP/1.1\r\nHost: t\r\n\r\n", &r);
  assert_int_equal(r.status, 200);
  assert_string_equal(header(&r, "Content-Length"), "70000");
  assert_int_equal(r.len, 0);
  done(&r);
  ask(s, "GET /twice HTTP/1.1\r\nHost: t\r\n\r\n", &r);
  assert_int_equal(r.status, 202);
  assert_string_equal(r.body, "first");
  done(&r);
  /* what the API refuses: 500 on the wire, and the connection goes on */
  ask(s, "GET /bad-status HTTP/1.1\r\nHost: t\r\n\r\n", &r);
  assert_memory_equal(r.head, "HTTP/1.1 500 Internal Server Error\r\n", 36);
  assert_string_equal(r.body, "500 Internal Server Error\n");
  done(&r);
  ask(s, "GET /bad-type HTTP/1.1\r\nHost: t\r\n\r\n", &r);
  assert_int_equal(r.status, 500);
  assert_null(strstr(r.head, "Set-Cookie"));
  done(&r);
  /* the host's own answers */
  ask(s, "POST /read/1/2 HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", &r);
  assert_memory_equal(r.head, "HTTP/1.1 405 Method Not Allowed\r\n", 33);
  assert_string_equal(header(&r, "Allow"), "GET, HEAD, OPTIONS");
  assert_string_equal(r.body, "405 Method Not Allowed\n");
  done(&r);
  ask(s, "OPTIONS /read HTTP/1.1\r\nHost: t\r\n\r\n", &r);
  assert_int_equal(r.status, 204);
  assert_string_equal(header(&r, "Allow"), "GET, HEAD, OPTIONS");
  assert_string_equal(header(&r, "Content-Length"), "");
  done(&r);
  ask(s, "GET /read/ HTTP/1.1\r\nHost: t\r\n\r\n", &r);
  assert_int_equal(r.status, 404);
  assert_string_equal(r.body, "404 Not Found\n");
  done(&r);
  /* still the same connection, still served */
  ask(s, "GET /read?q= HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", &r);
  assert_int_equal(r.status, 200);
  assert_string_equal(header(&r, "Connection"), "close");
  assert_non_null(strstr(r.body, "q=;"));
  done(&r);
  char c;
  assert_int_equal(recv(s, &c, 1, 0), 0); /* closed as asked */
  close(s);
  /* a stream's head: the view's Cache-Control, once, and the host's other headers */
  s = connect_to(port);
  const char *get = "GET /stream HTTP/1.1\r\nHost: t\r\n\r\n";
  assert_int_equal(send(s, get, strlen(get), 0), (ssize_t)strlen(get));
  char head[2048];
  size_t have = 0;
  while (!memmem(head, have, "\r\n\r\n", 4)) {
    ssize_t n = recv(s, head + have, sizeof head - have - 1, 0);
    assert_true(n > 0);
    have += (size_t)n;
  }
  head[have] = 0;
  assert_non_null(strstr(head, "Content-Type: text/event-stream\r\n"));
  assert_non_null(strstr(head, "Cache-Control: no-store\r\n"));
  assert_null(strstr(head, "no-cache"));
  assert_non_null(strstr(head, "X-Before: seen\r\n"));
  close(s);
  /* its HEAD: the same headers, then the server closes (it would wait for ever) */
  s = connect_to(port);
  ask(s, "HEAD /stream HTTP/1.1\r\nHost: t\r\n\r\n", &r);
  assert_int_equal(r.status, 200);
  assert_string_equal(header(&r, "Cache-Control"), "no-store");
  assert_string_equal(header(&r, "Connection"), "close");
  done(&r);
  assert_int_equal(recv(s, &c, 1, 0), 0); /* closed, within the 10 s receive bound */
  close(s);
}

static void serve_and_check(const char *pool_threads) {
  char *argv[] = {"test_http_host", "--port", "0", "--blocking-threads", (char *)pool_threads, NULL};
  int code = -1;
  char err[1024] = "";
  m0_host *h = m0_host_start(&app, NULL, 5, argv, &code, err, sizeof err);
  if (!h) fail_msg("the host did not start (%d): %s", code, err);
  assert_true(m0_host_port(h) > 0);
  check_all(m0_host_port(h));
  assert_int_equal(m0_host_stop(h), 0);
}

static void test_on_the_loop(void **st) { serve_and_check("0"); }
static void test_on_a_pool_thread(void **st) { serve_and_check("1"); }

int main(void) {
  for (int i = 0; i < BIG; i++) pattern[i] = (char)('a' + i % 26);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_on_the_loop), cmocka_unit_test(test_on_a_pool_thread)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
