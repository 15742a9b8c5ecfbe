/* The trace hook: one record per actor message (time, from, to, kind,
 * sequence, bytes, trace id, and the process and thread that made it).
 * Called only from m0__send and m0__recv, and only while some tracer of the
 * process is on (m0__trace_live), so tracing off costs one branch per
 * message. A tracer is switched on and off, and narrowed to some actors or
 * kinds, while the host runs (m0__tracer_control: a TRACE message from
 * m0trace on this machine, at a loop's outside mailbox). */
#ifndef M0_RUNTIME_TRACE_H
#define M0_RUNTIME_TRACE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/envelope.h"
#include "runtime/recent.h" /* the record: its bytes and its line */

typedef struct m0__tracer m0__tracer;

/* How many tracers of this process are on: the hook's one branch. */
extern atomic_uint m0__trace_live;

/* A tracer for this process (`process`: whose records, above). dest "-"
 * writes JSON lines to stderr; an nng URL sends binary records, batched (one
 * or more per message, within 50 ms), to whoever listens there (m0trace,
 * which prints the same JSON lines); both start on. An empty dest makes a
 * tracer that is off until a control names where its records go. NULL when
 * out of memory or when an nng dest cannot be dialed. */
m0__tracer *m0__tracer_new(const char *dest, uint32_t process);
void m0__tracer_free(m0__tracer *t);
/* Thread safety: any thread. t may be NULL (an actor of a tool). */
void m0__trace_record(m0__tracer *t, bool recv, const m0__env *e, size_t bytes);

/* One request, one trace id: a batch (a JOB, a RESULT, a REQUEST, a REPLY)
 * carries many requests, but its envelope only its first traced one's id.
 * So each of the others gets a record of its own, of the same message (its
 * kind, from, to, seq and bytes) with its own id:
 * - a sender names them, just before the send, with m0__trace_batch(ids, n)
 *   (n pairs {hi, lo}, nonzero and not the envelope's, kept until the send
 *   returns): the send's hook records each after the message's own, and
 *   then forgets them (the sender calls m0__trace_batch(NULL, 0) after the
 *   send as well, for a send that failed before its hook);
 * - a receiver records each request as it takes it up, with
 *   m0__trace_request (its time is when that request began, which for the
 *   first is the message's receipt).
 * Both only while m0__trace_live: with tracing off, nothing is collected. */
void m0__trace_batch(const uint64_t (*ids)[2], size_t n);
void m0__trace_request(m0__tracer *t, bool recv, const m0__env *e, size_t bytes, uint64_t hi, uint64_t lo);
/* Collects a batch's ids for m0__trace_batch: appends {hi, lo} unless it is
 * zero or first's (the envelope's). 0, or M0__ENOMEM (the id not kept). */
typedef struct m0__trace_ids {
  uint64_t (*ids)[2];
  size_t n, cap;
} m0__trace_ids;
int m0__trace_ids_add(m0__trace_ids *l, uint64_t first_hi, uint64_t first_lo, uint64_t hi, uint64_t lo);
void m0__trace_ids_free(m0__trace_ids *l);

/* A request a loop answered itself (no message: on the loop, before the
 * pool or an actor), once its answer is begun: a record with dir "serve",
 * kind 0 (printed "http"), from and to the loop, seq n (the loop's request
 * count), bytes the body's, and the request's trace id. Which are recorded
 * is the tracer's "requests" (a control's): "sampled" (the default: those
 * whose traceparent has its sampled flag, bit 0 of flags), "all" (every
 * one, zeros for no traceparent) or "none". Only while m0__trace_live. */
void m0__trace_served(m0__tracer *t, uint32_t loop, uint64_t hi, uint64_t lo, uint8_t flags, uint64_t n,
                      size_t bytes);

/* A control: a JSON object, every member optional,
 *   {"on": true|false, "to": "<nng URL>", "actors": ["loop.0", "pool", ...],
 *    "kinds": ["job", "result", "http", ...], "requests": "sampled"|"all"|"none"}
 * "on" switches the tracer; "to" is where its records go from now (an nng
 * URL; refused for a tracer writing to stderr); "actors" keeps the records
 * of messages from or to those actors only (a name, or a prefix of whole
 * parts: "pool" is every pool thread, "pool.1" loop 1's, "echo" every
 * instance of the echo actor), [] or absent every actor; "kinds" likewise by
 * kind ("http": the records of requests served on a loop); "requests" which
 * of those are recorded (m0__trace_served). A control replaces the filters it names and leaves the others.
 * 0, or M0__EINVALID with why (one line, no newline) when the control is
 * not one (not JSON, an unknown member, a name that is no actor's, a URL that
 * cannot be dialed, on with nowhere to send): the tracer is as it was.
 * Thread safety: any thread. */
int m0__tracer_control(m0__tracer *t, const void *json, size_t len, char *why, size_t whylen);
/* A TRACE message m at actor self (a loop; the prefork supervisor): its
 * control for this process's tracer t (m0trace tells each loop, and the
 * supervisor; a second telling changes nothing). A refused one is counted
 * (M0__REFUSE_CONTROL) and said on stderr with why: its sender is the
 * operator, on this machine. */
struct m0__msg;
void m0__trace_on_control(m0__tracer *t, uint32_t self, const struct m0__msg *m);

/* A filter names at most this many actors. */
#define M0__TRACE_ACTORS 16

#endif
