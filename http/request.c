#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/response.h"
#include "m0/m0.h"

_Thread_local m0__trace_id m0__current_trace;

m0_str m0_request_header(const m0_request *req, const char *name) {
  size_t n = strlen(name);
  for (size_t i = 0; i < req->nheaders; i++) {
    const m0_header *h = &req->headers[i];
    if (h->name.n == n && strncasecmp(h->name.p, name, n) == 0) return h->value;
  }
  return (m0_str){NULL, 0};
}

bool m0_request_query(const m0_request *req, const char *key, m0_str *out) {
  size_t kn = strlen(key);
  const char *p = req->query.p, *end = req->query.p + req->query.n;
  while (p && p < end) {
    const char *amp = memchr(p, '&', (size_t)(end - p));
    const char *stop = amp ? amp : end;
    const char *eq = memchr(p, '=', (size_t)(stop - p));
    const char *kend = eq ? eq : stop;
    if ((size_t)(kend - p) == kn && memcmp(p, key, kn) == 0) {
      out->p = eq ? eq + 1 : stop;
      out->n = (size_t)(stop - out->p);
      return true;
    }
    p = amp ? amp + 1 : end;
  }
  return false;
}

bool m0_request_query_int(const m0_request *req, const char *key, long min, long max, long *out) {
  m0_str v;
  if (!m0_request_query(req, key, &v) || v.n == 0 || v.n > 18) return false;
  long x = 0;
  size_t i = 0;
  bool neg = v.p[0] == '-';
  if (neg) i = 1;
  if (i == v.n) return false;
  for (; i < v.n; i++) {
    if (v.p[i] < '0' || v.p[i] > '9') return false;
    x = x * 10 + (v.p[i] - '0');
  }
  if (neg) x = -x;
  if (x < min || x > max) return false;
  *out = x;
  return true;
}
