/* The reference actor `echo`, shared by host_check (placed on a thread, in a
 * spawned process, or anywhere a topology file says) and by echo_actor (the
 * same kind as an external program): every request is answered 200 with
 *   {"actor":"echo","pid":P,"instance":I,"method":M,"path":PATH,"body":B}
 * A request with `x-publish: CHANNEL` first publishes "data: BODY" on that
 * channel from the instance (wherever it runs: the host numbers the frame),
 * and the answer says "published":true or false. `x-sleep-ms: N` (at most
 * 10000) waits N ms before answering: a request held in flight.
 * `x-exit: REASON` ends the instance with that reason (m0_actor_exit),
 * the request unanswered (502; after x-sleep-ms's wait when it has one);
 * its restart budget or supervisor decides.
 * M0_ECHO_STOP_MS=N makes instance 0 say when it is made and take N ms to stop (echo_free).
 * M0_ECHO_REMAKE_FAILS=1 refuses every make after the process's first (a
 * thread instance's make at its restart).
 * Messages (m0_send, m0_call; echo_message): ECHO_MSG_ECHO is answered
 * ECHO_MSG_ECHOED with {"actor":"echo","pid":P,"instance":I,"data":D};
 * each ECHO_MSG_COUNT (a send) is counted, and ECHO_MSG_COUNTED answers
 * {"instance":I,"counted":N}; ECHO_MSG_NONE gets no answer. ECHO_MSG_FORWARD
 * with data "NAME:TEXT" makes the instance call NAME itself (m0_call, from
 * wherever it runs) with ECHO_MSG_ECHO and TEXT, and answer
 * {"instance":I,"via":NAME,"type":T,"answer":"..."} or {...,"errno":E};
 * ECHO_MSG_FORWARD_SEND sends NAME an ECHO_MSG_COUNT (m0_send) instead.
 * A request for the path /actor/stream is answered in pieces
 * (m0_reply_writer) by a thread of the instance: ?n=N pieces (default 4,
 * at most 1000000) of ?size=S bytes (default 16, 1..262144), piece i all
 * the letter 'a' + i % 26 but its last byte '\n'; with ?sse=1 as
 * text/event-stream, event i "data: i\n\n"; ?ms=M waits M ms (at most
 * 1000) before each piece. Its head carries X-Echo-Pid. The thread waits
 * for room when a write says EAGAIN, and says on stderr
 * "echo: stream of instance I: the client left after K pieces" when one
 * says EPIPE (it then ends the writer).
 * And the kind `silent`, which never replies (its routes answer 504). */
#ifndef M0_APPS_ECHO_H
#define M0_APPS_ECHO_H

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <m0/m0.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct echo_state {
  int instance;
  m0_publisher *pub;
  long counted; /* ECHO_MSG_COUNT messages taken */
} echo_state;

enum {
  ECHO_MSG_ECHO = 1,
  ECHO_MSG_ECHOED = 2,
  ECHO_MSG_COUNT = 3,
  ECHO_MSG_COUNTED = 4,
  ECHO_MSG_NONE = 5,
  ECHO_MSG_FORWARD = 6,
  ECHO_MSG_FORWARD_SEND = 7,
};

static void *echo_make(const m0_actor_ctx *ctx, char *err, size_t errlen) {
  static atomic_int makes; /* this process's: M0_ECHO_REMAKE_FAILS refuses each make after the first */
  if (atomic_fetch_add(&makes, 1) > 0 && getenv("M0_ECHO_REMAKE_FAILS")) {
    snprintf(err, errlen, "echo: a make after the first refused (M0_ECHO_REMAKE_FAILS)");
    return NULL;
  }
  echo_state *s = calloc(1, sizeof *s);
  if (!s) snprintf(err, errlen, "echo: out of memory");
  else {
    s->instance = ctx->instance;
    s->pub = ctx->publisher;
    const char *ms = getenv("M0_ECHO_STOP_MS"); /* the stop a test watches: say its instance is made */
    if (ms && s->instance == 0) fprintf(stderr, "echo: instance 0 (pid %d) made\n", (int)getpid());
  }
  return s;
}

/* The answer's body (malloc'd, NUL-terminated), or NULL: the same work
 * wherever it runs (host_check's /loop/echo does it on the loop, for the
 * benchmark's comparison). */
static char *echo_body(int instance, const m0_request *req, int published) {
  json_t *o = json_object();
  json_object_set_new(o, "actor", json_string("echo"));
  json_object_set_new(o, "pid", json_integer(getpid()));
  json_object_set_new(o, "instance", json_integer(instance));
  json_object_set_new(o, "method", json_stringn(req->method.p, req->method.n));
  json_object_set_new(o, "path", json_stringn(req->path.p, req->path.n));
  json_t *b = json_stringn(req->body.n ? req->body.p : "", req->body.n); /* NULL when the body is not UTF-8 */
  json_object_set_new(o, "body", b ? b : json_string("\xef\xbf\xbd"));
  if (published >= 0) json_object_set_new(o, "published", json_boolean(published));
  char *text = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  return text;
}

typedef struct echo_stream {
  m0_writer *w;
  int instance;
  long n, size, ms;
  bool sse;
} echo_stream;

/* One piece, waiting for room while the host says EAGAIN (at most 60 s
 * in all): 0, or -1 (errno). */
static int echo_stream_put(m0_writer *w, const char *p, size_t len) {
  for (int waits = 0;; waits++) {
    if (m0_writer_write(w, p, len) == 0) return 0;
    if (errno != EAGAIN || waits == 6) return -1;
    if (m0_writer_wait(w, 10000) != 0 && errno != ETIMEDOUT) return -1;
  }
}

static void *echo_stream_run(void *arg) {
  echo_stream *st = arg;
  char *piece = malloc((size_t)st->size + 32);
  long i = 0;
  for (; piece && i < st->n; i++) {
    if (st->ms) usleep((useconds_t)st->ms * 1000);
    size_t len = (size_t)st->size;
    if (st->sse) {
      len = (size_t)snprintf(piece, 32, "data: %ld\n\n", i);
    } else {
      memset(piece, 'a' + (int)(i % 26), len);
      piece[len - 1] = '\n';
    }
    if (echo_stream_put(st->w, piece, len) != 0) {
      if (errno == EPIPE)
        fprintf(stderr, "echo: stream of instance %d: the client left after %ld pieces\n", st->instance, i);
      break;
    }
  }
  if (piece && i == st->n) m0_writer_end(st->w);
  else m0_writer_abort(st->w);
  free(piece);
  free(st);
  return NULL;
}

/* GET /actor/stream: the answer in pieces, written by a thread of its own. */
static void echo_stream_begin(echo_state *s, const m0_request *req, m0_reply *rep) {
  echo_stream *st = calloc(1, sizeof *st);
  char pid[24];
  snprintf(pid, sizeof pid, "%d", (int)getpid());
  if (!st) return;
  st->instance = s->instance;
  st->n = 4, st->size = 16;
  (void)m0_request_query_int(req, "n", 0, 1000000, &st->n);
  (void)m0_request_query_int(req, "size", 1, 262144, &st->size);
  (void)m0_request_query_int(req, "ms", 0, 1000, &st->ms);
  long sse = 0;
  st->sse = m0_request_query_int(req, "sse", 0, 1, &sse) && sse;
  m0_reply_header(rep, "X-Echo-Pid", pid);
  pthread_t t;
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  st->w = m0_reply_writer(rep, 200, st->sse ? "text/event-stream" : "text/plain");
  if (!st->w || pthread_create(&t, &at, echo_stream_run, st) != 0) {
    if (st->w) m0_writer_abort(st->w);
    else m0_reply_send(rep, 500, NULL, NULL, 0);
    free(st);
  }
  pthread_attr_destroy(&at);
}

static void echo_receive(void *state, const m0_request *req, m0_reply *rep) {
  echo_state *s = state;
  if (req->path.n == 13 && !memcmp(req->path.p, "/actor/stream", 13)) {
    echo_stream_begin(s, req, rep);
    return;
  }
  m0_str sl = m0_request_header(req, "x-sleep-ms");
  if (sl.n && sl.n < 6) {
    char ms[8];
    snprintf(ms, sizeof ms, "%.*s", (int)sl.n, sl.p);
    long v = atol(ms);
    if (v > 0 && v <= 10000) usleep((useconds_t)v * 1000);
  }
  m0_str ex = m0_request_header(req, "x-exit");
  if (ex.n) { /* the instance ends (m0_actor_exit), this request unanswered: its 502 comes as it leaves */
    char why[160];
    snprintf(why, sizeof why, "%.*s", (int)ex.n, ex.p);
    m0_actor_exit(why);
    return;
  }
  m0_str ch = m0_request_header(req, "x-publish");
  int published = -1;
  if (ch.n) {
    char chan[65], frame[4096];
    int n = snprintf(frame, sizeof frame, "data: %.*s", (int)req->body.n, req->body.n ? req->body.p : "");
    snprintf(chan, sizeof chan, "%.*s", (int)ch.n, ch.p);
    published = s->pub && n > 0 && (size_t)n < sizeof frame && ch.n < sizeof chan &&
                m0_publish(s->pub, chan, m0_next_id(s->pub), frame, (size_t)n);
  }
  char *text = echo_body(s->instance, req, published);
  if (text) m0_reply_send(rep, 200, "application/json", text, strlen(text));
  else m0_reply_send(rep, 500, NULL, NULL, 0);
  free(text);
}

/* M0_ECHO_STOP_MS=N: instance 0 takes N ms (at most 10000) to stop, said on
 * stderr as it begins: an instance the drain must wait for. */
static void echo_free(void *state) {
  echo_state *s = state;
  const char *ms = getenv("M0_ECHO_STOP_MS");
  long v = ms ? atol(ms) : 0;
  if (s && s->instance == 0 && v > 0 && v <= 10000) {
    fprintf(stderr, "echo: instance 0 (pid %d) stopping, %ld ms\n", (int)getpid(), v);
    usleep((useconds_t)v * 1000);
    fprintf(stderr, "echo: instance 0 (pid %d) stopped\n", (int)getpid());
  }
  free(state);
}

/* ECHO_MSG_FORWARD(_SEND): a call (a send) of the instance's own, to the
 * actor named before the ':' in data. */
static void echo_forward(echo_state *s, uint32_t type, m0_str data, m0_reply *rep) {
  char name[64];
  const char *colon = data.n ? memchr(data.p, ':', data.n) : NULL;
  size_t n = colon ? (size_t)(colon - data.p) : 0;
  if (!colon || n == 0 || n >= sizeof name) return;
  memcpy(name, data.p, n);
  name[n] = 0;
  m0_str text = {colon + 1, data.n - n - 1};
  json_t *o = json_object();
  json_object_set_new(o, "instance", json_integer(s->instance));
  json_object_set_new(o, "via", json_string(name));
  m0_message a;
  if (type == ECHO_MSG_FORWARD_SEND) {
    if (m0_send(NULL, name, ECHO_MSG_COUNT, NULL, 0) != 0) json_object_set_new(o, "errno", json_integer(errno));
  } else if (m0_call(NULL, name, ECHO_MSG_ECHO, text.p, text.n, 2000, &a) != 0) {
    json_object_set_new(o, "errno", json_integer(errno));
  } else {
    json_object_set_new(o, "type", json_integer(a.type));
    json_t *t = json_stringn(a.data.n ? a.data.p : "", a.data.n);
    json_object_set_new(o, "answer", t ? t : json_string("?"));
    m0_message_free(&a);
  }
  char *out = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  if (out && rep) m0_reply_message(rep, ECHO_MSG_ECHOED, out, strlen(out));
  free(out);
}

static void echo_message(void *state, uint32_t type, m0_str data, m0_reply *rep) {
  echo_state *s = state;
  if (type == ECHO_MSG_FORWARD || type == ECHO_MSG_FORWARD_SEND) {
    echo_forward(s, type, data, rep);
    return;
  }
  if (type == ECHO_MSG_COUNT) s->counted++;
  if (!rep || (type != ECHO_MSG_ECHO && type != ECHO_MSG_COUNTED)) return; /* a send, or ECHO_MSG_NONE */
  json_t *o = json_object();
  json_object_set_new(o, "instance", json_integer(s->instance));
  if (type == ECHO_MSG_COUNTED) json_object_set_new(o, "counted", json_integer(s->counted));
  else {
    json_object_set_new(o, "actor", json_string("echo"));
    json_object_set_new(o, "pid", json_integer(getpid()));
    json_t *d = json_stringn(data.n ? data.p : "", data.n);
    json_object_set_new(o, "data", d ? d : json_string("\xef\xbf\xbd"));
  }
  char *text = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  if (text) m0_reply_message(rep, type == ECHO_MSG_ECHO ? ECHO_MSG_ECHOED : ECHO_MSG_COUNTED, text, strlen(text));
  free(text);
}

static void silent_receive(void *state, const m0_request *req, m0_reply *rep) {}

static const m0_actor_kind echo_kind = {"echo", echo_make, echo_receive, echo_free, echo_message};
static const m0_actor_kind silent_kind = {"silent", NULL, silent_receive, NULL};

#endif
