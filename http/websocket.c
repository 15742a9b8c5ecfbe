/* A connection turned WebSocket: the handshake (m0_respond_websocket), the
 * client's frames in, the application's messages out, the close handshake.
 *
 * Design notes
 * - After the 101 nothing more is parsed as HTTP: every read comes here. A
 *   frame is handled once it is whole (header and payload: at most
 *   --ws-max-message plus 14 bytes wait in rx); the read buffer is the
 *   loop's, so a frame split across reads is copied to rx, and one that
 *   arrives whole is unmasked in place and never copied.
 * - A fragmented message collects in msg until its last fragment; its text
 *   is checked as UTF-8 fragment by fragment (a bad byte closes the socket
 *   at once, 1007), and its size counts against the bound as it grows
 *   (1009). A compressed message (RSV1, permessage-deflate) is inflated
 *   whole, with the bound on what comes out.
 * - Control frames may come between fragments: a ping is answered at once
 *   with its payload, a pong is nothing but a sign of life, a close is
 *   answered with the same code and the connection closes once that is
 *   written (the server closes the TCP connection first, RFC 6455 7.1.1).
 * - The host's own close (m0_ws_close, a protocol error, the drain) sends a
 *   close frame and reads nothing more but the client's close; the sweep
 *   closes the connection if that has not come within 5 s.
 * - Sends from the application go in a queue of their own and are handed
 *   to the connection (m0__conn_send): m0_ws_send may be called while
 *   another connection's answer is in the loop's scratch.
 * - The socket's memory is the connection's and goes with it, in libuv's
 *   close callback (m0__ws_free from conn_release), never in conn_close:
 *   on_close runs once, from conn_close (m0__ws_gone), and may run while the
 *   frames of this very read are being handled (a close frame right behind
 *   a large message, a failed write inside on_message). After anything
 *   that can close, the reader stops at ws->dead and touches nothing else.
 * - A client that offers the subprotocol m0.events (and an application that
 *   chose none) gets every published frame as an SSE event would carry it
 *   ("id: N" and the frame's lines), so it knows its place and can resume
 *   (?last_event_id=N, or Last-Event-ID): the channels subscribed in the
 *   view replay what their history holds after N once the view returned,
 *   as a stream's does (http/stream.c), behind an m0.gap event when frames
 *   may be missing. A plain socket gets the data alone; a loss it cannot
 *   be told in band closes it with 1013.
 */
#include "http/websocket.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/errors.h"
#include "http/conn_state.h"
#include "http/fields.h"
#include "http/response.h"
#include "http/stream.h"
#include "http/ws.h"
#include "transport/page.h"

#define WS_CLOSE_WAIT_MS 5000
#define WS_SEND_MAX (8u << 20) /* what m0_ws_send lets wait behind the socket */

struct m0_ws {
  m0__conn *c;
  m0_ws_handlers hd;
  m0__buf rx;  /* a frame not whole yet */
  m0__buf msg; /* a fragmented or compressed message so far */
  uint8_t msg_op; /* the message being received: M0__WS_TEXT/BINARY, 0 none */
  bool msg_z;     /* it is compressed */
  m0__utf8 utf8;
  bool deflate;
  m0__ws_pmd_params pmd;
  m0__ws_inflater *inflater;
  bool close_sent, dead;
  int close_code;
  bool events;   /* the subprotocol m0.events: frames go as SSE events, with their ids */
  bool has_last; /* the client said where it was (last_event_id): the view's subscriptions resume after last */
  uint64_t last;
};

bool m0__ws_deflating(const m0_ws *ws) { return ws->deflate && ws->pmd.server_bits >= 15; }

bool m0__ws_events(const m0_ws *ws) { return ws->events; }

/* ---- out --------------------------------------------------------------- */

/* Counts one on the loop's figures on the shared page (/metrics); w is
 * NULL when the loop has none. */
static void ws_count(_Atomic uint64_t *w) {
  if (w) atomic_fetch_add_explicit(w, 1, memory_order_relaxed);
}
#define WS_FIGURE(ws, field) ((ws)->c->h->figures ? &(ws)->c->h->figures->field : NULL)

/* One frame to the socket, from a queue of its own. */
static int ws_frame(m0_ws *ws, uint8_t op, bool rsv1, const void *p, size_t n) {
  uint8_t hdr[M0__WS_HEADER_MAX];
  size_t hl = m0__ws_frame_header(hdr, op, true, rsv1, n);
  m0__outq q = {0};
  int rv = m0__outq_append(&q, hdr, hl);
  if (rv == 0 && n) rv = m0__outq_append(&q, p, n);
  if (rv == 0) {
    ws->c->last_write = uv_now(ws->c->h->uv);
    if (op == M0__WS_TEXT || op == M0__WS_BINARY) ws_count(WS_FIGURE(ws, ws_out)); /* m0_ws_send's */
    m0__conn_send(ws->c, &q);
  }
  m0__outq_free(&q);
  return rv;
}

/* Sends our close frame and reads only the client's after it. */
static void ws_send_close(m0_ws *ws, int code, const char *reason) {
  if (ws->close_sent) return;
  ws->close_sent = true;
  ws->close_code = code;
  uint8_t p[125];
  size_t rl = reason ? strlen(reason) : 0;
  if (rl > 123) rl = 123;
  p[0] = (uint8_t)(code >> 8);
  p[1] = (uint8_t)code;
  if (rl) memcpy(p + 2, reason, rl);
  ws_frame(ws, M0__WS_CLOSE, false, p, 2 + rl);
  ws->c->deadline = uv_now(ws->c->h->uv) + WS_CLOSE_WAIT_MS;
  m0__stream_forget(ws->c); /* the close frame is the last: no channel's frame nor heartbeat after it */
}

/* The connection closes once what is queued is written. */
static void ws_end(m0_ws *ws) {
  m0__conn *c = ws->c;
  if (c->closing) return;
  c->close_after = true;
  /* Shut down and read to the client's FIN (at most 1 s) before closing:
   * closed with its bytes unread (a ping right behind its close), the
   * kernel would send a reset and drop what it still held of our answer. */
  c->linger = true;
  m0__conn_flush(c);
}

/* A protocol error: close with its code at once. */
static void ws_fail(m0_ws *ws, int code) {
  ws_send_close(ws, code, NULL);
  ws_end(ws);
}

void m0__ws_goodbye(m0_ws *ws, int code, const char *reason) {
  ws_send_close(ws, code, reason);
  ws_end(ws);
}

const m0__stream_ws_ops m0__ws_stream_ops = {m0__ws_events, m0__ws_deflating, m0__ws_goodbye};

int m0_ws_send(m0_ws *ws, int type, const void *data, size_t len) {
  if (!ws || ws->dead || ws->close_sent || ws->c->closing || ws->c->close_after) return -1;
  if (type != M0_WS_TEXT && type != M0_WS_BINARY) return -1;
  if (type == M0_WS_TEXT) {
    m0__utf8 u = {0};
    if (!m0__utf8_feed(&u, data, len) || !m0__utf8_done(&u)) return -1;
  }
  if (m0__conn_queued(ws->c) > WS_SEND_MAX) return -1;
  if (ws->deflate && len >= 64 && m0__ws_pmd_fits(&ws->pmd, len)) { /* smaller messages do not shrink */
    if (!ws->c->h->wsz) ws->c->h->wsz = m0__ws_deflater_new();
    m0__buf z = {0};
    int rv = ws->c->h->wsz ? m0__ws_deflate(ws->c->h->wsz, data, len, &z) : -1;
    if (rv == 0) rv = ws_frame(ws, (uint8_t)type, true, z.p, z.len);
    m0__buf_free(&z);
    return rv == 0 ? 0 : -1;
  }
  return ws_frame(ws, (uint8_t)type, false, data, len) == 0 ? 0 : -1;
}

int m0_ws_close(m0_ws *ws, int code, const char *reason) {
  if (!ws || ws->dead || ws->close_sent || ws->c->closing) return -1;
  ws_send_close(ws, m0__ws_close_code_ok(code) ? code : M0__WS_NORMAL, reason);
  return 0;
}

int m0_ws_subscribe(m0_ws *ws, const char *channel) {
  if (!ws || ws->dead || ws->close_sent || !m0__channel_ok(channel)) return -1;
  return m0__stream_subscribe_from(ws->c, channel, strlen(channel), ws->has_last, ws->last) < 0 ? -1 : 0;
}

/* ---- in ---------------------------------------------------------------- */

static void ws_deliver(m0_ws *ws, uint8_t op, const uint8_t *p, size_t n) {
  ws_count(WS_FIGURE(ws, ws_in));
  if (ws->hd.on_message) ws->hd.on_message(ws, op == M0__WS_TEXT ? M0_WS_TEXT : M0_WS_BINARY, p, n, ws->hd.arg);
}

/* The message's last fragment came: inflate it, check it, hand it on. */
static void ws_message_end(m0_ws *ws, const uint8_t *last, size_t n) {
  m0__http *h = ws->c->h;
  const uint8_t *p = last;
  size_t len = n;
  m0__buf out = {0};
  if (ws->msg.len) { /* fragments before this one */
    if (m0__buf_append(&ws->msg, last, n)) return ws_fail(ws, M0__WS_INTERNAL);
    p = (const uint8_t *)ws->msg.p;
    len = ws->msg.len;
  }
  if (ws->msg_z) {
    if (!ws->inflater) ws->inflater = m0__ws_inflater_new(&ws->pmd);
    int rv = ws->inflater ? m0__ws_inflate(ws->inflater, p, len, &out, h->ws_max_message) : -M0__WS_INTERNAL;
    if (rv < 0) {
      m0__buf_free(&out);
      return ws_fail(ws, -rv);
    }
    if (ws->pmd.client_no_context) { /* nothing to keep between messages: an idle socket holds no zlib state */
      m0__ws_inflater_free(ws->inflater);
      ws->inflater = NULL;
    }
    p = (const uint8_t *)out.p;
    len = out.len;
    if (ws->msg_op == M0__WS_TEXT) {
      m0__utf8 u = {0};
      if (!m0__utf8_feed(&u, p, len) || !m0__utf8_done(&u)) {
        m0__buf_free(&out);
        return ws_fail(ws, M0__WS_BAD_DATA);
      }
    }
  } else if (ws->msg_op == M0__WS_TEXT && !m0__utf8_done(&ws->utf8)) {
    return ws_fail(ws, M0__WS_BAD_DATA); /* ends inside a character */
  }
  uint8_t op = ws->msg_op;
  ws->msg_op = 0;
  ws->msg_z = false;
  ws->utf8 = (m0__utf8){0};
  ws_deliver(ws, op, p, len);
  m0__buf_free(&out);
  m0__buf_clear(&ws->msg);
  if (ws->msg.cap > 65536) m0__buf_free(&ws->msg); /* a large message's memory is not kept */
}

static void ws_on_close_frame(m0_ws *ws, const uint8_t *p, size_t n) {
  int code;
  int rv = m0__ws_close_parse(p, n, &code);
  if (rv < 0) return ws_fail(ws, -rv);
  if (!ws->close_sent) {
    /* Answered with the same code (none for none), then the connection closes. */
    ws->close_sent = true;
    ws->close_code = code;
    ws_frame(ws, M0__WS_CLOSE, false, p, code == M0__WS_NO_STATUS ? 0 : 2);
  } else {
    ws->close_code = code; /* the answer to ours */
  }
  ws_end(ws);
}

/* One whole frame, its payload unmasked. */
static void ws_on_frame(m0_ws *ws, const m0__ws_frame *f, const uint8_t *p) {
  if (ws->close_sent && f->opcode != M0__WS_CLOSE) return; /* after our close, only theirs matters */
  switch (f->opcode) {
  case M0__WS_PING:
    ws_frame(ws, M0__WS_PONG, false, p, (size_t)f->len);
    return;
  case M0__WS_PONG: return;
  case M0__WS_CLOSE: return ws_on_close_frame(ws, p, (size_t)f->len);
  case M0__WS_CONT:
    if (!ws->msg_op || f->rsv1) return ws_fail(ws, M0__WS_PROTOCOL);
    break;
  default: /* TEXT, BINARY: a new message */
    if (ws->msg_op) return ws_fail(ws, M0__WS_PROTOCOL);
    if (f->rsv1 && !ws->deflate) return ws_fail(ws, M0__WS_PROTOCOL);
    ws->msg_op = f->opcode;
    ws->msg_z = f->rsv1;
    break;
  }
  size_t n = (size_t)f->len; /* within the bound: ws_frames gave the parser only the room the message has left */
  if (ws->msg_op == M0__WS_TEXT && !ws->msg_z && !m0__utf8_feed(&ws->utf8, p, n)) return ws_fail(ws, M0__WS_BAD_DATA);
  if (f->fin) return ws_message_end(ws, p, n);
  if (m0__buf_append(&ws->msg, p, n)) ws_fail(ws, M0__WS_INTERNAL);
}

/* Handles every whole frame in p[0, n); returns the bytes used. */
static size_t ws_frames(m0_ws *ws, uint8_t *p, size_t n) {
  m0__http *h = ws->c->h;
  size_t off = 0;
  while (off < n && !ws->dead && !ws->c->closing && !ws->c->close_after) {
    m0__ws_frame f;
    uint64_t room = ws->msg_op ? h->ws_max_message - ws->msg.len : h->ws_max_message;
    int r = m0__ws_frame_parse(p + off, n - off, ws->deflate, room, &f);
    if (r == 0) break;
    if (r < 0) {
      ws_fail(ws, -r);
      return n;
    }
    if (n - off - (size_t)r < f.len) break; /* the payload is not all here */
    uint8_t *payload = p + off + r;
    m0__ws_unmask(payload, (size_t)f.len, f.mask, 0);
    off += (size_t)r + (size_t)f.len;
    ws_on_frame(ws, &f, payload);
  }
  return off;
}

void m0__ws_read(m0_ws *ws, char *buf, size_t n) {
  if (ws->dead) return;
  if (ws->rx.len) { /* a frame began in an earlier read */
    if (m0__buf_append(&ws->rx, buf, n)) return ws_fail(ws, M0__WS_INTERNAL);
    size_t used = ws_frames(ws, (uint8_t *)ws->rx.p, ws->rx.len);
    if (ws->dead) return; /* closed under the frames: rx is kept to the end, but nothing more is read */
    memmove(ws->rx.p, ws->rx.p + used, ws->rx.len - used);
    ws->rx.len -= used;
  } else {
    size_t used = ws_frames(ws, (uint8_t *)buf, n);
    if (ws->dead) return;
    if (used < n && m0__buf_append(&ws->rx, buf + used, n - used)) return ws_fail(ws, M0__WS_INTERNAL);
  }
  if (!ws->rx.len) m0__buf_free(&ws->rx);
}

void m0__ws_gone(m0_ws *ws) {
  if (ws->dead) return;
  ws->dead = true;
  int code = ws->close_sent ? ws->close_code : M0__WS_ABNORMAL;
  ws_count(WS_FIGURE(ws, ws_closes[m0__page_ws_code_index(code)]));
  if (ws->hd.on_close) ws->hd.on_close(ws, code, ws->hd.arg);
}

void m0__ws_free(m0_ws *ws) {
  m0__buf_free(&ws->rx);
  m0__buf_free(&ws->msg);
  if (ws->inflater) m0__ws_inflater_free(ws->inflater);
  free(ws);
}

/* ---- the handshake ----------------------------------------------------- */

m0_ws *m0__ws_begin(void *ctx, const m0_ws_handlers *hd, bool deflate, const void *pmd) {
  m0__conn *c = ctx;
  m0_ws *ws = calloc(1, sizeof *ws);
  if (!ws) return NULL;
  ws->c = c;
  ws->hd = *hd;
  ws->deflate = deflate;
  if (deflate) ws->pmd = *(const m0__ws_pmd_params *)pmd;
  const m0__ws_offer *o = (const m0__ws_offer *)pmd;
  ws->events = o->events;
  ws->has_last = o->has_last;
  ws->last = o->last;
  m0__stream_enlist(c);
  m0__conn_flush(c); /* the 101 first: what the view sends next follows it */
  if (c->closing) { /* the client went before the 101 was written: no socket, and no on_close */
    free(ws);
    return NULL;
  }
  c->ws = ws;
  ws_count(WS_FIGURE(ws, ws_opened));
  return ws;
}

static bool has_token(m0_str v, const char *token) { return m0__field_has(v.p, v.n, token); }

/* Whether some Sec-WebSocket-Protocol value lists m0.events. */
static bool ws_offers_events(const m0_request *req) {
  for (size_t i = 0; i < req->nheaders; i++) {
    const m0_header *x = &req->headers[i];
    if (x->name.n == 22 && strncasecmp(x->name.p, "Sec-WebSocket-Protocol", 22) == 0 &&
        m0__field_has(x->value.p, x->value.n, M0__WS_EVENTS))
      return true;
  }
  return false;
}

/* Whether the request can be upgraded here (accept set), else answered:
 * 409 on a pool thread, 400 for no WebSocket handshake, 426 for another
 * version. */
static bool ws_upgradable(m0_response *res, const m0_request *req, char accept[29]) {
  if (!res->ops || !res->ops->ws_begin || !req) {
    fprintf(stderr, "m0: a WebSocket was begun on a pool thread; answered 409 (upgrade on the loop: an "
                    "M0_ON_LOOP route)\n");
    m0__respond_status(res, 409, NULL);
    return false;
  }
  m0_str key = m0_request_header(req, "Sec-WebSocket-Key");
  m0_str version = m0_request_header(req, "Sec-WebSocket-Version");
  bool get = req->method.n == 3 && memcmp(req->method.p, "GET", 3) == 0;
  if (!get || req->version_minor < 1 || !has_token(m0_request_header(req, "Upgrade"), "websocket") ||
      !has_token(m0_request_header(req, "Connection"), "upgrade") || m0__ws_accept(key.p, key.n, accept) != 0) {
    res->close = true;
    m0__respond_status(res, 400, NULL);
    return false;
  }
  if (version.n != 2 || memcmp(version.p, "13", 2) != 0) {
    m0_response_header(res, "Sec-WebSocket-Version", "13");
    m0__respond_status(res, 426, NULL);
    return false;
  }
  return true;
}

/* What the client offered: permessage-deflate (every
 * Sec-WebSocket-Extensions value; true when accepted, ext its answer), the
 * subprotocol m0.events (when the application chose none of its own), a
 * Last-Event-ID. */
static bool ws_offered(m0_response *res, const m0_request *req, m0__ws_offer *got, char *ext, size_t extcap) {
  char offer[2048];
  size_t ol = 0;
  for (size_t i = 0; i < req->nheaders; i++) {
    const m0_header *x = &req->headers[i];
    if (x->name.n != 24 || strncasecmp(x->name.p, "Sec-WebSocket-Extensions", 24) != 0) continue;
    if (ol + x->value.n + 2 >= sizeof offer) break;
    if (ol) offer[ol++] = ',';
    memcpy(offer + ol, x->value.p, x->value.n);
    ol += x->value.n;
  }
  bool deflate = ol && m0__ws_pmd_negotiate(offer, ol, &got->pmd, ext, extcap);
  got->events = !m0__response_has_header(res, "Sec-WebSocket-Protocol") && ws_offers_events(req);
  got->has_last = m0__last_event_id(req, &got->last);
  return deflate;
}

/* The 101 queued, with the application's headers: 0, or M0__ENOMEM (or
 * M0__ETOOBIG: the head does not fit), nothing queued. */
static int ws_head(m0_response *res, const char *accept, bool deflate, const char *ext, bool events) {
  char head[512];
  size_t dlen;
  const char *date = m0__date_line(res->date, &dlen);
  int n = snprintf(head, sizeof head,
                   "HTTP/1.1 101 Switching Protocols\r\nServer: m0\r\n%.*sUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Accept: %s\r\n%s%s%s%s",
                   (int)dlen, date, accept, deflate ? "Sec-WebSocket-Extensions: " : "", deflate ? ext : "",
                   deflate ? "\r\n" : "", events ? "Sec-WebSocket-Protocol: " M0__WS_EVENTS "\r\n" : "");
  if (n < 0 || (size_t)n >= sizeof head) return M0__ETOOBIG;
  /* One append: a head half-queued cannot be taken back. */
  m0__buf all = {0};
  int rv = m0__buf_append(&all, head, (size_t)n) || m0__buf_append(&all, res->extra, res->extra_len) ||
                   m0__buf_append(&all, "\r\n", 2) || m0__outq_append(res->out, all.p, all.len) != 0
               ? M0__ENOMEM
               : 0;
  m0__buf_free(&all);
  return rv;
}

m0_ws *m0_respond_websocket(m0_response *res, const m0_ws_handlers *handlers) {
  if (!res || res->done) return NULL;
  const m0_request *req = res->req;
  char accept[29], ext[256] = "";
  if (!ws_upgradable(res, req, accept)) return NULL;
  m0__ws_offer got = {0};
  bool deflate = ws_offered(res, req, &got, ext, sizeof ext);
  if (ws_head(res, accept, deflate, ext, got.events) != 0) {
    m0__respond_status(res, 500, NULL);
    return NULL;
  }
  res->done = true;
  res->status = 101;
  m0_ws *ws = res->ops->ws_begin(res->ops_ctx, handlers, deflate, &got);
  if (!ws) res->close = true; /* no memory: the 101 went, and the connection closes */
  return ws;
}
