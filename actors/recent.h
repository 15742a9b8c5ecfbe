/* The recent trace records: every record a tracer keeps (actors/trace.h)
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
 *   M0__PAGE_TRACE_LINES records, which is what a debugging view wants. */
#ifndef M0_ACTORS_RECENT_H
#define M0_ACTORS_RECENT_H

#include <stdint.h>

#include "actors/trace.h"
#include "transport/page.h"

/* Puts records in ring (the shared page's; until then, this process's own). */
void m0__recent_attach(m0__trace_ring *ring);
/* One record (M0__TRACE_RECORD bytes, as a tracer encodes it). */
void m0__recent_put(const uint8_t rec[M0__TRACE_RECORD]);
/* Every record held now, oldest first. */
void m0__recent_each(void (*cb)(void *arg, const m0__trace_rec *r), void *arg);

#endif
