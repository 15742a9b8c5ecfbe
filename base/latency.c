#include "base/latency.h"

#include <time.h>

const char *const m0__latency_le[M0__LATENCY_BUCKETS] = {"0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005",
                                                         "0.01",   "0.025",   "0.05",   "0.1",   "0.25",   "0.5",
                                                         "1",      "2.5",     "5",      "10"};
static const uint64_t bound_ns[M0__LATENCY_BUCKETS] = {
    100000,    250000,    500000,     1000000,    2500000,    5000000,    10000000,   25000000,
    50000000,  100000000, 250000000,  500000000,  1000000000, 2500000000, 5000000000, 10000000000};

uint64_t m0__latency_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void m0__latency_add(m0__latency *l, uint64_t ns) {
  int b = 0;
  while (b < M0__LATENCY_BUCKETS && ns > bound_ns[b]) b++;
  atomic_fetch_add_explicit(&l->n[b], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&l->sum_ns, ns, memory_order_relaxed);
}

void m0__latency_status(m0__latency *l, int status) {
  int k = status / 100 - 1;
  if (k < 0) k = 0;
  if (k >= M0__STATUS_CLASSES) k = M0__STATUS_CLASSES - 1;
  atomic_fetch_add_explicit(&l->status[k], 1, memory_order_relaxed);
}

void m0__latency_sum_add(m0__latency_sum *out, const m0__latency *l) {
  for (int b = 0; b <= M0__LATENCY_BUCKETS; b++) out->n[b] += atomic_load_explicit(&l->n[b], memory_order_relaxed);
  out->sum_ns += atomic_load_explicit(&l->sum_ns, memory_order_relaxed);
  for (int k = 0; k < M0__STATUS_CLASSES; k++)
    out->status[k] += atomic_load_explicit(&l->status[k], memory_order_relaxed);
}
