#include "http/parse.h"

#include "base/errors.h"
#include "http/authority.h"
#include "http/bytes.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Strict parsing on both llhttp releases m0 builds with: llhttp 8 (Debian
 * 12's sources) is strict only when compiled with LLHTTP_STRICT_MODE=1;
 * llhttp 9 (Debian 13's library) has no such build, it is strict unless a
 * llhttp_set_lenient_* call relaxes it, and nothing here makes one. */
#if LLHTTP_VERSION_MAJOR < 9 && !LLHTTP_STRICT_MODE
#error "llhttp 8 must be compiled with LLHTTP_STRICT_MODE=1 (see CMakeLists.txt)"
#endif

enum { HDR_OTHER, HDR_HOST, HDR_TE, HDR_EXPECT, HDR_TRACEPARENT, HDR_TRAILER };

#define PARSE(ll) ((m0__parser *)(ll)->data)

/* Refuses the request from inside a callback: llhttp stops with HPE_USER. */
static int parse_fail(m0__parser *p, int status, const char *why) {
  p->status = status;
  p->why = why;
  return HPE_USER;
}
static int parse_refuse(m0__parser *p, int status, const char *why);

static uint32_t parse_off(m0__parser *p, const char *at) { return (uint32_t)(at - p->base); }

/* Where a byte of the buffer being fed lies in the stream of every byte fed. */
static uint64_t parse_pos(const m0__parser *p, const char *at) { return p->stream_base + (uint64_t)(at - p->base); }

/* Extends a span with the next piece; pieces of one span are contiguous. */
static void parse_extend(m0__parser *p, m0__span *s, const char *at, size_t len) {
  if (s->len == 0) s->off = parse_off(p, at);
  s->len += (uint32_t)len;
  if (s->off + s->len > p->keep_end) p->keep_end = s->off + s->len;
}

static int parse_head_bytes(m0__parser *p, size_t len) {
  p->head_bytes += len;
  if (p->head_bytes > p->lim.max_header_bytes)
    return parse_refuse(p, 431, "request line and headers too large");
  return 0;
}

/* The first byte up to CR in [c, upto), or NULL: a word at a time where the
 * fed buffer (up to end) holds eight bytes from c, the bytes past upto
 * masked off. */
static const char *parse_next_low(const char *c, const char *upto, const char *end) {
#if M0__BYTES_LE
  for (; upto - c >= 8; c += 8) {
    uint64_t m = m0__bytes_below(m0__bytes_load(c), '\r' + 1);
    if (m) return c + m0__bytes_first(m);
  }
  if (c < upto && end - c >= 8) {
    uint64_t m = m0__bytes_below(m0__bytes_load(c), '\r' + 1) & ((UINT64_C(1) << (8 * (upto - c))) - 1);
    return m ? c + m0__bytes_first(m) : NULL;
  }
#endif
  for (; c < upto; c++)
    if ((unsigned char)*c <= '\r') return c;
  return NULL;
}

/* tail keeps the last eight framing bytes, the latest lowest. */
static void parse_tail(m0__parser *p, const char *s, const char *upto) {
  if (upto - s >= 8) {
    uint64_t t = 0;
    for (int i = 0; i < 8; i++) t = t << 8 | (uint8_t)upto[i - 8];
    p->tail = t;
    return;
  }
  for (const char *c = s; c < upto; c++) p->tail = p->tail << 8 | (uint8_t)*c;
}

/* Every LF in the framing llhttp has consumed, [p->scan, upto), must follow
 * a CR, and every CR must be followed by an LF. RFC 9112 2.2 lets a
 * recipient take a bare LF for a line end and a bare CR for a SP, but a
 * server that does reads the bytes differently from one that does not (a
 * proxy in front), so m0 refuses both. llhttp 9 refuses every bare LF itself;
 * llhttp 8 lets one end the request line, the head or the trailers, and
 * either skips a bare CR before the request line. The parser checks up to
 * the start of a piece llhttp hands over where a check needs what it finds
 * (a header value's fold), before any refusal (parse_refuse), and where
 * llhttp stops; it skips the body's bytes. Until the version is read it
 * keeps the last framing bytes in tail (on_version reads them when the
 * request line came in more than one read). */
static int parse_scan(m0__parser *p, const char *upto) {
  const char *s = p->scan;
  if (upto <= s) return 0;
  if (p->after_cr && *s != '\n') return parse_fail(p, 400, "bare CR");
  /* One pass over the framing bytes, a word at a time: only a byte up to
   * CR stops it (http/bytes.h). */
  for (const char *c = s; (c = parse_next_low(c, upto, p->end)) != NULL; c++) {
    if (*c == '\r' && c + 1 < upto) {
      if (c[1] != '\n') return parse_fail(p, 400, "bare CR");
      p->lf_pos = parse_pos(p, ++c) + 1; /* a CRLF: both at once */
      continue;
    }
    if (*c == '\n') {
      if (c == s ? !p->after_cr : c[-1] != '\r') return parse_fail(p, 400, "bare LF");
      p->lf_pos = parse_pos(p, c) + 1;
    }
  }
  if (p->nver == 0) parse_tail(p, s, upto);
  p->after_cr = upto[-1] == '\r';
  p->scan = upto;
  return 0;
}

/* The scan runs late: a callback that needs nothing it finds leaves it for
 * later (pending: the latest piece handed over), and anything that refuses
 * the request scans up to there first. So the answer is the one an eager
 * scan gives: a bare CR or LF before a refusal is the refusal. */
static int parse_refuse(m0__parser *p, int status, const char *why) {
  if (parse_scan(p, p->pending)) return HPE_USER;
  return parse_fail(p, status, why);
}

static int on_message_begin(llhttp_t *ll) {
  PARSE(ll)->started = true;
  return 0;
}

static int on_method(llhttp_t *ll, const char *at, size_t len) {
  m0__parser *p = PARSE(ll);
  p->pending = at;
  if (p->method.len == 0) p->method_at = parse_pos(p, at);
  parse_extend(p, &p->method, at, len);
  return parse_head_bytes(p, len);
}

static int on_url(llhttp_t *ll, const char *at, size_t len) {
  m0__parser *p = PARSE(ll);
  p->pending = at;
  if (p->url.len == 0) {
    /* llhttp 8 takes any run of SP here (RFC 9112 3 lets a recipient); a
     * proxy that splits on one SP reads another target, so m0 refuses. */
    p->url_at = parse_pos(p, at);
    if (p->url_at != p->method_at + p->method.len + 1) return parse_refuse(p, 400, "more than one SP in the request line");
  }
  parse_extend(p, &p->url, at, len);
  if (p->url.len > p->lim.max_uri_bytes) return parse_refuse(p, 414, "request target too long");
  return parse_head_bytes(p, len);
}

static m0__header_spans *spans_take(m0__span_pool *pool) {
  if (!pool || !pool->spare) return malloc(sizeof(m0__header_spans));
  m0__header_spans *hs = pool->spare;
  pool->spare = hs->next;
  pool->nspare--;
  return hs;
}

static void spans_give(m0__span_pool *pool, m0__header_spans *hs) {
  if (!hs) return;
  if (!pool || pool->nspare >= M0__SPANS_SPARE) {
    free(hs);
    return;
  }
  hs->next = pool->spare;
  pool->spare = hs;
  pool->nspare++;
}

void m0__span_pool_fini(m0__span_pool *pool) {
  while (pool->spare) {
    m0__header_spans *hs = pool->spare;
    pool->spare = hs->next;
    free(hs);
  }
  pool->nspare = 0;
}

/* " HTTP/" as tail holds it, its last byte lowest. */
#define PARSE_SP_HTTP                                                                                             \
  ((uint64_t)' ' << 40 | (uint64_t)'H' << 32 | (uint64_t)'T' << 24 | (uint64_t)'T' << 16 | (uint64_t)'P' << 8 | \
   (uint64_t)'/')

/* The version's digits ("1.1" of HTTP/1.1). Before them, exactly " HTTP/"
 * after the target: llhttp 8 also takes "RTSP/" and a run of SP. A
 * well-formed version other than 1.0 and 1.1 is refused with 505 as soon as
 * it is read: llhttp would call HTTP/9.9 invalid (400) but HTTP/2.0 valid,
 * and a request line it finds malformed afterwards (HTTP/1.1 followed by a
 * bare LF) is a 400. */
static int on_version(llhttp_t *ll, const char *at, size_t len) {
  m0__parser *p = PARSE(ll);
  p->pending = at;
  p->piece_end = at + len;
  if (p->nver == 0) {
    /* The six bytes before at, from this feed's bytes where they hold them,
     * else from tail (the scan keeps it across feeds). */
    bool here = at - p->fed >= 6;
    if (!here && parse_scan(p, at)) return HPE_USER;
    if (parse_pos(p, at) != p->url_at + p->url.len + 6 ||
        (here ? memcmp(at - 6, " HTTP/", 6) != 0 : (p->tail & 0xffffffffffffu) != PARSE_SP_HTTP))
      return parse_refuse(p, 400, "request line not method SP target SP HTTP/version");
  }
  if (p->nver == 0 && len >= sizeof p->ver) { /* the version whole, the common case */
    memcpy(p->ver, at, sizeof p->ver);
    p->nver = len > sizeof p->ver ? sizeof p->ver + 1 : sizeof p->ver;
  } else {
    for (size_t i = 0; i < len && p->nver <= sizeof p->ver; i++)
      if (p->nver++ < sizeof p->ver) p->ver[p->nver - 1] = at[i];
  }
  const char *v = p->ver;
  if (p->nver == sizeof p->ver && v[0] >= '0' && v[0] <= '9' && v[1] == '.' && v[2] >= '0' && v[2] <= '9' &&
      !(v[0] == '1' && (v[2] == '0' || v[2] == '1')))
    return parse_refuse(p, 505, "HTTP version not served");
  return 0;
}

static int on_header_field(llhttp_t *ll, const char *at, size_t len) {
  m0__parser *p = PARSE(ll);
  p->pending = at;
  p->name_at = at;
  p->piece_end = at + len;
  p->name_pos = parse_pos(p, at) + 1; /* the line ends before a name are the head's own */
  if (p->cur_header < 0) { /* a new field */
    if (p->nheaders == M0__MAX_HEADERS) return parse_refuse(p, 431, "too many headers");
    if (!p->hs && !(p->hs = spans_take(p->pool))) return parse_refuse(p, 503, "out of memory for the headers");
    p->nheaders++;
    p->hs->name[p->nheaders - 1] = (m0__span){0, 0};
    p->hs->value[p->nheaders - 1] = (m0__span){0, 0};
    p->cur_header = HDR_OTHER;
  }
  parse_extend(p, &p->hs->name[p->nheaders - 1], at, len);
  return parse_head_bytes(p, len);
}

/* name is lower case: a letter of s matches either case, anything else
 * only itself (every header's name is compared with one or two). */
static bool parse_name_is_n(const m0__parser *p, m0__span s, const char *name, size_t n) {
  if (s.len != n) return false;
  const unsigned char *c = (const unsigned char *)p->base + s.off;
  for (size_t i = 0; i < n; i++) {
    unsigned char t = (unsigned char)name[i];
    if (c[i] != t && !(t >= 'a' && t <= 'z' && (c[i] | 0x20) == t)) return false;
  }
  return true;
}
#define parse_name_is(p, s, lit) parse_name_is_n(p, s, lit, sizeof(lit) - 1)

static int on_header_field_complete(llhttp_t *ll) {
  m0__parser *p = PARSE(ll);
  /* An empty field name (": x"): llhttp 9 refuses it, llhttp 8 does not. */
  if (p->cur_header < 0 || p->hs->name[p->nheaders - 1].len == 0) return parse_refuse(p, 400, "empty header name");
  m0__span n = p->hs->name[p->nheaders - 1];
  /* parse_name_is compares the lengths first: only names of these lengths
   * are compared at all. */
  /* Trailers are checked and not kept (docs/behaviour.md): none is a
   * header of the request, whatever its name (a Host, a Cookie, a
   * traceparent there would be a second head that no check saw). Framing
   * in them is refused (RFC 9110 6.5.1): llhttp 9 refuses a Content-Length
   * there, llhttp 8 does not; both refuse a Transfer-Encoding, refused here
   * too so that no library's leniency decides it. */
  if (p->headers_done) {
    if (parse_name_is(p, n, "content-length")) return parse_refuse(p, 400, "Content-Length in the trailers");
    if (parse_name_is(p, n, "transfer-encoding")) return parse_refuse(p, 400, "Transfer-Encoding in the trailers");
    p->cur_header = HDR_TRAILER;
    return 0;
  }
  if (parse_name_is(p, n, "host")) p->cur_header = HDR_HOST;
  else if (parse_name_is(p, n, "transfer-encoding")) p->cur_header = HDR_TE;
  else if (parse_name_is(p, n, "expect")) p->cur_header = HDR_EXPECT;
  else if (parse_name_is(p, n, "traceparent")) p->cur_header = HDR_TRACEPARENT;
  else p->cur_header = HDR_OTHER;
  return 0;
}

static int on_header_value(llhttp_t *ll, const char *at, size_t len) {
  m0__parser *p = PARSE(ll);
  p->pending = at;
  p->piece_end = at + len;
  /* A line end since the name began, before a piece of its value, is a
   * fold: of an empty first line ("X:\r\n Transfer-Encoding: chunked"),
   * where llhttp 8 hands over only what follows it, or after a read that
   * ended at the line end ("X: a\r\n" then " b"), where the connection
   * drops the CRLF no span needs and the span would join "a" and " b" as if
   * unfolded. Fed whole, a fold is inside one piece: the check of the value
   * below sees it. The name's latest piece in this feed: its bytes up to
   * here are looked at, the head is scanned once later; else the scan says. */
  if (len) {
    bool fold;
    if (p->name_at) {
      fold = memchr(p->name_at, '\n', (size_t)(at - p->name_at)) != NULL;
    } else {
      if (parse_scan(p, at)) return HPE_USER;
      fold = p->lf_pos > p->name_pos;
    }
    if (fold) return parse_refuse(p, 400, "obsolete line folding");
  }
  parse_extend(p, &p->hs->value[p->nheaders - 1], at, len);
  return parse_head_bytes(p, len);
}

static int parse_hex(const char *s, size_t n, uint64_t *out) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return M0__EINVALID;
    v = (v << 4) | (uint64_t)d;
  }
  *out = v;
  return 0;
}

void m0__traceparent(const char *s, size_t n, uint64_t *hi, uint64_t *lo, uint64_t *parent, uint8_t *flags) {
  if (n != 55 || s[2] != '-' || s[35] != '-' || s[52] != '-') return; /* 00-<32 hex id>-<16 hex parent>-<2 hex flags> */
  uint64_t f = 0;
  if (parse_hex(s + 3, 16, hi) || parse_hex(s + 19, 16, lo) || parse_hex(s + 36, 16, parent) || parse_hex(s + 53, 2, &f))
    *hi = *lo = 0;
  *flags = (uint8_t)f;
}

static int on_header_value_complete(llhttp_t *ll) {
  m0__parser *p = PARSE(ll);
  m0__span v = p->hs->value[p->nheaders - 1];
  const char *s = p->base + v.off;
  /* llhttp hands a folded (obs-fold) value over with its line break inside:
   * RFC 9112 5.2 lets a server refuse it, and we do. */
  if (v.len && (memchr(s, '\n', v.len) || memchr(s, '\r', v.len)))
    return parse_refuse(p, 400, "obsolete line folding");
  /* OWS after a value is not part of it (RFC 9110 5.5); llhttp skips the OWS
   * before it but hands this over. */
  while (v.len && (s[v.len - 1] == ' ' || s[v.len - 1] == '\t')) v.len--;
  p->hs->value[p->nheaders - 1].len = v.len;
  switch (p->cur_header) {
  case HDR_HOST:
    p->hosts++;
    p->host_index = p->nheaders - 1;
    if (!m0__authority_ok(s, v.len)) return parse_refuse(p, 400, "Host not host[:port]");
    break;
  case HDR_TE:
    /* Only "chunked" alone is served: any other coding, or a list, is
     * ambiguous framing between us and whatever sits in front. */
    if (p->has_te) return parse_refuse(p, 400, "Transfer-Encoding repeated");
    p->has_te = true;
    p->te_chunked_only = v.len == 7 && strncasecmp(s, "chunked", 7) == 0;
    break;
  case HDR_EXPECT:
    if (v.len == 12 && strncasecmp(s, "100-continue", 12) == 0) p->expect_continue = true;
    else return parse_refuse(p, 417, "unsupported Expect");
    break;
  case HDR_TRACEPARENT: m0__traceparent(s, v.len, &p->trace_hi, &p->trace_lo, &p->trace_parent, &p->trace_flags); break;
  default: break;
  }
  p->cur_header = -1;
  return 0;
}

/* An absolute-form target (RFC 9112 3.2.2): a server must accept it and
 * take its authority for Host, whatever Host says. What the app sees is the
 * origin-form: url spans the path and query, Host's value the authority. An
 * empty path is "/" (the second of "//"); before a query it would need a "/"
 * the buffer does not hold, so it is refused. */
static int parse_absolute(m0__parser *p, const char *u, uint32_t n) {
  uint32_t i;
  if (n >= 7 && strncasecmp(u, "http://", 7) == 0) i = 7;
  else if (n >= 8 && strncasecmp(u, "https://", 8) == 0) i = 8;
  else return parse_refuse(p, 400, "absolute-form not http or https");
  uint32_t a = i;
  while (i < n && u[i] != '/' && u[i] != '?') i++;
  if (i == a) return parse_refuse(p, 400, "absolute-form with an empty authority");
  /* userinfo: RFC 9110 4.2.4 says to treat it as an error (it disguises the authority) */
  if (memchr(u + a, '@', i - a)) return parse_refuse(p, 400, "userinfo in the request target");
  if (!m0__authority_ok(u + a, i - a)) return parse_refuse(p, 400, "absolute-form authority not host[:port]");
  if (i < n && u[i] == '?') return parse_refuse(p, 400, "absolute-form with an empty path before its query");
  m0__span authority = {p->url.off + a, i - a};
  p->url = i < n ? (m0__span){p->url.off + i, n - i} : (m0__span){p->url.off + a - 1, 1};
  if (p->host_index >= 0) p->hs->value[p->host_index] = authority;
  return 0;
}

/* The request target's four forms (RFC 9112 3.2): origin-form ("/..."),
 * absolute-form, "*" for OPTIONS alone, and authority-form for CONNECT
 * alone (refused before this is asked). llhttp takes a fragment too. */
static int parse_target(m0__parser *p) {
  const char *u = p->base + p->url.off;
  uint32_t n = p->url.len;
  if (n == 0) return parse_refuse(p, 400, "empty request target");
  if (memchr(u, '#', n)) return parse_refuse(p, 400, "a fragment in the request target");
  if (u[0] == '/') return 0;
  if (u[0] == '*') {
    if (n != 1 || p->ll.method != HTTP_OPTIONS) return parse_refuse(p, 400, "asterisk-form but for OPTIONS");
    p->asterisk = true;
    return 0;
  }
  return parse_absolute(p, u, n);
}

static int parse_head_checks(m0__parser *p) {
  llhttp_t *ll = &p->ll;
  p->headers_done = true;
  p->nhead = p->nheaders; /* the trailers that may follow are not the request's */
  if (ll->http_major != 1 || ll->http_minor > 1) return parse_refuse(p, 505, "HTTP version not served");
  p->version_minor = ll->http_minor;
  if (p->hosts > 1) return parse_refuse(p, 400, "Host repeated");
  if (ll->http_minor == 1 && p->hosts == 0) return parse_refuse(p, 400, "Host missing on HTTP/1.1");
  /* RFC 9110 9.3.6: CONNECT asks for a tunnel, which only a proxy makes; m0
   * implements it for no resource, so 501 (9.1), not 405 (which would say
   * the target, an authority here, is a resource of this server). */
  if (ll->method == HTTP_CONNECT) return parse_refuse(p, 501, "CONNECT: not a proxy");
  if (parse_target(p)) return HPE_USER;
  if (p->has_te && ll->http_minor == 0) return parse_refuse(p, 400, "Transfer-Encoding on HTTP/1.0");
  if (p->has_te && !p->te_chunked_only) return parse_refuse(p, 400, "Transfer-Encoding not chunked");
  if ((ll->flags & F_CONTENT_LENGTH) && ll->content_length > p->lim.max_body_bytes)
    return parse_refuse(p, 413, "body too large");
  p->is_head = ll->method == HTTP_HEAD;
  /* Upgrade (with Connection: upgrade) makes llhttp stop after this request
   * and take what follows for another protocol. m0 switches to none, and
   * RFC 9110 7.8 lets a server ignore Upgrade: what follows is the next
   * request. (After on_headers_complete, llhttp reads this next.) */
  ll->upgrade = 0;
  return 0;
}

/* The head's last line end is checked (parse_scan) before the checks above.
 * llhttp says nowhere where the head ends, so it pauses there and
 * m0__parser_feed checks, but in the common case: the last piece handed
 * over (a value, or the version) followed by CRLF CRLF in this feed, which
 * is the end (a pause and a resume of llhttp cost more than the checks). */
static int on_headers_complete(llhttp_t *ll) {
  m0__parser *p = PARSE(ll);
  const char *e = p->piece_end;
  if (e && p->end - e >= 4 && memcmp(e, "\r\n\r\n", 4) == 0)
    return parse_scan(p, e + 4) || parse_head_checks(p) ? HPE_USER : 0;
  p->head_pending = true;
  return HPE_PAUSED;
}

static int on_body(llhttp_t *ll, const char *at, size_t len) {
  m0__parser *p = PARSE(ll);
  p->pending = at;
  if (parse_scan(p, at)) return HPE_USER;
  p->scan = at + len; /* data, not framing */
  p->after_cr = false;
  if (p->body.len + len > p->lim.max_body_bytes) return parse_refuse(p, 413, "body too large");
  if (m0__buf_append(&p->body, at, len) != 0) return parse_refuse(p, 503, "out of memory for the body");
  return 0;
}

static int on_message_complete(llhttp_t *ll) {
  m0__parser *p = PARSE(ll);
  p->keep_alive = llhttp_should_keep_alive(ll);
  p->nheaders = p->nhead; /* the trailers' fields go */
  return HPE_PAUSED;
}

static const llhttp_settings_t parse_settings = {
    .on_message_begin = on_message_begin,
    .on_method = on_method,
    .on_url = on_url,
    .on_version = on_version,
    .on_header_field = on_header_field,
    .on_header_field_complete = on_header_field_complete,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

static void parse_reset_request(m0__parser *p) {
  p->started = p->headers_done = false;
  p->method = p->url = (m0__span){0, 0};
  spans_give(p->pool, p->hs);
  p->hs = NULL;
  p->nheaders = 0;
  p->head_bytes = 0;
  p->keep_end = 0;
  p->hosts = 0;
  p->host_index = -1;
  p->asterisk = false;
  p->has_te = p->te_chunked_only = p->expect_continue = false;
  p->head_pending = false;
  p->nver = 0;
  p->cur_header = -1;
  p->trace_hi = p->trace_lo = p->trace_parent = 0;
  p->trace_flags = 0;
  m0__buf_clear(&p->body); /* kept for the next request */
  p->is_head = false;
}

void m0__parser_init(m0__parser *p, const m0__parse_limits *lim, m0__span_pool *pool) {
  memset(p, 0, sizeof *p);
  p->lim = *lim;
  p->pool = pool;
  llhttp_init(&p->ll, HTTP_REQUEST, &parse_settings);
  p->ll.data = p;
  parse_reset_request(p);
}

void m0__parser_fini(m0__parser *p) {
  spans_give(p->pool, p->hs);
  p->hs = NULL;
  p->nheaders = 0;
  m0__buf_free(&p->body);
}

m0__parse_result m0__parser_feed(m0__parser *p, const char *buf, size_t len, size_t *off) {
  if (p->status) return M0__PARSE_ERROR;
  p->base = buf;
  p->end = buf + len;
  for (;;) {
    p->scan = p->pending = p->fed = buf + *off;
    p->piece_end = p->name_at = NULL;
    p->stream_base = p->stream_next - *off;
    llhttp_errno_t e = llhttp_execute(&p->ll, buf + *off, len - *off);
    if (e == HPE_OK) {
      *off = len;
      p->stream_next = p->stream_base + len;
      if (parse_scan(p, buf + len)) return M0__PARSE_ERROR;
      return M0__PARSE_MORE;
    }
    if (e == HPE_PAUSED) {
      const char *at = llhttp_get_error_pos(&p->ll);
      *off = (size_t)(at - buf);
      p->stream_next = p->stream_base + *off;
      if (parse_scan(p, at)) return M0__PARSE_ERROR;
      if (!p->head_pending) return M0__PARSE_REQUEST; /* paused at the message's end */
      p->head_pending = false;
      if (parse_head_checks(p)) return M0__PARSE_ERROR;
      llhttp_resume(&p->ll);
      continue;
    }
    if (!p->status) parse_scan(p, p->pending); /* a bare CR or LF before it is the first refusal */
    if (!p->status) { /* llhttp's own refusal: malformed, 400 (505 is on_version's) */
      p->status = 400;
      p->why = llhttp_get_error_reason(&p->ll);
    }
    return M0__PARSE_ERROR;
  }
}

void m0__parser_next(m0__parser *p) {
  parse_reset_request(p);
  llhttp_resume(&p->ll);
}

void m0__parser_shift(m0__parser *p, uint32_t delta) {
  if (!delta) return;
  if (p->method.len) p->method.off -= delta;
  if (p->url.len) p->url.off -= delta;
  for (int i = 0; i < p->nheaders; i++) {
    if (p->hs->name[i].len) p->hs->name[i].off -= delta;
    if (p->hs->value[i].len) p->hs->value[i].off -= delta;
  }
  p->keep_end = p->keep_end > delta ? p->keep_end - delta : 0;
}

