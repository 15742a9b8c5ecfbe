/* The response writer: m0_respond and its kin append a whole response (head
 * and body) to an output queue (http/outq.h), which the caller writes. */
#ifndef M0_HTTP_RESPONSE_H
#define M0_HTTP_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "base/limits.h"
#include "http/date.h"
#include "http/outq.h"
#include "m0/m0.h"

/* The headers an application adds to one response (Set-Cookie, CSP and the
 * like): 8 KiB, nginx's large header buffer. */
#define M0__EXTRA_HEADERS 8192

/* What a view's answer may do on the loop beyond its bytes (http/dispatch.c
 * holds the one table; ctx is the connection). A NULL entry: not here. */
typedef struct m0__response_ops {
  /* Turns the connection into a stream (m0_respond_stream), then writes to
   * it (m0_stream_write). */
  int (*stream_begin)(void *ctx, const char *channel, bool has_last, uint64_t last);
  int (*stream_write)(void *ctx, const void *frame, size_t len);
  /* The upgrade to a WebSocket (http/websocket.c): the 101 is in out. */
  m0_ws *(*ws_begin)(void *ctx, const m0_ws_handlers *hd, bool deflate, const void *pmd);
  /* Take the answer out of the view (m0_defer, m0_respond_writer;
   * `deferred` once one did). */
  m0_deferred *(*defer_begin)(void *ctx, m0_response *res, unsigned timeout_ms);
  m0_writer *(*writer_begin)(void *ctx, m0_response *res, int status, const char *content_type,
                             void (*on_gone)(void *arg), void *arg);
  /* m0_respond_graph: the host's actor graph as JSON, or (records_of not
   * NULL) that actor's recent trace records (host/observer.h); malloc'd,
   * NULL when out of memory. */
  char *(*graph)(void *ctx, const char *records_of);
} m0__response_ops;

struct m0_response {
  m0__outq *out;
  m0__date *date;
  int version_minor;
  bool head;  /* HEAD: headers and length, no body */
  bool close; /* the connection closes after this response */
  bool done;
  int status;
  size_t body_len;
  /* Set on the loop only (NULL on a pool thread): its seams, and their ctx. */
  const m0__response_ops *ops;
  void *ops_ctx;
  const m0_request *req; /* the request being answered (for a deferred answer's log line) */
  bool deferred;
  bool streaming; /* m0_respond_stream turned it into a stream: m0_stream_write may add to it */
  size_t extra_len;
  char extra[M0__EXTRA_HEADERS];
};

void m0__response_init(m0_response *r, m0__outq *out, m0__date *date, int version_minor, bool head,
                       bool close);
/* The trace id (from traceparent) of the request a view on this thread is
 * answering, so what the view causes (a published frame) carries it. */
typedef struct m0__trace_id {
  uint64_t hi, lo;
} m0__trace_id;
extern _Thread_local m0__trace_id m0__current_trace;

/* m0_response_header with lengths (a header from an actor's reply is not
 * NUL-terminated). 0, M0__EINVALID (refused, as m0_response_header
 * refuses) or M0__ETOOBIG (no room left). */
int m0__response_header_n(m0_response *res, const char *name, size_t nn, const char *value, size_t vn);
/* A response the host itself makes (errors, 404/405, OPTIONS). */
void m0__respond_status(m0_response *r, int status, const char *allow);
/* Where a reconnecting client of a stream or a WebSocket says it was: the
 * Last-Event-ID header (what EventSource sends), else the query's
 * last_event_id (what a browser's WebSocket, which cannot set a header,
 * sends), as a decimal id. false when neither is one. */
bool m0__last_event_id(const m0_request *req, uint64_t *last);
/* What m0_respond and its kin send as a body: bytes (copied, or referenced
 * when static), an owned buffer (free_fn), or a file piece (fd >= 0, len
 * bytes from off). An owned buffer or a descriptor is the host's from the
 * call: freed or closed whatever becomes of the response. */
enum { M0__BODY_LENGTH = 0, M0__BODY_CHUNKED, M0__BODY_UNTIL_CLOSE };
typedef struct m0__body {
  const void *p;
  size_t len;
  unsigned mode; /* M0_BODY_COPY or M0_BODY_STATIC */
  void (*free_fn)(void *);
  int fd;
  uint64_t off;
  /* LENGTH: Content-Length and the body here; CHUNKED and UNTIL_CLOSE: only
   * the head (Transfer-Encoding: chunked, or neither, and the connection
   * closes), the body comes later (a writer). */
  int framing;
} m0__body;
/* The one writer of a response's head and body: the status and
 * Content-Type checks, RFC 9110's body rules, HEAD. 0, M0__EINVALID
 * (answered 500 when the view's status or type is at fault) or M0__ENOMEM. */
int m0__respond_body(m0_response *res, int status, const char *content_type, const m0__body *b);
/* Whether the application added a header of that name (case-insensitive). */
bool m0__response_has_header(const m0_response *res, const char *name);
const char *m0__status_reason(int status);
/* A channel name a stream or a publisher may use. */
bool m0__channel_ok(const char *channel);
bool m0__channel_ok_n(const char *channel, size_t n); /* the same, of n bytes that need no NUL */
/* What a frame may hold (M0__FRAME_MAX, base/limits.h). */
bool m0__frame_ok(const void *frame, size_t len);

/* The host's own stream of its actor graph (m0_respond_graph asked with
 * Accept: text/event-stream): a channel no application can name. */
#define M0__GRAPH_CHANNEL "m0.graph"
/* A graph (JSON, no newline) as the frame of one "graph" event, malloc'd
 * (*len its length), or NULL. A graph larger than half a stream's queue
 * (32 KiB: a slow reader's next could find no room, and be dropped) is
 * the frame {"fetch":true} instead: the page then asks for it as JSON. */
char *m0__graph_event(const char *json, size_t *len);

#endif
