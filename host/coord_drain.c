/* Design notes
 * - The drain has ONE bound (--drain-timeout-ms) from the first signal,
 *   shared by the loops, their pools and the producer. Whoever is still
 *   inside the application after it is named and the process exits 1
 *   without waiting for it.
 * - Order: the producer's STOP first (host/top.h), then each loop's; the
 *   application's actors once every loop has drained (no request is inside
 *   one then), or at the bound; the pool threads end with their loops.
 */
#include "host/coord.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/admit.h"
#include "base/errors.h"
#include "host/coordinator.h"
#include "host/life.h"

/* A loop whose thread ended without saying STOPPED died. */
int m0__coord_dead(coord *c) {
  for (int i = 0; i < c->p->here; i++) {
    m0__handle *h = &c->loops[i].h;
    if (h->started && m0__handle_exited(h) && !atomic_load(&h->said_stopped)) return i;
  }
  return M0__ENOTFOUND;
}

/* While starting, any thread that ended without STOPPED or FAILED (a pool
 * thread or an actor instance that could not send its READY) will never be
 * ready: the barrier would wait for it for ever. */
m0__handle *m0__coord_ended_starting(coord *c) {
  for (int k = 0; k < c->nhandles; k++) {
    m0__handle *h = c->handles[k];
    if (h->started && m0__handle_exited(h) && !atomic_load(&h->said_stopped) && !atomic_load(&h->failed)) return h;
  }
  return NULL; /* a failed make's FAILED is on its way: the barrier reads it */
}

/* Waits up to deadline. Returns 1 with a message in m, 2 on a stop, 3 when
 * a loop died (or, while starting, any thread ended), 0 on timeout (an
 * actor's end that is not a death is taken and the wait goes on). */
int m0__coord_wait(coord *c, int64_t deadline, m0__msg *m) {
  for (;;) {
    int w = m0__top_wait(&c->top, deadline, m);
    if (w == M0__WAIT_MSG) return 1;
    if (w == M0__WAIT_STOP) return 2;
    if (w == M0__WAIT_TIMEOUT) return 0;
    if (w == M0__WAIT_EXIT && (m0__coord_dead(c) >= 0 || (c->starting && m0__coord_ended_starting(c)))) return 3;
  }
}

/* Application actors told to stop only at the bound (a loop did not drain)
 * end within milliseconds: waited for this long so their threads are
 * joined, not left behind, and not named for a bound they were never given. */
#define COORD_ACTOR_GRACE_MS 50

bool m0__coord_all_exited(coord *c) {
  for (int k = 0; k < c->nhandles; k++)
    if (!m0__handle_exited(c->handles[k])) return false;
  return true;
}

/* Waits, taking messages and ends as they come, until every thread here
 * has ended or the deadline. */
void m0__coord_wait_exits(coord *c, int64_t deadline) {
  while (!m0__coord_all_exited(c)) {
    m0__msg m;
    int w = m0__process_wait(c->proc, &c->self, deadline, &m);
    if (w == M0__WAIT_MSG) m0__msg_free(&m);
    if (w == M0__WAIT_TIMEOUT) return;
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

/* A STOPPED from no actor told to stop (the seal's replay refusal is the
 * first line: runtime/seal.h): named and counted, never taken. */
void m0__coord_unexpected(coord *c, const m0__msg *m) {
  char peer[96];
  m0__msg_peer(m, peer, sizeof peer);
  m0__refused(c->self.id, M0__REFUSE_UNEXPECTED, m->env.kind, peer);
}

/* STOP to an actor that can still hear it; false when it has nothing to
 * drain (its make failed, or its thread ended) or cannot be reached. */
static bool coord_stop(coord *c, m0__handle *h, m0__peer *to) {
  if (atomic_load(&h->failed) || m0__handle_exited(h)) return false;
  return m0__send(&c->self, to, M0__K_STOP, 0, 0, NULL, 0) == 0;
}

/* A worker's loops have drained or been named: what is left (its pool
 * threads, actors, teardown) ends by itself, within bounds of its own. The
 * supervisor waits for it rather than killing a worker that is only slow to
 * exit (on a loaded machine nng's teardown took 0.4-0.9 s with two CPU
 * hogs beside it), which would tell another story than the worker's. */
void m0__coord_ended(coord *c) {
  if (c->proc->mode == M0__MODE_PREFORK && c->proc->page.lines)
    atomic_store(&c->proc->page.lines[c->p->first].ended, (uint64_t)getpid());
}

/* The drain's STOPs: the producer first (host/top.h), then every loop not
 * done. Returns how many STOPPED (or FAILED) to wait for. */
static int coord_drain_tell(coord *c) {
  int waiting = m0__top_drain_begin(&c->top) ? 1 : 0;
  /* A worker in the host's drain: every loop drains and ends its streams, so
   * a frame is moot (as the supervisor hangs up at once). Hung up on now,
   * while the siblings' mailboxes are still there: closed after a sibling
   * exited, nng's close waits for a poller spinning on its redials, over a
   * second with two CPU hogs beside it, past the supervisor's grace. */
  bool whole = c->proc->mode == M0__MODE_PREFORK && !c->recycling;
  for (int i = 0; c->pub_open && whole && i < c->pub.nloops; i++) m0__publisher_disconnect(&c->pub, i);
  for (int i = 0; i < c->p->here; i++) {
    if (c->loop_done[i]) continue;
    /* Before STOP: the loop takes no connection from now on, even one whose
     * wake it handles before its mailbox's (actors/accept.c). A flag of this
     * process, not the page's `leaving`: under prefork a recycled worker's
     * replacement reuses its page line while it still drains. */
    atomic_store(&c->loops[i].told_stop, true);
    if (coord_stop(c, &c->loops[i].h, &c->loop_peers[i])) waiting++;
    else c->loop_done[i] = true;
  }
  return waiting;
}

/* Loop i is over (STOPPED, FAILED, or its thread ended): counted once.
 * Returns 1 when it was not yet. */
static int coord_loop_over(coord *c, int i) {
  if (c->loop_done[i]) return 0;
  c->loop_done[i] = true;
  return 1;
}

/* A message during the drain: returns how many of those waited for it
 * ends (0 or 1). */
static int coord_drain_take(coord *c, const m0__msg *m) {
  int role = M0__ACTOR_ROLE(m->env.from), idx = M0__ACTOR_INDEX(m->env.from) - c->p->first;
  bool mine = idx >= 0 && idx < c->p->here;
  /* A FAILED now is a make that was still running when the drain began:
   * that actor has nothing to drain and will say nothing more. */
  bool over = m->env.kind == M0__K_STOPPED || m->env.kind == M0__K_FAILED;
  if (over && role == M0__ROLE_LOOP && mine && coord_loop_over(c, idx)) {
    if (m->env.kind == M0__K_STOPPED) coord_log_stats(c->p->first + idx, m);
    return 1;
  }
  if (over && role == M0__ROLE_PRODUCER && !c->prod_done) {
    c->prod_done = true;
    return 1;
  }
  if (m->env.kind == M0__K_STOPPED && role == M0__ROLE_LOOP && !mine) m0__coord_unexpected(c, m);
  return 0;
}

static int coord_loops_left(coord *c) {
  int n = 0;
  for (int i = 0; i < c->p->here; i++) n += !c->loop_done[i];
  return n;
}

/* Every STOPPED (or a loop's end) until the deadline. */
static void coord_drain_wait(coord *c, int waiting, int64_t deadline) {
  while (waiting > 0) {
    /* Once every loop has drained no request is inside an application
     * actor: they stop now, not when the producer is done too (they were
     * told at the bound, and named for not stopping within it). */
    if (!coord_loops_left(c)) m0__top_stop_actors(&c->top, deadline);
    m0__msg m;
    int w = m0__coord_wait(c, deadline, &m);
    if (w == 0) break;
    if (w == 2) fprintf(stderr, "m0: already draining; the bound is %ld ms\n", c->drain_ms);
    if (w == 3) { /* ended without STOPPED: nothing more will come from it */
      int i = m0__coord_dead(c);
      fprintf(stderr, "m0: loop.%d ended during the drain\n", c->p->first + i);
      waiting -= coord_loop_over(c, i);
      atomic_store(&c->loops[i].h.said_stopped, true); /* counted once */
    }
    if (w != 1) continue;
    waiting -= coord_drain_take(c, &m);
    m0__msg_free(&m);
  }
}

/* Each pool thread still running past the bound; returns how many. */
static int coord_name_pools(coord *c) {
  int n = 0;
  for (int k = 0; k < c->p->here * c->npool; k++) {
    m0__pool_thread *t = &c->pools[k];
    if (m0__handle_exited(&t->h)) continue;
    n++;
    /* A thread whose loop missed the bound (named above) was never told
     * to stop: it is named only if it is inside a view itself. */
    if (!c->loop_done[k / c->npool] && !atomic_load(&t->h.in_app)) continue;
    fprintf(stderr, "m0: pool.%d.%d did not stop within %ld ms%s; exiting anyway\n", t->loop, t->index,
            c->drain_ms, atomic_load(&t->h.in_app) ? " (it is inside a view)" : "");
  }
  return n;
}

/* Whoever missed the bound, named; the rest waited for. 0 or M0__ESTUCK. */
static int coord_drain_name(coord *c, int64_t deadline) {
  int rc = 0;
  for (int i = 0; i < c->p->here; i++)
    if (!c->loop_done[i]) {
      fprintf(stderr, "m0: loop.%d did not finish its drain within %ld ms; exiting anyway\n", c->p->first + i,
              c->drain_ms);
      rc = M0__ESTUCK;
    }
  m0__coord_ended(c);
  if (m0__top_name_producer(&c->top)) rc = M0__ESTUCK;
  /* No request is inside an application actor now (the loops drained):
   * they stop, and the processes spawned for them are waited for within the
   * bound. The pools: their loops sent them STOP on the way out. */
  m0__top_stop_actors(&c->top, deadline);
  m0__coord_wait_exits(c, deadline);
  m0__top_wait_actors(&c->top, m0__now_ms() + COORD_ACTOR_GRACE_MS);
  if (coord_name_pools(c) > 0) rc = M0__ESTUCK;
  if (m0__top_name_actors(&c->top) > 0) rc = M0__ESTUCK;
  return rc;
}

/* STOP to every loop and the producer; every STOPPED within the bound; then
 * the pool threads' ends within what is left of it. Returns 0, or
 * M0__ESTUCK when someone did not finish (named on stderr). */
int m0__coord_drain(coord *c, int64_t deadline) {
  c->deadline = deadline;
  coord_drain_wait(c, coord_drain_tell(c), deadline);
  int rc = coord_drain_name(c, deadline);
  c->stuck = rc != 0;
  /* Nothing here publishes any more. Hung up on now, the loops of other
   * workers (draining too, or not) are not redialed if they close first;
   * a process about to exit at once, a thread still inside the application,
   * skips it: nng's close waits for its poller, which took over a second
   * with a sibling's loop gone and two CPU hogs beside it. */
  bool exits_now = c->stuck && !m0__coord_all_exited(c) && c->proc->stop_fd < 0;
  /* Those hang-ups are nng closes, the first of the teardown: bounded from
   * here as the rest (host/top.h: nng 1.5.2's reaper can wait for ever; a
   * single host with a tls+tcp process actor hung here under load, the
   * main thread in nng_close and the reaper in a task wait). */
  m0__top_guard_arm(&c->top, rc);
  for (int i = 0; c->pub_open && !exits_now && i < c->pub.nloops; i++) m0__publisher_disconnect(&c->pub, i);
  return rc;
}

