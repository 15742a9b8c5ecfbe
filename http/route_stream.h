/* A route that is a channel (m0_route.stream): its template's rules and
 * the answer (http/route_stream.c says how). */
#ifndef M0_HTTP_ROUTE_STREAM_H
#define M0_HTTP_ROUTE_STREAM_H

#include <stddef.h>

#include "m0/m0.h"

#define M0__ROUTE_STREAM_MAX 255 /* a template's bytes, {parameters} included */

/* NULL when tmpl is a template the route's pattern can fill in, else what
 * is wrong with it ("is empty", ...), to follow the key's name. */
const char *m0__route_stream_check(const char *tmpl, const char *pattern);
/* The channel tmpl names for req (its params are the pattern's), in out
 * (cap bytes, NUL-terminated): its length, or M0__EINVALID when it is no
 * channel's name (M0__ETOOBIG: longer than cap; M0__ENOTFOUND: a {name}
 * the request's params do not have). */
long m0__route_stream_channel(const char *tmpl, const char *pattern, const m0_request *req, char *out, size_t cap);
/* Answers req on route r (r->stream set): the stream, the socket, or 404.
 * On the loop. */
void m0__route_stream_answer(const m0_route *r, const m0_request *req, m0_response *res);

#endif
