/* Design notes
 * - The supervisor is the topology's coordinator under prefork. It makes the
 *   run directory, the shared page, the listener and the hand-off
 *   socketpairs BEFORE any worker exists, then SPAWNS each worker (posix_spawn
 *   of /proc/self/exe with the same arguments: fork then exec, because nng and
 *   runtimes such as OpenMP do not survive a bare fork). Workers inherit those
 *   descriptors; their numbers travel in M0__FDS.
 * - Each worker runs a coordinator of its own (worker.i) that says READY when
 *   its loop and pool are built; the supervisor says GO to all at once at
 *   start (the barrier), and at once to a respawned worker.
 * - The producer lives here, not in a worker, so no worker's death stops it;
 *   its frames reach every loop's ipc mailbox.
 * - Deaths are counted over a window: more than the budget stops the rest,
 *   exit 1. A worker that exits 78 refused its configuration: never
 *   respawned; siblings stopped; exit 78. A stopped (SIGSTOP) worker is not a
 *   death (waitpid without WUNTRACED). During the drain nothing is respawned.
 * - SIGTERM/SIGINT are forwarded as SIGTERM; each worker drains within the
 *   one bound (its own, from the forwarded signal) and exits at it; a worker
 *   still alive SUP_GRACE_MS after the bound is killed, named, exit 1, unless
 *   its drain is over (its page line's `ended`: it told its own story) and
 *   only its teardown is left, which gets SUP_TEARDOWN_MS more. The
 *   bound is the bound: that grace covers only the forwarding and a stuck
 *   worker's own exit, not a second of teardown (it was 1 s: a stopped
 *   worker, or a producer inside its step, took the bound plus a second).
 */
#include "host/supervisor.h"

#include "host/life.h"
#include "host/reload.h"
#include "host/process.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime/actor.h"
#include "runtime/admit.h"
#include "bus/bus.h"
#include "runtime/edges.h"
#include "base/errors.h"
#include "actors/producer.h"
#include "host/signals.h"
#include "host/spawn.h"
#include "host/title.h"
#include "host/top.h"
#include "config/certs.h"
#include "runtime/trace.h"
#include "host/appactors.h"
#include "transport/handoff.h"
#include "transport/listen.h"
#include "transport/page.h"
#include "transport/rundir.h"
#include "transport/systemd.h"
#include "transport/topology.h"


/* How long past the drain's bound a worker may take to be gone: the
 * forwarded SIGTERM reaches it a moment after the supervisor's, and a worker
 * that misses its bound exits at once (m0__exit_now). */
#define SUP_GRACE_MS 100
/* How long past that a worker whose drain is over (its page line's `ended`)
 * may take for its teardown: it told its story (drained, or named what
 * missed the bound) and exits by itself; killing it would tell another. */
#define SUP_TEARDOWN_MS 1000

typedef struct sup_worker {
  pid_t pid;
  bool alive;
  int64_t died_ms; /* when its predecessor died, for the respawn time */
  int status;
  bool killed; /* by the drain, past its bound: named already */
} sup_worker;

typedef struct sup {
  m0__process proc; /* run directory, page, topology, listener, signals, exits, tracer */
  /* Its mailbox, the publisher, the fleet's bridge (the bus), the producer
   * and the process and external actors, relayed to every worker
   * (service/relay.h): host/top.h; top.proc is &proc. */
  m0__top top;
  const m0_app *app;
  const m0_config *cfg;
  char **argv;
  int n;
  sup_worker *w;
  m0__peer *wpeers;
  int *handoff; /* [2n] */
  int64_t *deaths; /* the last budget+1 death times */
  long ndeaths;
  bool draining;
} sup;

/* A worker's line on the page starts clean (but for pending): a stale load would skew accept
 * sharing, a stale count would recycle it at once, a stale beat would make
 * it look stuck. */
static void sup_clear_line(sup *s, int i) {
  m0__loop_line *ln = &s->proc.page.lines[i];
  atomic_store(&ln->open, 0);
  /* not pending: hand-offs sent to the dead worker wait in its socket, and
   * its successor takes them (and counts them down). */
  atomic_store(&ln->requests, 0);
  atomic_store(&ln->streams, 0);
  atomic_store(&ln->queued, 0);
  atomic_store(&ln->pass_start_ms, 0);
  atomic_store(&ln->leaving, 0);
  atomic_store(&ln->beat_ms, 0);
  atomic_store(&ln->ended, 0);
}

/* Worker i said its drain is over: only its teardown is left. */
static bool sup_ended(sup *s, int i) {
  return atomic_load(&s->proc.page.lines[i].ended) == (uint64_t)s->w[i].pid;
}

/* An actor of worker i (its process, loop, pool threads). */
static bool of_worker(void *arg, uint32_t to) {
  int i = *(int *)arg, role = M0__ACTOR_ROLE(to), idx = M0__ACTOR_INDEX(to);
  return ((role == M0__ROLE_WORKER || role == M0__ROLE_LOOP) && idx == i) || (role == M0__ROLE_POOL && idx >> 12 == i);
}

static int sup_spawn(sup *s, int i) {
  sup_clear_line(s, i);
  m0__edges_settle(of_worker, &i); /* what the dead one never took waits for no one */
  char fds[64 + 24 * 2048], idx[32], dirv[PATH_MAX + 16], supv[48], cookie[64], gen[48];
  int len = snprintf(fds, sizeof fds, "M0__FDS=%d,%d,%d", s->proc.listen_fd, s->proc.page.fd, s->proc.page.app_fd);
  for (int k = 0; k < 2 * s->n; k++) len += snprintf(fds + len, sizeof fds - (size_t)len, ",%d", s->handoff[k]);
  snprintf(idx, sizeof idx, "M0__WORKER=%d", i);
  snprintf(dirv, sizeof dirv, "M0__RUN_DIR=%s", s->proc.rundir.path);
  snprintf(supv, sizeof supv, "M0__SUPERVISOR=%d", (int)getpid());
  snprintf(gen, sizeof gen, "M0__GENERATION=%llu", (unsigned long long)s->proc.reload.generation);
  m0__family_env(cookie);
  /* A rollback's topology text goes on to the workers (host/rollback.h). */
  char topo[48] = "";
  int topo_fd = getenv("M0__TOPOLOGY_FD") ? s->proc.reload.keep.own_topo_fd : -1;
  if (topo_fd >= 0) snprintf(topo, sizeof topo, "M0__TOPOLOGY_FD=%d", topo_fd);
  /* The certificates as this generation's check read them, and its ticket
   * secret: a worker, first or respawned, never reads the files
   * (config/certs.h; "" where they do not apply: host/spawn.h skips it). */
  m0__certs_pass cp;
  int certs_fd = m0__certs_pass_make(s->cfg, s->proc.tls, &cp);
  char plain[32] = ""; /* the plain listener beside HTTPS ("": none; host/spawn.h skips it) */
  if (s->proc.plain_fd >= 0) snprintf(plain, sizeof plain, "M0__PLAIN_FD=%d", s->proc.plain_fd);
  char *extra[] = {fds, idx, dirv, supv, cookie, gen, cp.fd, cp.tickets, plain, topo_fd >= 0 ? topo : NULL, NULL};
  /* Exactly these are inherited, at their numbers (M0__FDS says them). */
  m0__spawn_fd *inherit = calloc((size_t)(6 + 2 * s->n), sizeof *inherit);
  if (!inherit) return M0__ENOMEM;
  int ni = 0;
  inherit[ni++] = (m0__spawn_fd){topo_fd, topo_fd}; /* < 0: skipped */
  inherit[ni++] = (m0__spawn_fd){certs_fd, certs_fd};
  inherit[ni++] = (m0__spawn_fd){s->proc.plain_fd, s->proc.plain_fd}; /* < 0: skipped */
  int own[3] = {s->proc.listen_fd, s->proc.page.fd, s->proc.page.app_fd};
  for (int j = 0; j < 3; j++) inherit[ni++] = (m0__spawn_fd){own[j], own[j]};
  for (int j = 0; j < 2 * s->n; j++) inherit[ni++] = (m0__spawn_fd){s->handoff[j], s->handoff[j]};
  m0__spawn_spec spec = {.argv = s->argv, .extra = extra, .fds = inherit, .nfds = ni, .reset_signals = true};
  pid_t pid;
  int rv = m0__spawn(&spec, &pid);
  free(inherit);
  explicit_bzero(&cp, sizeof cp);
  if (rv != 0) {
    fprintf(stderr, "m0: cannot spawn worker %d: %s\n", i, strerror(rv));
    return M0__ESYSTEM;
  }
  s->w[i].pid = pid;
  atomic_store(&s->proc.page.lines[i].pid, (uint64_t)pid); /* the observer's worker.i */
  s->w[i].alive = true;
  return 0;
}

static void sup_kill_all(sup *s, int sig) {
  for (int i = 0; i < s->n; i++)
    if (s->w[i].alive) kill(s->w[i].pid, sig);
}

/* Counts a death; true when the budget over the window is spent. */
static bool sup_budget_spent(sup *s, int64_t now) {
  long budget = M0__CFG(s->cfg, respawn_budget), window = M0__CFG(s->cfg, respawn_window_ms);
  s->deaths[s->ndeaths % (budget + 1)] = now;
  s->ndeaths++;
  if (s->ndeaths <= budget) return false;
  int64_t oldest = s->deaths[s->ndeaths % (budget + 1)]; /* budget+1 deaths ago */
  return now - oldest < window;
}

/* A dead worker's mailbox and loop are gone: the supervisor's peers to them
 * are closed rather than left redialing until a successor listens (each
 * attempt costs CPU the successor needs to start: runtime/actor.c,
 * m0__peer_open). sup_reach dials them again. */
static void sup_hang_up(sup *s, int i) {
  m0__peer_close(&s->wpeers[i]);
  if (s->top.pub_open) m0__publisher_disconnect(&s->top.pub, i);
}

/* Reaps the dead. Returns 1 to go on, or the m0__err to stop with. */
static int sup_reap(sup *s) {
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    if (m0__reload_reaped(&s->proc, pid, status)) continue; /* the next generation, ended before it served */
    int i = 0;
    while (i < s->n && s->w[i].pid != pid) i++;
    if (i == s->n) continue;
    s->w[i].alive = false;
    s->w[i].status = status;
    sup_hang_up(s, i);
    if (s->draining) continue;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) { /* recycled (--max-requests): not a death */
      fprintf(stderr, "m0: worker %d (pid %d) recycled; starting a fresh one\n", i, pid);
      s->w[i].died_ms = m0__now_ms();
      if (sup_spawn(s, i) != 0) return M0__EDIED;
      continue;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 78) {
      fprintf(stderr, "m0: worker %d (pid %d) refused its configuration (exit 78); stopping the rest\n", i, pid);
      return M0__ECONFIG;
    }
    if (WIFSIGNALED(status))
      fprintf(stderr, "m0: worker %d (pid %d) died of signal %d\n", i, pid, WTERMSIG(status));
    else fprintf(stderr, "m0: worker %d (pid %d) exited %d\n", i, pid, WEXITSTATUS(status));
    int64_t now = m0__now_ms();
    if (sup_budget_spent(s, now)) {
      fprintf(stderr, "m0: more than %ld worker deaths within %ld ms: the respawn budget is spent; stopping\n",
              M0__CFG(s->cfg, respawn_budget), M0__CFG(s->cfg, respawn_window_ms));
      return M0__EDIED;
    }
    s->w[i].died_ms = now;
    if (sup_spawn(s, i) != 0) return M0__EDIED;
    atomic_fetch_add(&s->proc.page.head->respawns, 1);
    atomic_fetch_add(&s->proc.page.lines[i].respawns, 1);
  }
  return 1;
}

/* The heartbeat: a worker whose loop has not turned within the timeout is
 * stuck (a view that never returns, a deadlock): killed, and so replaced. */
static void sup_check_beats(sup *s) {
  long timeout = M0__CFG(s->cfg, worker_timeout_ms);
  if (timeout <= 0 || s->draining) return;
  int64_t now = m0__now_ms();
  for (int i = 0; i < s->n; i++) {
    uint64_t beat = atomic_load_explicit(&s->proc.page.lines[i].beat_ms, memory_order_relaxed);
    if (!s->w[i].alive || !beat || now - (int64_t)beat <= timeout) continue;
    fprintf(stderr, "m0: worker %d (pid %d) has not turned its loop for %lld ms (timeout %ld ms); killing it\n", i,
            s->w[i].pid, (long long)(now - (int64_t)beat), timeout);
    atomic_store(&s->proc.page.lines[i].beat_ms, 0); /* once */
    kill(s->w[i].pid, SIGKILL);
  }
}

/* Waits for a message, a stop, a child's death, an actor thread's end or
 * the next heartbeat check (--worker-timeout-ms: a quarter of it; none
 * without it). 1 message (in m), 2 stop, 0 otherwise (time to reap and
 * check). */
static int sup_wait(sup *s, m0__msg *m, int64_t until) {
  long timeout = M0__CFG(s->cfg, worker_timeout_ms);
  /* Draining, its caller's deadline (a death wakes the wait by SIGCHLD, a
   * producer's end by the exit descriptor); serving, the heartbeat is the
   * only reason to wake on time. */
  long every = timeout > 0 ? (timeout / 4 > 0 ? timeout / 4 : 1) : -1;
  int64_t deadline = s->draining ? until : every < 0 ? INT64_MAX : m0__now_ms() + every;
  int w = m0__top_wait(&s->top, deadline, m);
  return w == M0__WAIT_MSG ? 1 : w == M0__WAIT_STOP ? 2 : 0;
}

/* Worker i, alive past the bound and its grace: killed and named. */
static int sup_kill_stuck(sup *s, int i) {
  fprintf(stderr, "m0: worker %d (pid %d) did not exit within the bound; killed\n", i, s->w[i].pid);
  kill(s->w[i].pid, SIGKILL);
  waitpid(s->w[i].pid, NULL, 0);
  s->w[i].alive = false;
  s->w[i].killed = true;
  return M0__ESTUCK;
}

/* The drain's first steps: STOP to the producer (host/top.h), SIGTERM to
 * every worker, and the workers' peers hung up on. Returns which workers
 * were alive (NULL when out of memory: none is then said to have died). */
static bool *sup_drain_begin(sup *s) {
  s->draining = true;
  m0__top_drain_begin(&s->top);
  sup_kill_all(s, SIGTERM);
  /* Draining loops end their streams, so a frame for them is moot, and their
   * mailboxes are about to close: hung up on now rather than redialed until
   * each worker is reaped. */
  for (int i = 0; i < s->n; i++) sup_hang_up(s, i);
  bool *was_alive = calloc(s->n > 0 ? (size_t)s->n : 1, sizeof *was_alive);
  for (int i = 0; i < s->n; i++) {
    if (was_alive) was_alive[i] = s->w[i].alive;
    s->w[i].killed = false;
  }
  return was_alive;
}

static bool sup_any_alive(sup *s) {
  for (int i = 0; i < s->n; i++)
    if (s->w[i].alive) return true;
  return false;
}

/* Every exit until the bound (the workers: plus SUP_GRACE_MS, and
 * SUP_TEARDOWN_MS more for one whose drain is over). 0, or M0__ESTUCK when
 * a worker was killed. */
static int sup_drain_wait(sup *s, int64_t bound) {
  int64_t deadline = bound + SUP_GRACE_MS;
  int rc = 0;
  for (;;) {
    sup_reap(s);
    bool alive = sup_any_alive(s);
    bool prod = s->top.has_producer && !m0__handle_exited(&s->top.prod.h);
    int64_t now = m0__now_ms();
    /* The producer is this process's own thread: its bound has no grace. */
    if ((!alive && (!prod || now >= bound)) || now >= deadline + SUP_TEARDOWN_MS) break;
    /* Past the grace, a worker whose drain is not over is killed; one whose
     * drain is over is given its teardown. */
    for (int i = 0; now >= deadline && i < s->n; i++)
      if (s->w[i].alive && !sup_ended(s, i)) rc = sup_kill_stuck(s, i);
    m0__msg m;
    int64_t until = !alive ? bound : now < deadline ? deadline : deadline + SUP_TEARDOWN_MS;
    if (sup_wait(s, &m, until) == 1) m0__msg_free(&m);
  }
  return rc;
}

/* Worker i, alive when the drain began, ended by it: did it end clean? A
 * worker killed by the forwarded SIGTERM itself was still starting, before
 * its handler: it had nothing in flight. That is a clean stop. */
static bool sup_clean_end(const sup_worker *w) {
  if (w->killed) return true;
  if (WIFSIGNALED(w->status)) return WTERMSIG(w->status) == SIGTERM;
  return WIFEXITED(w->status) && WEXITSTATUS(w->status) == 0;
}

/* After the wait: a worker still alive killed, one that ended badly named.
 * Returns 0 or an m0__err. */
static int sup_drain_story(sup *s, const bool *was_alive) {
  int rc = 0;
  for (int i = 0; i < s->n; i++) {
    sup_worker *w = &s->w[i];
    if (w->alive) rc = sup_kill_stuck(s, i);
    if (w->alive || !was_alive || !was_alive[i] || sup_clean_end(w)) continue;
    if (WIFSIGNALED(w->status))
      fprintf(stderr, "m0: worker %d (pid %d) died of signal %d during the drain\n", i, w->pid, WTERMSIG(w->status));
    else fprintf(stderr, "m0: worker %d (pid %d) exited %d from its drain\n", i, w->pid, WEXITSTATUS(w->status));
    rc = M0__EDIED;
  }
  return rc;
}

/* SIGTERM to every worker, STOP to the producer; every exit within the
 * bound (sup_drain_wait). Returns 0 or an m0__err. */
static int sup_drain(sup *s, int64_t bound) {
  bool *was_alive = sup_drain_begin(s);
  int waited = sup_drain_wait(s, bound);
  int rc = sup_drain_story(s, was_alive);
  if (rc == 0) rc = waited;
  free(was_alive);
  /* Every worker is gone, so no request is with an instance: they stop now. */
  m0__top_stop_actors(&s->top, bound + SUP_GRACE_MS);
  s->top.prod_done = m0__handle_exited(&s->top.prod.h);
  if (m0__top_name_producer(&s->top)) rc = M0__ESTUCK;
  return rc;
}

static int sup_drain_fn(void *s, int64_t bound) { return sup_drain(s, bound); }

/* A start that ends: the drain within the bound from now. */
static int sup_drain_now(sup *s) { return sup_drain(s, m0__now_ms() + s->top.drain_ms); }

/* What a worker inherits or needs before it exists: the process's set-up
 * (run directory, page, topology, listener, signal pipe: a SIGTERM from now
 * on is forwarded) and the hand-off channels. */
static int sup_setup(sup *s) {
  int rv = m0__process_setup(&s->proc);
  if (rv != 0) return rv;
  if (m0__handoff_make(s->handoff, s->n) != 0) {
    fprintf(stderr, "m0: cannot make the hand-off channels: %s\n", strerror(errno));
    return M0__ENOMEM;
  }
  return 0;
}

/* The supervisor's actors, the publisher and the producer: made while the
 * workers, already spawned, start. A worker dials this mailbox only when it
 * says READY, ~10 ms after its spawn; the publisher dials no loop yet
 * (sup_reach does, at each READY). */
static int sup_setup_actors(sup *s, const m0_producer *producer) {
  m0__process_trace(&s->proc, M0__TRACE_SUPERVISOR);
  const m0__actor_desc *pd = m0__topology_find(&s->proc.topo, M0__ACTOR_ID(M0__ROLE_PRODUCER, 0));
  int rv = m0__top_open_self(&s->top, M0__ACTOR_ID(M0__ROLE_COORD, 0), "supervisor");
  /* The bridge, when there is a bus: this publisher reaches every worker's loop. */
  if (rv == 0) rv = m0__top_open_publisher(&s->top, pd->id, true);
  if (rv == 0) rv = m0__app_actors_front(&s->top.aa, &s->proc, &s->proc.decl, s->n, &s->top.pub);
  if (rv != 0) return rv;
  m0_ctx base = {.worker = 0, .workers = s->n, .thread = -1, .threaded = false,
                 .capacity = (int)M0__CFG(s->cfg, max_connections), .page = s->proc.page.app,
                 .page_slots = s->proc.page.head->app_slots, .config = s->cfg, .publisher = &s->top.pub};
  if (m0__top_producer(&s->top, producer, &base) &&
      (m0__handle_open(&s->top.prod.h) != 0 || m0__peer_open(&s->top.prod_peer, pd->id, pd->url, 1000) != 0 ||
       m0__handle_start(&s->top.prod.h) != 0))
    return M0__ETRANSPORT;
  return 0;
}

/* Worker i said READY, so its mailbox and its loop's are open: both are
 * dialed now, never before (runtime/actor.c, m0__peer_open), and hung up on
 * when the worker dies (sup_hang_up). A new worker (a respawn) gets new
 * peers. At start this runs as each READY comes, so only the last worker's
 * dials are left between the last READY and GO (each is a round trip
 * through both processes' nng threads). */
static void sup_reach(sup *s, int i) {
  const m0__actor_desc *d = m0__topology_find(&s->proc.topo, M0__ACTOR_ID(M0__ROLE_WORKER, i));
  m0__peer_close(&s->wpeers[i]);
  if (m0__publisher_connect(&s->top.pub, i) != 0) fprintf(stderr, "m0: cannot reach loop %d\n", i);
  if (m0__peer_open(&s->wpeers[i], d->id, d->url, 1000) != 0)
    fprintf(stderr, "m0: cannot reach worker %d at %s\n", i, d->url);
}

/* GO to worker i, reached (sup_reach); a peer that could not be dialed then
 * is dialed once more. */
static void sup_send_go(sup *s, int i) {
  if (!s->wpeers[i].open) sup_reach(s, i);
  if (!s->wpeers[i].open || m0__send(&s->top.self, &s->wpeers[i], M0__K_GO, 0, 0, NULL, 0) != 0)
    fprintf(stderr, "m0: cannot send GO to worker %d\n", i);
}

/* GO to worker i, which said READY just now (a respawn, or a READY said
 * again because a GO was lost): reached afresh, then told. */
static void sup_go(sup *s, int i) {
  sup_reach(s, i);
  sup_send_go(s, i);
}

/* The workers are spawned first and the supervisor's own nng setup runs
 * while they start: a worker takes ~12 ms to exec and build its loop, and the
 * supervisor's actors, publisher and producer (nng's threads among them)
 * took as long again before it (bench/run_lifecycle, --workers 2). 0, or an
 * m0__err (what started is drained). */
static int sup_start(sup *s, const m0_producer *producer) {
  int rc = sup_setup(s);
  if (rc != 0) return rc;
  for (int i = 0; i < s->n; i++)
    if (sup_spawn(s, i) != 0) {
      sup_drain_now(s);
      return M0__EDIED;
    }
  if ((rc = sup_setup_actors(s, producer)) != 0) sup_drain_now(s);
  return rc;
}

/* A message at the barrier: 1 for a worker's first READY or the
 * producer's, M0__EMAKE for a FAILED (said), else 0. */
static int sup_barrier_take(sup *s, const m0__msg *m, bool *was_ready) {
  int role = M0__ACTOR_ROLE(m->env.from), idx = M0__ACTOR_INDEX(m->env.from);
  if (m->env.kind == M0__K_READY && role == M0__ROLE_WORKER && idx < s->n && !was_ready[idx]) {
    was_ready[idx] = true;
    sup_reach(s, idx); /* while the others start: GO is then only a send */
    return 1;
  }
  if (m->env.kind == M0__K_READY && role == M0__ROLE_PRODUCER) return 1;
  if (m->env.kind != M0__K_FAILED) return 0;
  fprintf(stderr, "m0: %.*s\n", (int)m->len, (const char *)m->payload);
  return M0__EMAKE;
}

/* The barrier open: GO to every worker and the producer; serving. */
static void sup_go_all(sup *s) {
  for (int i = 0; i < s->n; i++) sup_send_go(s, i);
  if (s->top.has_producer) m0__send(&s->top.self, &s->top.prod_peer, M0__K_GO, 0, 0, NULL, 0);
  if (s->top.bus_open) m0__bus_start(&s->top.bus); /* the publisher reaches every worker's loop now */
  m0__process_banner(&s->proc, 0, s->n);
  s->top.serving = true;
}

/* The barrier: every worker and the producer READY, then GO to all. 1 to
 * serve, or 0 / an m0__err to end with (drained). */
static int sup_barrier(sup *s) {
  int want = s->n + (s->top.has_producer ? 1 : 0), ready = 0, rc = 1;
  bool *was_ready = calloc(s->n > 0 ? (size_t)s->n : 1, sizeof *was_ready);
  if (!was_ready) rc = M0__ENOMEM;
  while (rc == 1 && ready < want) {
    m0__msg m;
    int w = sup_wait(s, &m, INT64_MAX);
    if (w == 2) {
      fprintf(stderr, "m0: stopped while starting\n");
      free(was_ready);
      return sup_drain_now(s);
    }
    rc = sup_reap(s); /* a death ends the start: a message that came with it is moot */
    int got = rc == 1 && w == 1 ? sup_barrier_take(s, &m, was_ready) : 0;
    if (got < 0) rc = got;
    else ready += got;
    if (w == 1) m0__msg_free(&m);
  }
  free(was_ready);
  if (rc <= 0) {
    sup_drain_now(s);
    return rc;
  }
  sup_go_all(s);
  return 1;
}

/* A message while serving: a respawned worker's READY (no barrier to wait
 * for) answered with GO, a FAILED said, a trace control taken. */
static void sup_take(sup *s, const m0__msg *m) {
  int role = M0__ACTOR_ROLE(m->env.from), idx = M0__ACTOR_INDEX(m->env.from);
  if (m->env.kind == M0__K_READY && role == M0__ROLE_WORKER && idx < s->n) {
    /* A READY repeated (the first GO was lost) is answered again; GO is idempotent. */
    sup_go(s, idx);
    if (s->w[idx].died_ms) {
      fprintf(stderr, "m0: worker %d respawned (pid %d), serving %lld ms after its predecessor died\n", idx,
              s->w[idx].pid, (long long)(m0__now_ms() - s->w[idx].died_ms));
      s->w[idx].died_ms = 0;
    }
  } else if (m->env.kind == M0__K_FAILED) {
    fprintf(stderr, "m0: %.*s\n", (int)m->len, (const char *)m->payload);
  } else if (m->env.kind == M0__K_TRACE) {
    m0__trace_on_control(s->proc.trace, s->top.self.id, m); /* m0trace --run-dir: this process's tracer */
  }
}

/* Serving until a stop (1), or a death that ends the host (its m0__err:
 * the rest drained). */
static int sup_serving(sup *s) {
  for (;;) {
    m0__msg m;
    int w = sup_wait(s, &m, INT64_MAX);
    if (w == 2) return 1;
    sup_check_beats(s);
    int rc = sup_reap(s);
    if (rc <= 0) {
      if (w == 1) m0__msg_free(&m);
      sup_drain_now(s);
      return rc;
    }
    if (w != 1) continue;
    sup_take(s, &m);
    m0__msg_free(&m);
  }
}

static int sup_serve(sup *s, const m0_producer *producer) {
  int rc = sup_start(s, producer);
  if (rc == 0) rc = sup_barrier(s);
  if (rc == 1) rc = sup_serving(s);
  if (rc != 1) return rc;
  char what[64];
  snprintf(what, sizeof what, "supervisor draining %d workers", s->n);
  return m0__top_serve_end(&s->top, what, sup_drain_fn, s);
}

int m0__supervise(const m0_app *app, const m0_producer *producer, const m0_config *cfg, char **argv,
                  int listen_fd, int plain_fd) {
  sup *s = calloc(1, sizeof *s);
  if (!s) return M0__ENOMEM;
  m0__process_describe(&s->proc, app, cfg);
  s->proc.inherit_listen = listen_fd; /* systemd's, or -1: bound */
  s->proc.inherit_plain = plain_fd;
  if (m0__reload_inherit(&s->proc) < 0) { /* a next generation's listener, page and run directory */
    free(s);
    return M0__EINVALID;
  }
  m0__title_set(app->name, "supervisor gen %llu", (unsigned long long)s->proc.reload.generation);
  s->app = app;
  s->cfg = cfg;
  s->argv = argv;
  s->n = s->proc.loops;
  s->top.proc = &s->proc;
  s->top.drain_ms = M0__CFG(cfg, drain_timeout_ms);
  m0__handle_init(&s->top.prod.h, &m0__producer_kind, &s->proc.exits);
  s->w = calloc((size_t)s->n, sizeof *s->w);
  s->wpeers = calloc((size_t)s->n, sizeof *s->wpeers);
  s->handoff = calloc((size_t)(2 * s->n), sizeof *s->handoff);
  s->deaths = calloc((size_t)M0__CFG(cfg, respawn_budget) + 1, sizeof *s->deaths);
  for (int k = 0; s->handoff && k < 2 * s->n; k++) s->handoff[k] = -1; /* none made yet */
  int rc = (!s->w || !s->wpeers || !s->handoff || !s->deaths) ? M0__ENOMEM : sup_serve(s, producer);
  m0__top_guard_arm(&s->top, rc); /* the close and the teardown are bounded from here (host/top.h) */
  m0__handle *prod = &s->top.prod.h;
  if (m0__handle_exited(prod)) /* every peer before any mailbox (runtime/handle.h) */
    for (int i = 0; s->wpeers && i < s->n; i++) m0__peer_close(&s->wpeers[i]);
  bool clean = m0__top_close(&s->top, &prod, 1);
  m0__top_end(&s->top, clean, rc); /* not clean (the producer inside its step): exits here */
  if (s->proc.listen_fd >= 0) close(s->proc.listen_fd);
  if (s->proc.plain_fd >= 0) close(s->proc.plain_fd);
  for (int k = 0; s->handoff && k < 2 * s->n; k++)
    if (s->handoff[k] >= 0) close(s->handoff[k]);
  free(s->w);
  free(s->wpeers);
  free(s->handoff);
  free(s->deaths);
  free(s);
  return rc;
}
