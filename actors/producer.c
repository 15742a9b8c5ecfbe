#include "actors/producer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/errors.h"
#include "transport/page.h"

/* Design notes (ids across a reload)
 * - Two generations serve side by side for a moment: the next one's loops
 *   and producer start while the old one's still run. Were both producers
 *   to step, each would take ids from the one counter for frames that only
 *   its own generation's loops get: a client on the new generation would
 *   miss the old one's ids and never be told (a hole in the ids is no loss
 *   in itself: ids are global across channels).
 * - So the ids are held by one generation's producer at a time (the page's
 *   id_lease): taken by a compare-and-swap from 0 after GO, let go when the
 *   producer stops (its drain's STOP, a failed step). The next generation's
 *   producer waits for it, answering STOP, at most lease_ms (the drain's
 *   bound) plus a second; past that it takes the ids anyway and says so.
 * - When it takes them from a predecessor, the ids up to the counter then
 *   (hole_until) were numbered for the old generation's loops, after this
 *   generation's loops began: they tell their streams that frames may be
 *   missing up to there and take a resume below it as a gap
 *   (actors/loop.c, loop_hole). hole_until is written before hole_gen, and
 *   read after it.
 */
#define PRODUCER_SLICE_MS 50
#define PRODUCER_LEASE_POLL_MS 5

static int64_t producer_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Waits for a message up to ms; returns its kind, or 0 when none came. */
static int producer_wait(m0__actor *mbox, int64_t ms) {
  if (ms < 0) ms = 0;
  nng_socket_set_ms(mbox->mailbox, NNG_OPT_RECVTIMEO, (nng_duration)ms);
  m0__msg m;
  if (m0__recv(mbox, &m, ms == 0 ? M0__RECV_NOWAIT : M0__RECV_WAIT) != 0) return 0;
  int kind = m.env.kind;
  m0__msg_free(&m);
  return kind;
}

/* The hold on the ids, once no other generation's producer has it.
 * false: STOP came first. */
static bool producer_take_ids(m0__producer_run *r) {
  m0__host_figures *hf = r->cfg.pub->page->figures;
  int64_t until = producer_now_ns() / 1000000 + r->cfg.lease_ms + 1000;
  uint64_t held = 0;
  while (!atomic_compare_exchange_strong(&hf->id_lease, &held, r->cfg.generation) && held != r->cfg.generation) {
    if (producer_now_ns() / 1000000 >= until) {
      fprintf(stderr, "m0: the producer of generation %llu did not let the ids go within %ld ms; generation "
                      "%llu's takes them\n", (unsigned long long)held, r->cfg.lease_ms + 1000,
              (unsigned long long)r->cfg.generation);
      atomic_store(&hf->id_lease, r->cfg.generation);
      break;
    }
    if (producer_wait(&r->self, PRODUCER_LEASE_POLL_MS) == M0__K_STOP) return false;
    held = 0;
  }
  if (r->cfg.generation > 1) {
    atomic_store(&hf->hole_until, atomic_load(&r->cfg.pub->page->head->event_id));
    atomic_store_explicit(&hf->hole_gen, r->cfg.generation, memory_order_release);
  }
  return true;
}

static void producer_let_go(m0__producer_run *r) {
  uint64_t mine = r->cfg.generation;
  atomic_compare_exchange_strong(&r->cfg.pub->page->figures->id_lease, &mine, 0);
}

static void producer_run(m0__handle *h) {
  m0__producer_run *r = (m0__producer_run *)h;
  m0_publisher *pub = r->cfg.pub;
  m0__peer *coord = &r->coord;
  m0__actor *self = &r->self;
  char err[512] = "";
  if (m0__peer_open(coord, r->cfg.coord_id, r->cfg.coord_url, 1000) != 0) {
    fprintf(stderr, "m0: the producer cannot reach its coordinator at %s\n", r->cfg.coord_url);
    return;
  }
  void *state = r->cfg.def->make ? r->cfg.def->make(&r->cfg.ctx, err, sizeof err) : NULL;
  if (r->cfg.def->make && !state) {
    if (!err[0]) snprintf(err, sizeof err, "the producer's make failed");
    atomic_store(&r->h.failed, true);
    m0__tell(self, coord, M0__K_FAILED, err, strlen(err));
    goto out;
  }
  m0__tell(self, coord, M0__K_READY, NULL, 0);
  int kind;
  while ((kind = producer_wait(self, 1000)) != M0__K_GO)
    if (kind == M0__K_STOP) goto done;
  if (!producer_take_ids(r)) goto done;
  int64_t next = producer_now_ns();
  for (;;) {
    int64_t now = producer_now_ns();
    if (now < next) {
      int64_t ms = (next - now + 999999) / 1000000;
      kind = producer_wait(self, ms < PRODUCER_SLICE_MS ? ms : PRODUCER_SLICE_MS);
      if (kind == M0__K_STOP) break;
      continue;
    }
    atomic_store(&r->h.in_app, true);
    int64_t wait = r->cfg.def->step(state, pub);
    atomic_store(&r->h.in_app, false);
    if (wait < 0) {
      fprintf(stderr, "m0: producer: step failed (returned %lld); the producer stops, serving goes on\n",
              (long long)wait);
      producer_let_go(r);
      while (producer_wait(self, PRODUCER_SLICE_MS) != M0__K_STOP) {}
      break;
    }
    /* Fixed rate from the schedule; a late step moves the schedule to now. */
    next += wait;
    now = producer_now_ns();
    if (next < now) next = now;
    if (producer_wait(self, 0) == M0__K_STOP) break;
  }
done:
  producer_let_go(r); /* before STOPPED: the drain goes on knowing the next generation may number */
  if (r->cfg.def->free) r->cfg.def->free(state);
  m0__tell(self, coord, M0__K_STOPPED, NULL, 0);
out:;
}

static void producer_hang_up(m0__handle *h) { m0__peer_close(&((m0__producer_run *)h)->coord); }

static void producer_release(m0__handle *h) { m0__actor_close(&((m0__producer_run *)h)->self); }

/* The mailbox opens before the thread, so the coordinator dials it once
 * this returns (runtime/actor.c, m0__peer_open). */
static int producer_open(m0__handle *h) {
  m0__producer_run *r = (m0__producer_run *)h;
  if (m0__actor_open(&r->self, M0__ACTOR_ID(M0__ROLE_PRODUCER, 0), r->cfg.url, r->cfg.pub->self.trace) != 0) {
    fprintf(stderr, "m0: the producer cannot open its mailbox at %s\n", r->cfg.url);
    return M0__ETRANSPORT;
  }
  return 0;
}

const m0__actor_kind m0__producer_kind = {"producer", producer_open, producer_run, producer_hang_up, producer_release};

void m0__producer_init(m0__producer_run *r, const m0__producer_config *cfg, m0__exits *exits) {
  m0__handle_init(&r->h, &m0__producer_kind, exits);
  r->cfg = *cfg;
}
