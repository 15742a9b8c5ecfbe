#include "http/response.h"
#include "base/errors.h"
#include "base/num.h"
#include "base/text.h"
#include "http/fields.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* The IANA HTTP status code registry's reason phrases (RFC 9110 section 15,
 * with 4918's WebDAV codes, 6585, 7725, 8297, 8470, 2295, 2774, 5842). A
 * status the registry does not name gets no phrase: RFC 9112 section 4 makes
 * it optional, and clients read only the code. */
const char *m0__status_reason(int status) {
  switch (status) {
  case 100: return "Continue";
  case 101: return "Switching Protocols";
  case 200: return "OK";
  case 201: return "Created";
  case 202: return "Accepted";
  case 203: return "Non-Authoritative Information";
  case 204: return "No Content";
  case 205: return "Reset Content";
  case 206: return "Partial Content";
  case 207: return "Multi-Status";
  case 208: return "Already Reported";
  case 226: return "IM Used";
  case 300: return "Multiple Choices";
  case 301: return "Moved Permanently";
  case 302: return "Found";
  case 303: return "See Other";
  case 304: return "Not Modified";
  case 305: return "Use Proxy";
  case 307: return "Temporary Redirect";
  case 308: return "Permanent Redirect";
  case 400: return "Bad Request";
  case 401: return "Unauthorized";
  case 402: return "Payment Required";
  case 403: return "Forbidden";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 406: return "Not Acceptable";
  case 407: return "Proxy Authentication Required";
  case 408: return "Request Timeout";
  case 409: return "Conflict";
  case 410: return "Gone";
  case 411: return "Length Required";
  case 412: return "Precondition Failed";
  case 413: return "Content Too Large";
  case 414: return "URI Too Long";
  case 415: return "Unsupported Media Type";
  case 416: return "Range Not Satisfiable";
  case 417: return "Expectation Failed";
  case 418: return "I'm a teapot"; /* "(Unused)" in RFC 9110 section 15.5.19, reserved by that name */
  case 421: return "Misdirected Request";
  case 422: return "Unprocessable Content";
  case 423: return "Locked";
  case 424: return "Failed Dependency";
  case 425: return "Too Early";
  case 426: return "Upgrade Required";
  case 428: return "Precondition Required";
  case 429: return "Too Many Requests";
  case 431: return "Request Header Fields Too Large";
  case 451: return "Unavailable For Legal Reasons";
  case 500: return "Internal Server Error";
  case 501: return "Not Implemented";
  case 502: return "Bad Gateway";
  case 503: return "Service Unavailable";
  case 504: return "Gateway Timeout";
  case 505: return "HTTP Version Not Supported";
  case 506: return "Variant Also Negotiates";
  case 507: return "Insufficient Storage";
  case 508: return "Loop Detected";
  case 510: return "Not Extended";
  case 511: return "Network Authentication Required";
  default: return "";
  }
}

void m0__response_init(m0_response *r, m0__outq *out, m0__date *date, int version_minor, bool head,
                       bool close) {
  r->out = out;
  r->date = date;
  r->version_minor = version_minor;
  r->head = head;
  r->close = close;
  r->done = false;
  r->status = 0;
  r->body_len = 0;
  r->extra_len = 0;
  r->ops = NULL;
  r->ops_ctx = NULL;
  r->streaming = false;
  r->req = NULL;
  r->deferred = false;
}

/* The application's added headers are lines "Name: value\r\n" in res->extra.
 * How many lines are named `name` (case-insensitive), and their bytes. */
static size_t extra_find(const m0_response *res, const char *name, size_t nn, size_t *bytes) {
  size_t found = 0, n = 0;
  for (size_t at = 0; at < res->extra_len;) {
    const char *line = res->extra + at, *end = memchr(line, '\n', res->extra_len - at);
    size_t len = (size_t)(end - line) + 1;
    if (len > nn && line[nn] == ':' && strncasecmp(line, name, nn) == 0) found++, n += len;
    at += len;
  }
  if (bytes) *bytes = n;
  return found;
}

static void extra_remove(m0_response *res, const char *name, size_t nn) {
  size_t to = 0;
  for (size_t at = 0; at < res->extra_len;) {
    const char *line = res->extra + at, *end = memchr(line, '\n', res->extra_len - at);
    size_t len = (size_t)(end - line) + 1;
    if (!(len > nn && line[nn] == ':' && strncasecmp(line, name, nn) == 0)) {
      memmove(res->extra + to, line, len);
      to += len;
    }
    at += len;
  }
  res->extra_len = to;
}

bool m0__response_has_header(const m0_response *res, const char *name) {
  return extra_find(res, name, strlen(name), NULL) > 0;
}

/* Content-Type is m0_respond's argument (and a stream's own): added here too,
 * a response would carry two. */
static bool api_name_ok(const char *name) { return name && strcasecmp(name, "content-type") != 0; }

int m0_response_header(m0_response *res, const char *name, const char *value) {
  if (!res || !api_name_ok(name) || !value) return -1;
  return m0__response_header_n(res, name, strlen(name), value, strlen(value)) ? -1 : 0;
}

int m0_response_header_set(m0_response *res, const char *name, const char *value) {
  if (!res || res->done || !api_name_ok(name) || !value) return -1;
  size_t nn = strlen(name), vn = strlen(value), old;
  m0__field_trim(&value, &vn);
  if (m0__field_check(name, nn, value, vn) != M0__FIELD_OK) return -1;
  extra_find(res, name, nn, &old);
  if (res->extra_len - old + nn + vn + 4 > sizeof res->extra) return -1; /* refused: nothing changes */
  extra_remove(res, name, nn);
  return m0__response_header_n(res, name, nn, value, vn) ? -1 : 0;
}

int m0_response_header_remove(m0_response *res, const char *name) {
  if (!res || res->done || !name) return 0;
  size_t nn = strlen(name);
  size_t n = extra_find(res, name, nn, NULL);
  if (n) extra_remove(res, name, nn);
  return (int)n;
}

int m0__response_header_n(m0_response *res, const char *name, size_t nn, const char *value, size_t vn) {
  m0__field_trim(&value, &vn);
  if (res->done || m0__field_check(name, nn, value, vn) != M0__FIELD_OK) return M0__EINVALID;
  if (res->extra_len + nn + vn + 4 > sizeof res->extra) return M0__ETOOBIG;
  char *p = res->extra + res->extra_len;
  memcpy(p, name, nn);
  memcpy(p + nn, ": ", 2);
  if (vn) memcpy(p + nn + 2, value, vn);
  memcpy(p + nn + 2 + vn, "\r\n", 2);
  res->extra_len += nn + vn + 4;
  return 0;
}

static char *resp_put(char *p, const char *s, size_t n) {
  memcpy(p, s, n);
  return p + n;
}

#define PUT_LIT(p, s) resp_put(p, s, sizeof(s) - 1)
#define RESP_DATE_LINE 37 /* "Date: ", an IMF-fixdate (29 bytes), CRLF */

/* A head's own lines (status with the longest reason, Server, Date,
 * Content-Length or Transfer-Encoding, a 127-byte Content-Type, Connection:
 * about 310 bytes) and the 8 KiB the application may add. */
#define M0__HEAD_OWN 512
#define M0__HEAD_MAX (M0__HEAD_OWN + M0__EXTRA_HEADERS)
_Static_assert(9 + 4 + 32 + 2 + 12 + 37 + 38 + 28 + 14 + 127 + 2 + 24 + 2 < 512, "a head's own lines fit");

/* A body the host took (owned memory, a file) and will not send. */
static void body_drop(const m0__body *b) {
  if (b->free_fn && b->p) b->free_fn((void *)b->p);
  if (b->fd >= 0) close(b->fd);
}

/* A status that is not a final one (1xx would leave the client waiting
 * for the real answer), or a Content-Type that would not fit or would
 * split the head, is the view's mistake: said on stderr and answered 500,
 * never written as given or dropped unsaid. true: it was one. */
static bool respond_refused(m0_response *res, int status, const char *content_type, size_t ctn) {
  bool bad_status = status < 200 || status > 599;
  if (!bad_status && ctn < 128 && (!content_type || m0__field_value_ok(content_type, ctn))) return false;
  if (bad_status) fprintf(stderr, "m0: refused a response with the status %d (a final status: 200..599); answered 500\n", status);
  else fprintf(stderr, "m0: refused a response whose Content-Type (%zu bytes) is 128 bytes or more or holds a "
                       "control byte (a CR or LF); answered 500\n", ctn);
  m0__respond_status(res, 500, NULL);
  return true;
}

/* The head into head (M0__HEAD_OWN bytes and the extra's): its length.
 * RFC 9110: 204 and 304 carry no Content-Length; a body not framed by
 * length says how. */
static size_t respond_head(const m0_response *res, char *head, int status, const char *content_type, size_t ctn,
                           size_t len, int framing) {
  bool no_length = status == 204 || status == 304 || framing != M0__BODY_LENGTH;
  char *p;
  if (status == 200) { /* most answers: the line as one constant */
    p = PUT_LIT(head, "HTTP/1.1 200 OK\r\nServer: m0\r\n");
  } else {
    p = PUT_LIT(head, "HTTP/1.1 ");
    p = m0__put_uint(p, (size_t)status);
    *p++ = ' ';
    const char *reason = m0__status_reason(status);
    p = resp_put(p, reason, strlen(reason));
    p = PUT_LIT(p, "\r\nServer: m0\r\n");
  }
  size_t dlen;
  const char *date = m0__date_line(res->date, &dlen);
  if (dlen == RESP_DATE_LINE) p = resp_put(p, date, RESP_DATE_LINE); /* a constant size: a few moves, no call */
  else p = resp_put(p, date, dlen);
  if (!no_length) {
    p = PUT_LIT(p, "Content-Length: ");
    p = m0__put_uint(p, len);
    p = PUT_LIT(p, "\r\n");
  } else if (framing == M0__BODY_CHUNKED) {
    p = PUT_LIT(p, "Transfer-Encoding: chunked\r\n");
  }
  if (content_type) {
    p = PUT_LIT(p, "Content-Type: ");
    p = resp_put(p, content_type, ctn);
    p = PUT_LIT(p, "\r\n");
  }
  if (res->close) p = PUT_LIT(p, "Connection: close\r\n");
  else if (res->version_minor == 0) p = PUT_LIT(p, "Connection: keep-alive\r\n");
  if (res->extra_len) p = resp_put(p, res->extra, res->extra_len);
  p = PUT_LIT(p, "\r\n");
  return (size_t)(p - head);
}

int m0__respond_body(m0_response *res, int status, const char *content_type, const m0__body *b) {
  size_t len = b->len;
  size_t ctn = content_type ? strlen(content_type) : 0;
  if (!res || res->done || respond_refused(res, status, content_type, ctn)) {
    body_drop(b);
    return M0__EINVALID;
  }
  res->done = true;
  res->status = status;
  /* RFC 9110: 204 and 304 carry no content and (204) no Content-Length;
   * 205 carries none and says so with Content-Length: 0 (section 15.3.6);
   * a HEAD answer has the length of what GET would send, without it. A body
   * given with 204, 205 or 304 is not sent. */
  if (status == 204 || status == 304 || status == 205) len = 0;
  res->body_len = len;
  bool send = len && !res->head;
  /* The head is built in the queue, and a small body the queue would copy
   * anyway goes right behind it: one reservation, no copy of the head. Room
   * for this head's own bound, not the largest head's: a connection's queue
   * behind a write in flight stays at its first 4 KiB. */
  bool inline_body = send && b->fd < 0 && !b->free_fn && len < M0__REF_MIN;
  char *head = m0__outq_room(res->out, M0__HEAD_OWN + res->extra_len + (inline_body ? len : 0));
  if (!head) {
    body_drop(b);
    return M0__ENOMEM;
  }
  size_t n = respond_head(res, head, status, content_type, ctn, len, b->framing);
  if (inline_body) memcpy(head + n, b->p, len);
  m0__outq_wrote(res->out, n + (inline_body ? len : 0));
  if (!send || inline_body) {
    body_drop(b);
    return 0;
  }
  if (b->fd >= 0) return m0__outq_file(res->out, b->fd, b->off, len);
  if (b->free_fn) return m0__outq_own(res->out, (void *)b->p, len, b->free_fn);
  return b->mode == M0_BODY_STATIC ? m0__outq_ref(res->out, b->p, len) : m0__outq_append(res->out, b->p, len);
}

int m0_respond(m0_response *res, int status, const char *content_type, const void *body, size_t len,
               unsigned body_mode) {
  m0__body b = {body, len, body_mode, NULL, -1, 0};
  return m0__respond_body(res, status, content_type, &b) ? -1 : 0;
}

int m0_respond_owned(m0_response *res, int status, const char *content_type, void *body, size_t len,
                     void (*free_fn)(void *body)) {
  m0__body b = {body, len, M0_BODY_COPY, free_fn ? free_fn : free, -1, 0};
  return m0__respond_body(res, status, content_type, &b) ? -1 : 0;
}

int m0_respondf(m0_response *res, int status, const char *content_type, const char *fmt, ...) {
  char small[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) { /* an encoding error (%ls of a character this locale cannot write) */
    fprintf(stderr, "m0: m0_respondf could not format the body (%s); answered 500\n", fmt);
    m0__respond_status(res, 500, NULL);
    return -1;
  }
  if ((size_t)n < sizeof small) return m0_respond(res, status, content_type, small, (size_t)n, M0_BODY_COPY);
  char *big = malloc((size_t)n + 1);
  if (!big) return m0_respond(res, 500, NULL, NULL, 0, M0_BODY_COPY);
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  int rv = m0_respond(res, status, content_type, big, (size_t)n, M0_BODY_COPY);
  free(big);
  return rv;
}

bool m0__channel_ok(const char *channel) { return channel && m0__channel_ok_n(channel, strlen(channel)); }

bool m0__channel_ok_n(const char *channel, size_t n) {
  if (n == 0 || n > M0__CHANNEL_MAX || (n >= 3 && memcmp(channel, "m0.", 3) == 0)) return false;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)channel[i] <= ' ' || channel[i] == 0x7f) return false;
  return true;
}

/* A frame is event lines without the id (the host writes "id: N" first):
 * refused when larger than a stream's whole queue, when it would end its
 * event early (a blank line) or smuggle a CR, or when a line is an id field
 * of its own (it would overrule the shared counter's number). */
bool m0__frame_ok(const void *frame, size_t len) {
  const char *f = frame;
  if (len > M0__FRAME_MAX || (len && !f)) return false;
  if (len && (memchr(f, '\r', len) || f[len - 1] == '\n')) return false;
  for (size_t i = 0; i < len; i++) {
    if (i > 0 && f[i] == '\n' && f[i - 1] == '\n') return false;
    bool line_start = i == 0 || f[i - 1] == '\n';
    if (line_start && len - i >= 2 && f[i] == 'i' && f[i + 1] == 'd' &&
        (len - i == 2 || f[i + 2] == ':' || f[i + 2] == '\n'))
      return false;
  }
  return true;
}

m0_deferred *m0_defer(m0_response *res, unsigned timeout_ms) {
  if (!res || res->done || res->deferred || !res->ops || !res->ops->defer_begin) return NULL;
  return res->ops->defer_begin(res->ops_ctx, res, timeout_ms);
}

static int respond_stream(m0_response *res, const char *channel);

char *m0__graph_event(const char *json, size_t *len) {
  static const char head[] = "event: graph\ndata: ", fetch[] = "{\"fetch\":true}";
  size_t n = strlen(json);
  if (sizeof head + n > M0__FRAME_MAX / 2) { /* half the queue: another may still be on its way */
    json = fetch;
    n = sizeof fetch - 1;
  }
  char *f = malloc(sizeof head + n);
  if (!f) return NULL;
  memcpy(f, head, sizeof head - 1);
  memcpy(f + sizeof head - 1, json, n);
  *len = sizeof head - 1 + n;
  return f;
}

/* The actor whose records a graph request asks for (?records=NAME), or
 * none: into out (a name is short: longer is no actor's). */
static bool graph_records_of(const m0_request *req, char *out, size_t n) {
  m0_query_iter it;
  m0_str k, v;
  m0_query_init(&it, req ? req->query : (m0_str){NULL, 0});
  while (m0_query_next(&it, &k, &v))
    if (k.n == 7 && !memcmp(k.p, "records", 7) && v.n && v.n < n) {
      memcpy(out, v.p, v.n);
      out[v.n] = 0;
      return true;
    }
  return false;
}

/* Asked for as a stream (an EventSource's Accept). */
static bool graph_streamed(const m0_request *req) {
  m0_str a = req ? m0_request_header(req, "Accept") : (m0_str){NULL, 0};
  return m0__field_has(a.p, a.n, "text/event-stream");
}

int m0_respond_graph(m0_response *res) {
  if (res->done) return -1;
  if (!res->ops || !res->ops->graph) {
    fprintf(stderr, "m0: the actor graph was asked for on a pool thread; answered 409 (an M0_ON_LOOP route)\n");
    m0__respond_status(res, 409, NULL);
    return -1;
  }
  char who[64];
  bool records = graph_records_of(res->req, who, sizeof who);
  char *json = res->ops->graph(res->ops_ctx, records ? who : NULL);
  if (!json) {
    m0__respond_status(res, 503, NULL);
    return -1;
  }
  int rv = 0;
  if (!records && graph_streamed(res->req)) {
    /* The host's own stream: this graph first, then one a second from the
     * loop's sweep (m0__stream_graph). */
    rv = respond_stream(res, M0__GRAPH_CHANNEL) ? -1 : 0;
    size_t n;
    char *ev = rv == 0 && !res->head ? m0__graph_event(json, &n) : NULL;
    if (ev) rv = m0_stream_write(res, ev, n);
    free(ev);
  } else {
    m0_respond(res, 200, "application/json", json, strlen(json), M0_BODY_COPY);
  }
  free(json);
  return rv;
}

/* A decimal id of at most 20 digits that fits 64 bits. */
static bool event_id_parse(m0_str v, uint64_t *out) {
  uint64_t n = 0;
  if (v.n == 0 || v.n > 20) return false;
  for (size_t i = 0; i < v.n; i++) {
    unsigned d = (unsigned)(v.p[i] - '0');
    if (d > 9 || n > (UINT64_MAX - d) / 10) return false;
    n = n * 10 + d;
  }
  *out = n;
  return true;
}

bool m0__last_event_id(const m0_request *req, uint64_t *last) {
  m0_str v;
  if (event_id_parse(m0_request_header(req, "Last-Event-ID"), last)) return true;
  return m0_request_query(req, "last_event_id", &v) && event_id_parse(v, last);
}

int m0_respond_stream(m0_response *res, const char *channel) {
  if (res->done) return -1;
  char shown[160]; /* the application's name for it, which may be a client's bytes: said escaped (base/text.h) */
  if (!res->ops || !res->ops->stream_begin) {
    fprintf(stderr, "m0: a stream on %s was begun on a pool thread; answered 409 (open streams on the loop: "
                    "an M0_ON_LOOP route)\n", channel ? m0__escape(shown, sizeof shown, channel) : "?");
    m0__respond_status(res, 409, NULL);
    return -1;
  }
  if (!m0__channel_ok(channel)) {
    fprintf(stderr, "m0: refused a stream on the channel name %s (1..64 visible bytes, not \"m0.\")\n",
            channel ? m0__escape(shown, sizeof shown, channel) : "(null)");
    m0__respond_status(res, 500, NULL);
    return -1;
  }
  return respond_stream(res, channel) ? -1 : 0;
}

/* A stream on channel (checked, or the host's own), on the loop. */
static int respond_stream(m0_response *res, const char *channel) {
  res->done = true;
  res->status = 200;
  /* The stream's own headers, unless the application set them (one each).
   * A HEAD gets the headers and no stream, and its connection goes on: an
   * answer to HEAD has no body whatever its headers say (RFC 9112 6.3), so
   * the client reads the next answer after this head, as for any HEAD. */
  char head[M0__HEAD_MAX];
  size_t dlen;
  const char *date = m0__date_line(res->date, &dlen);
  int n = snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nServer: m0\r\n%.*sContent-Type: text/event-stream\r\n%s%s%s%.*s\r\n",
                   (int)dlen, date, m0__response_has_header(res, "Cache-Control") ? "" : "Cache-Control: no-cache\r\n",
                   m0__response_has_header(res, "X-Accel-Buffering") ? "" : "X-Accel-Buffering: no\r\n",
                   res->close ? "Connection: close\r\n" : "", (int)res->extra_len, res->extra);
  if (m0__outq_append(res->out, head, (size_t)n) != 0) return M0__ENOMEM;
  if (res->head) return 0;
  uint64_t last = 0;
  bool has_last = res->req && m0__last_event_id(res->req, &last);
  int rv = res->ops->stream_begin(res->ops_ctx, channel, has_last, last);
  if (rv != 0) return rv;
  res->streaming = true;
  return 0;
}

int m0_stream_write(m0_response *res, const void *frame, size_t len) {
  if (!res || !res->streaming || !m0__frame_ok(frame, len)) return -1;
  return res->ops->stream_write(res->ops_ctx, frame, len) ? -1 : 0;
}

void m0__respond_status(m0_response *r, int status, const char *allow) {
  if (allow) m0_response_header(r, "Allow", allow);
  if (status == 204) {
    m0_respond(r, status, NULL, NULL, 0, M0_BODY_STATIC);
    return;
  }
  char body[64];
  int n = snprintf(body, sizeof body, "%d %s\n", status, m0__status_reason(status));
  m0_respond(r, status, "text/plain", body, (size_t)n, M0_BODY_COPY);
}
