/* Channels and their subscribers on one loop (http/stream.c): server-sent-
 * event streams and WebSockets (http/websocket.c) alike, the frames the bus
 * brings, each channel's history for reconnecting clients, the heartbeat,
 * and the closing at the drain. Everything here runs on the loop. */
#ifndef M0_HTTP_STREAM_H
#define M0_HTTP_STREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "http/server.h"

/* A subscriber's queue cap: a frame that would take what waits behind its
 * socket past this is dropped for that subscriber alone, counted by
 * channel, and the subscriber is told (a stream: an m0.gap event once it
 * has room; a WebSocket: closed with M0__STREAM_WS_LOST). */
#define M0__STREAM_QUEUE (64u * 1024u)
/* The close code a WebSocket that lost a frame is closed with (RFC 6455's
 * "Try Again Later": the server casts off a client it cannot serve now). */
#define M0__STREAM_WS_LOST 1013
/* The drain's goodbye waits this long behind bytes its client has not read
 * (http/stream.c, m0__stream_goodbye), then the connection is closed. */
#define M0__STREAM_GOODBYE_MS 1000
/* Channels a loop knows at most (each with its history). */
#define M0__CHANNELS_MAX 1024

typedef struct m0__chan m0__chan;

/* What a channel asks of a WebSocket subscriber, given by http/websocket.c
 * (m0__ws_stream_ops, on m0__http's ws_ops): a WebSocket subscribes to
 * channels, and a channel closes a WebSocket that lost a frame, so the two
 * files meet through this table rather than include each other. */
typedef struct m0__stream_ws_ops {
  bool (*events)(const struct m0_ws *ws);    /* it agreed to m0.events: frames go as SSE events */
  bool (*deflating)(const struct m0_ws *ws); /* a channel's compressed frames may go to it */
  void (*goodbye)(struct m0_ws *ws, int code, const char *reason); /* a close frame, then the close */
} m0__stream_ws_ops;

/* Writes one event to every stream on the channel: "id: N\n" + frame +
 * "\n\n". Returns how many streams dropped it (their queue was full). */
uint64_t m0__http_publish(m0__http *h, const char *channel, size_t chlen, uint64_t id, const void *frame,
                          size_t flen);

/* One published frame on one loop, encoded once per framing and written to
 * every subscriber from these bytes (m0__outq_hold): refcounted by the
 * history and by every queue that holds it. */
typedef struct m0__sframe {
  uint32_t refs;
  uint64_t id;   /* 0: unnumbered (the fleet's link is down: never in a history) */
  char *ws;      /* the WebSocket text message (header + the frame's data), made at the first WebSocket */
  char *wsz;     /* the same, compressed (permessage-deflate), made at the first such socket */
  char *wse;     /* the m0.events message (header + the SSE event without its blank line), made at the first */
  uint32_t wse_len;
  uint32_t ws_len, wsz_len;
  bool ws_none;  /* the frame has no data field: no WebSocket message (as EventSource dispatches none) */
  uint32_t sse_len;
  char sse[];    /* "id: N\n" + the frame's lines + "\n\n" */
} m0__sframe;

/* A frame's WebSocket forms (http/sframe.c), each made once: the text
 * message of its data (z: compressed with the loop's deflater), false when
 * it has no data field or memory ran out; the m0.events message. */
bool m0__sframe_ws(m0__http *h, m0__sframe *f, bool z);
bool m0__sframe_wse(m0__sframe *f);
/* One holder lets the frame go; the last frees it (m0__outq_hold's release). */
void m0__sframe_release(void *arg);

/* How a subscriber is sent frames: an SSE stream's event, a WebSocket's
 * m0.events message, or a plain WebSocket's text message (compressed or
 * not). A WebSocket's subprotocol and compression are agreed at its
 * upgrade, before it subscribes. */
enum { M0__SUB_SSE, M0__SUB_WSE, M0__SUB_WS, M0__SUB_WSZ };

/* A connection's place in one channel. */
typedef struct m0__sub {
  struct m0__sub *next, *prev; /* in the channel */
  struct m0__sub *cnext;       /* the connection's other subscriptions */
  m0__chan *ch;
  m0__conn *c;
  uint64_t after;  /* the last id it was given (first: its Last-Event-ID) */
  uint64_t resumed; /* its Last-Event-ID: a frame at or below it, reaching this loop late, the client has */
  bool replay;     /* the held frames after `after` are still to come (m0__stream_replay) */
  uint8_t form;    /* how frames go to it (M0__SUB_*), known at the subscription: no look into the socket per frame */
  uint32_t lost;   /* frames dropped for it (its queue was full, or late) and not told yet */
  uint64_t lost_first, lost_last; /* their ids (0: only unnumbered ones) */
} m0__sub;

/* m0_response's stream_begin on the loop (ctx: the m0__conn): the
 * connection becomes a stream subscribed to channel, its head written.
 * When the client sent Last-Event-ID (has_last), the frames after last
 * still held are to come, after the view's own (m0__stream_replay). 0, or
 * M0__ENOMEM or M0__ETOOBIG (too many channels): nothing was subscribed. */
int m0__stream_begin(void *ctx, const char *channel, bool has_last, uint64_t last);
/* After the view that opened the stream or the WebSocket returned
 * (http/conn.c): the held frames after its Last-Event-ID (behind an m0.gap
 * event when some may be missing; a plain WebSocket is closed with 1013
 * instead), every subscribed channel's in id order, so the view's own
 * frames (m0_stream_write, m0_ws_send) come first, as promised. Nothing
 * when none was asked. May close c (a write error). */
void m0__stream_replay(m0__conn *c);
/* The connection's queue is written out (http/conn.c): a stream that lost
 * frames is told which, now that there is room (an m0.gap event). May
 * close c (a write error). */
void m0__stream_caught_up(m0__conn *c);
/* m0_stream_write on the loop: one event to this stream alone. 0,
 * M0__ENOMEM, or M0__ETOOBIG (its queue full, or no memory: dropped). */
int m0__stream_write(void *ctx, const void *frame, size_t len);
/* A long-lived connection (a stream or a WebSocket) joins h->streams: no
 * deadline, the heartbeat, the drain's goodbye. */
void m0__stream_enlist(m0__conn *c);
/* Subscribes c to channel (a WebSocket may hold several). 0, 1 when it
 * already was, M0__ETOOBIG (too many channels on the loop) or M0__ENOMEM. */
int m0__stream_subscribe(m0__conn *c, const char *channel, size_t n);
/* The same for a client that said where it was (has_last: a WebSocket's
 * last_event_id): the frames after last still held are to come once the
 * view returned (m0__stream_replay). */
int m0__stream_subscribe_from(m0__conn *c, const char *channel, size_t n, bool has_last, uint64_t last);
/* Takes a closing connection out of h->streams and its channels. */
void m0__stream_forget(m0__conn *c);
/* From the sweep: a beat to every stream idle for h->heartbeat_ms. */
void m0__stream_beat(m0__http *h, uint64_t now);
/* From the sweep: about once a second, while some stream of this loop is on
 * the graph's channel (M0__GRAPH_CHANNEL), the graph as an event to each. */
void m0__stream_graph(m0__http *h, uint64_t now);
/* From the drain: every stream gets its closing event (a WebSocket its
 * close frame, 1001) and leaves h->streams, to close once that is written. */
void m0__stream_close_all(m0__http *h);
/* The drain's goodbye to one stream: an m0.closing event with a retry hint
 * (clients come back, to the next generation after a reload), then the
 * close. For the streams open when the drain begins and one begun after. */
void m0__stream_goodbye(m0__conn *c);
/* The ids in (from, until] were numbered for another generation's loops
 * after this loop began (actors/loop.c, loop_hole): every stream that has
 * no id at or past until is told they may be missing (m0.gap, before its
 * next frame), and a resume below until is a gap. */
void m0__stream_hole(m0__http *h, uint64_t from, uint64_t until);
/* Frees every channel and its history (m0__http_fini). */
void m0__stream_fini(m0__http *h);

#endif
