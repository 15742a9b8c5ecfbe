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

/* Raw and first, on the same pair reader as m0_query_next (http/query.c),
 * so the two never disagree on where a pair starts. */
bool m0_request_query(const m0_request *req, const char *key, m0_str *out) {
  size_t kn = strlen(key);
  m0_query_iter it;
  m0_str k, v;
  m0_query_init(&it, req->query);
  while (m0_query_next(&it, &k, &v)) {
    if (k.n == kn && memcmp(k.p, key, kn) == 0) {
      *out = v;
      return true;
    }
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
