/* m0_defer's handle (include/m0/m0.h): made on the loop for a request that
 * waits (actors/asks.c, an ask with no actor), answered from any thread by
 * one ANSWER message to the loop's direct inbox (m0_deferred_respond, here),
 * which the loop's asks take as an actor's REPLY. */
#ifndef M0_ACTORS_DEFERRED_H
#define M0_ACTORS_DEFERRED_H

#include "runtime/inbox.h"
#include "runtime/trace.h"
#include "m0/m0.h"

/* A handle whose answer goes to loop_id's inbox; NULL when out of memory.
 * Freed with free() until given to the application, by its answer after. */
m0_deferred *m0__deferred_new(m0__inbox *inbox, uint32_t loop_id, m0__tracer *trace);
/* The ask (actors/asks.c) its answer names, and its bound: an answer given
 * timeout_ms from now or later is not sent (the host answers 504 at the
 * bound) but counted in *late, and m0_deferred_respond says so (-1,
 * ETIMEDOUT). */
void m0__deferred_for(m0_deferred *d, uint64_t id, unsigned timeout_ms, _Atomic uint64_t *late);

#endif
