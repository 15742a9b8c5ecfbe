/* m0_send and m0_call from the embedding program's own threads (main and
 * threads it made: no actor, no view) to a thread actor of a host it
 * started in-process (m0_host_start): the answer, the refusals (ENOENT,
 * ENODATA, ETIMEDOUT, EMSGSIZE), eight threads calling at once each
 * answered their own call, sends that each reach the named host's instance
 * alone when two hosts serve side by side, and h NULL resolving to the only
 * host, or to none (ENOENT) when there are two; a mailbox of the program's
 * own thread, and one still open when its host stops. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "m0/m0.h"

enum { MSG_ECHO = 1, MSG_ECHOED = 2, MSG_COUNT = 3, MSG_COUNTED = 4, MSG_NONE = 5 };

/* `echo`: MSG_ECHO answered MSG_ECHOED with the same bytes; each MSG_COUNT
 * counted; MSG_COUNTED answered with the count as text; MSG_NONE not
 * answered. Its state is its instance's, touched on its thread alone. */
typedef struct echo_state {
  long counted;
} echo_state;

static void *echo_make(const m0_actor_ctx *ctx, char *err, size_t errlen) {
  echo_state *s = calloc(1, sizeof *s);
  if (!s) snprintf(err, errlen, "echo: out of memory");
  return s;
}

static void echo_message(void *state, uint32_t type, m0_str data, m0_reply *rep) {
  echo_state *s = state;
  char text[32];
  if (type == MSG_COUNT) s->counted++;
  if (!rep) return;
  if (type == MSG_ECHO) m0_reply_message(rep, MSG_ECHOED, data.p, data.n);
  if (type == MSG_COUNTED) {
    int n = snprintf(text, sizeof text, "%ld", s->counted);
    m0_reply_message(rep, MSG_COUNTED, text, (size_t)n);
  }
}

static void echo_receive(void *state, const m0_request *req, m0_reply *rep) { m0_reply_send(rep, 200, NULL, "e", 1); }

/* `sleepy`: answers a call only after a second, far past the call's bound. */
static void sleepy_message(void *state, uint32_t type, m0_str data, m0_reply *rep) {
  usleep(1000 * 1000);
  if (rep) m0_reply_message(rep, type, "late", 4);
}

static const m0_actor_kind kinds[] = {{.name = "echo", .make = echo_make, .receive = echo_receive, .free = free,
                                       .message = echo_message},
                                      {.name = "sleepy", .receive = echo_receive, .message = sleepy_message}};
static void view_who(void *st, const m0_request *req, m0_response *res) {
  m0_respond(res, 200, "text/plain", "m", 1, M0_BODY_STATIC);
}
static const m0_route routes[] = {{"GET", "/who", view_who, M0_ON_LOOP}};
static const m0_app app = {.name = "messages", .routes = routes, .nroutes = 1, .actors = kinds, .nactors = 2};

static m0_host *start(void) {
  char *argv[] = {"messages", "--port", "0", "--threads", "1", "--blocking-threads", "1", NULL};
  char err[1024] = "";
  int code = -1;
  m0_host *h = m0_host_start(&app, NULL, 7, argv, &code, err, sizeof err);
  if (!h) fprintf(stderr, "the host did not start (exit %d): %s\n", code, err);
  return h;
}

/* h's echo's count (a call), or -1. */
static long counted(m0_host *h, const char *actor) {
  m0_message m;
  if (m0_call(h, actor, MSG_COUNTED, NULL, 0, 5000, &m) != 0) return -1;
  char text[32];
  snprintf(text, sizeof text, "%.*s", (int)m.data.n, m.data.p);
  long n = m.type == MSG_COUNTED ? atol(text) : -1;
  m0_message_free(&m);
  return n;
}

/* A call that must fail: its errno. */
static int call_errno(m0_host *h, const char *actor, uint32_t type, const void *data, size_t len, unsigned ms) {
  m0_message m;
  errno = 0;
  if (m0_call(h, actor, type, data, len, ms, &m) == 0) {
    m0_message_free(&m);
    return 0;
  }
  return errno;
}

static void test_one_host(void **st) {
  m0_host *h = start();
  assert_non_null(h);
  m0_message m;
  assert_int_equal(m0_call(h, "echo", MSG_ECHO, "hello", 5, 5000, &m), 0);
  assert_int_equal(m.type, MSG_ECHOED);
  assert_int_equal(m.data.n, 5);
  assert_memory_equal(m.data.p, "hello", 5);
  m0_message_free(&m);
  assert_int_equal(m0_call(NULL, "echo.0", MSG_ECHO, "only", 4, 5000, &m), 0); /* NULL: the only host */
  assert_memory_equal(m.data.p, "only", 4);
  m0_message_free(&m);

  assert_int_equal(call_errno(h, "nope", MSG_ECHO, "x", 1, 1000), ENOENT);
  assert_int_equal(call_errno(h, "echo.1", MSG_ECHO, "x", 1, 1000), ENOENT); /* one instance */
  errno = 0;
  assert_int_equal(m0_send(h, "nope", MSG_COUNT, NULL, 0), -1);
  assert_int_equal(errno, ENOENT);
  assert_int_equal(call_errno(h, "echo", MSG_NONE, NULL, 0, 5000), ENODATA);
  assert_int_equal(call_errno(h, "sleepy", MSG_ECHO, "x", 1, 100), ETIMEDOUT);
  size_t big = 17u << 20;
  char *huge = calloc(1, big);
  assert_non_null(huge);
  assert_int_equal(call_errno(h, "echo", MSG_ECHO, huge, big, 1000), EMSGSIZE);
  free(huge);

  long before = counted(h, "echo");
  assert_true(before >= 0);
  for (int i = 0; i < 100; i++) assert_int_equal(m0_send(h, "echo", MSG_COUNT, NULL, 0), 0);
  assert_int_equal(counted(h, "echo"), before + 100); /* one mailbox, in order: every send before the call */
  assert_int_equal(m0_host_stop(h), 0);
}

/* Threads of the program's own, calling and sending at once: each call gets
 * its own answer back (none crossed with another thread's), every send is
 * counted. */
enum { CALLERS = 8, CALLS = 40 };
typedef struct caller_job {
  m0_host *h;
  int index, wrong, failed;
} caller_job;

static void *caller_run(void *arg) {
  caller_job *j = arg;
  for (int i = 0; i < CALLS; i++) {
    char mine[32];
    int n = snprintf(mine, sizeof mine, "thread %d call %d", j->index, i);
    m0_message m;
    if (m0_send(j->h, "echo", MSG_COUNT, NULL, 0) != 0 ||
        m0_call(j->h, "echo", MSG_ECHO, mine, (size_t)n, 5000, &m) != 0) {
      j->failed++;
      continue;
    }
    if (m.type != MSG_ECHOED || m.data.n != (size_t)n || memcmp(m.data.p, mine, (size_t)n)) j->wrong++;
    m0_message_free(&m);
  }
  return NULL;
}

static void test_threads_at_once(void **st) {
  m0_host *h = start();
  assert_non_null(h);
  long before = counted(h, "echo");
  assert_true(before >= 0);
  pthread_t t[CALLERS];
  caller_job jobs[CALLERS];
  for (int i = 0; i < CALLERS; i++) {
    jobs[i] = (caller_job){.h = h, .index = i};
    assert_int_equal(pthread_create(&t[i], NULL, caller_run, &jobs[i]), 0);
  }
  int wrong = 0, failed = 0;
  for (int i = 0; i < CALLERS; i++) {
    pthread_join(t[i], NULL);
    wrong += jobs[i].wrong;
    failed += jobs[i].failed;
  }
  assert_int_equal(wrong, 0);
  assert_int_equal(failed, 0);
  assert_int_equal(counted(h, "echo"), before + CALLERS * CALLS);
  assert_int_equal(m0_host_stop(h), 0);
}

static void test_two_hosts(void **st) {
  m0_host *a = start();
  assert_non_null(a);
  m0_host *b = start();
  assert_non_null(b);
  for (int i = 0; i < 50; i++) assert_int_equal(m0_send(a, "echo", MSG_COUNT, NULL, 0), 0);
  for (int i = 0; i < 7; i++) assert_int_equal(m0_send(b, "echo.0", MSG_COUNT, NULL, 0), 0);
  assert_int_equal(counted(a, "echo"), 50);
  assert_int_equal(counted(b, "echo"), 7);
  /* main belongs to neither: NULL names no host */
  assert_int_equal(call_errno(NULL, "echo", MSG_ECHO, "x", 1, 1000), ENOENT);
  errno = 0;
  assert_int_equal(m0_send(NULL, "echo", MSG_COUNT, NULL, 0), -1);
  assert_int_equal(errno, ENOENT);
  assert_int_equal(counted(a, "echo"), 50);
  assert_int_equal(counted(b, "echo"), 7);
  assert_int_equal(m0_host_stop(b), 0);
  assert_int_equal(m0_host_stop(a), 0);
}

/* A mailbox: the program's thread receives sends and calls by its name and
 * answers the calls; names are checked; a monitor's watcher must be named
 * well and watch an actor there is. */
typedef struct box_caller {
  m0_host *h;
  int rc, err;
  m0_message answer;
} box_caller;

static void *box_call(void *arg) {
  box_caller *c = arg;
  c->rc = m0_call(c->h, "jobs", 9, "question", 8, 5000, &c->answer);
  c->err = errno;
  return NULL;
}

static void test_mailbox(void **st) {
  m0_host *h = start();
  assert_non_null(h);
  m0_mailbox *mb = m0_mailbox_open(h, "jobs");
  assert_non_null(mb);
  errno = 0;
  assert_null(m0_mailbox_open(h, "jobs"));
  assert_int_equal(errno, EEXIST);
  errno = 0;
  assert_null(m0_mailbox_open(h, "echo")); /* an actor's name */
  assert_int_equal(errno, EEXIST);
  errno = 0;
  assert_null(m0_mailbox_open(h, "Jobs!"));
  assert_int_equal(errno, EINVAL);

  assert_int_equal(m0_send(h, "jobs", 7, "a", 1), 0);
  m0_message m;
  assert_int_equal(m0_mailbox_recv(mb, 5000, &m), 0);
  assert_int_equal(m.type, 7);
  assert_int_equal(m.data.n, 1);
  assert_memory_equal(m.data.p, "a", 1);
  errno = 0;
  assert_int_equal(m0_mailbox_reply(mb, &m, 1, "x", 1), -1); /* a send: nobody waits */
  assert_int_equal(errno, EINVAL);
  m0_message_free(&m);

  box_caller c = {.h = h};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, box_call, &c), 0);
  assert_int_equal(m0_mailbox_recv(mb, 5000, &m), 0);
  assert_int_equal(m.type, 9);
  assert_memory_equal(m.data.p, "question", 8);
  assert_int_equal(m0_mailbox_reply(mb, &m, 10, "answer", 6), 0);
  m0_message_free(&m);
  pthread_join(t, NULL);
  assert_int_equal(c.rc, 0);
  assert_int_equal(c.answer.type, 10);
  assert_memory_equal(c.answer.data.p, "answer", 6);
  m0_message_free(&c.answer);

  errno = 0;
  assert_int_equal(m0_mailbox_recv(mb, 50, &m), -1);
  assert_int_equal(errno, ETIMEDOUT);
  assert_int_equal(m0_monitor(h, "echo", "jobs"), 0);
  errno = 0;
  assert_int_equal(m0_monitor(h, "nope", "jobs"), -1);
  assert_int_equal(errno, ENOENT);
  errno = 0;
  assert_int_equal(m0_monitor(h, "echo", "Jobs!"), -1);
  assert_int_equal(errno, EINVAL);
  m0_mailbox_close(mb);
  errno = 0;
  assert_int_equal(m0_send(h, "jobs", 7, "a", 1), -1); /* closed: no such name */
  assert_int_equal(errno, ENOENT);
  assert_int_equal(m0_host_stop(h), 0);
}

/* A mailbox still open when its host stops: its receive ends (ECANCELED)
 * instead of waiting on what the stop freed, and it closes after. */
static void test_mailbox_outlives(void **st) {
  m0_host *h = start();
  assert_non_null(h);
  m0_mailbox *mb = m0_mailbox_open(h, "late");
  assert_non_null(mb);
  assert_int_equal(m0_monitor(h, "echo", "late"), 0);
  assert_int_equal(m0_host_stop(h), 0);
  m0_message m;
  int got = 0;
  while (m0_mailbox_recv(mb, 1000, &m) == 0) { /* the monitor's note of echo.0 going, then the stop */
    got++;
    m0_message_free(&m);
  }
  assert_int_equal(errno, ECANCELED);
  assert_true(got <= 1);
  m0_mailbox_close(mb);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_one_host), cmocka_unit_test(test_threads_at_once),
                                     cmocka_unit_test(test_two_hosts), cmocka_unit_test(test_mailbox),
                                     cmocka_unit_test(test_mailbox_outlives)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
