/* The one growable byte buffer: a response being built, a request body, a
 * /metrics page, a batch of pool answers. Doubling from 4 KiB, so appending
 * is amortised O(1); memory is kept on clear (a loop's scratch buffer is
 * reused by every response) and returned by free.
 * A message on the bus is not one of these: it is built in the nng message
 * that is sent (runtime/actor.h, m0__msg_new), never copied into one. */
#ifndef M0_BASE_BUF_H
#define M0_BASE_BUF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct m0__buf {
  char *p;
  size_t len, cap;
} m0__buf;

/* Room for `more` bytes past len. 0, or M0__ENOMEM (the buffer unchanged). */
int m0__buf_reserve(m0__buf *b, size_t more);
/* 0, or M0__ENOMEM (nothing appended). Inline: every response head, stream
 * event and answer copied to a connection goes through it. */
static inline int m0__buf_append(m0__buf *b, const void *p, size_t n) {
  if (n > b->cap - b->len) {
    int rv = m0__buf_reserve(b, n);
    if (rv) return rv;
  }
  if (n) memcpy(b->p + b->len, p, n);
  b->len += n;
  return 0;
}
/* printf-style append. 0, or M0__ENOMEM / M0__EINVALID (nothing appended). */
int m0__buf_printf(m0__buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void m0__buf_clear(m0__buf *b) { b->len = 0; }
void m0__buf_free(m0__buf *b);

#endif
