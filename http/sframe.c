/* A published frame's WebSocket forms (http/stream.h, m0__sframe): each
 * made once, at the first subscriber that needs it, and freed with the
 * frame by its last holder. */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "http/conn_state.h"
#include "http/stream.h"
#include "http/ws.h"

void m0__sframe_release(void *arg) {
  m0__sframe *f = arg;
  if (--f->refs) return;
  free(f->wse);
  free(f->ws);
  free(f->wsz);
  free(f);
}

/* The frame's data field, as EventSource gives it (event.data): the value of
 * every "data" line, joined by "\n". false when it has none. */
static bool frame_data(const char *f, size_t n, m0__buf *out) {
  bool any = false;
  size_t i = 0;
  while (i < n) {
    const char *nl = memchr(f + i, '\n', n - i);
    size_t end = nl ? (size_t)(nl - f) : n;
    if (end - i >= 4 && memcmp(f + i, "data", 4) == 0 && (end - i == 4 || f[i + 4] == ':')) {
      size_t v = i + 4 + (end - i > 4);
      if (v < end && f[v] == ' ') v++;
      if ((any && m0__buf_append(out, "\n", 1)) || m0__buf_append(out, f + v, end - v)) return any;
      any = true;
    }
    i = end + 1;
  }
  return any;
}

/* The WebSocket form of a frame, made once (compressed: a second form). */
bool m0__sframe_ws(m0__http *h, m0__sframe *f, bool z) {
  if (f->ws_none) return false;
  if (z ? f->wsz != NULL : f->ws != NULL) return true;
  const char *lines = f->sse + (f->id ? strcspn(f->sse, "\n") + 1 : 0);
  size_t ln = f->sse_len - 2 - (size_t)(lines - f->sse);
  m0__buf data = {0}, packed = {0};
  if (!frame_data(lines, ln, &data)) {
    f->ws_none = true;
    m0__buf_free(&data);
    return false;
  }
  const m0__buf *body = &data;
  if (z) {
    if (!h->wsz) h->wsz = m0__ws_deflater_new();
    if (!h->wsz || m0__ws_deflate(h->wsz, (const uint8_t *)data.p, data.len, &packed) != 0) {
      m0__buf_free(&data);
      m0__buf_free(&packed);
      return false;
    }
    body = &packed;
  }
  char *m = malloc(M0__WS_HEADER_MAX + body->len);
  if (m) {
    size_t hl = m0__ws_frame_header((uint8_t *)m, M0__WS_TEXT, true, z, body->len);
    if (body->len) memcpy(m + hl, body->p, body->len);
    if (z) f->wsz = m, f->wsz_len = (uint32_t)(hl + body->len);
    else f->ws = m, f->ws_len = (uint32_t)(hl + body->len);
  }
  m0__buf_free(&data);
  m0__buf_free(&packed);
  return m != NULL;
}

/* The frame as an m0.events WebSocket message: a text frame carrying the
 * SSE event without its blank line, made once (never compressed). */
bool m0__sframe_wse(m0__sframe *f) {
  if (f->wse) return true;
  size_t n = f->sse_len - 2;
  char *m = malloc(M0__WS_HEADER_MAX + n);
  if (!m) return false;
  size_t hl = m0__ws_frame_header((uint8_t *)m, M0__WS_TEXT, true, false, n);
  memcpy(m + hl, f->sse, n);
  f->wse = m;
  f->wse_len = (uint32_t)(hl + n);
  return true;
}
