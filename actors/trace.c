#include "actors/trace.h"

#include <nng/nng.h>
#include <nng/protocol/pipeline0/push.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/errors.h"
#include "actors/kinds.h"
#include "base/nng_compat.h"
#include "base/num.h"

/* "-": JSON lines on stderr, each written at once. An nng URL: binary
 * records on a push socket dialed to it (m0trace listens there and prints
 * the same JSON lines), so every process of a prefork host can trace to one
 * watcher.
 *
 * Design notes
 * - Over nng a record is 60 bytes copied into a batch, not text: formatting
 *   a JSON line (two actor names, a kind, the trace id, all by snprintf)
 *   took ~6,800 instructions per record in the host (callgrind): tracing
 *   on cost the pool lane ~9,100 instructions per request, now ~200
 *   (bench/profile_trace). m0trace formats instead.
 * - The records are batched: a message carries up to TRACE_BATCH bytes of
 *   whole records, sent when the next would not fit, and at the latest
 *   TRACE_FLUSH_MS after it was written (by a thread of the tracer's own,
 *   asleep on a condition variable: an nng sleep aio's every expiry cost
 *   nng 1.5.2's expire thread up to a millisecond of spinning, 2 % of a CPU
 *   at 20 ticks a second; ARCHITECTURE.md, "nng's timers and redials").
 *   One nng message per record cost the pool lane a third of its throughput
 *   (bench/run_trace); a batch costs one send per ~540 records.
 * - Never waiting: a batch that cannot be queued at once (nobody listening
 *   for a while) is dropped and its records counted; the count is printed
 *   when the tracer is freed. Tracing must never slow the host down, and
 *   each record still carries the time it was made.
 * - One batch per process, under a mutex held only to copy a record in (and
 *   to hand a full batch to nng, which copies it and does not block). */
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
  unsigned long records;
  pthread_cond_t tick; /* CLOCK_MONOTONIC; signalled to stop */
  pthread_t flusher;
  bool stopping;
};

/* Under t->mu. */
static void trace_flush(m0__tracer *t) {
  if (!t->len) return;
  if (nng_send(t->sock, t->batch, t->len, NNG_FLAG_NONBLOCK) != 0) atomic_fetch_add(&t->dropped, t->records);
  t->len = 0;
  t->records = 0;
}

static void *trace_flusher(void *arg) {
  m0__tracer *t = arg;
  pthread_mutex_lock(&t->mu);
  while (!t->stopping) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += TRACE_FLUSH_MS * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&t->tick, &t->mu, &until);
    trace_flush(t);
  }
  pthread_mutex_unlock(&t->mu);
  return NULL;
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
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&t->tick, &ca);
  pthread_condattr_destroy(&ca);
  if (nng_push0_open(&t->sock) != 0) goto fail;
  nng_socket_set_int(t->sock, NNG_OPT_SENDBUF, 1024);
  nng_socket_set_ms(t->sock, NNG_OPT_RECONNMAXT, 200);
  if (nng_dial(t->sock, dest, NULL, NNG_FLAG_NONBLOCK) != 0 || pthread_create(&t->flusher, NULL, trace_flusher, t) != 0) {
    m0__socket_close(t->sock);
    goto fail;
  }
  t->nng = true;
  return t;
fail:
  pthread_cond_destroy(&t->tick);
  pthread_mutex_destroy(&t->mu);
  free(t);
  return NULL;
}

void m0__tracer_free(m0__tracer *t) {
  if (!t) return;
  if (t->nng) {
    pthread_mutex_lock(&t->mu);
    t->stopping = true;
    pthread_cond_signal(&t->tick);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->flusher, NULL); /* it flushed once more on its way out */
    trace_flush(t);                  /* no other user is left */
    unsigned long dropped = atomic_load(&t->dropped);
    if (dropped)
      fprintf(stderr, "m0: trace: %lu records dropped (nobody was receiving at the trace address)\n", dropped);
    m0__socket_close(t->sock);
    pthread_cond_destroy(&t->tick);
    pthread_mutex_destroy(&t->mu);
  }
  free(t);
}

void m0__trace_record(m0__tracer *t, bool recv, const m0__env *e, size_t bytes) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  m0__trace_rec r = {.e = *e, .bytes = (uint32_t)bytes, .t_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec,
                     .recv = recv};
  if (!t->nng) {
    char line[512];
    m0__trace_format(&r, line, sizeof line);
    fputs(line, t->out); /* one locked write: lines from threads never interleave */
    return;
  }
  uint8_t rec[M0__TRACE_RECORD];
  m0__env_write(rec, &r.e, r.bytes);
  m0__le_put64(rec + M0__ENV_HEADER, r.t_ns);
  m0__le_put64(rec + M0__ENV_HEADER + 8, r.recv ? 1 : 0);
  pthread_mutex_lock(&t->mu);
  if (t->len + sizeof rec > sizeof t->batch) trace_flush(t);
  memcpy(t->batch + t->len, rec, sizeof rec);
  t->len += sizeof rec;
  t->records++;
  pthread_mutex_unlock(&t->mu);
}

int m0__trace_decode(const uint8_t in[M0__TRACE_RECORD], m0__trace_rec *r) {
  if (m0__env_read_header(in, &r->e, &r->bytes) != 0) return M0__EBADMSG;
  r->t_ns = m0__le_get64(in + M0__ENV_HEADER);
  uint64_t dir = m0__le_get64(in + M0__ENV_HEADER + 8);
  if (dir > 1) return M0__EBADMSG;
  r->recv = dir == 1;
  return 0;
}

/* The line is built by hand, not by snprintf: m0trace formats every record
 * of a busy host (~27,000 a second on the pool lane at 16 connections), and
 * snprintf took ~9,000 instructions a record there (callgrind). */
static char *put_str(char *o, const char *s) {
  while (*s) *o++ = *s++;
  return o;
}
static char *put_hex64(char *o, uint64_t v) {
  for (int i = 15; i >= 0; i--) *o++ = "0123456789abcdef"[(v >> (4 * i)) & 15];
  return o;
}

size_t m0__trace_format(const m0__trace_rec *r, char *out, size_t outlen) {
  char line[320], from[32], to[32]; /* the longest line is ~260 bytes */
  m0__actor_name(r->e.from, from, sizeof from);
  m0__actor_name(r->e.to, to, sizeof to);
  char *o = m0__put_uint(put_str(line, "{\"t\":"), r->t_ns / 1000000000u);
  char *dot = o; /* nanoseconds, zero-padded to nine digits: 1xxxxxxxxx, its 1 made the dot */
  o = m0__put_uint(o, 1000000000u + r->t_ns % 1000000000u);
  *dot = '.';
  o = put_str(put_str(o, ",\"dir\":\""), r->recv ? "recv" : "send");
  o = put_str(put_str(o, "\",\"from\":\""), from);
  o = put_str(put_str(o, "\",\"to\":\""), to);
  o = put_str(put_str(o, "\",\"kind\":\""), m0__kind_name(r->e.kind));
  o = m0__put_uint(put_str(o, "\",\"seq\":"), r->e.seq);
  o = m0__put_uint(put_str(o, ",\"bytes\":"), r->bytes);
  o = put_hex64(put_hex64(put_str(o, ",\"trace\":\""), r->e.trace_hi), r->e.trace_lo);
  o = put_str(o, "\"}\n");
  size_t n = (size_t)(o - line);
  if (outlen == 0) return 0;
  if (n > outlen - 1) n = outlen - 1;
  memcpy(out, line, n);
  out[n] = 0;
  return n;
}
