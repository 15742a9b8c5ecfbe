#include "actors/producer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/errors.h"

#define PRODUCER_SLICE_MS 50

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

static void producer_run(m0__handle *h) {
  m0__producer_run *r = (m0__producer_run *)h;
  m0_publisher *pub = r->pub;
  m0__peer *coord = &r->coord;
  m0__actor *self = &r->self;
  char err[512] = "";
  if (m0__peer_open(coord, r->coord_id, r->coord_url, 1000) != 0) {
    fprintf(stderr, "m0: the producer cannot reach its coordinator at %s\n", r->coord_url);
    return;
  }
  void *state = r->def->make ? r->def->make(&r->ctx, err, sizeof err) : NULL;
  if (r->def->make && !state) {
    if (!err[0]) snprintf(err, sizeof err, "the producer's make failed");
    atomic_store(&r->h.failed, true);
    m0__tell(self, coord, M0__K_FAILED, err, strlen(err));
    goto out;
  }
  m0__tell(self, coord, M0__K_READY, NULL, 0);
  int kind;
  while ((kind = producer_wait(self, 1000)) != M0__K_GO)
    if (kind == M0__K_STOP) goto done;
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
    int64_t wait = r->def->step(state, pub);
    atomic_store(&r->h.in_app, false);
    if (wait < 0) {
      fprintf(stderr, "m0: producer: step failed (returned %lld); the producer stops, serving goes on\n",
              (long long)wait);
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
  if (r->def->free) r->def->free(state);
  m0__tell(self, coord, M0__K_STOPPED, NULL, 0);
out:;
}

static void producer_hang_up(m0__handle *h) { m0__peer_close(&((m0__producer_run *)h)->coord); }

static void producer_release(m0__handle *h) { m0__actor_close(&((m0__producer_run *)h)->self); }

/* The mailbox opens before the thread, so the coordinator dials it once
 * this returns (actors/actor.c, m0__peer_open). */
static int producer_open(m0__handle *h) {
  m0__producer_run *r = (m0__producer_run *)h;
  if (m0__actor_open(&r->self, M0__ACTOR_ID(M0__ROLE_PRODUCER, 0), r->url, r->pub->self.trace) != 0) {
    fprintf(stderr, "m0: the producer cannot open its mailbox at %s\n", r->url);
    return M0__ETRANSPORT;
  }
  return 0;
}

const m0__actor_kind m0__producer_kind = {"producer", producer_open, producer_run, producer_hang_up, producer_release};
