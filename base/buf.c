#include "base/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"

int m0__buf_reserve(m0__buf *b, size_t more) {
  if (more <= b->cap - b->len) return 0;
  if (more > SIZE_MAX / 2 - b->len) return M0__ENOMEM;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < b->len + more) cap *= 2;
  char *np = realloc(b->p, cap);
  if (!np) return M0__ENOMEM;
  b->p = np;
  b->cap = cap;
  return 0;
}

int m0__buf_printf(m0__buf *b, const char *fmt, ...) {
  for (int pass = 0; pass < 2; pass++) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = b->cap - b->len;
    int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? room : 0, fmt, ap);
    va_end(ap);
    if (n < 0) return M0__EINVALID;
    if ((size_t)n < room) {
      b->len += (size_t)n;
      return 0;
    }
    if (pass == 0 && m0__buf_reserve(b, (size_t)n + 1) != 0) return M0__ENOMEM;
  }
  return M0__ENOMEM;
}

void m0__buf_free(m0__buf *b) {
  free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
}
