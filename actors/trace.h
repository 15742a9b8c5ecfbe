/* The trace hook: one record per actor message (time, from, to, kind,
 * sequence, bytes, trace id). Called only from m0__send and m0__recv, and
 * only when a tracer is set, so tracing off costs one branch per message. */
#ifndef M0_ACTORS_TRACE_H
#define M0_ACTORS_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "actors/envelope.h"

typedef struct m0__tracer m0__tracer;

/* dest "-" writes JSON lines to stderr; an nng URL sends binary records,
 * batched (one or more per message, within 50 ms), to whoever listens there
 * (m0trace, which prints the same JSON lines). NULL when dest is empty or
 * cannot be dialed. */
m0__tracer *m0__tracer_new(const char *dest);
void m0__tracer_free(m0__tracer *t);
/* Thread safety: any thread. */
void m0__trace_record(m0__tracer *t, bool recv, const m0__env *e, size_t bytes);

/* A record on the wire: the message's own envelope header (its length field
 * holding the payload bytes), then the time in nanoseconds since the epoch
 * and the direction (0 send, 1 recv), each a u64, all little-endian. */
#define M0__TRACE_RECORD (M0__ENV_HEADER + 16)
typedef struct m0__trace_rec {
  m0__env e;
  uint32_t bytes;
  uint64_t t_ns;
  bool recv;
} m0__trace_rec;
/* 0, or M0__EBADMSG when the bytes are not a record. */
int m0__trace_decode(const uint8_t in[M0__TRACE_RECORD], m0__trace_rec *r);
/* The record as one JSON line ending in a newline: {"t","dir","from","to",
 * "kind","seq","bytes","trace"}. Returns its length (truncated to outlen-1). */
size_t m0__trace_format(const m0__trace_rec *r, char *out, size_t outlen);

#endif
