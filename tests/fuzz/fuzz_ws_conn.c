/* libFuzzer: a WebSocket connection, whole. One end of a socketpair is a
 * real m0 connection on a real libuv loop (http/conn.c, http/websocket.c,
 * http/stream.c), routed to a view that upgrades GET /ws; the harness is the
 * client on the other end.
 *
 * The input: a first byte chooses the handshake (permessage-deflate offered
 * or not, with which parameters; a plain request before it; a refused
 * version or key; the frames sent right behind it or after the 101; the
 * view subscribing and sending a welcome). Then ops, each a byte and its
 * arguments: a frame with any opcode, FIN, RSV bits, length form, mask and
 * payload; a message (text or binary, compressed or not, in 1-4 fragments
 * with pings between them); a large message (past --ws-max-message or not,
 * compressed to a bomb or not); ping, pong, close (any code, any reason);
 * raw bytes; a flush, writing what the ops built so far in pieces of sizes
 * the input chooses (with the loop run after each piece, so a frame spans
 * reads and a close lands in the same read as the end of a message); a
 * publish on the channel through the real stream code; a half-close; the
 * client no longer reading (the server's writes fail); the sweep or the
 * drain. A message's first byte tells the view what to do with it: echo it,
 * send large messages (so writes back up), subscribe, publish from inside
 * on_message, close, close and then send, send text that is not UTF-8.
 *
 * Checked: the connection ends (one that never closes aborts the run); the
 * server's bytes are HTTP heads (their bodies skipped by Content-Length)
 * up to a 101 carrying the key's accept value, then well-formed frames:
 * unmasked, FIN set, a known opcode, no RSV2/RSV3, RSV1 only on a data frame
 * when the 101 said permessage-deflate, control frames of at most 125
 * bytes, lengths in their shortest form, text that is UTF-8 (inflated
 * first when compressed), a close frame whose payload a peer may send, and
 * nothing after it. The view is handed only whole messages within the
 * bound, text that is UTF-8, and on_close comes once for every socket
 * opened, with a code that may be reported, and nothing after it. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "base/buf.h"
#include "http/conn.h"
#include "http/ws.h"

#define FZ_MAX_MESSAGE (16u * 1024u) /* --ws-max-message: the large messages fall on both sides */
#define FZ_CHANNEL "c"
#define FZ_KEY "dGhlIHNhbXBsZSBub25jZQ=="
#define FZ_ACCEPT "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
#define FZ_INFLATE_MAX (1u << 20) /* a compressed server frame is checked when it is at most this */

/* ---- the input --------------------------------------------------------- */

typedef struct fz_in {
  const uint8_t *d;
  size_t n, at;
} fz_in;

static uint8_t fz_byte(fz_in *in) { return in->at < in->n ? in->d[in->at++] : 0; }

/* Up to n bytes of the input (fewer at its end). */
static size_t fz_take(fz_in *in, size_t n, const uint8_t **p) {
  if (n > in->n - in->at) n = in->n - in->at;
  *p = in->d + in->at;
  in->at += n;
  return n;
}

/* ---- the server's bytes, checked as they come --------------------------- */

enum { OUT_HEAD, OUT_BODY, OUT_FRAMES, OUT_DONE };

typedef struct fz_out {
  int state;
  char head[4096];
  size_t hlen, skip;
  bool deflate; /* the 101 said permessage-deflate */
  uint8_t fh[M0__WS_HEADER_MAX];
  size_t fhl, fhneed;
  uint64_t left; /* payload bytes still to come */
  uint8_t op;
  bool rsv1;
  m0__utf8 utf8;
  bool text; /* its UTF-8 is checked */
  m0__buf pay; /* a close frame's payload, or a compressed frame's */
  bool pay_skip; /* the compressed payload is too large to keep */
} fz_out;

static void fz_check_frame_end(fz_out *o) {
  if (o->op == M0__WS_CLOSE) {
    int code;
    if (m0__ws_close_parse((const uint8_t *)o->pay.p, o->pay.len, &code) != 0) abort();
    o->state = OUT_DONE;
  } else if (o->rsv1 && !o->pay_skip) {
    m0__ws_pmd_params pp = {.client_no_context = true, .client_bits = 15};
    m0__ws_inflater *z = m0__ws_inflater_new(&pp);
    m0__buf text = {0};
    if (!z || m0__ws_inflate(z, (const uint8_t *)o->pay.p, o->pay.len, &text, 16u << 20) != 0) abort();
    m0__utf8 u = {0};
    if (o->op == M0__WS_TEXT && (!m0__utf8_feed(&u, (const uint8_t *)text.p, text.len) || !m0__utf8_done(&u)))
      abort();
    m0__buf_free(&text);
    m0__ws_inflater_free(z);
  } else if (o->text && !m0__utf8_done(&o->utf8)) {
    abort();
  }
  m0__buf_clear(&o->pay);
  o->fhl = 0;
}

/* A server frame's header is whole in o->fh. */
static void fz_check_header(fz_out *o) {
  uint8_t b0 = o->fh[0], b1 = o->fh[1];
  o->op = b0 & 0x0f;
  o->rsv1 = b0 & 0x40;
  if (b1 & 0x80) abort();                 /* a server never masks */
  if (!(b0 & 0x80) || (b0 & 0x30)) abort(); /* never fragments, no RSV2/RSV3 */
  if (o->op != M0__WS_TEXT && o->op != M0__WS_BINARY && o->op != M0__WS_CLOSE && o->op != M0__WS_PING &&
      o->op != M0__WS_PONG)
    abort();
  if (o->rsv1 && (!o->deflate || (o->op & 8))) abort();
  uint64_t len = b1 & 0x7f;
  if (len == 126) {
    len = (uint64_t)o->fh[2] << 8 | o->fh[3];
    if (len < 126) abort();
  } else if (len == 127) {
    len = 0;
    for (int i = 2; i < 10; i++) len = len << 8 | o->fh[i];
    if (len <= 0xffff || len >> 63) abort();
  }
  if ((o->op & 8) && len > 125) abort();
  o->left = len;
  o->utf8 = (m0__utf8){0};
  o->text = o->op == M0__WS_TEXT && !o->rsv1 && len <= 65536; /* a large one is the view's 'z's: not worth the time */
  o->pay_skip = o->rsv1 && len > FZ_INFLATE_MAX;
}

static void fz_frames(fz_out *o, const uint8_t *p, size_t n) {
  while (n) {
    if (o->state == OUT_DONE) abort(); /* nothing after the close frame */
    if (o->fhl < 2 || o->fhl < o->fhneed) {
      o->fh[o->fhl++] = *p++;
      n--;
      if (o->fhl == 2) o->fhneed = 2 + ((o->fh[1] & 0x7f) == 126 ? 2 : (o->fh[1] & 0x7f) == 127 ? 8 : 0);
      if (o->fhl < 2 || o->fhl < o->fhneed) continue;
      fz_check_header(o);
      if (o->left) continue;
    } else {
      size_t k = o->left < n ? (size_t)o->left : n;
      if (o->text && !m0__utf8_feed(&o->utf8, p, k)) abort();
      if ((o->op == M0__WS_CLOSE || (o->rsv1 && !o->pay_skip)) && m0__buf_append(&o->pay, p, k)) abort();
      o->left -= k;
      p += k;
      n -= k;
      if (o->left) continue;
    }
    fz_check_frame_end(o);
  }
}

/* A whole head: a 101 (frames follow) or an answer whose body is skipped. */
static void fz_check_head(fz_out *o) {
  o->head[o->hlen] = 0;
  if (memcmp(o->head, "HTTP/1.1 ", 9) != 0) abort();
  if (memcmp(o->head + 9, "101 ", 4) == 0) {
    if (!strstr(o->head, FZ_ACCEPT)) abort();
    o->deflate = strstr(o->head, "Sec-WebSocket-Extensions: permessage-deflate") != NULL;
    o->state = OUT_FRAMES;
    return;
  }
  const char *cl = strstr(o->head, "Content-Length: ");
  o->skip = cl ? strtoul(cl + 16, NULL, 10) : 0;
  o->state = OUT_BODY;
}

static void fz_output(fz_out *o, const uint8_t *p, size_t n) {
  while (n) {
    if (o->state == OUT_FRAMES || o->state == OUT_DONE) return fz_frames(o, p, n);
    if (o->state == OUT_BODY) {
      size_t k = o->skip < n ? o->skip : n;
      o->skip -= k;
      p += k;
      n -= k;
      if (!o->skip) o->state = OUT_HEAD, o->hlen = 0;
      continue;
    }
    if (o->hlen + 1 >= sizeof o->head) abort(); /* a head that never ends */
    o->head[o->hlen++] = (char)*p++;
    n--;
    if (o->hlen >= 4 && memcmp(o->head + o->hlen - 4, "\r\n\r\n", 4) == 0) fz_check_head(o);
  }
}

/* ---- the run's state, the view and its socket --------------------------- */

typedef struct fz {
  m0__http h;
  int fd;              /* the client's end */
  bool wr_shut, rd_shut; /* the client half-closed; it stopped reading */
  fz_out out;
  m0__buf pend;        /* bytes built, not written yet */
  m0__ws_deflater *z;  /* the client's compressor */
  uint8_t hs;          /* the handshake byte */
  m0_ws *ws;           /* the open socket, NULL before and after */
  int upgrades, opened, closed; /* requests to /ws; sockets opened, told of their end */
  uint64_t id;         /* the last published frame's */
  size_t budget;       /* bytes the large messages (both ways) may still take: a run stays short */
} fz;

static void fz_publish(fz *f, const uint8_t *p, size_t n) {
  char frame[160] = "data: ";
  size_t k = 6;
  for (size_t i = 0; i < n && k < sizeof frame - 1; i++) frame[k++] = (char)(' ' + p[i] % 95);
  bool data = !(n && p[0] & 1); /* a frame without data is not sent to a WebSocket */
  m0__http_publish(&f->h, FZ_CHANNEL, 1, ++f->id, data ? frame : "event: x", data ? k : 8);
}

static void fz_big(fz *f, m0_ws *ws, int type, size_t each, int count) {
  if (each * (size_t)count > f->budget) return;
  f->budget -= each * (size_t)count;
  uint8_t *b = malloc(each);
  if (!b) return;
  memset(b, 'z', each);
  for (int i = 0; i < count; i++) m0_ws_send(ws, type, b, each);
  free(b);
}

/* A message's first byte says what to do with it. */
static void fz_on_message(m0_ws *ws, int type, const void *data, size_t len, void *arg) {
  fz *f = arg;
  const uint8_t *d = data;
  if (ws != f->ws || len > FZ_MAX_MESSAGE || (type != M0_WS_TEXT && type != M0_WS_BINARY)) abort();
  m0__utf8 u = {0};
  if (type == M0_WS_TEXT && (!m0__utf8_feed(&u, d, len) || !m0__utf8_done(&u))) abort();
  uint8_t a = len > 1 ? d[1] : 0, b = len > 2 ? d[2] : 0;
  switch (len ? d[0] : 0) {
  case 'B': fz_big(f, ws, type, ((size_t)a + 1) * 1024, 1 + b % 4); break; /* to 1 MiB: past the socket's buffer */
  case 'S': m0_ws_subscribe(ws, FZ_CHANNEL); break;
  case 'P': fz_publish(f, d + 1, len - 1); break;
  case 'C': m0_ws_close(ws, a << 8 | b, len > 3 ? "bye" : NULL); break;
  case 'K':
    m0_ws_close(ws, 1000, NULL);
    if (m0_ws_send(ws, M0_WS_TEXT, "late", 4) == 0) abort(); /* nothing after our close */
    break;
  case 'T':
    if (m0_ws_send(ws, M0_WS_TEXT, "\xc3\x28", 2) == 0) abort(); /* not UTF-8 */
    break;
  default: m0_ws_send(ws, type, data, len); break;
  }
}

static void fz_on_close(m0_ws *ws, int code, void *arg) {
  fz *f = arg;
  if (ws != f->ws) abort(); /* once, for the open socket */
  if (code != 1005 && code != 1006 && !(code >= 1000 && code <= 1003) && !(code >= 1007 && code <= 1014) &&
      !(code >= 3000 && code <= 4999))
    abort();
  f->ws = NULL;
  f->closed++;
}

static void fz_view_ws(void *state, const m0_request *req, m0_response *res) {
  fz *f = state;
  (void)req;
  m0_ws_handlers hd = {.on_message = fz_on_message, .on_close = fz_on_close, .arg = f};
  m0_ws *ws = m0_respond_websocket(res, &hd);
  bool first = !f->upgrades++;
  if (!ws && first && ((f->hs >> 3) & 3) < 2 && !f->rd_shut) abort(); /* refused, and not for a closed reader */
  if (!ws) return;
  if (f->ws) abort(); /* one socket per connection */
  f->ws = ws;
  f->opened++;
  if (f->hs & 0x40) m0_ws_subscribe(ws, FZ_CHANNEL);
  if (f->hs & 0x80) m0_ws_send(ws, M0_WS_TEXT, "welcome", 7);
}

static void fz_view_hello(void *state, const m0_request *req, m0_response *res) {
  (void)state;
  (void)req;
  m0_respond(res, 200, "text/plain", "hi", 2, M0_BODY_STATIC);
}

static const m0_route fz_routes[] = {
    {.method = "GET", .pattern = "/ws", .view = fz_view_ws, .flags = M0_ON_LOOP},
    {.method = "GET", .pattern = "/hello", .view = fz_view_hello, .flags = M0_ON_LOOP},
};
static const m0_app fz_app = {.name = "fuzz-ws", .routes = fz_routes, .nroutes = 2};

static void fz_closed(m0__http *h) { uv_stop(h->uv); }

/* ---- the client --------------------------------------------------------- */

/* The loop's turn, then whatever the server wrote. */
static void fz_turn(fz *f) {
  uv_run(f->h.uv, UV_RUN_NOWAIT);
  uint8_t b[65536];
  ssize_t r;
  while (!f->rd_shut && (r = read(f->fd, b, sizeof b)) > 0) fz_output(&f->out, b, (size_t)r);
}

/* Writes what is pending in pieces of sizes from a generator the input seeds
 * (0: at once), with the loop's turn after each. */
static void fz_flush(fz *f, uint8_t seed) {
  uint32_t x = 0x9e3779b9u ^ seed;
  size_t at = 0;
  int stuck = 0, pieces = 0;
  while (at < f->pend.len && !f->wr_shut && stuck < 64) {
    size_t n = f->pend.len - at;
    if (seed && ++pieces > 512) { /* a large message's rest: fewer turns */
      if (n > 65536) n = 65536;
    } else if (seed) {
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      size_t piece = 1 + x % (seed < 32 ? 4u : seed < 128 ? 64u : 4096u);
      if (piece < n) n = piece;
    }
    ssize_t w = write(f->fd, f->pend.p + at, n);
    if (w < 0 && errno != EAGAIN) break; /* the server closed: nothing more goes */
    if (w > 0) at += (size_t)w, stuck = 0;
    else stuck++;
    fz_turn(f);
  }
  m0__buf_clear(&f->pend);
}

/* A client frame: the length in its shortest form unless `form` says 126/127. */
static void fz_frame(fz *f, uint8_t b0, const uint8_t *p, size_t n, const uint8_t mask[4], bool masked, int form) {
  uint8_t hdr[M0__WS_HEADER_MAX];
  size_t hl = 2;
  hdr[0] = b0;
  if (n < 126 && !form) hdr[1] = (uint8_t)n;
  else if (n <= 0xffff && form != 2) {
    hdr[1] = 126;
    hdr[hl++] = (uint8_t)(n >> 8);
    hdr[hl++] = (uint8_t)n;
  } else {
    hdr[1] = 127;
    for (int i = 7; i >= 0; i--) hdr[hl++] = (uint8_t)((uint64_t)n >> (8 * i));
  }
  if (masked) {
    hdr[1] |= 0x80;
    memcpy(hdr + hl, mask, 4);
    hl += 4;
  }
  m0__buf_append(&f->pend, hdr, hl);
  size_t at = f->pend.len;
  if (m0__buf_append(&f->pend, p, n) == 0 && masked) m0__ws_unmask((uint8_t *)f->pend.p + at, n, mask, 0);
}

static void fz_mask(fz_in *in, uint8_t mask[4]) {
  for (int i = 0; i < 4; i++) mask[i] = fz_byte(in);
}

/* A data message: compressed when asked (RSV1 on its first fragment), in
 * 1-4 fragments, a ping between them when asked. */
static void fz_message(fz *f, fz_in *in, uint8_t op, const uint8_t *p, size_t n, uint8_t g) {
  m0__buf z = {0};
  bool compress = g & 2;
  if (compress) {
    if (!f->z) f->z = m0__ws_deflater_new();
    if (!f->z || m0__ws_deflate(f->z, p, n, &z) != 0) abort();
    p = (const uint8_t *)z.p;
    n = z.len;
  }
  int frags = 1 + (g >> 2) % 4;
  uint8_t mask[4];
  fz_mask(in, mask);
  size_t at = 0;
  for (int i = 0; i < frags; i++) {
    size_t k = i == frags - 1 ? n - at : (n - at) / 2;
    uint8_t b0 = (uint8_t)((i ? M0__WS_CONT : op) | (i == frags - 1 ? 0x80 : 0) | (!i && compress ? 0x40 : 0));
    fz_frame(f, b0, p + at, k, mask, true, 0);
    at += k;
    if ((g & 0x40) && i < frags - 1) fz_frame(f, 0x80 | M0__WS_PING, (const uint8_t *)"p", 1, mask, true, 0);
  }
  m0__buf_free(&z);
}

static void fz_op_frame(fz *f, fz_in *in) {
  uint8_t g = fz_byte(in), b0 = fz_byte(in), l = fz_byte(in);
  uint8_t mask[4];
  fz_mask(in, mask);
  const uint8_t *p;
  size_t n = fz_take(in, l & 0x7f, &p);
  fz_frame(f, b0, p, n, mask, (g & 0xf0) != 0xf0, l >> 7 ? 1 + (g & 1) : 0);
}

static void fz_op_message(fz *f, fz_in *in) {
  uint8_t g = fz_byte(in), len = fz_byte(in);
  const uint8_t *p;
  size_t n = fz_take(in, len, &p);
  uint8_t ascii[256];
  if (g & 0x80) { /* text that is valid more often */
    for (size_t i = 0; i < n; i++) ascii[i] = p[i] & 0x7f;
    p = ascii;
  }
  fz_message(f, in, g & 1 ? M0__WS_TEXT : M0__WS_BINARY, p, n, g);
}

static void fz_op_large(fz *f, fz_in *in) {
  uint8_t g = fz_byte(in), size = fz_byte(in);
  size_t n = ((size_t)size + 1) * 96; /* 96 B .. 24 KiB, the bound at 16 KiB: many reads, and fast */
  if (n > f->budget) n = 512;
  f->budget -= n < f->budget ? n : f->budget;
  uint8_t *b = malloc(n);
  if (!b) return;
  memset(b, g & 0x20 ? 0xff : 'a', n); /* 0xff: never UTF-8 */
  fz_message(f, in, g & 1 ? M0__WS_TEXT : M0__WS_BINARY, b, n, g);
  free(b);
}

static void fz_op_control(fz *f, fz_in *in, uint8_t op) {
  uint8_t l = fz_byte(in);
  uint8_t mask[4];
  fz_mask(in, mask);
  if (op == M0__WS_CLOSE && (l & 0x80)) { /* a code from the list, and a short reason or none */
    static const uint16_t codes[] = {1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 4999, 1005};
    uint16_t code = codes[l % 12];
    uint8_t c[4] = {(uint8_t)(code >> 8), (uint8_t)code, 'o', 'k'};
    fz_frame(f, 0x80 | op, c, l & 0x40 ? 4 : 2, mask, true, 0);
    return;
  }
  const uint8_t *p;
  size_t n = fz_take(in, l % 126, &p);
  fz_frame(f, 0x80 | op, p, n, mask, true, 0);
}

static void fz_op(fz *f, fz_in *in, uint8_t k) {
  switch (k % 13) {
  case 0: return fz_op_frame(f, in);
  case 1:
  case 2: return fz_op_message(f, in);
  case 3: return fz_op_large(f, in);
  case 4: return fz_op_control(f, in, M0__WS_PING);
  case 5: return fz_op_control(f, in, M0__WS_PONG);
  case 6: return fz_op_control(f, in, M0__WS_CLOSE);
  case 7: {
    const uint8_t *p;
    size_t n = fz_take(in, fz_byte(in) % 64, &p);
    m0__buf_append(&f->pend, p, n);
    return;
  }
  case 8:
  case 9: return fz_flush(f, fz_byte(in));
  case 10: {
    const uint8_t *p;
    size_t n = fz_take(in, fz_byte(in) % 32, &p);
    fz_publish(f, p, n);
    fz_turn(f);
    return;
  }
  case 11: {
    uint8_t g = fz_byte(in);
    if (g & 1) m0__http_sweep(&f->h);
    else if (g & 2) m0__http_drain(&f->h, false);
    else if (g & 4) {
      fz_flush(f, g);
      shutdown(f->fd, SHUT_WR);
      f->wr_shut = true;
    } else if (g & 8) {
      shutdown(f->fd, SHUT_RD); /* the server's writes fail from now on */
      f->rd_shut = true;
    }
    fz_turn(f);
    return;
  }
  default: m0__buf_append(&f->pend, (const uint8_t[]){k}, 1); return; /* a stray byte */
  }
}

/* ---- the handshake ------------------------------------------------------ */

static void fz_handshake(fz *f, uint8_t hs) {
  static const char *const offers[] = {
      NULL,
      "permessage-deflate",
      "permessage-deflate; client_max_window_bits",
      "permessage-deflate; client_no_context_takeover; server_no_context_takeover",
      "permessage-deflate; client_max_window_bits=9; server_max_window_bits=15",
      "permessage-deflate; server_max_window_bits=10, permessage-deflate",
      "x-webkit-deflate-frame, permessage-deflate; client_max_window_bits=8",
      "permessage-deflate; client_max_window_bits=16; mystery",
  };
  static const char *const starts[] = {
      "",
      "GET /hello HTTP/1.1\r\nHost: h\r\n\r\n",
      "",
      "",
  };
  int v = (hs >> 3) & 3;
  const char *offer = offers[hs & 7];
  m0__buf_printf(&f->pend,
                 "%sGET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n"
                 "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: %s\r\n%s%s%s\r\n",
                 starts[v], v == 3 ? "short" : FZ_KEY, v == 2 ? "12" : "13", offer ? "Sec-WebSocket-Extensions: " : "",
                 offer ? offer : "", offer ? "\r\n" : "");
  if (hs & 0x20) return; /* the frames go right behind it, before the 101 */
  fz_flush(f, 0);
  for (int i = 0; i < 4 && f->out.state == OUT_HEAD; i++) fz_turn(f);
}

/* ---- one run ------------------------------------------------------------ */

/* Every m0 process ignores SIGPIPE (host/signals.c); so does the harness. */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  signal(SIGPIPE, SIG_IGN);
  return 0;
}

static void fz_end(fz *f) {
  fz_flush(f, 0);
  if (!f->wr_shut) shutdown(f->fd, SHUT_WR);
  for (int turns = 0; f->h.nconns > 0 && turns < 10000; turns++) {
    fz_turn(f);
    if (turns > 100) m0__http_drain(&f->h, false); /* a bound: after a while, drain it */
  }
  if (f->h.nconns > 0) abort(); /* the connection never ended */
  if (f->opened != f->closed || f->ws) abort(); /* every socket told of its end, once */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) return 0;
  uv_loop_t loop;
  uv_loop_init(&loop);
  fz *f = calloc(1, sizeof *f);
  if (!f) abort();
  f->fd = sv[1];
  f->budget = 1u << 20;
  static const m0__http_ops fz_ops = {.closed = fz_closed};
  m0__http_config cfg = {.app = &fz_app, .state = f, .lim = {1024, 256, 2048}, .header_timeout_ms = 1000,
                         .body_timeout_ms = 1000, .keepalive_timeout_ms = 1000, .max_keepalive_requests = 8,
                         .heartbeat_ms = 1, .history_max = 4, .history_bytes_max = 1024,
                         .ws_max_message = FZ_MAX_MESSAGE};
  m0__http_init(&f->h, &loop, &cfg, &fz_ops, NULL);
  if (m0__http_adopt(&f->h, sv[0], false) == 0) {
    fz_in in = {data, size, 0};
    f->hs = fz_byte(&in);
    fz_handshake(f, f->hs);
    while (in.at < in.n) fz_op(f, &in, fz_byte(&in));
    fz_end(f);
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  close(sv[1]);
  uv_loop_close(&loop);
  m0__http_fini(&f->h);
  m0__buf_free(&f->pend);
  m0__buf_free(&f->out.pay);
  if (f->z) m0__ws_deflater_free(f->z);
  free(f);
  return 0;
}
