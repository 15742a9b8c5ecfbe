/* Percent-decoding, query strings and the path, for the application.
 *
 * Design notes. Nothing allocates: a raw string is an m0_str into the
 * request, a decoded one goes into the caller's buffer. Decoding never
 * lengthens (three bytes become one, others stay one), so a buffer the size
 * of the raw string always suffices; -1 covers every refusal, because the
 * caller's answer to each is the same (400).
 *
 * What is refused, and why:
 *  - a '%' without two hex digits: RFC 3986 section 2.1 has no other form,
 *    and passing it through would let "%zz" and "%25zz" decode alike;
 *  - %00 and a raw NUL: a decoded string handed to anything C (open,
 *    strcmp, a log line) would end early, and what was checked would not be
 *    what is used;
 *  - %2F under M0_DECODE_PATH: the router split the path on the raw '/',
 *    so a decoded '/' inside a segment (or inside req->path) is a boundary
 *    the routes never saw, the classic "..%2F..%2Fetc" traversal.
 * '+' is a space only under M0_DECODE_FORM: in a path it is a sub-delim,
 * itself (RFC 3986 section 2.2); in a query or form body the
 * x-www-form-urlencoded rules make it a space (WHATWG URL section 5.1).
 *
 * Dot-segments are refused, not removed (RFC 3986 section 5.2.4 is a
 * client's step when it resolves a reference): a client that sends them is
 * a tool or an attack, and a host that removed them would route a path that
 * differs from req->target, which the access log, the actors' wire and any
 * proxy in front still carry. %2E counts as '.' (section 6.2.2.2). */
#include <string.h>

#include "http/query.h"
#include "base/errors.h"
#include "m0/m0.h"

static int query_hex(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return M0__EINVALID;
}

/* The decoded byte at in.p[*i] (advancing *i past it), or M0__EINVALID
 * when refused. */
static int query_byte(m0_str in, size_t *i, unsigned flags) {
  unsigned char c = (unsigned char)in.p[*i];
  if (c == '%') {
    if (in.n - *i < 3) return M0__EINVALID;
    int hi = query_hex((unsigned char)in.p[*i + 1]), lo = query_hex((unsigned char)in.p[*i + 2]);
    if (hi < 0 || lo < 0) return M0__EINVALID;
    c = (unsigned char)(hi << 4 | lo);
    if (c == '/' && (flags & M0_DECODE_PATH)) return M0__EINVALID;
    *i += 3;
  } else {
    if (c == '+' && (flags & M0_DECODE_FORM)) c = ' ';
    *i += 1;
  }
  return c == 0 ? M0__EINVALID : c;
}

long m0_decode(m0_str in, char *out, size_t cap, unsigned flags) {
  size_t n = 0;
  for (size_t i = 0; i < in.n;) {
    int c = query_byte(in, &i, flags);
    if (c < 0 || n == cap) return -1;
    out[n++] = (char)c;
  }
  return (long)n;
}

bool m0__decoded_equal(m0_str raw, const char *z, size_t n, unsigned flags) {
  size_t k = 0;
  for (size_t i = 0; i < raw.n;) {
    int c = query_byte(raw, &i, flags);
    if (c < 0 || k == n || (unsigned char)z[k] != c) return false;
    k++;
  }
  return k == n;
}

void m0_query_init(m0_query_iter *it, m0_str query) {
  it->p = query.n ? query.p : NULL;
  it->end = it->p ? query.p + query.n : NULL;
}

bool m0_query_next(m0_query_iter *it, m0_str *key, m0_str *value) {
  while (it->p && it->p < it->end) {
    const char *amp = memchr(it->p, '&', (size_t)(it->end - it->p));
    const char *start = it->p, *stop = amp ? amp : it->end;
    it->p = amp ? amp + 1 : it->end;
    if (stop == start) continue; /* "a&&b", "&a", "a&": nothing between */
    const char *eq = memchr(start, '=', (size_t)(stop - start));
    const char *kend = eq ? eq : stop;
    *key = (m0_str){start, (size_t)(kend - start)};
    *value = eq ? (m0_str){eq + 1, (size_t)(stop - eq - 1)} : (m0_str){stop, 0};
    return true;
  }
  return false;
}

bool m0_request_query_decoded(const m0_request *req, const char *key, char *out, size_t cap, size_t *len) {
  size_t kn = strlen(key);
  m0_query_iter it;
  m0_str k, v;
  m0_query_init(&it, req->query);
  while (m0_query_next(&it, &k, &v)) {
    if (!m0__decoded_equal(k, key, kn, M0_DECODE_FORM)) continue;
    /* The first match answers, even when its value is malformed: falling
     * through to a later one would let a client pick which of two values a
     * check and a use each see. */
    long n = m0_decode(v, out, cap, M0_DECODE_FORM);
    if (n < 0) return false;
    *len = (size_t)n;
    return true;
  }
  return false;
}

bool m0__path_dot_segment(m0_str path) {
  /* Every request asks: most paths hold neither a dot nor an escape (one
   * pass over a short path, not a memchr for each). */
  size_t i = 0;
  while (i < path.n && path.p[i] != '.' && path.p[i] != '%') i++;
  if (i == path.n) return false;
  const char *p = path.p, *end = path.p + path.n;
  for (;;) {
    const char *slash = p < end ? memchr(p, '/', (size_t)(end - p)) : NULL;
    m0_str seg = {p, (size_t)((slash ? slash : end) - p)};
    /* A dot-segment is at most 6 raw bytes ("%2E%2E"): longer segments are
     * not decoded. */
    if (seg.n && seg.n <= 6 && (m0__decoded_equal(seg, ".", 1, 0) || m0__decoded_equal(seg, "..", 2, 0)))
      return true;
    if (!slash) break;
    p = slash + 1;
  }
  return false;
}

bool m0_request_path_decoded(const m0_request *req, char *out, size_t cap, size_t *len) {
  if (m0__path_dot_segment(req->path)) return false;
  long n = m0_decode(req->path, out, cap, M0_DECODE_PATH);
  if (n < 0) return false;
  *len = (size_t)n;
  return true;
}
