/* Server-sent-event streams of the per-loop server (http/stream.c); the
 * connection's side is in http/conn.c. Everything here runs on the loop. */
#ifndef M0_HTTP_STREAM_H
#define M0_HTTP_STREAM_H

#include <stdint.h>

#include "http/conn.h"

/* A stream's queue cap: a frame that would take what waits behind its socket
 * past this is dropped for that stream alone. */
#define M0__STREAM_QUEUE (64u * 1024u)

/* m0_response's stream_begin on the loop (ctx: the m0__conn): the connection
 * joins h->streams on the channel. Returns 0. */
int m0__stream_begin(void *ctx, const char *channel);
/* Takes a closing stream out of h->streams. */
void m0__stream_forget(m0__conn *c);
/* From the sweep: a beat to every stream idle for h->heartbeat_ms. */
void m0__stream_beat(m0__http *h, uint64_t now);
/* From the drain: every stream gets its closing event and leaves h->streams,
 * to close once that event is written. */
void m0__stream_close_all(m0__http *h);

#endif
