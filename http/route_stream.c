/* A route that is a channel (m0_route.stream, docs/topology.md, Stream
 * routes): the request becomes a subscriber of the channel its template
 * names, as an SSE stream or, to a WebSocket upgrade, a socket.
 *
 * Design notes
 * - The template's rules are said here once, for the file's reader
 *   (config/topoapps.c refuses a template at load) and for the request
 *   (which fills it in): fixed bytes are a channel's (visible, not "m0."
 *   at the start), a {name} is a {name} segment of the route's pattern.
 * - A {name} is filled in with the segment as sent, never decoded: the
 *   channel a client reaches is the template's fixed bytes around bytes of
 *   one path segment, which holds no '/', no space and no control byte. A
 *   result that is no channel's name ("m0.x" from a template that begins
 *   with a {name}, longer than 64 bytes) is 404: no such channel here.
 * - Answered on the loop, before the pool is asked: a stream or a socket
 *   lives on the loop's connection (m0_respond_stream answers 409 on a
 *   pool thread). */
#include "http/route_stream.h"

#include <stdio.h>
#include <string.h>

#include "base/errors.h"
#include "base/limits.h"
#include "http/fields.h"
#include "http/response.h"

/* The index of parameter name (n bytes) among the pattern's {name}s (in
 * order), or M0__ENOTFOUND. */
static int route_param_index(const char *pattern, const char *name, size_t n) {
  int k = 0;
  for (const char *p = pattern ? strchr(pattern, '{') : NULL; p; p = strchr(p + 1, '{'), k++) {
    const char *close = strchr(p, '}');
    if (!close) return M0__ENOTFOUND;
    if ((size_t)(close - p - 1) == n && !memcmp(p + 1, name, n)) return k;
  }
  return M0__ENOTFOUND;
}

static bool route_visible(char ch) { return (unsigned char)ch > ' ' && ch != 0x7f; }

const char *m0__route_stream_check(const char *tmpl, const char *pattern) {
  size_t fixed = 0, names = 0;
  if (!tmpl || !tmpl[0]) return "is empty";
  if (strlen(tmpl) > M0__ROUTE_STREAM_MAX) return "is longer than 255 bytes";
  for (const char *t = tmpl; *t; t++) {
    if (*t == '}') return "has a } that closes no {";
    if (*t != '{') {
      if (!route_visible(*t)) return "holds a space or a control byte (a channel's name is visible bytes)";
      fixed++;
      continue;
    }
    const char *close = strchr(t, '}'), *open = strchr(t + 1, '{');
    if (!close || (open && open < close)) return "has a { without its }";
    if (route_param_index(pattern, t + 1, (size_t)(close - t - 1)) < 0)
      return "names a {parameter} that is no {name} segment of the route's pattern";
    names++;
    t = close;
  }
  if (fixed > M0__CHANNEL_MAX) return "has more than 64 bytes besides its {parameters} (a channel's name is 1 to 64)";
  if (!strncmp(tmpl, "m0.", 3)) return "begins \"m0.\": those channels are the host's own";
  if (!names && !m0__channel_ok(tmpl)) return "is not a channel's name (1 to 64 visible bytes)";
  return NULL;
}

long m0__route_stream_channel(const char *tmpl, const char *pattern, const m0_request *req, char *out, size_t cap) {
  size_t len = 0;
  for (const char *t = tmpl; t && *t; t++) {
    const char *piece = t, *close = NULL;
    size_t n = 1;
    if (*t == '{' && (close = strchr(t, '}'))) {
      int k = route_param_index(pattern, t + 1, (size_t)(close - t - 1));
      if (k < 0 || (size_t)k >= req->nparams) return M0__ENOTFOUND;
      piece = req->params[k].p;
      n = req->params[k].n;
      t = close;
    }
    if (len + n >= cap) return M0__ETOOBIG;
    memcpy(out + len, piece, n);
    len += n;
  }
  out[len] = 0;
  return m0__channel_ok_n(out, len) ? (long)len : M0__EINVALID;
}

void m0__route_stream_answer(const m0_route *r, const m0_request *req, m0_response *res) {
  char channel[M0__CHANNEL_MAX + 1];
  if (m0__route_stream_channel(r->stream, r->pattern, req, channel, sizeof channel) < 0) {
    m0__respond_status(res, 404, NULL);
    return;
  }
  m0_str up = m0_request_header(req, "Upgrade");
  if (!up.p || !m0__field_has(up.p, up.n, "websocket")) {
    m0_respond_stream(res, channel);
    return;
  }
  /* A socket that only listens: what the client sends is read and dropped
   * (the host answers its pings and its close). */
  static const m0_ws_handlers listen_only = {NULL, NULL, NULL};
  m0_ws *ws = m0_respond_websocket(res, &listen_only);
  if (ws && m0_ws_subscribe(ws, channel) != 0) m0_ws_close(ws, 1011, "the channel could not be subscribed");
}
