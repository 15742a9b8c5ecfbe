/* Messages per edge: every message a host actor sends (m0__send_msg), and
 * every reply an outside instance sends (counted by the service that hands
 * it to its loop), is counted on the edge (from, to), on the shared page, so
 * any process's observer (host/observer.h) sees every process's counts and
 * its page draws messages per second on each edge. Each message a host
 * actor takes (m0__recv, once admitted) is counted on its edge too: sent
 * less taken is what waits for the receiver, in its mailbox or its inbox
 * (or on the way there).
 *
 * Design notes
 * - An open-addressing table of M0__PAGE_EDGE_LINES lines (transport/page.h),
 *   hashed by the pair: a line is taken by a compare-and-swap of its key, so
 *   two processes never take one line for two edges; the count is a relaxed
 *   atomic add. A topology has a few hundred edges at most; an edge that
 *   finds the table full is not counted (m0__edges_lost says how many).
 * - Per message, not per request: a batch is one message, an nng hop costs
 *   ~100 us here, the count ~10 ns.
 * - Rates: every loop's sweep (at most a second apart) asks to roll the
 *   window (m0__edges_roll); the first to find it a second old or more
 *   takes it (a compare-and-swap of its start on the page) and writes each
 *   line's messages per second over it, then its count as the next one's
 *   mark. So a rate is the whole host's over the last completed window of
 *   one to two seconds, whoever reads it, read or not. */
#ifndef M0_RUNTIME_EDGES_H
#define M0_RUNTIME_EDGES_H

#include <stdbool.h>
#include <stdint.h>

#include "transport/page.h"

/* Counts on lines (the shared page's; until then, this process's own). */
void m0__edges_attach(m0__edge_line *lines, int n);
/* The rates' window and marks (the shared page's; none until then: every
 * rate reads 0). */
void m0__edges_attach_rates(m0__page_observed *o);
/* Rolls the rates' window if it began a second ago or more (now_ms:
 * CLOCK_MONOTONIC, shared by every process). Thread safety: any thread,
 * any process; one of them rolls it. */
void m0__edges_roll(uint64_t now_ms);
/* One message of kind from -> to. Thread safety: any thread, any process. */
void m0__edge_sent(uint32_t from, uint32_t to, int kind);
/* A message counted by m0__edge_sent whose send then failed: taken back. */
void m0__edge_unsent(uint32_t from, uint32_t to);
/* One message from -> to taken by its receiver (a host actor's message:
 * m0__recv counts no outside peer's, whose `from` is its own word). */
void m0__edge_taken(uint32_t from, uint32_t to);
/* A receiver that died takes nothing more: what was sent to an actor `of`
 * names is forgotten (taken = sent), so its successor starts at 0 waiting. */
void m0__edges_settle(bool (*of)(void *arg, uint32_t to), void *arg);
/* Every edge with its counts, the kinds sent on it (bit k: kind k) and its
 * messages per second over the last window. */
typedef struct m0__edge_counts {
  uint64_t n, taken, kinds;
  double rate;
} m0__edge_counts;
void m0__edges_each(void (*cb)(void *arg, uint32_t from, uint32_t to, const m0__edge_counts *c), void *arg);
uint64_t m0__edges_lost(void);

#endif
