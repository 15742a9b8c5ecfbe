#include "config/checks.h"
#include "base/errors.h"
#include "runtime/bounds.h"
#include "runtime/proof.h"
#include "service/service.h"
#include "config/appspec.h"
#include "http/io.h"
#include "http/proxies.h"
#include "transport/links.h"
#include "transport/topology.h"

#include <dirent.h>
#include <errno.h>
#include <nng/nng.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

typedef void (*check_fn)(const m0_config *cfg, const m0_app *app, m0__check *c);

#define CHECK_FAIL(c, ...) ((c)->ok = false, snprintf((c)->detail, sizeof (c)->detail, __VA_ARGS__))
#define CHECK_FIX(c, ...) snprintf((c)->fix, sizeof (c)->fix, __VA_ARGS__)
#define CHECK_OK(c, ...) ((c)->ok = true, snprintf((c)->detail, sizeof (c)->detail, __VA_ARGS__))

/* An m0_app may leave its name out: never printf's "(null)". */
static const char *app_name(const m0_app *app) { return app->name ? app->name : "(unnamed)"; }

int m0__app_max_threads(const m0_app *app) {
  if (app->max_threads < 0) return 0;
  return app->max_threads ? app->max_threads : app->max_workers;
}

/* The two ways to serve with more than one loop, as the checks that bound
 * them name them: --workers counts processes, --threads loops in one. */
typedef struct check_mode {
  enum m0__opt opt;
  const char *name, *set;   /* "workers", "--workers / M0_WORKERS" */
  const char *unit, *units; /* what a count of it says: "1 worker process" */
  const char *one, *many;   /* what an application allows: "at most 1 worker" */
  const char *home;         /* where an application's state lives when it allows one */
} check_mode;

static const check_mode check_workers = {M0__O_workers, "workers", "--workers / M0_WORKERS", "worker process",
                                         "worker processes", "worker", "workers", "one process"};
static const check_mode check_threads = {M0__O_threads, "threads", "--threads / M0_THREADS", "loop", "loops", "loop",
                                         "loops", "one loop"};

/* The count is 1..M0__TOPO_MAX (a loop's index must fit an actor id). */
static void check_mode_count(const m0_config *cfg, const check_mode *m, m0__check *c) {
  long n = cfg->v[m->opt].num;
  if (n < 1 || n > M0__TOPO_MAX) {
    CHECK_FAIL(c, "%s is %ld (%s)", m->name, n, m0__source_name(cfg->v[m->opt].source));
    CHECK_FIX(c, "set %s to a number from 1 to %d", m->set, M0__TOPO_MAX);
  } else CHECK_OK(c, "%ld %s", n, n == 1 ? m->unit : m->units);
}

/* The count is at most what the application allows (max, 0: any). */
static void check_mode_allowed(const m0_config *cfg, const m0_app *app, const check_mode *m, int max, m0__check *c) {
  long n = cfg->v[m->opt].num;
  if (max > 0 && n > max) {
    CHECK_FAIL(c, "%ld %s asked, but %s serves at most %d (its state lives in %s)", n, m->many, app_name(app), max,
               m->home);
    CHECK_FIX(c, "set %s to %d or fewer", m->set, max);
  } else if (max > 0) CHECK_OK(c, "%s allows at most %d %s", app_name(app), max, max == 1 ? m->one : m->many);
  else CHECK_OK(c, "%s allows any number of %s", app_name(app), m->many);
}

static void check_workers_count(const m0_config *cfg, const m0_app *app, m0__check *c) {
  check_mode_count(cfg, &check_workers, c);
}

static void check_workers_vs_application(const m0_config *cfg, const m0_app *app, m0__check *c) {
  check_mode_allowed(cfg, app, &check_workers, app->max_workers, c);
}

static void check_threads_count(const m0_config *cfg, const m0_app *app, m0__check *c) {
  check_mode_count(cfg, &check_threads, c);
}

static void check_workers_vs_threads(const m0_config *cfg, const m0_app *app, m0__check *c) {
  long w = M0__CFG(cfg, workers), t = M0__CFG(cfg, threads);
  if (w > 1 && t > 1) {
    CHECK_FAIL(c, "both workers (%ld, %s) and threads (%ld, %s) are above 1", w,
               m0__source_name(cfg->v[M0__O_workers].source), t,
               m0__source_name(cfg->v[M0__O_threads].source));
    CHECK_FIX(c, "choose one mode: --workers N (processes) or --threads N (loops in one process)");
  } else CHECK_OK(c, "one mode");
}

static void check_threads_vs_application(const m0_config *cfg, const m0_app *app, m0__check *c) {
  check_mode_allowed(cfg, app, &check_threads, m0__app_max_threads(app), c);
}

static void check_blocking_threads_count(const m0_config *cfg, const m0_app *app, m0__check *c) {
  long b = M0__CFG(cfg, blocking_threads);
  if (b < 0 || b > M0__TOPO_MAX) {
    CHECK_FAIL(c, "blocking-threads is %ld (%s)", b, m0__source_name(cfg->v[M0__O_blocking_threads].source));
    CHECK_FIX(c, "set --blocking-threads / M0_BLOCKING_THREADS to a number from 0 to %d", M0__TOPO_MAX);
    return;
  }
  /* Each count is bounded alone; their product is what the topology starts
   * (and what the doctor lists, actor by actor): --threads 4096
   * --blocking-threads 4096 was 16.8 million threads, and the doctor said ok
   * after minutes of listing them. */
  long w = M0__CFG(cfg, workers), t = M0__CFG(cfg, threads);
  long loops = w > 1 ? w : t, threads = loops * (1 + b);
  if (loops >= 1 && loops <= M0__TOPO_MAX && threads > M0__TOPO_THREADS_MAX) {
    CHECK_FAIL(c, "%ld %s with %ld handler threads each make %ld threads, more than %d", loops,
               w > 1 ? (loops == 1 ? "worker" : "workers") : (loops == 1 ? "loop" : "loops"), b, threads,
               M0__TOPO_THREADS_MAX);
    CHECK_FIX(c, "serve at most %d loops and handler threads in all: %s x (1 + --blocking-threads)",
              M0__TOPO_THREADS_MAX, w > 1 ? "--workers" : "--threads");
  } else CHECK_OK(c, "%ld handler thread%s per loop", b, b == 1 ? "" : "s");
}

static void check_environment(const m0_config *cfg, const m0_app *app, m0__check *c) {
  if (cfg->env_error[0]) {
    CHECK_FAIL(c, "cannot read the variable %s", cfg->env_error);
    if (cfg->env_error_opt >= 0) {
      char accepts[128];
      m0__config_accepts(cfg->env_error_opt, accepts, sizeof accepts);
      size_t n = strcspn(cfg->env_error, "=");
      CHECK_FIX(c, "set %.*s to %s, or unset it", (int)n, cfg->env_error, accepts);
    } else CHECK_FIX(c, "set it to a valid value (see --help) or unset it");
    return;
  }
  /* A variable m0 does not read is said, never refused: it may be another
   * program's. Only its name: a value may be a secret. */
  char names[M0__UNKNOWN_MAX][64];
  int n = m0__config_unknown_vars(app->name, names, M0__UNKNOWN_MAX);
  if (!n) {
    CHECK_OK(c, "every M0_ variable read");
    return;
  }
  char list[M0__STR_MAX] = "";
  size_t len = 0;
  for (int i = 0; i < n && i < M0__UNKNOWN_MAX && len < sizeof list - 100; i++) {
    const char *near = m0__config_near_var(names[i]);
    len += (size_t)snprintf(list + len, sizeof list - len, "%s%s%s%s%s", i ? ", " : "", names[i],
                            near ? " (did you mean " : "", near ? near : "", near ? "?)" : "");
  }
  CHECK_OK(c, "every M0_ variable m0 reads was read; %d it does not read, ignored: %s%s", n, list,
           n > M0__UNKNOWN_MAX ? ", ..." : "");
}

static bool plain_allowed(const m0_config *cfg, const char *url) {
  for (int i = 0; i < cfg->nplain_tcp; i++)
    if (!strcmp(cfg->plain_tcp[i], url)) return true;
  return false;
}

/* How each app actor's instances prove who they are (runtime/proof.h): its
 * key file must be one, and an external actor on plain tcp (loopback too:
 * any local user reaches it) needs a key file or a network the file trusts.
 * false: failed, said in c. */
static bool check_app_proofs(const m0_config *cfg, m0__check *c, const char *file) {
  for (int i = 0; i < cfg->napp_actors; i++) {
    const m0__actor_spec *s = &cfg->app_actors[i];
    if (s->secret_file[0]) {
      m0__secret sec;
      char why[900], fix[900];
      int rv = m0__secret_read_file(s->secret_file, &sec, why, sizeof why, fix, sizeof fix);
      memset(&sec, 0, sizeof sec);
      if (rv != 0) {
        CHECK_FAIL(c, "topology file %.400s: app_actors[%d] (%s).secret: %.900s", file, i, s->name, why);
        CHECK_FIX(c, "%.900s", fix);
        return false;
      }
      continue;
    }
    if (s->placement == M0__PLACE_EXTERNAL && m0__url_kind_of(s->url) == M0__URL_TCP && !s->trusted_network) {
      CHECK_FAIL(c, "topology file %.600s: app_actors[%d] (%s) has the URL %s, plain tcp with nothing that proves who "
                 "dials it (any program that reaches it, on loopback any local user, would become an instance and "
                 "read its requests)", file, i, s->name, s->url);
      CHECK_FIX(c, "give it \"secret\": a key file (mode 600) whose secret its instances prove they hold "
                "(M0_ACTOR_SECRET_FILE), or use %s, or, if only trusted programs reach that network, set "
                "\"trusted_network\": true", m0__url_prefix(M0__URL_TLS_TCP));
      return false;
    }
  }
  return true;
}

/* The links a topology file declares: a tcp:// URL off loopback is plain
 * text between machines, refused unless "plain_tcp" lists it; the "tls"
 * identity must load (transport/links.h: the same load serving does). */
static void check_links(const m0_config *cfg, m0__check *c) {
  const char *file = M0__CFGS(cfg, topology);
  const char *bad = NULL;
  char where[160] = "";
  for (int i = 0; !bad && i < cfg->ntopo_urls; i++)
    if (m0__url_kind_of(cfg->topo_urls[i]) == M0__URL_TCP && !m0__url_loopback(cfg->topo_urls[i]) &&
        !plain_allowed(cfg, cfg->topo_urls[i])) {
      bad = cfg->topo_urls[i];
      /* The file lists every actor in the topology's order: its name. */
      long w = M0__CFG(cfg, workers), t = M0__CFG(cfg, threads), b = M0__CFG(cfg, blocking_threads);
      m0__topology topo;
      if (m0__topology_build(&topo, w > 1 ? M0__MODE_PREFORK : t > 1 ? M0__MODE_THREADS : M0__MODE_SINGLE,
                             (int)(w > 1 ? w : t), (int)(b > 0 ? b : 0), M0__SCHEME_INPROC, "x") == 0) {
        snprintf(where, sizeof where, "actors[%d] (%s)", i, i < topo.nactors ? topo.actors[i].name : "?");
        m0__topology_free(&topo);
      } else snprintf(where, sizeof where, "actors[%d]", i);
    }
  for (int i = 0; !bad && i < cfg->napp_actors; i++) {
    const char *u = cfg->app_actors[i].url;
    if (m0__url_kind_of(u) == M0__URL_TCP && !m0__url_loopback(u) && !plain_allowed(cfg, u)) {
      bad = u;
      snprintf(where, sizeof where, "app_actors[%d] (%s)", i, cfg->app_actors[i].name);
    }
  }
  if (bad) {
    CHECK_FAIL(c, "topology file %.600s: %s has the URL %s, plain tcp to a host that is not loopback (unencrypted, "
               "and nothing checks who dials it)", file, where, bad);
    CHECK_FIX(c, "use %s (\"transport\": \"tls+tcp\") with \"tls\": {\"cert\", \"key\", \"ca\"}, or list "
              "\"%s\" in \"plain_tcp\" to allow it in the clear", m0__url_prefix(M0__URL_TLS_TCP), bad);
    return;
  }
  if (!check_app_proofs(cfg, c, file)) return;
  char err[M0__STR_MAX + 256];
  if (cfg->tls_cert[0] && m0__links_tls(cfg->tls_cert, cfg->tls_key, cfg->tls_ca, err, sizeof err) != 0) {
    CHECK_FAIL(c, "topology file %.400s: tls: %.1000s", file, err);
    CHECK_FIX(c, "give tls.cert, tls.key and tls.ca as PEM files this user can read: this process's certificate, "
              "its key (no passphrase), the CA that signs every peer's");
  }
}

static void check_topology(const m0_config *cfg, const m0_app *app, m0__check *c) {
  const char *file = M0__CFGS(cfg, topology);
  long w = M0__CFG(cfg, workers), t = M0__CFG(cfg, threads), b = M0__CFG(cfg, blocking_threads);
  long loops = w > 1 ? w : t, pool = b > 0 ? b : 0;
  long want = 2 + loops * (1 + pool) + (w > 1 ? loops : 0);
  bool refit = cfg->ntopo_urls && cfg->ntopo_urls != want; /* a flag changed the topology */
  if (!cfg->topology_error[0] && refit && m0__scheme_parse(cfg->topo_transport) == M0__SCHEME_TCP) {
    CHECK_FAIL(c, "topology file %s lists %d %s actors, but the flags and variables make a topology of %ld", file,
               cfg->ntopo_urls, cfg->topo_tls_transport ? "tls+tcp" : "tcp", want);
    CHECK_FIX(c, "list every actor's tcp URL for the topology you serve, or drop the flag that changes it");
  } else if (!cfg->topology_error[0] && w > 1 && m0__scheme_parse(cfg->topo_transport) == M0__SCHEME_INPROC) {
    CHECK_FAIL(c, "topology file %s says transport inproc, but --workers %ld crosses processes", file, w);
    CHECK_FIX(c, "set \"transport\" to ipc or tcp in the file, or serve it on threads");
  } else if (cfg->topology_error[0]) {
    CHECK_FAIL(c, "topology file %s", cfg->topology_error);
    CHECK_FIX(c, "correct the file (its schema is the doctor's \"topology\" object) or drop --topology / M0_TOPOLOGY");
  } else if (refit) {
    CHECK_OK(c, "topology file %s read; the flags change its topology, so m0 builds every actor's URL", file);
  } else CHECK_OK(c, file[0] ? "topology file %s read" : "no topology file", file);
  if (c->ok && file[0]) check_links(cfg, c);
}

/* The application's actors and the routes they serve, as serving resolves
 * them (config/appspec.c): its one line is "<what>: <fix>", split at the last
 * ": " into the detail and the fix. */
static void check_actors(const m0_config *cfg, const m0_app *app, m0__check *c) {
  m0__app_decl d;
  char why[M0__STR_MAX + 256];
  int rc = m0__app_decl_make(&d, app, cfg, why, sizeof why);
  if (rc != 0) {
    char *sep = NULL;
    for (char *p = strstr(why, ": "); p; p = strstr(p + 1, ": ")) sep = p;
    if (sep) *sep = 0;
    CHECK_FAIL(c, "%s", why[0] ? why : m0__strerror(rc));
    CHECK_FIX(c, "%s", sep ? sep + 2 : "declare the actors and routes as docs/topology.md says");
    return;
  }
  size_t by_actor = 0;
  int from_file = 0;
  for (size_t i = 0; i < d.nroutes; i++) by_actor += d.routes[i].actor != NULL;
  for (int i = 0; i < d.nactors; i++) from_file += d.actors[i].from_file;
  if (!d.nactors) CHECK_OK(c, "no application actors");
  else
    CHECK_OK(c, "%d application actor%s (%d placed by the topology file), %zu route%s served by actors", d.nactors,
             d.nactors == 1 ? "" : "s", from_file, by_actor, by_actor == 1 ? "" : "s");
  m0__app_decl_free(&d);
}

/* The longest socket name the host makes in the run directory for cfg: every
 * loop's loop.i.sock, and every actor's mailbox when they are ipc (prefork,
 * or a topology file that says ipc): coordinator.sock (as long as the
 * longest worker.i.sock) and pool.i.j.sock. */
static void longest_socket(const m0_config *cfg, char *name, size_t n) {
  long w = M0__CFG(cfg, workers), t = M0__CFG(cfg, threads), b = M0__CFG(cfg, blocking_threads);
  long last = (w > 1 ? w : t) - 1;
  bool ipc = w > 1 || m0__scheme_parse(cfg->topo_transport) == M0__SCHEME_IPC;
  char pool[64];
  snprintf(name, n, "loop.%ld.sock", last > 0 ? last : 0);
  snprintf(pool, sizeof pool, "pool.%ld.%ld.sock", last > 0 ? last : 0, b - 1);
  if (ipc && b > 0) snprintf(name, n, "%s", pool); /* pool.L.J.sock is longer than loop.L.sock */
  if (ipc && strlen(name) < strlen("coordinator.sock")) snprintf(name, n, "coordinator.sock");
}

static void check_run_dir(const m0_config *cfg, const m0_app *app, m0__check *c) {
  const char *dir = M0__CFGS(cfg, run_dir);
  if (!dir[0]) {
    CHECK_OK(c, "a private 0700 directory made at start and removed at exit");
    return;
  }
  struct stat st;
  int err = stat(dir, &st) != 0 ? errno : 0;
  if (err == ENOENT || err == ENOTDIR) {
    CHECK_FAIL(c, "run directory %s is missing", dir);
    CHECK_FIX(c, "create it with mode 0700 or leave --run-dir unset");
  } else if (err) { /* EACCES on a directory above it, ELOOP, ...: it may well be there */
    CHECK_FAIL(c, "run directory %s cannot be looked at: %s", dir, strerror(err));
    CHECK_FIX(c, "give this user access to it (and to the directories above it) or leave --run-dir unset");
  } else if (!S_ISDIR(st.st_mode)) {
    CHECK_FAIL(c, "run directory %s is not a directory", dir);
    CHECK_FIX(c, "name a directory with mode 0700 or leave --run-dir unset");
  } else if (access(dir, W_OK | X_OK) != 0) {
    CHECK_FAIL(c, "run directory %s is not writable", dir);
    CHECK_FIX(c, "give it to this user (chown) or leave --run-dir unset");
  } else if (st.st_mode & 077) {
    CHECK_FAIL(c, "run directory %s has mode %04o, open to other users", dir, (unsigned)(st.st_mode & 07777));
    CHECK_FIX(c, "chmod 0700 %s", dir);
  } else if (st.st_uid != geteuid()) {
    CHECK_FAIL(c, "run directory %s belongs to uid %u, not this user", dir, (unsigned)st.st_uid);
    CHECK_FIX(c, "use a directory this user owns");
  } else {
    /* A socket's path has room for sizeof sun_path - 1 bytes: longer, and
     * the host got as far as its first mailbox and exited 1 naming an inproc
     * URL, while the doctor had said ok. */
    char sock[80];
    longest_socket(cfg, sock, sizeof sock);
    size_t len = strlen(dir) + 1 + strlen(sock), room = sizeof ((struct sockaddr_un *)0)->sun_path - 1;
    if (len > room) {
      CHECK_FAIL(c, "run directory %s is too long for its sockets: the path of its %s would be %zu bytes, a socket's "
                 "has room for %zu", dir, sock, len, room);
      CHECK_FIX(c, "use a run directory of at most %zu bytes", room - 1 - strlen(sock));
    } else CHECK_OK(c, "%s, mode 0700", dir);
  }
}

/* A topology file's routes are a views table too (a front end such as
 * build/bin/m0 has only those). */
static void check_application(const m0_config *cfg, const m0_app *app, m0__check *c) {
  /* A routes pointer with nroutes 0 is no views table: every request would be
   * 404 (the check said "answers with a views table"). */
  bool routes = (app->routes && app->nroutes > 0) || cfg->nfile_routes > 0;
  if (!app->handle == !routes) {
    CHECK_FAIL(c, "application %s gives %s", app_name(app),
               app->handle ? "both handle and routes" : "neither handle nor routes");
    CHECK_FIX(c, app->handle ? "set exactly one of m0_app.handle and m0_app.routes (a topology file's routes count)"
                             : "set exactly one of m0_app.handle and m0_app.routes, or give a topology file with "
                               "\"routes\"");
  } else CHECK_OK(c, "%s answers with %s", app_name(app), routes ? "a views table" : "a handler");
}

static void check_trace(const m0_config *cfg, const m0_app *app, m0__check *c) {
  const char *t = M0__CFGS(cfg, trace);
  bool url = m0__url_is_nng(t);
  const char *why = url ? m0__url_undialable(t) : NULL;
  if (t[0] && strcmp(t, "-") != 0 && !url) {
    CHECK_FAIL(c, "trace destination %s is neither - nor an nng URL", t);
    CHECK_FIX(c, "use --trace - (JSON lines on stderr) or --trace %s/path, %shost:port", m0__url_prefix(M0__URL_IPC),
              m0__url_prefix(M0__URL_TCP));
  } else if (why) {
    CHECK_FAIL(c, "trace destination %s cannot be dialed: %s", t, why);
    CHECK_FIX(c, "use --trace - (JSON lines on stderr) or --trace %s/path, %shost:port", m0__url_prefix(M0__URL_IPC),
              m0__url_prefix(M0__URL_TCP));
  }
#ifdef M0_NO_TRACE_HOOK
  else if (t[0]) {
    CHECK_FAIL(c, "--trace %s asked of a build without the trace hook (M0_TRACE_HOOK=OFF)", t);
    CHECK_FIX(c, "drop --trace, or build with cmake -DM0_TRACE_HOOK=ON (the default)");
  }
#endif
  else CHECK_OK(c, !t[0] ? "tracing off" : url ? "trace records to %s" : "trace records to stderr", t);
}

static void check_supervision(const m0_config *cfg, const m0_app *app, m0__check *c) {
  long w = M0__CFG(cfg, workers), mr = M0__CFG(cfg, max_requests), wt = M0__CFG(cfg, worker_timeout_ms);
  if (w <= 1 && (mr > 0 || wt > 0 || M0__CFG(cfg, max_requests_jitter) > 0)) {
    CHECK_FAIL(c, "%s asks the supervisor to replace workers, but there are none (workers is %ld)",
               mr > 0 ? "--max-requests" : wt > 0 ? "--worker-timeout-ms" : "--max-requests-jitter", w);
    CHECK_FIX(c, "use --workers 2 or more, or leave worker recycling and timeouts off");
  } else if (wt > 0 && wt < 1000) {
    CHECK_FAIL(c, "--worker-timeout-ms %ld is shorter than a loop's quietest turn (1000 ms)", wt);
    CHECK_FIX(c, "set --worker-timeout-ms to 1000 or more");
  } else if (w > 1) {
    CHECK_OK(c, "recycle after %ld%s requests, replace a worker stuck %s", mr, mr ? "" : " (never)",
             wt ? "past its timeout" : "(never: no timeout)");
  } else CHECK_OK(c, "no supervisor in this mode");
}

static void check_trusted_proxies(const m0_config *cfg, const m0_app *app, m0__check *c) {
  m0__proxies px;
  char err[256];
  if (m0__proxies_parse(M0__CFGS(cfg, trusted_proxies), &px, err, sizeof err) != 0) {
    CHECK_FAIL(c, "--trusted-proxies: %s", err);
    CHECK_FIX(c, "list addresses or networks, comma-separated: 10.0.0.0/8,::1 (at most %d)", M0__PROXIES_MAX);
  } else if (px.n == 0) {
    CHECK_OK(c, "no proxy trusted: the client is the socket's peer");
  } else CHECK_OK(c, "%d trusted: their Forwarded / X-Forwarded-For names the client", px.n);
}

/* Routes flagged M0_NEEDS_POOL block: on the loop they would hold every
 * connection of it, so without a pool they are refused, not served. */
static void check_pool_routes(const m0_config *cfg, const m0_app *app, m0__check *c) {
  long b = M0__CFG(cfg, blocking_threads);
  size_t needs = 0;
  for (size_t i = 0; app->routes && i < app->nroutes; i++) {
    const m0_route *r = &app->routes[i];
    if (!(r->flags & M0_NEEDS_POOL)) continue;
    needs++;
    if (r->flags & M0_ON_LOOP) {
      CHECK_FAIL(c, "route %s %s is flagged both M0_ON_LOOP and M0_NEEDS_POOL", r->method ? r->method : "?",
                 r->pattern ? r->pattern : "?");
      CHECK_FIX(c, "keep one flag: M0_NEEDS_POOL for a view that blocks, M0_ON_LOOP for one that never does");
      return;
    }
    if (b <= 0) {
      CHECK_FAIL(c, "route %s %s needs the pool (M0_NEEDS_POOL: its view blocks), but blocking-threads is %ld (%s)",
                 r->method ? r->method : "?", r->pattern ? r->pattern : "?", b,
                 m0__source_name(cfg->v[M0__O_blocking_threads].source));
      CHECK_FIX(c, "serve with --blocking-threads 1 or more (M0_BLOCKING_THREADS)");
      return;
    }
  }
  if (needs) CHECK_OK(c, "%zu route%s that block%s served by the pool", needs, needs == 1 ? "" : "s", needs == 1 ? "s" : "");
  else CHECK_OK(c, "no route needs the pool");
}

/* Descriptors open now, stdio included (the count's own directory aside). */
static long open_descriptors(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return 3;
  long n = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - 1;
}

/* What one process opens at start, measured with nng 1.5.2 and libuv 1.44
 * (ls /proc/PID/fd of host_check, ramp and dashboard in each mode): stdio,
 * page, signal pipe, exit descriptor, listener, nng's own and the
 * coordinator's mailbox; per loop its epoll, wakes, listener dup, mailbox
 * descriptors and outside mailbox (11); per pool thread its inbox and
 * mailbox (3, 6 over ipc); per thread instance of an actor 3 (5 over ipc);
 * per actor whose instances dial in its socket (4) and per spawned instance
 * its pidfd and connection (2); under prefork each worker's hand-off pair in
 * every process. It errs high by a few: the producer counted when there may
 * be none. Connections come on top. */
typedef struct fd_actors {
  long inst, dial, spawned; /* thread instances; actors whose instances dial in; spawned instances */
} fd_actors;

static long fds_for(long w, long t, long b, const fd_actors *a, const char **who) {
  long actors = 4 * a->dial + 2 * a->spawned;
  if (w <= 1) {
    *who = "the host";
    return 17 + 11 * t + 3 * t * b + 3 * a->inst + actors;
  }
  long sup = 20 + 6 * w, worker = 32 + 4 * w + 6 * b + 5 * a->inst + actors;
  *who = worker >= sup ? "each worker" : "the supervisor";
  return worker >= sup ? worker : sup;
}

static fd_actors fds_actors_of(const m0__app_decl *d) {
  fd_actors a = {0, 0, 0};
  for (int i = 0; i < d->nactors; i++) {
    if (d->actors[i].placement == M0__PLACE_THREAD) a.inst += d->actors[i].instances;
    else a.dial++;
    if (d->actors[i].placement == M0__PLACE_PROCESS) a.spawned += d->actors[i].instances;
  }
  return a;
}

static fd_actors fds_actors(const m0_config *cfg, const m0_app *app) {
  fd_actors a = {0, 0, 0};
  m0__app_decl d;
  char why[M0__STR_MAX + 256];
  if (m0__app_decl_make(&d, app, cfg, why, sizeof why) != 0) return a;
  a = fds_actors_of(&d);
  m0__app_decl_free(&d);
  return a;
}

long m0__fds_needed(const m0_config *cfg, const m0__app_decl *decl) {
  long b = M0__CFG(cfg, blocking_threads);
  fd_actors a = fds_actors_of(decl);
  const char *who;
  return fds_for(M0__CFG(cfg, workers), M0__CFG(cfg, threads), b > 0 ? b : 0, &a, &who);
}

/* A tcp:// or tls+tcp:// URL: a link that holds descriptors per peer. */
static bool checks_over_tcp(const char *url) {
  m0__url_kind k = m0__url_kind_of(url);
  return k == M0__URL_TCP || k == M0__URL_TLS_TCP;
}

/* The descriptors the topology's tcp and tls+tcp mailboxes could hold
 * (runtime/bounds.h): each host mailbox its pipes and connections still
 * greeting, each application actor's socket its instance slots and those.
 * Below that, a peer that fills them leaves the loops fewer connections
 * than the limit suggests: said as a warning (ok, with a fix: serve prints
 * it and starts), as nginx warns that worker_connections exceed the open
 * file limit and starts. */
static void check_link_descriptors(const m0_config *cfg, const m0_app *app, m0__check *c, long have, long left) {
  long links = 0;
  for (int i = 0; i < cfg->ntopo_urls; i++)
    if (checks_over_tcp(cfg->topo_urls[i]))
      links += M0__MAILBOX_PIPES + M0__HANDSHAKES_MAX;
  m0__app_decl d;
  char why[M0__STR_MAX + 256];
  if (m0__app_decl_make(&d, app, cfg, why, sizeof why) == 0) {
    for (int i = 0; i < d.nactors; i++)
      if (checks_over_tcp(d.actors[i].url))
        links += M0__SLOTS + M0__HANDSHAKES_MAX;
    m0__app_decl_free(&d);
  }
  if (links <= left) return;
  size_t n = strlen(c->detail);
  snprintf(c->detail + n, sizeof c->detail - n,
           "; warning: the topology's tcp links could hold %ld descriptors (per mailbox %d pipes and %d connections "
           "still greeting), more than the %ld left",
           links, M0__MAILBOX_PIPES, M0__HANDSHAKES_MAX, left);
  CHECK_FIX(c, "raise RLIMIT_NOFILE to %ld or more (ulimit -n; LimitNOFILE= in a systemd unit)", have - left + links + 64);
}

/* A loop that found its descriptors spent could not start (it crashed, or
 * said "cannot start" without a reason): the limit is known before
 * anything starts, so a topology that cannot fit is refused here. */
static void check_descriptors(const m0_config *cfg, const m0_app *app, m0__check *c) {
  long w = M0__CFG(cfg, workers), t = M0__CFG(cfg, threads), b = M0__CFG(cfg, blocking_threads);
  if (w < 1 || t < 1 || b < 0 || w > M0__TOPO_MAX || t > M0__TOPO_MAX || b > M0__TOPO_MAX) {
    CHECK_OK(c, "not counted (a count above is refused)");
    return;
  }
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) {
    CHECK_OK(c, "no descriptor limit");
    return;
  }
  const char *who;
  fd_actors a = fds_actors(cfg, app);
  long need = fds_for(w, t, b, &a, &who), given = open_descriptors() - 3;
  if (given < 0) given = 0;
  long have = (long)rl.rlim_cur, want = need + given;
  if (want <= have) {
    CHECK_OK(c, "%s needs about %ld of RLIMIT_NOFILE %ld descriptors to start; %ld left for connections", who, want,
             have, have - want);
    check_link_descriptors(cfg, app, c, have, have - want);
    return;
  }
  long loops = w > 1 ? w : t, fit = 0;
  char open_now[64] = "";
  if (given) snprintf(open_now, sizeof open_now, ", %ld more already open", given);
  CHECK_FAIL(c, "%s needs about %ld descriptors to start (%ld %s%s, %ld handler thread%s per loop%s), but "
             "RLIMIT_NOFILE is %ld", who, want, loops, w > 1 ? "worker" : "loop", loops == 1 ? "" : "s", b,
             b == 1 ? "" : "s", open_now, have);
  /* How many loops would fit this limit (under prefork a worker's need
   * hardly depends on their number: the pool is what to shrink). */
  for (long k = loops - 1; k >= 1 && w <= 1; k--) {
    const char *ignored;
    if (fds_for(w, k, b, &a, &ignored) + given <= have) {
      fit = k;
      break;
    }
  }
  if (fit)
    CHECK_FIX(c, "raise the limit to %ld or more (ulimit -n; LimitNOFILE= in a systemd unit), or serve at most %ld "
              "loops here (--threads %ld)", want + 64, fit, fit);
  else
    CHECK_FIX(c, "raise the limit to %ld or more (ulimit -n; LimitNOFILE= in a systemd unit), or serve fewer %s",
              want + 64, w > 1 ? "workers or handler threads" : "handler threads");
}

/* The HTTPS listener's certificates, and the plain listener beside it: config/certs.c. */
static void check_certificates(const m0_config *cfg, const m0_app *app, m0__check *c) { m0__certs_check(cfg, c); }
static void check_plain_port(const m0_config *cfg, const m0_app *app, m0__check *c) { m0__plain_port_check(cfg, c); }

static void check_io(const m0_config *cfg, const m0_app *app, m0__check *c) { /* --io: which transport (http/io.c) */
  c->ok = m0__io_check(M0__CFGS(cfg, io), c->detail, sizeof c->detail, c->fix, sizeof c->fix);
}

static const check_fn checks_fns[M0__CHECK_COUNT] = {
#define M0__CHECK_FN(id, name) check_##id,
    M0__CHECKS(M0__CHECK_FN)
#undef M0__CHECK_FN
};
static const char *const checks_names[M0__CHECK_COUNT] = {
#define M0__CHECK_NAME(id, name) name,
    M0__CHECKS(M0__CHECK_NAME)
#undef M0__CHECK_NAME
};

int m0__checks_run(const m0_config *cfg, const m0_app *app, m0__check out[M0__CHECK_COUNT]) {
  int first = -1;
  for (int i = 0; i < M0__CHECK_COUNT; i++) {
    memset(&out[i], 0, sizeof out[i]);
    out[i].name = checks_names[i];
    checks_fns[i](cfg, app, &out[i]);
    if (!out[i].ok && first < 0) first = i;
  }
  return first;
}
