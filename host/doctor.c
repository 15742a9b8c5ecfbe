/* The doctor: the resolved configuration as ONE JSON object (jansson) on
 * the last line of stdout. It binds and starts nothing and exits with the
 * code serving would exit with, because it reads the same checks. */
#include <jansson.h>
#include <llhttp.h>
#include <nng/nng.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <uv.h>

#include "bus/natsopt.h"
#include "config/appspec.h"
#include "config/checks.h"
#include "config/options.h"
#include "host/children.h"
#include "http/io.h"
#include "host/process.h"
#include "transport/links.h"
#include "transport/page.h"
#include "transport/topology.h"

int m0__doctor(const m0_config *cfg, const m0_app *app, const m0__check *checks, int first_fail);

/* Where it was built and with what. */
static json_t *doctor_build(void) {
  struct utsname u;
  uname(&u);
  char llv[32];
  snprintf(llv, sizeof llv, "%d.%d.%d", LLHTTP_VERSION_MAJOR, LLHTTP_VERSION_MINOR, LLHTTP_VERSION_PATCH);
  return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "os", u.sysname, "arch", u.machine, "m0", M0_VERSION_STRING,
                   "nng", nng_version(), "libuv", uv_version_string(), "llhttp", llv);
}

/* Every option's value and where it came from. */
static void doctor_config(json_t *root, const m0_config *cfg) {
  json_t *conf = json_object(), *src = json_object();
  for (int i = 0; i < M0__O_COUNT_; i++) {
    const m0__value *v = &cfg->v[i];
    json_object_set_new(conf, m0__config_name(i), m0__config_is_str(i) ? json_string(v->str) : json_integer(v->num));
    json_object_set_new(src, m0__config_name(i), json_string(m0__source_name(v->source)));
  }
  json_object_set_new(root, "config", conf);
  json_object_set_new(root, "sources", src);
}

/* What serving would make of this configuration: the mode, the loops and
 * every actor of the topology with its URL (each one's link in links). */
static json_t *doctor_topology(const m0_config *cfg, const m0__check *checks, const m0__process *pd, json_t *links) {
  json_t *topo = json_object();
  json_object_set_new(topo, "mode", json_string(m0__mode_name(pd->mode)));
  json_object_set_new(topo, "loops", json_integer(pd->loops));
  json_object_set_new(topo, "handler_threads", json_integer(pd->pool));
  json_object_set_new(topo, "connections_per_loop", json_integer(M0__CFG(cfg, max_connections)));
  json_object_set_new(topo, "accept_sharing", json_boolean(M0__CFG(cfg, accept_share) != 0));
  json_object_set_new(topo, "transport",
                      json_string(cfg->topo_tls_transport
                                      ? "tls+tcp"
                                      : m0__scheme_name(m0__topology_scheme(pd->mode, cfg->topo_transport))));
  /* The file's identity, paths only (resolved: a relative one against the
   * file's directory), and the plain tcp it allows: read back the same. */
  if (cfg->tls_cert[0])
    json_object_set_new(topo, "tls", json_pack("{s:s, s:s, s:s}", "cert", cfg->tls_cert, "key", cfg->tls_key, "ca",
                                               cfg->tls_ca));
  if (cfg->nplain_tcp) {
    json_t *pl = json_array();
    for (int i = 0; i < cfg->nplain_tcp; i++) json_array_append_new(pl, json_string(cfg->plain_tcp[i]));
    json_object_set_new(topo, "plain_tcp", pl);
  }
  /* The fleet's bus (bus/bus.h), as the file wrote it. */
  char shown[M0__URL_MAX]; /* a NATS URL's password as "***" */
  if (cfg->bus_url[0])
    json_object_set_new(topo, "bus", json_pack("{s:s, s:s}", "nats",
                                               m0__nats_url_shown(cfg->bus_url, shown, sizeof shown), "subject",
                                               cfg->bus_subject));
  /* Every link an actor listens at, and whether it is encrypted. */
  json_t *actors = json_array();
  m0__topology t;
  const char *dir = M0__CFGS(cfg, run_dir)[0] ? M0__CFGS(cfg, run_dir) : NULL;
  /* Beyond M0__TOPO_MAX ids collide, and beyond M0__TOPO_THREADS_MAX in all
   * the list would be millions long: no actors listed. A description only
   * (no run directory, no pid): the file's URLs keep their placeholders. */
  if (pd->loops <= M0__TOPO_MAX && pd->pool <= M0__TOPO_MAX && checks[M0__C_blocking_threads_count].ok &&
      m0__topology_describe(&t, pd->mode, pd->loops, pd->pool, cfg->topo_transport, (const char(*)[256])cfg->topo_urls,
                            cfg->ntopo_urls, dir) == 0) {
    for (int k = 0; k < t.nactors; k++) {
      json_array_append_new(actors, json_pack("{s:s, s:s}", "name", t.actors[k].name, "url", t.actors[k].url));
      json_array_append_new(links, json_pack("{s:s, s:s, s:b}", "actor", t.actors[k].name, "url", t.actors[k].url,
                                             "encrypted", m0__link_encrypted(t.actors[k].url)));
    }
    m0__topology_free(&t);
  }
  json_object_set_new(topo, "actors", actors);
  return topo;
}

/* The file's supervisors as it could say them (docs/topology.md): every
 * key, defaults filled in; none, no key (the round trip of a file without). */
static void doctor_supervisors(json_t *topo, const m0__app_decl *d) {
  static const char *const strategies[] = {"one_for_one", "one_for_all", "rest_for_one"};
  if (d->nsups == 0) return;
  json_t *sups = json_array();
  for (int s = 0; s < d->nsups; s++) {
    const m0__sup_spec *sp = &d->sups[s];
    json_t *kids = json_array();
    for (int m = 0; m < sp->nchildren; m++) json_array_append_new(kids, json_string(sp->children[m]));
    json_array_append_new(sups, json_pack("{s:s, s:s, s:i, s:I, s:o, s:s}", "name", sp->name, "strategy",
                                          strategies[sp->strategy], "intensity", sp->intensity, "period_ms",
                                          (json_int_t)sp->period_ms, "children", kids, "on_fail",
                                          sp->serve_on ? "serve_on" : "exit"));
  }
  json_object_set_new(topo, "supervisors", sups);
}

/* What m0_send, m0_call and m0_ask make of an actor's names ("echo": one
 * live instance, picked as a route picks; "echo.k": that one), by
 * placement: the instances they can reach (docs/actors.md, Messages). */
static json_t *doctor_name(const m0__actor_spec *s, bool prefork) {
  char inst[M0__ACTOR_NAME_MAX + 16];
  json_t *list = json_array();
  int n = s->placement == M0__PLACE_NATS ? s->lanes : s->placement == M0__PLACE_EXTERNAL ? 0 : s->instances;
  for (int k = 0; k < n; k++) {
    snprintf(inst, sizeof inst, "%s.%d", s->name, k);
    json_array_append_new(list, json_string(inst));
  }
  char ext[2 * M0__ACTOR_NAME_MAX + 64];
  snprintf(ext, sizeof ext, "%s.0 .. %s.63: the instances connected, by slot", s->name, s->name);
  const char *where = s->placement == M0__PLACE_THREAD && prefork ? "in each worker, that worker's own instances"
                      : s->placement == M0__PLACE_EXTERNAL ? ext
                      : s->placement == M0__PLACE_NATS     ? "lanes (a batch out each): any instance of the queue group answers"
                                                           : "the host's instances, the same from every thread";
  return json_pack("{s:s, s:s, s:o}", "picks", "the live instance with the fewest in flight, below its queue", "reaches",
                   where, "instances", list);
}

static void doctor_app_actors(json_t *topo, json_t *links, json_t *names, bool prefork, const m0_config *cfg,
                              const m0_app *app) {
  /* The application's actors and the routes they serve, as resolved: the
   * schema of the file's "app_actors" and "routes" (docs/topology.md), so
   * this object saved and read back prints itself. Placement alone does not
   * depend on --workers (which only refuses some): described without it. A
   * declaration that is refused lists nothing (the `actors` check says why). */
  json_t *app_actors = json_array(), *aroutes = json_array();
  m0__app_decl decl;
  char why[M0__STR_MAX];
  if (m0__app_decl_make(&decl, app, cfg, why, sizeof why) == 0) {
    for (int i = 0; i < decl.nactors; i++) {
      const m0__actor_spec *s = &decl.actors[i];
      json_t *o = json_pack("{s:s, s:s}", "name", s->name, "placement", m0__placement_name(s->placement));
      if (s->placement != M0__PLACE_EXTERNAL && s->placement != M0__PLACE_NATS)
        json_object_set_new(o, "instances", json_integer(s->instances));
      if (s->placement != M0__PLACE_THREAD) {
        /* A file's URL as the file wrote it (its <pid> kept, like the
         * topology's actors); else the built one, <run-dir> a placeholder. */
        char url[M0__URL_MAX];
        if (s->url[0]) m0__nats_url_shown(s->url, url, sizeof url); /* a NATS URL's password as "***" */
        else if (m0__topology_app_url(url, sizeof url, s->url, NULL, s->name) != 0) url[0] = 0;
        json_object_set_new(o, "url", json_string(url));
        json_array_append_new(links, json_pack("{s:s, s:s, s:b}", "actor", s->name, "url", url, "encrypted",
                                               m0__link_encrypted(url)));
      }
      if (s->placement == M0__PLACE_NATS) {
        json_object_set_new(o, "subject", json_string(s->subject));
        json_object_set_new(o, "lanes", json_integer(s->lanes));
      }
      if (s->placement == M0__PLACE_PROCESS)
        json_object_set_new(o, "restart", json_pack("{s:i, s:I}", "intensity", s->restart_intensity, "period_ms",
                                                    (json_int_t)s->restart_period_ms));
      json_object_set_new(o, "queue", json_integer(s->queue));
      if (s->secret_file[0]) json_object_set_new(o, "secret", json_string(s->secret_file));
      if (s->trusted_network) json_object_set_new(o, "trusted_network", json_true());
      json_array_append_new(app_actors, o);
      json_object_set_new(names, s->name, doctor_name(s, prefork));
    }
    for (size_t i = 0; i < decl.nroutes; i++) {
      const m0_route *r = &decl.routes[i];
      if (r->stream) /* a channel's: the template as written, filled in per request */
        json_array_append_new(aroutes, json_pack("{s:s, s:s, s:s}", "method", r->method, "pattern", r->pattern,
                                                 "stream", r->stream));
      if (!r->actor) continue;
      json_array_append_new(aroutes, json_pack("{s:s, s:s, s:s, s:I}", "method", r->method, "pattern", r->pattern,
                                               "actor", r->actor, "timeout_ms",
                                               (json_int_t)(r->timeout_ms ? r->timeout_ms : 1000)));
    }
    doctor_supervisors(topo, &decl);
    m0__app_decl_free(&decl);
  }
  json_object_set_new(topo, "app_actors", app_actors);
  json_object_set_new(topo, "routes", aroutes);
}

static json_t *doctor_application(const m0_app *app, int loops) {
  /* max_threads resolved against max_workers, and -1 for any number: an
   * app's own -1 ("any") printed as the resolution's 0 read as a limit. */
  int max_threads = m0__app_max_threads(app);
  return json_pack("{s:s, s:i, s:i, s:I}", "name", app->name ? app->name : "", "max_workers", app->max_workers,
                   "max_threads", max_threads > 0 ? max_threads : -1, "page_slots",
                   (json_int_t)(app->page_slots ? app->page_slots(loops) : 0));
}

static json_t *doctor_unknown(const m0_app *app) {
  /* The M0_ variables m0 does not read (a typo such as M0_THREAD): names
   * only, never values. */
  char names[M0__UNKNOWN_MAX][64];
  int nunknown = m0__config_unknown_vars(app->name, names, M0__UNKNOWN_MAX);
  json_t *unknown = json_array();
  for (int i = 0; i < nunknown && i < M0__UNKNOWN_MAX; i++) {
    const char *near = m0__config_near_var(names[i]);
    json_t *o = json_pack("{s:s}", "name", names[i]);
    if (near) json_object_set_new(o, "did_you_mean", json_string(near));
    json_array_append_new(unknown, o);
  }
  return unknown;
}

static json_t *doctor_running(const m0_config *cfg) {
  /* A host already serving in the run directory named (--run-dir,
   * M0_RUN_DIR, as its own processes have it): its generation and reloads
   * (host/reload.h), read from its shared page; null when none serves there. */
  json_t *running = json_null();
  m0__page pg;
  char perr[512];
  if (M0__CFGS(cfg, run_dir)[0] && m0__page_attach(&pg, M0__CFGS(cfg, run_dir), perr, sizeof perr) == 0) {
    uint64_t gen = atomic_load(&pg.head->generation);
    json_decref(running);
    running = json_pack("{s:I, s:I, s:I}", "generation", (json_int_t)gen, "reloads", (json_int_t)(gen > 1 ? gen - 1 : 0),
                        "last_reload_unix_ms", (json_int_t)atomic_load(&pg.head->reloaded_ms));
    m0__page_close(&pg);
  }
  return running;
}

static json_t *doctor_checks(const m0__check *checks) {
  json_t *arr = json_array();
  for (int i = 0; i < M0__CHECK_COUNT; i++) {
    json_t *o = json_pack("{s:s, s:b, s:s}", "name", checks[i].name, "ok", checks[i].ok, "detail", checks[i].detail);
    if (!checks[i].ok) {
      json_object_set_new(o, "fix", json_string(checks[i].fix));
      json_object_set_new(o, "exit", json_integer(78));
    }
    json_array_append_new(arr, o);
  }
  return arr;
}

int m0__doctor(const m0_config *cfg, const m0_app *app, const m0__check *checks, int first_fail) {
  int code = first_fail >= 0 ? 78 : 0;
  json_t *root = json_object();
  json_object_set_new(root, "m0", json_integer(1));
  json_object_set_new(root, "ok", json_boolean(code == 0));
  json_object_set_new(root, "exit", json_integer(code));
  json_object_set_new(root, "build", doctor_build());
  doctor_config(root, cfg);
  char io_why[256];
  int io_mode = m0__io_mode_parse(M0__CFGS(cfg, io));
  const char *io_path = m0__io_path(io_mode, io_why, sizeof io_why);
  if (M0__CFGS(cfg, certfile)[0] && strcmp(io_path, "epoll") != 0) { /* http/conn.c: m0__http_init */
    io_path = "epoll";
    snprintf(io_why, sizeof io_why, "HTTPS (--certfile) runs on libuv's transport, under the TLS engine");
  }
  json_object_set_new(root, "io", io_why[0] ? json_pack("{s:s, s:s}", "path", io_path, "why", io_why)
                                            : json_pack("{s:s}", "path", io_path));
  bool h2 = M0__CFG(cfg, http2) != 0, tls = M0__CFGS(cfg, certfile)[0] != 0; /* http/h2.c */
  json_object_set_new(root, "http2", json_pack("{s:b, s:s}", "on", h2, "how",
                                               !h2  ? "off: HTTP/2's preface is answered 505 as HTTP/1.1; ALPN offers http/1.1"
                                               : tls ? "ALPN offers h2 before http/1.1, and the cleartext preface is served"
                                                     : "the cleartext preface is served (prior knowledge)"));
  m0__process pd; /* what serving would make of this configuration (host/process.c) */
  m0__process_describe(&pd, app, cfg);
  json_t *links = json_array();
  json_t *topo = doctor_topology(cfg, checks, &pd, links);
  json_t *names = json_object();
  doctor_app_actors(topo, links, names, pd.mode == M0__MODE_PREFORK, cfg, app);
  json_object_set_new(root, "topology", topo);
  json_object_set_new(root, "links", links);
  json_object_set_new(root, "names", names);
  json_object_set_new(root, "supervision", m0__suptree_doctor(app, cfg));
  json_object_set_new(root, "application", doctor_application(app, pd.loops));
  json_object_set_new(root, "unknown_variables", doctor_unknown(app));
  json_object_set_new(root, "running", doctor_running(cfg));
  json_object_set_new(root, "checks", doctor_checks(checks));
  char *s = json_dumps(root, JSON_COMPACT);
  printf("%s\n", s);
  free(s);
  json_decref(root);
  fflush(stdout);
  return code;
}
