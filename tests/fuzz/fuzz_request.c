/* libFuzzer: the application's request helpers (http/query.c,
 * http/cookie.c; docs/http.md). The input is a flags byte, then lines: a
 * request target (split into path and query as the connection splits it),
 * a cookie name, value, Path and Domain for m0_cookie_format, a number
 * (up to 8 bytes, big-endian: Max-Age and Expires), and every further line
 * a Cookie header (up to 16). Each string lives in a heap buffer of
 * exactly its size, and every output buffer is exactly the size it is
 * given as cap, so a byte read or written past one is an ASan report.
 * Checked: m0_decode against a plain second decoder written here, never
 * longer than its input, refused by one byte less room; the query iterator
 * ends, its pairs lie in order inside the query and cover every byte but
 * the '&' between them; m0_request_query and m0_request_query_decoded find
 * the first pair of a key; the decoded path has the raw path's '/' count
 * and no dot-segment; cookie pairs lie inside their header and
 * m0_request_cookie finds the first; a formatted Set-Cookie is its name and
 * value and reads back as them, and exactly its length fits. Any crash,
 * leak, undefined behaviour or abort is a finding. */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/query.h"
#include "http/response.h"
#include "m0/m0.h"

#define MAX_COOKIE_HEADERS 16

static void check(bool ok) {
  if (!ok) abort();
}

static void inside(m0_str s, m0_str in) { check(s.p && s.p >= in.p && s.n <= (size_t)(in.p + in.n - s.p)); }

/* A heap copy of exactly n bytes, or n bytes to write when p is NULL
 * (malloc(0) may be NULL: then a 1-byte one). */
static char *dup_exact(const void *p, size_t n) {
  char *c = malloc(n ? n : 1);
  check(c != NULL);
  if (n && p) memcpy(c, p, n);
  return c;
}

/* A NUL-terminated heap copy of the n bytes at p (n + 1 bytes exactly). */
static char *dup_z(const char *p, size_t n) {
  char *c = malloc(n + 1);
  check(c != NULL);
  memcpy(c, p, n);
  c[n] = 0;
  return c;
}

/* A second decoder, written from RFC 3986 section 2.1 as plainly as can be:
 * the one to agree with. Returns the length or -1; out has room for in.n. */
static long ref_decode(m0_str in, char *out, unsigned flags) {
  size_t n = 0;
  for (size_t i = 0; i < in.n; i++) {
    int c = (unsigned char)in.p[i];
    if (c == '%') {
      if (i + 2 >= in.n || !isxdigit((unsigned char)in.p[i + 1]) || !isxdigit((unsigned char)in.p[i + 2]))
        return -1;
      char two[3] = {in.p[i + 1], in.p[i + 2], 0};
      c = (int)strtol(two, NULL, 16);
      if (c == '/' && (flags & M0_DECODE_PATH)) return -1;
      i += 2;
    } else if (c == '+' && (flags & M0_DECODE_FORM)) {
      c = ' ';
    }
    if (c == 0) return -1;
    out[n++] = (char)c;
  }
  return (long)n;
}

static size_t count(const char *p, size_t n, char c) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += p[i] == c;
  return k;
}

/* m0_decode of in with flags, checked; the decoded bytes (malloc'd, or NULL
 * when refused) and their length in *len. */
static char *check_decode(m0_str in, unsigned flags, long *len) {
  char *want = dup_exact(NULL, in.n);
  long wn = ref_decode(in, want, flags);
  char *got = dup_exact(NULL, in.n);
  long n = m0_decode(in, got, in.n, flags); /* room for in.n is always enough */
  check(n == wn);
  check(n <= (long)in.n);
  if (n >= 0) {
    check(memcmp(got, want, (size_t)n) == 0);
    check(memchr(got, 0, (size_t)n) == NULL);
    if (flags & M0_DECODE_PATH) check(count(got, (size_t)n, '/') == count(in.p, in.n, '/'));
    char *exact = dup_exact(NULL, (size_t)n);
    check(m0_decode(in, exact, (size_t)n, flags) == n && memcmp(exact, want, (size_t)n) == 0);
    free(exact);
    if (n > 0) {
      char *short1 = dup_exact(NULL, (size_t)n - 1);
      check(m0_decode(in, short1, (size_t)n - 1, flags) == -1);
      free(short1);
    }
  }
  free(want);
  *len = n;
  if (n < 0) {
    free(got);
    return NULL;
  }
  return got;
}

static void fuzz_query(const m0_request *req) {
  m0_str q = req->query;
  unsigned char *mark = calloc(q.n + 1, 1);
  check(mark != NULL);
  m0_query_iter it;
  m0_str k, v;
  m0_query_init(&it, q);
  const char *last = q.p;
  size_t pairs = 0;
  while (m0_query_next(&it, &k, &v)) {
    check(++pairs <= q.n); /* every pair takes at least one byte: it ends */
    inside(k, q);
    inside(v, q);
    check(k.p >= last && v.p >= k.p + k.n); /* in order */
    check(!memchr(k.p, '&', k.n) && !memchr(k.p, '=', k.n) && !memchr(v.p, '&', v.n));
    bool has_eq = v.p == k.p + k.n + 1;
    check(has_eq || (v.p == k.p + k.n && v.n == 0));
    check(k.n + v.n + has_eq > 0);
    size_t from = (size_t)(k.p - q.p), to = (size_t)(v.p + v.n - q.p);
    for (size_t i = from; i < to; i++) mark[i] = 1;
    last = v.p + v.n;

    /* the raw getter finds this key's first pair; the decoded one decodes it */
    if (!memchr(k.p, 0, k.n)) {
      char *key = dup_z(k.p, k.n);
      m0_query_iter first;
      m0_str fk, fv;
      m0_query_init(&first, q);
      while (m0_query_next(&first, &fk, &fv) && !(fk.n == k.n && memcmp(fk.p, k.p, k.n) == 0)) {
      }
      m0_str got;
      check(m0_request_query(req, key, &got) && got.p == fv.p && got.n == fv.n);
      free(key);
    }
    long dn;
    char *dk = check_decode(k, M0_DECODE_FORM, &dn);
    long vn;
    free(check_decode(v, M0_DECODE_FORM, &vn));
    if (dk) {
      char *key = dup_z(dk, (size_t)dn);
      m0_query_iter first;
      m0_str fk, fv;
      m0_query_init(&first, q);
      while (m0_query_next(&first, &fk, &fv) && !m0__decoded_equal(fk, key, (size_t)dn, M0_DECODE_FORM)) {
      }
      long want_n;
      char *want = check_decode(fv, M0_DECODE_FORM, &want_n);
      size_t cap = want ? (size_t)want_n : fv.n;
      char *out = dup_exact(NULL, cap);
      size_t len = 0;
      bool ok = m0_request_query_decoded(req, key, out, cap, &len);
      check(ok == (want != NULL));
      if (ok) check(len == (size_t)want_n && memcmp(out, want, len) == 0);
      free(out);
      free(want);
      free(key);
      free(dk);
    }
  }
  for (size_t i = 0; i < q.n; i++) check(mark[i] == (q.p[i] != '&')); /* every byte but the '&'s */
  free(mark);
  free(check_decode(q, 0, &(long){0}));
}

static void fuzz_path(const m0_request *req) {
  m0_str p = req->path;
  /* the dot-segment check against the second decoder, segment by segment */
  bool dot = false;
  for (size_t i = 0; i <= p.n;) {
    size_t j = i;
    while (j < p.n && p.p[j] != '/') j++;
    m0_str seg = {p.p + i, j - i};
    char *d = dup_exact(NULL, seg.n);
    long n = seg.n ? ref_decode(seg, d, 0) : 0;
    if ((n == 1 && d[0] == '.') || (n == 2 && d[0] == '.' && d[1] == '.')) dot = true;
    free(d);
    i = j + 1;
  }
  check(m0__path_dot_segment(p) == dot);
  long dn;
  char *d = check_decode(p, M0_DECODE_PATH, &dn);
  char *out = dup_exact(NULL, p.n);
  size_t len = 0;
  bool ok = m0_request_path_decoded(req, out, p.n, &len);
  check(ok == (!dot && d != NULL));
  if (ok) {
    check(len == (size_t)dn && memcmp(out, d, len) == 0);
    check(count(out, len, '/') == count(p.p, p.n, '/'));
  }
  free(out);
  free(d);
  for (size_t i = 0; i < req->nparams; i++) free(check_decode(req->params[i], M0_DECODE_PATH, &dn));
}

static bool ws(char c) { return c == ' ' || c == '\t'; }

static void fuzz_cookies(const m0_request *req) {
  for (size_t i = 0; i < req->nheaders; i++) {
    m0_str hv = req->headers[i].value;
    const char *at = hv.p, *end = hv.p + hv.n;
    m0_str k, v;
    size_t pairs = 0;
    while (m0__cookie_next(&at, end, &k, &v)) {
      check(++pairs <= hv.n);
      inside(k, hv);
      inside(v, hv);
      check(!memchr(k.p, ';', k.n) && !memchr(k.p, '=', k.n) && !memchr(v.p, ';', v.n));
      check(!k.n || (!ws(k.p[0]) && !ws(k.p[k.n - 1])));
      if (!m0__cookie_token(k.p, k.n)) continue;
      /* the first pair of that name over every header, found here by hand */
      m0_str first = {NULL, 0};
      for (size_t j = 0; j <= i && !first.p; j++) {
        m0_str h2 = req->headers[j].value;
        const char *a2 = h2.p;
        m0_str k2, v2;
        while (m0__cookie_next(&a2, h2.p + h2.n, &k2, &v2))
          if (k2.n == k.n && memcmp(k2.p, k.p, k.n) == 0) {
            first = v2;
            break;
          }
      }
      char *name = dup_z(k.p, k.n);
      m0_str got;
      check(m0_request_cookie(req, name, &got) && got.p == first.p && got.n == first.n);
      free(name);
    }
  }
}

static void fuzz_set_cookie(unsigned flags, const char *name, const char *value, const char *path,
                            const char *domain, int64_t num) {
  m0_cookie_attrs a = {
      .path = (flags & 1) ? path : NULL,
      .domain = (flags & 2) ? domain : NULL,
      .has_max_age = flags & 4,
      .max_age = (long)(num % 100000000),
      .expires = (flags & 8) ? num : 0,
      .secure = flags & 16,
      .http_only = flags & 32,
      .same_site = (m0_same_site)((flags >> 6) & 3),
  };
  char *out = dup_exact(NULL, 4097);
  long n = m0_cookie_format(out, 4097, name, value, &a);
  if (n >= 0) {
    check(strlen(out) == (size_t)n);
    for (long i = 0; i < n; i++) check((unsigned char)out[i] >= 0x20 && (unsigned char)out[i] < 0x7F);
    size_t nn = strlen(name), vn = strlen(value);
    check(m0__cookie_token(name, nn));
    check(memcmp(out, name, nn) == 0 && out[nn] == '=' && memcmp(out + nn + 1, value, vn) == 0);
    /* what a server sends, read back the way a Cookie header is read */
    const char *at = out;
    m0_str k, v;
    check(m0__cookie_next(&at, out + n, &k, &v));
    size_t strip = vn >= 2 && value[0] == '"' && value[vn - 1] == '"';
    check(k.n == nn && memcmp(k.p, name, nn) == 0 && v.n == vn - 2 * strip && memcmp(v.p, value + strip, v.n) == 0);
    if (a.same_site == M0_SAME_SITE_NONE) check(strstr(out, "; Secure") != NULL);
    char *exact = dup_exact(NULL, (size_t)n + 1);
    check(m0_cookie_format(exact, (size_t)n + 1, name, value, &a) == n && memcmp(exact, out, (size_t)n + 1) == 0);
    check(m0_cookie_format(exact, (size_t)n, name, value, &a) == -1);
    free(exact);
  }
  m0__outq q = {0};
  m0__date date = {0};
  m0_response res;
  m0__response_init(&res, &q, &date, 1, false, false);
  int r = m0_response_cookie(&res, name, value, &a);
  if (n < 0) check(r == -1);
  m0__outq_free(&q);
  free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  unsigned flags = data[0];
  const char *p = (const char *)data + 1, *end = (const char *)data + size;
  m0_str line[6 + MAX_COOKIE_HEADERS];
  size_t nl = 0;
  while (nl < sizeof line / sizeof *line) {
    const char *nlp = memchr(p, '\n', (size_t)(end - p));
    const char *stop = nlp ? nlp : end;
    line[nl++] = (m0_str){p, (size_t)(stop - p)};
    if (!nlp) break;
    p = nlp + 1;
  }
  for (size_t i = nl; i < 6; i++) line[i] = (m0_str){"", 0};

  /* the target, split as http/conn.c splits it */
  char *target = dup_exact(line[0].p, line[0].n);
  m0_request req = {0};
  req.target = (m0_str){target, line[0].n};
  const char *q = memchr(target, '?', line[0].n);
  req.path = (m0_str){target, q ? (size_t)(q - target) : line[0].n};
  req.query = q ? (m0_str){q + 1, line[0].n - req.path.n - 1} : (m0_str){target, 0};
  /* path parameters: the path's segments, as a route of {x}s would pass them */
  m0_str params[8];
  size_t np = 0;
  for (size_t i = 0; i < req.path.n && np < 8;) {
    size_t j = i;
    while (j < req.path.n && target[j] != '/') j++;
    if (j > i) params[np++] = (m0_str){target + i, j - i};
    i = j + 1;
  }
  req.params = params;
  req.nparams = np;
  m0_header hdrs[MAX_COOKIE_HEADERS + 1];
  char *hv[MAX_COOKIE_HEADERS];
  size_t nh = 0;
  hdrs[nh++] = (m0_header){{"Host", 4}, {"x", 1}}; /* a header that is not Cookie */
  for (size_t i = 6; i < nl; i++) {
    hv[i - 6] = dup_exact(line[i].p, line[i].n);
    hdrs[nh++] = (m0_header){{(i & 1) ? "Cookie" : "cookie", 6}, {hv[i - 6], line[i].n}};
  }
  req.headers = hdrs;
  req.nheaders = nh;

  fuzz_query(&req);
  fuzz_path(&req);
  fuzz_cookies(&req);

  char *z[4];
  for (int i = 0; i < 4; i++) {
    z[i] = dup_z(line[1 + i].p, line[1 + i].n);
  }
  int64_t num = 0;
  for (size_t i = 0; i < line[5].n && i < 8; i++) num = (int64_t)((uint64_t)num << 8 | (unsigned char)line[5].p[i]);
  fuzz_set_cookie(flags, z[0], z[1], z[2], z[3], num);
  for (int i = 0; i < 4; i++) free(z[i]);

  for (size_t i = 6; i < nl; i++) free(hv[i - 6]);
  free(target);
  return 0;
}
