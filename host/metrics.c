#include "host/metrics.h"

#include <nng/nng.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "runtime/admit.h"
#include "actors/asks.h"
#include "base/buf.h"

/* A figure per loop from its figures (counters never cleared: transport/page.h). */
#define FIGURE(name, help, member)                                                                              \
  do {                                                                                                          \
    m0__buf_printf(&b, "# HELP m0_%s %s\n# TYPE m0_%s counter\n", name, help, name);                              \
    for (uint32_t i = 0; i < page->head->loops; i++)                                                            \
      m0__buf_printf(&b, "m0_%s{loop=\"%u\"} %llu\n", name, i,                                                  \
                     (unsigned long long)atomic_load_explicit(&page->loop_figures[i].member, memory_order_relaxed)); \
  } while (0)

/* A figure per loop from its line (gauges: this generation's bank). */
#define FIELD(name, type, help, member)                                                                       \
  do {                                                                                                        \
    m0__buf_printf(&b, "# HELP m0_%s %s\n# TYPE m0_%s %s\n", name, help, name, type);                         \
    for (uint32_t i = 0; i < page->head->loops; i++)                                                          \
      m0__buf_printf(&b, "m0_%s{loop=\"%u\"} %llu\n", name, i,                                                \
                     (unsigned long long)atomic_load_explicit(&page->lines[i].member, memory_order_relaxed)); \
  } while (0)

/* nng's statistics, labelled by whose socket they count:
 * m0_nng_stat{process, side, actor, scope, url, socket, stat}. A socket's name is
 * "<side>:<actor>" (m0__socket_name: "mailbox:loop.0" is loop 0's own,
 * "peer:loop.0" one dialed to it); a dialer or listener is found by its
 * socket's id and adds its URL. The socket's id stays a label too: two
 * actors of one process may each dial the same actor, "peer:loop.0" at the
 * same URL, and a series must be one socket's. Pipes are left out: their
 * counts are in their socket's, and their ids are numbers that name
 * nothing. */
static const char *nng_str(nng_stat *scope, const char *stat) {
  nng_stat *s = nng_stat_find(scope, stat);
  return s && nng_stat_type(s) == NNG_STAT_STRING ? nng_stat_string(s) : NULL;
}

/* A label's value: a URL is the operator's (a run directory's path), so a
 * quote, a backslash or a newline in it is escaped as Prometheus reads them. */
static const char *label_value(const char *s, char *out, size_t outlen) {
  size_t o = 0;
  for (; s && *s && o + 3 < outlen; s++) {
    if (*s == '"' || *s == '\\') out[o++] = '\\';
    if (*s == '\n') {
      out[o++] = '\\';
      out[o++] = 'n';
    } else {
      out[o++] = *s;
    }
  }
  out[o] = 0;
  return out;
}

static void metrics_nng_scope(m0__buf *b, const char *process, nng_stat *scope, const char *kind, uint64_t sock,
                              const char *name, const char *url) {
  if (!name) name = "other:"; /* a socket m0 did not name: the tracer's, say */
  const char *colon = strchr(name, ':');
  int side_len = (int)(colon - name);
  const char *side = name, *actor = colon + 1;
  char urlv[2 * M0__URL_MAX];
  label_value(url, urlv, sizeof urlv);
  for (nng_stat *s = nng_stat_child(scope); s; s = nng_stat_next(s)) {
    int t = nng_stat_type(s);
    if ((t != NNG_STAT_COUNTER && t != NNG_STAT_LEVEL) || !strcmp(nng_stat_name(s), "id") ||
        !strcmp(nng_stat_name(s), "socket"))
      continue;
    m0__buf_printf(b,
                   "m0_nng_stat{process=\"%s\",side=\"%.*s\",actor=\"%s\",scope=\"%s\",url=\"%s\",socket=\"%llu\","
                   "stat=\"%s\"} %llu\n",
                   process, side_len, side, actor, kind, urlv, (unsigned long long)sock, nng_stat_name(s),
                   (unsigned long long)nng_stat_value(s));
  }
}

static void metrics_nng(m0__buf *b, const char *process, nng_stat *root) {
  for (nng_stat *s = nng_stat_child(root); s; s = nng_stat_next(s)) {
    const char *kind = nng_stat_name(s);
    if (nng_stat_type(s) != NNG_STAT_SCOPE || !strcmp(kind, "pipe")) continue;
    nng_stat *sock = nng_stat_find(s, !strcmp(kind, "socket") ? "id" : "socket");
    char name[40];
    bool named = sock && m0__socket_name_of(nng_stat_value(sock), name, sizeof name);
    metrics_nng_scope(b, process, s, kind, sock ? nng_stat_value(sock) : 0, named ? name : NULL, nng_str(s, "url"));
  }
}

/* What every loop of the host has in flight with actor s, from the page at
 * its row: both banks (a reload's two generations serve at once); and the
 * asks of it from instances (m0_ask). */
static unsigned long long metrics_inflight(const m0__page *page, const m0__service *s) {
  uint64_t f = atomic_load_explicit(&s->st->asking, memory_order_relaxed);
  for (uint32_t l = 0; l < page->head->loops; l++)
    for (int bank = 0; bank < 2; bank++)
      f += atomic_load_explicit(&page->loop_figures[l].actor_inflight[bank][s->row], memory_order_relaxed);
  return (unsigned long long)((int64_t)f < 0 ? 0 : f); /* a loop stores its own count: a sum read between two */
}

/* Per application actor, from the page (the whole host's: transport/page.h):
 * requests by outcome, in flight, restarts, replies dropped, of each actor
 * that has its row there (the others' counts are one process's: left out);
 * and instances live, this process's. */
static void metrics_actors(m0__buf *b, const m0__page *page, m0__service *const *sv, int n) {
  if (n == 0) return;
  m0__buf_printf(b, "# HELP m0_actor_requests_total Requests routed to an application actor, by outcome.\n"
                    "# TYPE m0_actor_requests_total counter\n");
  for (int i = 0; i < n; i++) {
    if (sv[i]->row < 0) continue;
    const m0__service_stats *st = sv[i]->st;
    struct {
      const char *outcome;
      unsigned long long v;
    } o[] = {{"ok", atomic_load(&st->ok)},           {"no_instance", atomic_load(&st->no_instance)},
             {"queue_full", atomic_load(&st->queue_full)}, {"timeout", atomic_load(&st->timeout)},
             {"bad_reply", atomic_load(&st->bad_reply)}, {"instance_died", atomic_load(&st->died)}};
    for (size_t k = 0; k < sizeof o / sizeof *o; k++)
      m0__buf_printf(b, "m0_actor_requests_total{actor=\"%s\",outcome=\"%s\"} %llu\n", sv[i]->name, o[k].outcome,
                     o[k].v);
  }
  m0__buf_printf(b, "# HELP m0_actor_in_flight Requests with an actor's instances now, from every loop.\n"
                    "# TYPE m0_actor_in_flight gauge\n");
  for (int i = 0; i < n; i++)
    if (sv[i]->row >= 0)
      m0__buf_printf(b, "m0_actor_in_flight{actor=\"%s\"} %llu\n", sv[i]->name, metrics_inflight(page, sv[i]));
  m0__buf_printf(b, "# HELP m0_actor_instances Instances of an actor live now that this process's loops can "
                    "send to.\n# TYPE m0_actor_instances gauge\n");
  for (int i = 0; i < n; i++)
    m0__buf_printf(b, "m0_actor_instances{actor=\"%s\"} %d\n", sv[i]->name, m0__service_live(sv[i]));
  m0__buf_printf(b, "# HELP m0_actor_restarts_total Spawned instances of an actor started again.\n"
                    "# TYPE m0_actor_restarts_total counter\n");
  for (int i = 0; i < n; i++)
    if (sv[i]->row >= 0)
      m0__buf_printf(b, "m0_actor_restarts_total{actor=\"%s\"} %llu\n", sv[i]->name,
                     (unsigned long long)atomic_load(sv[i]->restarts));
  m0__buf_printf(b, "# HELP m0_actor_replies_dropped_total Replies to no request in flight (late or unknown), "
                    "and messages refused from instances.\n# TYPE m0_actor_replies_dropped_total counter\n");
  for (int i = 0; i < n; i++)
    if (sv[i]->row >= 0)
      m0__buf_printf(b, "m0_actor_replies_dropped_total{actor=\"%s\",reason=\"unknown_id\"} %llu\n"
                        "m0_actor_replies_dropped_total{actor=\"%s\",reason=\"refused\"} %llu\n",
                     sv[i]->name, (unsigned long long)atomic_load(&sv[i]->st->unknown), sv[i]->name,
                     (unsigned long long)atomic_load(&sv[i]->st->refused));
}

static void metrics_refusal(void *arg, uint32_t actor, int reason, uint64_t n) {
  char name[48] = "other";
  if (actor != UINT32_MAX) m0__actor_name(actor, name, sizeof name);
  m0__buf_printf(arg, "m0_refused_total{actor=\"%s\",reason=\"%s\"} %llu\n", name, m0__refusal_name(reason),
                 (unsigned long long)n);
}

/* The fleet's bus (bus/bus.h), from the page: only when the host has one. */
static void metrics_bus(m0__buf *b, const m0__page *page) {
  const m0__bus_line *l = page->bus;
  if (!l || !atomic_load(&l->configured)) return;
  struct {
    const char *name, *type, *help;
    unsigned long long v;
  } f[] = {
      {"bus_connected", "gauge", "The bridge consumes the fleet's stream (1: its link is up and the stream "
       "answers) or not (0).",
       atomic_load(&l->connected)},
      {"bus_published_total", "counter", "Frames this host's publishers sent to the fleet.", atomic_load(&l->published)},
      {"bus_received_total", "counter", "Fleet frames the bridge fanned out to this host's loops.",
       atomic_load(&l->received)},
      {"bus_local_only_total", "counter", "Frames published while the link was down: this host's streams only, "
       "without an id.", atomic_load(&l->local_only)},
      {"bus_reconnects_total", "counter", "Times the bridge's link to NATS came back.", atomic_load(&l->reconnects)},
      {"bus_resets_total", "counter", "Times the bridge found the fleet's stream replaced (the server lost its store): "
       "an m0.gap sent, ids go on from the new stream's.", atomic_load(&l->resets)},
      {"bus_refused_total", "counter", "Fleet messages refused: not decoded, or not a channel and frame.",
       atomic_load(&l->refused)},
  };
  for (size_t i = 0; i < sizeof f / sizeof *f; i++)
    m0__buf_printf(b, "# HELP m0_%s %s\n# TYPE m0_%s %s\nm0_%s %llu\n", f[i].name, f[i].help, f[i].name, f[i].type,
                   f[i].name, f[i].v);
}

/* Frames dropped for slow subscribers, by channel, from the page: every
 * process counts there, so each scrape shows the host's sums. */
static void metrics_channel_drops(m0__buf *b, const m0__page *page) {
  m0__buf_printf(b, "# HELP m0_channel_frames_dropped_total Frames dropped for a subscriber (a stream or a "
                    "WebSocket whose queue was full, or a frame that came late), by channel, in every process "
                    "of the host.\n"
                    "# TYPE m0_channel_frames_dropped_total counter\n");
  char v[2 * sizeof page->channels->name];
  for (int i = 0; i < M0__PAGE_CHANNEL_LINES; i++) {
    const m0__channel_line *l = &page->channels[i];
    bool rest = i == M0__PAGE_CHANNEL_LINES - 1;
    if (rest ? !atomic_load(&l->dropped) : !atomic_load_explicit(&l->named, memory_order_acquire)) continue;
    m0__buf_printf(b, "m0_channel_frames_dropped_total{channel=\"%s\"} %llu\n",
                   rest ? "(other)" : label_value(l->name, v, sizeof v), (unsigned long long)atomic_load(&l->dropped));
  }
}

/* One histogram's lines (Prometheus: cumulative buckets, sum, count). */
static void metrics_histogram(m0__buf *b, const char *name, const char *labels, const m0__latency_sum *s) {
  unsigned long long cum = 0;
  for (int i = 0; i <= M0__LATENCY_BUCKETS; i++) {
    cum += s->n[i];
    m0__buf_printf(b, "%s_bucket{%s,le=\"%s\"} %llu\n", name, labels,
                   i < M0__LATENCY_BUCKETS ? m0__latency_le[i] : "+Inf", cum);
  }
  m0__buf_printf(b, "%s_sum{%s} %.9f\n%s_count{%s} %llu\n", name, labels, (double)s->sum_ns / 1e9, name, labels, cum);
}

/* A route's labels: its method and pattern, route "(none)" for the last row. */
static const char *metrics_route_labels(const m0_app *app, size_t r, char *out, size_t n) {
  char pat[2 * M0__URL_MAX];
  if (r < app->nroutes)
    snprintf(out, n, "method=\"%s\",route=\"%s\"", app->routes[r].method,
             label_value(app->routes[r].pattern, pat, sizeof pat));
  else snprintf(out, n, "method=\"\",route=\"(none)\"");
  return out;
}

/* Route r's row on the page (transport/page.h, m0__page_rows), the no-route
 * row for r == nroutes; M0__ENOTFOUND when it has none, or when an earlier route of
 * the same method and pattern has it (its series is printed once). */
static int metrics_route_row(const m0__page *page, const m0_app *app, size_t r) {
  if (r == app->nroutes) return M0__PAGE_ROW_NONE;
  const m0_route *rt = &app->routes[r];
  int row = m0__page_route_row(page, rt->method, rt->pattern, false);
  for (size_t e = 0; row >= 0 && e < r; e++)
    if (!strcmp(app->routes[e].method, rt->method) && !strcmp(app->routes[e].pattern, rt->pattern)) return M0__ENOTFOUND;
  return row;
}

/* By route, every loop of the host summed from the page (base/latency.h) at
 * the route's row: latency, and answers by status class; the last for
 * requests no route answered. A route without a row has neither. */
static void metrics_routes(m0__buf *b, const m0__page *page, const m0_app *app) {
  if (!app) return;
  m0__latency_sum *s = calloc(app->nroutes + 1, sizeof *s);
  int *row = calloc(app->nroutes + 1, sizeof *row);
  if (!s || !row) {
    free(s);
    free(row);
    return;
  }
  for (size_t r = 0; r <= app->nroutes; r++) row[r] = metrics_route_row(page, app, r);
  for (uint32_t l = 0; l < page->head->loops; l++)
    for (size_t r = 0; r <= app->nroutes; r++)
      if (row[r] >= 0) m0__latency_sum_add(&s[r], &page->loop_figures[l].routes[row[r]]);
  char labels[3 * M0__URL_MAX];
  m0__buf_printf(b, "# HELP m0_request_duration_seconds Time from a request's parse to its answer begun, by route.\n"
                    "# TYPE m0_request_duration_seconds histogram\n");
  for (size_t r = 0; r <= app->nroutes; r++)
    if (row[r] >= 0)
      metrics_histogram(b, "m0_request_duration_seconds", metrics_route_labels(app, r, labels, sizeof labels), &s[r]);
  m0__buf_printf(b, "# HELP m0_responses_total Answers begun, by route and status class.\n"
                    "# TYPE m0_responses_total counter\n");
  for (size_t r = 0; r <= app->nroutes; r++) {
    if (row[r] < 0) continue;
    metrics_route_labels(app, r, labels, sizeof labels);
    for (int k = 0; k < M0__STATUS_CLASSES; k++)
      m0__buf_printf(b, "m0_responses_total{%s,class=\"%dxx\"} %llu\n", labels, k + 1,
                     (unsigned long long)s[r].status[k]);
  }
  free(s);
  free(row);
}

/* By application actor, from its line on the page. */
static void metrics_actor_latency(m0__buf *b, m0__service *const *sv, int n) {
  if (n == 0) return;
  char labels[128];
  m0__buf_printf(b, "# HELP m0_actor_request_duration_seconds Time from a request's taking by an application actor "
                    "to its answer (any outcome).\n"
                    "# TYPE m0_actor_request_duration_seconds histogram\n");
  for (int i = 0; i < n; i++) {
    if (sv[i]->row < 0) continue;
    m0__latency_sum s = {0};
    m0__latency_sum_add(&s, &sv[i]->st->latency);
    snprintf(labels, sizeof labels, "actor=\"%s\"", sv[i]->name);
    metrics_histogram(b, "m0_actor_request_duration_seconds", labels, &s);
  }
}

/* The WebSockets of every loop, summed from the page. */
static void metrics_websockets(m0__buf *b, const m0__page *page) {
  unsigned long long opened = 0, in = 0, out = 0, closes[M0__PAGE_WS_CODES] = {0};
  for (uint32_t l = 0; l < page->head->loops; l++) {
    const m0__loop_figures *f = &page->loop_figures[l];
    opened += atomic_load_explicit(&f->ws_opened, memory_order_relaxed);
    in += atomic_load_explicit(&f->ws_in, memory_order_relaxed);
    out += atomic_load_explicit(&f->ws_out, memory_order_relaxed);
    for (int k = 0; k < M0__PAGE_WS_CODES; k++) closes[k] += atomic_load_explicit(&f->ws_closes[k], memory_order_relaxed);
  }
  m0__buf_printf(b, "# HELP m0_websockets_opened_total WebSockets begun (their 101 written).\n"
                    "# TYPE m0_websockets_opened_total counter\nm0_websockets_opened_total %llu\n"
                    "# HELP m0_websocket_messages_received_total WebSocket messages received whole.\n"
                    "# TYPE m0_websocket_messages_received_total counter\nm0_websocket_messages_received_total %llu\n"
                    "# HELP m0_websocket_messages_sent_total WebSocket messages the application sent (m0_ws_send).\n"
                    "# TYPE m0_websocket_messages_sent_total counter\nm0_websocket_messages_sent_total %llu\n"
                    "# HELP m0_websockets_closed_total WebSockets ended, by close code (1006: without a close "
                    "handshake).\n# TYPE m0_websockets_closed_total counter\n",
                 opened, in, out);
  for (int k = 0; k < M0__PAGE_WS_CODES; k++) {
    if (k < M0__PAGE_WS_CODES - 1)
      m0__buf_printf(b, "m0_websockets_closed_total{code=\"%d\"} %llu\n", m0__page_ws_codes[k], closes[k]);
    else m0__buf_printf(b, "m0_websockets_closed_total{code=\"other\"} %llu\n", closes[k]);
  }
}

void m0__metrics_respond(const m0__page *page, const char *process, const m0_app *app, m0__service *const *services,
                         int nservices, m0_response *res) {
  /* A line that cannot be formatted (out of memory) is left out; the page
   * is still answered. */
  m0__buf b = {0};
  FIGURE("requests_total", "Requests answered.", requests);
  FIELD("open_connections", "gauge", "Connections open now, streams included.", open);
  FIELD("streams", "gauge", "Streams open now: server-sent events and WebSockets.", streams);
  FIGURE("handoffs_total", "Connections handed to a sibling loop.", handoffs);
  FIGURE("http2_refused_total", "HTTP/2 streams reset and sessions ended for the client's fault.", h2_refused);
  FIELD("pool_queue", "gauge", "Requests waiting for or inside the handler pool.", queued);
  FIGURE("stream_frames_dropped_total", "Frames dropped for a subscriber: its queue was full, or the frame came late "
                                        "(after a higher id of its channel).", dropped);
  metrics_channel_drops(&b, page);
  m0__buf_printf(&b, "# HELP m0_bus_refusals_total Frames a publisher could not deliver to every loop.\n"
                     "# TYPE m0_bus_refusals_total counter\nm0_bus_refusals_total %llu\n",
                 (unsigned long long)atomic_load(&page->head->refused));
  m0__buf_printf(&b, "# HELP m0_respawns_total Worker processes respawned by the supervisor.\n"
                     "# TYPE m0_respawns_total counter\nm0_respawns_total %llu\n",
                 (unsigned long long)atomic_load(&page->head->respawns));
  m0__buf_printf(&b, "# HELP m0_events_published_total Event ids taken from the shared counter.\n"
                     "# TYPE m0_events_published_total counter\nm0_events_published_total %llu\n",
                 (unsigned long long)atomic_load(&page->head->event_id));
  /* Generations (host/reload.h): each one after the first is a reload that served. */
  uint64_t gen = atomic_load(&page->head->generation);
  m0__buf_printf(&b, "# HELP m0_generation The host's generation serving now (1 until a reload).\n"
                     "# TYPE m0_generation gauge\nm0_generation %llu\n"
                     "# HELP m0_reloads_total Reloads and upgrades whose new generation served.\n"
                     "# TYPE m0_reloads_total counter\nm0_reloads_total %llu\n"
                     "# HELP m0_last_reload_timestamp_seconds When the last reload's generation began serving "
                     "(unix time; 0: none).\n# TYPE m0_last_reload_timestamp_seconds gauge\n"
                     "m0_last_reload_timestamp_seconds %.3f\n",
                 (unsigned long long)gen, (unsigned long long)(gen > 1 ? gen - 1 : 0),
                 (double)atomic_load(&page->head->reloaded_ms) / 1000.0);
  metrics_bus(&b, page);
  metrics_websockets(&b, page);
  metrics_actors(&b, page, services, nservices);
  metrics_routes(&b, page, app);
  metrics_actor_latency(&b, services, nservices);
  m0__buf_printf(&b, "# HELP m0_refused_total Messages a mailbox refused (runtime/admit.h), by actor and reason, "
                     "in every process of the host.\n# TYPE m0_refused_total counter\n");
  m0__refusals_each(metrics_refusal, &b);
  m0__buf_printf(&b, "# HELP m0_deferred_late_total Deferred answers given after the host had answered 504 "
                     "(dropped).\n# TYPE m0_deferred_late_total counter\nm0_deferred_late_total %llu\n",
                 (unsigned long long)atomic_load(&page->figures->deferred_late));
  nng_stat *st;
  if (nng_stats_get(&st) == 0) {
    m0__buf_printf(&b, "# HELP m0_nng_stat nng's own statistics for this process, by the actor whose socket "
                       "they count.\n# TYPE m0_nng_stat untyped\n");
    metrics_nng(&b, process, st);
    nng_stats_free(st);
  }
  m0_respond(res, 200, "text/plain; version=0.0.4", b.p ? b.p : "", b.len, M0_BODY_COPY);
  m0__buf_free(&b);
}
