/* The embedded host's refusals and its publisher, as the program that embeds
 * it sees them (docs/behaviour.md, Embedding): m0_host_start returns NULL
 * with the exit code serving would have had and the reason (a bad flag: 2; a
 * check that fails: 78 with its fix; an application's or a producer's make
 * that refuses: 78); a producer whose step fails stops alone and the host
 * serves on; m0_stats counts what was answered; m0_host_publisher refuses a
 * channel too long and a frame too large and counts them on the shared page;
 * m0_publisher_attach reaches the host through its run directory while it
 * runs, and is refused once it stopped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bus/publisher.h"
#include "m0/m0.h"
#include "transport/page.h"

static void view_ok(void *st, const m0_request *req, m0_response *res) { m0_respond(res, 200, "text/plain", "ok", 2, M0_BODY_STATIC); }
static const m0_route routes[] = {{"GET", "/ok", view_ok, M0_ON_LOOP}};
static const m0_app app = {.name = "edges", .routes = routes, .nroutes = 1};
static const m0_app one_loop = {.name = "one-loop", .routes = routes, .nroutes = 1, .max_workers = 1, .max_threads = 1};

static void *refuse(const m0_ctx *ctx, char *err, size_t n) {
  snprintf(err, n, "no database here");
  return NULL;
}
static const m0_app refusing = {.name = "refusing", .make = refuse, .routes = routes, .nroutes = 1};

static m0_host *start(const m0_app *a, const m0_producer *p, int argc, char **argv, int *code, char *err, size_t n) {
  *code = -1;
  err[0] = 0;
  return m0_host_start(a, p, argc, argv, code, err, n);
}

static void test_refusals(void **st) {
  char err[1024];
  int code;
  char *bad_port[] = {"edges", "--port", "abc", NULL};
  assert_null(start(&app, NULL, 3, bad_port, &code, err, sizeof err));
  assert_int_equal(code, 2);
  assert_non_null(strstr(err, "port"));
  char *two_loops[] = {"edges", "--port", "0", "--threads", "2", NULL};
  assert_null(start(&one_loop, NULL, 5, two_loops, &code, err, sizeof err));
  assert_int_equal(code, 78);
  assert_non_null(strstr(err, "one-loop serves at most 1"));
  assert_non_null(strchr(err, '(')); /* the check's fix follows */
  char *plain[] = {"edges", "--port", "0", NULL};
  assert_null(start(&refusing, NULL, 3, plain, &code, err, sizeof err));
  assert_int_equal(code, 78);
  assert_non_null(strstr(err, "the host did not start (exit 78"));
  m0_producer p = {.make = refuse};
  assert_null(start(&app, &p, 3, plain, &code, err, sizeof err));
  assert_int_equal(code, 78);
  assert_non_null(strstr(err, "the host did not start (exit 78"));
  assert_null(m0_host_start(&app, NULL, 3, bad_port, NULL, err, sizeof err)); /* no code asked for */
  assert_non_null(strstr(err, "port"));
}

static atomic_int steps, frees;
static int token;
static void *make_token(const m0_ctx *ctx, char *err, size_t n) { return &token; }
static int64_t fail_step(void *s, m0_publisher *pub) {
  atomic_fetch_add(&steps, 1);
  return s == &token ? -5 : 1000000;
}
static void free_token(void *s) {
  if (s == &token) atomic_fetch_add(&frees, 1);
}

static int get_ok(int port) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct timeval tv = {5, 0};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) return -1;
  const char *req = "GET /ok HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
  if (write(s, req, strlen(req)) != (ssize_t)strlen(req)) return -1;
  char buf[2048];
  size_t n = 0;
  ssize_t k;
  while (n < sizeof buf - 1 && (k = read(s, buf + n, sizeof buf - 1 - n)) > 0) n += (size_t)k;
  buf[n] = 0;
  close(s);
  int status = -1;
  sscanf(buf, "HTTP/1.1 %d", &status);
  return status == 200 && strstr(buf, "\r\n\r\nok") ? 200 : status;
}

static bool wait_for(bool (*cond)(void *), void *arg) {
  for (int i = 0; i < 1000; i++) { /* up to 10 s */
    if (cond(arg)) return true;
    nanosleep(&(struct timespec){0, 10000000}, NULL);
  }
  return cond(arg);
}
static bool stepped(void *arg) { return atomic_load(&steps) >= 1; }
static bool answered_two(void *arg) {
  m0_loop_stats s[2];
  return m0_stats(arg, s, 2) == 1 && s[0].requests == 2;
}

static void test_serving(void **st) {
  char err[1024];
  int code;
  char *argv[] = {"edges", "--port", "0", NULL};
  m0_producer p = {.make = make_token, .step = fail_step, .free = free_token};
  m0_host *h = start(&app, &p, 3, argv, &code, err, sizeof err);
  if (!h) fail_msg("the host did not start (%d): %s", code, err);
  assert_int_equal(code, 0);
  int port = m0_host_port(h);
  assert_true(port > 0);
  /* the producer's step failed: it stops alone, serving goes on */
  assert_true(wait_for(stepped, NULL));
  assert_int_equal(get_ok(port), 200);
  assert_int_equal(get_ok(port), 200);
  assert_int_equal(atomic_load(&steps), 1); /* never stepped again */
  m0_publisher *pub = m0_host_publisher(h);
  assert_non_null(pub);
  assert_true(wait_for(answered_two, pub));
  /* the host's own publisher: refusals counted where /metrics reads them */
  uint64_t before = atomic_load(&pub->page->head->refused);
  char chan[66];
  memset(chan, 'c', 65);
  chan[65] = 0;
  assert_false(m0_publish(pub, chan, m0_next_id(pub), "data: x", 7));
  static char big[64 * 1024 + 1];
  memset(big, 'x', sizeof big);
  assert_false(m0_publish(pub, "beats", m0_next_id(pub), big, sizeof big));
  assert_int_equal(atomic_load(&pub->page->head->refused), before + 2);
  assert_true(m0_publish(pub, "beats", m0_next_id(pub), big, sizeof big - 1)); /* 64 KiB exactly */
  /* another publisher, through the run directory */
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", m0_host_run_dir(h));
  assert_true(dir[0] == '/');
  m0_publisher *ext = m0_publisher_attach(dir, err, sizeof err);
  if (!ext) fail_msg("attach to %s: %s", dir, err);
  m0_loop_stats s[4];
  assert_int_equal(m0_stats(ext, s, 4), 1);
  assert_int_equal(s[0].requests, 2);
  uint64_t id = m0_next_id(ext);
  assert_true(m0_next_id(pub) == id + 1); /* one counter */
  assert_true(m0_publish(ext, "beats", id, "data: ext", 9));
  m0_publisher_detach(ext);
  assert_int_equal(m0_host_stop(h), 0);
  assert_int_equal(atomic_load(&frees), 1); /* its free ran once */
  /* the host is gone, and its run directory with it */
  err[0] = 0;
  assert_null(m0_publisher_attach(dir, err, sizeof err));
  assert_non_null(strstr(err, dir));
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_refusals), cmocka_unit_test(test_serving)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
