/* The state of HTTP/2 connections and streams, private to http/h2.c (the
 * session, the frames, the answers made at once), http/h2_away.c (the
 * requests that leave the loop and their later answers) and http/h2_time.c
 * (the deadlines). Design notes in
 * http/h2.c. Everything here runs on the connection's loop. */
#ifndef M0_HTTP_H2_STATE_H
#define M0_HTTP_H2_STATE_H

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"
#include "http/conn_state.h"
#include "http/outq.h"
#include "http/response.h"

typedef struct m0__h2_stream m0__h2_stream;

#define M0__H2_RESET_IDS 16 /* streams reset lately whose HEADERS may still come (http/h2_guard.c) */

/* An HTTP/2 connection's session (c->h2). */
struct m0__h2 {
  nghttp2_session *s;
  m0__h2_stream *streams; /* every stream opened, until its close */
  int deferred;       /* streams whose DATA waits for the queue to drain */
  int waiting;        /* streams whose request is away (a stand-in each) */
  size_t bodies;      /* request body bytes its open streams hold */
  bool draining;      /* told to go (the first GOAWAY, 2^31-1): streams still taken */
  bool told;          /* the last GOAWAY submitted (the last stream taken): close once none waits */
  uint64_t ack_by;    /* draining: the last GOAWAY goes then without the PING's ACK (the loop's ms) */
  bool cut;           /* past ack_by: SSE streams whose goodbye is unsent were reset (http/h2_drain.c) */
  bool refused;       /* the session was ended for the client's fault: counted once */
  uint64_t moved_at;  /* when an answer's DATA last went to nghttp2 (the loop's ms): the send timeout */
  /* http/h2_guard.c's */
  uint32_t resets;    /* RST_STREAM the client may still send now (Rapid Reset: a bucket) */
  uint64_t resets_at; /* when the bucket was last filled (the loop's ms) */
  int32_t last_id;    /* the highest request stream id seen */
  int32_t reset_ids[M0__H2_RESET_IDS]; /* the streams the host reset lately */
  unsigned reset_next;
};

/* A stream's stand-in while its request is away: what the loop's seams
 * (the handler threads, m0_defer) hold and answer, as they would a
 * connection. It has no socket: its queues are never written. Freed by
 * the answer (m0__h2_complete, m0__h2_answer), which always comes; st is
 * NULL once the stream closed meanwhile. */
typedef struct m0__h2_proxy {
  m0__conn c; /* first */
  m0__h2_stream *st;
} m0__h2_proxy;

typedef struct m0__h2_span {
  uint32_t off, len;
} m0__h2_span;

struct m0__h2_stream {
  int32_t id;
  m0__conn *c;     /* its connection */
  m0__h2_proxy *proxy; /* its stand-in while its request is away, or NULL */
  m0__h2_stream *next, *prev; /* in m0__h2.streams */
  m0__buf hb; /* the header bytes the spans point into */
  m0__h2_span name[M0__MAX_HEADERS], value[M0__MAX_HEADERS];
  int nheaders;
  m0__h2_span method, path, authority;
  size_t hbytes; /* the header list's size as RFC 9113 counts it */
  uint64_t trace_hi, trace_lo, trace_parent; /* its traceparent's (0: none) */
  uint8_t trace_flags;
  m0__buf body;
  bool refused;  /* a header over the limits: reset */
  bool too_big;  /* a body over the limit: 413 */
  bool deferred; /* its DATA waits (H2_OUT_HIGH) */
  uint64_t due;  /* while its request comes: the header or body deadline (the loop's ms); 0: whole */
  m0__outq out;  /* the answer, as HTTP/1.1 bytes */
  size_t head_len, body_len, sent;
  m0__conn *sse; /* a server-sent-event stream's stand-in, or a writer's (http/h2_stream.c), or NULL */
  struct m0__h2_pieces *pieces; /* a reply in pieces (http/h2_stream.c), or NULL */
  size_t stuck_left;            /* a writer's: its bytes queued when last seen to move (http/h2_time.c) */
  uint64_t stuck_by;            /* and when it is stuck if none has moved since (the loop's ms) */
};

/* The HTTP/1.1 answer in st->out as HEADERS, and the rest as DATA: 0 or
 * an nghttp2 error. */
int m0__h2_submit(m0__conn *c, m0__h2_stream *st);
/* The connection's deadline: its streams' header and body deadlines, and
 * the keep-alive timeout from now (none while an answer is away). */
void m0__h2_deadline(m0__conn *c);
/* A PING's ACK (the drain's round trip: the last GOAWAY goes). */
int m0__h2_drain_acked(m0__conn *c, const nghttp2_frame *f);
/* Past ack_by (the sweep's turn, whatever the connection's deadline):
 * the last GOAWAY goes without the ACK, and SSE streams whose goodbye is
 * still unsent are reset. Whether either was done. */
bool m0__h2_drain_late(m0__conn *c, uint64_t now);
/* What a client may not do that nghttp2 lets by (http/h2_guard.c): the
 * bucket of RST_STREAM filled at the start; a RST_STREAM received (Rapid
 * Reset); one sent (its stream's HEADERS may still come); a frame's
 * header (nghttp2's on_begin_frame: stream ids that go down). */
void m0__h2_guard_init(m0__conn *c);
int m0__h2_guard_reset(m0__conn *c);
void m0__h2_guard_sent_reset(m0__conn *c, int32_t id);
int m0__h2_guard_begin(nghttp2_session *s, const nghttp2_frame_hd *hd, void *ud);
/* What the session has to say, into the connection's target queue. */
void m0__h2_pump(m0__conn *c);
/* Whether the connection holds more unwritten than its mark (DATA then
 * waits: NGHTTP2_ERR_DEFERRED, resumed by the sweep). */
bool m0__h2_full(m0__conn *c);
/* The request to the handler threads (route -1: app->handle) through a
 * stand-in; true when it went, else res is answered (503). */
bool m0__h2_to_pool(m0__h2_stream *st, const m0_request *req, int route, m0_response *res);
/* The request to route's application actor through a stand-in; true when
 * it went, else res is answered (503, or the actor's refusal). */
bool m0__h2_to_actor(m0__h2_stream *st, const m0_request *req, const m0_route *r, m0_response *res);
/* SSE over HTTP/2 (http/h2_stream.c): m0_respond_stream and
 * m0_stream_write on a stream (ctx: the stream), as http/stream.h's; its
 * DATA from the stand-in once the view returned (dp's read callback, the
 * replay); its end (the stream closed: the stand-in unsubscribed). */
int m0__h2_stream_begin(void *ctx, const char *channel, bool has_last, uint64_t last);
int m0__h2_stream_write(void *ctx, const void *frame, size_t len);
void m0__h2_sse_open(m0__h2_stream *st, nghttp2_data_provider *dp);
void m0__h2_sse_end(m0__h2 *h2, m0__h2_stream *st);
/* What a view may do over HTTP/2 (ctx: the stream). */
extern const m0__response_ops m0__h2_res_ops;

#endif
