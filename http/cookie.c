/* Cookies: reading the Cookie header, writing Set-Cookie.
 *
 * Design notes. Reading is lenient and writing is strict (RFC 6265 section
 * 4 is what a server sends, section 5 what a user agent does): a Cookie
 * header is split on ';' with any SP/HTAB around the pieces, because
 * clients and proxies do not all send exactly "; "; a Set-Cookie is only
 * ever written in section 4.1.1's syntax, and what would not be is refused
 * with -1 rather than repaired, since a browser drops a malformed cookie
 * without a word and the application would never learn why.
 *
 * Every Cookie header is read, not only the first: HTTP/1.1 clients send
 * one (section 5.4), but an HTTP/2 front end may split it into several
 * (RFC 9113 section 8.2.3) and pass them on.
 *
 * Expires is formatted by hand, not with strftime: %a and %b follow
 * LC_TIME, and an application that calls setlocale would send day and
 * month names no browser parses. */
#include <string.h>
#include <strings.h>

#include "base/num.h"
#include "http/date.h"
#include "http/query.h"
#include "m0/m0.h"

#define COOKIE_MAX 4096 /* RFC 6265 section 6.1: what a user agent must keep of one cookie */
#define COOKIE_EXPIRES_MAX 253402300799LL /* 9999-12-31T23:59:59Z: the last date with 4 digits */

static bool cookie_ws(char c) { return c == ' ' || c == '\t'; }

static m0_str cookie_trim(const char *p, const char *end) {
  while (p < end && cookie_ws(*p)) p++;
  while (end > p && cookie_ws(end[-1])) end--;
  return (m0_str){p, (size_t)(end - p)};
}

bool m0__cookie_next(const char **at, const char *end, m0_str *name, m0_str *value) {
  while (*at && *at < end) {
    const char *start = *at;
    const char *semi = memchr(start, ';', (size_t)(end - start));
    const char *stop = semi ? semi : end;
    *at = semi ? semi + 1 : end;
    const char *eq = memchr(start, '=', (size_t)(stop - start));
    if (!eq) continue; /* "; ;", a bare word: no pair */
    *name = cookie_trim(start, eq);
    m0_str v = cookie_trim(eq + 1, stop);
    if (v.n >= 2 && v.p[0] == '"' && v.p[v.n - 1] == '"') v = (m0_str){v.p + 1, v.n - 2};
    *value = v;
    return true;
  }
  return false;
}

bool m0__cookie_token(const char *s, size_t n) {
  if (!n) return false;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!alnum && !(c && strchr("!#$%&'*+-.^_`|~", c))) return false;
  }
  return true;
}

bool m0_request_cookie(const m0_request *req, const char *name, m0_str *out) {
  size_t nn = strlen(name);
  if (!m0__cookie_token(name, nn)) return false;
  for (size_t i = 0; i < req->nheaders; i++) {
    const m0_header *h = &req->headers[i];
    if (h->name.n != 6 || strncasecmp(h->name.p, "Cookie", 6) != 0 || !h->value.n) continue;
    const char *at = h->value.p, *end = h->value.p + h->value.n;
    m0_str k, v;
    while (m0__cookie_next(&at, end, &k, &v)) {
      if (k.n == nn && memcmp(k.p, name, nn) == 0) {
        *out = v;
        return true;
      }
    }
  }
  return false;
}

/* cookie-octet: US-ASCII but controls, whitespace, DQUOTE, ',', ';' and '\'. */
static bool cookie_octet(unsigned char c) {
  return c == 0x21 || (c >= 0x23 && c <= 0x2B) || (c >= 0x2D && c <= 0x3A) || (c >= 0x3C && c <= 0x5B) ||
         (c >= 0x5D && c <= 0x7E);
}

static bool cookie_value_ok(const char *v, size_t n) {
  if (n >= 2 && v[0] == '"' && v[n - 1] == '"') { /* DQUOTE *cookie-octet DQUOTE */
    v++;
    n -= 2;
  }
  for (size_t i = 0; i < n; i++)
    if (!cookie_octet((unsigned char)v[i])) return false;
  return true;
}

/* path-value: any CHAR but controls and ';'; empty is refused (NULL is "none"). */
static bool cookie_path_ok(const char *p) {
  if (!*p) return false;
  for (; *p; p++)
    if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7F || *p == ';') return false;
  return true;
}

/* domain-value: a host name (RFC 1034 letters, digits, hyphens, dots); a
 * leading '.' is allowed, as user agents ignore it. No IP literals' ':'. */
static bool cookie_domain_ok(const char *d) {
  if (!*d) return false;
  for (; *d; d++) {
    unsigned char c = (unsigned char)*d;
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '.'))
      return false;
  }
  return true;
}

typedef struct cookie_out {
  char *p, *end; /* end leaves room for the NUL */
  bool full;
} cookie_out;

static void cookie_put(cookie_out *o, const char *s, size_t n) {
  if (o->full || n > (size_t)(o->end - o->p)) {
    o->full = true;
    return;
  }
  memcpy(o->p, s, n);
  o->p += n;
}

static void cookie_puts(cookie_out *o, const char *s) { cookie_put(o, s, strlen(s)); }

/* Whether a cookie named name (nn bytes) may carry attributes a. What a
 * browser would drop silently (RFC 6265bis section 4.1.3, the prefixes
 * matched without case as its user agents do; section 5.4.7, SameSite=None
 * only with Secure) is refused here, where it can be seen. */
static bool cookie_attrs_ok(const char *name, size_t nn, const m0_cookie_attrs *a) {
  if ((a->path && !cookie_path_ok(a->path)) || (a->domain && !cookie_domain_ok(a->domain))) return false;
  if ((a->has_max_age && a->max_age < 0) || a->expires < 0 || a->expires > COOKIE_EXPIRES_MAX) return false;
  if ((unsigned)a->same_site > M0_SAME_SITE_STRICT) return false;
  if (a->same_site == M0_SAME_SITE_NONE && !a->secure) return false;
  if (nn >= 9 && strncasecmp(name, "__Secure-", 9) == 0 && !a->secure) return false;
  return !(nn >= 7 && strncasecmp(name, "__Host-", 7) == 0 &&
           (!a->secure || a->domain || !a->path || strcmp(a->path, "/") != 0));
}

/* "; Path=...; Domain=...; Max-Age=...; Expires=...; Secure; HttpOnly;
 * SameSite=...", each when set. */
static void cookie_put_attrs(cookie_out *o, const m0_cookie_attrs *a) {
  static const char *const same_site[] = {NULL, "; SameSite=None", "; SameSite=Lax", "; SameSite=Strict"};
  char num[48];
  if (a->path) {
    cookie_puts(o, "; Path=");
    cookie_puts(o, a->path);
  }
  if (a->domain) {
    cookie_puts(o, "; Domain=");
    cookie_puts(o, a->domain);
  }
  if (a->has_max_age) {
    cookie_puts(o, "; Max-Age=");
    cookie_put(o, num, (size_t)(m0__put_uint(num, (uint64_t)a->max_age) - num));
  }
  if (a->expires) {
    cookie_puts(o, "; Expires=");
    cookie_put(o, num, (size_t)(m0__imf_fixdate(num, a->expires) - num));
  }
  if (a->secure) cookie_puts(o, "; Secure");
  if (a->http_only) cookie_puts(o, "; HttpOnly");
  if (a->same_site) cookie_puts(o, same_site[a->same_site]);
}

long m0_cookie_format(char *out, size_t cap, const char *name, const char *value, const m0_cookie_attrs *attrs) {
  static const m0_cookie_attrs none;
  const m0_cookie_attrs *a = attrs ? attrs : &none;
  size_t nn = strlen(name), vn = strlen(value);
  if (!cap || !m0__cookie_token(name, nn) || !cookie_value_ok(value, vn) || !cookie_attrs_ok(name, nn, a)) return -1;
  cookie_out o = {out, out + cap - 1, false};
  cookie_put(&o, name, nn);
  cookie_put(&o, "=", 1);
  cookie_put(&o, value, vn);
  cookie_put_attrs(&o, a);
  if (o.full) return -1;
  *o.p = 0;
  return (long)(o.p - out);
}

int m0_response_cookie(m0_response *res, const char *name, const char *value, const m0_cookie_attrs *attrs) {
  char line[COOKIE_MAX + 1];
  if (m0_cookie_format(line, sizeof line, name, value, attrs) < 0) return -1;
  return m0_response_header(res, "Set-Cookie", line);
}
