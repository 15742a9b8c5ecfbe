/* m0trace — watch a running host's actor messages live, or record them for
 * Perfetto.
 *
 *   m0trace [--actor NAME] [--kind KIND] [--chrome FILE] [--seconds N] URL
 *
 * Listens at URL (an nng address: the host runs with --trace URL and dials
 * it). Each record is one JSON line (time, dir, from, to, kind, seq, bytes,
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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* One record: printed (and added to the Chrome events when events is set)
 * when it passes the filters. Returns 1 when it was kept. */
static int trace_line(const char *line, size_t n, const char *actor, const char *kind, json_t *events,
                      json_t *tracks) {
  if (n == 0) return 0;
  json_error_t e;
  json_t *r = json_loadb(line, n, 0, &e);
  const char *from = json_string_value(json_object_get(r, "from"));
  const char *to = json_string_value(json_object_get(r, "to"));
  const char *k = json_string_value(json_object_get(r, "kind"));
  const char *dir = json_string_value(json_object_get(r, "dir"));
  bool keep = r && from && to && k && dir && (!actor || !strcmp(actor, from) || !strcmp(actor, to)) &&
              (!kind || !strcmp(kind, k));
  if (keep) {
    fwrite(line, 1, n, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    if (events) {
      bool send = !strcmp(dir, "send");
      const char *who = send ? from : to;
      double ts = json_real_value(json_object_get(r, "t")) * 1e6; /* microseconds */
      if (ts == 0) ts = (double)json_integer_value(json_object_get(r, "t")) * 1e6;
      int tid = track_of(tracks, who);
      char name[96], fid[160];
      snprintf(name, sizeof name, "%s %s %s", send ? "send" : "recv", k, send ? to : from);
      snprintf(fid, sizeof fid, "%s>%s#%lld", from, to, (long long)json_integer_value(json_object_get(r, "seq")));
      json_array_append_new(events, json_pack("{s:s, s:s, s:s, s:f, s:i, s:i, s:s, s:O}", "name", name, "cat", k,
                                              "ph", "i", "ts", ts, "pid", 1, "tid", tid, "s", "t", "args", r));
      json_array_append_new(events, json_pack("{s:s, s:s, s:s, s:s, s:f, s:i, s:i, s:s}", "name", k, "cat", "flow",
                                              "ph", send ? "s" : "f", "id", fid, "ts", ts, "pid", 1, "tid", tid, "bp",
                                              "e"));
    }
  }
  json_decref(r);
  return keep ? 1 : 0;
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
  nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 100);
  fprintf(stderr, "m0trace: listening at %s\n", url);
  json_t *events = json_array(), *tracks = json_object();
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  long seen = 0;
  while (!trace_stop) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (seconds > 0 && (double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9 >= seconds)
      break;
    char *buf;
    size_t n;
    if (nng_recv(s, &buf, &n, NNG_FLAG_ALLOC) != 0) continue;
    /* A message carries one or more lines, each ending in a newline. */
    for (char *line = buf, *end = buf + n; line < end;) {
      char *nl = memchr(line, '\n', (size_t)(end - line));
      size_t len = nl ? (size_t)(nl - line) : (size_t)(end - line);
      seen += trace_line(line, len, actor, kind, chrome ? events : NULL, tracks);
      line += len + 1;
    }
    nng_free(buf, n);
  }
  nng_close(s);
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
