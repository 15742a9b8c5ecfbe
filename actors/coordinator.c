/* The coordinator actor: m0_serve. It owns start-up, the signals and the
 * drain, and lives on the thread that called m0_serve.
 *
 * Design notes
 * - Order: read the configuration (exit 2), run the checks (exit 78), then
 *   make the run directory and the shared page, bind the listener (exit 1),
 *   open the mailbox, start the loops and the producer, wait for every READY
 *   (a FAILED is exit 78 with nothing served), open the barrier (GO).
 * - Signals: a handler writes one byte to a pipe; the coordinator polls that
 *   pipe and its mailbox. So nothing but the coordinator reacts to a signal,
 *   and it behaves the same as PID 1 (a handler is installed).
 * - The drain has ONE bound (--drain-timeout-ms) shared by the loops and the
 *   producer, counted from the first signal. Whoever is still inside the
 *   application after it is named and the process exits 1 anyway.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "actors/actor.h"
#include "actors/checks.h"
#include "actors/config.h"
#include "actors/errors.h"
#include "actors/loop.h"
#include "actors/producer.h"
#include "actors/trace.h"
#include "transport/listen.h"
#include "transport/page.h"
#include "transport/rundir.h"
#include "transport/topology.h"

int m0__doctor(const m0_config *cfg, const m0_app *app, const m0__check *checks, int first_fail);

static int coord_sigpipe[2] = {-1, -1};

static void coord_on_signal(int sig) {
  int saved = errno;
  unsigned char b = (unsigned char)sig;
  if (write(coord_sigpipe[1], &b, 1) < 0) { /* the pipe is full: a signal is already pending */ }
  errno = saved;
}

static int coord_signals_install(void) {
  if (pipe2(coord_sigpipe, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = coord_on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  return 0;
}

static void coord_signals_restore(void) {
  signal(SIGTERM, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  close(coord_sigpipe[0]);
  close(coord_sigpipe[1]);
  coord_sigpipe[0] = coord_sigpipe[1] = -1;
}

static int64_t coord_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct coord {
  const m0_app *app;
  const m0_producer *producer;
  m0_config cfg;
  m0__topology topo;
  m0__rundir rundir;
  m0__page page;
  m0__tracer *trace;
  m0__actor self;
  m0__loop *loops;
  int nloops;
  m0__peer *loop_peers;
  m0_publisher pub;
  bool pub_open;
  m0__producer_run prod;
  m0__peer prod_peer;
  bool has_producer;
  int listen_fd, port;
} coord;

/* A loop or the producer whose thread ended without saying STOPPED died. */
static int coord_dead(coord *c) {
  for (int i = 0; i < c->nloops; i++)
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
    int rv = m0__recv(&c->self, m, true);
    if (rv == 0) return 1;
    if (rv == M0__EBADMSG) {
      fprintf(stderr, "m0: coordinator: dropped a malformed message\n");
      continue;
    }
    if (coord_dead(c) >= 0) return 3;
    struct pollfd p[2] = {{coord_sigpipe[0], POLLIN, 0}, {fd, POLLIN, 0}};
    int64_t left = deadline - coord_now_ms();
    if (left <= 0) return 0;
    /* Wake at least every 100 ms to notice a thread that ended silently. */
    if (poll(p, 2, left > 100 ? 100 : (int)left) < 0 && errno != EINTR) return 0;
    if (p[0].revents & POLLIN) {
      unsigned char b;
      while (read(coord_sigpipe[0], &b, 1) == 1) {}
      return 2;
    }
  }
}

static const char *coord_who(uint32_t id, char *buf, size_t n) {
  m0__actor_name(id, buf, n);
  return buf;
}

/* Sends STOP to every loop and the producer; waits for every STOPPED within
 * the one bound. Returns 0, or 1 when someone did not finish. */
static int coord_drain(coord *c, int64_t deadline) {
  int waiting = 0;
  bool *done = calloc((size_t)c->nloops + 1, sizeof *done);
  for (int i = 0; i < c->nloops; i++) {
    if (!atomic_load(&c->loops[i].exited) && m0__send(&c->self, &c->loop_peers[i], M0__K_STOP, 0, 0, NULL, 0) == 0)
      waiting++;
    else done[i] = true;
  }
  if (c->has_producer) {
    if (!atomic_load(&c->prod.exited) && m0__send(&c->self, &c->prod_peer, M0__K_STOP, 0, 0, NULL, 0) == 0)
      waiting++;
    else done[c->nloops] = true;
  }
  while (waiting > 0) {
    m0__msg m;
    int w = coord_wait(c, deadline, &m);
    if (w == 0) break;
    if (w == 2) {
      fprintf(stderr, "m0: already draining; the bound is %ld ms\n", M0__CFG(&c->cfg, drain_timeout_ms));
      continue;
    }
    if (w == 3) { /* a loop ended without STOPPED: nothing more will come from it */
      int i = coord_dead(c);
      fprintf(stderr, "m0: loop %d ended during the drain\n", i);
      if (!done[i]) waiting--;
      done[i] = true;
      atomic_store(&c->loops[i].said_stopped, true); /* counted once */
      continue;
    }
    int role = M0__ACTOR_ROLE(m.env.from), idx = M0__ACTOR_INDEX(m.env.from);
    if (m.env.kind == M0__K_STOPPED) {
      int k = role == M0__ROLE_LOOP && idx < c->nloops ? idx : role == M0__ROLE_PRODUCER ? c->nloops : -1;
      if (k >= 0 && !done[k]) {
        done[k] = true;
        waiting--;
        if (role == M0__ROLE_LOOP && m.len == sizeof(m0__loop_stats)) {
          m0__loop_stats st;
          memcpy(&st, m.payload, sizeof st);
          fprintf(stderr,
                  "m0: loop %d drained: %llu requests, %llu connections, %llu refused, %llu timed out, "
                  "%llu handed off, %llu taken over\n",
                  idx, (unsigned long long)st.requests, (unsigned long long)st.accepted,
                  (unsigned long long)st.errors_4xx, (unsigned long long)st.timeouts, (unsigned long long)st.handed,
                  (unsigned long long)st.adopted);
        }
      }
    }
    m0__msg_free(&m);
  }
  int rc = 0;
  for (int i = 0; i <= c->nloops; i++) {
    if (i == c->nloops && !c->has_producer) break;
    if (done[i]) continue;
    char who[32];
    if (i < c->nloops)
      fprintf(stderr, "m0: %s did not finish its drain within %ld ms; exiting anyway\n",
              coord_who(M0__ACTOR_ID(M0__ROLE_LOOP, i), who, sizeof who), M0__CFG(&c->cfg, drain_timeout_ms));
    else
      fprintf(stderr, "m0: the producer %s did not stop within %ld ms; exiting anyway\n",
              atomic_load(&c->prod.in_step) ? "(inside its step)" : "", M0__CFG(&c->cfg, drain_timeout_ms));
    rc = 1;
  }
  free(done);
  return rc;
}

/* Joins the threads that finished; an unfinished one is left behind (the
 * process is about to exit). */
static void coord_join(coord *c) {
  for (int i = 0; i < c->nloops; i++)
    if (c->loops[i].started && atomic_load(&c->loops[i].exited)) pthread_join(c->loops[i].thread, NULL);
  if (c->has_producer && c->prod.started && atomic_load(&c->prod.exited)) pthread_join(c->prod.thread, NULL);
}

static bool coord_all_exited(coord *c) {
  for (int i = 0; i < c->nloops; i++)
    if (c->loops[i].started && !atomic_load(&c->loops[i].exited)) return false;
  if (c->has_producer && c->prod.started && !atomic_load(&c->prod.exited)) return false;
  return true;
}

static void coord_cleanup(coord *c) {
  if (coord_all_exited(c)) {
    coord_join(c);
    for (int i = 0; i < c->nloops; i++) m0__peer_close(&c->loop_peers[i]);
    if (c->has_producer) m0__peer_close(&c->prod_peer);
    if (c->pub_open) m0__publisher_close(&c->pub);
    m0__actor_close(&c->self);
    free(c->loops);
    free(c->loop_peers);
    m0__page_close(&c->page);
  }
  m0__rundir_close(&c->rundir);
  m0__topology_free(&c->topo);
  if (c->trace) m0__tracer_free(c->trace);
  coord_signals_restore();
}

static int coord_serve(coord *c) {
  m0_config *cfg = &c->cfg;
  char err[1024];
  long drain_ms = M0__CFG(cfg, drain_timeout_ms);
  if (m0__rundir_open(&c->rundir, M0__CFGS(cfg, run_dir), err, sizeof err) != 0) {
    fprintf(stderr, "m0: %s\n", err);
    return 1;
  }
  c->nloops = (int)M0__CFG(cfg, threads);
  size_t app_slots = c->app->page_slots ? c->app->page_slots(c->nloops) : 0;
  if (m0__page_create(&c->page, c->rundir.path, c->nloops, app_slots, err, sizeof err) != 0) {
    fprintf(stderr, "m0: %s\n", err);
    return 1;
  }
  char ns[64];
  snprintf(ns, sizeof ns, "m0-%d", (int)getpid());
  m0__mode mode = c->nloops > 1 ? M0__MODE_THREADS : M0__MODE_SINGLE;
  if (m0__topology_build(&c->topo, mode, c->nloops, 0, M0__SCHEME_INPROC, ns) != 0) {
    fprintf(stderr, "m0: cannot build the topology\n");
    return 1;
  }
  if (M0__CFGS(cfg, trace)[0]) c->trace = m0__tracer_new(M0__CFGS(cfg, trace));
  c->listen_fd = m0__listen(M0__CFGS(cfg, host), (int)M0__CFG(cfg, port), 4096, &c->port, err, sizeof err);
  if (c->listen_fd < 0) {
    fprintf(stderr, "m0: %s\n", err);
    return 1;
  }
  if (coord_signals_install() != 0) {
    fprintf(stderr, "m0: cannot install signal handlers\n");
    return 1;
  }
  const m0__actor_desc *me = m0__topology_find(&c->topo, M0__ACTOR_ID(M0__ROLE_COORD, 0));
  if (m0__actor_open(&c->self, me->id, me->url, c->trace) != 0) {
    fprintf(stderr, "m0: cannot open the coordinator's mailbox at %s\n", me->url);
    return 1;
  }
  c->loops = calloc((size_t)c->nloops, sizeof *c->loops);
  c->loop_peers = calloc((size_t)c->nloops, sizeof *c->loop_peers);
  if (!c->loops || !c->loop_peers) return 1;
  c->has_producer = c->producer != NULL;
  m0_ctx base = {.worker = 0, .workers = c->nloops, .thread = -1, .threaded = c->nloops > 1,
                 .capacity = (int)M0__CFG(cfg, max_connections), .page = c->page.app,
                 .page_slots = app_slots, .config = cfg, .publisher = &c->pub};
  if (m0__publisher_open(&c->pub, &c->topo, &c->page, c->trace, (int)drain_ms) != 0) {
    fprintf(stderr, "m0: cannot open the publisher\n");
    return 1;
  }
  c->pub_open = true;
  if (c->has_producer && c->producer->wanted && !c->producer->wanted(&base)) c->has_producer = false;
  for (int i = 0; i < c->nloops; i++) {
    m0__loop *l = &c->loops[i];
    l->index = i;
    l->topo = &c->topo;
    l->cfg = cfg;
    l->app = c->app;
    l->trace = c->trace;
    l->page = &c->page;
    l->listen_fd = i == 0 ? c->listen_fd : dup(c->listen_fd);
    l->ctx = base;
    l->ctx.worker = i;
    const m0__actor_desc *d = m0__topology_find(&c->topo, M0__ACTOR_ID(M0__ROLE_LOOP, i));
    if (m0__loop_start(l) != 0 || m0__peer_open(&c->loop_peers[i], d->id, d->url, (int)drain_ms) != 0) {
      fprintf(stderr, "m0: cannot start loop %d\n", i);
      return 1;
    }
  }
  if (c->has_producer) {
    if (m0__peer_open(&c->prod_peer, M0__ACTOR_ID(M0__ROLE_PRODUCER, 0), c->pub.self.url, (int)drain_ms) != 0) {
      fprintf(stderr, "m0: cannot reach the producer's mailbox\n");
      return 1;
    }
    c->prod.def = c->producer;
    c->prod.ctx = base;
    c->prod.pub = &c->pub;
    c->prod.coord_url = me->url;
    if (m0__producer_start(&c->prod) != 0) {
      fprintf(stderr, "m0: cannot start the producer\n");
      return 1;
    }
  }
  /* The barrier: every loop and the producer report before anyone serves. */
  int want = c->nloops + (c->has_producer ? 1 : 0), ready = 0;
  int64_t forever = INT64_MAX / 2;
  while (ready < want) {
    m0__msg m;
    int w = coord_wait(c, forever, &m);
    if (w == 2) {
      fprintf(stderr, "m0: stopped while starting\n");
      return coord_drain(c, coord_now_ms() + drain_ms) ? 1 : 0;
    }
    if (w == 3) {
      fprintf(stderr, "m0: a loop ended while starting\n");
      coord_drain(c, coord_now_ms() + drain_ms);
      return 1;
    }
    if (w != 1) continue;
    if (m.env.kind == M0__K_READY) {
      ready++;
    } else if (m.env.kind == M0__K_FAILED || m.env.kind == M0__K_DIED) {
      fprintf(stderr, "m0: %.*s\n", (int)m.len, (const char *)m.payload);
      int code = m.env.kind == M0__K_FAILED ? 78 : 1;
      m0__msg_free(&m);
      coord_drain(c, coord_now_ms() + drain_ms);
      return code;
    }
    m0__msg_free(&m);
  }
  for (int i = 0; i < c->nloops; i++) {
    if (m0__send(&c->self, &c->loop_peers[i], M0__K_GO, 0, 0, NULL, 0) != 0) {
      fprintf(stderr, "m0: cannot reach loop %d\n", i);
      coord_drain(c, coord_now_ms() + drain_ms);
      return 1;
    }
  }
  if (c->has_producer) m0__send(&c->self, &c->prod_peer, M0__K_GO, 0, 0, NULL, 0);
  const char *host = M0__CFGS(cfg, host);
  bool v6 = strchr(host, ':') && host[0] != '[';
  fprintf(stderr, "m0: %s listening on http://%s%s%s:%d (%s, %d loop%s, pid %d)\n", c->app->name,
          v6 ? "[" : "", host, v6 ? "]" : "", c->port, m0__mode_name(c->topo.mode), c->nloops,
          c->nloops == 1 ? "" : "s", (int)getpid());
  /* Serving: wait for a signal, or a loop that dies. */
  for (;;) {
    m0__msg m;
    int w = coord_wait(c, forever, &m);
    if (w == 2) break;
    if (w == 3) {
      fprintf(stderr, "m0: loop %d ended while serving\n", coord_dead(c));
      coord_drain(c, coord_now_ms() + drain_ms);
      return 1;
    }
    if (w != 1) continue;
    if (m.env.kind == M0__K_DIED) {
      fprintf(stderr, "m0: %.*s\n", (int)m.len, (const char *)m.payload);
      m0__msg_free(&m);
      coord_drain(c, coord_now_ms() + drain_ms);
      return 1;
    }
    m0__msg_free(&m);
  }
  fprintf(stderr, "m0: draining (bound %ld ms)\n", drain_ms);
  int rc = coord_drain(c, coord_now_ms() + drain_ms);
  if (rc == 0) fprintf(stderr, "m0: drained, exit 0\n");
  return rc;
}

int m0_serve(const m0_app *app, const m0_producer *producer, int argc, char **argv) {
  coord *c = calloc(1, sizeof *c);
  if (!c) return 1;
  c->app = app;
  c->producer = producer;
  c->listen_fd = -1;
  char why[1200];
  const char *prog = argc > 0 ? argv[0] : "m0";
  int rc;
  if (m0__config_load(&c->cfg, argc, argv, why, sizeof why) != 0) {
    m0__config_usage(stderr, prog);
    fprintf(stderr, "m0: %s\n", why);
    free(c);
    return 2;
  }
  if (c->cfg.help) {
    m0__config_usage(stdout, prog);
    free(c);
    return 0;
  }
  if (c->cfg.version) {
    printf("m0 %s (nng %s, libuv %s)\n", M0_VERSION_STRING, nng_version(), uv_version_string());
    free(c);
    return 0;
  }
  m0__check checks[M0__CHECK_COUNT];
  int first = m0__checks_run(&c->cfg, app, checks);
  if (c->cfg.doctor) {
    rc = m0__doctor(&c->cfg, app, checks, first);
    free(c);
    return rc;
  }
  if (first >= 0) {
    fprintf(stderr, "m0: %s (%s)\n", checks[first].detail, checks[first].fix);
    free(c);
    return 78;
  }
  /* Access-log lines leave one at a time, not at exit. */
  if (M0__CFG(&c->cfg, access_log)) setvbuf(stdout, NULL, _IOLBF, 0);
  rc = coord_serve(c);
  coord_cleanup(c);
  if (rc != 0 && !coord_all_exited(c)) {
    fflush(NULL);
    _exit(rc); /* a thread is still inside the application: do not wait for it */
  }
  free(c);
  return rc;
}
