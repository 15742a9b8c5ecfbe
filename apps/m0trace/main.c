/* m0trace — watch a running host's actor messages live, or record them for
 * Perfetto.
 *
 *   m0trace [--actor NAME] [--kind KIND] [--chrome FILE] [--seconds N] URL
 *
 * Listens at URL (an nng address: the host runs with --trace URL and dials
 * it, sending binary records, actors/trace.h). Each record is printed as one
 * JSON line (time, dir, from, to, kind, seq, bytes,
 * trace id); --actor keeps records from or to that actor (e.g. loop.1),
 * --kind those of one kind (e.g. job). With --chrome FILE it also writes
 * Chrome trace-event JSON when it stops (SIGINT, SIGTERM or --seconds): one
 * track per actor, and a flow arrow from each send to its receive, so
 * Perfetto (ui.perfetto.dev) draws the message flow.
 * Exit: 0; 2 usage; 1 cannot listen or write.
 */
#include <jansson.h>
#include <nng/nng.h>
#include <nng/protocol/pipeline0/pull.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "actors/envelope.h"
#include "actors/kinds.h"
#include "base/nng_compat.h"
#include "actors/trace.h"

static volatile sig_atomic_t trace_stop;
static void on_stop(int sig) { trace_stop = 1; }

static int usage(const char *why) {
  fprintf(stderr, "usage: m0trace [--actor NAME] [--kind KIND] [--chrome FILE] [--seconds N] URL\n");
  if (why) fprintf(stderr, "m0trace: %s\n", why);
  return 2;
}

/* A stable small number per actor name: its track in the Chrome trace. */
static int track_of(json_t *tracks, const char *name) {
  json_t *v = json_object_get(tracks, name);
  if (v) return (int)json_integer_value(v);
  int id = (int)json_object_size(tracks) + 1;
  json_object_set_new(tracks, name, json_integer(id));
  return id;
}

/* One record: printed as a JSON line (and added to the Chrome events when
 * events is set) when it passes the filters. Returns 1 when it was kept. */
static int trace_one(const m0__trace_rec *r, const char *actor, const char *kind, json_t *events, json_t *tracks) {
  char from[32], to[32], line[512];
  const char *k = m0__kind_name(r->e.kind);
  m0__actor_name(r->e.from, from, sizeof from);
  m0__actor_name(r->e.to, to, sizeof to);
  if ((kind && strcmp(kind, k)) || (actor && strcmp(actor, from) && strcmp(actor, to))) return 0;
  fwrite(line, 1, m0__trace_format(r, line, sizeof line), stdout); /* flushed per nng message */
  if (events) {
    const char *who = r->recv ? to : from;
    double ts = (double)r->t_ns / 1e3; /* microseconds */
    int tid = track_of(tracks, who);
    char name[96], fid[160], trace[33];
    snprintf(name, sizeof name, "%s %s %s", r->recv ? "recv" : "send", k, r->recv ? from : to);
    snprintf(fid, sizeof fid, "%s>%s#%llu", from, to, (unsigned long long)r->e.seq);
    snprintf(trace, sizeof trace, "%016llx%016llx", (unsigned long long)r->e.trace_hi,
             (unsigned long long)r->e.trace_lo);
    json_t *args = json_pack("{s:f, s:s, s:s, s:s, s:s, s:I, s:I, s:s}", "t", (double)r->t_ns / 1e9, "dir",
                             r->recv ? "recv" : "send", "from", from, "to", to, "kind", k, "seq",
                             (json_int_t)r->e.seq, "bytes", (json_int_t)r->bytes, "trace", trace);
    json_array_append_new(events, json_pack("{s:s, s:s, s:s, s:f, s:i, s:i, s:s, s:o}", "name", name, "cat", k,
                                            "ph", "i", "ts", ts, "pid", 1, "tid", tid, "s", "t", "args", args));
    json_array_append_new(events, json_pack("{s:s, s:s, s:s, s:s, s:f, s:i, s:i, s:s}", "name", k, "cat", "flow",
                                            "ph", r->recv ? "f" : "s", "id", fid, "ts", ts, "pid", 1, "tid", tid,
                                            "bp", "e"));
  }
  return 1;
}

static int write_chrome(const char *path, json_t *events, json_t *tracks) {
  const char *name;
  json_t *v;
  json_object_foreach(tracks, name, v) {
    json_array_append_new(events, json_pack("{s:s, s:s, s:i, s:I, s:{s:s}}", "name", "thread_name", "ph", "M",
                                            "pid", 1, "tid", json_integer_value(v), "args", "name", name));
  }
  json_t *root = json_pack("{s:O, s:s}", "traceEvents", events, "displayTimeUnit", "ms");
  int rc = json_dump_file(root, path, JSON_COMPACT);
  json_decref(root);
  return rc;
}

int main(int argc, char **argv) {
  const char *actor = NULL, *kind = NULL, *chrome = NULL, *url = NULL;
  double seconds = 0;
  for (int a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "--actor") && a + 1 < argc) actor = argv[++a];
    else if (!strcmp(argv[a], "--kind") && a + 1 < argc) kind = argv[++a];
    else if (!strcmp(argv[a], "--chrome") && a + 1 < argc) chrome = argv[++a];
    else if (!strcmp(argv[a], "--seconds") && a + 1 < argc) seconds = atof(argv[++a]);
    else if (argv[a][0] == '-') return usage("unknown flag or missing value");
    else if (!url) url = argv[a];
    else return usage("one URL");
  }
  if (!url) return usage("which URL? (the host's --trace URL)");
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
   * spins nng 1.5.2's expire thread for up to a millisecond (ARCHITECTURE.md,
   * "nng's timers and redials"). */
  int rfd;
  if ((rv = nng_socket_get_int(s, NNG_OPT_RECVFD, &rfd)) != 0) {
    fprintf(stderr, "m0trace: cannot wait on %s: %s\n", url, nng_strerror(rv));
    return 1;
  }
  fprintf(stderr, "m0trace: listening at %s\n", url);
  json_t *events = json_array(), *tracks = json_object();
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  long seen = 0, bad = 0;
  while (!trace_stop) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (seconds > 0 && (double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9 >= seconds)
      break;
    char *buf;
    size_t n;
    struct pollfd pf = {.fd = rfd, .events = POLLIN};
    if (poll(&pf, 1, 100) <= 0 || nng_recv(s, &buf, &n, NNG_FLAG_ALLOC | NNG_FLAG_NONBLOCK) != 0) continue;
    /* A message carries one or more whole binary records. */
    m0__trace_rec r;
    for (size_t at = 0; at + M0__TRACE_RECORD <= n; at += M0__TRACE_RECORD) {
      if (m0__trace_decode((const uint8_t *)buf + at, &r) == 0)
        seen += trace_one(&r, actor, kind, chrome ? events : NULL, tracks);
      else bad++;
    }
    if (n % M0__TRACE_RECORD) bad++;
    nng_free(buf, n);
    fflush(stdout); /* live: each batch as it comes (the host sends one within 50 ms) */
  }
  m0__socket_close(s);
  if (bad) fprintf(stderr, "m0trace: %ld records were not m0 trace records (another sender, or another version)\n", bad);
  int rc = 0;
  if (chrome) {
    if (write_chrome(chrome, events, tracks) != 0) {
      fprintf(stderr, "m0trace: cannot write %s\n", chrome);
      rc = 1;
    } else fprintf(stderr, "m0trace: %ld records; Chrome trace in %s (open it in ui.perfetto.dev)\n", seen, chrome);
  }
  json_decref(events);
  json_decref(tracks);
  return rc;
}
