/* Design notes
 * - The process (host/process.c) is set up first: run directory and shared
 *   page (made, or inherited by a worker), topology, listener, signals, the
 *   exit descriptor, the tracer. Then every actor of this process is opened
 *   (its mailbox listens) before any starts: siblings dial each other, and
 *   nobody dials a mailbox that is not open yet. Each builds its state on
 *   its own thread (make) and says READY or FAILED. A FAILED is exit 78
 *   with nothing served. When all are READY the barrier opens (GO) — in a
 *   worker, only once the supervisor says GO, so no worker serves before
 *   every worker could.
 * - What the coordinator hears: messages on its mailbox, the stop (a
 *   signal, or an embedded host's pipe) and the exit descriptor its actors'
 *   threads write when they end, all in one poll. A loop whose thread ended
 *   without saying STOPPED died: exit 1, named.
 * - The drain (host/coord_drain.c) has ONE bound (--drain-timeout-ms).
 */
#include "host/coordinator.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/admit.h"
#include "bus/bus.h"
#include "actors/loop.h"
#include "actors/pool.h"
#include "actors/producer.h"
#include "base/errors.h"
#include "host/appactors.h"
#include "config/checks.h"
#include "http/io.h"
#include "host/life.h"
#include "host/metrics.h"
#include "host/observer.h"
#include "host/observed.h"
#include "host/signals.h"
#include "host/coord.h"
#include "host/top.h"

/* Closes every actor when every thread has ended (the coordinator's own
 * peers first: every peer before any mailbox; then host/top.h's order);
 * otherwise only joins those that ended, since one is still inside the
 * application. Returns whether all were closed. */
static bool coord_close(coord *c) {
  if (m0__coord_all_exited(c)) {
    for (int i = 0; c->loop_peers && i < c->p->here; i++) m0__peer_close(&c->loop_peers[i]);
    m0__peer_close(&c->up);
  }
  if (!m0__top_close(&c->top, c->handles, c->nhandles)) return false;
  /* (The application's actors are closed: their reply threads put into the loops' inboxes.) */
  for (int i = 0; c->loops && i < c->p->here; i++) m0__inbox_fini(&c->loops[i].inbox);
  for (int k = 0; c->pools && k < c->p->here * c->npool; k++) m0__inbox_fini(&c->pools[k].inbox);
  return true;
}

/* READY to the supervisor. Its mailbox is dialed now, not at setup: the
 * supervisor opens it while this worker starts, and a dial made before it
 * was open would be retried at a cost (runtime/actor.c, m0__peer_open). */
static void coord_ready_up(coord *c) {
  if (!c->up.open) {
    const m0__actor_desc *sup = m0__topology_find(&c->proc->topo, M0__ACTOR_ID(M0__ROLE_COORD, 0));
    if (m0__peer_open(&c->up, sup->id, sup->url, 1000) != 0) {
      fprintf(stderr, "m0: worker %d cannot reach the supervisor at %s\n", c->p->first, sup->url);
      return;
    }
  }
  m0__send(&c->self, &c->up, M0__K_READY, 0, 0, NULL, 0); /* a lost one is said again (coord_barrier) */
}

/* A start that ends: the drain's waits see threads end as they should. */
static int coord_drain_starting(coord *c) {
  c->starting = false;
  return m0__coord_drain(c, m0__now_ms() + c->drain_ms);
}

/* A thread ended while starting: its reason said (its DIED may still be on
 * its way: the reason it kept is said now). */
static void coord_say_ended_starting(coord *c) {
  int i = m0__coord_dead(c);
  if (i < 0) fprintf(stderr, "m0: a %s thread ended while starting, before its READY\n", m0__coord_ended_starting(c)->kind->name);
  else if (c->loops[i].why[0]) fprintf(stderr, "m0: %s\n", c->loops[i].why);
  else fprintf(stderr, "m0: loop.%d ended while starting\n", c->p->first + i);
}

/* A message at the barrier: READY counted (a worker's last one goes up),
 * GO from the supervisor taken. 0 to go on, or the m0__err a FAILED or
 * DIED ends the start with (said). */
static int coord_barrier_take(coord *c, const m0__msg *m, int *ready, bool *go) {
  int kind = m->env.kind;
  if (kind == M0__K_READY && ++*ready == c->nhandles && c->proc->mode == M0__MODE_PREFORK) coord_ready_up(c);
  if (kind == M0__K_GO) *go = true;
  if (kind != M0__K_FAILED && kind != M0__K_DIED) return 0;
  fprintf(stderr, "m0: %.*s\n", (int)m->len, (const char *)m->payload);
  return kind == M0__K_FAILED ? M0__EMAKE : M0__EDIED;
}

/* GO to this process's loops and producer; a worker's publisher reaches the
 * other workers' loops too: their mailboxes are open once GO came (the
 * supervisor waited for every READY). 1, or M0__ETRANSPORT (said). */
static int coord_go(coord *c) {
  for (int i = 0; c->proc->mode == M0__MODE_PREFORK && i < c->proc->loops; i++)
    if ((i < c->p->first || i >= c->p->first + c->p->here) && m0__publisher_connect(&c->pub, i) != 0)
      fprintf(stderr, "m0: worker %d cannot reach loop %d\n", c->p->first, i);
  for (int i = 0; i < c->p->here; i++)
    if (m0__send(&c->self, &c->loop_peers[i], M0__K_GO, 0, 0, NULL, 0) != 0) {
      m0__say_cannot("cannot reach loop %d", c->p->first + i);
      return M0__ETRANSPORT;
    }
  if (c->has_producer) m0__send(&c->self, &c->prod_peer, M0__K_GO, 0, 0, NULL, 0);
  return 1;
}

/* Waits for every READY (the barrier) and, in a worker, the supervisor's
 * GO; then GO. 1 to go on serving, or 0 / a negative m0__err to end with. */
static int coord_barrier_wait(coord *c) {
  int want = c->nhandles, ready = 0, rc = 0;
  bool up = c->proc->mode == M0__MODE_PREFORK; /* a worker: READY up, GO down (coord_ready_up) */
  bool go = !up;
  while (rc == 0 && (ready < want || !go)) {
    m0__msg m;
    /* A worker says READY again every half second until GO comes: a message
     * to a process that just replaced a dead one can be lost in the
     * reconnect, and a worker that waits forever serves nothing. */
    bool again = up && ready == want;
    int w = m0__coord_wait(c, again ? m0__now_ms() + 500 : INT64_MAX, &m);
    if (w == 0 && again) coord_ready_up(c);
    if (w == 2) {
      fprintf(stderr, "m0: stopped while starting\n");
      return coord_drain_starting(c);
    }
    if (w == 3) {
      coord_say_ended_starting(c);
      rc = M0__EDIED;
    }
    if (w != 1) continue;
    rc = coord_barrier_take(c, &m, &ready, &go);
    m0__msg_free(&m);
  }
  if (rc == 0) rc = coord_go(c);
  if (rc < 0) coord_drain_starting(c);
  return rc;
}

static int coord_barrier(coord *c) {
  c->starting = true;
  int rc = coord_barrier_wait(c);
  c->starting = false;
  return rc;
}

/* The label of the process a loop is in: under prefork each worker answers
 * for its own process. */
static const char *coord_process(const m0__loop *l, char *out, size_t n) {
  if (l->handoff) snprintf(out, n, "worker.%d", l->index);
  else snprintf(out, n, "host");
  return out;
}

/* /metrics, answered on the loop from the shared page (host/metrics.c). */
static void coord_on_metrics(m0__loop *l, m0_response *res) {
  char process[24];
  m0__metrics_respond(l->page, coord_process(l, process, sizeof process), l->app, l->services, l->nservices, res);
}

/* m0_respond_graph, answered on the loop (host/observer.c). */
static char *coord_on_graph(m0__loop *l, const char *records_of) {
  char process[24];
  if (records_of) return m0__observer_records(records_of);
  return m0__observer_graph(l, coord_process(l, process, sizeof process));
}

/* What a loop takes from the configuration: the loop itself never reads it
 * (actors/ knows no configuration, only these values). */
static void coord_loop_settings(m0__loop_config *lc, const m0_config *c, int loops) {
  m0__http_config *h = &lc->http;
  h->lim = (m0__parse_limits){(size_t)M0__CFG(c, max_header_bytes), (size_t)M0__CFG(c, max_uri_bytes),
                              (size_t)M0__CFG(c, max_body_bytes)};
  h->header_timeout_ms = (uint64_t)M0__CFG(c, header_timeout_ms);
  h->body_timeout_ms = (uint64_t)M0__CFG(c, body_timeout_ms);
  h->keepalive_timeout_ms = (uint64_t)M0__CFG(c, keepalive_timeout_ms);
  /* A quarter of the drain's bound (at most the header timeout) for a
   * connection accepted just before the drain to send its request. */
  h->drain_fresh_ms = (uint64_t)M0__CFG(c, drain_timeout_ms) / 4;
  if (h->drain_fresh_ms > h->header_timeout_ms) h->drain_fresh_ms = h->header_timeout_ms;
  if (!h->drain_fresh_ms) h->drain_fresh_ms = 1;
  h->max_keepalive_requests = M0__CFG(c, max_keepalive_requests);
  h->access_log = M0__CFG(c, access_log) != 0;
  char err[256]; /* read by the trusted-proxies check before anything started: it cannot fail here */
  m0__proxies_parse(M0__CFGS(c, trusted_proxies), &h->proxies, err, sizeof err);
  h->heartbeat_ms = (uint64_t)M0__CFG(c, sse_heartbeat_ms);
  h->history_max = (uint32_t)M0__CFG(c, stream_history);
  h->history_bytes_max = (size_t)M0__CFG(c, stream_history_bytes);
  h->ws_max_message = (size_t)M0__CFG(c, ws_max_message);
  h->io = m0__io_mode_parse(M0__CFGS(c, io)); /* checked (config/checks.c) */
  if (M0__CFGS(c, metrics_path)[0]) {
    h->metrics_path = M0__CFGS(c, metrics_path);
    lc->metrics = coord_on_metrics;
  }
  lc->graph = coord_on_graph;
  lc->share = loops > 1 && M0__CFG(c, accept_share) != 0;
  /* Under the heartbeat (--worker-timeout-ms, 1000 or more) an idle loop
   * must turn, and so beat, well within the timeout (actors/loop.c). */
  lc->beat_ms = (uint64_t)M0__CFG(c, worker_timeout_ms) / 4;
}

/* This process's loops, each set up (its inbox made) and its mailbox open. */
static int coord_start_loops(coord *c, const m0_ctx *base) {
  m0__proc *p = c->p;
  m0__process *pr = c->proc;
  const m0_config *cfg = c->cfg;
  /* A worker's recycling count (--max-requests), drawn once: its loop stops
   * accepting at it and says LEAVING, and the coordinator drains it. */
  long max_req = pr->mode == M0__MODE_PREFORK ? M0__CFG(cfg, max_requests) : 0;
  if (max_req > 0 && M0__CFG(cfg, max_requests_jitter) > 0) {
    srand((unsigned)getpid() ^ (unsigned)m0__now_ms());
    max_req += rand() % (M0__CFG(cfg, max_requests_jitter) + 1);
  }
  m0__loop_config lc = {.topo = &pr->topo, .app = pr->app, .trace = pr->trace, .page = &pr->page,
                        .generation = pr->reload.generation, .coord_id = c->self.id, .coord_url = c->self.url,
                        .handoff = p->handoff, .run_dir = pr->sockdir, /* its outside publishers' socket is this generation's */
                        .ctx = *base, .recycle_at = (uint64_t)max_req, .npool = c->npool,
                        .fds_needed = m0__fds_needed(cfg, &pr->decl), /* said by a loop that runs out of them */
                        .swept = m0__observer_swept, .host = &pr->decl}; /* the observer's (host/observer.h) */
  coord_loop_settings(&lc, cfg, pr->loops);
  lc.http.tls = pr->tls;
  lc.http.https_port = pr->port; /* where the plain listener's redirects go */
  lc.http.http2 = M0__CFG(cfg, http2) != 0;
  for (int i = 0; i < p->here; i++) {
    int idx = p->first + i;
    m0__loop *l = &c->loops[i];
    lc.index = lc.ctx.worker = idx;
    lc.pool_threads = &c->pools[i * c->npool];
    lc.listen_fd = i == 0 ? pr->listen_fd : fcntl(pr->listen_fd, F_DUPFD_CLOEXEC, 0);
    lc.plain_fd = i == 0 || pr->plain_fd < 0 ? pr->plain_fd : fcntl(pr->plain_fd, F_DUPFD_CLOEXEC, 0);
    if (m0__loop_init(l, &lc, &pr->exits) != 0) {
      if (i > 0 && lc.listen_fd >= 0) close(lc.listen_fd);
      if (i > 0 && lc.plain_fd >= 0) close(lc.plain_fd);
      m0__say_cannot("cannot make loop %d's inbox", idx);
      return M0__ENOMEM;
    }
    c->handles[c->nhandles++] = &l->h;
    const m0__actor_desc *d = m0__topology_find(&pr->topo, M0__ACTOR_ID(M0__ROLE_LOOP, idx));
    if (m0__handle_open(&l->h) != 0 || m0__peer_open(&c->loop_peers[i], d->id, d->url, (int)c->drain_ms) != 0 ||
        m0__publisher_connect(&c->pub, idx) != 0) {
      m0__say_cannot("cannot open loop %d", idx);
      return M0__ETRANSPORT;
    }
  }
  return 0;
}

/* The pool threads behind this process's loops: their inboxes take JOB and
 * STOP from their loop, whose inbox takes their RESULTs (runtime/inbox.h). */
static int coord_start_pools(coord *c, const m0_ctx *base) {
  m0__process *pr = c->proc;
  m0__pool_config pc = {.topo = &pr->topo, .app = pr->app, .trace = pr->trace, .coord_id = c->self.id,
                        .coord_url = c->self.url, .ctx = *base};
  for (int i = 0; i < c->p->here; i++)
    for (int j = 0; j < c->npool; j++) {
      m0__pool_thread *t = &c->pools[i * c->npool + j];
      pc.loop = c->p->first + i;
      pc.index = j;
      pc.loop_inbox = &c->loops[i].inbox;
      if (m0__pool_init(t, &pc, &pr->exits) != 0) {
        m0__say_cannot("cannot make pool thread %d.%d's inbox", pc.loop, j);
        return M0__ENOMEM;
      }
      c->handles[c->nhandles++] = &t->h;
      if (m0__handle_open(&t->h) != 0) {
        m0__say_cannot("cannot start pool thread %d.%d", t->loop, j);
        return M0__ETRANSPORT;
      }
    }
  return 0;
}

/* The producer (p->producer, wanted here), its mailbox open and reached. */
static int coord_start_producer(coord *c, const m0_ctx *base, const m0__actor_desc *pd) {
  m0__top_producer(&c->top, c->p->producer, base); /* as the supervisor's (host/top.h) */
  c->handles[c->nhandles++] = &c->prod.h;
  if (m0__handle_open(&c->prod.h) != 0) {
    m0__say_cannot("cannot start the producer");
    return M0__ETRANSPORT;
  }
  if (m0__peer_open(&c->prod_peer, pd->id, pd->url, (int)c->drain_ms) != 0) {
    m0__say_cannot("cannot reach the producer's mailbox");
    return M0__ETRANSPORT;
  }
  return 0;
}

/* The publisher, and the bus's link when there is one. */
static int coord_start_publisher(coord *c, const m0__actor_desc *pd) {
  /* Every process that publishes has its link; the one that holds the
   * producer is the bridge (under prefork the supervisor, not a worker). */
  bool worker = c->proc->mode == M0__MODE_PREFORK;
  return m0__top_open_publisher(&c->top, worker ? c->self.id : pd->id, !worker);
}

static int coord_start(coord *c) {
  m0__proc *p = c->p;
  m0__process *pr = c->proc;
  const m0_config *cfg = c->cfg;
  c->loops = calloc((size_t)p->here, sizeof *c->loops);
  c->loop_peers = calloc((size_t)p->here, sizeof *c->loop_peers);
  c->loop_done = calloc((size_t)p->here, sizeof *c->loop_done);
  c->pools = calloc((size_t)(p->here * (c->npool ? c->npool : 1)), sizeof *c->pools);
  c->handles = calloc((size_t)(p->here * (1 + c->npool) + 1 + m0__app_actors_handles(&pr->decl)), sizeof *c->handles);
  if (!c->loops || !c->loop_peers || !c->loop_done || !c->pools || !c->handles) return M0__ENOMEM;
  /* A worker's coordinator is worker.i; the supervisor is the coordinator. */
  uint32_t me_id = pr->mode == M0__MODE_PREFORK ? M0__ACTOR_ID(M0__ROLE_WORKER, p->first)
                                                 : M0__ACTOR_ID(M0__ROLE_COORD, 0);
  if (m0__top_open_self(&c->top, me_id, "coordinator") != 0) return M0__ETRANSPORT;
  m0_ctx base = {.worker = 0, .workers = pr->loops, .thread = -1, .threaded = pr->mode == M0__MODE_THREADS,
                 .capacity = (int)M0__CFG(cfg, max_connections), .page = pr->page.app,
                 .page_slots = pr->page.head->app_slots, .config = cfg, .publisher = &c->pub};
  const m0__actor_desc *pd = m0__topology_find(&pr->topo, M0__ACTOR_ID(M0__ROLE_PRODUCER, 0));
  int rv = coord_start_publisher(c, pd);
  if (rv != 0) return rv;
  c->has_producer = p->producer && (!p->producer->wanted || p->producer->wanted(&base));
  /* Each loop and its pool threads, always in one process, talk through
   * direct inboxes (runtime/inbox.h), made before any of them starts. A
   * loop's inbox also takes its actors' replies and deferred answers. */
  if ((rv = coord_start_loops(c, &base)) != 0) return rv;
  rv = m0__app_actors_open(&c->aa, pr, &pr->decl, &c->loops[0].inbox, sizeof *c->loops, p->here, p->first,
                           c->self.id, c->self.url, &c->pub, c->handles, &c->nhandles);
  if (rv != 0) return rv;
  for (int i = 0; i < p->here; i++) m0__loop_actors(&c->loops[i], c->aa.svc_ptrs, c->aa.n);
  if ((rv = coord_start_pools(c, &base)) != 0) return rv;
  if (c->has_producer && (rv = coord_start_producer(c, &base, pd)) != 0) return rv;
  /* Every mailbox here is open before any thread starts. */
  for (int k = 0; k < c->nhandles; k++)
    if (m0__handle_start(c->handles[k]) != 0) {
      m0__say_cannot("cannot start a %s thread", c->handles[k]->kind->name);
      return M0__ENOMEM;
    }
  return 0;
}

static int coord_drain_fn(void *c, int64_t bound) { return m0__coord_drain(c, bound); }

static int coord_serve(coord *c) {
  m0__proc *p = c->p;
  int rc;
  if ((rc = m0__process_setup(c->proc)) != 0) return rc;
  m0__process_trace(c->proc, c->proc->inherit_dir ? M0__TRACE_WORKER + (uint32_t)p->first : M0__TRACE_HOST);
  if ((rc = coord_start(c)) != 0) {
    m0__coord_drain(c, m0__now_ms() + c->drain_ms);
    return rc;
  }
  if ((rc = coord_barrier(c)) <= 0) return rc;
  if (c->bus_open) m0__bus_start(&c->bus); /* the publisher reaches every loop now */
  m0__process_banner(c->proc, p->first, p->here);
  c->serving = true;
  if (p->on_ready)
    p->on_ready(p->ready_arg, c->proc->port, c->proc->rundir.path, &c->pub, c->aa.post_made ? &c->aa.post : NULL);
  /* Serving: until a stop, a loop that dies, or (a recycled worker) its
   * loop leaving at its request count. */
  for (;;) {
    m0__msg m;
    int w = m0__coord_wait(c, INT64_MAX, &m);
    if (w == 2) break;
    if (w == 3) {
      fprintf(stderr, "m0: loop.%d ended while serving\n", p->first + m0__coord_dead(c));
      m0__coord_drain(c, m0__now_ms() + c->drain_ms);
      return M0__EDIED;
    }
    if (w != 1) continue;
    int kind = m.env.kind;
    if (kind == M0__K_DIED) fprintf(stderr, "m0: %.*s\n", (int)m.len, (const char *)m.payload);
    if (kind == M0__K_TRACE) m0__trace_on_control(c->proc->trace, c->self.id, &m); /* the loops' tracer too */
    if (kind == M0__K_STOPPED) m0__coord_unexpected(c, &m); /* serving: no one was told to stop */
    m0__msg_free(&m);
    if (kind == M0__K_DIED) {
      m0__coord_drain(c, m0__now_ms() + c->drain_ms);
      return M0__EDIED;
    }
    if (kind == M0__K_LEAVING) {
      fprintf(stderr, "m0: worker %d recycles after %llu requests\n", p->first,
              (unsigned long long)c->loops[0].recycle_at);
      c->recycling = true;
      break; /* the drain, then exit 0: the supervisor starts a fresh one */
    }
  }
  return m0__top_serve_end(&c->top, c->proc->mode == M0__MODE_PREFORK ? "worker draining" : "host draining",
                           coord_drain_fn, c);
}

int m0__coord_run(m0__proc *p) {
  coord *c = calloc(1, sizeof *c);
  if (!c) return M0__ENOMEM;
  c->p = p;
  c->proc = &p->proc;
  c->cfg = p->proc.cfg;
  c->drain_ms = M0__CFG(c->cfg, drain_timeout_ms);
  c->npool = p->proc.pool;
  int rc = coord_serve(c);
  m0__coord_ended(c); /* (a start that failed: nothing was drained, the same) */
  /* Threads that said STOPPED are on their way out: wait for their ends
   * within what is left of the drain's bound (it was a second more: the
   * bound is the bound), unless one was named stuck (it will not come out).
   * A start that failed before any drain allows them the bound. */
  if (!c->stuck) m0__coord_wait_exits(c, c->deadline ? c->deadline : m0__now_ms() + c->drain_ms);
  m0__top_guard_arm(&c->top, rc);
  bool clean = coord_close(c);
  m0__top_end(&c->top, clean, rc); /* not clean and not embedded: exits here */
  if (!clean) { /* embedded: the stuck thread may still touch its loop; that memory is left to it */
    free(c);
    return rc ? rc : M0__ESTUCK;
  }
  free(c->loops);
  free(c->loop_peers);
  free(c->pools);
  free(c->loop_done);
  free(c->handles);
  free(c);
  return rc;
}
