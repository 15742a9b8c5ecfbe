/* The host is a value: two m0_host_start in one process serve side by
 * side (each its own port-0 listener, its own inproc addresses, its own
 * run directory and shared page), each answers with its own application
 * and its own application actor of the same name, and either stops first
 * while the other serves on. Before, the second start failed: "cannot
 * open the coordinator's mailbox at inproc://m0-<pid>/coordinator". */
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
#include <sys/socket.h>
#include <unistd.h>

#include "m0/m0.h"

static void view_a(void *st, const m0_request *req, m0_response *res) {
  m0_respond(res, 200, "text/plain", "host-a", 6, M0_BODY_STATIC);
}
static void view_b(void *st, const m0_request *req, m0_response *res) {
  m0_respond(res, 200, "text/plain", "host-b", 6, M0_BODY_STATIC);
}
static void view_b_pool(void *st, const m0_request *req, m0_response *res) {
  m0_respond(res, 200, "text/plain", "pool-b", 6, M0_BODY_STATIC);
}
/* An application actor of the same name in both, on a thread of each. */
static void receive_a(void *st, const m0_request *req, m0_reply *rep) { m0_reply_send(rep, 200, "text/plain", "actor-a", 7); }
static void receive_b(void *st, const m0_request *req, m0_reply *rep) { m0_reply_send(rep, 200, "text/plain", "actor-b", 7); }
static const m0_actor_kind kind_a[] = {{.name = "who", .receive = receive_a}};
static const m0_actor_kind kind_b[] = {{.name = "who", .receive = receive_b}};
static const m0_route routes_a[] = {{"GET", "/who", view_a, M0_ON_LOOP},
                                    {"GET", "/pool", view_a, M0_NEEDS_POOL},
                                    {"GET", "/actor", NULL, 0, "who"}};
static const m0_route routes_b[] = {{"GET", "/who", view_b, M0_ON_LOOP},
                                    {"GET", "/pool", view_b_pool, M0_NEEDS_POOL},
                                    {"GET", "/actor", NULL, 0, "who"}};
static const m0_app app_a = {.name = "host-a", .routes = routes_a, .nroutes = 3, .actors = kind_a, .nactors = 1};
static const m0_app app_b = {.name = "host-b", .routes = routes_b, .nroutes = 3, .actors = kind_b, .nactors = 1};

/* GET path on port: its body when the status is 200, else "" (bounded by
 * a 10 s receive timeout). */
static const char *get(int port, const char *path, char *buf, size_t n) {
  buf[0] = 0;
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct timeval tv = {10, 0};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char req[128];
  int len = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", path);
  if (connect(s, (struct sockaddr *)&a, sizeof a) != 0 || write(s, req, (size_t)len) != len) {
    close(s);
    return "";
  }
  size_t got = 0;
  ssize_t k;
  while (got < n - 1 && (k = read(s, buf + got, n - 1 - got)) > 0) got += (size_t)k;
  buf[got] = 0;
  close(s);
  const char *body = strstr(buf, "\r\n\r\n");
  return !strncmp(buf, "HTTP/1.1 200", 12) && body ? body + 4 : "";
}

static m0_host *start(const m0_app *app, char *threads) {
  char *argv[] = {(char *)app->name, "--port", "0", "--threads", threads, "--blocking-threads", "1", NULL};
  char err[1024] = "";
  int code = -1;
  m0_host *h = m0_host_start(app, NULL, 7, argv, &code, err, sizeof err);
  if (!h) fprintf(stderr, "%s did not start (exit %d): %s\n", app->name, code, err);
  return h;
}

static void test_side_by_side(void **st) {
  char buf[2048];
  m0_host *a = start(&app_a, "2");
  assert_non_null(a);
  m0_host *b = start(&app_b, "1");
  assert_non_null(b); /* before: the coordinator's inproc mailbox was the pid's, taken */
  assert_int_not_equal(m0_host_port(a), m0_host_port(b));
  assert_string_not_equal(m0_host_run_dir(a), m0_host_run_dir(b));
  for (int i = 0; i < 4; i++) { /* a's two loops, on and off the loop */
    assert_string_equal(get(m0_host_port(a), "/who", buf, sizeof buf), "host-a");
    assert_string_equal(get(m0_host_port(b), "/who", buf, sizeof buf), "host-b");
    assert_string_equal(get(m0_host_port(a), "/pool", buf, sizeof buf), "host-a");
    assert_string_equal(get(m0_host_port(b), "/pool", buf, sizeof buf), "pool-b");
    assert_string_equal(get(m0_host_port(a), "/actor", buf, sizeof buf), "actor-a");
    assert_string_equal(get(m0_host_port(b), "/actor", buf, sizeof buf), "actor-b");
  }
  /* The later one stops first: the first serves on (its counters, the
   * process's tables on its page, never the stopped one's page). */
  assert_int_equal(m0_host_stop(b), 0);
  for (int i = 0; i < 4; i++) assert_string_equal(get(m0_host_port(a), "/pool", buf, sizeof buf), "host-a");
  /* The first stops while a third serves beside it. */
  m0_host *c = start(&app_b, "1");
  assert_non_null(c);
  assert_int_equal(m0_host_stop(a), 0);
  for (int i = 0; i < 4; i++) assert_string_equal(get(m0_host_port(c), "/pool", buf, sizeof buf), "pool-b");
  assert_int_equal(m0_host_stop(c), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_side_by_side)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
