/* The loop actor's state: the struct the files that make up the loop kind
 * share (actors/loop.c, loop_http.c, loop_end.c, accept.c, lane.c, asks.c,
 * writer.c). It holds no function: each file's own functions are in its
 * header, and none of those includes actors/loop.h, so the loop's parts
 * include each other in one direction only (loop.c includes them all).
 * Everything in it is touched on the loop's thread, except what
 * actors/loop.h says of its set-up and the page lines' atomics. */
#ifndef M0_ACTORS_LOOP_STATE_H
#define M0_ACTORS_LOOP_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <uv.h>

#include "runtime/actor.h"
#include "runtime/handle.h"
#include "actors/pool.h"
#include "http/conn.h"
#include "transport/page.h"
#include "transport/topology.h"

typedef struct m0__loop_stats {
  uint64_t requests, accepted, errors_4xx, timeouts, frames, handed, adopted;
} m0__loop_stats;

#define M0__WRITTEN_WINDOW 4096

typedef struct m0__loop m0__loop;
struct m0__loop {
  m0__handle h; /* first: the loop is driven through it (runtime/handle.h) */
  /* from its m0__loop_config (m0__loop_init), before start */
  int index;
  const m0__topology *topo;
  const m0_app *app;
  m0__tracer *trace;
  m0__page *page;
  uint64_t generation; /* its process's (host/reload.h) */
  int listen_fd; /* the loop owns it from start */
  int listen_family; /* its SO_DOMAIN, kept past its close (m0__handoff_check) */
  int plain_fd;      /* the plain listener beside HTTPS (--plain-port), or -1: owned as listen_fd */
  uint32_t coord_id;    /* who it reports to: the coordinator of its process */
  const char *coord_url;
  const int *handoff;   /* prefork: [2*loops] datagram sockets (recv, send) */
  const char *run_dir;
  m0_ctx ctx;
  uint64_t recycle_at; /* prefork: requests after which it takes no more connections (0 = never) */
  bool share;          /* accept sharing with its siblings */
  uint64_t sweep_ms;   /* the period of its timeout sweep (and of an idle loop's beat), made by m0__loop_init */
  long fds_needed;     /* what this topology needs to start (config/checks.h), said when a start runs out */
  /* Why the loop could not start, kept as well as told (DIED): the
   * coordinator can see the thread's end before the message, and reads this
   * once the thread has ended. */
  char why[768];
  m0__http_config http_cfg; /* the server's settings: made into http on the loop's thread */
  /* The host's answers on the loop (m0__loop_config): /metrics (NULL: none)
   * and m0_respond_graph; reached through the loop's ops (actors/loop_http.c). */
  void (*host_metrics)(struct m0__loop *l, m0_response *res);
  char *(*host_graph)(struct m0__loop *l, const char *records_of);
  void (*host_swept)(struct m0__loop *l); /* m0__loop_config's swept and host */
  const void *host;
  m0__http http;
  /* the loop's own */
  uv_loop_t uv;
  uv_poll_t listener;
  uv_poll_t plain_listener; /* polled with listener when plain_fd >= 0 */
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
   * (runtime/admit.h). Under ipc the loop's own mailbox is that address. */
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
  struct m0__service **services; /* the application's actors (service/service.h): m0__loop_actors */
  int nservices;
  struct m0__asks *asks;         /* requests waiting on an actor or a deferred view (actors/asks.h) */
  void *state;
  bool listening, polling, stopping, finished;
  bool grace_over; /* stopping: the drain's fresh grace has passed (m0__loop_maybe_finish) */
  uint64_t grace_at; /* stopping: when that grace ends (the loop's ms) */
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
};

/* Line i of the shared page (the loop's own is line l->index). */
static inline m0__loop_line *m0__loop_line_at(const m0__loop *l, int i) { return &l->page->lines[i]; }

#endif
