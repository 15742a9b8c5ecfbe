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
 * - Accept: the listener is a uv_poll on the (shared or dup'd) listening
 *   descriptor and the loop calls accept4 itself, so an accepted socket is a
 *   plain descriptor it may keep or hand to a sibling. Past max-connections
 *   the loop stops polling the listener: new connections wait in the backlog.
 * - Accept sharing: the winner of an accept hands the connection to the
 *   least-loaded sibling (open + pending on the shared page; ties stay; a
 *   rotating start; a sibling leaving or stuck in one pass > 2 ms is skipped).
 *   Within one process the descriptor is an integer in a HANDOFF message;
 *   across processes it travels by SCM_RIGHTS (transport/handoff.h). On any
 *   failure the acceptor keeps the connection: nothing is dropped.
 */
#ifndef M0_ACTORS_LOOP_H
#define M0_ACTORS_LOOP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <uv.h>

#include "actors/actor.h"
#include "host/config.h"
#include "actors/pool.h"
#include "http/conn.h"
#include "transport/page.h"
#include "transport/topology.h"

typedef struct m0__loop_stats {
  uint64_t requests, accepted, errors_4xx, timeouts, frames, handed, adopted;
} m0__loop_stats;

typedef struct m0__loop {
  /* set by the coordinator before start */
  int index;
  const m0__topology *topo;
  const m0_config *cfg;
  const m0_app *app;
  m0__tracer *trace;
  m0__page *page;
  int listen_fd; /* the loop owns it from start */
  uint32_t coord_id;    /* who it reports to: the coordinator of its process */
  const char *coord_url;
  const int *handoff;   /* prefork: [2*loops] datagram sockets (recv, send) */
  const char *run_dir;
  m0_ctx ctx;
  uint64_t recycle_at; /* prefork: requests after which it takes no more connections (0 = never) */
  /* the loop's own */
  pthread_t thread;
  bool started;
  atomic_bool exited;
  atomic_bool said_stopped; /* set before STOPPED or FAILED is sent */
  atomic_bool failed;       /* its make refused: no STOPPED will ever come */
  uv_loop_t uv;
  uv_poll_t listener;
  uv_poll_t mail;
  uv_poll_t handin; /* prefork: connections handed in by SCM_RIGHTS */
  uv_check_t pass_begin;
  uv_prepare_t pass_end;
  uv_timer_t sweep;
  m0__actor self;
  m0__peer coord;
  m0__peer *siblings; /* [nloops], own index unused */
  int nloops;
  bool share;
  unsigned rotate;
  uint64_t handed, adopted;
  int npool;          /* pool threads behind this loop */
  m0__pool_thread *pool_threads; /* [npool]: JOB and STOP go to their inboxes */
  m0__inbox inbox;    /* their RESULTs come here, not over nng (ready when npool > 0) */
  uv_poll_t lane;     /* the inbox's eventfd */
  m0__peer *pool;     /* [npool] */
  m0__batch *batches; /* [npool]: the batch being filled for each */
  uint64_t queued, answered;
  m0__http http;
  void *state;
  bool listening, polling, stopping, finished;
  bool recycling; /* reached recycle_at: accepts nothing more, waits for STOP */
  bool fd_starved; /* an accept ran out of descriptors: the listener waits for a close or the next sweep */
  uint64_t frames;
  uint64_t first_id; /* the shared counter when this loop began serving */
} m0__loop;

/* Opens the loop's mailbox, before any thread starts, so that whoever
 * dials it (the coordinator, sibling loops, the publisher) finds it open.
 * Returns 0 or M0__ETRANSPORT (reported on stderr). */
int m0__loop_open(m0__loop *l);
/* Starts the loop's thread (its mailbox open). It builds the handler, reports READY or FAILED,
 * and waits for GO. Returns 0 or M0__ENOMEM (no thread). */
int m0__loop_start(m0__loop *l);
/* After the join (see loop.c on why not before): hang_up closes the loop's
 * peers, release its mailbox. Teardown hangs up every actor before it
 * releases any: a peer whose mailbox closed first would redial it until
 * closed itself (actors/actor.c, m0__peer_open). The pool's and the
 * producer's pairs work the same way. */
void m0__loop_hang_up(m0__loop *l);
void m0__loop_release(m0__loop *l);

#endif
