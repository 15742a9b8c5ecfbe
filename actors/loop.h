/* The loop actor: one libuv loop on its own thread, owning the listener (a
 * dup in threads mode), its connections and its handler state. The hot path
 * (accept, parse, view, write) runs here and never crosses an nng hop; the
 * mailbox carries control (GO, STOP) and the bus (FRAME).
 *
 * Design notes
 * - The mailbox wakes the loop through nng's receive descriptor under
 *   uv_poll; every message waiting is taken in one callback.
 * - The barrier: the listener is not polled until GO arrives, and GO is sent
 *   only when every loop (and the producer) reported READY.
 * - The drain: STOP closes the listener, closes idle connections, lets every
 *   request in flight be answered and written, then reports STOPPED; the
 *   coordinator owns the bound.
 * - Accept and accept sharing (the listener, the hand-off to a sibling) are
 *   in actors/accept.h; the loop's side of the pool lane (batches, JOB,
 *   RESULT) in actors/lane.h. Their functions run on the loop's thread only.
 */
#ifndef M0_ACTORS_LOOP_H
#define M0_ACTORS_LOOP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <uv.h>

#include "actors/actor.h"
#include "actors/handle.h"
#include "actors/pool.h"
#include "http/conn.h"
#include "transport/page.h"
#include "transport/topology.h"

typedef struct m0__loop_stats {
  uint64_t requests, accepted, errors_4xx, timeouts, frames, handed, adopted;
} m0__loop_stats;

#define M0__WRITTEN_WINDOW 4096

typedef struct m0__loop {
  m0__handle h; /* first: the loop is driven through it (actors/handle.h) */
  /* set by the coordinator before start */
  int index;
  const m0__topology *topo;
  const m0_app *app;
  m0__tracer *trace;
  m0__page *page;
  uint64_t generation; /* its process's (host/reload.h) */
  int listen_fd; /* the loop owns it from start */
  int listen_family; /* its SO_DOMAIN, kept past its close (m0__handoff_check) */
  uint32_t coord_id;    /* who it reports to: the coordinator of its process */
  const char *coord_url;
  const int *handoff;   /* prefork: [2*loops] datagram sockets (recv, send) */
  const char *run_dir;
  m0_ctx ctx;
  uint64_t recycle_at; /* prefork: requests after which it takes no more connections (0 = never) */
  bool share;          /* accept sharing with its siblings */
  uint64_t sweep_ms;   /* the period of its timeout sweep (and of an idle loop's beat) */
  long fds_needed;     /* what this topology needs to start (host/checks.h), said when a start runs out */
  /* Why the loop could not start, kept as well as told (DIED): the
   * coordinator can see the thread's end before the message, and reads this
   * once the thread has ended. */
  char why[768];
  m0__http http;       /* its settings (limits, timeouts, access log, metrics path) filled in before start */
  /* the loop's own */
  uv_loop_t uv;
  uv_poll_t listener;
  uv_poll_t mail;
  uv_poll_t handin; /* prefork: connections handed in by SCM_RIGHTS */
  uv_check_t pass_begin;
  uv_prepare_t pass_end;
  uv_timer_t sweep;
  /* Numbered frames held until the ids below them came (http/order.h),
   * released at each pass's end and when order_due says. */
  struct m0__order *order;
  uv_timer_t order_due;
  m0__actor self;
  /* Under inproc and tcp topologies, the loop's address for publishers on
   * this machine (m0pub): loop.i.sock in the run directory, a mailbox of its
   * own so that what comes through it is known to come from this machine
   * (actors/admit.h). Under ipc the loop's own mailbox is that address. */
  m0__actor outside;
  uv_poll_t outside_mail;
  m0__peer coord;
  m0__peer *siblings; /* [nloops], own index unused */
  int nloops;
  unsigned rotate;
  uint64_t handed, adopted;
  int npool;          /* pool threads behind this loop */
  m0__pool_thread *pool_threads; /* [npool]: JOB and STOP go to their inboxes */
  m0__inbox inbox;    /* their RESULTs come here, not over nng (ready when npool > 0) */
  uv_poll_t lane;     /* the inbox's eventfd */
  m0__peer *pool;     /* [npool] */
  m0__batch *batches; /* [npool]: the batch being filled for each */
  uint64_t queued, answered;
  struct m0__service **services; /* the application's actors (actors/service.h), set by the coordinator */
  int nservices;
  struct m0__asks *asks;         /* requests waiting on an actor or a deferred view (actors/asks.h) */
  void *state;
  bool listening, polling, stopping, finished;
  bool grace_over; /* stopping: the drain's fresh grace has passed (m0__loop_maybe_finish) */
  bool recycling; /* reached recycle_at: accepts nothing more, waits for STOP */
  atomic_bool told_stop; /* set by the coordinator just before it sends STOP (actors/accept.c) */
  bool fd_starved; /* an accept ran out of descriptors: the listener waits for a close or the next sweep */
  uint64_t frames;
  uint64_t first_id; /* the shared counter when this loop began serving */
  uint64_t born_id;  /* the shared counter when it said READY: a frame at or below it was a predecessor's */
  uint64_t last_id;  /* the highest frame id written to this loop's streams */
  uint64_t hole_seen; /* the page's hole_until this loop told its streams of (actors/loop.c, loop_hole) */
  /* Which of the ids in (last_id - M0__WRITTEN_WINDOW, last_id] were written:
   * a frame is never written twice (actors/loop.c, loop_on_frame). */
  uint64_t written[M0__WRITTEN_WINDOW / 64];
} m0__loop;

/* Line i of the shared page (the loop's own is line l->index). */
static inline m0__loop_line *m0__loop_line_at(const m0__loop *l, int i) { return &l->page->lines[i]; }

/* The loop kind (actors/handle.h): open listens at the loop's mailbox (and,
 * on inproc or tcp, at its outside address in the run directory), run is its
 * thread (make, READY or FAILED, wait for GO, serve, drain, STOPPED),
 * hang_up closes its peers (siblings, pool, coordinator), release its
 * mailbox. */
extern const m0__actor_kind m0__loop_kind;

/* Stopping: finishes the loop once its connections are closed and no
 * hand-off is on its way to it (a sibling chose it just before it was
 * leaving; finished, it would close that connection unanswered). One that
 * never comes (its sender died between the count and the send) holds it
 * only until the drain's fresh grace has passed. */
void m0__loop_maybe_finish(m0__loop *l);

#endif
