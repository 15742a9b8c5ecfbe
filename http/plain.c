/* The host's own answers before the application's routes, for HTTP/1.1
 * (http/dispatch.c) and HTTP/2 (http/h2.c) alike: the metrics path, and on
 * the plain listener beside HTTPS (--plain-port) a redirect for the rest.
 *
 * Design notes
 * - The plain listener serves only the metrics path (a scraper needs no
 *   certificate); every other request is sent to the same path and query
 *   over HTTPS with 308, which keeps its method and body (RFC 9110 15.4.9),
 *   as nginx's `return 308 https://$host$request_uri`. The name is the
 *   request's Host (:authority over HTTP/2) without its port, which the
 *   parser checked (http/authority.h); the port is the HTTPS listener's,
 *   left out when it is 443. A request with no Host (HTTP/1.0) has nowhere
 *   to be sent: 400.
 */
#include "http/plain.h"

#include "http/conn_state.h"
#include "http/response.h"

#include <stdio.h>
#include <string.h>

/* The Host's name without its port: "[v6]" kept whole. */
static size_t plain_host_name(m0_str host) {
  if (host.n && host.p[0] == '[') {
    const char *end = memchr(host.p, ']', host.n);
    return end ? (size_t)(end - host.p) + 1 : host.n;
  }
  const char *colon = memchr(host.p, ':', host.n);
  return colon ? (size_t)(colon - host.p) : host.n;
}

static void plain_redirect(const m0__http *h, const m0_request *req, m0_response *res) {
  m0_str host = m0_request_header(req, "host");
  size_t name = host.p ? plain_host_name(host) : 0;
  if (!name) {
    res->close = true;
    m0__respond_status(res, 400, NULL);
    return;
  }
  char port[16] = "";
  if (h->https_port != 443) snprintf(port, sizeof port, ":%d", h->https_port);
  char loc[8192];
  int n = snprintf(loc, sizeof loc, "https://%.*s%s%.*s%s%.*s", (int)name, host.p, port, (int)req->path.n,
                   req->path.p, req->query.n ? "?" : "", (int)req->query.n, req->query.p);
  /* Too long for a header line the host writes (8 KiB): the target is. */
  if (n < 0 || (size_t)n >= sizeof loc || m0_response_header(res, "Location", loc) != 0) {
    m0__respond_status(res, 414, NULL);
    return;
  }
  m0__respond_status(res, 308, NULL);
}

bool m0__http_host_answer(m0__conn *c, const m0_request *req, m0_response *res) {
  m0__http *h = c->h;
  bool metrics = h->metrics_len && req->path.n == h->metrics_len && !memcmp(req->path.p, h->metrics_path, h->metrics_len);
  if (metrics) h->ops->metrics(h, res);
  else if (c->plain) plain_redirect(h, req, res);
  return metrics || c->plain;
}
