/* uri-host [":" port] (RFC 9110 7.2, 4.2.1): the Host field's value and an
 * absolute-form target's authority. */
#ifndef M0_HTTP_AUTHORITY_H
#define M0_HTTP_AUTHORITY_H

#include <stdbool.h>
#include <stddef.h>

/* Whether s[0, n) is uri-host [":" port]: a name (or IPv4) of RFC 3986's
 * unreserved and sub-delims but "," and %XX, not empty, or "[" an IPv6 or
 * IPvFuture literal "]"; a port of digits. No userinfo, path or space. */
bool m0__authority_ok(const char *s, size_t n);

#endif
