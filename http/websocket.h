/* A connection turned WebSocket (http/websocket.c): the upgrade, its frames
 * in and out, the close handshake. The protocol's pure parts are in
 * http/ws.h; its subscriptions are a stream's (http/stream.h). Everything
 * here runs on the connection's loop. */
#ifndef M0_HTTP_WEBSOCKET_H
#define M0_HTTP_WEBSOCKET_H

#include <stdbool.h>

#include "http/server.h"
#include "http/stream.h"
#include "http/ws.h"

/* The subprotocol whose messages are SSE events with their ids. */
#define M0__WS_EVENTS "m0.events"

/* What the upgrade agreed (m0_respond_websocket): permessage-deflate's
 * parameters, the subprotocol m0.events, and where the client said it was. */
typedef struct m0__ws_offer {
  m0__ws_pmd_params pmd; /* first: what m0__ws_begin reads as the deflate parameters */
  bool events;
  bool has_last;
  uint64_t last;
} m0__ws_offer;

/* m0_response's ws_begin on the loop (ctx: the m0__conn; pmd: an
 * m0__ws_offer): the 101 is in the scratch; the connection becomes a
 * WebSocket. NULL when out of memory, or when writing the 101 closed the
 * connection (no on_close then). */
m0_ws *m0__ws_begin(void *ctx, const m0_ws_handlers *hd, bool deflate, const void *pmd);
/* Bytes read from the socket (buf is writable: frames are unmasked in place). */
void m0__ws_read(m0_ws *ws, char *buf, size_t n);
/* The connection is closing: on_close, once. The memory stays (a read of
 * this socket may be on the stack) until m0__ws_free. */
void m0__ws_gone(m0_ws *ws);
/* The connection's memory goes (libuv's close callback): the socket's too. */
void m0__ws_free(m0_ws *ws);
/* Whether a channel's compressed frames (made once, with the loop's 15-bit
 * window) may go to this socket: it negotiated permessage-deflate and left
 * the server's window at 15 bits (http/ws.h, m0__ws_pmd_fits). */
bool m0__ws_deflating(const m0_ws *ws);
/* Whether the socket agreed to the subprotocol m0.events: published frames
 * go as SSE events (their ids, an m0.gap told in band), as a stream's. */
bool m0__ws_events(const m0_ws *ws);
/* The host closes the socket: a close frame with code, then the connection
 * closes once it is written (the drain, 1001). */
void m0__ws_goodbye(m0_ws *ws, int code, const char *reason);
/* The three above, for http/stream.c (http/stream.h). */
extern const m0__stream_ws_ops m0__ws_stream_ops;

#endif
