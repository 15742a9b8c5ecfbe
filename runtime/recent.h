/* The recent trace records: every record a tracer keeps (runtime/trace.h)
 * is also put in a ring on the shared page, so any process's observer
 * (host/observer.h) can show an actor's last messages, whichever process
 * recorded them. Only while tracing is on: with it off, nothing is put.
 *
 * Design notes
 * - A writer takes a number (one atomic add on the ring's count) and writes
 *   the record in the line it names, under a stamp: 0 while it writes, the
 *   number + 1 once done (a seqlock per line). A reader copies a line and
 *   keeps it only when the stamp, read before and after, is the same and
 *   not 0, and when the bytes decode as a record (two writers a whole ring
 *   apart on one line could mix theirs).
 * - No lock, any thread of any process: the page is shared memory, its
 *   words atomics. The ring forgets: a busy host keeps about its last
 *   M0__PAGE_TRACE_LINES records, which is what a debugging view wants.
 * - The record's codec is here, below both the tracer that makes records
 *   (runtime/trace.h) and the observer and m0trace that read them, so the
 *   two do not include each other. */
#ifndef M0_RUNTIME_RECENT_H
#define M0_RUNTIME_RECENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/envelope.h"
#include "transport/page.h"

/* Which process a record comes from: the host (single, threads, embedded),
 * the prefork supervisor, or worker i (M0__TRACE_WORKER + i). */
enum { M0__TRACE_HOST = 0, M0__TRACE_SUPERVISOR = 1, M0__TRACE_WORKER = 2 };

/* A record on the wire: the message's own envelope header (its length field
 * holding the payload bytes), then the time in nanoseconds since the epoch
 * (u64), the direction (0 send, 1 recv, 2 serve: m0__trace_served, whose
 * kind field is 0), the process's pid, the thread's
 * id (gettid) and the process (M0__TRACE_HOST...), each a u32, all
 * little-endian. */
#define M0__TRACE_RECORD (M0__ENV_HEADER + 24)

typedef struct m0__trace_rec {
  m0__env e;
  uint32_t bytes;
  uint64_t t_ns;
  bool recv, served; /* neither: a send */
  uint32_t pid, tid, process;
} m0__trace_rec;
enum { M0__TRACE_SEND = 0, M0__TRACE_RECV = 1, M0__TRACE_SERVE = 2 };
/* 0, or M0__EBADMSG when the bytes are not a record. */
int m0__trace_decode(const uint8_t in[M0__TRACE_RECORD], m0__trace_rec *r);
/* The record as one JSON line ending in a newline: {"t","dir","from","to",
 * "kind","seq","bytes","trace","process","pid","tid"}. Returns its length
 * (truncated to outlen-1). */
size_t m0__trace_format(const m0__trace_rec *r, char *out, size_t outlen);
/* A record's kind as printed: the message kind's name, "http" for a
 * request served on a loop. */
const char *m0__trace_kind_name(const m0__trace_rec *r);
/* "host", "supervisor", "worker.3". */
void m0__trace_process_name(uint32_t process, char *out, size_t outlen);

/* Puts records in ring (the shared page's; until then, this process's own). */
void m0__recent_attach(m0__trace_ring *ring);
/* One record (M0__TRACE_RECORD bytes, as a tracer encodes it). */
void m0__recent_put(const uint8_t rec[M0__TRACE_RECORD]);
/* Every record held now, oldest first. */
void m0__recent_each(void (*cb)(void *arg, const m0__trace_rec *r), void *arg);

#endif
