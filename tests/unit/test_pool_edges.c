/* A pool thread as its loop and coordinator see it (actors/pool.c), driven
 * from this test, which plays both: READY after its make, or FAILED with the
 * make's message (or one naming the thread when the make wrote none); a JOB
 * answered in order with the connections echoed; a view that returns
 * without answering, or a route that names no view, answered 500; a job
 * that is malformed (cut short, more headers than a request may have,
 * a path longer than its target, a parameter outside it) answered up to
 * where it breaks, and the thread serving on after it; a message of another
 * kind ignored, bytes that are no envelope in its mailbox refused; an empty
 * job; STOP ends it; a mailbox address already taken fails the start. And the loop's side: a RESULT cut short is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/pipeline0/push.h>

#include "runtime/actor.h"
#include "base/errors.h"
#include "actors/pool.h"
#include "http/response.h"
#include "m0/m0.h"
#include "transport/topology.h"

/* A batch's bytes: the payload of the JOB message it is built in. */
#define BATCH(b) m0__msg_payload((b).msg), m0__msg_payload_len((b).msg)

static void view_ok(void *st, const m0_request *req, m0_response *res) {
  m0_respondf(res, 200, "text/plain", "ok %.*s", (int)req->path.n, req->path.p);
}
static void view_silent(void *st, const m0_request *req, m0_response *res) {}
static void view_big(void *st, const m0_request *req, m0_response *res) { /* 9 MiB: over half a message */
  char *b = malloc(9u << 20);
  memset(b, 'b', 9u << 20);
  m0_respond_owned(res, 200, "application/octet-stream", b, 9u << 20, NULL);
}
static const m0_route routes[] = {{"GET", "/ok", view_ok, 0}, {"GET", "/silent", view_silent, 0}, {"GET", "/big", view_big, 0}};
static int state_token;
static void *make_ok(const m0_ctx *ctx, char *err, size_t n) { return &state_token; }
static void *make_quiet_refusal(const m0_ctx *ctx, char *err, size_t n) { return NULL; }
static const m0_app app = {.name = "edges", .make = make_ok, .routes = routes, .nroutes = 3};
static void handle_all(void *st, const m0_request *req, m0_response *res) {
  m0_respondf(res, 201, "text/plain", "handled %.*s", (int)req->path.n, req->path.p);
}
static const m0_app handler_app = {.name = "edges-handle", .handle = handle_all};
static const m0_app refusing = {.name = "edges", .make = make_quiet_refusal, .routes = routes, .nroutes = 2};

typedef struct rig {
  m0__topology topo;
  m0__actor coord, loop;
  m0__inbox loopbox;
  m0__peer to_pool;
  m0__pool_thread t;
  m0__exits exits;
} rig;

static void rig_open(rig *g, const m0_app *a, const char *base) {
  memset(g, 0, sizeof *g);
  assert_int_equal(m0__topology_build(&g->topo, M0__MODE_SINGLE, 1, 1, M0__SCHEME_INPROC, base), 0);
  const m0__actor_desc *c = m0__topology_find(&g->topo, M0__ACTOR_ID(M0__ROLE_COORD, 0));
  const m0__actor_desc *l = m0__topology_find(&g->topo, M0__ACTOR_ID(M0__ROLE_LOOP, 0));
  assert_int_equal(m0__actor_open(&g->coord, c->id, c->url, NULL), 0);
  assert_int_equal(m0__actor_open(&g->loop, l->id, l->url, NULL), 0);
  assert_int_equal(m0__inbox_init(&g->loopbox), 0);
  g->loop.inbox = &g->loopbox;
  nng_socket_set_ms(g->coord.mailbox, NNG_OPT_RECVTIMEO, 10000);
  nng_socket_set_ms(g->loop.mailbox, NNG_OPT_RECVTIMEO, 10000);
  g->t = (m0__pool_thread){.loop = 0, .index = 0, .topo = &g->topo, .app = a, .coord_id = c->id,
                           .coord_url = c->url, .loop_inbox = &g->loopbox};
  assert_int_equal(m0__inbox_init(&g->t.inbox), 0);
  m0__peer_direct(&g->to_pool, M0__ACTOR_ID(M0__ROLE_POOL, 0), &g->t.inbox);
  assert_int_equal(m0__exits_init(&g->exits), 0);
  m0__handle_init(&g->t.h, &m0__pool_kind, &g->exits);
  assert_int_equal(m0__handle_open(&g->t.h), 0);
  assert_int_equal(m0__handle_start(&g->t.h), 0);
}

static int coord_hears(rig *g, char *text, size_t n) {
  m0__msg m;
  assert_int_equal(m0__recv(&g->coord, &m, M0__RECV_WAIT), 0);
  int kind = m.env.kind;
  if (text) snprintf(text, n, "%.*s", (int)m.len, (const char *)m.payload);
  m0__msg_free(&m);
  return kind;
}

static void rig_close(rig *g) {
  /* its end is announced on the exit descriptor (bounded wait) */
  struct pollfd pf = {g->exits.fd, POLLIN, 0};
  assert_int_equal(poll(&pf, 1, 10000), 1);
  assert_true(m0__handle_exited(&g->t.h));
  m0__handle *hs[] = {&g->t.h};
  assert_int_equal(m0__handles_close(hs, 1, NULL), 0);
  assert_false(g->t.self.open);
  m0__exits_fini(&g->exits);
  m0__inbox_fini(&g->t.inbox);
  m0__inbox_fini(&g->loopbox);
  m0__actor_close(&g->coord);
  m0__actor_close(&g->loop);
  m0__topology_free(&g->topo);
}

static m0_request request(const char *target, size_t path_len) {
  m0_request r;
  memset(&r, 0, sizeof r);
  r.method = (m0_str){"GET", 3};
  r.target = (m0_str){target, strlen(target)};
  r.path = (m0_str){target, path_len};
  r.version_minor = 1;
  return r;
}

/* What a RESULT held: up to 8 answers, each its conn and status. */
typedef struct answers {
  int n;
  void *conn[8];
  int status[8];
  char body[8][64];
} answers;

static void collect(void *arg, const m0__result *r) {
  answers *a = arg;
  if (a->n == 8) return;
  a->conn[a->n] = r->conn;
  assert_int_equal(r->fd, -1); /* no file piece here */
  char buf[1024];
  snprintf(buf, sizeof buf, "%.*s", (int)r->len, (const char *)r->resp);
  a->status[a->n] = -1;
  sscanf(buf, "HTTP/1.1 %d", &a->status[a->n]);
  const char *b = strstr(buf, "\r\n\r\n");
  snprintf(a->body[a->n], sizeof a->body[a->n], "%s", b ? b + 4 : "");
  a->n++;
}

/* Sends a job (len bytes of b) and returns the RESULT's answers (-1: none). */
static int job(rig *g, const void *b, size_t len, answers *out) {
  memset(out, 0, sizeof *out);
  assert_int_equal(m0__send(&g->loop, &g->to_pool, M0__K_JOB, 0, 0, b, len), 0);
  m0__msg m;
  assert_int_equal(m0__recv(&g->loop, &m, M0__RECV_WAIT), 0);
  assert_int_equal(m.env.kind, M0__K_RESULT);
  int n = m0__result_each(m.payload, m.len, collect, out);
  m0__msg_free(&m);
  return n;
}

/* What the loop knows of an answer when it hands the request on. */
static const m0_response plain, closing = {.close = true}, head = {.head = true};

/* A batch whose answers pass half a message goes back in parts: every part
 * but the last says more follow (so the lane keeps the batch in flight),
 * each answer whole, in order. */
static void test_pool_result_parts(void **st) {
  rig g;
  rig_open(&g, &app, "edges-pool-parts");
  assert_int_equal(coord_hears(&g, NULL, 0), M0__K_READY);
  int c1, c2, c3;
  m0__batch b = {0};
  m0_request big = request("/big", 4), ok = request("/ok", 3);
  assert_int_equal(m0__batch_add(&b, &c1, &big, 2, &plain), 0);
  assert_int_equal(m0__batch_add(&b, &c2, &big, 2, &plain), 0);
  assert_int_equal(m0__batch_add(&b, &c3, &ok, 0, &plain), 0);
  assert_int_equal(m0__send(&g.loop, &g.to_pool, M0__K_JOB, 0, 0, BATCH(b)), 0);
  void *want[3] = {&c1, &c2, &c3};
  for (int part = 0; part < 3; part++) {
    m0__msg m;
    assert_int_equal(m0__recv(&g.loop, &m, M0__RECV_WAIT), 0);
    assert_int_equal(m.env.kind, M0__K_RESULT);
    assert_true(m.len <= M0__ENV_MAX_PAYLOAD);
    uint32_t count;
    memcpy(&count, m.payload, 4);
    assert_int_equal(count, part < 2 ? (1u | 0x80000000u) : 1u);
    answers a = {0};
    assert_int_equal(m0__result_each(m.payload, m.len, collect, &a), 1);
    assert_ptr_equal(a.conn[0], want[part]);
    assert_int_equal(a.status[0], 200);
    m0__msg_free(&m);
  }
  m0__batch_fini(&b);
  assert_int_equal(m0__send(&g.loop, &g.to_pool, M0__K_STOP, 0, 0, NULL, 0), 0);
  rig_close(&g);
}

static void test_pool_jobs(void **st) {
  rig g;
  rig_open(&g, &app, "edges-pool-jobs");
  assert_int_equal(coord_hears(&g, NULL, 0), M0__K_READY);
  int c1, c2, c3;
  answers a;
  /* two requests in one batch: answered in order, conns echoed; a view
   * that did not answer, and a route that names no view, are 500s */
  m0__batch b = {0};
  m0_request r1 = request("/ok?x=1", 3), r2 = request("/silent", 7), r3 = request("/nine", 5);
  assert_int_equal(m0__batch_add(&b, &c1, &r1, 0, &plain), 0);
  assert_int_equal(m0__batch_add(&b, &c2, &r2, 1, &plain), 0);
  assert_int_equal(m0__batch_add(&b, &c3, &r3, 9, &closing), 0);
  assert_int_equal(job(&g, BATCH(b), &a), 3);
  assert_ptr_equal(a.conn[0], &c1);
  assert_int_equal(a.status[0], 200);
  assert_string_equal(a.body[0], "ok /ok");
  assert_ptr_equal(a.conn[1], &c2);
  assert_int_equal(a.status[1], 500);
  assert_ptr_equal(a.conn[2], &c3);
  assert_int_equal(a.status[2], 500);
  /* the same batch cut inside its third request: two answered */
  assert_int_equal(job(&g, BATCH(b) - 3, &a), 2);
  assert_int_equal(a.status[0], 200);
  assert_int_equal(a.status[1], 500);
  /* cut inside its first request's head: none */
  assert_int_equal(job(&g, m0__msg_payload(b.msg), 10, &a), 0);
  m0__batch_fini(&b);
  /* more headers than a request may have (100) */
  static m0_header many[101];
  for (int i = 0; i < 101; i++) many[i] = (m0_header){{"X-A", 3}, {"1", 1}};
  m0__batch h = {0};
  m0_request rh = request("/ok", 3);
  rh.headers = many;
  rh.nheaders = 101;
  assert_int_equal(m0__batch_add(&h, &c1, &r1, 0, &plain), 0);
  assert_int_equal(m0__batch_add(&h, &c2, &rh, 0, &plain), 0);
  assert_int_equal(job(&g, BATCH(h), &a), 1);
  assert_ptr_equal(a.conn[0], &c1);
  m0__batch_fini(&h);
  /* a path longer than its target */
  m0__batch p = {0};
  m0_request rp = request("/ok", 9);
  assert_int_equal(m0__batch_add(&p, &c1, &rp, 0, &plain), 0);
  assert_int_equal(job(&g, BATCH(p), &a), 0);
  m0__batch_fini(&p);
  /* a parameter that points outside the target */
  m0__batch q = {0};
  m0_request rq = request("/ok", 3);
  m0_str param = {rq.target.p + 2, 5};
  rq.params = &param;
  rq.nparams = 1;
  assert_int_equal(m0__batch_add(&q, &c1, &rq, 0, &plain), 0);
  assert_int_equal(job(&g, BATCH(q), &a), 0);
  /* cut inside its parameter or its header's lengths */
  assert_int_equal(job(&g, BATCH(q) - 4, &a), 0);
  m0__batch_fini(&q);
  m0__batch hc = {0};
  m0_request rhc = request("/ok", 3);
  rhc.headers = many;
  rhc.nheaders = 1;
  assert_int_equal(m0__batch_add(&hc, &c1, &rhc, 0, &plain), 0);
  assert_int_equal(job(&g, BATCH(hc) - 10, &a), 0); /* cut in the header's lengths */
  assert_int_equal(job(&g, BATCH(hc), &a), 1);     /* whole, answered */
  assert_int_equal(a.status[0], 200);
  m0__batch_fini(&hc);
  /* route -1 is the app's handle: this app has none, so 500 */
  m0__batch nh = {0};
  assert_int_equal(m0__batch_add(&nh, &c1, &r1, -1, &plain), 0);
  assert_int_equal(job(&g, BATCH(nh), &a), 1);
  assert_int_equal(a.status[0], 500);
  m0__batch_fini(&nh);
  /* an empty job: an empty result */
  assert_int_equal(job(&g, NULL, 0, &a), 0);
  /* another kind on the lane, and bytes that are no envelope in its
   * mailbox: both passed over, the next job answered */
  assert_int_equal(m0__send(&g.loop, &g.to_pool, M0__K_GO, 0, 0, NULL, 0), 0);
  nng_socket raw;
  const m0__actor_desc *pd = m0__topology_find(&g.topo, M0__ACTOR_ID(M0__ROLE_POOL, 0));
  assert_int_equal(nng_push0_open(&raw), 0);
  assert_int_equal(nng_dial(raw, pd->url, NULL, 0), 0);
  assert_int_equal(nng_send(raw, "junk", 4, 0), 0);
  m0__batch ok = {0};
  assert_int_equal(m0__batch_add(&ok, &c3, &r1, 0, &head), 0); /* HEAD: no body */
  assert_int_equal(job(&g, BATCH(ok), &a), 1);
  assert_ptr_equal(a.conn[0], &c3);
  assert_int_equal(a.status[0], 200);
  assert_string_equal(a.body[0], "");
  m0__batch_fini(&ok);
  m0__socket_close(raw);
  /* STOP ends it */
  assert_int_equal(m0__send(&g.loop, &g.to_pool, M0__K_STOP, 0, 0, NULL, 0), 0);
  rig_close(&g);
  assert_true(atomic_load(&g.t.h.said_stopped));
}

/* An app with handle instead of routes: route -1 runs it on the pool. */
static void test_pool_handle(void **st) {
  rig g;
  rig_open(&g, &handler_app, "edges-pool-handle");
  assert_int_equal(coord_hears(&g, NULL, 0), M0__K_READY);
  int c1;
  answers a;
  m0__batch b = {0};
  m0_request r = request("/any/thing?q=1", 10);
  assert_int_equal(m0__batch_add(&b, &c1, &r, -1, &plain), 0);
  assert_int_equal(job(&g, BATCH(b), &a), 1);
  assert_ptr_equal(a.conn[0], &c1);
  assert_int_equal(a.status[0], 201);
  assert_string_equal(a.body[0], "handled /any/thing");
  m0__batch_fini(&b);
  assert_int_equal(m0__send(&g.loop, &g.to_pool, M0__K_STOP, 0, 0, NULL, 0), 0);
  rig_close(&g);
}

static void test_pool_make_refused(void **st) {
  rig g;
  rig_open(&g, &refusing, "edges-pool-refused");
  char text[512];
  assert_int_equal(coord_hears(&g, text, sizeof text), M0__K_FAILED);
  assert_string_equal(text, "edges: make failed on pool thread 0.0");
  rig_close(&g);
  assert_true(atomic_load(&g.t.h.said_stopped));
}

/* A mailbox address already taken: the start fails, no thread runs. */
static void test_pool_mailbox_taken(void **st) {
  m0__topology topo;
  assert_int_equal(m0__topology_build(&topo, M0__MODE_SINGLE, 1, 1, M0__SCHEME_INPROC, "edges-pool-taken"), 0);
  const m0__actor_desc *pd = m0__topology_find(&topo, M0__ACTOR_ID(M0__ROLE_POOL, 0));
  m0__actor holder;
  assert_int_equal(m0__actor_open(&holder, pd->id, pd->url, NULL), 0);
  m0__inbox lb;
  assert_int_equal(m0__inbox_init(&lb), 0);
  m0__pool_thread t = {.loop = 0, .index = 0, .topo = &topo, .app = &app, .coord_id = M0__ACTOR_ID(M0__ROLE_COORD, 0),
                       .coord_url = "inproc://edges-pool-taken-coord", .loop_inbox = &lb};
  m0__handle_init(&t.h, &m0__pool_kind, NULL);
  assert_int_equal(m0__handle_open(&t.h), M0__ETRANSPORT);
  assert_false(t.h.started);
  assert_true(m0__handle_exited(&t.h));
  assert_false(t.self.open);
  m0__inbox_fini(&lb);
  m0__actor_close(&holder);
  m0__topology_free(&topo);
}

static void ignore(void *arg, const m0__result *r) { ++*(int *)arg; }

static void test_result_refusals(void **st) {
  uint8_t b[4 + 48 + 3];
  uint32_t count = 1, len = 3;
  uint64_t conn = 42;
  int32_t fd = -1;
  memset(b, 0, sizeof b);
  memcpy(b, &count, 4);
  memcpy(b + 4, &conn, 8);
  memcpy(b + 12, &len, 4);
  memcpy(b + 16, &fd, 4);
  memcpy(b + 52, "abc", 3);
  int calls = 0;
  assert_int_equal(m0__result_each(b, sizeof b, ignore, &calls), 1);
  assert_int_equal(calls, 1);
  calls = 0;
  assert_int_equal(m0__result_each(b, 3, ignore, &calls), M0__EBADMSG);           /* no count */
  assert_int_equal(m0__result_each(b, 10, ignore, &calls), M0__EBADMSG);          /* an answer's head cut */
  assert_int_equal(m0__result_each(b, sizeof b - 1, ignore, &calls), M0__EBADMSG); /* its bytes cut */
  assert_int_equal(calls, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_pool_jobs), cmocka_unit_test(test_pool_result_parts), cmocka_unit_test(test_pool_handle), cmocka_unit_test(test_pool_make_refused),
                                     cmocka_unit_test(test_pool_mailbox_taken),
                                     cmocka_unit_test(test_result_refusals)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
