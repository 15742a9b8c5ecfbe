/* The trace hook: one record per actor message (time, from, to, kind,
 * sequence, bytes, trace id). Called only from m0__send and m0__recv, and
 * only when a tracer is set, so tracing off costs one branch per message. */
#ifndef M0_ACTORS_TRACE_H
#define M0_ACTORS_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "actors/envelope.h"

typedef struct m0__tracer m0__tracer;

/* dest "-" writes JSON lines to stderr; an nng URL sends the lines, batched
 * (one or more whole lines per message, each ending in a newline, within
 * 50 ms), to whoever listens there (m0trace). NULL when dest is empty or
 * cannot be dialed. */
m0__tracer *m0__tracer_new(const char *dest);
void m0__tracer_free(m0__tracer *t);
/* dir is "send" or "recv". Thread safety: any thread. */
void m0__trace_record(m0__tracer *t, const char *dir, const m0__env *e, size_t bytes);

#endif
