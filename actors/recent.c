#include "actors/recent.h"

#include <stdatomic.h>
#include <string.h>

_Static_assert(M0__TRACE_RECORD <= sizeof(((m0__trace_line *)0)->w), "a record fits a line's words");

static m0__trace_ring local_ring;
static m0__trace_ring *ring = &local_ring;

void m0__recent_attach(m0__trace_ring *r) {
  if (r) ring = r;
}

void m0__recent_put(const uint8_t rec[M0__TRACE_RECORD]) {
  uint64_t w[9] = {0};
  memcpy(w, rec, M0__TRACE_RECORD);
  uint64_t n = atomic_fetch_add_explicit(&ring->next, 1, memory_order_relaxed);
  m0__trace_line *l = &ring->lines[n % M0__PAGE_TRACE_LINES];
  atomic_store_explicit(&l->stamp, 0, memory_order_relaxed);
  atomic_thread_fence(memory_order_release); /* the 0 is seen before any new word */
  for (int i = 0; i < 9; i++) atomic_store_explicit(&l->w[i], w[i], memory_order_relaxed);
  atomic_store_explicit(&l->stamp, n + 1, memory_order_release);
}

void m0__recent_each(void (*cb)(void *arg, const m0__trace_rec *r), void *arg) {
  uint64_t next = atomic_load_explicit(&ring->next, memory_order_acquire);
  uint64_t from = next > M0__PAGE_TRACE_LINES ? next - M0__PAGE_TRACE_LINES : 0;
  for (uint64_t n = from; n < next; n++) {
    m0__trace_line *l = &ring->lines[n % M0__PAGE_TRACE_LINES];
    uint64_t before = atomic_load_explicit(&l->stamp, memory_order_acquire), w[9];
    if (before != n + 1) continue; /* being written, or already a later one's */
    for (int i = 0; i < 9; i++) w[i] = atomic_load_explicit(&l->w[i], memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire); /* the words are read before the stamp again */
    if (atomic_load_explicit(&l->stamp, memory_order_relaxed) != before) continue;
    uint8_t rec[sizeof w];
    memcpy(rec, w, sizeof w);
    m0__trace_rec r;
    if (m0__trace_decode(rec, &r) == 0) cb(arg, &r);
  }
}
