/* The output queue.
 *
 * Design notes
 * - Heads and small bodies are copied into one buffer, so the answers to many
 *   pipelined requests leave in one write. A body the application promises is
 *   static (M0_BODY_STATIC, >= M0__REF_MIN) is referenced and written from
 *   where it lies: refs[r].at says where in the copied bytes it belongs.
 * - At most M0__OUT_REFS references, so an iovec of 2*M0__OUT_REFS+1
 *   entries always suffices and lives on the writer's stack; past the last
 *   slot a body is copied, the bytes written the same. The slots are made
 *   at a queue's first reference (a queue that only copies, most of them,
 *   has none) and kept until m0__outq_free, so the scratch, reused by every
 *   response and every subscriber of a frame, makes them once.
 * - A partial write is resumed by skipping what was written (m0__outq_iov's
 *   skip), and the rest of the loop's scratch moves to a connection with
 *   m0__outq_move_tail, which keeps a reference a reference.
 * - A file piece (m0_respond_file) is a reference to bytes of a descriptor
 *   the queue owns: m0__outq_iov stops in front of it, and the writer sends
 *   it with sendfile(2) before it asks for the rest (http/conn.c). Moving it
 *   hands the descriptor on, as for an owned body.
 * - An owned body (m0_respond_owned) is a reference with a free function,
 *   held by exactly one queue: the one that frees it at its clear or free.
 *   Moving it hands it on (src forgets it); copying it (dst out of slots)
 *   leaves it with src, whose clear frees it after the copy.
 */
#include "http/outq.h"

#include "base/errors.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int m0__outq_append(m0__outq *q, const void *p, size_t n) {
  return m0__buf_append(&q->copied, p, n) ? M0__ENOMEM : 0;
}

/* Copies the bytes and releases them at once (small, or no slot left). */
static int outq_copy_release(m0__outq *q, const void *p, size_t n, void (*release)(void *), void *owner) {
  int rv = m0__outq_append(q, p, n);
  release(owner);
  return rv;
}

/* Whether a slot is free for another reference (the slots made at the
 * first): not when all are taken, the copied bytes are past what a slot's
 * place (32 bits) can say, or there is no memory for the slots (the bytes
 * are then copied, as past the last slot). */
static bool outq_has_slot(m0__outq *q) {
  if (q->nrefs == M0__OUT_REFS || q->copied.len > UINT32_MAX) return false;
  return q->refs || (q->refs = malloc(M0__OUT_REFS * sizeof *q->refs)) != NULL;
}

/* Takes the next reference slot (the caller saw one free): the bytes at p,
 * or, with fd >= 0, the file's from off. */
static void outq_slot(m0__outq *q, const void *p, size_t n, void (*free_fn)(void *), void *owner, int fd,
                      uint64_t off) {
  q->refs[q->nrefs].at = (uint32_t)q->copied.len;
  q->refs[q->nrefs].fd = fd;
  if (fd >= 0) q->refs[q->nrefs].off = off;
  else q->refs[q->nrefs].p = p;
  q->refs[q->nrefs].n = n;
  q->refs[q->nrefs].free_fn = free_fn;
  q->refs[q->nrefs].owner = owner;
  q->nrefs++;
  q->ref_bytes += n;
}

int m0__outq_ref(m0__outq *q, const void *p, size_t n) {
  if (n < M0__REF_MIN || !outq_has_slot(q)) return m0__outq_append(q, p, n);
  outq_slot(q, p, n, NULL, NULL, -1, 0);
  return 0;
}

int m0__outq_own(m0__outq *q, void *p, size_t n, void (*free_fn)(void *)) {
  if (n < M0__REF_MIN) return outq_copy_release(q, p, n, free_fn, p);
  return m0__outq_hold(q, p, n, free_fn, p);
}

int m0__outq_hold(m0__outq *q, const void *p, size_t n, void (*release)(void *), void *owner) {
  if (!outq_has_slot(q)) return outq_copy_release(q, p, n, release, owner);
  outq_slot(q, p, n, release, owner, -1, 0);
  return 0;
}

/* Reads a file piece into memory: the rare queue with no slot left. */
static int outq_read_file(m0__outq *q, int fd, uint64_t off, size_t n) {
  char buf[16384];
  while (n) {
    ssize_t r = pread(fd, buf, n < sizeof buf ? n : sizeof buf, (off_t)off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return M0__ESYSTEM; /* or the file shrank: the response cannot be whole */
    if (m0__outq_append(q, buf, (size_t)r)) return M0__ENOMEM;
    off += (uint64_t)r;
    n -= (size_t)r;
  }
  return 0;
}

int m0__outq_file(m0__outq *q, int fd, uint64_t off, size_t n) {
  if (n == 0) {
    close(fd);
    return 0;
  }
  if (!outq_has_slot(q)) {
    /* The connection stops parsing before its queue runs out of slots
     * (http/conn.c); what can still come here is one small answer. */
    int rv = n <= M0__FILE_COPY_MAX ? outq_read_file(q, fd, off, n) : M0__ETOOBIG;
    close(fd);
    return rv;
  }
  outq_slot(q, NULL, n, NULL, NULL, fd, off);
  return 0;
}

bool m0__outq_file_at(const m0__outq *q, size_t skip, int *fd, uint64_t *off, size_t *n) {
  size_t pos = 0, from = 0;
  for (int r = 0; r < q->nrefs; r++) {
    pos += q->refs[r].at - from; /* memory before it */
    from = q->refs[r].at;
    if (skip < pos) return false;
    if (skip < pos + q->refs[r].n) {
      if (q->refs[r].fd < 0) return false;
      *fd = q->refs[r].fd;
      *off = q->refs[r].off + (skip - pos);
      *n = q->refs[r].n - (skip - pos);
      return true;
    }
    pos += q->refs[r].n;
  }
  return false;
}


/* An iovec entry holds at most UINT_MAX bytes: a longer piece goes in
 * parts (the writer resumes by its skip). */
static unsigned outq_len(size_t n) { return n > UINT_MAX ? UINT_MAX : (unsigned)n; }

int m0__outq_iov(const m0__outq *q, size_t skip, uv_buf_t *iov) {
  if (q->nrefs == 0 && q->copied.len <= UINT_MAX) { /* most answers: one piece in memory */
    if (skip >= q->copied.len) return 0;
    iov[0].base = q->copied.p + skip;
    iov[0].len = q->copied.len - skip;
    return 1;
  }
  if (q->nrefs == 1 && q->copied.len == 0 && q->refs[0].fd < 0 && q->refs[0].n <= UINT_MAX) {
    /* a stream's frame to one subscriber: its one held piece */
    if (skip >= q->refs[0].n) return 0;
    iov[0].base = (char *)q->refs[0].p + skip;
    iov[0].len = q->refs[0].n - skip;
    return 1;
  }
  int k = 0;
  size_t from = 0; /* position in copied */
  for (int r = 0; r <= q->nrefs; r++) {
    size_t to = r < q->nrefs ? q->refs[r].at : q->copied.len;
    size_t n = to - from;
    if (skip >= n) skip -= n;
    else {
      iov[k++] = uv_buf_init(q->copied.p + from + skip, outq_len(n - skip));
      if (n - skip > UINT_MAX) return k; /* the rest of it first, next time */
      skip = 0;
    }
    from = to;
    if (r == q->nrefs) break;
    n = q->refs[r].n;
    if (skip >= n) skip -= n;
    else if (q->refs[r].fd >= 0) {
      break; /* a file piece: the writer sends it, then asks again */
    } else {
      iov[k++] = uv_buf_init((char *)q->refs[r].p + skip, outq_len(n - skip));
      if (n - skip > UINT_MAX) return k;
      skip = 0;
    }
  }
  return k;
}

int m0__outq_move_tail(m0__outq *dst, m0__outq *src, size_t skip) {
  size_t from = 0; /* position in copied */
  for (int r = 0; r <= src->nrefs; r++) {
    size_t to = r < src->nrefs ? src->refs[r].at : src->copied.len, n = to - from;
    if (skip >= n) skip -= n;
    else {
      if (m0__outq_append(dst, src->copied.p + from + skip, n - skip)) return M0__ENOMEM;
      skip = 0;
    }
    from = to;
    if (r == src->nrefs) break;
    n = src->refs[r].n;
    if (skip >= n) {
      skip -= n;
      continue;
    }
    if (src->refs[r].fd >= 0) { /* a file piece: dst's now, from where the writer got to */
      int rv = m0__outq_file(dst, src->refs[r].fd, src->refs[r].off + skip, n - skip);
      if (rv) {
        src->refs[r].fd = -1; /* closed by m0__outq_file */
        return rv;
      }
      src->refs[r].fd = -1;
      skip = 0;
      continue;
    }
    int had = dst->nrefs;
    if (m0__outq_ref(dst, (const char *)src->refs[r].p + skip, n - skip)) return M0__ENOMEM;
    if (dst->nrefs > had && src->refs[r].free_fn) { /* referenced there: dst's to free now */
      dst->refs[had].free_fn = src->refs[r].free_fn;
      dst->refs[had].owner = src->refs[r].owner;
      src->refs[r].free_fn = NULL;
    }
    skip = 0;
  }
  return 0;
}

static void outq_release(m0__outq *q) {
  for (int r = 0; r < q->nrefs; r++) {
    if (q->refs[r].free_fn) q->refs[r].free_fn(q->refs[r].owner);
    if (q->refs[r].fd >= 0) close(q->refs[r].fd);
  }
}

void m0__outq_clear(m0__outq *q) {
  if (q->nrefs) outq_release(q);
  m0__buf_clear(&q->copied);
  q->nrefs = 0;
  q->ref_bytes = 0;
}

void m0__outq_free(m0__outq *q) {
  outq_release(q);
  m0__buf_free(&q->copied);
  free(q->refs);
  memset(q, 0, sizeof *q);
}
