/* An HTTP/2 connection's time (the sweep's turn, http/conn.c): its
 * streams' header and body deadlines (slowloris), the keep-alive timeout
 * and the GOAWAY of an idle connection. Design notes in http/h2.c.
 * Everything here runs on the connection's loop. */
#include <nghttp2/nghttp2.h>
#include <stdint.h>

#include "http/conn.h"
#include "http/h2.h"
#include "http/h2_state.h"

/* Whether an answer waits for the client: its DATA not all sent (its
 * flow-control window shut, or the socket full). */
static bool h2_held(const m0__conn *c) {
  for (const m0__h2_stream *st = c->h2->streams; st; st = st->next)
    if (st->sent < st->body_len) return true;
  return false;
}

/* An answer held by the client (h2_held) has HTTP/1.1's send timeout: no
 * DATA gone for --body-timeout-ms, as an HTTP/1.1 client that reads none
 * of its answers (http/conn.c): its PINGs and other frames do not put it
 * off. */
void m0__h2_deadline(m0__conn *c) {
  uint64_t d = c->h2->waiting ? UINT64_MAX : uv_now(c->h->uv) + c->h->keepalive_timeout_ms;
  for (m0__h2_stream *st = c->h2->streams; st; st = st->next)
    if (st->due && st->due < d) d = st->due;
  if (h2_held(c) && c->h2->moved_at + c->h->body_timeout_ms < d) d = c->h2->moved_at + c->h->body_timeout_ms;
  if (c->h2->draining && !c->h2->told && c->h2->ack_by < d) d = c->h2->ack_by; /* http/h2_drain.c */
  c->deadline = d;
}

/* Streams whose head or body did not come within its timeout (slowloris)
 * are reset (CANCEL), each counted among the loop's timeouts, as HTTP/1.1's
 * 408; the connection and its other streams go on. Whether one was. */
static bool h2_late(m0__conn *c, uint64_t now) {
  bool late = false;
  for (m0__h2_stream *st = c->h2->streams; st; st = st->next) {
    if (!st->due || st->due > now) continue;
    st->due = 0;
    late = true;
    c->h->stats.timeouts++;
    nghttp2_submit_rst_stream(c->h2->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
  }
  return late;
}

/* A writer's stream whose client took none of its queued pieces within
 * the body timeout (a window it never opens) is reset (CANCEL), counted
 * among the loop's timeouts, as HTTP/1.1's stuck writer is closed
 * (http/conn.c, conn_stuck_writer): the stream's close tells the writer it
 * is gone. The connection and its other streams go on. Whether one was. */
static bool h2_stuck_writers(m0__conn *c, uint64_t now) {
  bool stuck = false;
  for (m0__h2_stream *st = c->h2->streams; st; st = st->next) {
    m0__conn *pc = st->sse;
    if (!pc || !pc->writer || pc->closing || st->stuck_by == UINT64_MAX) continue;
    size_t left = m0__conn_queued(pc);
    if (!st->stuck_by || left == 0 || left != st->stuck_left) { /* moved, or waits on its writer: not stuck */
      st->stuck_left = left;
      st->stuck_by = now + c->h->body_timeout_ms;
    } else if (now >= st->stuck_by) {
      st->stuck_by = UINT64_MAX; /* reset once */
      stuck = true;
      c->h->stats.timeouts++;
      nghttp2_submit_rst_stream(c->h2->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
    }
  }
  return stuck;
}

#define H2_GOAWAY_LINGER_MS 1000 /* an idle connection's GOAWAY: closed once written, or then */

bool m0__h2_tick(m0__conn *c, uint64_t now) {
  m0__h2_sweep(c);
  m0__conn_flush(c);
  if (c->closing) return true;
  /* The drain's bound before the deadline (none under an SSE stream): http/h2_drain.c. */
  if (m0__h2_drain_late(c, now)) return true; /* no ACK: the last GOAWAY, then as any */
  if (h2_stuck_writers(c, now)) { /* whatever the deadline: none while a writer's stream is open */
    m0__h2_sweep(c);
    m0__conn_flush(c);
    return true;
  }
  if (now < c->deadline) return true;
  if (c->close_after || c->h2->draining) return false; /* told, and past its bound: the sweep closes it */
  if (h2_held(c) && now >= c->h2->moved_at + c->h->body_timeout_ms) { /* the send timeout */
    c->h->stats.timeouts++;
    nghttp2_session_terminate_session(c->h2->s, NGHTTP2_NO_ERROR);
    m0__h2_sweep(c);
    c->close_after = true; /* once the GOAWAY is written, or the linger's end */
    c->deadline = now + H2_GOAWAY_LINGER_MS;
    m0__conn_flush(c);
    return true;
  }
  if (h2_late(c, now)) {
    m0__h2_deadline(c);
    m0__h2_sweep(c);
    m0__conn_flush(c);
    return true;
  }
  m0__h2_drain(c);
  c->deadline = now + H2_GOAWAY_LINGER_MS;
  m0__conn_flush(c);
  return true;
}
