/* host_check — the host's own gate app.
 *   GET /health     on the loop: {"status":"ok"}
 *   GET /pid        the serving process's pid
 *   GET /instance   {"worker":W,"thread":T,"pid":P,"hits":N}, header x-worker
 *   GET /slow?ms=N  spins (not sleeps) N ms: {"ms":N}
 *   GET /events            a stream of the producer's beats, opened on the
 *                          loop; header x-worker; each frame id: <n> /
 *                          event: beat / data: {"beat":k,"pid":P}
 *                          ?welcome=1: a frame for this stream alone first
 *                          (event: welcome / data: {"worker":W}); with
 *                          Last-Event-ID, the held beats after it first
 *   GET /ws                a WebSocket subscribed to "beats" (each beat's
 *                          data as a text message) that sends every message
 *                          it receives back to its sender
 *   GET /events-from-func  the same stream opened in the request function:
 *                          served without a pool, 409 under a pool
 *   GET, POST /actor/echo  served by actor `echo` (apps/echo_actor/echo.h):
 *                          {"actor":"echo","pid":P,"instance":I,"method":M,
 *                          "path":PATH,"body":B}; on a thread of the host
 *                          unless a topology file places it elsewhere
 *   GET /actor/stream      served by actor `echo` in pieces (m0_reply_writer):
 *                          ?n=N&size=S&sse=1&ms=M (apps/echo_actor/echo.h)
 *   GET /actor/silent      served by actor `silent`, which never replies: 504
 *                          at the route's timeout (1000 ms)
 *   GET /actor/relay       served by actor `relay`, which asks `echo` and
 *                          answers {"relay":PID,"echo":<echo's answer>}
 *   GET /graph             on the loop: the observer's graph (m0_respond_graph)
 *   GET, POST /loop/echo   echo's answer made by a view on the loop
 *                          (instance -1): the same work without the actor
 *   GET /deferred?ms=N     on the loop: the view defers its answer and another
 *                          thread gives it N ms later: {"deferred":N};
 *                          &bound=B defers with a bound of B ms (default 30 s)
 *   GET /msg/call?to=A&type=T&data=D   on the loop, deferred: a thread of
 *                          its own calls actor A (m0_call: "echo", "echo.1")
 *                          with message type T (default 1, echo's ECHO) and
 *                          data D and answers 200 {"type":T2,"answer":<the
 *                          answer>} (or "answer_text" when it is no JSON),
 *                          or 502 {"errno":"ENOENT",...} when the call failed
 *   GET /msg/send?to=A&n=N  that thread sends A N (default 1) ECHO_MSG_COUNT
 *                          messages (m0_send): {"sent":K} and, when one was
 *                          refused, "errno"
 *   GET /msg/box?name=B&n=N&ms=T  that thread opens mailbox B (m0_mailbox_open),
 *                          says "host_check: mailbox B open" on stderr, and
 *                          takes up to N messages (default 1) for up to T ms
 *                          (default 5000), answering each call with its own
 *                          data; then {"got":[{"type":T,"data":D,"call":bool}..]}
 *                          (or 502 {"errno":..} when it cannot open it);
 *                          &watch=A first monitors actor A into B
 *                          (m0_monitor), and says "host_check: B watches A"
 * Its producer publishes a beat on channel "beats" every period.
 * Knobs (variables):
 *   M0_HOSTCHECK_PERIOD_MS    beat period (default 100)
 *   M0_HOSTCHECK_STEP_MS      time spent spinning inside each step
 *   M0_HOSTCHECK_MAX_WORKERS  what max_workers answers (default 0: any)
 *   M0_HOSTCHECK_MAKE_FAILS=1 every handler make fails
 *   M0_HOSTCHECK_PRODUCER_FAILS=1 the producer's make fails; =step its 3rd step fails
 *   M0_HOSTCHECK_POOL_MAKE_FAILS=1 a pool thread's make fails
 *   M0_HOSTCHECK_LOOP_MAKE_FAILS=1 loop 1's make fails alone, 300 ms late
 *   M0_HOSTCHECK_POOL_MAKE_FAILS=late pool thread 1.0's make fails alone, 300 ms late
 *   M0_HOSTCHECK_PRODUCER_FAILS=late the producer's make fails, 300 ms late
 *   M0_HOSTCHECK_FAIL_GATE=FILE    a late make above fails once FILE exists (up
 *                                  to 60 s) instead of after 300 ms, and says
 *                                  "host_check: a make waits for the gate"
 *   M0_HOSTCHECK_SLOW_SAYS=1  /slow says "host_check: /slow N ms begins on loop
 *                             W thread T" on stderr before it spins, and
 *                             "host_check: /slow N ms ends" after
 *   M0_HOSTCHECK_STEP_SAYS=1  each producer step says "host_check: step N begins"
 *                             on stderr before it spins or publishes
 *   M0_HOSTCHECK_NEEDS_POOL=1 /slow is flagged M0_NEEDS_POOL (it blocks): served
 *                             only with --blocking-threads 1 or more (else
 *                             exit 78, check pool-routes); =loop flags it
 *                             M0_ON_LOOP | M0_NEEDS_POOL too, which is refused.
 *                             Off by default: the tests run /slow on the loop.
 */
#include <errno.h>
#include <m0/m0.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../echo_actor/echo.h"

typedef struct hc {
  int worker, thread;
  long hits;
} hc;

static long env_long(const char *name, long def) {
  const char *s = getenv(name);
  if (!s || !*s) return def;
  char *end;
  long v = strtol(s, &end, 10);
  if (*end) {
    fprintf(stderr, "host_check: %s=%s is not a number\n", name, s);
    exit(78);
  }
  return v;
}

static bool env_is(const char *name, const char *value) {
  const char *s = getenv(name);
  return s && strcmp(s, value) == 0;
}

/* The wait of a make that fails late: until M0_HOSTCHECK_FAIL_GATE names a
 * file that exists (so a test fails it once the others are READY), else 300 ms. */
static void late(void) {
  const char *gate = getenv("M0_HOSTCHECK_FAIL_GATE");
  if (gate && *gate) fprintf(stderr, "host_check: a make waits for the gate\n"); /* its process is up */
  for (int i = 0; gate && *gate && i < 6000 && access(gate, F_OK) != 0; i++) usleep(10 * 1000);
  if (!gate || !*gate) usleep(300 * 1000);
}

static void *hc_make(const m0_ctx *ctx, char *err, size_t errlen) {
  if (env_is("M0_HOSTCHECK_MAKE_FAILS", "1")) {
    snprintf(err, errlen, "host_check: make refused on loop %d (M0_HOSTCHECK_MAKE_FAILS=1)", ctx->worker);
    return NULL;
  }
  if (ctx->thread >= 0 && env_is("M0_HOSTCHECK_POOL_MAKE_FAILS", "1")) {
    snprintf(err, errlen, "host_check: make refused on pool thread %d.%d (M0_HOSTCHECK_POOL_MAKE_FAILS=1)",
             ctx->worker, ctx->thread);
    return NULL;
  }
  if (ctx->worker == 1 && ctx->thread == 0 && env_is("M0_HOSTCHECK_POOL_MAKE_FAILS", "late")) {
    late();
    snprintf(err, errlen, "host_check: make refused on pool thread 1.0 (M0_HOSTCHECK_POOL_MAKE_FAILS=late)");
    return NULL;
  }
  if (ctx->worker == 1 && ctx->thread < 0 && env_is("M0_HOSTCHECK_LOOP_MAKE_FAILS", "1")) {
    late();
    snprintf(err, errlen, "host_check: make refused on loop 1 (M0_HOSTCHECK_LOOP_MAKE_FAILS=1)");
    return NULL;
  }
  hc *h = calloc(1, sizeof *h);
  if (!h) return NULL;
  h->worker = ctx->worker;
  h->thread = ctx->thread;
  return h;
}

static void hc_free(void *state) { free(state); }

static void view_graph(void *state, const m0_request *req, m0_response *res) { m0_respond_graph(res); }

static void view_health(void *state, const m0_request *req, m0_response *res) {
  static const char body[] = "{\"status\":\"ok\"}";
  m0_respond(res, 200, "application/json", body, sizeof body - 1, M0_BODY_STATIC);
}

static void view_pid(void *state, const m0_request *req, m0_response *res) {
  m0_respondf(res, 200, "text/plain", "%d", (int)getpid());
}

static void view_instance(void *state, const m0_request *req, m0_response *res) {
  hc *h = state;
  h->hits++;
  char w[16];
  snprintf(w, sizeof w, "%d", h->worker);
  m0_response_header(res, "x-worker", w);
  m0_respondf(res, 200, "application/json", "{\"worker\":%d,\"thread\":%d,\"pid\":%d,\"hits\":%ld}", h->worker,
              h->thread, (int)getpid(), h->hits);
}

static void spin_ms(long ms) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  do clock_gettime(CLOCK_MONOTONIC, &b);
  while ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < ms);
}

static void view_slow(void *state, const m0_request *req, m0_response *res) {
  long ms;
  if (!m0_request_query_int(req, "ms", 0, 600000, &ms)) {
    m0_respondf(res, 400, "application/json", "{\"error\":\"want ms=0..600000\"}");
    return;
  }
  if (env_is("M0_HOSTCHECK_SLOW_SAYS", "1")) {
    hc *h = state;
    fprintf(stderr, "host_check: /slow %ld ms begins on loop %d thread %d\n", ms, h->worker, h->thread);
  }
  spin_ms(ms);
  if (env_is("M0_HOSTCHECK_SLOW_SAYS", "1")) fprintf(stderr, "host_check: /slow %ld ms ends\n", ms);
  m0_respondf(res, 200, "application/json", "{\"ms\":%ld}", ms);
}

static void view_events(void *state, const m0_request *req, m0_response *res) {
  hc *h = state;
  char w[16];
  snprintf(w, sizeof w, "%d", h->worker);
  m0_response_header(res, "x-worker", w);
  if (m0_respond_stream(res, "beats") != 0) return;
  long welcome = 0;
  if (m0_request_query_int(req, "welcome", 0, 1, &welcome) && welcome) {
    char f[64];
    int n = snprintf(f, sizeof f, "event: welcome\ndata: {\"worker\":%d}", h->worker);
    m0_stream_write(res, f, (size_t)n);
  }
}

/* /ws: every message comes back to its sender as it came (text or binary). */
static void ws_echo(m0_ws *ws, int type, const void *data, size_t len, void *arg) {
  (void)arg;
  m0_ws_send(ws, type, data, len);
}

static void view_ws(void *state, const m0_request *req, m0_response *res) {
  (void)state;
  (void)req;
  m0_ws_handlers hd = {.on_message = ws_echo};
  m0_ws *ws = m0_respond_websocket(res, &hd);
  if (ws) m0_ws_subscribe(ws, "beats");
}

/* /deferred: the answer comes from a thread of its own, ms later. */
typedef struct later {
  m0_deferred *d;
  long ms;
} later;

static void *deferred_answer(void *arg) {
  later *w = arg;
  struct timespec ts = {w->ms / 1000, (w->ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
  char body[64];
  int n = snprintf(body, sizeof body, "{\"deferred\":%ld}", w->ms);
  if (m0_deferred_respond(w->d, 200, "application/json", body, (size_t)n) != 0 && errno == ETIMEDOUT)
    fprintf(stderr, "host_check: a deferred answer came after its bound (ETIMEDOUT)\n");
  free(w);
  return NULL;
}

static void view_deferred(void *state, const m0_request *req, m0_response *res) {
  long ms, bound = 0;
  if (!m0_request_query_int(req, "ms", 0, 600000, &ms) ||
      (m0_request_query(req, "bound", &(m0_str){0}) && !m0_request_query_int(req, "bound", 1, 600000, &bound))) {
    m0_respondf(res, 400, "application/json", "{\"error\":\"want ms=0..600000 and bound=1..600000\"}");
    return;
  }
  later *w = malloc(sizeof *w);
  pthread_t t;
  if (!w || !(w->d = m0_defer(res, (unsigned)bound))) {
    free(w);
    m0_respondf(res, 500, "application/json", "{\"error\":\"cannot defer\"}");
    return;
  }
  w->ms = ms;
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&t, &at, deferred_answer, w) != 0) {
    static const char why[] = "{\"error\":\"no thread\"}";
    m0_deferred_respond(w->d, 503, "application/json", why, sizeof why - 1);
    free(w);
  }
  pthread_attr_destroy(&at);
}

/* ---- /msg/call and /msg/send: m0_call and m0_send from a thread of the
 * application's own (the view defers; the thread answers) ---- */

typedef struct msg_job {
  m0_deferred *d;
  char to[64], data[256], watch[64];
  long type, n, ms;
  int what; /* MSG_CALL, MSG_SEND, MSG_BOX */
} msg_job;

enum { MSG_CALL, MSG_SEND, MSG_BOX };

static void msg_answer(m0_deferred *d, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void msg_answer(m0_deferred *d, int status, const char *fmt, ...) {
  char body[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(body, sizeof body, fmt, ap);
  va_end(ap);
  m0_deferred_respond(d, status, "application/json", body, n > 0 && (size_t)n < sizeof body ? (size_t)n : 0);
}

static const char *msg_errno(int e) {
  switch (e) {
  case ENOENT: return "ENOENT";
  case EHOSTDOWN: return "EHOSTDOWN";
  case EAGAIN: return "EAGAIN";
  case ETIMEDOUT: return "ETIMEDOUT";
  case ENODATA: return "ENODATA";
  case EMSGSIZE: return "EMSGSIZE";
  default: return "other";
  }
}

/* /msg/box: a mailbox of this thread's own, receiving (and watching). */
static void msg_box(msg_job *j) {
  m0_mailbox *mb = m0_mailbox_open(NULL, j->to);
  if (!mb || (j->watch[0] && m0_monitor(NULL, j->watch, j->to) != 0)) {
    msg_answer(j->d, 502, "{\"errno\":\"%s\"}", msg_errno(errno));
    m0_mailbox_close(mb);
    return;
  }
  fprintf(stderr, "host_check: mailbox %s open\n", j->to);
  if (j->watch[0]) fprintf(stderr, "host_check: %s watches %s\n", j->to, j->watch);
  char *body = malloc(65536);
  size_t at = body ? (size_t)snprintf(body, 65536, "{\"got\":[") : 0;
  m0_message m;
  for (long k = 0; body && k < j->n && m0_mailbox_recv(mb, (unsigned)j->ms, &m) == 0; k++) {
    bool call = m0_mailbox_reply(mb, &m, m.type, m.data.p, m.data.n) == 0;
    bool json = m.data.n && m.data.p[0] == '{';
    int n = snprintf(body + at, 65536 - at, "%s{\"type\":%u,\"call\":%s,\"data\":%s%.*s%s}", k ? "," : "",
                     (unsigned)m.type, call ? "true" : "false", json ? "" : "\"", (int)(m.data.n < 1000 ? m.data.n : 1000),
                     m.data.p, json ? "" : "\"");
    if (n > 0 && at + (size_t)n < 65000) at += (size_t)n;
    m0_message_free(&m);
  }
  m0_mailbox_close(mb);
  if (body) {
    at += (size_t)snprintf(body + at, 65536 - at, "]}");
    m0_deferred_respond(j->d, 200, "application/json", body, at);
  } else msg_answer(j->d, 500, "{\"error\":\"no memory\"}");
  free(body);
}

static void *msg_thread(void *arg) {
  msg_job *j = arg;
  if (j->what == MSG_BOX) {
    msg_box(j);
  } else if (j->what == MSG_CALL) {
    m0_message a;
    if (m0_call(NULL, j->to, (uint32_t)j->type, j->data, strlen(j->data), 2000, &a) != 0) {
      msg_answer(j->d, 502, "{\"errno\":\"%s\"}", msg_errno(errno));
    } else {
      bool json = a.data.n && (a.data.p[0] == '{' || a.data.p[0] == '[');
      msg_answer(j->d, 200, "{\"type\":%u,\"%s\":%s%.*s%s}", (unsigned)a.type, json ? "answer" : "answer_text",
                 json ? "" : "\"", (int)(a.data.n < 900 ? a.data.n : 900), a.data.p, json ? "" : "\"");
      m0_message_free(&a);
    }
  } else {
    long k = 0;
    int why = 0;
    for (; k < j->n; k++)
      if (m0_send(NULL, j->to, ECHO_MSG_COUNT, NULL, 0) != 0) {
        why = errno;
        break;
      }
    if (why) msg_answer(j->d, 200, "{\"sent\":%ld,\"errno\":\"%s\"}", k, msg_errno(why));
    else msg_answer(j->d, 200, "{\"sent\":%ld}", k);
  }
  free(j);
  return NULL;
}

static void view_msg(void *state, const m0_request *req, m0_response *res) {
  msg_job *j = calloc(1, sizeof *j);
  m0_str to = {0}, data = {0};
  if (!j) {
    m0_respondf(res, 500, "application/json", "{\"error\":\"no memory\"}");
    return;
  }
  j->what = req->path.p[5] == 'c' ? MSG_CALL : req->path.p[5] == 's' ? MSG_SEND : MSG_BOX;
  j->type = ECHO_MSG_ECHO;
  j->n = 1;
  j->ms = 5000;
  m0_str watch = {0};
  if ((m0_request_query(req, "watch", &watch) && watch.n >= sizeof j->watch) ||
      (m0_request_query(req, "ms", &(m0_str){0}) && !m0_request_query_int(req, "ms", 0, 60000, &j->ms)) ||
      !m0_request_query(req, j->what == MSG_BOX ? "name" : "to", &to) || to.n >= sizeof j->to ||
      (m0_request_query(req, "data", &data) && data.n >= sizeof j->data) ||
      (m0_request_query(req, "type", &(m0_str){0}) && !m0_request_query_int(req, "type", 0, 1000000, &j->type)) ||
      (m0_request_query(req, "n", &(m0_str){0}) && !m0_request_query_int(req, "n", 0, 100000, &j->n))) {
    free(j);
    m0_respondf(res, 400, "application/json", "{\"error\":\"want to=ACTOR, data (<256 bytes), type, n\"}");
    return;
  }
  memcpy(j->to, to.p, to.n);
  if (watch.n) memcpy(j->watch, watch.p, watch.n);
  if (data.n) memcpy(j->data, data.p, data.n);
  pthread_t t;
  pthread_attr_t at;
  if (!(j->d = m0_defer(res, (unsigned)j->ms + 10000))) {
    free(j);
    m0_respondf(res, 500, "application/json", "{\"error\":\"cannot defer\"}");
    return;
  }
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&t, &at, msg_thread, j) != 0) {
    msg_answer(j->d, 503, "{\"error\":\"no thread\"}");
    free(j);
  }
  pthread_attr_destroy(&at);
}

/* Actor `relay`: asks `echo` (m0_ask, waiting for its reply) and answers
 * {"relay":PID,"echo":<echo's answer>}, with echo's status. */
static void relay_receive(void *state, const m0_request *req, m0_reply *rep) {
  m0_answer a;
  if (m0_ask("echo", req, 1000, &a) != 0) {
    static const char why[] = "{\"error\":\"echo did not answer\"}";
    m0_reply_send(rep, 502, "application/json", why, sizeof why - 1);
    return;
  }
  char *body = malloc(a.body.n + 64);
  if (body) {
    int n = snprintf(body, a.body.n + 64, "{\"relay\":%d,\"echo\":%.*s}", (int)getpid(), (int)a.body.n, a.body.p);
    m0_reply_send(rep, a.status, "application/json", body, (size_t)n);
  }
  free(body);
  m0_answer_free(&a);
}

static const m0_actor_kind relay_kind = {"relay", NULL, relay_receive, NULL};
static const m0_actor_kind hc_actors[] = {echo_kind, silent_kind, relay_kind};

/* /loop/echo: echo's work, done by a view on the loop (instance -1). */
static void view_loop_echo(void *state, const m0_request *req, m0_response *res) {
  char *text = echo_body(-1, req, -1);
  if (text) m0_respond(res, 200, "application/json", text, strlen(text), M0_BODY_COPY);
  else m0_respond(res, 500, NULL, NULL, 0, M0_BODY_COPY);
  free(text);
}

static const m0_route hc_routes[] = {
    {"GET", "/events", view_events, M0_ON_LOOP},
    {"GET", "/events-from-func", view_events, 0},
    {"GET", "/ws", view_ws, M0_ON_LOOP},
    {"GET", "/health", view_health, M0_ON_LOOP},
    {"GET", "/pid", view_pid, 0},
    {"GET", "/instance", view_instance, 0},
    {"GET", "/slow", view_slow, 0},
    {"GET", "/actor/echo", NULL, 0, "echo"},
    {"POST", "/actor/echo", NULL, 0, "echo"},
    {"GET", "/actor/silent", NULL, 0, "silent"},
    {"GET", "/actor/stream", NULL, 0, "echo"},
    {"GET", "/actor/relay", NULL, 0, "relay"},
    {"GET", "/loop/echo", view_loop_echo, M0_ON_LOOP},
    {"POST", "/loop/echo", view_loop_echo, M0_ON_LOOP},
    {"GET", "/deferred", view_deferred, M0_ON_LOOP},
    {"GET", "/msg/call", view_msg, M0_ON_LOOP},
    {"GET", "/msg/send", view_msg, M0_ON_LOOP},
    {"GET", "/msg/box", view_msg, M0_ON_LOOP},
    {"GET", "/graph", view_graph, M0_ON_LOOP},
};

/* ---- the producer: beats ---- */

typedef struct beat {
  long n, period_ms, step_ms;
  bool fail_step, says;
} beat;

static void *beat_make(const m0_ctx *ctx, char *err, size_t errlen) {
  if (env_is("M0_HOSTCHECK_PRODUCER_FAILS", "1")) {
    snprintf(err, errlen, "host_check: the producer's make refused (M0_HOSTCHECK_PRODUCER_FAILS=1)");
    return NULL;
  }
  if (env_is("M0_HOSTCHECK_PRODUCER_FAILS", "late")) {
    late();
    snprintf(err, errlen, "host_check: the producer's make refused late (M0_HOSTCHECK_PRODUCER_FAILS=late)");
    return NULL;
  }
  beat *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  b->period_ms = env_long("M0_HOSTCHECK_PERIOD_MS", 100);
  b->step_ms = env_long("M0_HOSTCHECK_STEP_MS", 0);
  b->fail_step = env_is("M0_HOSTCHECK_PRODUCER_FAILS", "step");
  b->says = env_is("M0_HOSTCHECK_STEP_SAYS", "1");
  return b;
}

static int64_t beat_step(void *state, m0_publisher *pub) {
  beat *b = state;
  b->n++;
  if (b->says) fprintf(stderr, "host_check: step %ld begins\n", b->n);
  if (b->fail_step && b->n == 3) return -1;
  if (b->step_ms > 0) spin_ms(b->step_ms);
  char frame[128];
  int len = snprintf(frame, sizeof frame, "event: beat\ndata: {\"beat\":%ld,\"pid\":%d}", b->n, (int)getpid());
  m0_publish(pub, "beats", m0_next_id(pub), frame, (size_t)len);
  return b->period_ms * 1000000;
}

static void beat_free(void *state) { free(state); }

static const m0_producer hc_producer = {.make = beat_make, .step = beat_step, .free = beat_free};

/* The same routes, /slow flagged as M0_HOSTCHECK_NEEDS_POOL says. */
static m0_route hc_routes_pool[sizeof hc_routes / sizeof hc_routes[0]];

static const m0_route *hc_routes_chosen(void) {
  const char *v = getenv("M0_HOSTCHECK_NEEDS_POOL");
  if (!v || (strcmp(v, "1") && strcmp(v, "loop"))) return hc_routes;
  memcpy(hc_routes_pool, hc_routes, sizeof hc_routes);
  for (size_t i = 0; i < sizeof hc_routes / sizeof hc_routes[0]; i++)
    if (!strcmp(hc_routes_pool[i].pattern, "/slow"))
      hc_routes_pool[i].flags = M0_NEEDS_POOL | (strcmp(v, "loop") ? 0 : M0_ON_LOOP);
  return hc_routes_pool;
}

int main(int argc, char **argv) {
  m0_app app = {
      .name = "host_check",
      .make = hc_make,
      .free = hc_free,
      .routes = hc_routes_chosen(),
      .nroutes = sizeof hc_routes / sizeof hc_routes[0],
      .actors = hc_actors,
      .nactors = sizeof hc_actors / sizeof hc_actors[0],
      .max_workers = (int)env_long("M0_HOSTCHECK_MAX_WORKERS", 0),
  };
  return m0_serve(&app, &hc_producer, argc, argv);
}
