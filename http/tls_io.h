/* The HTTPS transport (http/tls_io.c): libuv's socket with the TLS engine
 * between it and the connection, as a table of http/io.h. */
#ifndef M0_HTTP_TLS_IO_H
#define M0_HTTP_TLS_IO_H

#include "http/io.h"
#include "http/tls.h"

extern const m0__io_ops m0__io_tls_ops;
/* Makes every connection of h HTTPS with the context x (the process's,
 * kept: it outlives the loop). Called after m0__io_init, in its place: h's
 * transport is this one from here. 0 or M0__ENOMEM. */
int m0__io_tls_init(m0__http *h, m0__tls_ctx *x);
/* After the loop's handles are closed (its idle handle among them). */
void m0__io_tls_fini(m0__http *h);
/* The protocol c's ALPN chose ("h2", "http/1.1"), or "" (none). c: a
 * connection of this transport, its handshake done. */
const char *m0__io_tls_alpn(const m0__conn *c);

#endif
