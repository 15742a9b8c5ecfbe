/* WebSocket (RFC 6455) and permessage-deflate (RFC 7692): the protocol's
 * pure parts, with no socket and no loop (http/ws.c). The connection's side
 * (the upgrade, reading and writing frames, subscriptions, the close
 * handshake) is http/websocket.c.
 * Thread safety: none needed for the functions; an m0__ws_inflater or
 * m0__ws_deflater belongs to one thread. */
#ifndef M0_HTTP_WS_H
#define M0_HTTP_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

#define M0__WS_HEADER_MAX 14 /* 2 + 8 (length) + 4 (mask) */

enum {
  M0__WS_CONT = 0x0,
  M0__WS_TEXT = 0x1,
  M0__WS_BINARY = 0x2,
  M0__WS_CLOSE = 0x8,
  M0__WS_PING = 0x9,
  M0__WS_PONG = 0xA,
};

/* Close codes the host sends (RFC 6455 section 7.4.1). */
enum {
  M0__WS_NORMAL = 1000,
  M0__WS_GOING_AWAY = 1001,
  M0__WS_PROTOCOL = 1002,
  M0__WS_UNSUPPORTED = 1003,
  M0__WS_NO_STATUS = 1005,   /* never sent: a close frame without a code */
  M0__WS_ABNORMAL = 1006,    /* never sent: the socket went without a close frame */
  M0__WS_BAD_DATA = 1007,    /* text that is not UTF-8 */
  M0__WS_POLICY = 1008,
  M0__WS_TOO_BIG = 1009,
  M0__WS_INTERNAL = 1011,
};

typedef struct m0__ws_frame {
  bool fin, rsv1;
  uint8_t opcode;
  bool masked;
  uint8_t mask[4];
  uint64_t len;  /* payload bytes */
  size_t hlen;   /* header bytes (2..14) */
} m0__ws_frame;

/* Parses a client frame's header from p[0, n). Returns hlen (> 0) when the
 * header is whole, 0 when more bytes are needed, or a negative close code:
 * -M0__WS_PROTOCOL for an unmasked frame (a client must mask), a reserved
 * bit set (RSV1 is allowed only on a data frame's first fragment when
 * `deflate` was negotiated), an unknown opcode, a control frame that is
 * fragmented or carries more than 125 bytes, a 64-bit length with its top
 * bit set or a length not in its shortest form; -M0__WS_TOO_BIG when len
 * passes max_len. */
int m0__ws_frame_parse(const uint8_t *p, size_t n, bool deflate, uint64_t max_len, m0__ws_frame *f);
/* XORs n payload bytes in place with the mask; `offset` is how many bytes of
 * this frame's payload came before p (a payload unmasked in pieces). */
void m0__ws_unmask(uint8_t *p, size_t n, const uint8_t mask[4], uint64_t offset);
/* Writes a server frame's header (never masked) into out
 * (M0__WS_HEADER_MAX bytes); returns its length. */
size_t m0__ws_frame_header(uint8_t *out, uint8_t opcode, bool fin, bool rsv1, uint64_t len);

/* UTF-8 checked in pieces (a text message's fragments, a close reason):
 * RFC 3629, so overlong forms, surrogates and code points past U+10FFFF
 * are invalid. Zeroed = at the start. */
typedef struct m0__utf8 {
  uint32_t state;
} m0__utf8;
/* false once the bytes so far cannot be the start of valid UTF-8 (a
 * message is refused at the first bad byte, not at its end). */
bool m0__utf8_feed(m0__utf8 *u, const uint8_t *p, size_t n);
/* true when the bytes fed end on a whole character. */
bool m0__utf8_done(const m0__utf8 *u);

/* Sec-WebSocket-Accept for a Sec-WebSocket-Key (SHA-1 and base64, from
 * mbedcrypto, which nng links already): writes 28 characters and a NUL.
 * M0__EINVALID when key is not the base64 of 16 bytes (RFC 6455 section 4.2.1). */
int m0__ws_accept(const char *key, size_t n, char out[29]);

/* A received close frame's payload: empty (*code = 1005), or a code and a
 * UTF-8 reason. 0, -M0__WS_PROTOCOL (one byte, or a code a peer may not
 * send: valid are 1000-1003, 1007-1014 and 3000-4999, as RFC 6455 section
 * 7.4 and the IANA registry say; 1004 is reserved and 1005, 1006 and 1015
 * never go on the wire), or -M0__WS_BAD_DATA (the reason is not UTF-8). */
int m0__ws_close_parse(const uint8_t *p, size_t n, int *code);
/* Whether the application may send `code` (1000, 1001, 1003, 1007-1014,
 * 3000-4999). */
bool m0__ws_close_code_ok(int code);

/* ---- permessage-deflate (RFC 7692) ------------------------------------
 * The host always answers with server_no_context_takeover: each message it
 * sends is compressed on its own, so one compressed broadcast frame serves
 * every subscriber, and a loop needs one deflater (15-bit window) for all
 * its sockets. A client that asked for a smaller server window gets a
 * message compressed only when it is no longer than that window (see
 * m0__ws_pmd_fits), the others uncompressed (RSV1 clear, as section 6
 * allows). A client's messages are inflated with its own context (kept
 * only when the client did not agree to client_no_context_takeover), made
 * at its first compressed message: an idle socket holds no zlib state. */
typedef struct m0__ws_pmd_params {
  bool client_no_context; /* the client resets its context per message */
  int client_bits;        /* its window, 8..15 (15 when not said) */
  int server_bits;        /* the window it lets ours be, 8..15 (15 when not said) */
} m0__ws_pmd_params;
/* Reads the Sec-WebSocket-Extensions values the client offered (every
 * header's value joined by ", "), accepts the first permessage-deflate
 * offer whose parameters are valid, and writes the response's extension
 * value into resp (cap bytes, NUL-terminated). true when one was accepted.
 * An offer with an unknown, repeated or badly valued parameter is skipped
 * (section 7: server_max_window_bits needs a value, the no_context_takeover
 * ones take none, a window is 8..15 without a leading zero). An accepted
 * server_max_window_bits is echoed with the value offered (section
 * 7.1.2.1), client_max_window_bits answered only when offered (7.1.2.2:
 * its value, or 15 when it came without one). */
bool m0__ws_pmd_negotiate(const char *offer, size_t n, m0__ws_pmd_params *out, char *resp, size_t cap);
/* Whether a message of len bytes may go compressed by the shared deflater
 * to a socket with these parameters: the window is 15 bits, or the message
 * is no longer than the socket's server window (compressed on its own, a
 * message's back-references never reach before its first byte). */
bool m0__ws_pmd_fits(const m0__ws_pmd_params *p, size_t len);

typedef struct m0__ws_inflater m0__ws_inflater;
/* NULL when out of memory. */
m0__ws_inflater *m0__ws_inflater_new(const m0__ws_pmd_params *p);
void m0__ws_inflater_free(m0__ws_inflater *z);
/* Inflates one whole message (its fragments' payloads joined) and appends
 * it to out, at most max bytes. 0, -M0__WS_TOO_BIG past max,
 * -M0__WS_PROTOCOL for data that is not deflate, or M0__ENOMEM; on an error
 * nothing is left appended. */
int m0__ws_inflate(m0__ws_inflater *z, const uint8_t *in, size_t n, m0__buf *out, size_t max);

typedef struct m0__ws_deflater m0__ws_deflater;
m0__ws_deflater *m0__ws_deflater_new(void);
void m0__ws_deflater_free(m0__ws_deflater *z);
/* Compresses one message on its own (no context kept) and appends it to
 * out, without the 00 00 ff ff tail. 0 or M0__ENOMEM. */
int m0__ws_deflate(m0__ws_deflater *z, const uint8_t *in, size_t n, m0__buf *out);

#endif
