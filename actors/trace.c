#include "actors/trace.h"

#include <inttypes.h>
#include <nng/nng.h>
#include <nng/protocol/pipeline0/push.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "actors/kinds.h"

/* "-": JSON lines on stderr. An nng URL: the same lines as messages on a
 * push socket dialed to it (m0trace listens there), so every process of a
 * prefork host can trace to one watcher. A record that cannot be queued at
 * once (nobody listening for a while) is dropped and counted: tracing must
 * never slow the host down. */
struct m0__tracer {
  FILE *out;
  nng_socket sock;
  bool nng;
  atomic_ulong dropped;
};

m0__tracer *m0__tracer_new(const char *dest) {
  if (!dest || !dest[0]) return NULL;
  m0__tracer *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  if (strcmp(dest, "-") == 0) {
    t->out = stderr;
    return t;
  }
  if (nng_push0_open(&t->sock) != 0) {
    free(t);
    return NULL;
  }
  nng_socket_set_int(t->sock, NNG_OPT_SENDBUF, 8192);
  nng_socket_set_ms(t->sock, NNG_OPT_RECONNMAXT, 200);
  if (nng_dial(t->sock, dest, NULL, NNG_FLAG_NONBLOCK) != 0) {
    nng_close(t->sock);
    free(t);
    return NULL;
  }
  t->nng = true;
  return t;
}

void m0__tracer_free(m0__tracer *t) {
  if (!t) return;
  if (t->nng) nng_close(t->sock);
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
  if (nng_send(t->sock, line, (size_t)n - 1, NNG_FLAG_NONBLOCK) != 0) atomic_fetch_add(&t->dropped, 1);
}
