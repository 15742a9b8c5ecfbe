/* What the application's request helpers (http/query.c, http/cookie.c)
 * share with the host and the fuzz target: the path's dot-segment check the
 * connection can refuse a target with, and the Cookie header's pair reader. */
#ifndef M0_HTTP_QUERY_H
#define M0_HTTP_QUERY_H

#include <stdbool.h>
#include <stddef.h>

#include "m0/m0.h"

/* Whether some '/'-separated segment of path is a dot-segment: "." or ".."
 * as sent or percent-encoded ("%2e", ".%2E", ...; RFC 3986 section 2.3 makes
 * them the same). RFC 3986 section 5.2.4 would remove them; m0 refuses
 * them instead (docs/http.md says why). */
bool m0__path_dot_segment(m0_str path);

/* Whether raw, decoded with flags, is exactly the n bytes of z; false for a
 * raw string that does not decode. Compares as it decodes: no buffer. */
bool m0__decoded_equal(m0_str raw, const char *z, size_t n, unsigned flags);

/* The next cookie-pair of a Cookie header's value (RFC 6265 section 4.2.1,
 * read leniently as section 5.4's user agents may send it): pieces split on
 * ';', SP and HTAB trimmed around the name and the value, a value inside
 * DQUOTEs given without them, a piece with no '=' skipped. *at walks from
 * the value's start to end; false when no pair is left. name and value
 * point into the header. */
bool m0__cookie_next(const char **at, const char *end, m0_str *name, m0_str *value);

/* Whether the n bytes at s are an RFC 9110 token (a cookie-name, RFC 6265
 * section 4.1.1): 1+ of ALPHA, DIGIT and !#$%&'*+-.^_`|~ */
bool m0__cookie_token(const char *s, size_t n);

#endif
