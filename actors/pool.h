/* The handler pool: N thread actors behind each loop, each with its own
 * handler state (ctx.thread = j). A view that is not on the loop travels to
 * a pool thread inside a JOB and its answer comes back inside a RESULT.
 *
 * Design notes
 * - An nng message costs ~130 us here, so the lane batches: every request a
 *   loop parses in one pass for pool thread j goes into ONE job message, sent
 *   from the loop's uv_check callback, and j answers the whole batch in ONE
 *   result message. At most one batch is in flight per pool thread; requests
 *   that come meanwhile wait in the next batch.
 * - A connection waits (parses nothing more) while its request is in the
 *   pool, so pipelined answers stay in order without sequence numbers, and
 *   its memory outlives a client that leaves meanwhile (http/conn.h).
 * - A loop and its pool threads are always in one process, so the JOB,
 *   RESULT and STOP between them go through direct inboxes (runtime/actor.h):
 *   the same messages, one wake per batch each way, no nng task threads.
 *   The coordinator makes the inboxes before either end starts and frees
 *   them after both are joined.
 * - Job and result bytes are written straight into the message that carries
 *   them (m0__msg_append) and sent as they stand: requests are copied out of
 *   the loop's buffers once, answers are whole HTTP responses.
 * - A pool thread that runs slow views gives way to its loop. Views that take
 *   more than 1 ms of CPU each run up a debt (the CPU beyond 1 ms per view,
 *   paid back by faster views, the first batch not judged: cold start); at a
 *   debt of 4 ms, one scheduler tick, the thread moves to nice 19 for the
 *   rest of its life. One view of 5 ms moves it; a trivial view's one-off
 *   spike (1.2 ms under TSan) is paid back and a trivial pool never moves.
 *   Why: a loop woken beside a thread that spins at the same weight waits up
 *   to a scheduler tick (4 ms at HZ=250) on ~1-2 % of its wakes; at nice 19
 *   the wake runs at once, but for this guest's own wake-up tail
 *   (bench/run_pool, "pinned": on-loop p99 4 -> ~0.15 ms; bench/wake_floor.c
 *   for the tail). Not from the
 *   start: a demoted thread is preempted by every request the loop reads, so
 *   the batches of a fast lane shrink (lane 0.80 -> 0.52x the loop at 16
 *   connections). One way only: raising a priority back needs CAP_SYS_NICE.
 *   The price: beside other busy processes, a demoted thread gets little CPU.
 */
#ifndef M0_ACTORS_POOL_H
#define M0_ACTORS_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "runtime/actor.h"
#include "runtime/handle.h"
#include "runtime/trace.h"
#include "m0/m0.h"
#include "transport/topology.h"

typedef struct m0__pool_thread {
  m0__handle h; /* first: driven through it (runtime/handle.h) */
  int loop, index;
  const m0__topology *topo;
  const m0_app *app;
  m0__tracer *trace;
  uint32_t coord_id;
  const char *coord_url;
  m0_ctx ctx;
  bool yields;        /* at nice 19: it ran slow views (design notes) */
  bool access_log;    /* --access-log: this thread logs the answers it makes */
  uint64_t slow_debt_ns; /* CPU its views took beyond 1 ms each, not yet paid back */
  m0__actor self;
  m0__peer coord, loopp;
  m0__inbox inbox;       /* the direct lane (inbox.ready): JOB and STOP from the loop */
  m0__inbox *loop_inbox; /* and RESULT to it */
} m0__pool_thread;

/* A pool thread's whole set-up, filled by its coordinator. */
typedef struct m0__pool_config {
  int loop, index; /* pool.loop.index */
  const m0__topology *topo;
  const m0_app *app;
  m0__tracer *trace;
  uint32_t coord_id; /* who it reports to */
  const char *coord_url;
  m0_ctx ctx;              /* its views' context (worker and thread are its own) */
  m0__inbox *loop_inbox;   /* its loop's: RESULT goes there */
} m0__pool_config;

/* Sets the thread up from cfg (copied), its inbox included, and ties it to
 * exits; opening and starting it are m0__handle_open and m0__handle_start.
 * 0, or M0__ENOMEM (no inbox: nothing to undo). */
int m0__pool_init(m0__pool_thread *t, const m0__pool_config *cfg, m0__exits *exits);

/* The pool thread kind (runtime/handle.h): open listens at its mailbox (a
 * tcp address another program holds is the start's failure, named), run is
 * its thread (make, READY or FAILED, JOBs until STOP), hang_up closes its
 * peers, release its mailbox. h.in_app is set while inside a view. */
extern const m0__actor_kind m0__pool_kind;

/* The loop's side: one batch being filled per pool thread. */
typedef struct m0__batch {
  nng_msg *msg; /* the JOB being filled (NULL: empty), sent as it stands */
  uint32_t count;
  bool inflight;
  uint64_t trace_hi, trace_lo; /* the first traced request's: the JOB carries it */
  m0__trace_ids others;        /* while tracing: the other requests' ids (runtime/trace.h) */
} m0__batch;

/* Appends one request to a batch, with what the loop already knows of its
 * answer (res: HEAD, close, the headers before_request added). conn is
 * echoed back with its answer. 0, or M0__ENOMEM (the batch as it was). */
int m0__batch_add(m0__batch *b, void *conn, const m0_request *req, int route, const m0_response *res);
void m0__batch_fini(m0__batch *b);
/* One answer of a RESULT: the response's bytes, then maybe a file piece
 * (m0_respond_file on a pool thread: fd >= 0, flen bytes from off), whose
 * descriptor is the receiver's to close. */
typedef struct m0__result {
  void *conn;
  const uint8_t *resp;
  size_t len;
  int fd;
  uint64_t off, flen;
  uint64_t trace_hi, trace_lo; /* its request's trace id */
} m0__result;
/* Walks a RESULT payload: calls fn per answer. Returns the count, or
 * M0__EBADMSG for a malformed payload. */
int m0__result_each(const uint8_t *p, size_t n, void (*fn)(void *arg, const m0__result *r), void *arg);

#endif
