/* What an HTTP/2 client may not do that nghttp2 lets by, or names as the
 * host's fault: Rapid Reset (a burst of RST_STREAM) and stream ids that
 * go down or come back. Design notes in http/h2.c.
 *
 * - Rapid Reset: the client's RST_STREAM drain a bucket of H2_RESETS_BURST
 *   filled by H2_RESETS_RATE a second; empty, the session ends with GOAWAY
 *   ENHANCE_YOUR_CALM. nghttp2's own rate (Debian's 1.52 backport) ends it
 *   INTERNAL_ERROR, the host's fault, and only past 1000.
 * - Stream ids: a request's HEADERS on an id at or below the highest seen
 *   is a connection error PROTOCOL_ERROR (RFC 9113 5.1.1), unless its
 *   stream is open and the client's side too (trailers) or one the host
 *   reset lately (the client
 *   may not have read the RST_STREAM: 5.1 says ignore it, as nghttp2
 *   then does). nghttp2 ignores such a HEADERS when it no longer knows the
 *   stream, and says STREAM_CLOSED when it does.
 * Everything here runs on the connection's loop.
 */
#include <nghttp2/nghttp2.h>

#include "http/conn.h"
#include "http/h2.h"
#include "http/h2_state.h"

#define H2_RESETS_BURST 200 /* RST_STREAM a client may send at once ... */
#define H2_RESETS_RATE 33   /* ... and per second after (nghttp2's rate) */

void m0__h2_guard_init(m0__conn *c) {
  c->h2->resets = H2_RESETS_BURST;
  c->h2->resets_at = uv_now(c->h->uv);
}

int m0__h2_guard_reset(m0__conn *c) {
  m0__h2 *h2 = c->h2;
  uint64_t now = uv_now(c->h->uv), add = (now - h2->resets_at) * H2_RESETS_RATE / 1000;
  if (add) {
    h2->resets = add >= H2_RESETS_BURST - h2->resets ? H2_RESETS_BURST : h2->resets + (uint32_t)add;
    h2->resets_at = now;
  }
  if (h2->resets > 0) h2->resets--;
  else nghttp2_session_terminate_session(h2->s, NGHTTP2_ENHANCE_YOUR_CALM);
  return 0;
}

void m0__h2_guard_sent_reset(m0__conn *c, int32_t id) {
  m0__h2 *h2 = c->h2;
  h2->reset_ids[h2->reset_next++ % M0__H2_RESET_IDS] = id;
}

static bool h2_guard_reset_lately(const m0__h2 *h2, int32_t id) {
  for (int i = 0; i < M0__H2_RESET_IDS; i++)
    if (h2->reset_ids[i] == id) return true;
  return false;
}

int m0__h2_guard_begin(nghttp2_session *s, const nghttp2_frame_hd *hd, void *ud) {
  m0__h2 *h2 = ((m0__conn *)ud)->h2;
  if (hd->type != NGHTTP2_HEADERS || !(hd->stream_id & 1)) return 0; /* an even id: nghttp2's PROTOCOL_ERROR */
  if (hd->stream_id > h2->last_id) {
    h2->last_id = hd->stream_id;
    return 0;
  }
  bool open = nghttp2_session_get_stream_user_data(s, hd->stream_id) &&
              !nghttp2_session_get_stream_remote_close(s, hd->stream_id); /* its trailers */
  if (open || h2_guard_reset_lately(h2, hd->stream_id)) return 0;
  return NGHTTP2_ERR_CALLBACK_FAILURE; /* m0__h2_read: GOAWAY PROTOCOL_ERROR */
}
