/* m0_serve: read the configuration, run the checks (or the doctor), and hand
 * the process to its role: the coordinator (single, threads), the
 * supervisor (prefork), or — in a spawned child — a worker's coordinator. */
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <nng/nng.h>
#include <uv.h>

#include "base/errors.h"
#include "config/certs.h"
#include "config/checks.h"
#include "config/options.h"
#include "config/topofile.h"
#include "host/children.h"
#include "host/coordinator.h"
#include "host/master.h"
#include "host/reload.h"
#include "host/supervisor.h"
#include "host/title.h"
#include "transport/systemd.h"

int m0__doctor(const m0_config *cfg, const m0_app *app, const m0__check *checks, int first_fail);

/* A spawned worker: its index, descriptors and run directory come from the
 * supervisor in M0__ variables (host/supervisor.c writes them). */
static int serve_worker(const m0_app *app, m0_config *cfg, const char *index) {
  const char *fds = getenv("M0__FDS"), *dir = getenv("M0__RUN_DIR");
  int loops = (int)M0__CFG(cfg, workers);
  int n = 0, v[3 + 2 * 1024];
  for (const char *s = fds; s && *s && n < 3 + 2 * loops;) {
    char *end;
    v[n++] = (int)strtol(s, &end, 10);
    s = *end == ',' ? end + 1 : end;
    if (end == s && *s) break;
  }
  int i = atoi(index);
  /* A worker outlives no supervisor: if it dies (even by SIGKILL) the worker
   * drains as on SIGTERM. It may have died before this line: check. */
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  const char *sup = getenv("M0__SUPERVISOR");
  if (!sup || getppid() != (pid_t)atol(sup)) {
    fprintf(stderr, "m0: worker %d: the supervisor is gone; exiting\n", i);
    return 1;
  }
  if (!dir || n != 3 + 2 * loops || i < 0 || i >= loops) {
    fprintf(stderr, "m0: a worker was started without what the supervisor passes (M0__FDS, M0__RUN_DIR)\n");
    return 1;
  }
  /* HTTPS: the bytes the supervisor's check read; without them the loops'
   * context is refused (config/certs.h), the paths are never read here. */
  if (getenv("M0__CERTS_FD")) m0__certs_inherit(cfg, getenv("M0__CERTS_FD"));
  m0__proc p = {.producer = NULL, .first = i, .here = 1, .handoff = &v[3]};
  m0__process_describe(&p.proc, app, cfg);
  p.proc.children = false; /* the supervisor reaps; a worker has no children of its own */
  p.proc.inherit_dir = dir;
  p.proc.inherit_listen = v[0];
  p.proc.inherit_page = v[1];
  p.proc.inherit_app_page = v[2];
  const char *gen = getenv("M0__GENERATION"); /* its sockets and page lines are its generation's */
  if (gen && atoll(gen) > 1) p.proc.reload.generation = (uint64_t)atoll(gen);
  m0__title_set(app->name, "worker %d gen %llu", i, (unsigned long long)p.proc.reload.generation);
  return m0__exit_code(m0__coord_run(&p));
}

/* A process spawned for an instance of an actor placed `process`
 * (host/children.c): the kind's m0_actor_run, dialing the host's URL. It
 * inherits nothing it needs but stdio, and outlives no host. */
int m0__actor_child(const m0_app *app, const char *name) {
  const char *url = getenv("M0__ACTOR_URL"), *inst = getenv("M0__ACTOR_INSTANCE");
  const char *parent = getenv("M0__ACTOR_PARENT");
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (!parent || getppid() != (pid_t)atol(parent)) {
    fprintf(stderr, "m0: actor %s: the host is gone; exiting\n", name);
    return 1;
  }
  close_range(3, ~0u, 0);
  m0__title_set(app->name, "actor %s %s", name, inst ? inst : "?");
  for (size_t i = 0; i < app->nactors; i++)
    if (!strcmp(app->actors[i].name, name) && url && inst) return m0_actor_run(&app->actors[i], url, atoi(inst));
  fprintf(stderr, "m0: a process was started for actor %s, which this program does not have\n", name);
  return 1;
}

/* An M0_ variable m0 does not read is likely a typo (M0_THREAD=2 served one
 * loop in silence): one line each, by name only (a value may be a secret),
 * once the checks passed; a refusal stays its one line. */
static void serve_warn_unknown(const m0_app *app) {
  char names[M0__UNKNOWN_MAX][64];
  int n = m0__config_unknown_vars(app->name, names, M0__UNKNOWN_MAX);
  for (int i = 0; i < n && i < M0__UNKNOWN_MAX; i++) {
    const char *near = m0__config_near_var(names[i]);
    fprintf(stderr, "m0: warning: %s is not a variable m0 reads; ignored%s%s%s\n", names[i],
            near ? " (did you mean " : "", near ? near : "", near ? "?)" : "");
  }
  if (n > M0__UNKNOWN_MAX) fprintf(stderr, "m0: warning: and %d more M0_ variables m0 does not read\n", n - M0__UNKNOWN_MAX);
}

/* The top process of a host that passed its checks: socket activation,
 * the pid file, then the supervisor (--workers) or the coordinator. */
static int serve_top(const m0_app *app, const m0_producer *producer, m0_config *cfg, char **argv) {
  /* Access-log lines leave one at a time, not at exit. */
  if (M0__CFG(cfg, access_log)) setvbuf(stdout, NULL, _IOLBF, 0);
  char sd_err[512];
  int sd_plain;
  int sd_fd = m0__sd_listen_fd(&sd_plain, sd_err, sizeof sd_err); /* socket activation, instead of binding */
  if (sd_fd >= 0 && sd_plain >= 0 && !M0__CFGS(cfg, certfile)[0]) {
    snprintf(sd_err, sizeof sd_err, "socket activation hands over two listeners, and the second is the plain one "
                                    "beside HTTPS, but there is no --certfile (give the .socket unit one "
                                    "ListenStream=, or set --certfile)");
    sd_fd = M0__ECONFIG;
  }
  if (sd_fd == M0__ECONFIG) {
    fprintf(stderr, "m0: %s\n", sd_err);
    return 78;
  }
  if (!getenv("M0__UPGRADE") && !getenv("M0__CHAN") && m0__reload_pidfile_write(M0__CFGS(cfg, pid_file)) != 0)
    return 73; /* EX_CANTCREAT: generation 1 writes it; the pid stays (host/master.h) */
  if (M0__CFG(cfg, workers) > 1) return m0__exit_code(m0__supervise(app, producer, cfg, argv, sd_fd, sd_plain));
  m0__proc p = {.producer = producer};
  m0__process_describe(&p.proc, app, cfg);
  p.proc.inherit_listen = sd_fd;
  p.proc.inherit_plain = sd_plain;
  p.here = p.proc.loops;
  if (m0__reload_inherit(&p.proc) < 0) return 1;
  m0__title_set(app->name, "gen %llu", (unsigned long long)p.proc.reload.generation);
  return m0__exit_code(m0__coord_run(&p));
}

/* The checks, then the doctor's JSON, the first failure (78), or serving. */
static int serve_checked(const m0_app *app, const m0_producer *producer, m0_config *cfg, char **argv) {
  m0__check checks[M0__CHECK_COUNT];
  int first = m0__checks_run(cfg, app, checks);
  if (cfg->doctor) return m0__doctor(cfg, app, checks, first);
  if (first >= 0) {
    fprintf(stderr, "m0: %s (%s)\n", checks[first].detail, checks[first].fix);
    return 78;
  }
  serve_warn_unknown(app);
  for (int i = 0; i < M0__CHECK_COUNT; i++) /* a check that passed with a warning (config/checks.h) */
    if (checks[i].fix[0]) fprintf(stderr, "m0: warning: %s (%s)\n", checks[i].detail, checks[i].fix);
  int rc = serve_top(app, producer, cfg, argv);
  m0__reload_exit(rc); /* generation 1 that handed over: the master, from here */
  return rc;
}

int m0_serve(const m0_app *app, const m0_producer *producer, int argc, char **argv) {
  argv = m0__title_init(argc, argv); /* a copy: the original is where titles go */
  if (getenv("M0__ACTOR")) return m0__actor_child(app, getenv("M0__ACTOR"));
  m0__reload_remember(app, argc, argv); /* the binary's path now: what SIGUSR2 runs later */
  if (getenv("M0__MASTER")) return m0__master_run(app); /* generation 1, handed over (host/master.h) */
  m0_config *cfg = calloc(1, sizeof *cfg);
  if (!cfg) return 1;
  char why[1200];
  const char *prog = argc > 0 ? argv[0] : "m0";
  int rc;
  if (m0__config_load(cfg, argc, argv, why, sizeof why) != 0) {
    m0__config_usage(stderr, prog);
    fprintf(stderr, "m0: %s\n", why);
    rc = 2;
  } else if (cfg->help) {
    m0__config_usage(stdout, prog);
    rc = 0;
  } else if (cfg->version) {
    printf("m0 %s (nng %s, libuv %s)\n", M0_VERSION_STRING, nng_version(), uv_version_string());
    rc = 0;
  } else if (getenv("M0__WORKER")) {
    if (M0__CFG(cfg, access_log)) setvbuf(stdout, NULL, _IOLBF, 0);
    rc = serve_worker(app, cfg, getenv("M0__WORKER"));
  } else if (getpid() == 1 && !cfg->doctor && !getenv("M0__UPGRADE") && !getenv("M0__CHAN")) {
    rc = m0__master_first(app, cfg); /* a container's init: the master from the start (host/master.h) */
  } else {
    rc = serve_checked(app, producer, cfg, argv);
  }
  m0__config_fini(cfg);
  free(cfg);
  return rc;
}
