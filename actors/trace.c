#include "actors/trace.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "actors/kinds.h"

struct m0__tracer {
  FILE *out;
};

m0__tracer *m0__tracer_new(const char *dest) {
  if (!dest || strcmp(dest, "-") != 0) return NULL;
  m0__tracer *t = calloc(1, sizeof *t);
  if (t) t->out = stderr;
  return t;
}

void m0__tracer_free(m0__tracer *t) { free(t); }

void m0__trace_record(m0__tracer *t, const char *dir, const m0__env *e, size_t bytes) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  char from[32], to[32];
  m0__actor_name(e->from, from, sizeof from);
  m0__actor_name(e->to, to, sizeof to);
  /* One fprintf is one locked write on the FILE, so lines from threads never
   * interleave. */
  fprintf(t->out,
          "{\"t\":%lld.%09ld,\"dir\":\"%s\",\"from\":\"%s\",\"to\":\"%s\",\"kind\":\"%s\","
          "\"seq\":%" PRIu64 ",\"bytes\":%zu,\"trace\":\"%016" PRIx64 "%016" PRIx64 "\"}\n",
          (long long)ts.tv_sec, ts.tv_nsec, dir, from, to, m0__kind_name(e->kind), e->seq, bytes,
          e->trace_hi, e->trace_lo);
}
