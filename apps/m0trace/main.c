/* m0trace — watch a running host's actor messages live, or record them for
 * Perfetto.
 *
 *   m0trace [--run-dir DIR [--requests sampled|all|none]] [--actor NAME]... [--kind KIND]...
 *           [--chrome FILE] [--seconds N] URL
 *
 * Listens at URL (an nng address) for binary records (runtime/trace.h): from
 * a host started with --trace URL, or, with --run-dir DIR, from the running
 * host at DIR, whose tracing m0trace switches on (a TRACE control to each of
 * its loops, and to its coordinator when its mailbox is in DIR: the prefork
 * supervisor; again every second so a respawned worker follows) and off again
 * when it stops: nothing is restarted. Each record is printed as one JSON
 * line (time, dir, from, to, kind, seq, bytes, trace id, process, pid, tid);
 * --actor keeps records from or to that actor (loop.1, or a prefix of whole
 * parts: pool, pool.1, echo), --kind those of that kind (job; http: the
 * requests a loop served itself, no message), each repeatable; --requests
 * which of those a running host records (sampled: with a traceparent
 * whose sampled flag is set, the default; all; none); with --run-dir the
 * host itself keeps only those (and sends nothing else). With --chrome FILE it also writes Chrome trace-event JSON
 * when it stops (SIGINT, SIGTERM or --seconds): each process of the host a
 * process (supervisor, worker.i) with its own pid, each thread a track
 * named by the actors on it (loop.0, pool.0.1, an application actor's
 * instance), and a flow arrow from each send to its receive, so Perfetto
 * (ui.perfetto.dev) draws the message flow; an application instance
 * outside the host, which records nothing itself, gets a track of its own
 * (a process per actor, "echo (outside the host)") with its ends of the
 * host's messages to and from it. One m0trace per host at a time:
 * the last control wins, and one that stops switches tracing off.
 * Exit: 0; 2 usage; 1 cannot listen or write; 78 no running host at DIR, or
 * it refused the control (the host says why on its stderr).
 */
#include <jansson.h>
#include <nng/nng.h>
#include <nng/protocol/pipeline0/pull.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/envelope.h"
#include "runtime/kinds.h"
#include "runtime/admit.h"
#include "bus/publisher.h"
#include "base/ids.h"
#include "base/nng_compat.h"
#include "runtime/trace.h"
#include "transport/page.h"

static volatile sig_atomic_t trace_stop;
static void on_stop(int sig) { trace_stop = 1; }

static int usage(const char *why) {
  fprintf(stderr, "usage: m0trace [--run-dir DIR [--requests sampled|all|none]] [--actor NAME]... [--kind KIND]...\n"
                  "               [--chrome FILE] [--seconds N] URL\n");
  if (why) fprintf(stderr, "m0trace: %s\n", why);
  return 2;
}

/* What --actor and --kind keep (none given: everything). */
#define MAX_FILTER 16
typedef struct filter {
  const char *actors[MAX_FILTER], *kinds[MAX_FILTER];
  int nactors, nkinds;
} filter;

/* As the host's tracer keeps them (runtime/trace.h): a name, or a prefix of
 * whole parts. */
static bool name_keeps(const char *f, const char *name) {
  size_t n = strlen(f);
  return !strncmp(name, f, n) && (name[n] == 0 || name[n] == '.');
}

static bool filter_keeps(const filter *f, const char *from, const char *to, const char *kind) {
  bool a = !f->nactors, k = !f->nkinds;
  for (int i = 0; i < f->nactors && !a; i++) a = name_keeps(f->actors[i], from) || name_keeps(f->actors[i], to);
  for (int i = 0; i < f->nkinds && !k; i++) k = !strcmp(f->kinds[i], kind);
  return a && k;
}

/* The Chrome trace being made: its events; its processes (by pid, the
 * process's name: supervisor, worker.1, host) and threads (by "pid/tid",
 * the actors seen on that thread, in the order first seen: "loop.0",
 * "loop.0 external.0"); the actors that made a record on a thread of
 * their own; and the messages to and from application instances, kept to
 * give an instance outside the host (which records nothing: the host sees
 * only its own ends) a track of its own when the file is written. */
typedef struct chrome_trace {
  json_t *events, *procs, *threads, *recorders, *apps;
} chrome_trace;

static void track_note(chrome_trace *c, const m0__trace_rec *r, const char *who) {
  char pid[16], key[32], proc[32];
  snprintf(pid, sizeof pid, "%u", (unsigned)r->pid);
  snprintf(key, sizeof key, "%u/%u", (unsigned)r->pid, (unsigned)r->tid);
  if (!json_object_get(c->procs, pid)) {
    m0__trace_process_name(r->process, proc, sizeof proc);
    json_object_set_new(c->procs, pid, json_string(proc));
  }
  json_object_set_new(c->recorders, who, json_true());
  json_t *names = json_object_get(c->threads, key);
  if (!names) json_object_set_new(c->threads, key, names = json_array());
  size_t i;
  json_t *v;
  json_array_foreach(names, i, v) if (!strcmp(json_string_value(v), who)) return;
  if (json_array_size(names) < 4) json_array_append_new(names, json_string(who));
}

static void chrome_event(chrome_trace *c, const char *name, const char *cat, double ts, json_int_t pid, json_int_t tid,
                         json_t *args) {
  json_array_append_new(c->events, json_pack("{s:s, s:s, s:s, s:f, s:I, s:I, s:s, s:o}", "name", name, "cat", cat,
                                             "ph", "i", "ts", ts, "pid", pid, "tid", tid, "s", "t", "args", args));
}

static void chrome_flow(chrome_trace *c, const char *kind, bool end, const char *id, double ts, json_int_t pid,
                        json_int_t tid) {
  json_array_append_new(c->events, json_pack("{s:s, s:s, s:s, s:s, s:f, s:I, s:I, s:s}", "name", kind, "cat", "flow",
                                             "ph", end ? "f" : "s", "id", id, "ts", ts, "pid", pid, "tid", tid,
                                             "bp", "e"));
}

/* One record: printed as a JSON line (and added to the Chrome events when
 * c is set) when it passes the filters. Returns 1 when it was kept. */
static int trace_one(const m0__trace_rec *r, const filter *f, chrome_trace *c) {
  char from[64], to[64], line[512];
  const char *k = m0__trace_kind_name(r);
  m0__actor_name(r->e.from, from, sizeof from);
  m0__actor_name(r->e.to, to, sizeof to);
  if (!filter_keeps(f, from, to, k)) return 0;
  fwrite(line, 1, m0__trace_format(r, line, sizeof line), stdout); /* flushed per nng message */
  if (c) {
    const char *who = r->recv ? to : from;
    double ts = (double)r->t_ns / 1e3; /* microseconds */
    track_note(c, r, who);
    char name[96], fid[160], trace[33];
    if (r->served) snprintf(name, sizeof name, "serve http %llu", (unsigned long long)r->e.seq);
    else snprintf(name, sizeof name, "%s %s %s", r->recv ? "recv" : "send", k, r->recv ? from : to);
    snprintf(fid, sizeof fid, "%s>%s#%llu", from, to, (unsigned long long)r->e.seq);
    snprintf(trace, sizeof trace, "%016llx%016llx", (unsigned long long)r->e.trace_hi,
             (unsigned long long)r->e.trace_lo);
    json_t *args = json_pack("{s:f, s:s, s:s, s:s, s:s, s:I, s:I, s:s}", "t", (double)r->t_ns / 1e9, "dir",
                             r->served ? "serve" : r->recv ? "recv" : "send", "from", from, "to", to, "kind", k, "seq",
                             (json_int_t)r->e.seq, "bytes", (json_int_t)r->bytes, "trace", trace);
    chrome_event(c, name, k, ts, r->pid, r->tid, args);
    if (!r->served) chrome_flow(c, k, r->recv, fid, ts, r->pid, r->tid); /* a request served on a loop: no arrow */
    /* A message an instance sent that the host received, or one the host
     * sent to it: if that instance never records (it is outside), its end
     * is drawn on its own track when the file is written. */
    bool to_app = M0__ACTOR_ROLE(r->e.to) == M0__ROLE_APP, from_app = M0__ACTOR_ROLE(r->e.from) == M0__ROLE_APP;
    if (!r->served && ((to_app && !r->recv) || (from_app && r->recv)))
      json_array_append_new(c->apps, json_pack("{s:s, s:s, s:s, s:s, s:f, s:b, s:O}", "inst", r->recv ? from : to,
                                               "peer", r->recv ? to : from, "kind", k, "id", fid, "ts", ts, "sent",
                                               !r->recv, "args", args));
  }
  return 1;
}

/* The tracks of the instances that recorded nothing themselves (outside
 * the host): one process per application actor ("echo (outside)", a pid
 * no Linux process has: above the kernel's pid_max, 4194304), a thread per
 * instance, and each message's other end on it: a REQUEST's receipt at its
 * send's time, a REPLY's send at its receipt's (the host sees no more of
 * an outside instance's clock), each with its flow's other end. */
static void outside_tracks(chrome_trace *c) {
  json_t *pids = json_object(), *ended = json_object(); /* actor -> its pid; the flows given their end here */
  json_t *at = json_object(); /* flow -> its outside end's time: its last send, or its first receipt */
  size_t i;
  json_t *m;
  /* A message recorded twice (a REQUEST sent by the loop, then by the
   * actor's socket that passes it on) has two times, whose records may
   * reach m0trace in either order: the outside end comes after the last
   * send and before the first receipt, whichever record came first. */
  json_array_foreach(c->apps, i, m) {
    const char *id = json_string_value(json_object_get(m, "id"));
    bool sent = json_is_true(json_object_get(m, "sent"));
    double ts = json_real_value(json_object_get(m, "ts"));
    json_t *was = json_object_get(at, id);
    if (!was || (sent ? ts > json_real_value(was) : ts < json_real_value(was)))
      json_object_set_new(at, id, json_real(ts));
  }
  json_array_foreach(c->apps, i, m) {
    const char *inst = json_string_value(json_object_get(m, "inst")), *id = json_string_value(json_object_get(m, "id"));
    /* inside: it has a thread of its own; a reply recorded twice (taken by
     * the actor's socket, then by the loop from its inbox): one end */
    if (json_object_get(c->recorders, inst) || json_object_get(ended, id)) continue;
    json_object_set_new(ended, id, json_true());
    char actor[64];
    snprintf(actor, sizeof actor, "%s", inst);
    char *dot = strrchr(actor, '.');
    if (dot) *dot = 0;
    json_int_t pid = json_integer_value(json_object_get(pids, actor)), tid = dot ? strtoll(dot + 1, NULL, 10) + 1 : 1;
    if (!pid) {
      pid = 5000000 + (json_int_t)json_object_size(pids);
      json_object_set_new(pids, actor, json_integer(pid));
      char pname[96];
      snprintf(pname, sizeof pname, "%s (outside the host)", actor);
      json_array_append_new(c->events, json_pack("{s:s, s:s, s:I, s:{s:s}}", "name", "process_name", "ph", "M",
                                                 "pid", pid, "args", "name", pname));
    }
    char tkey[96];
    snprintf(tkey, sizeof tkey, "%lld/%lld", (long long)pid, (long long)tid);
    if (!json_object_get(c->threads, tkey)) {
      json_t *names = json_array();
      json_array_append_new(names, json_string(inst));
      json_object_set_new(c->threads, tkey, names);
    }
    bool sent = json_is_true(json_object_get(m, "sent"));
    const char *kind = json_string_value(json_object_get(m, "kind")), *peer = json_string_value(json_object_get(m, "peer"));
    double ts = json_real_value(json_object_get(at, id));
    char name[160];
    snprintf(name, sizeof name, "%s %s %s", sent ? "recv" : "send", kind, peer);
    chrome_event(c, name, kind, ts, pid, tid, json_deep_copy(json_object_get(m, "args")));
    chrome_flow(c, kind, sent, id, sent ? ts : ts - 1, pid, tid);
  }
  json_decref(pids);
  json_decref(ended);
  json_decref(at);
}

static int write_chrome(const char *path, chrome_trace *c) {
  outside_tracks(c);
  const char *key;
  json_t *v;
  json_object_foreach(c->procs, key, v) {
    json_array_append_new(c->events, json_pack("{s:s, s:s, s:I, s:{s:O}}", "name", "process_name", "ph", "M", "pid",
                                               (json_int_t)strtoll(key, NULL, 10), "args", "name", v));
  }
  json_object_foreach(c->threads, key, v) {
    char name[256] = "";
    size_t i, n = 0;
    json_t *a;
    json_array_foreach(v, i, a) n += (size_t)snprintf(name + n, n < sizeof name ? sizeof name - n : 0, "%s%s",
                                                      i ? " " : "", json_string_value(a));
    char *slash;
    json_int_t pid = strtoll(key, &slash, 10), tid = strtoll(slash + 1, NULL, 10);
    json_array_append_new(c->events, json_pack("{s:s, s:s, s:I, s:I, s:{s:s}}", "name", "thread_name", "ph", "M",
                                               "pid", pid, "tid", tid, "args", "name", name));
  }
  json_t *root = json_pack("{s:O, s:s}", "traceEvents", c->events, "displayTimeUnit", "ms");
  int rc = json_dump_file(root, path, JSON_COMPACT);
  json_decref(root);
  return rc;
}

/* The control m0trace sends (runtime/trace.h): on, to its own URL, with its
 * filters; or off. */
static char *control_json(bool on, const char *url, const filter *f, const char *requests) {
  json_t *c = json_pack("{s:b}", "on", on);
  if (on) {
    json_t *a = json_array(), *k = json_array();
    for (int i = 0; i < f->nactors; i++) json_array_append_new(a, json_string(f->actors[i]));
    for (int i = 0; i < f->nkinds; i++) json_array_append_new(k, json_string(f->kinds[i]));
    json_object_set_new(c, "to", json_string(url));
    json_object_set_new(c, "actors", a);
    json_object_set_new(c, "kinds", k);
    if (requests) json_object_set_new(c, "requests", json_string(requests));
  }
  char *s = json_dumps(c, JSON_COMPACT);
  json_decref(c);
  return s;
}

/* The control to every loop, and to the coordinator when it has a mailbox
 * here. Returns the loops told. */
static int tell(m0_publisher *host, m0__peer *coord, bool has_coord, const char *control) {
  if (has_coord) m0__send(&host->self, coord, M0__K_TRACE, 0, 0, control, strlen(control));
  return m0__publisher_tell(host, M0__K_TRACE, control, strlen(control));
}

/* The host's application actors by the names its processes give them (the
 * shared page): records say echo.0, as the host's stderr and its observer
 * do, not app.0.0. Read at each telling: a reload may bring other actors. */
static void name_actors(const m0_publisher *host) {
  for (int i = 0; i < M0__PAGE_APP_ACTORS; i++) {
    char name[M0__PAGE_NAME_MAX];
    memcpy(name, host->page->names->actors[i], sizeof name);
    name[sizeof name - 1] = 0;
    if (name[0]) m0__app_actor_named(i, name);
  }
}

/* Controls the host refused (its loops, its coordinator), in every process (the shared page). */
static uint64_t controls_refused(m0_publisher *pub) {
  uint64_t n = 0;
  for (int i = 0; i < M0__PAGE_REFUSAL_LINES; i++) n += atomic_load(&pub->page->refusals[i].n[M0__REFUSE_CONTROL]);
  return n;
}

static double since(const struct timespec *t0) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

int main(int argc, char **argv) {
  const char *chrome = NULL, *url = NULL, *run_dir = NULL, *requests = NULL;
  filter f = {0};
  double seconds = 0;
  for (int a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "--actor") && a + 1 < argc) {
      if (f.nactors == MAX_FILTER) return usage("at most 16 --actor");
      f.actors[f.nactors++] = argv[++a];
    } else if (!strcmp(argv[a], "--kind") && a + 1 < argc) {
      if (f.nkinds == MAX_FILTER) return usage("at most 16 --kind");
      const char *k = argv[++a];
      int i = strcmp(k, "http") ? 1 : 0;
      while (i && i < M0__KIND_COUNT_ && strcmp(k, m0__kind_name(i))) i++;
      if (i == M0__KIND_COUNT_)
        return usage("--kind is http or a message kind: ready, failed, go, stop, ... (docs/reference.md, Tracing)");
      f.kinds[f.nkinds++] = k;
    } else if (!strcmp(argv[a], "--requests") && a + 1 < argc) {
      requests = argv[++a];
      if (strcmp(requests, "sampled") && strcmp(requests, "all") && strcmp(requests, "none"))
        return usage("--requests is sampled, all or none");
    } else if (!strcmp(argv[a], "--run-dir") && a + 1 < argc) run_dir = argv[++a];
    else if (!strcmp(argv[a], "--chrome") && a + 1 < argc) chrome = argv[++a];
    else if (!strcmp(argv[a], "--seconds") && a + 1 < argc) seconds = atof(argv[++a]);
    else if (argv[a][0] == '-') return usage("unknown flag or missing value");
    else if (!url) url = argv[a];
    else return usage("one URL");
  }
  if (!url) return usage("which URL? (the host's --trace URL, or where to listen with --run-dir)");
  if (requests && !run_dir) return usage("--requests tells a running host: it needs --run-dir");
  for (int i = 0; !run_dir && i < f.nactors; i++) /* the names are on the host's page: no --run-dir, no names */
    if (!m0__actor_name_known(f.actors[i]))
      fprintf(stderr, "m0trace: --actor %s: without --run-dir the records name an application actor's instances "
                      "app.<actor>.<slot> (<actor> its place in the doctor's app_actors): give --run-dir DIR, or "
                      "--actor app.<actor>\n", f.actors[i]);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  nng_socket s;
  int rv;
  if ((rv = nng_pull0_open(&s)) != 0 || (rv = nng_listen(s, url, NULL, 0)) != 0) {
    fprintf(stderr, "m0trace: cannot listen at %s: %s\n", url, nng_strerror(rv));
    return 1;
  }
  /* Waiting is a poll() on the receive descriptor, 100 ms at a time (to see
   * a signal or the end of --seconds): an nng receive timeout that expires
   * spins nng 1.5.2's expire thread for up to a millisecond (bench/RESULTS.md,
   * "nng timers"). */
  int rfd;
  if ((rv = nng_socket_get_int(s, NNG_OPT_RECVFD, &rfd)) != 0) {
    fprintf(stderr, "m0trace: cannot wait on %s: %s\n", url, nng_strerror(rv));
    return 1;
  }
  m0_publisher *host = NULL;
  m0__peer coord = {0};
  bool has_coord = false;
  char *on = NULL;
  uint64_t refused = 0;
  if (run_dir) {
    char err[512];
    if (!(host = m0__publisher_attach_loops(run_dir, err, sizeof err))) {
      fprintf(stderr, "m0trace: %s (is a host running with --run-dir %s?)\n", err, run_dir);
      m0__socket_close(s);
      return 78;
    }
    refused = controls_refused(host);
    name_actors(host);
    on = control_json(true, url, &f, requests);
    has_coord = m0__publisher_coordinator(host, run_dir, &coord);
    if (tell(host, &coord, has_coord, on) == 0) {
      fprintf(stderr, "m0trace: no loop of the host at %s took the control\n", run_dir);
      free(on);
      if (has_coord) m0__peer_close(&coord);
      m0_publisher_detach(host);
      m0__socket_close(s);
      return 78;
    }
  }
  fprintf(stderr, "m0trace: listening at %s%s%s\n", url, run_dir ? "; tracing switched on at " : "",
          run_dir ? run_dir : "");
  chrome_trace c = {json_array(), json_object(), json_object(), json_object(), json_array()};
  struct timespec start, told;
  clock_gettime(CLOCK_MONOTONIC, &start);
  told = start;
  const filter everything = {0}; /* with --run-dir the host keeps only what f keeps */
  long seen = 0, bad = 0;
  int rc = 0;
  while (!trace_stop) {
    if (seconds > 0 && since(&start) >= seconds) break;
    if (host && controls_refused(host) != refused) {
      fprintf(stderr, "m0trace: the host at %s refused the control (its stderr says why)\n", run_dir);
      rc = 78;
      break;
    }
    if (host && since(&told) >= 1.0) { /* a respawned worker's tracer starts off */
      tell(host, &coord, has_coord, on);
      name_actors(host);
      clock_gettime(CLOCK_MONOTONIC, &told);
    }
    char *buf;
    size_t n;
    struct pollfd pf = {.fd = rfd, .events = POLLIN};
    if (poll(&pf, 1, 100) <= 0 || nng_recv(s, &buf, &n, NNG_FLAG_ALLOC | NNG_FLAG_NONBLOCK) != 0) continue;
    /* A message carries one or more whole binary records. */
    m0__trace_rec r;
    for (size_t at = 0; at + M0__TRACE_RECORD <= n; at += M0__TRACE_RECORD) {
      if (m0__trace_decode((const uint8_t *)buf + at, &r) == 0)
        seen += trace_one(&r, host ? &everything : &f, chrome ? &c : NULL);
      else bad++;
    }
    if (n % M0__TRACE_RECORD) bad++;
    nng_free(buf, n);
    fflush(stdout); /* live: each batch as it comes (the host sends one within 50 ms) */
  }
  if (host) {
    char *off = control_json(false, url, &f, NULL);
    tell(host, &coord, has_coord, off);
    free(off);
    if (has_coord) m0__peer_close(&coord);
    free(on);
    m0_publisher_detach(host);
  }
  m0__socket_close(s);
  if (bad) fprintf(stderr, "m0trace: %ld records were not m0 trace records (another sender, or another version)\n", bad);
  if (chrome) {
    if (write_chrome(chrome, &c) != 0) {
      fprintf(stderr, "m0trace: cannot write %s\n", chrome);
      rc = 1;
    } else fprintf(stderr, "m0trace: %ld records; Chrome trace in %s (open it in ui.perfetto.dev)\n", seen, chrome);
  }
  json_decref(c.events);
  json_decref(c.procs);
  json_decref(c.threads);
  json_decref(c.recorders);
  json_decref(c.apps);
  return rc;
}
