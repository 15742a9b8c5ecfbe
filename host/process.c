#include "host/process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "runtime/admit.h"
#include "runtime/edges.h"
#include "runtime/recent.h"
#include "base/errors.h"
#include "host/signals.h"
#include "config/certs.h"
#include "transport/links.h"
#include "transport/listen.h"
#include "transport/systemd.h"
#include "base/clock.h"

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
  p->inherit_listen = p->inherit_plain = p->inherit_page = p->inherit_app_page = -1;
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

/* The plain listener beside HTTPS: systemd's second, the one a supervisor
 * or a predecessor passed (M0__PLAIN_FD: inherited as --port's is, so a
 * changed --plain-port takes a restart), else bound when --plain-port asks.
 * One passed to a generation whose configuration has none is closed. */
static int process_plain(m0__process *p, char *err, size_t errlen) {
  const char *v = getenv("M0__PLAIN_FD");
  int passed = v && atoi(v) >= 3 ? atoi(v) : -1;
  if (v) unsetenv("M0__PLAIN_FD"); /* ours, or nobody's: it goes no further than this process */
  long want = M0__CFG(p->cfg, plain_port);
  if (passed >= 0 && (want < 0 || p->inherit_plain >= 0)) close(passed);
  else if (passed >= 0) p->inherit_plain = passed;
  if (p->inherit_plain >= 0) {
    fcntl(p->inherit_plain, F_SETFD, FD_CLOEXEC);
    p->plain_fd = p->inherit_plain;
    p->plain_port = m0__listen_port(p->plain_fd);
  } else if (want >= 0 && !p->inherit_dir) { /* a worker serves its supervisor's, or none */
    p->plain_fd = m0__listen(M0__CFGS(p->cfg, host), (int)want, 4096, &p->plain_port, err, errlen);
    if (p->plain_fd < 0) return M0__EBIND;
  }
  return 0;
}

/* The listeners (made, or inherited) and the stop: the embedder's pipe or
 * the signals. */
static int process_listen(m0__process *p) {
  char err[1024];
  if (process_plain(p, err, sizeof err) != 0) {
    m0__say_cannot("%s (--plain-port)", err);
    return M0__EBIND;
  }
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
   * first host's page holds them (runtime/admit.h). */
  p->tables_user = true;
  if ((p->tables_owner = m0__refusals_attach(p->page.refusals, M0__PAGE_REFUSAL_LINES))) {
    m0__edges_attach(p->page.edges, M0__PAGE_EDGE_LINES);
    m0__edges_attach_rates(p->page.observed);
    m0__recent_attach(p->page.traces);
  }
  /* The family's cookie (runtime/admit.h): a worker's is its supervisor's. */
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
  p->listen_fd = p->plain_fd = -1;
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
  /* HTTPS: one context for the process's loops, its ticket keys from the
   * cookie just made or inherited (so every worker resumes the others'). */
  if (M0__CFGS(cfg, certfile)[0] && !(p->tls = m0__certs_ctx(cfg, err, sizeof err))) {
    fprintf(stderr, "m0: %s\n", err);
    return M0__ECONFIG;
  }
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
