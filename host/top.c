#include "host/top.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/errors.h"
#include "host/children.h"
#include "host/life.h"
#include "host/reload.h"
#include "host/signals.h"
#include "transport/systemd.h"

int m0__top_open_self(m0__top *t, uint32_t id, const char *who) {
  const m0__actor_desc *me = m0__topology_find(&t->proc->topo, id);
  if (!me || m0__actor_open(&t->self, me->id, me->url, t->proc->trace) != 0) {
    m0__say_cannot("cannot open the %s's mailbox at %s", who, me ? me->url : "(no address)");
    return M0__ETRANSPORT;
  }
  return 0;
}

int m0__top_open_publisher(m0__top *t, uint32_t sender, bool bridge) {
  m0__process *pr = t->proc;
  const m0_config *cfg = pr->cfg;
  if (m0__publisher_open(&t->pub, &pr->topo, &pr->page, pr->trace, sender) != 0) {
    m0__say_cannot("cannot open the publisher");
    return M0__ENOMEM;
  }
  t->pub_open = true;
  if (!cfg->bus_url[0]) return 0;
  char err[512];
  if (m0__bus_open(&t->bus, cfg->bus_url, cfg->bus_subject, &pr->page, &t->pub, bridge, err, sizeof err) != 0) {
    m0__say_cannot("%s", err);
    return M0__ETRANSPORT;
  }
  t->bus_open = true;
  t->pub.bus = &t->bus;
  return 0;
}

bool m0__top_producer(m0__top *t, const m0_producer *def, const m0_ctx *base) {
  m0__process *pr = t->proc;
  t->has_producer = def && (!def->wanted || def->wanted(base));
  if (!t->has_producer) return false;
  const m0__actor_desc *pd = m0__topology_find(&pr->topo, M0__ACTOR_ID(M0__ROLE_PRODUCER, 0));
  m0__producer_config pc = {.def = def, .ctx = *base, .pub = &t->pub, .url = pd->url, .coord_id = t->self.id,
                            .coord_url = t->self.url, .generation = pr->reload.generation, .lease_ms = t->drain_ms};
  m0__producer_init(&t->prod, &pc, &pr->exits);
  return true;
}

int m0__top_wait(m0__top *t, int64_t deadline, m0__msg *m) {
  /* A supervisor past its budget stops the host (said by host/children.c;
   * it wrote the exit descriptor once: a start still waiting for its
   * barrier sees it at its first wait serving). */
  if (t->serving && m0__children_failed(t->aa.children)) return M0__WAIT_STOP;
  int w = m0__process_wait(t->proc, t->self.open ? &t->self : NULL, deadline, m);
  if (w == M0__WAIT_EXIT && t->serving && m0__children_failed(t->aa.children)) return M0__WAIT_STOP;
  if (w == M0__WAIT_RELOAD) m0__reload_ask(t->proc, t->proc->reload_sig, t->serving);
  /* The next generation serves: this one drains, as on SIGTERM. */
  if (w == M0__WAIT_NEXT && m0__reload_next(t->proc) && t->serving) return M0__WAIT_STOP;
  return w;
}

bool m0__top_drain_begin(m0__top *t) {
  m0__app_actors_drain(&t->aa); /* no spawned instance restarted from now on */
  if (t->bus_open) m0__bus_stop(&t->bus); /* the loops stop: no more fleet frames */
  if (!t->has_producer || t->prod_done) return false;
  m0__handle *h = &t->prod.h;
  if (atomic_load(&h->failed) || m0__handle_exited(h) ||
      m0__send(&t->self, &t->prod_peer, M0__K_STOP, 0, 0, NULL, 0) != 0) {
    t->prod_done = true; /* nothing to drain, or cannot be told: its exit is all there is to wait for */
    return false;
  }
  return true;
}

void m0__top_stop_actors(m0__top *t, int64_t deadline) {
  if (t->actors_stopped) return;
  t->actors_stopped = true;
  m0__app_actors_stop(&t->aa, &t->self, deadline);
}

static bool top_actors_exited(m0__top *t) {
  for (int k = 0; k < t->aa.ninst; k++)
    if (!m0__handle_exited(&t->aa.inst[k].h)) return false;
  return true;
}

void m0__top_wait_actors(m0__top *t, int64_t until) {
  while (!top_actors_exited(t)) {
    m0__msg m;
    int w = m0__process_wait(t->proc, &t->self, until, &m);
    if (w == M0__WAIT_MSG) m0__msg_free(&m);
    if (w == M0__WAIT_TIMEOUT) return;
  }
}

int m0__top_name_actors(m0__top *t) {
  int n = 0;
  for (int k = 0; k < t->aa.ninst; k++) {
    m0__instance *in = &t->aa.inst[k];
    if (m0__handle_exited(&in->h)) continue;
    n++;
    fprintf(stderr, "m0: actor %s.%d did not stop within %ld ms%s; exiting anyway\n", in->svc->name, in->slot,
            t->drain_ms, atomic_load(&in->h.in_app) ? " (it is inside its receive)" : "");
  }
  return n;
}

bool m0__top_name_producer(m0__top *t) {
  if (!t->has_producer || t->prod_done) return false;
  fprintf(stderr, "m0: the producer did not stop within %ld ms%s; exiting anyway\n", t->drain_ms,
          atomic_load(&t->prod.h.in_app) ? " (it is inside its step)" : "");
  return true;
}

int m0__top_serve_end(m0__top *t, const char *what, int (*drain)(void *arg, int64_t bound), void *arg) {
  m0__process *pr = t->proc;
  bool top = !pr->inherit_dir; /* not a worker */
  t->serving = false;
  fprintf(stderr, "m0: %s (bound %ld ms)\n", what, t->drain_ms);
  /* (Handed over, the service goes on: its next generation is systemd's main pid.) */
  if (top && pr->stop_fd < 0 && !pr->reload.handed_over) m0__sd_notify("STOPPING=1");
  int64_t bound = m0__now_ms() + t->drain_ms;
  m0__reload_stop_next(pr); /* a SIGTERM during a reload: both generations drain */
  bool failed = m0__children_failed(t->aa.children); /* read before the drain frees them */
  int rc = drain(arg, bound);
  m0__reload_wait_next(pr, bound);
  if (rc == 0 && failed) rc = M0__EDIED; /* a supervisor gave up: exit 1, its line said why */
  if (rc == 0 && top) fprintf(stderr, "m0: drained, exit 0\n");
  return rc;
}

/* The watchdog: past the bound, the close or the teardown is stuck (in
 * nng's close: see the design notes); the process exits without them. */
static void *top_guard_main(void *arg) {
  m0__top *t = arg;
  m0__top_guard *g = &t->guard;
  pthread_mutex_lock(&g->mu);
  for (;;) {
    if (g->done) {
      pthread_mutex_unlock(&g->mu);
      return NULL;
    }
    int64_t left = g->until - m0__now_ms();
    if (left <= 0) break;
    struct timespec ts = m0__timespec_in(left);
    pthread_cond_timedwait(&g->cv, &g->mu, &ts);
  }
  /* The mutex stays held: the main thread, out of its close, waits here
   * (m0__top_end) rather than tear down beside this thread. */
  fprintf(stderr, "m0: the close and the teardown did not finish within %d ms of the drain's end; exiting "
                  "without them\n", M0__TOP_TEARDOWN_MS);
  if (!g->tearing) m0__process_teardown(t->proc, false); /* the run directory, the signals */
  m0__exit_now(g->code);
}

void m0__top_guard_arm(m0__top *t, int rc) {
  m0__top_guard *g = &t->guard;
  if (t->proc->stop_fd >= 0) return; /* embedded: the application's process, not ours to exit */
  if (g->armed) { /* armed at the drain's end: the code is the serving's, known only now */
    pthread_mutex_lock(&g->mu);
    g->code = m0__exit_code(rc);
    pthread_mutex_unlock(&g->mu);
    return;
  }
  g->until = m0__now_ms() + M0__TOP_TEARDOWN_MS;
  g->code = m0__exit_code(rc);
  g->done = g->tearing = false;
  pthread_mutex_init(&g->mu, NULL);
  m0__cond_init_monotonic(&g->cv);
  g->armed = pthread_create(&g->thread, NULL, top_guard_main, t) == 0;
  if (!g->armed) { /* no thread: unbounded, as before the guard */
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
  }
}

bool m0__top_close(m0__top *t, m0__handle **hs, int n) {
  bool clean = true;
  for (int k = 0; k < n; k++) clean &= !hs[k] || m0__handle_exited(hs[k]);
  bool front = t->aa.relays != NULL; /* the supervisor's: no thread instance, relays that publish */
  if (clean) {
    m0__peer_close(&t->prod_peer);
    if (t->bus_open) m0__bus_close(&t->bus); /* before the publisher its callbacks fan out through */
    t->bus_open = false;
    if (front) m0__app_actors_close(&t->aa); /* before the publisher their PUBLISH frames go through */
    if (t->pub_open) m0__publisher_close(&t->pub);
    t->pub_open = false;
  }
  m0__handles_close(hs, n, NULL);
  if (!clean) return false;
  m0__actor_close(&t->self);
  if (!front) m0__app_actors_close(&t->aa); /* its thread instances were joined with the handles */
  return true;
}

void m0__top_end(m0__top *t, bool clean, int rc) {
  m0__top_guard *g = &t->guard;
  if (g->armed) {
    pthread_mutex_lock(&g->mu); /* held by the watchdog for good once it fired: the process is exiting */
    g->tearing = true;
    pthread_mutex_unlock(&g->mu);
  }
  m0__process_teardown(t->proc, clean);
  if (g->armed) {
    pthread_mutex_lock(&g->mu);
    g->done = true;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->thread, NULL);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    g->armed = false;
  }
  if (!clean && t->proc->stop_fd < 0) /* a thread is still inside the application: do not wait for it */
    m0__exit_now(m0__exit_code(rc ? rc : M0__ESTUCK));
}
