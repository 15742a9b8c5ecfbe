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
 * a close, not a stream that never ends. A file (m0_respond_file) is sent
 * whole, by range, or not at all when the client's copy is fresh; a large
 * one outlasts the socket's buffer (the writer waits for it), and the
 * request after it on the connection is answered after it. A response
 * written in pieces by another thread (m0_respond_writer) arrives chunked,
 * whole and in order, then the connection goes on; to HTTP/1.0 it comes
 * unframed and closes; a writer that outruns a client that does not read
 * is refused (EAGAIN) and waits; one whose client leaves hears on_gone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <pthread.h>
#include <stdatomic.h>
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

static void m0__test_404(m0_response *res) { m0_respond(res, 404, "text/plain", "no file\n", 8, M0_BODY_STATIC); }

static void view_owned(void *st, const m0_request *req, m0_response *res) {
  char *body = malloc(BIG);
  memcpy(body, pattern, BIG);
  m0_respond_owned(res, 200, "application/octet-stream", body, BIG, NULL); /* freed by the host */
}

#define FILE_BIG (8u << 20)
#define FILE_MEDIUM (300u << 10) /* under the mark past which a connection's answers are written at once */
static char file_small[256], file_medium[256], file_big[256]; /* paths, made in main */

static void view_file(void *st, const m0_request *req, m0_response *res) {
  const char *path = req->path.n > 6 && !memcmp(req->path.p, "/file/big", 9)      ? file_big
                     : req->path.n > 6 && !memcmp(req->path.p, "/file/medium", 12) ? file_medium
                     : req->path.n > 6 && !memcmp(req->path.p, "/file/none", 10) ? "/nonexistent/m0-test" : file_small;
  if (m0_respond_file(res, "text/plain", path) != 0) m0__test_404(res);
}

/* ---- writers: each runs on a thread of its own ---- */

enum { PIECES = 300, FLOOD_PIECE = 65536, FLOOD_PIECES = 512 }; /* 32 MiB */
static atomic_int writer_mode; /* what the next writer does (set by the client side) */
static atomic_int eagains, gone_calls, writer_done, write_failed_after_gone;
static atomic_int client_closed, ended, gone_after_end; /* mode 3 */

static void on_gone(void *arg) {
  atomic_fetch_add(&gone_calls, 1);
  if (atomic_load(&ended)) atomic_fetch_add(&gone_after_end, 1); /* arg may be freed by then */
}

static void *writer_main(void *arg) {
  m0_writer *w = arg;
  char piece[FLOOD_PIECE];
  int mode = atomic_load(&writer_mode);
  if (mode == 0) { /* numbered pieces, waiting for room now and then */
    for (int i = 0; i < PIECES; i++) {
      int n = snprintf(piece, sizeof piece, "piece %d\n", i);
      if (m0_writer_write(w, piece, (size_t)n) != 0) abort();
      if (i % 50 == 0 && m0_writer_wait(w, 10000) != 0) abort();
    }
  } else if (mode == 1) { /* a flood: refused past the mark, waits, goes on */
    memset(piece, 'f', sizeof piece);
    for (int i = 0; i < FLOOD_PIECES;) {
      if (m0_writer_write(w, piece, sizeof piece) == 0) i++;
      else if (errno == EAGAIN) {
        atomic_fetch_add(&eagains, 1);
        if (m0_writer_wait(w, 30000) != 0) abort();
      } else abort();
    }
  } else if (mode == 4) { /* one piece past the 8 MiB mark, taken since nothing waits; then gives up */
    size_t big = 9u << 20;
    char *b = malloc(big);
    memset(b, 'i', big);
    if (m0_writer_write(w, b, big) != 0) abort();
    free(b);
    m0_writer_abort(w);
    atomic_fetch_add(&writer_done, 1);
    return NULL;
  } else if (mode == 3) { /* a last piece and the end after its client left: the loop sees the
                            * reset when it writes that piece, with the END right behind it */
    while (!atomic_load(&client_closed)) usleep(100);
    memset(piece, 'h', sizeof piece);
    m0_writer_write(w, piece, sizeof piece);
    m0_writer_end(w);
    atomic_store(&ended, 1);
    atomic_fetch_add(&writer_done, 1);
    return NULL;
  } else { /* until the client leaves */
    memset(piece, 'g', 1024);
    while (m0_writer_write(w, piece, 1024) == 0 || errno == EAGAIN)
      if (errno == EAGAIN) m0_writer_wait(w, 1000);
    if (errno == EPIPE && m0_writer_write(w, piece, 1) != 0) atomic_store(&write_failed_after_gone, 1);
  }
  m0_writer_end(w);
  atomic_fetch_add(&writer_done, 1);
  return NULL;
}

static void view_pieces(void *st, const m0_request *req, m0_response *res) {
  m0_writer *w = m0_respond_writer(res, 200, "text/plain", on_gone, NULL);
  if (!w) abort();
  pthread_t t;
  if (pthread_create(&t, NULL, writer_main, w) != 0) abort();
  pthread_detach(t);
}

static void view_writer_refused(void *st, const m0_request *req, m0_response *res) {
  if (m0_respond_writer(res, 204, NULL, NULL, NULL) != NULL) abort(); /* no body: refused, answered 500 */
}

/* ?mb=N: an N MiB body (owned); the pool hands back at most 16 MiB per answer */
static void view_huge(void *st, const m0_request *req, m0_response *res) {
  long mb = 0;
  if (!m0_request_query_int(req, "mb", 1, 64, &mb)) abort();
  size_t n = (size_t)mb << 20;
  char *b = malloc(n);
  memset(b, 'z', n);
  m0_respond_owned(res, 200, "application/octet-stream", b, n, NULL);
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
    {"GET", "/huge", view_huge, 0},
    {"GET", "/file/{which}", view_file, 0},
    {"GET", "/pieces", view_pieces, M0_ON_LOOP},
    {"GET", "/writer-refused", view_writer_refused, M0_ON_LOOP},
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
  /* A bound, not a pace: a pool thread whose views took long runs at nice
   * 19, and beside stress-ng and other suites under TSan it waited > 10 s. */
  struct timeval tv = {60, 0};
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
  size_t cap = 1 << 25, have = 0; /* up to 32 MiB */
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
  /* its HEAD: the same headers and no stream: the connection goes on */
  s = connect_to(port);
  ask(s, "HEAD /stream HTTP/1.1\r\nHost: t\r\n\r\n", &r);
  assert_int_equal(r.status, 200);
  assert_string_equal(header(&r, "Cache-Control"), "no-store");
  assert_string_equal(header(&r, "Connection"), "");
  done(&r);
  ask(s, "GET /static HTTP/1.1\r\nHost: t\r\n\r\n", &r); /* answered on the same connection */
  assert_int_equal(r.status, 200);
  done(&r);
  close(s);
}

/* The file routes, on one keep-alive connection. */
static void check_files(int port) {
  int s = connect_to(port);
  reply r;
  ask(s, "GET /file/small HTTP/1.1\r\nHost: t\r\n\r\n", &r);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.body, "0123456789abcdefghij");
  assert_string_equal(header(&r, "Accept-Ranges"), "bytes");
  char etag[64], modified[64];
  snprintf(etag, sizeof etag, "%s", header(&r, "ETag"));
  snprintf(modified, sizeof modified, "%s", header(&r, "Last-Modified"));
  assert_true(etag[0] == '"' && strlen(etag) > 4);
  assert_int_equal(strlen(modified), 29);
  done(&r);
  char q[512];
  snprintf(q, sizeof q, "GET /file/small HTTP/1.1\r\nHost: t\r\nIf-None-Match: \"x\", W/%s\r\n\r\n", etag);
  ask(s, q, &r);
  assert_int_equal(r.status, 304);
  assert_int_equal(r.len, 0);
  assert_string_equal(header(&r, "ETag"), etag);
  done(&r);
  snprintf(q, sizeof q, "GET /file/small HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: %s\r\n\r\n", modified);
  ask(s, q, &r);
  assert_int_equal(r.status, 304);
  done(&r);
  ask(s, "GET /file/small HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: Thu, 01 Jan 1970 00:00:01 GMT\r\n\r\n", &r);
  assert_int_equal(r.status, 200);
  done(&r);
  ask(s, "GET /file/small HTTP/1.1\r\nHost: t\r\nRange: bytes=2-5\r\n\r\n", &r);
  assert_int_equal(r.status, 206);
  assert_string_equal(r.body, "2345");
  assert_string_equal(header(&r, "Content-Range"), "bytes 2-5/20");
  done(&r);
  ask(s, "GET /file/small HTTP/1.1\r\nHost: t\r\nRange: bytes=-3\r\n\r\n", &r);
  assert_string_equal(r.body, "hij");
  done(&r);
  ask(s, "GET /file/small HTTP/1.1\r\nHost: t\r\nRange: bytes=15-99\r\n\r\n", &r);
  assert_string_equal(r.body, "fghij");
  assert_string_equal(header(&r, "Content-Range"), "bytes 15-19/20");
  done(&r);
  ask(s, "GET /file/small HTTP/1.1\r\nHost: t\r\nRange: bytes=20-\r\n\r\n", &r);
  assert_int_equal(r.status, 416);
  assert_string_equal(header(&r, "Content-Range"), "bytes */20");
  done(&r);
  ask(s, "GET /file/small HTTP/1.1\r\nHost: t\r\nRange: bytes=0-1,4-5\r\n\r\n", &r); /* a list: whole */
  assert_int_equal(r.status, 200);
  assert_int_equal(r.len, 20);
  done(&r);
  ask(s, "GET /file/small HTTP/1.1\r\nHost: t\r\nRange: bytes=2-5\r\nIf-Range: \"old\"\r\n\r\n", &r);
  assert_int_equal(r.status, 200); /* another version: the whole file */
  done(&r);
  snprintf(q, sizeof q, "GET /file/small HTTP/1.1\r\nHost: t\r\nRange: bytes=2-5\r\nIf-Range: %s\r\n\r\n", etag);
  ask(s, q, &r);
  assert_int_equal(r.status, 206);
  done(&r);
  ask(s, "HEAD /file/small HTTP/1.1\r\nHost: t\r\n\r\n", &r);
  assert_string_equal(header(&r, "Content-Length"), "20");
  done(&r);
  ask(s, "GET /file/none HTTP/1.1\r\nHost: t\r\n\r\n", &r);
  assert_int_equal(r.status, 404);
  done(&r);
  /* answers queued behind a file piece leave after it, in order */
  const char *three = "GET /file/medium HTTP/1.1\r\nHost: t\r\n\r\nGET /file/small HTTP/1.1\r\nHost: t\r\n\r\n"
                      "GET /file/medium HTTP/1.1\r\nHost: t\r\nRange: bytes=1-3\r\n\r\n";
  assert_int_equal(send(s, three, strlen(three), 0), (ssize_t)strlen(three));
  size_t mcap = FILE_MEDIUM + 8192, mhave = 0;
  char *m = malloc(mcap + 1);
  for (;;) { /* the three answers, whole: the last ends with the range's bytes */
    ssize_t n = recv(s, m + mhave, mcap - mhave, 0);
    assert_true(n > 0);
    mhave += (size_t)n;
    m[mhave] = 0;
    if (mhave > FILE_MEDIUM && memmem(m + FILE_MEDIUM, mhave - FILE_MEDIUM, "\r\n\r\nBCD", 7)) break;
  }
  char *body = (char *)memmem(m, mhave, "\r\n\r\n", 4) + 4;
  assert_memory_equal(m, "HTTP/1.1 200 OK\r\n", 17);
  for (size_t i = 0; i < FILE_MEDIUM; i++)
    if (body[i] != (char)('A' + i % 23)) fail_msg("byte %zu of the medium file", i);
  char *next = body + FILE_MEDIUM;
  assert_memory_equal(next, "HTTP/1.1 200 OK\r\n", 17); /* the small one, right after the file */
  char *small = (char *)memmem(next, (size_t)(m + mhave - next), "\r\n\r\n", 4) + 4;
  assert_memory_equal(small, "0123456789abcdefghij", 20);
  assert_memory_equal(small + 20, "HTTP/1.1 206 Partial Content\r\n", 30);
  assert_memory_equal(m + mhave - 3, "BCD", 3); /* and nothing after it */
  free(m);
  /* a file larger than the socket takes at once, pipelined with the next
   * request: all of it, then the next answer */
  const char *two = "GET /file/big HTTP/1.1\r\nHost: t\r\n\r\nGET /file/small HTTP/1.1\r\nHost: t\r\n\r\n";
  assert_int_equal(send(s, two, strlen(two), 0), (ssize_t)strlen(two));
  usleep(200000); /* not a condition: only so the server meets a full socket buffer */
  size_t cap = FILE_BIG + 4096, have = 0;
  char *buf = malloc(cap);
  while (!memmem(buf, have, "\r\n\r\n", 4)) {
    ssize_t n = recv(s, buf + have, cap - have, 0);
    assert_true(n > 0);
    have += (size_t)n;
  }
  size_t hn = (size_t)((char *)memmem(buf, have, "\r\n\r\n", 4) - buf) + 4;
  while (have < hn + FILE_BIG) {
    ssize_t n = recv(s, buf + have, cap - have, 0);
    assert_true(n > 0);
    have += (size_t)n;
  }
  for (size_t i = 0; i < FILE_BIG; i += 4093) assert_int_equal(buf[hn + i], (char)('A' + i % 23));
  memmove(buf, buf + hn + FILE_BIG, have - hn - FILE_BIG);
  have -= hn + FILE_BIG;
  buf[have] = 0;
  while (!strstr(buf, "0123456789abcdefghij")) {
    ssize_t n = recv(s, buf + have, cap - have - 1, 0);
    assert_true(n > 0);
    have += (size_t)n;
    buf[have] = 0;
  }
  assert_memory_equal(buf, "HTTP/1.1 200 OK\r\n", 17);
  free(buf);
  close(s);
}

/* Reads until `done` says the bytes so far are the whole answer (bounded
 * by the socket's receive timeout). */
static char *read_until(int s, size_t *have, bool (*done)(const char *b, size_t n)) {
  size_t cap = 1 << 16;
  char *b = malloc(cap + 1);
  *have = 0;
  while (!done(b, *have)) {
    if (cap - *have < 65536) b = realloc(b, (cap *= 2) + 1);
    ssize_t n = recv(s, b + *have, cap - *have, 0);
    assert_true(n > 0);
    *have += (size_t)n;
    b[*have] = 0;
  }
  return b;
}

static bool chunked_end(const char *b, size_t n) { return n >= 5 && !memcmp(b + n - 5, "0\r\n\r\n", 5); }

/* De-chunks body (after the head) in place; returns its length. */
static size_t dechunk(char *body, size_t n) {
  size_t out = 0, at = 0;
  for (;;) {
    char *end;
    size_t len = strtoul(body + at, &end, 16);
    assert_memory_equal(end, "\r\n", 2);
    at = (size_t)(end - body) + 2;
    if (len == 0) break;
    assert_true(at + len + 2 <= n);
    memmove(body + out, body + at, len);
    out += len;
    at += len;
    assert_memory_equal(body + at, "\r\n", 2);
    at += 2;
  }
  return out;
}

static bool wait_for_int(atomic_int *v, int want) {
  for (int i = 0; i < 2000; i++) { /* 20 s */
    if (atomic_load(v) >= want) return true;
    usleep(10000);
  }
  return false;
}

static void check_writers(int port) {
  atomic_store(&ended, 0); /* from an earlier run of these checks */
  atomic_store(&gone_after_end, 0);
  int s = connect_to(port);
  reply r;
  atomic_store(&writer_mode, 0);
  int done0 = atomic_load(&writer_done);
  const char *get = "GET /pieces HTTP/1.1\r\nHost: t\r\n\r\n";
  assert_int_equal(send(s, get, strlen(get), 0), (ssize_t)strlen(get));
  size_t n;
  char *b = read_until(s, &n, chunked_end);
  assert_memory_equal(b, "HTTP/1.1 200 OK\r\n", 17);
  char *body = strstr(b, "\r\n\r\n") + 4;
  assert_non_null(strstr(b, "Transfer-Encoding: chunked\r\n"));
  assert_null(strstr(b, "Content-Length"));
  size_t bn = dechunk(body, n - (size_t)(body - b));
  char want[8192] = "";
  for (int i = 0; i < PIECES; i++) snprintf(want + strlen(want), sizeof want - strlen(want), "piece %d\n", i);
  assert_int_equal(bn, strlen(want));
  assert_memory_equal(body, want, bn);
  free(b);
  ask(s, "GET /read HTTP/1.1\r\nHost: t\r\n\r\n", &r); /* the connection goes on */
  assert_int_equal(r.status, 200);
  done(&r);
  ask(s, "GET /writer-refused HTTP/1.1\r\nHost: t\r\n\r\n", &r);
  assert_int_equal(r.status, 500);
  done(&r);
  assert_true(wait_for_int(&writer_done, done0 + 1));
  close(s);

  /* HTTP/1.0: the pieces as they are, and the close ends them */
  s = connect_to(port);
  const char *old = "GET /pieces HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"; /* no framing: the close ends it */
  assert_int_equal(send(s, old, strlen(old), 0), (ssize_t)strlen(old));
  size_t have = 0, cap = 1 << 16;
  b = malloc(cap);
  ssize_t k;
  while ((k = recv(s, b + have, cap - have - 1, 0)) > 0) have += (size_t)k;
  assert_int_equal(k, 0); /* closed by the server, not the receive timeout */
  b[have] = 0;
  assert_non_null(strstr(b, "Connection: close\r\n"));
  assert_null(strstr(b, "Transfer-Encoding"));
  assert_string_equal(strstr(b, "\r\n\r\n") + 4, want);
  free(b);
  close(s);
  assert_true(wait_for_int(&writer_done, done0 + 2));

  /* a flood into a client that reads only once the writer was refused */
  s = connect_to(port);
  atomic_store(&writer_mode, 1);
  atomic_store(&eagains, 0);
  assert_int_equal(send(s, get, strlen(get), 0), (ssize_t)strlen(get));
  assert_true(wait_for_int(&eagains, 1)); /* 8 MiB queued and not read: refused */
  b = read_until(s, &n, chunked_end);
  body = strstr(b, "\r\n\r\n") + 4;
  bn = dechunk(body, n - (size_t)(body - b));
  assert_int_equal(bn, (size_t)FLOOD_PIECE * FLOOD_PIECES);
  for (size_t i = 0; i < bn; i += 4096) assert_int_equal(body[i], 'f');
  free(b);
  close(s);
  assert_true(wait_for_int(&writer_done, done0 + 3));

  /* a client that leaves: on_gone, once; writes fail after it */
  s = connect_to(port);
  atomic_store(&writer_mode, 2);
  int gone0 = atomic_load(&gone_calls);
  assert_int_equal(send(s, get, strlen(get), 0), (ssize_t)strlen(get));
  char head[4096];
  assert_true(recv(s, head, sizeof head, 0) > 0);
  close(s);
  assert_true(wait_for_int(&writer_done, done0 + 4));
  assert_int_equal(atomic_load(&gone_calls), gone0 + 1);
  assert_int_equal(atomic_load(&write_failed_after_gone), 1);

  /* a 9 MiB piece alone goes; an abort cuts the body short, visibly: no last chunk, a close */
  atomic_store(&writer_mode, 4);
  int d4 = atomic_load(&writer_done);
  s = connect_to(port);
  assert_int_equal(send(s, get, strlen(get), 0), (ssize_t)strlen(get));
  size_t acap = (10u << 20), ahave = 0;
  char *ab = malloc(acap);
  ssize_t ak;
  while ((ak = recv(s, ab + ahave, acap - ahave, 0)) > 0) ahave += (size_t)ak;
  assert_int_equal(ak, 0); /* closed by the server */
  assert_true(ahave > (9u << 20));
  assert_true(memcmp(ab + ahave - 5, "0\r\n\r\n", 5) != 0);
  assert_int_equal(ab[ahave - 3], 'i'); /* the piece's bytes, then the close */
  free(ab);
  close(s);
  assert_true(wait_for_int(&writer_done, d4 + 1));

  /* a writer ended just as its client leaves, many times: on_gone never after the end */
  atomic_store(&writer_mode, 3);
  for (int i = 0; i < 20; i++) {
    atomic_store(&client_closed, 0);
    atomic_store(&ended, 0);
    int d = atomic_load(&writer_done);
    s = connect_to(port);
    assert_int_equal(send(s, get, strlen(get), 0), (ssize_t)strlen(get));
    assert_true(recv(s, head, sizeof head, 0) > 0);
    struct linger lg = {1, 0}; /* a reset: the loop sees it at once */
    setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(s);
    atomic_store(&client_closed, 1);
    assert_true(wait_for_int(&writer_done, d + 1));
  }
  usleep(100000); /* not a condition: time for a late on_gone to show itself, were there one */
  assert_int_equal(atomic_load(&gone_after_end), 0);
}

/* Two answers of 9 MiB each, whole. */
static bool two_answers(const char *b, size_t n) {
  const char *h1 = memmem(b, n, "\r\n\r\n", 4);
  size_t body2 = h1 ? (size_t)(h1 - b) + 4 + (9u << 20) : SIZE_MAX;
  if (body2 >= n) return false;
  const char *h2 = memmem(b + body2, n - body2, "\r\n\r\n", 4);
  return h2 && (size_t)(h2 - b) + 4 + (9u << 20) == n;
}

/* Answers larger than half a message, pipelined: both whole, in order (a
 * pool thread sends them back in parts); one past 16 MiB is whole from the
 * loop, and a 500 from a pool thread (no message carries it back). */
static void check_big(int port, bool pool) {
  int s = connect_to(port);
  const char *two = "GET /huge?mb=9 HTTP/1.1\r\nHost: t\r\n\r\nGET /huge?mb=9 HTTP/1.1\r\nHost: t\r\n\r\n";
  assert_int_equal(send(s, two, strlen(two), 0), (ssize_t)strlen(two));
  size_t n;
  char *b = read_until(s, &n, two_answers);
  assert_memory_equal(b, "HTTP/1.1 200 OK\r\n", 17);
  const char *second = memmem(b + (9u << 20), n - (9u << 20), "HTTP/1.1 200 OK\r\n", 17);
  assert_non_null(second);
  free(b);
  reply r;
  ask(s, "GET /huge?mb=17 HTTP/1.1\r\nHost: t\r\n\r\n", &r);
  assert_int_equal(r.status, pool ? 500 : 200);
  if (!pool) assert_int_equal(r.len, 17u << 20);
  done(&r);
  ask(s, "GET /read HTTP/1.1\r\nHost: t\r\n\r\n", &r); /* and the connection goes on */
  assert_int_equal(r.status, 200);
  done(&r);
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
  check_files(m0_host_port(h));
  check_writers(m0_host_port(h));
  check_big(m0_host_port(h), pool_threads[0] != '0');
  assert_int_equal(m0_host_stop(h), 0);
}

/* Behind a proxy the operator trusts, the client is the one it names; the
 * peer stays the socket's (on the loop and on a pool thread). */
static void trusted(const char *pool_threads) {
  char *argv[] = {"test_http_host", "--port", "0", "--blocking-threads", (char *)pool_threads,
                  "--trusted-proxies", "127.0.0.0/8", NULL};
  int code = -1;
  char err[1024] = "";
  m0_host *h = m0_host_start(&app, NULL, 7, argv, &code, err, sizeof err);
  if (!h) fail_msg("the host did not start (%d): %s", code, err);
  int s = connect_to(m0_host_port(h));
  reply r;
  ask(s, "GET /read HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 198.51.100.4, 203.0.113.9\r\n\r\n", &r);
  assert_non_null(strstr(r.body, "peer=127.0.0.1;port=set;client=203.0.113.9;"));
  done(&r);
  ask(s, "GET /read HTTP/1.1\r\nHost: t\r\nForwarded: for=\"[2001:db8::5]:443\"\r\n\r\n", &r);
  assert_non_null(strstr(r.body, "client=2001:db8::5;"));
  done(&r);
  ask(s, "GET /read HTTP/1.1\r\nHost: t\r\n\r\n", &r); /* no header: the peer */
  assert_non_null(strstr(r.body, "client=127.0.0.1;"));
  done(&r);
  close(s);
  assert_int_equal(m0_host_stop(h), 0);
}

static void test_trusted_proxy(void **st) {
  trusted("0");
  trusted("1");
}

static void test_on_the_loop(void **st) { serve_and_check("0"); }
static void test_on_a_pool_thread(void **st) { serve_and_check("1"); }

static void write_file(char *path, size_t n, bool big) {
  snprintf(path, 256, "%s/m0-test-file-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  char *b = malloc(n);
  for (size_t i = 0; i < n; i++) b[i] = big ? (char)('A' + i % 23) : "0123456789abcdefghij"[i];
  assert_int_equal(write(fd, b, n), (ssize_t)n);
  free(b);
  close(fd);
}

int main(void) {
  for (int i = 0; i < BIG; i++) pattern[i] = (char)('a' + i % 26);
  write_file(file_small, 20, false);
  write_file(file_medium, FILE_MEDIUM, true);
  write_file(file_big, FILE_BIG, true);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_on_the_loop), cmocka_unit_test(test_on_a_pool_thread),
                                     cmocka_unit_test(test_trusted_proxy)};
  int rv = cmocka_run_group_tests(tests, NULL, NULL);
  unlink(file_small);
  unlink(file_medium);
  unlink(file_big);
  return rv;
}
