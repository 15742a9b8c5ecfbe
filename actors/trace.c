#include "actors/trace.h"

#include <inttypes.h>
#include <nng/nng.h>
#include <nng/protocol/pipeline0/push.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "actors/kinds.h"

/* "-": JSON lines on stderr, each written at once. An nng URL: the same
 * lines on a push socket dialed to it (m0trace listens there), so every
 * process of a prefork host can trace to one watcher.
 *
 * Design notes
 * - Over nng the lines are batched: a message carries up to TRACE_BATCH
 *   bytes of whole lines, sent when the next line would not fit, and at the
 *   latest TRACE_FLUSH_MS after it was written (an nng sleep aio, on nng's
 *   own threads). One nng message per record cost the pool lane a third of
 *   its throughput (bench/run_trace); a batch costs one send per ~100 lines.
 * - Never waiting: a batch that cannot be queued at once (nobody listening
 *   for a while) is dropped and its lines counted. Tracing must never slow
 *   the host down, and each line still carries the time it was made.
 * - One batch per process, under a mutex held only to copy a line in (and to
 *   hand a full batch to nng, which copies it and does not block). */
#define TRACE_BATCH 32768
#define TRACE_FLUSH_MS 50

struct m0__tracer {
  FILE *out;
  nng_socket sock;
  bool nng;
  atomic_ulong dropped;
  pthread_mutex_t mu;
  char batch[TRACE_BATCH];
  size_t len;
  unsigned long lines;
  nng_aio *tick;
  bool stopping;
};

/* Under t->mu. */
static void trace_flush(m0__tracer *t) {
  if (!t->len) return;
  if (nng_send(t->sock, t->batch, t->len, NNG_FLAG_NONBLOCK) != 0) atomic_fetch_add(&t->dropped, t->lines);
  t->len = 0;
  t->lines = 0;
}

static void trace_tick(void *arg) {
  m0__tracer *t = arg;
  pthread_mutex_lock(&t->mu);
  trace_flush(t);
  int rv = nng_aio_result(t->tick); /* a stopped aio ends the ticks */
  bool again = !t->stopping && (rv == 0 || rv == NNG_ETIMEDOUT);
  pthread_mutex_unlock(&t->mu);
  if (again) nng_sleep_aio(TRACE_FLUSH_MS, t->tick);
}

m0__tracer *m0__tracer_new(const char *dest) {
  if (!dest || !dest[0]) return NULL;
  m0__tracer *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  if (strcmp(dest, "-") == 0) {
    t->out = stderr;
    return t;
  }
  pthread_mutex_init(&t->mu, NULL);
  if (nng_push0_open(&t->sock) != 0) goto fail;
  nng_socket_set_int(t->sock, NNG_OPT_SENDBUF, 1024);
  nng_socket_set_ms(t->sock, NNG_OPT_RECONNMAXT, 200);
  if (nng_dial(t->sock, dest, NULL, NNG_FLAG_NONBLOCK) != 0 || nng_aio_alloc(&t->tick, trace_tick, t) != 0) {
    nng_close(t->sock);
    goto fail;
  }
  t->nng = true;
  nng_sleep_aio(TRACE_FLUSH_MS, t->tick);
  return t;
fail:
  pthread_mutex_destroy(&t->mu);
  free(t);
  return NULL;
}

void m0__tracer_free(m0__tracer *t) {
  if (!t) return;
  if (t->nng) {
    pthread_mutex_lock(&t->mu);
    t->stopping = true;
    pthread_mutex_unlock(&t->mu);
    nng_aio_stop(t->tick); /* waits for a tick running now */
    nng_aio_free(t->tick);
    trace_flush(t); /* no other user is left */
    nng_close(t->sock);
    pthread_mutex_destroy(&t->mu);
  }
  free(t);
}

void m0__trace_record(m0__tracer *t, const char *dir, const m0__env *e, size_t bytes) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  char from[32], to[32], line[512];
  m0__actor_name(e->from, from, sizeof from);
  m0__actor_name(e->to, to, sizeof to);
  int n = snprintf(line, sizeof line,
                   "{\"t\":%lld.%09ld,\"dir\":\"%s\",\"from\":\"%s\",\"to\":\"%s\",\"kind\":\"%s\","
                   "\"seq\":%" PRIu64 ",\"bytes\":%zu,\"trace\":\"%016" PRIx64 "%016" PRIx64 "\"}\n",
                   (long long)ts.tv_sec, ts.tv_nsec, dir, from, to, m0__kind_name(e->kind), e->seq, bytes,
                   e->trace_hi, e->trace_lo);
  if (!t->nng) {
    fputs(line, t->out); /* one locked write: lines from threads never interleave */
    return;
  }
  pthread_mutex_lock(&t->mu);
  if (t->len + (size_t)n > sizeof t->batch) trace_flush(t);
  memcpy(t->batch + t->len, line, (size_t)n);
  t->len += (size_t)n;
  t->lines++;
  pthread_mutex_unlock(&t->mu);
}
