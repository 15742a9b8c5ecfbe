/* WebSocket (RFC 6455) and permessage-deflate (RFC 7692): frames, masks,
 * UTF-8, the handshake's accept key, close payloads, the extension offer,
 * and the two zlib streams. Pure functions over bytes (http/ws.h).
 *
 * Design notes.
 * - Frame headers are refused as early as the bytes allow: a bad first two
 *   bytes fail before the length or mask has arrived, so a peer cannot make
 *   the connection wait for a frame that is already wrong.
 * - The UTF-8 checker is a byte-at-a-time state machine whose state says
 *   what the next byte may be (not only how many continuation bytes are
 *   left), so overlongs (E0 80..9F, F0 80..8F), surrogates (ED A0..BF) and
 *   code points past U+10FFFF (F4 90.., F5..FF) fail at the first byte that
 *   makes them impossible, as Autobahn's fail-fast cases expect.
 * - The deflater is shared by a loop, and every message is compressed on its
 *   own (server_no_context_takeover) with a 15-bit window; a channel's frame
 *   is compressed once for all its subscribers. An offer that asks for a
 *   smaller server window (server_max_window_bits=N < 15) is accepted, and
 *   kept without a second deflater: a message compressed on its own refers
 *   back only inside itself, so one of at most 2^N bytes never uses a
 *   distance past an N-bit window whatever window compressed it; a longer
 *   one goes uncompressed (RSV1 clear, RFC 7692 section 6), and so do a
 *   channel's frames (their one compressed form is the 15-bit one). A
 *   deflater per window would cost up to 7 deflaters a loop and 7 forms of
 *   each channel frame for a parameter browsers never send; and zlib cannot
 *   make an 8-bit raw stream at all (deflateInit2 refuses -8).
 * - The inflater's window is at least 9 bits even when the client said 8:
 *   zlib's deflate turns a window of 8 into 9 (zlib 1.2.9 and later), so a
 *   client using zlib with 8 sends distances an 8-bit inflater refuses, and
 *   a larger inflate window accepts every stream a smaller one does. */
#include "http/ws.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <mbedtls/base64.h>
#include <mbedtls/sha1.h>
#include <mbedtls/version.h>

#include "base/errors.h"

/* ---- frames ------------------------------------------------------------ */

int m0__ws_frame_parse(const uint8_t *p, size_t n, bool deflate, uint64_t max_len, m0__ws_frame *f) {
  if (n < 2) return 0;
  uint8_t b0 = p[0], b1 = p[1];
  f->fin = b0 & 0x80;
  f->rsv1 = b0 & 0x40;
  f->opcode = b0 & 0x0f;
  f->masked = b1 & 0x80;
  if (b0 & 0x30) return -M0__WS_PROTOCOL; /* RSV2, RSV3: no extension defines them */
  bool control = f->opcode & 0x8;
  switch (f->opcode) {
    case M0__WS_CONT: case M0__WS_TEXT: case M0__WS_BINARY:
    case M0__WS_CLOSE: case M0__WS_PING: case M0__WS_PONG: break;
    default: return -M0__WS_PROTOCOL;
  }
  /* RFC 7692 section 6: RSV1 marks a compressed message, on its first frame only. */
  if (f->rsv1 && (!deflate || control || f->opcode == M0__WS_CONT)) return -M0__WS_PROTOCOL;
  if (!f->masked) return -M0__WS_PROTOCOL; /* RFC 6455 section 5.1 */
  uint64_t len = b1 & 0x7f;
  if (control && (!f->fin || len > 125)) return -M0__WS_PROTOCOL;
  size_t h = 2;
  if (len == 126) {
    if (n < 4) return 0;
    len = (uint64_t)p[2] << 8 | p[3];
    if (len < 126) return -M0__WS_PROTOCOL;
    h = 4;
  } else if (len == 127) {
    if (n < 10) return 0;
    len = 0;
    for (int i = 0; i < 8; i++) len = len << 8 | p[2 + i];
    if (len >> 63 || len <= 0xffff) return -M0__WS_PROTOCOL;
    h = 10;
  }
  if (len > max_len) return -M0__WS_TOO_BIG;
  if (n < h + 4) return 0;
  memcpy(f->mask, p + h, 4);
  f->len = len;
  f->hlen = h + 4;
  return (int)f->hlen;
}

void m0__ws_unmask(uint8_t *p, size_t n, const uint8_t mask[4], uint64_t offset) {
  uint8_t m[8];
  for (int i = 0; i < 8; i++) m[i] = mask[(offset + (uint64_t)i) & 3];
  size_t i = 0;
  /* Eight bytes at a time with the mask rotated to where this piece starts;
   * memcpy keeps it free of alignment and aliasing assumptions. */
  uint64_t w, mw;
  memcpy(&mw, m, 8);
  for (; i + 8 <= n; i += 8) {
    memcpy(&w, p + i, 8);
    w ^= mw;
    memcpy(p + i, &w, 8);
  }
  for (; i < n; i++) p[i] ^= m[i & 7];
}

size_t m0__ws_frame_header(uint8_t *out, uint8_t opcode, bool fin, bool rsv1, uint64_t len) {
  out[0] = (uint8_t)((fin ? 0x80 : 0) | (rsv1 ? 0x40 : 0) | (opcode & 0x0f));
  if (len < 126) {
    out[1] = (uint8_t)len;
    return 2;
  }
  if (len <= 0xffff) {
    out[1] = 126;
    out[2] = (uint8_t)(len >> 8);
    out[3] = (uint8_t)len;
    return 4;
  }
  out[1] = 127;
  for (int i = 0; i < 8; i++) out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
  return 10;
}

/* ---- UTF-8 ------------------------------------------------------------- */

/* States: what the next byte must be. */
enum {
  UTF8_START = 0, /* a character boundary */
  UTF8_1,         /* one continuation byte (80..BF) left */
  UTF8_2,         /* two left, the next any 80..BF */
  UTF8_3,         /* three left, the next any 80..BF */
  UTF8_E0,        /* after E0: A0..BF (else overlong), then one */
  UTF8_ED,        /* after ED: 80..9F (else a surrogate), then one */
  UTF8_F0,        /* after F0: 90..BF (else overlong), then two */
  UTF8_F4,        /* after F4: 80..8F (else past U+10FFFF), then two */
  UTF8_BAD,       /* sticky */
};

static uint32_t utf8_step(uint32_t s, uint8_t c) {
  switch (s) {
    case UTF8_START:
      if (c < 0x80) return UTF8_START;
      if (c < 0xc2) return UTF8_BAD; /* a stray continuation, or C0/C1 (overlong) */
      if (c < 0xe0) return UTF8_1;
      if (c == 0xe0) return UTF8_E0;
      if (c == 0xed) return UTF8_ED;
      if (c < 0xf0) return UTF8_2;
      if (c == 0xf0) return UTF8_F0;
      if (c < 0xf4) return UTF8_3;
      if (c == 0xf4) return UTF8_F4;
      return UTF8_BAD;
    case UTF8_1: return (c & 0xc0) == 0x80 ? UTF8_START : UTF8_BAD;
    case UTF8_2: return (c & 0xc0) == 0x80 ? UTF8_1 : UTF8_BAD;
    case UTF8_3: return (c & 0xc0) == 0x80 ? UTF8_2 : UTF8_BAD;
    case UTF8_E0: return c >= 0xa0 && c <= 0xbf ? UTF8_1 : UTF8_BAD;
    case UTF8_ED: return c >= 0x80 && c <= 0x9f ? UTF8_1 : UTF8_BAD;
    case UTF8_F0: return c >= 0x90 && c <= 0xbf ? UTF8_2 : UTF8_BAD;
    case UTF8_F4: return c >= 0x80 && c <= 0x8f ? UTF8_2 : UTF8_BAD;
    default: return UTF8_BAD;
  }
}

bool m0__utf8_feed(m0__utf8 *u, const uint8_t *p, size_t n) {
  uint32_t s = u->state;
  size_t i = 0;
  while (i < n) {
    if (s == UTF8_START) {
      /* Text is mostly ASCII: skip it eight bytes at a time. */
      uint64_t w;
      while (i + 8 <= n && (memcpy(&w, p + i, 8), (w & 0x8080808080808080ull) == 0)) i += 8;
      if (i == n) break;
    }
    s = utf8_step(s, p[i++]);
    if (s == UTF8_BAD) break;
  }
  u->state = s;
  return s != UTF8_BAD;
}

bool m0__utf8_done(const m0__utf8 *u) { return u->state == UTF8_START; }

/* ---- the handshake ----------------------------------------------------- */

static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

static bool b64_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

int m0__ws_accept(const char *key, size_t n, char out[29]) {
  /* 16 bytes are 22 base64 characters and "==". Checked here, not left to
   * mbedtls, which skips spaces and line breaks inside its input. */
  if (n != 24 || key[22] != '=' || key[23] != '=') return M0__EINVALID;
  for (size_t i = 0; i < 22; i++)
    if (!b64_char(key[i])) return M0__EINVALID;
  unsigned char raw[18];
  size_t olen = 0;
  if (mbedtls_base64_decode(raw, sizeof raw, &olen, (const unsigned char *)key, n) || olen != 16) return M0__EINVALID;
  unsigned char in[24 + sizeof ws_guid - 1], sha[20];
  memcpy(in, key, 24);
  memcpy(in + 24, ws_guid, sizeof ws_guid - 1);
#if MBEDTLS_VERSION_MAJOR >= 3
  if (mbedtls_sha1(in, sizeof in, sha)) return M0__EINVALID;
#else
  if (mbedtls_sha1_ret(in, sizeof in, sha)) return M0__EINVALID;
#endif
  if (mbedtls_base64_encode((unsigned char *)out, 29, &olen, sha, sizeof sha) || olen != 28) return M0__EINVALID;
  out[28] = 0;
  return 0;
}

/* ---- close ------------------------------------------------------------- */

/* Codes a peer may put on the wire: RFC 6455 section 7.4.1 and IANA's
 * WebSocket Close Code Number registry (1012-1014 registered since), and
 * the ranges for libraries (3000-3999) and private use (4000-4999). 1004 is
 * reserved, 1005/1006/1015 are never sent. */
static bool close_code_wire(int code) {
  return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999);
}

int m0__ws_close_parse(const uint8_t *p, size_t n, int *code) {
  if (n == 0) {
    *code = M0__WS_NO_STATUS;
    return 0;
  }
  if (n == 1) return -M0__WS_PROTOCOL;
  int c = p[0] << 8 | p[1];
  *code = c;
  if (!close_code_wire(c)) return -M0__WS_PROTOCOL;
  m0__utf8 u = {0};
  if (!m0__utf8_feed(&u, p + 2, n - 2) || !m0__utf8_done(&u)) return -M0__WS_BAD_DATA;
  return 0;
}

bool m0__ws_close_code_ok(int code) {
  return code == 1000 || code == 1001 || code == 1003 || (code >= 1007 && code <= 1014) ||
         (code >= 3000 && code <= 4999);
}

/* ---- permessage-deflate negotiation (RFC 7692 section 7) -------------- */

typedef struct pmd_rd {
  const char *p, *end;
} pmd_rd;

static bool pmd_tchar(char c) {
  /* RFC 7230 section 3.2.6 */
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return c && strchr("!#$%&'*+-.^_`|~", c);
}

static void pmd_ows(pmd_rd *r) {
  while (r->p < r->end && (*r->p == ' ' || *r->p == '\t')) r->p++;
}

static size_t pmd_token(pmd_rd *r, const char **s) {
  *s = r->p;
  while (r->p < r->end && pmd_tchar(*r->p)) r->p++;
  return (size_t)(r->p - *s);
}

static bool pmd_is(const char *s, size_t n, const char *lit) { return n == strlen(lit) && !strncasecmp(s, lit, n); }

/* A value: a token or a quoted-string, unquoted into v (cap bytes; a longer
 * one is cut, and no valid value is long). false when it does not parse. */
static bool pmd_value(pmd_rd *r, char *v, size_t cap, size_t *vn) {
  *vn = 0;
  if (r->p < r->end && *r->p == '"') {
    r->p++;
    while (r->p < r->end && *r->p != '"') {
      char c = *r->p++;
      if (c == '\\') {
        if (r->p == r->end) return false;
        c = *r->p++;
      }
      if (*vn < cap) v[*vn] = c;
      (*vn)++;
    }
    if (r->p == r->end) return false;
    r->p++;
    return true;
  }
  const char *s;
  size_t n = pmd_token(r, &s);
  if (!n) return false;
  for (size_t i = 0; i < n; i++) {
    if (*vn < cap) v[*vn] = s[i];
    (*vn)++;
  }
  return true;
}

/* RFC 7692 section 7.1.2: 1*DIGIT without a leading zero, 8..15. */
static int pmd_bits(const char *v, size_t n) {
  if (n == 1 && v[0] == '8') return 8;
  if (n == 1 && v[0] == '9') return 9;
  if (n == 2 && v[0] == '1' && v[1] >= '0' && v[1] <= '5') return 10 + (v[1] - '0');
  return M0__EINVALID;
}

/* Skips to past the next ',' outside quotes (the end of this element). */
static void pmd_skip(pmd_rd *r) {
  bool q = false;
  while (r->p < r->end) {
    char c = *r->p++;
    if (q && c == '\\' && r->p < r->end) r->p++;
    else if (c == '"') q = !q;
    else if (c == ',' && !q) return;
  }
}

/* The parameters an offer may hold (RFC 7692 section 7.1), each at most
 * once: whether it takes a value (window bits, 8..15). */
enum { PMD_NO_VALUE, PMD_VALUE, PMD_MAY_VALUE };
enum { PMD_SNC, PMD_CNC, PMD_SMWB, PMD_CMWB, PMD_PARAMS };
static const struct {
  const char *name;
  int value;
} pmd_params[PMD_PARAMS] = {
    [PMD_SNC] = {"server_no_context_takeover", PMD_NO_VALUE},
    [PMD_CNC] = {"client_no_context_takeover", PMD_NO_VALUE},
    [PMD_SMWB] = {"server_max_window_bits", PMD_VALUE},
    [PMD_CMWB] = {"client_max_window_bits", PMD_MAY_VALUE},
};

/* What one offer said: each parameter seen, and its bits (-1: no value). */
typedef struct pmd_offer {
  bool seen[PMD_PARAMS];
  int bits[PMD_PARAMS];
} pmd_offer;

/* One parameter, after its ';': false declines the offer. */
static bool pmd_param(pmd_rd *r, pmd_offer *o) {
  pmd_ows(r);
  const char *pn;
  size_t pnn = pmd_token(r, &pn);
  pmd_ows(r);
  bool has_v = false;
  char v[8];
  size_t vn = 0;
  if (r->p < r->end && *r->p == '=') {
    r->p++;
    pmd_ows(r);
    if (!pmd_value(r, v, sizeof v, &vn)) return false;
    has_v = true;
  }
  if (!pnn) return false;
  for (int i = 0; i < PMD_PARAMS; i++) {
    if (!pmd_is(pn, pnn, pmd_params[i].name)) continue;
    if (o->seen[i]) return false;
    o->seen[i] = true;
    int want = pmd_params[i].value;
    if (!has_v) return want != PMD_VALUE;
    if (want == PMD_NO_VALUE) return false;
    return (o->bits[i] = pmd_bits(v, vn)) >= 0;
  }
  return false; /* section 7: an unknown parameter declines the offer */
}

/* The parameters of a permessage-deflate offer, up to its end (',' or the
 * header's): false declines it. */
static bool pmd_offer_read(pmd_rd *r, pmd_offer *o) {
  for (;;) {
    pmd_ows(r);
    if (r->p == r->end || *r->p == ',') return true;
    if (*r->p != ';') return false;
    r->p++;
    if (!pmd_param(r, o)) return false;
  }
}

/* The offer accepted: out set, the response's value written. */
static bool pmd_accept(const pmd_offer *o, m0__ws_pmd_params *out, char *resp, size_t cap) {
  int smwb = o->bits[PMD_SMWB], cmwb = o->bits[PMD_CMWB];
  out->client_no_context = o->seen[PMD_CNC];
  out->client_bits = cmwb > 0 ? cmwb : 15;
  out->server_bits = smwb > 0 ? smwb : 15;
  /* Section 7.1.2.1: an accepted server_max_window_bits is echoed;
   * section 7.1.2.2: client_max_window_bits only when offered. */
  char tmp[160];
  int len = snprintf(tmp, sizeof tmp, "permessage-deflate; server_no_context_takeover%s",
                     o->seen[PMD_CNC] ? "; client_no_context_takeover" : "");
  if (o->seen[PMD_SMWB]) len += snprintf(tmp + len, sizeof tmp - (size_t)len, "; server_max_window_bits=%d", smwb);
  if (o->seen[PMD_CMWB])
    len += snprintf(tmp + len, sizeof tmp - (size_t)len, "; client_max_window_bits=%d", out->client_bits);
  if ((size_t)len >= cap) return false;
  memcpy(resp, tmp, (size_t)len + 1);
  return true;
}

bool m0__ws_pmd_negotiate(const char *offer, size_t n, m0__ws_pmd_params *out, char *resp, size_t cap) {
  pmd_rd r = {offer, offer + n};
  if (cap) resp[0] = 0;
  while (r.p < r.end) {
    pmd_ows(&r);
    const char *name;
    size_t nn = pmd_token(&r, &name);
    pmd_offer o = {.bits = {-1, -1, -1, -1}};
    if (nn > 0 && pmd_is(name, nn, "permessage-deflate") && pmd_offer_read(&r, &o))
      return pmd_accept(&o, out, resp, cap);
    pmd_skip(&r);
  }
  return false;
}

bool m0__ws_pmd_fits(const m0__ws_pmd_params *p, size_t len) {
  return p->server_bits >= 15 || (p->server_bits >= 8 && len <= (size_t)1 << p->server_bits);
}

/* ---- the zlib streams -------------------------------------------------- */

static const uint8_t pmd_tail[4] = {0x00, 0x00, 0xff, 0xff};

struct m0__ws_inflater {
  z_stream s;
  bool reset_each; /* client_no_context_takeover */
};

m0__ws_inflater *m0__ws_inflater_new(const m0__ws_pmd_params *p) {
  m0__ws_inflater *z = calloc(1, sizeof *z);
  if (!z) return NULL;
  int bits = p->client_bits < 9 ? 9 : p->client_bits > 15 ? 15 : p->client_bits;
  if (inflateInit2(&z->s, -bits) != Z_OK) {
    free(z);
    return NULL;
  }
  z->reset_each = p->client_no_context;
  return z;
}

void m0__ws_inflater_free(m0__ws_inflater *z) {
  if (!z) return;
  inflateEnd(&z->s);
  free(z);
}

/* Inflates what z->s holds as input into out until it is all read: 0, an
 * error (as m0__ws_inflate's), with *made the bytes made so far and *ended
 * set when a final block ended the stream. */
static int pmd_inflate_part(m0__ws_inflater *z, m0__buf *out, size_t *made, size_t max, bool *ended) {
  for (;;) {
    /* Room for one byte past max, so going past it is seen at once (and
     * never none: zlib given no room makes no progress). */
    size_t room = *made < max ? max - *made + 1 : 1;
    if (room > 16384) room = 16384;
    if (m0__buf_reserve(out, room)) return M0__ENOMEM;
    z->s.next_out = (Bytef *)out->p + out->len;
    z->s.avail_out = (uInt)room;
    int zr = inflate(&z->s, Z_SYNC_FLUSH);
    size_t got = room - z->s.avail_out;
    out->len += got;
    *made += got;
    if (*made > max) return -M0__WS_TOO_BIG;
    if (zr == Z_STREAM_END) {
      /* A final block (BFINAL) ends the stream; what follows it is
       * ignored (RFC 7692 section 7.2.3.4's example pads it with a 00). */
      *ended = true;
      return 0;
    }
    if (zr == Z_MEM_ERROR) return M0__ENOMEM;
    if (zr != Z_OK && zr != Z_BUF_ERROR) return -M0__WS_PROTOCOL;
    if (z->s.avail_in == 0 && z->s.avail_out > 0) return 0; /* all read, nothing pending */
    if (zr == Z_BUF_ERROR && z->s.avail_out > 0) return -M0__WS_PROTOCOL;
  }
}

int m0__ws_inflate(m0__ws_inflater *z, const uint8_t *in, size_t n, m0__buf *out, size_t max) {
  size_t start = out->len, made = 0;
  int rv = n > UINT32_MAX ? -M0__WS_TOO_BIG : 0;
  bool ended = false;
  /* Two inputs: the message, then the 00 00 ff ff its sender took off
   * (RFC 7692 section 7.2.2). */
  for (int part = 0; part < 2 && !ended && !rv; part++) {
    z->s.next_in = (Bytef *)(part ? pmd_tail : in);
    z->s.avail_in = (uInt)(part ? sizeof pmd_tail : n);
    rv = pmd_inflate_part(z, out, &made, max, &ended);
  }
  /* After an error the connection closes; the stream is reset anyway so a
   * caller that goes on does not inflate from a broken state. A stream
   * that ended has no context to keep. */
  if (rv || ended || z->reset_each) inflateReset(&z->s);
  if (rv) out->len = start;
  z->s.next_in = z->s.next_out = NULL;
  return rv;
}

struct m0__ws_deflater {
  z_stream s;
};

m0__ws_deflater *m0__ws_deflater_new(void) {
  m0__ws_deflater *z = calloc(1, sizeof *z);
  if (!z) return NULL;
  if (deflateInit2(&z->s, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    free(z);
    return NULL;
  }
  return z;
}

void m0__ws_deflater_free(m0__ws_deflater *z) {
  if (!z) return;
  deflateEnd(&z->s);
  free(z);
}

int m0__ws_deflate(m0__ws_deflater *z, const uint8_t *in, size_t n, m0__buf *out) {
  size_t start = out->len;
  if (n > UINT32_MAX / 2) return M0__ENOMEM; /* beyond what one zlib call takes */
  deflateReset(&z->s);
  z->s.next_in = (Bytef *)in;
  z->s.avail_in = (uInt)n;
  /* deflateBound covers a whole stream; the sync flush's empty stored block
   * adds at most a few bytes more. */
  size_t room = deflateBound(&z->s, (uLong)n) + 16;
  int rv = 0;
  for (;;) {
    if (m0__buf_reserve(out, room)) { rv = M0__ENOMEM; break; }
    z->s.next_out = (Bytef *)out->p + out->len;
    z->s.avail_out = (uInt)room;
    int zr = deflate(&z->s, Z_SYNC_FLUSH);
    out->len += room - z->s.avail_out;
    if (zr != Z_OK && zr != Z_BUF_ERROR) { rv = M0__ENOMEM; break; }
    if (z->s.avail_in == 0 && z->s.avail_out > 0) break;
    room = 4096;
  }
  z->s.next_in = z->s.next_out = NULL;
  if (rv) {
    out->len = start;
    return rv;
  }
  /* A sync flush ends on an empty stored block, 00 00 ff ff; the receiver
   * puts it back (RFC 7692 section 7.2.1). */
  if (out->len - start >= 4 && !memcmp(out->p + out->len - 4, pmd_tail, 4)) out->len -= 4;
  return 0;
}
