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
 *   RESULT) in actors/lane.h; what http/ asks of the loop (its ops table) in
 *   actors/loop_http.h; its end in actors/loop_end.h. Their functions run on
 *   the loop's thread only; they share the state in actors/loop_state.h.
 */
#ifndef M0_ACTORS_LOOP_H
#define M0_ACTORS_LOOP_H

#include "actors/loop_state.h"

/* A loop's whole set-up, filled by its coordinator (which reads the
 * configuration: actors/ knows only these values). */
typedef struct m0__loop_config {
  int index;
  const m0__topology *topo;
  const m0_app *app;
  m0__tracer *trace;
  m0__page *page;
  uint64_t generation; /* its process's (host/reload.h) */
  int listen_fd;       /* the loop owns it from m0__loop_init */
  int plain_fd;        /* the plain listener beside HTTPS, or -1: the loop owns it too */
  uint32_t coord_id;   /* who it reports to: the coordinator of its process */
  const char *coord_url;
  const int *handoff;  /* prefork: [2*loops] datagram sockets (recv, send) */
  const char *run_dir; /* its outside publishers' socket is there */
  m0_ctx ctx;
  uint64_t recycle_at; /* prefork: requests after which it takes no more connections (0 = never) */
  bool share;          /* accept sharing with its siblings */
  long fds_needed;     /* what this topology needs to start (config/checks.h), said when a start runs out */
  int npool;           /* pool threads behind this loop */
  m0__pool_thread *pool_threads; /* [npool], m0__pool_init'ed: JOB and STOP go to their inboxes */
  /* The server's limits, timeouts and streams' bounds (app, state, worker
   * and the figures are the loop's own: set on its thread). */
  m0__http_config http;
  /* At most this long between two turns of an idle loop (its beat to a
   * supervisor's heartbeat), 0 = none: the sweep runs at least this often. */
  uint64_t beat_ms;
  /* The host's answers on the loop, in the host's files (actors/ cannot
   * call up): the metrics path's (NULL: no metrics path) and
   * m0_respond_graph's. */
  void (*metrics)(m0__loop *l, m0_response *res);
  char *(*graph)(m0__loop *l, const char *records_of);
  /* The host's at each sweep, on the loop (what the observer writes on the
   * page for every process to read; NULL: none), and what its answers are
   * about (host/observer.h: the application's declaration). */
  void (*swept)(m0__loop *l);
  const void *host;
} m0__loop_config;

/* Sets the loop up from cfg (copied), its inbox included, and ties it to
 * exits (runtime/handle.h); opening and starting it are m0__handle_open and
 * m0__handle_start. Before its thread starts. 0, or M0__ENOMEM (no inbox:
 * nothing to undo). */
int m0__loop_init(m0__loop *l, const m0__loop_config *cfg, m0__exits *exits);
/* The application's actors the loop sends to (service/service.h), opened
 * after the loops' inboxes: before its thread starts. */
void m0__loop_actors(m0__loop *l, struct m0__service **services, int n);

/* The loop kind (runtime/handle.h): open listens at the loop's mailbox (and,
 * on inproc or tcp, at its outside address in the run directory), run is its
 * thread (make, READY or FAILED, wait for GO, serve, drain, STOPPED),
 * hang_up closes its peers (siblings, pool, coordinator), release its
 * mailbox. */
extern const m0__actor_kind m0__loop_kind;

#endif
