/* The loop's seams with http/ (actors/loop_http.h): the one table through
 * which a request leaves the per-loop server, and where each entry goes.
 * Following a request: http/dispatch.c (conn_dispatch) -> ops->X -> here ->
 * the file named beside X below. h->owner is the loop; everything runs on
 * the loop's thread. */
#include "actors/loop_http.h"

#include "actors/accept.h"
#include "actors/asks.h"
#include "actors/lane.h"
#include "actors/loop_end.h"
#include "runtime/trace.h"
#include "actors/writer.h"

/* A request this loop answered itself: a record when tracing (runtime/trace.h). */
static void loop_served(m0__http *h, const m0_request *req, uint8_t trace_flags, int status, size_t bytes) {
  if (!atomic_load_explicit(&m0__trace_live, memory_order_relaxed)) return;
  m0__loop *l = h->owner;
  m0__trace_served(l->trace, l->self.id, req->trace_hi, req->trace_lo, trace_flags, h->stats.requests, bytes);
}

/* A connection is gone: room for another, and maybe the drain's end. */
static void loop_on_closed(m0__http *h) {
  m0__loop *l = h->owner;
  atomic_fetch_sub(&m0__loop_line_at(l, l->index)->open, 1);
  if (!l->stopping && h->nconns < l->ctx.capacity) m0__accept_poll(l, true);
  m0__loop_maybe_finish(l);
}

/* The host's answers (m0__loop_config: host/coordinator.c); the metrics
 * path is given to http/ only when the host has its answer (actors/loop.c). */
static void loop_metrics(m0__http *h, m0_response *res) {
  m0__loop *l = h->owner;
  l->host_metrics(l, res);
}

static char *loop_graph(m0__http *h, const char *records_of) {
  m0__loop *l = h->owner;
  return l->host_graph ? l->host_graph(l, records_of) : NULL;
}

const m0__http_ops m0__loop_http_ops = {
    .defer = m0__lane_defer,                 /* the pool lane: actors/lane.c */
    .to_actor = m0__asks_to_actor,           /* an application actor: actors/asks.c */
    .defer_view = m0__asks_defer_view,       /* m0_defer: actors/asks.c */
    .writer_begin = m0__writer_begin,        /* m0_respond_writer: actors/writer.c */
    .writer_gone = m0__writer_gone,
    .writer_progress = m0__writer_progress,
    .metrics = loop_metrics,                 /* host/metrics.c, through the loop's config */
    .served = loop_served,                   /* the tracer: runtime/trace.c */
    .graph = loop_graph,                     /* host/observer.c, through the loop's config */
    .closed = loop_on_closed,                /* accept (actors/accept.c) and the drain (actors/loop_end.c) */
};
