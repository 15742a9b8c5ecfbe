#include "runtime/edges.h"

#include <stdatomic.h>

static m0__edge_line local_lines[M0__PAGE_EDGE_LINES];
static m0__edge_line *lines = local_lines;
static int nlines = M0__PAGE_EDGE_LINES;
static atomic_ullong lost;
static m0__page_observed *observed;

void m0__edges_attach(m0__edge_line *l, int n) {
  if (l && n > 0) {
    lines = l;
    nlines = n;
  }
}

void m0__edges_attach_rates(m0__page_observed *o) { observed = o; }

void m0__edges_roll(uint64_t now_ms) {
  m0__page_observed *o = observed;
  if (!o) return;
  uint64_t start = atomic_load_explicit(&o->window_ms, memory_order_acquire);
  if ((start && now_ms < start + 1000) ||
      !atomic_compare_exchange_strong(&o->window_ms, &start, now_ms ? now_ms : 1))
    return; /* not a second yet, or another process rolled it */
  for (int i = 0; i < nlines && i < M0__PAGE_EDGE_LINES; i++) {
    uint64_t n = atomic_load_explicit(&lines[i].n, memory_order_relaxed),
             mark = atomic_load_explicit(&o->mark[i], memory_order_relaxed);
    /* in thousandths of a message per second; none over the first window
     * (no mark yet) or a line taken back below its mark (m0__edge_unsent) */
    uint64_t rate = start && n > mark && now_ms > start ? (n - mark) * 1000000 / (now_ms - start) : 0;
    atomic_store_explicit(&o->rate[i], rate, memory_order_relaxed);
    atomic_store_explicit(&o->mark[i], n, memory_order_relaxed);
  }
}

/* The line of edge (from, to), taken if it has none yet; NULL when the
 * table is full. */
static m0__edge_line *line_of(uint32_t from, uint32_t to) {
  uint64_t key = (uint64_t)from << 32 | to;
  unsigned at = (unsigned)((key * 0x9E3779B97F4A7C15ull) >> 40) % (unsigned)nlines;
  for (int probe = 0; probe < nlines; probe++, at = (at + 1) % (unsigned)nlines) {
    uint64_t cur = atomic_load_explicit(&lines[at].key, memory_order_acquire);
    if (cur == 0) {
      uint64_t zero = 0;
      cur = atomic_compare_exchange_strong(&lines[at].key, &zero, key) ? key : zero; /* zero: who took it meanwhile */
    }
    if (cur == key) return &lines[at];
  }
  atomic_fetch_add_explicit(&lost, 1, memory_order_relaxed);
  return NULL;
}

void m0__edge_sent(uint32_t from, uint32_t to, int kind) {
  m0__edge_line *l = line_of(from, to);
  if (!l) return;
  atomic_fetch_add_explicit(&l->n, 1, memory_order_relaxed);
  uint64_t bit = kind >= 0 && kind < 64 ? 1ull << kind : 0;
  if (bit && !(atomic_load_explicit(&l->kinds, memory_order_relaxed) & bit)) /* once per kind: a read after */
    atomic_fetch_or_explicit(&l->kinds, bit, memory_order_relaxed);
}

void m0__edge_unsent(uint32_t from, uint32_t to) {
  m0__edge_line *l = line_of(from, to);
  if (l) atomic_fetch_sub_explicit(&l->n, 1, memory_order_relaxed);
}

/* The line is taken here too: the receiver may count before the sender
 * (an outside instance's message, counted by the service as it takes it). */
void m0__edge_taken(uint32_t from, uint32_t to) {
  m0__edge_line *l = line_of(from, to);
  if (l) atomic_fetch_add_explicit(&l->taken, 1, memory_order_relaxed);
}

void m0__edges_settle(bool (*of)(void *arg, uint32_t to), void *arg) {
  for (int i = 0; i < nlines; i++) {
    uint64_t key = atomic_load_explicit(&lines[i].key, memory_order_acquire);
    if (key && of(arg, (uint32_t)key))
      atomic_store_explicit(&lines[i].taken, atomic_load_explicit(&lines[i].n, memory_order_relaxed),
                            memory_order_relaxed);
  }
}

void m0__edges_each(void (*cb)(void *arg, uint32_t from, uint32_t to, const m0__edge_counts *c), void *arg) {
  for (int i = 0; i < nlines; i++) {
    uint64_t key = atomic_load_explicit(&lines[i].key, memory_order_acquire);
    if (!key) continue;
    /* taken first: one taken between the two reads counts as waiting a
     * moment longer. (A send is counted once it returned, and its receiver
     * may count first: taken can pass n for a moment; the observer shows
     * no less than 0.) */
    m0__edge_counts c = {.taken = atomic_load_explicit(&lines[i].taken, memory_order_relaxed)};
    c.n = atomic_load_explicit(&lines[i].n, memory_order_relaxed);
    c.kinds = atomic_load_explicit(&lines[i].kinds, memory_order_relaxed);
    if (observed && i < M0__PAGE_EDGE_LINES)
      c.rate = (double)atomic_load_explicit(&observed->rate[i], memory_order_relaxed) / 1000.0;
    cb(arg, (uint32_t)(key >> 32), (uint32_t)key, &c);
  }
}

uint64_t m0__edges_lost(void) { return atomic_load(&lost); }
