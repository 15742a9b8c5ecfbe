/* The output queue: the bytes of whole responses waiting to be written, as
 * one writev. Design notes in http/outq.c.
 * Thread safety: none; a queue belongs to one thread (a loop's scratch and
 * connections, a pool thread's batch). */
#ifndef M0_HTTP_OUTQ_H
#define M0_HTTP_OUTQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "base/buf.h"

#define M0__OUT_REFS 8
#define M0__REF_MIN 1024 /* smaller static bodies are cheaper to copy */
#define M0__FILE_COPY_MAX (64u << 10) /* a file piece read into memory when no slot is left: no larger */

/* One reference: bytes written from where they lie, or a file piece. */
typedef struct m0__outref {
  uint32_t at; /* the referenced bytes go after copied.p[0, at) (a slot is taken only below 4 GiB) */
  int fd;      /* >= 0: a file piece, n bytes of fd from off, written by sendfile; the queue closes fd */
  union {
    const void *p; /* fd < 0: the bytes */
    uint64_t off;  /* fd >= 0: where in the file */
  };
  size_t n;
  void (*free_fn)(void *); /* an owned body's (m0_respond_owned): free_fn(owner) once written or dropped */
  void *owner;
} m0__outref;

typedef struct m0__outq {
  m0__buf copied; /* heads and copied bodies, in order */
  /* M0__OUT_REFS slots, made at the queue's first reference and kept
   * until m0__outq_free: two queues are in every connection and most of
   * them never hold one, so an idle connection (or stream) carries 48
   * bytes a queue, not 360 (bench/run_streams, bench/run_lifecycle). */
  m0__outref *refs;
  int nrefs;
  size_t ref_bytes;
} m0__outq;

/* Copies n bytes. Returns 0, or M0__ENOMEM (nothing appended). */
int m0__outq_append(m0__outq *q, const void *p, size_t n);
/* Room for up to n bytes written in place after what is queued (a response
 * head built where it is sent from), or NULL (out of memory); the caller
 * then says how many it wrote with m0__outq_wrote. Inline: every response. */
static inline char *m0__outq_room(m0__outq *q, size_t n) {
  if (n > q->copied.cap - q->copied.len && m0__buf_reserve(&q->copied, n)) return NULL;
  return q->copied.p + q->copied.len;
}
static inline void m0__outq_wrote(m0__outq *q, size_t n) { q->copied.len += n; }
/* References n bytes that outlive the write; copies when out of slots.
 * Returns 0 or M0__ENOMEM. */
int m0__outq_ref(m0__outq *q, const void *p, size_t n);
/* Takes n bytes the queue then owns: referenced, and free_fn(p) once they
 * are written or dropped (copied, and freed at once, when small or out of
 * slots). free_fn(p) has run when this returns M0__ENOMEM. */
int m0__outq_own(m0__outq *q, void *p, size_t n, void (*free_fn)(void *));
/* References n bytes of a shared buffer, whatever their size (a stream
 * frame, written to every subscriber from one buffer): release(owner) runs
 * once they are written or dropped. The caller took a reference for the
 * queue before the call; out of slots, the bytes are copied and release
 * runs at once. 0, or M0__ENOMEM (release has run). */
int m0__outq_hold(m0__outq *q, const void *p, size_t n, void (*release)(void *), void *owner);
/* Takes n bytes of the open file fd from off (m0_respond_file): a file
 * piece, written by sendfile(2) from the page cache. The queue owns fd from
 * the call and closes it once the piece is written or dropped. Out of
 * slots, up to M0__FILE_COPY_MAX bytes are read and copied instead. 0, or
 * (fd closed) M0__ETOOBIG (a bigger piece), M0__ESYSTEM (unread) or
 * M0__ENOMEM. */
int m0__outq_file(m0__outq *q, int fd, uint64_t off, size_t n);
static inline size_t m0__outq_bytes(const m0__outq *q) { return q->copied.len + q->ref_bytes; }
/* Fills iov (at most 2*M0__OUT_REFS+1 entries) with the bytes in memory
 * after the first `skip`, up to the first file piece. Returns the entry
 * count (0 when a file piece or nothing comes next). */
int m0__outq_iov(const m0__outq *q, size_t skip, uv_buf_t *iov);
/* Whether a file piece starts at or spans byte `skip` with nothing in memory
 * before it: its descriptor, the file offset there and the bytes left. */
bool m0__outq_file_at(const m0__outq *q, size_t skip, int *fd, uint64_t *off, size_t *n);
/* Appends what src holds past its first `skip` bytes (references stay
 * references; an owned body dst references becomes dst's). Returns 0 or a
 * negative m0__err. */
int m0__outq_move_tail(m0__outq *dst, m0__outq *src, size_t skip);
/* Empties the queue and keeps its memory (a loop's scratch is reused by
 * every response); the owned bodies it still holds are freed. */
void m0__outq_clear(m0__outq *q);
/* Empties the queue and gives its memory back. */
void m0__outq_free(m0__outq *q);

#endif
