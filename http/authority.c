/* The grammar of an authority, uri-host [":" port] (RFC 9110 7.2, 4.2.1):
 * every request's Host value, and an absolute-form target's authority
 * (http/parse.c). On bytes alone. */
#include "http/authority.h"

#include <stdint.h>

#include "http/bytes.h"

static bool authority_hexdig(char c) { return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f'); }

/* RFC 3986's unreserved and sub-delims, but ",": a comma is how two field
 * lines fold into one (RFC 9110 5.3), so "Host: a, b" is two Hosts. A
 * table: every request's Host is read through it. */
static const uint8_t host_chars[256] = {
    ['-'] = 1, ['.'] = 1, ['_'] = 1, ['~'] = 1, ['!'] = 1, ['$'] = 1, ['&'] = 1, ['\''] = 1,
    ['('] = 1, [')'] = 1, ['*'] = 1, ['+'] = 1, [';'] = 1, ['='] = 1,
    M0__ALNUM_ONES,
};
static inline bool authority_host_char(char c) { return host_chars[(unsigned char)c]; }
/* Four at once: 1 when all four are. */
static inline int authority_host_chars4(const char *s) {
  return host_chars[(unsigned char)s[0]] & host_chars[(unsigned char)s[1]] & host_chars[(unsigned char)s[2]] &
         host_chars[(unsigned char)s[3]];
}

/* uri-host [":" port] (RFC 9110 7.2, 4.2.1): a name (or IPv4) of the
 * characters above and %XX, not empty (an http URI's host never is), or
 * "[" an IPv6 or IPvFuture literal "]"; a port of digits. So no userinfo
 * ("@"), no path ("/"), no space. */
static size_t authority_ip_literal(const char *s, size_t n) { /* past "[...]", or 0 */
  bool future = n > 1 && (s[1] | 0x20) == 'v', colon = false;
  size_t i;
  for (i = 1; i < n && s[i] != ']'; i++) {
    colon |= s[i] == ':';
    if (!(future ? authority_host_char(s[i]) || s[i] == ':' : authority_hexdig(s[i]) || s[i] == ':' || s[i] == '.'))
      return 0;
  }
  return i == n || !(future || colon) ? 0 : i + 1;
}

static size_t authority_reg_name(const char *s, size_t n) { /* its end, or 0 (none) */
  size_t i = 0;
  for (;;) {
    /* every request's Host: the common bytes four at a time, then one by one */
    while (n - i >= 4 && authority_host_chars4(s + i)) i += 4;
    while (i < n && authority_host_char(s[i])) i++;
    if (i == n || s[i] != '%') break;
    if (i + 2 >= n || !authority_hexdig(s[i + 1]) || !authority_hexdig(s[i + 2])) return 0;
    i += 3;
  }
  return i == n || s[i] == ':' ? i : 0;
}

bool m0__authority_ok(const char *s, size_t n) {
  size_t i = n && s[0] == '[' ? authority_ip_literal(s, n) : authority_reg_name(s, n);
  if (i == 0) return false;
  if (i < n && s[i++] != ':') return false;
  while (n - i >= 4 && ((unsigned)(s[i] - '0') <= 9) & ((unsigned)(s[i + 1] - '0') <= 9) &
                          ((unsigned)(s[i + 2] - '0') <= 9) & ((unsigned)(s[i + 3] - '0') <= 9))
    i += 4;
  while (i < n && (unsigned)(s[i] - '0') <= 9) i++;
  return i == n;
}
