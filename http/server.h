/* The per-loop server's state and its seams (http/conn.h for what it does):
 * the struct the files of the server share (http/conn.c, dispatch.c,
 * write.c, stream.c, websocket.c, order.c), the table of what it asks of the
 * loop that drives it, and its settings. It includes nothing of those files,
 * so they include each other in one direction only.
 * Thread safety: an m0__http and its connections belong to one loop. */
#ifndef M0_HTTP_SERVER_H
#define M0_HTTP_SERVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "http/date.h"
#include "base/latency.h"
#include "http/parse.h"
#include "http/proxies.h"
#include "http/response.h"
#include "m0/m0.h"

typedef struct m0__conn m0__conn;

typedef struct m0__http_stats {
  uint64_t requests, accepted, closed, errors_4xx, timeouts, frames_dropped;
} m0__http_stats;

struct m0__http;

/* What the per-loop server asks of the loop that drives it: its seams. The
 * loop hands one const table to m0__http_init (actors/loop_http.c defines
 * it: a request's route out of http/ is conn_dispatch -> ops->X -> that
 * file); http/ knows no actor. A NULL entry is a seam this server lacks (a
 * harness's table: tests/fuzz). Every entry runs on the loop's thread. */
typedef struct m0__http_ops {
  /* A request for a handler pool, asked only when m0__http_config.pool is
   * set: every request not answered on the loop (not an on-loop route, not
   * answered by before_request). route is the index in app->routes, or -1
   * for app->handle; res is the answer begun on the loop (HEAD, close,
   * before_request's headers), which goes with it. Returns 0 when it took
   * the request; the connection then waits (parses nothing more) until
   * m0__http_complete. */
  int (*defer)(struct m0__http *h, m0__conn *c, const m0_request *req, int route, const m0_response *res);
  /* A route served by an application actor (route->actor set). Returns 0
   * when it took the request (the connection waits, as for defer, until
   * m0__http_answer, and res's headers go into that answer); else it
   * answered into res (503), or not (then 503 here). */
  int (*to_actor)(struct m0__http *h, m0__conn *c, const m0_request *req, const m0_route *route, m0_response *res);
  /* m0_defer on the loop. Returns the handle (the connection then waits
   * until m0__http_answer), or NULL. */
  m0_deferred *(*defer_view)(struct m0__http *h, m0__conn *c, m0_response *res, unsigned timeout_ms);
  /* m0_respond_writer on the loop (actors/writer.h). begin writes the head
   * and returns the writer (the connection then waits until
   * m0__http_resume), or NULL having answered (500) or not (no memory);
   * gone is called once when such a connection closes before its end,
   * progress when its socket took bytes. */
  m0_writer *(*writer_begin)(struct m0__http *h, m0__conn *c, m0_response *res, int status, const char *content_type,
                             void (*on_gone)(void *arg), void *arg);
  void (*writer_gone)(struct m0__http *h, m0__conn *c);
  void (*writer_progress)(struct m0__http *h, m0__conn *c);
  /* The metrics path's answer (m0__http_config.metrics_path). */
  void (*metrics)(struct m0__http *h, m0_response *res);
  /* A request answered here (on the loop, not deferred), once its answer
   * is begun; trace_flags are its traceparent's. */
  void (*served)(struct m0__http *h, const m0_request *req, uint8_t trace_flags, int status, size_t bytes);
  /* m0_respond_graph on the loop: the graph as JSON, or an actor's recent
   * trace records (records_of); malloc'd. */
  char *(*graph)(struct m0__http *h, const char *records_of);
  /* After a connection's memory is released. */
  void (*closed)(struct m0__http *h);
} m0__http_ops;

/* What the server is told at its init: the limits and timeouts (from the
 * configuration, through the loop's own config), and where its figures go. */
typedef struct m0__http_config {
  const m0_app *app;
  void *state;
  int worker;
  m0__parse_limits lim;
  uint64_t header_timeout_ms, body_timeout_ms, keepalive_timeout_ms;
  /* At the drain, how long a connection accepted but not yet read may still
   * send its first request (it gets its answer, the last); 0 = closed at once. */
  uint64_t drain_fresh_ms;
  long max_keepalive_requests;
  uint64_t heartbeat_ms; /* 0 = off */
  bool access_log;
  bool pool;               /* requests not answered on the loop go to ops->defer */
  const char *metrics_path; /* answered by ops->metrics; NULL or "": none */
  m0__proxies proxies; /* --trusted-proxies (n 0: none): whose Forwarded headers are believed */
  uint32_t history_max;     /* frames each channel keeps (--stream-history), 0 = none */
  size_t history_bytes_max; /* and bytes (--stream-history-bytes) */
  size_t ws_max_message;    /* --ws-max-message */
  /* Accept sharing: the loop's pass mark on the shared page (NULL without
   * sharing). A read stamps it (loop ms | 1) unless it is set, so a loop
   * inside a long view is seen by its siblings as stuck; the loop clears it
   * before it waits again (actors/loop.c). */
  _Atomic uint64_t *busy_since;
  struct m0__channel_line *chan_lines; /* the shared page's drops by channel (transport/page.h), or NULL */
  /* [app->nroutes + 1] request latency and status classes by route, the
   * last for requests no route answered: the loop's rows on the shared page
   * (base/latency.h; a route's row is its own, NULL when it has none:
   * transport/page.h, m0__page_rows), or NULL. */
  m0__latency **latency;
  struct m0__loop_figures *figures; /* the loop's figures on the shared page (WebSocket counts), or NULL */
  int io; /* the connections' transport asked for (http/io.h: m0__io_mode; 0 = libuv) */
  struct m0__tls_ctx *tls; /* HTTPS: every connection through this context (http/tls_io.h), or NULL */
  int https_port; /* with tls: the HTTPS listener's port, which the plain listener redirects to (http/plain.c) */
  bool http2; /* --http2: a connection that starts with HTTP/2's preface is served as HTTP/2 (http/h2.h) */
} m0__http_config;

typedef struct m0__http {
  uv_loop_t *uv;
  const m0__http_ops *ops; /* never NULL (an empty table when none was given) */
  const m0__response_ops *res_ops; /* what its views' answers may do here (http/dispatch.c) */
  const struct m0__stream_ws_ops *ws_ops; /* http/websocket.c's, for http/stream.c (m0__ws_stream_ops) */
  const struct m0__io_ops *io; /* the listener's connections' transport (http/io.h; the plain one's: libuv's) */
  void *io_ctx;                 /* its per-loop state (the ring), or NULL */
  void *owner;             /* the loop, for its ops */
  const m0_app *app;
  void *state;
  int worker;
  m0__parse_limits lim;
  uint64_t header_timeout_ms, body_timeout_ms, keepalive_timeout_ms;
  uint64_t drain_fresh_ms; /* m0__http_config's */
  long max_keepalive_requests;
  uint64_t heartbeat_ms; /* 0 = off */
  _Atomic uint64_t *busy_since; /* m0__http_config's */
  bool access_log;
  bool pool;
  bool draining;
  bool handover; /* draining because the next generation serves (m0__http_drain) */
  bool http2;    /* m0__http_config's */
  m0__proxies proxies;
  const char *metrics_path; /* NULL: none */
  size_t metrics_len;
  int https_port; /* m0__http_config's */
  m0__date date;
  m0__conn *conns; /* every open connection, for the sweep and the drain */
  int nconns;
  m0__conn *streams; /* the connections that are streams or WebSockets */
  int nstreams;
  struct m0__chan **chans; /* the channels this loop knows (http/stream.c), NULL until the first */
  int nchans;
  uint32_t history_max;
  size_t history_bytes_max;
  uint64_t history_from;    /* the first id this loop can have received: before it, a resume is told of a gap */
  const _Atomic uint64_t *ids; /* the shared event-id counter, or NULL: a resume past it is from another run */
  size_t ws_max_message;
  struct m0__ws_deflater *wsz; /* compresses WebSocket messages (permessage-deflate), made at the first */
  struct m0__channel_line *chan_lines;
  m0__http_stats stats;
  m0__latency **latency; /* m0__http_config's */
  struct m0__loop_figures *figures;
  /* Shared by every connection of the loop, used within one callback: reads
   * land in rbuf, responses are built in scratch and written at once; only
   * what cannot be written or parsed yet is copied to the connection. */
  char *rbuf;
  m0__outq scratch;
  m0_header hdrs[M0__MAX_HEADERS];
  m0__span_pool spans; /* header spans lent to the parser of a request */
  m0_writer *writers; /* the loop's, listed by actors/writer.c */
  uint64_t graph_next_ms; /* the sweep's next graph frame to the m0.graph streams */
} m0__http;

#define M0__RBUF_SIZE 65536

#endif
