/* The host's own answers before the application's, for HTTP/1.1 and
 * HTTP/2 alike (http/plain.c). */
#ifndef M0_HTTP_PLAIN_H
#define M0_HTTP_PLAIN_H

#include <stdbool.h>

#include "http/server.h"

/* The metrics path, and on a connection of the plain listener beside
 * HTTPS (--plain-port) a 308 to HTTPS for every other request. true when
 * res is answered. */
bool m0__http_host_answer(m0__conn *c, const m0_request *req, m0_response *res);

#endif
