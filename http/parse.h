/* The request parser: llhttp (strict: no lenient flag) plus m0's own checks,
 * over a buffer the caller owns. It knows nothing of sockets, so it is unit
 * tested and fuzzed on bytes alone.
 *
 * Design notes
 * - Spans are offsets into the caller's buffer, never pointers, so the buffer
 *   may grow (realloc) or be compacted between feeds; the caller reports a
 *   compaction with m0__parser_shift.
 * - The parser stops (llhttp pause) at the end of each request, so the caller
 *   answers one request before the next is parsed: responses go out in order.
 * - The body is copied out (de-chunked) as it arrives, so body bytes never
 *   have to stay in the input buffer.
 * - Refused here, beyond llhttp's strict mode: a 1.1 request without Host or
 *   with two, a Host that is not uri-host [":" port] (empty, userinfo, a path,
 *   a comma: two Hosts folded into one), Transfer-Encoding other than exactly
 *   "chunked", Transfer-Encoding on 1.0, and the limits (414, 431, 413). The
 *   request line: more than one SP between its parts, a fragment, "*" but for
 *   OPTIONS, an absolute-form whose scheme is not http or https, whose
 *   authority is empty or has userinfo, or whose path is empty before a query;
 *   CONNECT is 501 (m0 is no proxy). A bare CR anywhere but in a body is 400.
 * - The request an app sees is in origin-form: an absolute-form target
 *   (RFC 9112 3.2.2) leaves url spanning its path and query (its "/" when the
 *   path is empty) and the Host value spanning its authority, whatever Host
 *   said. A header value's spans exclude OWS on both sides (RFC 9110 5.5).
 *   An Upgrade is ignored (RFC 9110 7.8): what follows is the next request.
 * - The same answers on llhttp 8 (Debian 12) and 9 (Debian 13): m0 checks
 *   itself what llhttp 8 lets through and 9 refuses (a bare LF ending the
 *   request line, the head or the trailers; an empty header name;
 *   Content-Length in the trailers; a fold after an empty first line, whose
 *   line end llhttp 8 does not hand over), and decides 505 itself (a well-formed
 *   version other than 1.0 and 1.1); any other error llhttp reports is a
 *   400. What still differs by library is in README's HTTP section.
 */
#ifndef M0_HTTP_PARSE_H
#define M0_HTTP_PARSE_H

#include <llhttp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

#define M0__MAX_HEADERS 100

typedef struct m0__span {
  uint32_t off, len;
} m0__span;

/* Where the header fields of the request being parsed are. 1.6 KiB, so a
 * parser holds one only from a request's first header to its answer and
 * returns it then: an idle keep-alive connection holds none. */
typedef struct m0__header_spans {
  m0__span name[M0__MAX_HEADERS], value[M0__MAX_HEADERS];
  struct m0__header_spans *next; /* in the pool's spare list */
} m0__header_spans;

/* Spare header spans shared by the parsers of one thread (one loop), so a
 * request costs no malloc. It keeps at most M0__SPANS_SPARE: a burst of slow
 * requests does not pin its peak for ever. */
typedef struct m0__span_pool {
  m0__header_spans *spare;
  int nspare;
} m0__span_pool;

#define M0__SPANS_SPARE 16
void m0__span_pool_fini(m0__span_pool *pool);

typedef struct m0__parse_limits {
  size_t max_header_bytes; /* request line + headers: 431 */
  size_t max_uri_bytes;    /* request target: 414 */
  size_t max_body_bytes;   /* body: 413 */
} m0__parse_limits;

/* A traceparent field's value (W3C Trace Context) into its trace id, parent
 * id and flags; the id is left 0 when the value is not one (http/h2.c
 * reads an HTTP/2 stream's with it too). */
void m0__traceparent(const char *s, size_t n, uint64_t *hi, uint64_t *lo, uint64_t *parent, uint8_t *flags);

typedef enum m0__parse_result {
  M0__PARSE_MORE,    /* feed more bytes */
  M0__PARSE_REQUEST, /* a whole request is ready */
  M0__PARSE_ERROR,   /* answer p->status and close */
} m0__parse_result;

typedef struct m0__parser {
  llhttp_t ll;
  m0__parse_limits lim;
  const char *base; /* the buffer during a feed */
  const char *end;  /* its end: the scan may read up to it */
  /* Line endings: the framing bytes (everything but body data) llhttp has
   * consumed are checked up to scan (late: where a check needs it, before
   * any refusal, where llhttp stops), and after_cr says the last of them was
   * a CR, so a bare LF is refused whichever llhttp lets it through. */
  const char *scan;
  const char *pending; /* the latest piece handed over: scanned before any refusal */
  const char *fed;     /* where this feed began in base */
  const char *piece_end; /* the end of the version's or a header's latest piece in this feed, or NULL */
  const char *name_at;   /* the start of a header name's latest piece in this feed, or NULL */
  bool after_cr;
  /* A line end since the current header's name began: the stream position
   * (plus one) of the last LF scanned beyond that of the name's latest piece. */
  uint64_t lf_pos, name_pos;
  bool head_pending; /* llhttp paused at the end of the head: m0's checks next */
  /* The request line's parts by their place in the stream of bytes fed (the
   * caller compacts its buffer, dropping what no span needs, so offsets do
   * not say what lay between two parts): one SP between method and target,
   * and exactly " HTTP/" (the last framing bytes seen, in tail) between the
   * target and the version's digits. */
  uint64_t stream_next; /* the stream position of the next byte to feed */
  uint64_t stream_base; /* during a feed: the stream position of base[0] */
  uint64_t method_at, url_at;
  uint64_t tail; /* the request line's last framing bytes, the latest lowest */
  char ver[3];       /* the version's digits, "1.1" */
  uint8_t nver;
  /* the request being parsed */
  bool started, headers_done;
  m0__span method, url;
  m0__header_spans *hs; /* non-NULL once the request has a header */
  int nheaders;
  int nhead; /* of them, the head's: what follows the body (trailers) is checked, not kept */
  m0__span_pool *pool; /* NULL: hs is malloc'd and freed per request */
  size_t head_bytes;
  uint32_t keep_end; /* bytes before this offset are referenced by spans */
  int hosts;
  int host_index; /* the Host field's index in hs, -1 for none */
  bool te_chunked_only, has_te, expect_continue, want_close;
  int cur_header; /* which well-known header the value belongs to */
  uint64_t trace_hi, trace_lo; /* a valid traceparent's trace id; 0 when none */
  uint64_t trace_parent;        /* its parent (span) id and flags, echoed in the response */
  uint8_t trace_flags;
  m0__buf body; /* de-chunked; its memory is kept from request to request */
  /* results */
  int status;        /* on M0__PARSE_ERROR: 400, 413, 414, 417, 431, 501, 503, 505 */
  const char *why;   /* on M0__PARSE_ERROR: a short reason for the log */
  bool keep_alive;   /* on M0__PARSE_REQUEST: the client allows another */
  int version_minor;
  bool is_head;
  bool asterisk; /* on M0__PARSE_REQUEST: OPTIONS * (the server, not a resource) */
} m0__parser;

/* pool may be NULL; when given it must outlive the parser. */
void m0__parser_init(m0__parser *p, const m0__parse_limits *lim, m0__span_pool *pool);
void m0__parser_fini(m0__parser *p);
/* Parses buf[*off, len). Advances *off past what was consumed. After
 * M0__PARSE_REQUEST, read the request, then call m0__parser_next. */
m0__parse_result m0__parser_feed(m0__parser *p, const char *buf, size_t len, size_t *off);
/* Forgets the answered request and readies the parser for the next. */
void m0__parser_next(m0__parser *p);
/* The buffer's bytes moved down by delta: adjust every span. */
void m0__parser_shift(m0__parser *p, uint32_t delta);
/* True between requests (nothing of a next request seen yet). Inline: the
 * connection asks several times per request. */
static inline bool m0__parser_idle(const m0__parser *p) { return !p->started; }

#endif
