#include "host/process.h"

#include <errno.h>
#include <poll.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "actors/admit.h"
#include "actors/edges.h"
#include "actors/recent.h"
#include "base/errors.h"
#include "host/signals.h"
#include "transport/links.h"
#include "transport/listen.h"
#include "transport/systemd.h"

int64_t m0__now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void m0__say_cannot(const char *fmt, ...) {
  char what[1024], spent[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  m0__fds_spent(spent, sizeof spent);
  fprintf(stderr, "m0: %s%s\n", what, spent);
}

void m0__process_describe(m0__process *p, const m0_app *app, const m0_config *cfg) {
  memset(p, 0, sizeof *p);
  p->app = app;
  p->cfg = cfg;
  int threads = M0__CFG(cfg, threads) > 0 ? (int)M0__CFG(cfg, threads) : 1;
  p->mode = M0__CFG(cfg, workers) > 1 ? M0__MODE_PREFORK : threads > 1 ? M0__MODE_THREADS : M0__MODE_SINGLE;
  p->loops = p->mode == M0__MODE_PREFORK ? (int)M0__CFG(cfg, workers) : threads;
  p->pool = M0__CFG(cfg, blocking_threads) > 0 ? (int)M0__CFG(cfg, blocking_threads) : 0;
  p->inherit_listen = p->inherit_page = p->inherit_app_page = -1;
  p->stop_fd = -1;
  p->children = p->mode == M0__MODE_PREFORK;
  p->reload.generation = 1;
  p->reload.prev_fd = p->reload.next_fd = p->reload.succ_fd = -1;
  p->reload.chan_fd = p->reload.master_fd = -1;
  p->reload.next_deadline = INT64_MAX;
}

/* Generation N > 1 listens in <run-dir>/gN while its predecessor still
 * listens in its own (host/reload.h); the top process makes it. */
static int process_sockets(m0__process *p) {
  p->sockdir = p->rundir.path;
  if (p->reload.generation < 2) return 0;
  int n = snprintf(p->sockets.path, sizeof p->sockets.path, "%s/g%llu", p->rundir.path,
                   (unsigned long long)p->reload.generation);
  if (n >= (int)sizeof p->sockets.path) {
    fprintf(stderr, "m0: the run directory's path is too long for generation %llu's sockets\n",
            (unsigned long long)p->reload.generation);
    return M0__ERUNDIR;
  }
  if (!p->inherit_dir) { /* the top process: made here, removed at its exit */
    if (mkdir(p->sockets.path, 0700) != 0 && errno != EEXIST) {
      fprintf(stderr, "m0: cannot make %s: %s\n", p->sockets.path, strerror(errno));
      return M0__ERUNDIR;
    }
    p->sockets.made = p->sockets.ours = true;
  }
  p->sockdir = p->sockets.path;
  return 0;
}

/* The listener (made, or inherited) and the stop: the embedder's pipe or
 * the signals. */
static int process_listen(m0__process *p) {
  char err[1024];
  if (p->inherit_listen >= 0) {
    p->listen_fd = p->inherit_listen;
    p->port = m0__listen_port(p->listen_fd);
  } else {
    p->listen_fd = m0__listen(M0__CFGS(p->cfg, host), (int)M0__CFG(p->cfg, port), 4096, &p->port, err, sizeof err);
    if (p->listen_fd < 0) {
      m0__say_cannot("%s", err);
      return M0__EBIND;
    }
  }
  if ((p->sigfd = p->stop_fd >= 0 ? p->stop_fd : m0__signals_install(p->children)) < 0) {
    m0__say_cannot("cannot install signal handlers");
    return M0__EINVALID;
  }
  return 0;
}

/* The run directory (made, or a worker's and a next generation's
 * inherited), the shared page in it, and the family's cookie. */
static int process_page(m0__process *p) {
  const m0_config *cfg = p->cfg;
  char err[1024];
  if (p->inherit_dir) snprintf(p->rundir.path, sizeof p->rundir.path, "%s", p->inherit_dir);
  else if (p->upgrade_dir[0]) { /* a next generation: its predecessor's, and so the first one's */
    snprintf(p->rundir.path, sizeof p->rundir.path, "%s", p->upgrade_dir);
    p->rundir.made = p->upgrade_dir_made;
  } else if (m0__rundir_open(&p->rundir, M0__CFGS(cfg, run_dir), err, sizeof err) != 0) {
    fprintf(stderr, "m0: %s\n", err);
    return M0__ERUNDIR;
  }
  /* A child process the application starts finds the host here (m0pub).
   * Set before nng starts any thread; an embedded host leaves the
   * environment alone. */
  if (!p->inherit_dir && p->stop_fd < 0) setenv("M0_RUN_DIR", p->rundir.path, 1);
  size_t app_slots = p->app->page_slots ? p->app->page_slots(p->loops) : 0;
  int rv = p->inherit_page >= 0 ? m0__page_attach_fd(&p->page, p->inherit_page, p->inherit_app_page, err, sizeof err)
                                : m0__page_create(&p->page, p->rundir.path, p->loops, app_slots, err, sizeof err);
  if (rv != 0) {
    fprintf(stderr, "m0: %s\n", err);
    return M0__EPAGE;
  }
  p->page_made = true;
  if (p->page.head->loops != (uint32_t)p->loops) { /* a next generation's page is its predecessor's */
    fprintf(stderr, "m0: the serving generation has %u loops and this configuration %d: that needs a restart\n",
            p->page.head->loops, p->loops);
    return M0__ECONFIG;
  }
  m0__page_use_bank(&p->page, p->reload.generation);
  /* The bank was generation N-2's, which has exited (host/reload.h): its
   * counts start clean (a worker's line is cleared by its supervisor). */
  if (p->reload.generation > 1 && !p->inherit_dir) memset(p->page.lines, 0, (size_t)p->loops * sizeof *p->page.lines);
  /* The refusal, edge and recent-trace tables are the process's: the
   * first host's page holds them (actors/admit.h). */
  p->tables_user = true;
  if ((p->tables_owner = m0__refusals_attach(p->page.refusals, M0__PAGE_REFUSAL_LINES))) {
    m0__edges_attach(p->page.edges, M0__PAGE_EDGE_LINES);
    m0__recent_attach(p->page.traces);
  }
  /* The family's cookie (actors/admit.h): a worker's is its supervisor's. */
  if (p->inherit_dir ? m0__family_inherit(getenv("M0__COOKIE")) != 0
                     : !m0__family_known() && m0__family_make() != 0) {
    fprintf(stderr, p->inherit_dir ? "m0: a worker was started without the host's cookie (M0__COOKIE)\n"
                                   : "m0: cannot make the host's cookie (getrandom failed)\n");
    return M0__ECONFIG;
  }
  return 0;
}

int m0__process_setup(m0__process *p) {
  const m0_config *cfg = p->cfg;
  char err[1024];
  p->listen_fd = -1;
  p->sigfd = -1;
  p->exits.fd = -1;
  /* libuv makes a process-wide signal pipe at the first uv_loop_init and
   * abort()s when it cannot (a loop starting with the descriptors spent was
   * SIGABRT, not its reason): a loop made and closed here, first, makes it
   * while descriptors are still free. */
  uv_loop_t first;
  if (uv_loop_init(&first) == 0) uv_loop_close(&first);
  /* The checks refused what does not resolve; a failure here is memory. */
  if (m0__app_decl_make(&p->decl, p->app, cfg, err, sizeof err) != 0) {
    fprintf(stderr, "m0: %s\n", err);
    return M0__ECONFIG;
  }
  p->decl_made = true;
  p->served = *p->app;
  if (p->decl.nroutes) { /* an app with only a handle keeps routes NULL */
    p->served.routes = p->decl.routes;
    p->served.nroutes = p->decl.nroutes;
  }
  p->app = &p->served;
  int rv = process_page(p);
  if (rv != 0) return rv;
  /* Its page, or (a next generation) its predecessor's, which it removes
   * at exit with the sockets unless a generation after it took them on. */
  p->rundir.ours = p->inherit_page < 0 || p->upgrade_dir[0];
  if ((rv = process_sockets(p)) != 0) return rv;
  /* This process's TLS identity (a topology file's "tls"), before any
   * actor opens a socket: tls+tcp:// links present it (transport/links.h). */
  if (cfg->tls_cert[0] && m0__links_tls(cfg->tls_cert, cfg->tls_key, cfg->tls_ca, err, sizeof err) != 0) {
    fprintf(stderr, "m0: %s\n", err);
    return M0__ECONFIG;
  }
  /* Keyed by the host, not the pid alone: two hosts in one process (an
   * embedder's) serve side by side; the struct's address tells them apart
   * while both live. */
  snprintf(p->inproc_ns, sizeof p->inproc_ns, "m0-%d.%llx", (int)getpid(), (unsigned long long)(uintptr_t)p);
  if (m0__topology_make(&p->topo, p->mode, p->loops, p->pool, p->cfg->topo_transport,
                        (const char(*)[256])cfg->topo_urls, cfg->ntopo_urls, p->sockdir, p->inproc_ns) != 0) {
    fprintf(stderr, "m0: cannot build the topology (run directory path too long?)\n");
    return M0__ETOOBIG;
  }
  p->topo_made = true;
  if ((rv = process_listen(p)) != 0) return rv;
  if (m0__exits_init(&p->exits) != 0) {
    m0__say_cannot("cannot make the exit descriptor");
    return M0__ENOMEM;
  }
  return 0;
}

void m0__process_trace(m0__process *p, uint32_t process) {
  p->trace = m0__tracer_new(M0__CFGS(p->cfg, trace), process); /* off without --trace, until m0trace says */
}

/* The stop pipe or the signals said something: what the wait returns, or
 * -1 to wait on. */
static int process_signalled(m0__process *p) {
  if (p->stop_fd >= 0) {
    char b;
    return read(p->stop_fd, &b, 1) >= 0 ? M0__WAIT_STOP : -1;
  }
  int sig = m0__signals_take();
  /* Handed over: this pid is the one a supervisor knows, and the
   * signal is meant for the generation that serves now. */
  if (p->reload.handed_over && !p->inherit_dir) {
    m0__reload_forward(p, sig);
    sig &= ~(M0__SIG_HUP | M0__SIG_USR2 | M0__SIG_USR1);
  }
  if (sig & M0__SIG_STOP) return M0__WAIT_STOP;
  /* Only the top process reloads; a reload that came with a death
   * is answered at the next wait, once the supervisor has reaped. */
  if ((sig & (M0__SIG_HUP | M0__SIG_USR2 | M0__SIG_USR1)) && !p->inherit_dir) {
    p->reload_sig = sig & M0__SIG_USR2 ? M0__SIG_USR2 : sig & M0__SIG_HUP ? M0__SIG_HUP : M0__SIG_USR1;
    if (!(sig & M0__SIG_CHILD)) return M0__WAIT_RELOAD;
    p->reload_pending = true;
  }
  return sig & M0__SIG_CHILD ? M0__WAIT_CHILD : -1;
}

/* poll's timeout until deadline or a next generation's start bound (-1:
 * none, -2: deadline passed); *next that bound. */
static int process_timeout(m0__process *p, int64_t deadline, int64_t *next) {
  int64_t now = m0__now_ms(), left = deadline == INT64_MAX ? -1 : deadline - now;
  if (deadline != INT64_MAX && left <= 0) return -2;
  *next = m0__reload_deadline(p); /* a next generation's start is bounded */
  if (*next != INT64_MAX && (left < 0 || *next - now < left)) left = *next > now ? *next - now : 0;
  return left < 0 ? -1 : left > 1000000 ? 1000000 : (int)left;
}

int m0__process_wait(m0__process *p, m0__actor *self, int64_t deadline, m0__msg *m) {
  int fd = -1;
  if (self && self->open) m0__actor_recv_fd(self, &fd);
  if (p->reload_pending) {
    p->reload_pending = false;
    return M0__WAIT_RELOAD;
  }
  for (;;) {
    if (fd >= 0) {
      int rv = m0__recv(self, m, M0__RECV_NOWAIT);
      if (rv == 0) return M0__WAIT_MSG;
      if (rv == M0__EBADMSG) continue; /* refused, counted and named (actors/admit.h) */
    }
    struct pollfd pf[4] = {
        {p->sigfd, POLLIN, 0}, {p->exits.fd, POLLIN, 0}, {fd, POLLIN, 0}, {p->reload.next_fd, POLLIN, 0}};
    int64_t next = INT64_MAX;
    int timeout = process_timeout(p, deadline, &next);
    if (timeout == -2) return M0__WAIT_TIMEOUT;
    int n = poll(pf, 4, timeout);
    if (next != INT64_MAX && m0__now_ms() >= next) {
      m0__reload_overdue(p); /* may have closed next_fd: poll again */
      continue;
    }
    if (n < 0 && errno != EINTR) return M0__WAIT_TIMEOUT;
    if (n <= 0) continue;
    int said = pf[0].revents & POLLIN ? process_signalled(p) : -1;
    if (said >= 0) return said;
    if (pf[1].revents & POLLIN) {
      m0__exits_take(&p->exits);
      return M0__WAIT_EXIT;
    }
    if (pf[3].revents & (POLLIN | POLLHUP)) return M0__WAIT_NEXT;
  }
}

void m0__process_banner(m0__process *p, int first, int here) {
  if (p->inherit_dir) { /* a worker: the supervisor says the rest */
    fprintf(stderr, "m0: worker %d serving (pid %d)\n", first, (int)getpid());
    return;
  }
  char host[64];
  m0__listen_host(p->listen_fd, M0__CFGS(p->cfg, host), host, sizeof host); /* a handed-over one's own */
  if (p->mode == M0__MODE_PREFORK)
    fprintf(stderr,
            "m0: %s listening on http://%s:%d (prefork, %d workers, %d pool threads per loop, pid %d, generation "
            "%llu)\n",
            p->app->name, host, p->port, p->loops, p->pool, (int)getpid(), (unsigned long long)p->reload.generation);
  else
    fprintf(stderr, "m0: %s listening on http://%s:%d (%s, %d loop%s, %d pool thread%s per loop, pid %d, generation %llu)\n",
            p->app->name, host, p->port, m0__mode_name(p->mode), here, here == 1 ? "" : "s", p->pool,
            p->pool == 1 ? "" : "s", (int)getpid(), (unsigned long long)p->reload.generation);
  p->said_serving = true;
  if (p->stop_fd < 0) m0__reload_serving(p); /* READY=1, and a predecessor told */
}

void m0__process_teardown(m0__process *p, bool clean) {
  if (clean) {
    bool last = !p->tables_user || m0__refusals_release();
    p->tables_user = false;
    /* Another host of this process still counts into the tables on this
     * page: its mapping stays (the run directory goes), never unmapped
     * under a thread of theirs. */
    if (p->page_made && p->tables_owner && !last) p->page.head = NULL;
    if (p->page_made) m0__page_close(&p->page);
    if (p->trace) m0__tracer_free(p->trace);
    p->trace = NULL;
    p->page_made = false;
  }
  if (!p->inherit_dir) {
    m0__rundir_close(&p->sockets); /* a generation's own (N > 1) */
    /* Handed over: the next generation's now. A next generation that
     * never served (a refused reload) leaves it to the one that serves. */
    if (!p->reload.handed_over && (p->reload.generation < 2 || p->said_serving)) m0__rundir_close(&p->rundir);
  }
  if (p->topo_made) m0__topology_free(&p->topo);
  p->topo_made = false;
  /* The master-to-be keeps its handlers, the signals blocked (host/master.h). */
  bool hold = p->stop_fd < 0 && p->sigfd >= 0 && !p->inherit_dir && m0__reload_hold();
  if (p->stop_fd < 0 && p->sigfd >= 0 && !hold) m0__signals_restore();
  p->sigfd = -1;
  if (clean) m0__exits_fini(&p->exits);
  if (clean && p->decl_made) m0__app_decl_free(&p->decl);
  p->decl_made = !clean && p->decl_made;
}
