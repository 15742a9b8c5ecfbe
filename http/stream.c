/* Server-sent-event streams: a connection a view turned with
 * m0_respond_stream, the frames the bus brings, the heartbeat, and the
 * closing event at the drain.
 *
 * Design notes
 * - A stream is a connection from which nothing more is parsed (http/conn.c
 *   stops at its answer and reads are discarded); it has no deadline, so the
 *   sweep never times it out: the heartbeat and TCP keepalive find a peer
 *   that vanished.
 * - The cap counts only what waits behind the socket (q[0] + q[1]). Every
 *   frame or beat is flushed as soon as it is appended, so the shared scratch
 *   never holds a stream's bytes past the call. A frame that would pass the
 *   cap is dropped for that stream alone and counted (frames_dropped): one
 *   slow reader neither holds memory without bound nor slows the others.
 * - A frame is formatted once per loop ("id: N\n" + frame + "\n\n") and the
 *   same bytes are appended to every stream on its channel. Frames are
 *   checked before the bus (m0__frame_ok: no larger than the cap, no blank
 *   line, no CR, no id line of their own) and trusted here.
 * - A beat that does not fit is not retried at every sweep: the stream counts
 *   as written and is tried again a period later.
 * - The drain's closing event ignores the cap (it is the last thing a client
 *   gets, and says why, with a retry hint); the stream leaves the list first
 *   so no frame follows it, and closes once it is written.
 */
#include "http/stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/conn_state.h"

int m0__stream_begin(void *ctx, const char *channel) {
  m0__conn *c = ctx;
  m0__http *h = c->h;
  c->stream = true;
  snprintf(c->channel, sizeof c->channel, "%s", channel);
  c->snext = h->streams;
  c->sprev = NULL;
  if (h->streams) h->streams->sprev = c;
  h->streams = c;
  h->nstreams++;
  c->last_write = uv_now(h->uv);
  uv_tcp_keepalive(&c->tcp, 1, 60); /* a peer that vanished is found */
  return 0;
}

void m0__stream_forget(m0__conn *c) {
  m0__http *h = c->h;
  if (c->sprev) c->sprev->snext = c->snext;
  else h->streams = c->snext;
  if (c->snext) c->snext->sprev = c->sprev;
  h->nstreams--;
  c->stream = false;
}

/* Appends an event to one stream, unless its queue is full. A stream that is
 * closing takes nothing and drops nothing. */
static bool stream_push(m0__conn *c, const char *ev, size_t n) {
  if (c->closing || c->close_after) return true;
  if (m0__conn_queued(c) + n > M0__STREAM_QUEUE) return false;
  if (m0__outq_append(m0__conn_target(c), ev, n) != 0) return false;
  c->last_write = uv_now(c->h->uv);
  m0__conn_flush(c);
  return true;
}

uint64_t m0__http_publish(m0__http *h, const char *channel, size_t chlen, uint64_t id, const void *frame,
                          size_t flen) {
  if (!h->streams) return 0;
  char small[1024];
  size_t cap = flen + 32;
  char *ev = cap <= sizeof small ? small : malloc(cap);
  if (!ev) return (uint64_t)h->nstreams;
  int n = snprintf(ev, cap, "id: %llu\n", (unsigned long long)id);
  memcpy(ev + n, frame, flen);
  memcpy(ev + n + flen, "\n\n", 2);
  size_t len = (size_t)n + flen + 2;
  uint64_t dropped = 0;
  m0__conn *next;
  for (m0__conn *c = h->streams; c; c = next) {
    next = c->snext; /* a failed write closes c, which takes it off the list */
    if (strlen(c->channel) != chlen || memcmp(c->channel, channel, chlen) != 0) continue;
    if (!stream_push(c, ev, len)) dropped++;
  }
  if (ev != small) free(ev);
  h->stats.frames_dropped += dropped;
  return dropped;
}

void m0__stream_beat(m0__http *h, uint64_t now) {
  static const char beat[] = ": beat\n\n";
  m0__conn *next;
  for (m0__conn *c = h->streams; c; c = next) {
    next = c->snext;
    if (now - c->last_write >= h->heartbeat_ms && !stream_push(c, beat, sizeof beat - 1))
      c->last_write = now;
  }
}

void m0__stream_close_all(m0__http *h) {
  static const char bye[] = "event: m0.closing\ndata: {\"reason\":\"the server is going away\"}\nretry: 1000\n\n";
  m0__conn *next;
  for (m0__conn *c = h->streams; c; c = next) {
    next = c->snext;
    if (c->closing) continue;
    m0__outq_append(m0__conn_target(c), bye, sizeof bye - 1);
    m0__stream_forget(c);
    c->close_after = true;
    m0__conn_flush(c);
  }
}
