/* embed — a larger program that starts the host inside its own process. It
 * keeps main and its own SIGINT/SIGTERM handler, runs an nng actor of its own
 * (a "ticker" thread with a pull mailbox that main feeds), and that actor
 * publishes into the host's streams. SIGINT or SIGTERM: the program's handler
 * runs (it says so), then the program stops the host within its bound.
 *
 * Its main is an actor too: it opens the mailbox "main", monitors the
 * program's three actors into it and, once a second, calls each (m0_call)
 * and sends each a message (m0_send). The actors are echo (apps/echo_actor/
 * echo.h) under three names, placed as a topology file says
 * (apps/embed/topology.json: "local" on a thread, "worker" a process the host
 * spawns, "remote" any program that dials its URL, e.g. echo_actor). Without
 * the file local and worker serve on threads and remote is not there.
 *   GET /events        on the loop: a stream of the ticker's "tick" events
 *   GET /health        on the loop
 *   GET /calls         main's last call to each actor and its sends
 *   GET /notes         the monitor notes main received, newest last (32 kept)
 *   POST /send/{actor} main sends actor one message now, then calls it for
 *                      how many it counted
 * The last three are views on the loop that hand their answer (m0_defer) to
 * main in a message: main's state is touched by main's thread alone.
 * Flags are the host's (--port, --threads, --topology, ...).
 *
 * A process placed `process` is this program run again: m0_host_start does
 * not return in it (it runs the instance and exits), so main does nothing
 * before that call that a second copy of the program must not do. */
#include <errno.h>
#include <jansson.h>
#include <m0/m0.h>
#include <nng/nng.h>
#include <nng/protocol/pipeline0/pull.h>
#include <nng/protocol/pipeline0/push.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../echo_actor/echo.h"

static volatile sig_atomic_t embed_stop;
static void on_signal(int sig) {
  static const char msg[] = "embed: the program's own signal handler ran\n";
  if (write(2, msg, sizeof msg - 1) < 0) { /* nothing to do */ }
  embed_stop = sig;
}

/* ---- the routes: each of the last three asks main (its mailbox) --------- */

/* What main's mailbox takes from the views, beside the monitors' notes
 * (M0_MSG_UP, _DOWN, _EXITED). */
enum { EMBED_SHOW_CALLS = 1, EMBED_SHOW_NOTES = 2, EMBED_SEND_NOW = 3 };

/* A view's request to main: where the answer goes, and for EMBED_SEND_NOW
 * the actor. Its bytes travel in the message (one process: the pointer
 * stays good). */
typedef struct embed_ask {
  m0_deferred *d;
  char actor[49];
} embed_ask;

static void embed_ask_main(uint32_t type, const m0_request *req, m0_response *res) {
  embed_ask a = {.d = m0_defer(res, 5000)};
  if (!a.d) return;
  if (req->nparams == 1) snprintf(a.actor, sizeof a.actor, "%.*s", (int)req->params[0].n, req->params[0].p);
  /* The loop never blocks: a send to a mailbox is queued or refused at once. */
  if (m0_send(NULL, "main", type, &a, sizeof a) != 0) {
    static const char busy[] = "{\"error\":\"main's mailbox refused the request\"}";
    m0_deferred_respond(a.d, 503, "application/json", busy, sizeof busy - 1);
  }
}

static void view_calls(void *state, const m0_request *req, m0_response *res) {
  embed_ask_main(EMBED_SHOW_CALLS, req, res);
}
static void view_notes(void *state, const m0_request *req, m0_response *res) {
  embed_ask_main(EMBED_SHOW_NOTES, req, res);
}
static void view_send(void *state, const m0_request *req, m0_response *res) {
  embed_ask_main(EMBED_SEND_NOW, req, res);
}
static void view_events(void *state, const m0_request *req, m0_response *res) { m0_respond_stream(res, "ticks"); }
static void view_health(void *state, const m0_request *req, m0_response *res) {
  m0_respond(res, 200, "application/json", "{\"status\":\"ok\"}", 15, M0_BODY_STATIC);
}
static const m0_route routes[] = {{"GET", "/events", view_events, M0_ON_LOOP},
                                  {"GET", "/health", view_health, M0_ON_LOOP},
                                  {"GET", "/calls", view_calls, M0_ON_LOOP},
                                  {"GET", "/notes", view_notes, M0_ON_LOOP},
                                  {"POST", "/send/{actor}", view_send, M0_ON_LOOP}};
/* echo's functions under two names: the topology file places each. */
static const m0_actor_kind kinds[] = {{"local", echo_make, echo_receive, echo_free, echo_message},
                                      {"worker", echo_make, echo_receive, echo_free, echo_message}};
static const m0_app app = {.name = "embed", .routes = routes, .nroutes = 5, .actors = kinds, .nactors = 2};

/* ---- main as an actor: what it keeps, and what it does ----------------- */

#define EMBED_PEERS 3
#define EMBED_NOTES_KEPT 32
static const char *const embed_peer_names[EMBED_PEERS] = {"local", "worker", "remote"};

typedef struct embed_peer {
  json_t *last; /* the last call: {"answer":..., "errno":..., "us":..., "round":...} */
  long sent, refused;
  const char *send_errno; /* the last refused send's, or NULL */
} embed_peer;

typedef struct embed_main {
  m0_host *host;
  m0_mailbox *box;
  embed_peer peers[EMBED_PEERS];
  json_t *notes; /* the newest EMBED_NOTES_KEPT, oldest first */
  long notes_total, rounds;
} embed_main;

static int64_t embed_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static const char *embed_errno(int e) {
  switch (e) {
  case ENOENT: return "ENOENT";
  case EHOSTDOWN: return "EHOSTDOWN";
  case EAGAIN: return "EAGAIN";
  case ETIMEDOUT: return "ETIMEDOUT";
  case ENODATA: return "ENODATA";
  default: return strerror(e);
  }
}

/* One m0_call, as a JSON record: the answer (echo's JSON) or the errno, and
 * the round trip. */
static json_t *embed_call(embed_main *m, const char *actor, uint32_t type, const char *data) {
  m0_message out;
  int64_t t0 = embed_now_us();
  int rc = m0_call(m->host, actor, type, data, strlen(data), 500, &out);
  int e = errno;
  json_t *rec = json_pack("{s:I}", "us", (json_int_t)(embed_now_us() - t0));
  if (rc == 0) {
    json_t *answer = json_loadb(out.data.p, out.data.n, 0, NULL);
    json_object_set_new(rec, "answer", answer ? answer : json_stringn(out.data.p, out.data.n));
    json_object_set_new(rec, "errno", json_null());
    m0_message_free(&out);
  } else {
    json_object_set_new(rec, "answer", json_null());
    json_object_set_new(rec, "errno", json_string(embed_errno(e)));
  }
  return rec;
}

/* One m0_send of an ECHO_MSG_COUNT: counted as sent or refused. */
static int embed_send(embed_main *m, int i) {
  embed_peer *p = &m->peers[i];
  if (m0_send(m->host, embed_peer_names[i], ECHO_MSG_COUNT, "", 0) == 0) {
    p->sent++;
    return 0;
  }
  p->refused++;
  p->send_errno = embed_errno(errno);
  return -1;
}

/* Once a second: call each actor, then send it a message. */
static void embed_round(embed_main *m) {
  char data[32];
  snprintf(data, sizeof data, "round %ld", ++m->rounds);
  for (int i = 0; i < EMBED_PEERS; i++) {
    json_t *rec = embed_call(m, embed_peer_names[i], ECHO_MSG_ECHO, data);
    json_object_set_new(rec, "round", json_integer(m->rounds));
    json_decref(m->peers[i].last);
    m->peers[i].last = rec;
    embed_send(m, i);
  }
}

static void embed_answer(m0_deferred *d, int status, json_t *body) {
  char *text = json_dumps(body, JSON_COMPACT);
  json_decref(body);
  if (text) m0_deferred_respond(d, status, "application/json", text, strlen(text));
  else m0_deferred_respond(d, 500, NULL, NULL, 0);
  free(text);
}

static json_t *embed_calls_json(const embed_main *m) {
  json_t *o = json_pack("{s:I}", "rounds", (json_int_t)m->rounds);
  for (int i = 0; i < EMBED_PEERS; i++) {
    const embed_peer *p = &m->peers[i];
    json_object_set_new(o, embed_peer_names[i],
                        json_pack("{s:O?,s:I,s:I,s:s?}", "call", p->last, "sent", (json_int_t)p->sent, "refused",
                                  (json_int_t)p->refused, "send_errno", p->send_errno));
  }
  return o;
}

/* POST /send/{actor}: one send now, then a call for echo's count. */
static json_t *embed_send_now(embed_main *m, const char *actor) {
  for (int i = 0; i < EMBED_PEERS; i++) {
    if (strcmp(actor, embed_peer_names[i]) != 0) continue;
    int rc = embed_send(m, i);
    return json_pack("{s:s,s:b,s:s?,s:o}", "actor", actor, "sent", rc == 0, "errno",
                     rc == 0 ? NULL : m->peers[i].send_errno, "counted", embed_call(m, actor, ECHO_MSG_COUNTED, ""));
  }
  return NULL;
}

/* A monitor's note: its JSON, with what kind of note it is and main's count. */
static void embed_note(embed_main *m, const m0_message *msg) {
  json_t *note = json_loadb(msg->data.p, msg->data.n, 0, NULL);
  if (!json_is_object(note)) {
    json_decref(note);
    note = json_pack("{s:s%}", "raw", msg->data.p, msg->data.n);
  }
  json_object_set_new(note, "n", json_integer(++m->notes_total));
  json_array_append_new(m->notes, note);
  if (json_array_size(m->notes) > EMBED_NOTES_KEPT) json_array_remove(m->notes, 0);
}

static void embed_take(embed_main *m, const m0_message *msg) {
  if (msg->type == M0_MSG_UP || msg->type == M0_MSG_DOWN || msg->type == M0_MSG_EXITED) {
    embed_note(m, msg);
    return;
  }
  embed_ask a;
  if (msg->data.n != sizeof a) return; /* not a view's: nobody waits */
  memcpy(&a, msg->data.p, sizeof a);
  if (msg->type == EMBED_SHOW_CALLS) embed_answer(a.d, 200, embed_calls_json(m));
  else if (msg->type == EMBED_SHOW_NOTES)
    embed_answer(a.d, 200, json_pack("{s:I,s:O}", "total", (json_int_t)m->notes_total, "notes", m->notes));
  else {
    json_t *r = embed_send_now(m, a.actor);
    if (r) embed_answer(a.d, 200, r);
    else embed_answer(a.d, 404, json_pack("{s:s}", "error", "no such actor (local, worker, remote)"));
  }
}

/* Opens main's mailbox and monitors every actor into it. An actor the
 * topology does not declare (remote, without the file) is said and left. */
static int embed_watch(embed_main *m) {
  m->notes = json_array();
  if (!(m->box = m0_mailbox_open(m->host, "main"))) {
    fprintf(stderr, "embed: cannot open main's mailbox: %s\n", strerror(errno));
    return -1;
  }
  for (int i = 0; i < EMBED_PEERS; i++)
    if (m0_monitor(m->host, embed_peer_names[i], "main") != 0)
      fprintf(stderr, "embed: not monitoring %s: %s\n", embed_peer_names[i], embed_errno(errno));
  return 0;
}

static void embed_unwatch(embed_main *m) {
  m0_mailbox_close(m->box);
  for (int i = 0; i < EMBED_PEERS; i++) json_decref(m->peers[i].last);
  json_decref(m->notes);
}

/* ---- the ticker: the program's own nng actor --------------------------- */

/* nng 1.10 renamed nng_close to nng_socket_close (nng_close goes in nng 2);
 * nng 1.5 has only nng_close. */
#if NNG_MAJOR_VERSION > 1 || (NNG_MAJOR_VERSION == 1 && NNG_MINOR_VERSION >= 10)
#define embed_close nng_socket_close
#else
#define embed_close nng_close
#endif

/* The program's own actor: takes "tick N" messages from its mailbox and
 * publishes each into the host's streams. */
typedef struct ticker {
  nng_socket mailbox;
  m0_publisher *pub;
  long published, refused;
} ticker;

static void *ticker_main(void *arg) {
  ticker *t = arg;
  for (;;) {
    char *buf;
    size_t n;
    if (nng_recv(t->mailbox, &buf, &n, NNG_FLAG_ALLOC) != 0) break; /* closed: done */
    bool stop = n == 4 && memcmp(buf, "stop", 4) == 0;
    if (!stop) {
      char frame[128];
      int len = snprintf(frame, sizeof frame, "event: tick\ndata: %.*s", (int)n, buf);
      if (m0_publish(t->pub, "ticks", m0_next_id(t->pub), frame, (size_t)len)) t->published++;
      else t->refused++;
    }
    nng_free(buf, n);
    if (stop) break;
  }
  return NULL;
}

/* main's loop until a signal: a tick to the ticker every 100 ms, a round
 * of calls and sends every second, and between them whatever its mailbox
 * brings (each wait bounded by the next of those). */
static void embed_serve(embed_main *m, nng_socket feed) {
  int64_t next_tick = embed_now_us(), next_round = next_tick;
  for (long k = 1; !embed_stop;) {
    int64_t now = embed_now_us();
    if (now >= next_tick) {
      char msg[32];
      int n = snprintf(msg, sizeof msg, "%ld", k++);
      nng_send(feed, msg, (size_t)n, 0);
      next_tick += 100 * 1000;
    }
    if (now >= next_round) {
      embed_round(m);
      next_round = embed_now_us() + 1000 * 1000;
    }
    int64_t wait = (next_tick < next_round ? next_tick : next_round) - embed_now_us();
    m0_message msg;
    if (m0_mailbox_recv(m->box, wait > 0 ? (unsigned)(wait / 1000) + 1 : 0, &msg) == 0) {
      embed_take(m, &msg);
      m0_message_free(&msg);
    }
  }
}

int main(int argc, char **argv) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  int code;
  char err[1024];
  m0_host *host = m0_host_start(&app, NULL, argc, argv, &code, err, sizeof err);
  if (!host) {
    fprintf(stderr, "embed: the host refused: %s\n", err);
    return code;
  }
  fprintf(stderr, "embed: serving on http://127.0.0.1:%d (run dir %s)\n", m0_host_port(host), m0_host_run_dir(host));

  ticker t = {.pub = m0_host_publisher(host)};
  embed_main m = {.host = host};
  nng_socket feed;
  pthread_t th;
  if (embed_watch(&m) != 0 || nng_pull0_open(&t.mailbox) || nng_listen(t.mailbox, "inproc://embed/ticker", NULL, 0) ||
      nng_push0_open(&feed) || nng_dial(feed, "inproc://embed/ticker", NULL, 0) ||
      pthread_create(&th, NULL, ticker_main, &t)) {
    fprintf(stderr, "embed: cannot start the ticker actor\n");
    m0_host_stop(host);
    return 1;
  }
  embed_serve(&m, feed);
  nng_send(feed, "stop", 4, 0);
  pthread_join(th, NULL);
  embed_close(feed);
  embed_close(t.mailbox);
  /* Views that asked main after this get their 503 (no mailbox) or the host's 504. */
  embed_unwatch(&m);
  int rc = m0_host_stop(host);
  fprintf(stderr, "embed: ticker published %ld (%ld refused); host stopped with %d\n", t.published, t.refused, rc);
  return rc;
}
