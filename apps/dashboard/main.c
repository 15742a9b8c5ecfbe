/* dashboard — the README's demo: a page that draws, live, what the host is
 * doing, fed by a stream from the producer.
 *   GET /         the page (embedded, written without a copy)
 *   GET /events   on the loop: a stream of "stats" events twice a second:
 *                 {"t":ms,"mode":M,"pid":P,"loops":[{"rps","requests","open",
 *                 "streams","handoffs","queued","dropped"}, ...]}
 *   GET /hello    on the loop: a tiny answer to put load on
 *   GET /health   on the loop: {"status":"ok"}
 *   GET /graph    on the loop: the host's actors as a graph (m0_respond_graph),
 *                 which the page draws once a second: the observer
 *   GET, POST /echo  served by actor `echo` (apps/echo_actor/echo.h): on a
 *                 thread of the host, unless a topology file places it
 *                 elsewhere (an outside echo_actor, say)
 * The producer reads the host's shared page (m0_stats), so the figures are
 * the same whichever loop or worker serves the page.
 */
#include <m0/m0.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../echo_actor/echo.h"

extern const unsigned char dashboard_page[];
extern const size_t dashboard_page_len;

#define MAX_LOOPS 256
#define PERIOD_NS 500000000ll

static void view_page(void *state, const m0_request *req, m0_response *res) {
  m0_respond(res, 200, "text/html; charset=utf-8", dashboard_page, dashboard_page_len, M0_BODY_STATIC);
}

static void view_events(void *state, const m0_request *req, m0_response *res) { m0_respond_stream(res, "dash"); }

static void view_hello(void *state, const m0_request *req, m0_response *res) {
  static const char body[] = "hello from m0\n";
  m0_respond(res, 200, "text/plain", body, sizeof body - 1, M0_BODY_STATIC);
}

static void view_health(void *state, const m0_request *req, m0_response *res) {
  static const char body[] = "{\"status\":\"ok\"}";
  m0_respond(res, 200, "application/json", body, sizeof body - 1, M0_BODY_STATIC);
}

static void view_graph(void *state, const m0_request *req, m0_response *res) { m0_respond_graph(res); }

static const m0_route routes[] = {
    {"GET", "/health", view_health, M0_ON_LOOP},
    {"GET", "/graph", view_graph, M0_ON_LOOP},
    {"GET", "/echo", NULL, 0, "echo"},
    {"POST", "/echo", NULL, 0, "echo"},
    {"GET", "/", view_page, M0_ON_LOOP},
    {"GET", "/events", view_events, M0_ON_LOOP},
    {"GET", "/hello", view_hello, M0_ON_LOOP},
};

typedef struct dash {
  m0_loop_stats last[MAX_LOOPS];
  struct timespec at;
  const char *mode;
  bool primed;
} dash;

static void *dash_make(const m0_ctx *ctx, char *err, size_t errlen) {
  dash *d = calloc(1, sizeof *d);
  long w = 1, t = 1;
  m0_config_get(ctx->config, "workers", &w);
  m0_config_get(ctx->config, "threads", &t);
  d->mode = w > 1 ? "prefork" : t > 1 ? "threads" : "single";
  return d;
}

static int64_t dash_step(void *state, m0_publisher *pub) {
  dash *d = state;
  m0_loop_stats now[MAX_LOOPS];
  int n = m0_stats(pub, now, MAX_LOOPS);
  if (n > MAX_LOOPS) n = MAX_LOOPS;
  struct timespec at;
  clock_gettime(CLOCK_MONOTONIC, &at);
  double secs = (double)(at.tv_sec - d->at.tv_sec) + (double)(at.tv_nsec - d->at.tv_nsec) / 1e9;
  char frame[256 + MAX_LOOPS * 160];
  int len = snprintf(frame, sizeof frame, "event: stats\ndata: {\"t\":%lld,\"mode\":\"%s\",\"pid\":%d,\"loops\":[",
                     (long long)at.tv_sec * 1000 + at.tv_nsec / 1000000, d->mode, (int)getpid());
  for (int i = 0; i < n; i++) {
    double rps = d->primed && secs > 0 ? (double)(now[i].requests - d->last[i].requests) / secs : 0;
    len += snprintf(frame + len, sizeof frame - (size_t)len,
                    "%s{\"rps\":%.0f,\"requests\":%llu,\"open\":%llu,\"streams\":%llu,\"handoffs\":%llu,"
                    "\"queued\":%llu,\"dropped\":%llu}",
                    i ? "," : "", rps, (unsigned long long)now[i].requests, (unsigned long long)now[i].open,
                    (unsigned long long)now[i].streams, (unsigned long long)now[i].handoffs,
                    (unsigned long long)now[i].queued, (unsigned long long)now[i].dropped);
  }
  len += snprintf(frame + len, sizeof frame - (size_t)len, "]}");
  memcpy(d->last, now, sizeof now[0] * (size_t)n);
  d->at = at;
  d->primed = true;
  m0_publish(pub, "dash", m0_next_id(pub), frame, (size_t)len);
  return PERIOD_NS;
}

static const m0_producer producer = {.make = dash_make, .step = dash_step, .free = free};

static const m0_actor_kind actors[] = {echo_kind};

static const m0_app app = {.name = "dashboard",
                           .routes = routes,
                           .nroutes = sizeof routes / sizeof routes[0],
                           .actors = actors,
                           .nactors = sizeof actors / sizeof actors[0]};

int main(int argc, char **argv) { return m0_serve(&app, &producer, argc, argv); }
