/* An HTTP/2 connection told to go (the drain, a reload, an idle
 * connection's end): RFC 9113 6.8's graceful shutdown in two GOAWAYs.
 *
 * Design notes
 * - One GOAWAY naming the highest stream seen would refuse the requests
 *   already on the wire (sent before the client read it): 350-800 per
 *   million across two reloads, an outside tester found. So the first GOAWAY names
 *   2^31-1 (NO_ERROR: "stop opening streams"), a PING follows it, and
 *   only the PING's ACK, which the client sends after every frame it sent
 *   before reading ours, brings the last GOAWAY naming the last stream
 *   taken (nghttp2's last processed). Streams up to it are answered; the
 *   client retries those past it, which nothing read.
 * - The ACK's wait is bounded (H2_DRAIN_ACK_MS, the connection's deadline
 *   meanwhile): a client that never answers gets the last GOAWAY then, and
 *   its streams up to it are finished as any (a draining idle client held
 *   the drain to its bound).
 * - That bound is the drain's own time: m0__h2_tick looks at it before the
 *   connection's deadline, which is none while an SSE stream is open
 *   (m0__h2_deadline) and which a write completed later moves to the
 *   keep-alive timeout (http/write.c). The loop's sweep runs through the
 *   drain's fresh grace (actors/loop.c): it first ran at the grace's end,
 *   a quarter of the drain's bound (at most --header-timeout-ms) after it
 *   began: 5 s, not 1, with --drain-timeout-ms 20000, a reload's next
 *   SIGHUP refused meanwhile.
 * - An SSE stream (http/h2_stream.c) ends with the drain's m0.closing,
 *   which a client that opens no flow-control window never takes: such a
 *   stream is reset (RST_STREAM CANCEL) at the drain at once when its
 *   window (or the connection's) is 0, and any still open at the ACK's
 *   bound then, as an HTTP/1.1 stream whose goodbye cannot be written is
 *   closed (its stand-in's queue goes with it): one endless stream held
 *   the drain to its bound (exit 1).
 * - The connection reads on (its WINDOW_UPDATEs, its requests still
 *   coming) and closes once nghttp2 has no stream left after the last
 *   GOAWAY (m0__h2_pump: neither want_read nor want_write).
 * Everything here runs on the connection's loop.
 */
#include <nghttp2/nghttp2.h>
#include <string.h>

#include "http/conn.h"
#include "http/h2.h"
#include "http/h2_state.h"

#define H2_DRAIN_ACK_MS 1000 /* the PING's ACK waited for at most */

/* The drain's PING: its ACK says the client read the first GOAWAY. */
static const uint8_t h2_drain_ping[8] = {'m', '0', '-', 'd', 'r', 'a', 'i', 'n'};

/* The last GOAWAY: the last stream taken, those past it refused. */
static void h2_drain_last(m0__conn *c) {
  nghttp2_session *s = c->h2->s;
  c->h2->told = true;
  nghttp2_submit_goaway(s, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(s), NGHTTP2_NO_ERROR, NULL, 0);
}

/* The SSE streams whose goodbye is still unsent (all, or only those no
 * window lets any DATA through) reset CANCEL. How many. */
static int h2_drain_cut(m0__conn *c, bool all) {
  nghttp2_session *s = c->h2->s;
  bool shut = nghttp2_session_get_remote_window_size(s) <= 0;
  int n = 0;
  for (m0__h2_stream *st = c->h2->streams; st; st = st->next) {
    if (!st->sse || st->pieces || !st->sse->close_after || !m0__conn_queued(st->sse)) continue; /* a writer's: its own end */
    if (!all && !shut && nghttp2_session_get_stream_remote_window_size(s, st->id) > 0) continue;
    if (nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL) == 0) n++;
  }
  return n;
}

void m0__h2_drain(m0__conn *c) {
  m0__h2 *h2 = c->h2;
  if (!h2->draining) {
    h2->draining = true;
    h2->ack_by = uv_now(c->h->uv) + H2_DRAIN_ACK_MS;
    if (c->deadline > h2->ack_by) c->deadline = h2->ack_by;
    /* Refused once the session has said GOAWAY of its own (an error's): the last at once. */
    if (nghttp2_submit_shutdown_notice(h2->s) != 0 || nghttp2_submit_ping(h2->s, NGHTTP2_FLAG_NONE, h2_drain_ping) != 0)
      h2_drain_last(c);
    h2_drain_cut(c, false); /* a stream no window lets its goodbye through */
  }
  m0__h2_pump(c);
}

bool m0__h2_drain_late(m0__conn *c, uint64_t now) {
  m0__h2 *h2 = c->h2;
  if (!h2->draining || h2->cut || now < h2->ack_by) return false;
  h2->cut = true;
  bool last = !h2->told;
  if (last) h2_drain_last(c);
  int cut = h2_drain_cut(c, true); /* goodbyes not taken within the bound */
  if (!last && !cut) return false;
  m0__h2_deadline(c);
  m0__h2_sweep(c);
  if ((c->close_after || cut) && c->deadline > now + H2_DRAIN_ACK_MS) c->deadline = now + H2_DRAIN_ACK_MS; /* written, or closed then */
  return true;
}

int m0__h2_drain_acked(m0__conn *c, const nghttp2_frame *f) {
  bool ours = (f->hd.flags & NGHTTP2_FLAG_ACK) && !memcmp(f->ping.opaque_data, h2_drain_ping, sizeof h2_drain_ping);
  if (ours && c->h2->draining && !c->h2->told) h2_drain_last(c);
  return 0;
}
