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

void m0__h2_drain(m0__conn *c) {
  m0__h2 *h2 = c->h2;
  if (!h2->draining) {
    h2->draining = true;
    h2->ack_by = uv_now(c->h->uv) + H2_DRAIN_ACK_MS;
    if (c->deadline > h2->ack_by) c->deadline = h2->ack_by;
    /* Refused once the session has said GOAWAY of its own (an error's): the last at once. */
    if (nghttp2_submit_shutdown_notice(h2->s) != 0 || nghttp2_submit_ping(h2->s, NGHTTP2_FLAG_NONE, h2_drain_ping) != 0)
      h2_drain_last(c);
  }
  m0__h2_pump(c);
}

bool m0__h2_drain_late(m0__conn *c, uint64_t now) {
  if (!c->h2->draining || c->h2->told || now < c->h2->ack_by) return false;
  h2_drain_last(c);
  m0__h2_deadline(c);
  m0__h2_sweep(c);
  if (c->close_after && c->deadline > now + H2_DRAIN_ACK_MS) c->deadline = now + H2_DRAIN_ACK_MS; /* written, or closed then */
  return true;
}

int m0__h2_drain_acked(m0__conn *c, const nghttp2_frame *f) {
  bool ours = (f->hd.flags & NGHTTP2_FLAG_ACK) && !memcmp(f->ping.opaque_data, h2_drain_ping, sizeof h2_drain_ping);
  if (ours && c->h2->draining && !c->h2->told) h2_drain_last(c);
  return 0;
}
