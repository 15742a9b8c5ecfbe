/* The pool lane, the loop's side (actors/lane.h).
 *
 * Design notes
 * - A sent JOB's message belongs to the pool thread (b->msg = NULL at once);
 *   a failed send leaves it in the batch, whole, for the next pass.
 * - inflight is cleared only by that thread's RESULT, so the loop never has
 *   two batches out to one thread.
 * - A RESULT from anything but one of this loop's pool threads is ignored:
 *   its conn pointers would be someone else's.
 */
#include "actors/lane.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"

int m0__lane_defer(m0__http *h, m0__conn *c, const m0_request *req, int route, const m0_response *res) {
  m0__loop *l = h->owner;
  int best = 0;
  for (int j = 1; j < l->npool; j++) {
    m0__batch *a = &l->batches[j], *b = &l->batches[best];
    if ((a->inflight < b->inflight) || (a->inflight == b->inflight && a->count < b->count)) best = j;
  }
  int rv = m0__batch_add(&l->batches[best], c, req, route, res);
  if (rv != 0) return rv;
  l->queued++;
  return 0;
}

/* One JOB per pool thread per loop pass, at most one in flight each. */
void m0__lane_flush(m0__loop *l) {
  for (int j = 0; j < l->npool; j++) {
    m0__batch *b = &l->batches[j];
    if (b->inflight || b->count == 0) continue;
    if (b->others.n) m0__trace_batch((const uint64_t(*)[2])b->others.ids, b->others.n);
    int rv = m0__send_msg(&l->self, &l->pool[j], M0__K_JOB, b->trace_hi, b->trace_lo, b->msg);
    m0__trace_batch(NULL, 0);
    if (rv != 0) continue; /* still ours: next pass */
    b->msg = NULL; /* the pool thread's now */
    b->inflight = true;
    b->count = 0;
    b->trace_hi = b->trace_lo = 0;
    b->others.n = 0;
  }
  atomic_store_explicit(&m0__loop_line_at(l, l->index)->queued, l->queued - l->answered, memory_order_relaxed);
}

typedef struct lane_result {
  m0__loop *l;
  const m0__msg *m;
} lane_result;

static void lane_on_answer(void *arg, const m0__result *r) {
  const lane_result *lr = arg;
  m0__loop *l = lr->l;
  const m0__env *e = &lr->m->env;
  if (atomic_load_explicit(&m0__trace_live, memory_order_relaxed) && (r->trace_hi || r->trace_lo) &&
      (r->trace_hi != e->trace_hi || r->trace_lo != e->trace_lo)) /* a batch's other request (runtime/trace.h) */
    m0__trace_request(l->trace, true, e, lr->m->len, r->trace_hi, r->trace_lo);
  l->answered++;
  m0__http_complete(&l->http, r->conn, r->resp, r->len, r->fd, r->off, r->flen);
}

void m0__lane_on_result(m0__loop *l, const m0__msg *m) {
  int j = M0__ACTOR_INDEX(m->env.from) & 0xfff;
  if (M0__ACTOR_ROLE(m->env.from) != M0__ROLE_POOL || j >= l->npool) return;
  uint32_t count = 0;
  if (m->len >= 4) memcpy(&count, m->payload, 4);
  if (!(count & 0x80000000u)) l->batches[j].inflight = false; /* the batch's last part (actors/pool.c) */
  lane_result lr = {l, m};
  if (m0__result_each(m->payload, m->len, lane_on_answer, &lr) < 0)
    fprintf(stderr, "m0: loop.%d: a malformed result from pool.%d.%d\n", l->index, l->index, j);
}

int m0__lane_open(m0__loop *l) {
  l->pool = calloc((size_t)l->npool, sizeof *l->pool);
  l->batches = calloc((size_t)l->npool, sizeof *l->batches);
  if (!l->pool || !l->batches) return M0__ENOMEM;
  for (int j = 0; j < l->npool; j++) {
    const m0__actor_desc *d = m0__topology_find(l->topo, M0__ACTOR_ID(M0__ROLE_POOL, M0__POOL_INDEX(l->index, j)));
    m0__peer_direct(&l->pool[j], d->id, &l->pool_threads[j].inbox);
  }
  return 0;
}

void m0__lane_close(m0__loop *l) {
  for (int j = 0; l->pool && j < l->npool; j++) m0__peer_close(&l->pool[j]);
  for (int j = 0; l->batches && j < l->npool; j++) m0__batch_fini(&l->batches[j]);
  free(l->pool);
  free(l->batches);
  l->pool = NULL;
  l->batches = NULL;
}
