/* Design notes
 * - Order: run directory and shared page (made, or inherited by a worker),
 *   listener (bound, or inherited), topology, mailbox; then every actor of
 *   this process starts and builds its state on its own thread (make) and
 *   says READY or FAILED. A FAILED is exit 78 with nothing served. When all
 *   are READY the barrier opens (GO) — in a worker, only once the supervisor
 *   says GO, so no worker serves before every worker could.
 * - Signals become a pipe the coordinator polls beside its mailbox.
 * - The drain has ONE bound (--drain-timeout-ms) from the first signal,
 *   shared by the loops, their pools and the producer. Whoever is still
 *   inside the application after it is named and the process exits 1 without
 *   waiting for it.
 * - A loop thread that ends without saying STOPPED died: exit 1, named.
 */
#include "actors/coordinator.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "actors/actor.h"
#include "base/errors.h"
#include "actors/loop.h"
#include "actors/pool.h"
#include "actors/producer.h"
#include "host/signals.h"
#include "actors/trace.h"
#include "transport/listen.h"
#include "transport/page.h"
#include "transport/rundir.h"
#include "transport/systemd.h"

typedef struct coord {
  const m0__proc *p;
  const m0_config *cfg;
  long drain_ms;
  int sigfd;
  m0__topology topo;
  m0__rundir rundir;
  m0__page page;
  m0__tracer *trace;
  m0__actor self;
  m0__peer up; /* a worker's supervisor */
  m0__loop *loops; /* [here] */
  m0__peer *loop_peers;
  int npool;
  m0__pool_thread *pools; /* [here * npool] */
  m0_publisher pub;
  bool pub_open;
  bool has_producer;
  m0__producer_run prod;
  m0__peer prod_peer;
  int listen_fd, port;
  bool *loop_done; /* said STOPPED (or died), counted */
  bool prod_done;
  bool stuck; /* someone was named for missing the drain's bound */
} coord;

static int64_t coord_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A loop whose thread ended without saying STOPPED died. */
static int coord_dead(coord *c) {
  for (int i = 0; i < c->p->here; i++)
    if (c->loops[i].started && atomic_load(&c->loops[i].exited) && !atomic_load(&c->loops[i].said_stopped))
      return i;
  return -1;
}

/* Waits up to deadline for a message or a signal. Returns 1 with a message
 * in m, 2 on a signal, 3 when a loop died, 0 on timeout. */
static int coord_wait(coord *c, int64_t deadline, m0__msg *m) {
  int fd;
  m0__actor_recv_fd(&c->self, &fd);
  for (;;) {
    int rv = m0__recv(&c->self, m, M0__RECV_NOWAIT);
    if (rv == 0) return 1;
    if (rv == M0__EBADMSG) {
      fprintf(stderr, "m0: coordinator: dropped a malformed message\n");
      continue;
    }
    if (coord_dead(c) >= 0) return 3;
    struct pollfd pf[2] = {{c->sigfd, POLLIN, 0}, {fd, POLLIN, 0}};
    int64_t left = deadline - coord_now_ms();
    if (left <= 0) return 0;
    /* Wake at least every 100 ms to notice a thread that ended silently. */
    if (poll(pf, 2, left > 100 ? 100 : (int)left) < 0 && errno != EINTR) return 0;
    if (pf[0].revents & POLLIN) {
      if (c->p->stop_fd < 0 && (m0__signals_take() & M0__SIG_STOP)) return 2;
      char b;
      if (c->p->stop_fd >= 0 && read(c->p->stop_fd, &b, 1) >= 0) return 2;
    }
  }
}

static void coord_log_stats(int idx, const m0__msg *m) {
  if (m->len != sizeof(m0__loop_stats)) return;
  m0__loop_stats st;
  memcpy(&st, m->payload, sizeof st);
  fprintf(stderr,
          "m0: loop.%d drained: %llu requests, %llu connections, %llu refused, %llu timed out, "
          "%llu handed off, %llu taken over\n",
          idx, (unsigned long long)st.requests, (unsigned long long)st.accepted, (unsigned long long)st.errors_4xx,
          (unsigned long long)st.timeouts, (unsigned long long)st.handed, (unsigned long long)st.adopted);
}

/* STOP to every loop and the producer; every STOPPED within the bound; then
 * the pool threads' exits within what is left of it. Returns 0, or 1 when
 * someone did not finish (named on stderr). */
static int coord_drain(coord *c, int64_t deadline) {
  const m0__proc *p = c->p;
  int waiting = 0;
  for (int i = 0; i < p->here; i++) {
    if (c->loop_done[i]) continue;
    if (!atomic_load(&c->loops[i].failed) && !atomic_load(&c->loops[i].exited) && m0__send(&c->self, &c->loop_peers[i], M0__K_STOP, 0, 0, NULL, 0) == 0)
      waiting++;
    else c->loop_done[i] = true;
  }
  if (c->has_producer && !c->prod_done) {
    if (!atomic_load(&c->prod.failed) && !atomic_load(&c->prod.exited) && m0__send(&c->self, &c->prod_peer, M0__K_STOP, 0, 0, NULL, 0) == 0)
      waiting++;
    else c->prod_done = true;
  }
  while (waiting > 0) {
    m0__msg m;
    int w = coord_wait(c, deadline, &m);
    if (w == 0) break;
    if (w == 2) {
      fprintf(stderr, "m0: already draining; the bound is %ld ms\n", c->drain_ms);
      continue;
    }
    if (w == 3) { /* ended without STOPPED: nothing more will come from it */
      int i = coord_dead(c);
      fprintf(stderr, "m0: loop.%d ended during the drain\n", p->first + i);
      if (!c->loop_done[i]) waiting--;
      c->loop_done[i] = true;
      atomic_store(&c->loops[i].said_stopped, true); /* counted once */
      continue;
    }
    int role = M0__ACTOR_ROLE(m.env.from), idx = M0__ACTOR_INDEX(m.env.from) - p->first;
    /* A FAILED now is a make that was still running when the drain began:
     * that actor has nothing to drain and will say nothing more. */
    bool over = m.env.kind == M0__K_STOPPED || m.env.kind == M0__K_FAILED;
    if (over && role == M0__ROLE_LOOP && idx >= 0 && idx < p->here && !c->loop_done[idx]) {
      c->loop_done[idx] = true;
      waiting--;
      if (m.env.kind == M0__K_STOPPED) coord_log_stats(p->first + idx, &m);
    } else if (over && role == M0__ROLE_PRODUCER && !c->prod_done) {
      c->prod_done = true;
      waiting--;
    }
    m0__msg_free(&m);
  }
  int rc = 0;
  for (int i = 0; i < p->here; i++)
    if (!c->loop_done[i]) {
      fprintf(stderr, "m0: loop.%d did not finish its drain within %ld ms; exiting anyway\n", p->first + i,
              c->drain_ms);
      rc = 1;
    }
  if (c->has_producer && !c->prod_done) {
    fprintf(stderr, "m0: the producer did not stop within %ld ms%s; exiting anyway\n", c->drain_ms,
            atomic_load(&c->prod.in_step) ? " (it is inside its step)" : "");
    rc = 1;
  }
  /* The pools: their loops sent them STOP on the way out. */
  for (int k = 0; k < p->here * c->npool; k++) {
    m0__pool_thread *t = &c->pools[k];
    while (t->started && !atomic_load(&t->exited) && coord_now_ms() < deadline) usleep(1000);
    if (t->started && !atomic_load(&t->exited)) {
      rc = 1;
      /* A thread whose loop missed the bound (named above) was never told
       * to stop: it is named only if it is inside a view itself. */
      if (!c->loop_done[k / c->npool] && !atomic_load(&t->in_app)) continue;
      fprintf(stderr, "m0: pool.%d.%d did not stop within %ld ms%s; exiting anyway\n", t->loop, t->index,
              c->drain_ms, atomic_load(&t->in_app) ? " (it is inside a view)" : "");
    }
  }
  c->stuck = rc != 0;
  /* Nothing here publishes any more. Hung up on now, the loops of other
   * workers (draining too, or not) are not redialed if they close first. */
  for (int i = 0; c->pub_open && i < c->pub.nloops; i++) m0__publisher_disconnect(&c->pub, i);
  return rc;
}

static bool coord_all_exited(coord *c) {
  for (int i = 0; c->loops && i < c->p->here; i++)
    if (c->loops[i].started && !atomic_load(&c->loops[i].exited)) return false;
  for (int k = 0; c->pools && k < c->p->here * c->npool; k++)
    if (c->pools[k].started && !atomic_load(&c->pools[k].exited)) return false;
  if (c->has_producer && c->prod.started && !atomic_load(&c->prod.exited)) return false;
  return true;
}

/* Frees everything when every thread has ended; otherwise only what no
 * thread can touch (the process is about to _exit). */
static void coord_cleanup(coord *c) {
  if (coord_all_exited(c)) {
    int npools = c->pools ? c->p->here * c->npool : 0;
    for (int i = 0; c->loops && i < c->p->here; i++)
      if (c->loops[i].started) pthread_join(c->loops[i].thread, NULL);
    for (int k = 0; k < npools; k++)
      if (c->pools[k].started) pthread_join(c->pools[k].thread, NULL);
    bool producer = c->has_producer && c->prod.started;
    if (producer) pthread_join(c->prod.thread, NULL);
    /* Every peer before any mailbox (see m0__loop_hang_up). */
    for (int i = 0; c->loop_peers && i < c->p->here; i++) m0__peer_close(&c->loop_peers[i]);
    m0__peer_close(&c->prod_peer);
    m0__peer_close(&c->up);
    if (c->pub_open) m0__publisher_close(&c->pub);
    for (int i = 0; c->loops && i < c->p->here; i++) m0__loop_hang_up(&c->loops[i]);
    for (int k = 0; k < npools; k++)
      if (c->pools[k].started) m0__pool_hang_up(&c->pools[k]);
    if (producer) m0__producer_hang_up(&c->prod);
    for (int i = 0; c->loops && i < c->p->here; i++) m0__loop_release(&c->loops[i]); /* also one never started */
    for (int k = 0; k < npools; k++)
      if (c->pools[k].started) m0__pool_release(&c->pools[k]);
    if (producer) m0__producer_release(&c->prod);
    m0__actor_close(&c->self);
    for (int i = 0; c->loops && i < c->p->here; i++) m0__inbox_fini(&c->loops[i].inbox);
    for (int k = 0; c->pools && k < c->p->here * c->npool; k++) m0__inbox_fini(&c->pools[k].inbox);
    free(c->loops);
    free(c->loop_peers);
    free(c->pools);
    free(c->loop_done);
    m0__page_close(&c->page);
    if (c->trace) m0__tracer_free(c->trace);
  } else {
    /* One is still inside the application: the others that ended are
     * joined, not left for the exit to find (ThreadSanitizer reports them). */
    for (int i = 0; c->loops && i < c->p->here; i++)
      if (c->loops[i].started && atomic_load(&c->loops[i].exited)) pthread_join(c->loops[i].thread, NULL);
    for (int k = 0; c->pools && k < c->p->here * c->npool; k++)
      if (c->pools[k].started && atomic_load(&c->pools[k].exited)) pthread_join(c->pools[k].thread, NULL);
    if (c->has_producer && c->prod.started && atomic_load(&c->prod.exited)) pthread_join(c->prod.thread, NULL);
  }
  if (!c->p->run_dir) m0__rundir_close(&c->rundir);
  m0__topology_free(&c->topo);
  if (c->p->stop_fd < 0) m0__signals_restore();
}

/* READY to the supervisor. Its mailbox is dialed now, not at setup: the
 * supervisor opens it while this worker starts, and a dial made before it
 * was open would be retried at a cost (actors/actor.c, m0__peer_open). */
static void coord_ready_up(coord *c) {
  if (!c->up.open) {
    const m0__actor_desc *sup = m0__topology_find(&c->topo, M0__ACTOR_ID(M0__ROLE_COORD, 0));
    if (m0__peer_open(&c->up, sup->id, sup->url, 1000) != 0) {
      fprintf(stderr, "m0: worker %d cannot reach the supervisor at %s\n", c->p->first, sup->url);
      return;
    }
  }
  m0__send(&c->self, &c->up, M0__K_READY, 0, 0, NULL, 0);
}

/* Waits for every READY (the barrier), then GO. Returns -1 to go on
 * serving, or an exit code. */
static int coord_barrier(coord *c) {
  int want = c->p->here * (1 + c->npool) + (c->has_producer ? 1 : 0), ready = 0;
  int64_t forever = INT64_MAX / 2;
  bool up = c->p->mode == M0__MODE_PREFORK; /* a worker: READY up, GO down (coord_ready_up) */
  bool up_go = !up;
  while (ready < want || !up_go) {
    m0__msg m;
    /* A worker says READY again every half second until GO comes: a message
     * to a process that just replaced a dead one can be lost in the
     * reconnect, and a worker that waits forever serves nothing. */
    int w = coord_wait(c, up && ready == want ? coord_now_ms() + 500 : forever, &m);
    if (w == 0 && up && ready == want) {
      coord_ready_up(c);
      continue;
    }
    if (w == 2) {
      fprintf(stderr, "m0: stopped while starting\n");
      return coord_drain(c, coord_now_ms() + c->drain_ms);
    }
    if (w == 3) {
      fprintf(stderr, "m0: loop.%d ended while starting\n", c->p->first + coord_dead(c));
      coord_drain(c, coord_now_ms() + c->drain_ms);
      return 1;
    }
    if (w != 1) continue;
    int kind = m.env.kind;
    if (kind == M0__K_READY) {
      if (++ready == want && up) coord_ready_up(c);
    } else if (kind == M0__K_GO) {
      up_go = true;
    } else if (kind == M0__K_FAILED || kind == M0__K_DIED) {
      fprintf(stderr, "m0: %.*s\n", (int)m.len, (const char *)m.payload);
      m0__msg_free(&m);
      coord_drain(c, coord_now_ms() + c->drain_ms);
      return kind == M0__K_FAILED ? 78 : 1;
    }
    m0__msg_free(&m);
  }
  /* A worker's publisher reaches the other workers' loops too; their
   * mailboxes are open once GO came (the supervisor waited for every READY). */
  for (int i = 0; up && i < c->p->loops; i++)
    if ((i < c->p->first || i >= c->p->first + c->p->here) && m0__publisher_connect(&c->pub, i) != 0)
      fprintf(stderr, "m0: worker %d cannot reach loop %d\n", c->p->first, i);
  for (int i = 0; i < c->p->here; i++)
    if (m0__send(&c->self, &c->loop_peers[i], M0__K_GO, 0, 0, NULL, 0) != 0) {
      fprintf(stderr, "m0: cannot reach loop %d\n", c->p->first + i);
      coord_drain(c, coord_now_ms() + c->drain_ms);
      return 1;
    }
  if (c->has_producer) m0__send(&c->self, &c->prod_peer, M0__K_GO, 0, 0, NULL, 0);
  return -1;
}

static int coord_setup(coord *c) {
  const m0__proc *p = c->p;
  const m0_config *cfg = c->cfg;
  char err[1024];
  if (p->run_dir) snprintf(c->rundir.path, sizeof c->rundir.path, "%s", p->run_dir);
  else if (m0__rundir_open(&c->rundir, M0__CFGS(cfg, run_dir), err, sizeof err) != 0) {
    fprintf(stderr, "m0: %s\n", err);
    return 1;
  }
  /* A child process the application starts finds the host here (m0pub).
   * Set before nng starts any thread. */
  if (!p->run_dir && p->stop_fd < 0) setenv("M0_RUN_DIR", c->rundir.path, 1);
  size_t app_slots = p->app->page_slots ? p->app->page_slots(p->loops) : 0;
  int rv = p->page_fd >= 0 ? m0__page_attach_fd(&c->page, p->page_fd, p->app_page_fd, err, sizeof err)
                           : m0__page_create(&c->page, c->rundir.path, p->loops, app_slots, err, sizeof err);
  if (rv != 0) {
    fprintf(stderr, "m0: %s\n", err);
    return 1;
  }
  c->rundir.ours = p->page_fd < 0; /* its page: removed at exit with the sockets */
  char where[PATH_MAX];
  m0__scheme scheme = p->mode == M0__MODE_PREFORK ? M0__SCHEME_IPC : M0__SCHEME_INPROC;
  if (cfg->topo_transport[0]) scheme = (m0__scheme)m0__scheme_parse(cfg->topo_transport);
  if (scheme == M0__SCHEME_IPC) snprintf(where, sizeof where, "%s", c->rundir.path);
  else snprintf(where, sizeof where, "m0-%d", (int)getpid());
  /* A tcp topology needs the file's addresses; the others can be built. */
  if (m0__topology_build(&c->topo, p->mode, p->loops, c->npool, scheme == M0__SCHEME_TCP ? M0__SCHEME_INPROC : scheme,
                         where) != 0 ||
      (cfg->ntopo_urls == c->topo.nactors &&
       m0__topology_use_urls(&c->topo, scheme, (const char(*)[256])cfg->topo_urls, cfg->ntopo_urls, c->rundir.path) != 0)) {
    fprintf(stderr, "m0: cannot build the topology (run directory path too long?)\n");
    return 1;
  }
  if (M0__CFGS(cfg, trace)[0]) c->trace = m0__tracer_new(M0__CFGS(cfg, trace));
  if (p->listen_fd >= 0) {
    c->listen_fd = p->listen_fd;
    c->port = m0__listen_port(c->listen_fd);
  } else {
    c->listen_fd = m0__listen(M0__CFGS(cfg, host), (int)M0__CFG(cfg, port), 4096, &c->port, err, sizeof err);
    if (c->listen_fd < 0) {
      fprintf(stderr, "m0: %s\n", err);
      return 1;
    }
  }
  if ((c->sigfd = p->stop_fd >= 0 ? p->stop_fd : m0__signals_install(false)) < 0) {
    fprintf(stderr, "m0: cannot install signal handlers\n");
    return 1;
  }
  /* A worker's coordinator is worker.i; the supervisor is the coordinator. */
  uint32_t me_id = p->mode == M0__MODE_PREFORK ? M0__ACTOR_ID(M0__ROLE_WORKER, p->first)
                                                : M0__ACTOR_ID(M0__ROLE_COORD, 0);
  const m0__actor_desc *me = m0__topology_find(&c->topo, me_id);
  if (!me || m0__actor_open(&c->self, me->id, me->url, c->trace) != 0) {
    fprintf(stderr, "m0: cannot open the coordinator's mailbox at %s\n", me ? me->url : "(no address)");
    return 1;
  }
  return 0;
}

static int coord_start(coord *c) {
  const m0__proc *p = c->p;
  const m0_config *cfg = c->cfg;
  const char *me_url = c->self.url;
  c->loops = calloc((size_t)p->here, sizeof *c->loops);
  c->loop_peers = calloc((size_t)p->here, sizeof *c->loop_peers);
  c->loop_done = calloc((size_t)p->here, sizeof *c->loop_done);
  c->pools = calloc((size_t)(p->here * (c->npool ? c->npool : 1)), sizeof *c->pools);
  if (!c->loops || !c->loop_peers || !c->loop_done || !c->pools) return 1;
  m0_ctx base = {.worker = 0, .workers = p->loops, .thread = -1, .threaded = p->mode == M0__MODE_THREADS,
                 .capacity = (int)M0__CFG(cfg, max_connections), .page = c->page.app,
                 .page_slots = c->page.head->app_slots, .config = cfg, .publisher = &c->pub};
  const m0__actor_desc *pd = m0__topology_find(&c->topo, M0__ACTOR_ID(M0__ROLE_PRODUCER, 0));
  if (m0__publisher_open(&c->pub, &c->topo, &c->page, c->trace, p->mode == M0__MODE_PREFORK ? c->self.id : pd->id) != 0) {
    fprintf(stderr, "m0: cannot open the publisher\n");
    return 1;
  }
  c->pub_open = true;
  c->has_producer = p->producer && (!p->producer->wanted || p->producer->wanted(&base));
  /* Each loop and its pool threads, always in one process, talk through
   * direct inboxes (actors/pool.h), made here before any of them starts. */
  for (int i = 0; c->npool && i < p->here; i++) {
    if (m0__inbox_init(&c->loops[i].inbox) != 0) return 1;
    for (int j = 0; j < c->npool; j++) {
      if (m0__inbox_init(&c->pools[i * c->npool + j].inbox) != 0) return 1;
      c->pools[i * c->npool + j].loop_inbox = &c->loops[i].inbox;
    }
  }
  /* A worker's recycling count (--max-requests), drawn once: its loop stops
   * accepting at it, and the coordinator drains it then. */
  long max_req = p->mode == M0__MODE_PREFORK ? M0__CFG(cfg, max_requests) : 0;
  if (max_req > 0 && M0__CFG(cfg, max_requests_jitter) > 0) {
    srand((unsigned)getpid() ^ (unsigned)coord_now_ms());
    max_req += rand() % (M0__CFG(cfg, max_requests_jitter) + 1);
  }
  for (int i = 0; i < p->here; i++) {
    int idx = p->first + i;
    m0__loop *l = &c->loops[i];
    l->recycle_at = (uint64_t)max_req;
    l->index = idx;
    l->topo = &c->topo;
    l->cfg = cfg;
    l->app = p->app;
    l->trace = c->trace;
    l->page = &c->page;
    l->coord_id = c->self.id;
    l->coord_url = me_url;
    l->handoff = p->handoff;
    l->run_dir = c->rundir.path;
    l->npool = c->npool;
    l->pool_threads = &c->pools[i * c->npool];
    l->listen_fd = i == 0 ? c->listen_fd : dup(c->listen_fd);
    l->ctx = base;
    l->ctx.worker = idx;
    const m0__actor_desc *d = m0__topology_find(&c->topo, M0__ACTOR_ID(M0__ROLE_LOOP, idx));
    if (m0__loop_open(l) != 0 || m0__peer_open(&c->loop_peers[i], d->id, d->url, (int)c->drain_ms) != 0 ||
        m0__publisher_connect(&c->pub, idx) != 0) {
      fprintf(stderr, "m0: cannot open loop %d\n", idx);
      return 1;
    }
  }
  /* Every mailbox here is open before any thread starts: sibling loops dial
   * each other, and none may dial a mailbox not yet open (actors/actor.c,
   * m0__peer_open). */
  for (int i = 0; i < p->here; i++) {
    int idx = p->first + i;
    if (m0__loop_start(&c->loops[i]) != 0) {
      fprintf(stderr, "m0: cannot start loop %d\n", idx);
      return 1;
    }
    for (int j = 0; j < c->npool; j++) {
      m0__pool_thread *t = &c->pools[i * c->npool + j];
      t->loop = idx;
      t->index = j;
      t->topo = &c->topo;
      t->app = p->app;
      t->trace = c->trace;
      t->coord_id = c->self.id;
      t->coord_url = me_url;
      t->ctx = base;
      t->ctx.worker = idx;
      t->ctx.thread = j;
      if (m0__pool_start(t) != 0) {
        fprintf(stderr, "m0: cannot start pool thread %d.%d\n", idx, j);
        return 1;
      }
    }
  }
  if (c->has_producer) {
    c->prod.def = p->producer;
    c->prod.ctx = base;
    c->prod.pub = &c->pub;
    c->prod.url = pd->url;
    c->prod.coord_id = c->self.id;
    c->prod.coord_url = me_url;
    if (m0__producer_start(&c->prod) != 0) {
      fprintf(stderr, "m0: cannot start the producer\n");
      return 1;
    }
    if (m0__peer_open(&c->prod_peer, pd->id, pd->url, (int)c->drain_ms) != 0) {
      fprintf(stderr, "m0: cannot reach the producer's mailbox\n");
      return 1;
    }
  }
  return 0;
}

static int coord_serve(coord *c) {
  const m0__proc *p = c->p;
  int rc;
  if ((rc = coord_setup(c)) != 0) return rc;
  if ((rc = coord_start(c)) != 0) {
    coord_drain(c, coord_now_ms() + c->drain_ms);
    return rc;
  }
  if ((rc = coord_barrier(c)) >= 0) return rc;
  if (p->mode == M0__MODE_PREFORK) {
    fprintf(stderr, "m0: worker %d serving (pid %d)\n", p->first, (int)getpid());
  } else {
    char host[64];
    m0__listen_host(c->listen_fd, M0__CFGS(c->cfg, host), host, sizeof host); /* a handed-over one's own */
    fprintf(stderr, "m0: %s listening on http://%s:%d (%s, %d loop%s, %d pool thread%s per loop, pid %d)\n",
            p->app->name, host, c->port, m0__mode_name(p->mode), p->here,
            p->here == 1 ? "" : "s", c->npool, c->npool == 1 ? "" : "s", (int)getpid());
    if (p->stop_fd < 0) m0__sd_notify("READY=1");
  }
  if (p->on_ready) p->on_ready(p->ready_arg, c->port, c->rundir.path, &c->pub);
  /* Serving: wait for a signal, or a loop that dies; a worker also counts
   * its requests for recycling (its loop stopped accepting at the count). */
  long max_req = p->mode == M0__MODE_PREFORK ? (long)c->loops[0].recycle_at : 0;
  for (;;) {
    m0__msg m;
    int w = coord_wait(c, coord_now_ms() + 100, &m);
    if (w == 2) break;
    if (w == 0 && max_req > 0 &&
        atomic_load_explicit(&c->page.lines[p->first].requests, memory_order_relaxed) >= (uint64_t)max_req) {
      fprintf(stderr, "m0: worker %d recycles after %ld requests\n", p->first, max_req);
      break; /* the drain, then exit 0: the supervisor starts a fresh one */
    }
    if (w == 3) {
      fprintf(stderr, "m0: loop.%d ended while serving\n", p->first + coord_dead(c));
      coord_drain(c, coord_now_ms() + c->drain_ms);
      return 1;
    }
    if (w != 1) continue;
    if (m.env.kind == M0__K_DIED) {
      fprintf(stderr, "m0: %.*s\n", (int)m.len, (const char *)m.payload);
      m0__msg_free(&m);
      coord_drain(c, coord_now_ms() + c->drain_ms);
      return 1;
    }
    m0__msg_free(&m);
  }
  fprintf(stderr, "m0: %s draining (bound %ld ms)\n", p->mode == M0__MODE_PREFORK ? "worker" : "host", c->drain_ms);
  if (p->mode != M0__MODE_PREFORK) m0__sd_notify("STOPPING=1");
  rc = coord_drain(c, coord_now_ms() + c->drain_ms);
  if (rc == 0 && p->mode != M0__MODE_PREFORK) fprintf(stderr, "m0: drained, exit 0\n");
  return rc;
}

int m0__coord_run(const m0__proc *p) {
  coord *c = calloc(1, sizeof *c);
  if (!c) return 1;
  c->p = p;
  c->cfg = p->cfg;
  c->drain_ms = M0__CFG(p->cfg, drain_timeout_ms);
  c->npool = (int)M0__CFG(p->cfg, blocking_threads);
  c->listen_fd = -1;
  c->sigfd = -1;
  int rc = coord_serve(c);
  /* Threads that said STOPPED are on their way out: give them a moment,
   * unless one was named stuck (it will not come out, and under prefork the
   * supervisor allows a worker one second past the bound, not two). */
  for (int k = 0; !c->stuck && k < 1000 && !coord_all_exited(c); k++) usleep(1000);
  bool clean = coord_all_exited(c);
  coord_cleanup(c);
  if (!clean && p->stop_fd < 0) {
    m0__exit_now(rc ? rc : 1); /* a thread is still inside the application: do not wait for it */
  }
  free(c);
  return rc;
}
