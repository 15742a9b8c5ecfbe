/* Request latency histograms: how long a request took, from its parse to
 * its answer begun on the loop, by route (http/conn.c) and by application
 * actor (actors/asks.c), for /metrics' m0_request_duration_seconds and
 * m0_actor_request_duration_seconds (host/metrics.c).
 *
 * Design notes
 * - Buckets are Prometheus's kind: cumulative counts by upper bound, from
 *   100 us to 10 s, and +Inf; a sum in nanoseconds. The counters are atomics
 *   added with relaxed order: /metrics reads them from another loop's
 *   thread, and a scrape that sees a count and a bucket of different
 *   instants is off by the requests of that instant, as Prometheus allows.
 * - Each loop has its own row per route (m0__http.latency), so loops never
 *   share a cache line per request; /metrics sums the rows of every loop of
 *   the process serving the same app, found in a registry the loops join at
 *   m0__latency_open and leave at m0__http_fini (under a mutex: a loop's rows
 *   are freed only after it left). An actor's histogram is one per actor
 *   (its requests cost a message each way; the loops share it).
 * - Two clock reads per request (CLOCK_MONOTONIC, vDSO: ~20 ns each). */
#ifndef M0_HTTP_LATENCY_H
#define M0_HTTP_LATENCY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define M0__LATENCY_BUCKETS 16 /* bounds; +Inf is one more */

typedef struct m0__latency {
  atomic_ullong n[M0__LATENCY_BUCKETS + 1]; /* by bucket (not cumulative); [BUCKETS]: above the last bound */
  atomic_ullong sum_ns;
} m0__latency;

/* The bounds, in seconds as /metrics prints them ("0.0001" ... "10"). */
extern const char *const m0__latency_le[M0__LATENCY_BUCKETS];

uint64_t m0__latency_now_ns(void);
/* Counts one request that took ns. Thread safety: any thread. */
void m0__latency_add(m0__latency *l, uint64_t ns);
/* Adds l's counts into out (plain numbers: a sum across loops). */
typedef struct m0__latency_sum {
  uint64_t n[M0__LATENCY_BUCKETS + 1], sum_ns;
} m0__latency_sum;
void m0__latency_sum_add(m0__latency_sum *out, const m0__latency *l);

struct m0__http;
/* Makes h's rows (h->app set) and joins the registry of this process's
 * loops (see the notes); out of memory, h has none. Left at
 * m0__http_fini. */
void m0__latency_open(struct m0__http *h);
void m0__latency_leave(struct m0__http *h);
/* Sums row `route` of every joined loop serving app into out. */
void m0__latency_route_sum(const void *app, int route, m0__latency_sum *out);

#endif
