/* The output queue.
 *
 * Design notes
 * - Heads and small bodies are copied into one buffer, so the answers to many
 *   pipelined requests leave in one write. A body the application promises is
 *   static (M0_BODY_STATIC, >= M0__REF_MIN) is referenced and written from
 *   where it lies: refs[r].at says where in the copied bytes it belongs.
 * - At most M0__OUT_REFS references, so an iovec of 2*M0__OUT_REFS+1
 *   entries always suffices and lives on the writer's stack; past the last
 *   slot a body is copied, the bytes written the same.
 * - A partial write is resumed by skipping what was written (m0__outq_iov's
 *   skip), and the rest of the loop's scratch moves to a connection with
 *   m0__outq_move_tail, which keeps a reference a reference: a piece outside
 *   src's own buffer is one, wherever it lies.
 */
#include "http/outq.h"

#include <string.h>

int m0__outq_append(m0__outq *q, const void *p, size_t n) {
  return m0__buf_append(&q->copied, p, n) ? -1 : 0;
}

int m0__outq_ref(m0__outq *q, const void *p, size_t n) {
  if (n < M0__REF_MIN || q->nrefs == M0__OUT_REFS) return m0__outq_append(q, p, n);
  q->refs[q->nrefs].at = q->copied.len;
  q->refs[q->nrefs].p = p;
  q->refs[q->nrefs].n = n;
  q->nrefs++;
  q->ref_bytes += n;
  return 0;
}

size_t m0__outq_bytes(const m0__outq *q) { return q->copied.len + q->ref_bytes; }

int m0__outq_iov(const m0__outq *q, size_t skip, uv_buf_t *iov) {
  int k = 0;
  size_t from = 0; /* position in copied */
  for (int r = 0; r <= q->nrefs; r++) {
    size_t to = r < q->nrefs ? q->refs[r].at : q->copied.len;
    size_t n = to - from;
    if (skip >= n) skip -= n;
    else {
      iov[k++] = uv_buf_init(q->copied.p + from + skip, (unsigned)(n - skip));
      skip = 0;
    }
    from = to;
    if (r == q->nrefs) break;
    n = q->refs[r].n;
    if (skip >= n) skip -= n;
    else {
      iov[k++] = uv_buf_init((char *)q->refs[r].p + skip, (unsigned)(n - skip));
      skip = 0;
    }
  }
  return k;
}

int m0__outq_move_tail(m0__outq *dst, const m0__outq *src, size_t skip) {
  uv_buf_t iov[2 * M0__OUT_REFS + 1];
  int n = m0__outq_iov(src, skip, iov);
  for (int i = 0; i < n; i++) {
    /* A piece outside src's own buffer is a reference: keep it one. */
    bool ref = iov[i].base < src->copied.p || iov[i].base >= src->copied.p + src->copied.len;
    int rv = ref ? m0__outq_ref(dst, iov[i].base, iov[i].len) : m0__outq_append(dst, iov[i].base, iov[i].len);
    if (rv) return rv;
  }
  return 0;
}

void m0__outq_clear(m0__outq *q) {
  m0__buf_clear(&q->copied);
  q->nrefs = 0;
  q->ref_bytes = 0;
}

void m0__outq_free(m0__outq *q) {
  m0__buf_free(&q->copied);
  memset(q, 0, sizeof *q);
}
