/* Request latency histograms and answers by status class: how long a
 * request took, from its parse to its answer begun on the loop, by route
 * (http/conn.c) and by application actor (actors/asks.c), for /metrics'
 * m0_request_duration_seconds, m0_responses_total and
 * m0_actor_request_duration_seconds (host/metrics.c).
 *
 * Design notes
 * - Buckets are Prometheus's kind: cumulative counts by upper bound, from
 *   100 us to 10 s, and +Inf; a sum in nanoseconds. The counters are atomics
 *   added with relaxed order: /metrics reads them from another loop's
 *   thread or process, and a scrape that sees a count and a bucket of
 *   different instants is off by the requests of that instant, as
 *   Prometheus allows.
 * - The rows live on the shared page (transport/page.h, m0__loop_figures):
 *   each loop has its own row per route, so loops never share a cache line
 *   per request, and /metrics in any process sums every loop's rows of the
 *   whole host. An actor's histogram is one per actor on the page (its
 *   requests cost a message each way; the loops share it).
 * - Two clock reads per request (CLOCK_MONOTONIC, vDSO: ~20 ns each). */
#ifndef M0_BASE_LATENCY_H
#define M0_BASE_LATENCY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define M0__LATENCY_BUCKETS 16 /* bounds; +Inf is one more */
#define M0__STATUS_CLASSES 5   /* 1xx .. 5xx */

typedef struct m0__latency {
  _Atomic uint64_t n[M0__LATENCY_BUCKETS + 1]; /* by bucket (not cumulative); [BUCKETS]: above the last bound */
  _Atomic uint64_t sum_ns;
  _Atomic uint64_t status[M0__STATUS_CLASSES]; /* answers by status class, [0] 1xx (m0__latency_status) */
} m0__latency;

/* The bounds, in seconds as /metrics prints them ("0.0001" ... "10"). */
extern const char *const m0__latency_le[M0__LATENCY_BUCKETS];

uint64_t m0__latency_now_ns(void);
/* Counts one request that took ns. Thread safety: any thread. */
void m0__latency_add(m0__latency *l, uint64_t ns);
/* Counts one answer by its status's class (below 100 as 1xx, above 599 as
 * 5xx: m0 sends neither). Thread safety: any thread. */
void m0__latency_status(m0__latency *l, int status);
/* Adds l's counts into out (plain numbers: a sum across loops). */
typedef struct m0__latency_sum {
  uint64_t n[M0__LATENCY_BUCKETS + 1], sum_ns, status[M0__STATUS_CLASSES];
} m0__latency_sum;
void m0__latency_sum_add(m0__latency_sum *out, const m0__latency *l);

#endif
