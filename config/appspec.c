/* The application's declaration, resolved (config/appspec.h): the program's
 * actor kinds placed by the topology file's "app_actors", one route table of
 * the program's routes and the file's "routes". Every refusal is the
 * `actors` check's one line, "<what is wrong>: <the fix>" (the check splits
 * it at the last ": "; no fix here holds one). */
#include "config/appspec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "config/options.h"
#include "config/topokeys.h"
#include "http/route_stream.h"

const char *m0__placement_name(m0__placement p) {
  switch (p) {
  case M0__PLACE_PROCESS: return "process";
  case M0__PLACE_EXTERNAL: return "external";
  case M0__PLACE_NATS: return "nats";
  default: return "thread";
  }
}

/* 1..48 bytes of [a-z0-9_-]. */
static bool decl_name_ok(const char *s) {
  size_t n = 0;
  for (; s && s[n]; n++)
    if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_' || s[n] == '-')) return false;
  return n >= 1 && n <= M0__ACTOR_NAME_MAX;
}

static const char *str_or(const char *s, const char *none) { return s ? s : none; }

static int decl_refuse(m0__app_decl *d, char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int decl_refuse(m0__app_decl *d, char *why, size_t whylen, const char *fmt, ...) {
  if (why && whylen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
  }
  m0__app_decl_free(d);
  return M0__ECONFIG;
}

int m0__app_decl_find(const m0__app_decl *d, const char *name, size_t n) {
  for (int i = 0; name && i < d->nactors; i++)
    if (strlen(d->actors[i].name) == n && !memcmp(d->actors[i].name, name, n)) return i;
  return M0__ENOTFOUND;
}

/* The file's entry named `name`, or M0__ENOTFOUND. */
static int file_actor(const struct m0_config *cfg, const char *name) {
  for (int i = 0; cfg && name && i < cfg->napp_actors; i++)
    if (!strcmp(cfg->app_actors[i].name, name)) return i;
  return M0__ENOTFOUND;
}

/* Whether app route i and file route fr have one method and pattern. */
static bool same_route(const m0_route *r, const m0__route_spec *fr) {
  return r->method && r->pattern && !strcmp(r->method, fr->method) && !strcmp(r->pattern, fr->pattern);
}

static int decl_nomem(m0__app_decl *d, char *why, size_t whylen, const char *what) {
  decl_refuse(d, why, whylen, "out of memory for %s", what);
  return M0__ENOMEM;
}

/* The program's kinds: each named, once, and able to receive. */
static int decl_kinds(m0__app_decl *d, const m0_app *app, char *why, size_t whylen) {
  size_t nkinds = app->actors ? app->nactors : 0;
  if (!app->actors && app->nactors)
    return decl_refuse(d, why, whylen, "m0_app.nactors is %zu but m0_app.actors is NULL: set both, or neither",
                       app->nactors);
  for (size_t i = 0; i < nkinds; i++) {
    const m0_actor_kind *k = &app->actors[i];
    if (!decl_name_ok(k->name))
      return decl_refuse(d, why, whylen,
                         "m0_app.actors[%zu] is named \"%.64s\", not 1 to %d bytes of a-z, 0-9, _ and -: rename the "
                         "actor kind (routes and app_actors name it)",
                         i, str_or(k->name, "(null)"), M0__ACTOR_NAME_MAX);
    for (size_t j = 0; j < i; j++)
      if (!strcmp(app->actors[j].name, k->name))
        return decl_refuse(d, why, whylen,
                           "m0_app.actors[%zu] and m0_app.actors[%zu] are both named \"%s\": give each actor kind "
                           "its own name",
                           j, i, k->name);
    if (!k->receive)
      return decl_refuse(d, why, whylen, "m0_app.actors[%zu] (\"%s\") has no receive: set its receive function", i,
                         k->name);
  }
  return 0;
}

/* An actor of the program the file does not name: on a thread, one
 * instance, the schema's defaults (config/topokeys.c). */
static void decl_default(m0__actor_spec *s, const char *name) {
  snprintf(s->name, sizeof s->name, "%s", name);
  s->placement = M0__PLACE_THREAD;
  s->instances = (int)m0__topo_default("app_actors", "instances");
  s->restart_intensity = (int)m0__topo_default("app_actors.restart", "intensity");
  s->restart_period_ms = m0__topo_default("app_actors.restart", "period_ms");
  s->queue = (int)m0__topo_default("app_actors", "queue");
}

/* The actors: the program's kinds in order, each placed by the file's
 * entry of its name (or by default), then the file's others. A thread or a
 * process runs this program's kind: without one, only another program can. */
static int decl_actors(m0__app_decl *d, const m0_app *app, const struct m0_config *cfg, char *why, size_t whylen) {
  size_t nkinds = app->actors ? app->nactors : 0, total = nkinds;
  int nfile = cfg ? cfg->napp_actors : 0;
  for (int f = 0; f < nfile; f++) {
    size_t i = 0;
    while (i < nkinds && strcmp(app->actors[i].name, cfg->app_actors[f].name)) i++;
    total += i == nkinds;
  }
  if (total > M0__ACTORS_MAX)
    return decl_refuse(d, why, whylen,
                       "the program and app_actors declare %zu actors, more than %d: declare at most %d actor kinds "
                       "and app_actors entries together",
                       total, M0__ACTORS_MAX, M0__ACTORS_MAX);
  if (total && (!(d->actors = calloc(total, sizeof *d->actors)) || !(d->kinds = calloc(total, sizeof *d->kinds))))
    return decl_nomem(d, why, whylen, "the actors");
  for (size_t i = 0; i < nkinds; i++) {
    int f = file_actor(cfg, app->actors[i].name);
    if (f >= 0) d->actors[d->nactors] = cfg->app_actors[f];
    else decl_default(&d->actors[d->nactors], app->actors[i].name);
    d->kinds[d->nactors++] = &app->actors[i];
  }
  for (int f = 0; f < nfile; f++) {
    if (m0__app_decl_find(d, cfg->app_actors[f].name, strlen(cfg->app_actors[f].name)) >= 0) continue;
    d->actors[d->nactors] = cfg->app_actors[f];
    d->kinds[d->nactors++] = NULL;
  }
  for (int i = 0; i < d->nactors; i++) {
    const m0__actor_spec *s = &d->actors[i];
    if (!d->kinds[i] && s->placement != M0__PLACE_EXTERNAL && s->placement != M0__PLACE_NATS)
      return decl_refuse(d, why, whylen,
                         "app_actors places actor \"%s\" on a %s, but it has no actor kind \"%s\" in this program: "
                         "place it \"external\" (other programs run it), or fix the name",
                         s->name, s->placement == M0__PLACE_PROCESS ? "process" : "thread", s->name);
  }
  return 0;
}

/* The routes: the program's, with a file route of the same method and
 * pattern in its place, then the file's others. */
static int decl_routes(m0__app_decl *d, const m0_app *app, const struct m0_config *cfg, char *why, size_t whylen) {
  size_t nroutes = app->routes ? app->nroutes : 0, cap = nroutes;
  int nfroutes = cfg ? cfg->nfile_routes : 0;
  for (int r = 0; r < nfroutes; r++) {
    size_t i = 0;
    while (i < nroutes && !same_route(&app->routes[i], &cfg->file_routes[r])) i++;
    cap += i == nroutes;
  }
  if (cap && !(d->routes = calloc(cap, sizeof *d->routes))) return decl_nomem(d, why, whylen, "the routes");
  if (nfroutes > 0 && !(d->route_strs = calloc((size_t)nfroutes, sizeof *d->route_strs)))
    return decl_nomem(d, why, whylen, "the routes");
  for (size_t i = 0; i < nroutes; i++) d->routes[d->nroutes++] = app->routes[i];
  for (int r = 0; r < nfroutes; r++) {
    const m0__route_spec *fr = &cfg->file_routes[r];
    snprintf(d->route_strs[r][0], sizeof d->route_strs[r][0], "%s", fr->method);
    snprintf(d->route_strs[r][1], sizeof d->route_strs[r][1], "%s", fr->pattern);
    snprintf(d->route_strs[r][2], sizeof d->route_strs[r][2], "%s", fr->stream);
    int a = fr->stream[0] ? 0 : m0__app_decl_find(d, fr->actor, strlen(fr->actor));
    if (a < 0)
      return decl_refuse(d, why, whylen,
                         "route %s %s names actor \"%s\", which neither the program nor app_actors declares: add it "
                         "to app_actors with placement external, or fix the name",
                         fr->method, fr->pattern, fr->actor);
    m0_route nr = {d->route_strs[r][0], d->route_strs[r][1], NULL, 0, NULL, (unsigned)fr->timeout_ms, NULL};
    if (fr->stream[0]) nr.stream = d->route_strs[r][2];
    else nr.actor = d->actors[a].name;
    size_t i = 0;
    while (i < nroutes && !same_route(&app->routes[i], fr)) i++;
    if (i < nroutes) d->routes[i] = nr;
    else d->routes[d->nroutes++] = nr;
  }
  return 0;
}

/* Every route, the program's and the file's: one of view, actor and
 * stream, an actor someone declares, a stream's template that its pattern
 * fills in. */
static int decl_check_routes(m0__app_decl *d, char *why, size_t whylen) {
  for (size_t i = 0; i < d->nroutes; i++) {
    const m0_route *rt = &d->routes[i];
    const char *m = str_or(rt->method, "(no method)"), *p = str_or(rt->pattern, "(no pattern)");
    if (rt->stream) { /* a channel: no view, no actor, a template its pattern fills in */
      const char *bad = rt->view || rt->actor       ? "is set beside a view or an actor"
                        : strcmp(m, "GET")          ? "is on a GET route only (a subscription is a GET, an upgrade too)"
                                                    : m0__route_stream_check(rt->stream, rt->pattern);
      if (bad)
        return decl_refuse(d, why, whylen, "route %s %s (m0_app.routes[%zu]): its stream \"%.64s\" %s: set one of "
                           "view, actor and stream, a stream a channel's name", m, p, i, rt->stream, bad);
      continue;
    }
    if (rt->view && rt->actor)
      return decl_refuse(d, why, whylen,
                         "route %s %s (m0_app.routes[%zu]) has both a view and the actor \"%.64s\": set one of "
                         "view and actor",
                         m, p, i, rt->actor);
    if (!rt->view && !rt->actor)
      return decl_refuse(d, why, whylen,
                         "route %s %s (m0_app.routes[%zu]) has neither a view nor an actor: set one of view and "
                         "actor",
                         m, p, i);
    if (rt->actor && m0__app_decl_find(d, rt->actor, strlen(rt->actor)) < 0)
      return decl_refuse(d, why, whylen,
                         "route %s %s names actor \"%.64s\", which neither the program nor app_actors declares: add "
                         "it to app_actors with placement external, or fix the name",
                         m, p, rt->actor);
  }
  return 0;
}

int m0__app_decl_make(m0__app_decl *d, const m0_app *app, const struct m0_config *cfg, char *why,
                      size_t whylen) {
  memset(d, 0, sizeof *d);
  if (why && whylen) why[0] = 0;
  int rc = decl_kinds(d, app, why, whylen);
  if (rc == 0) rc = decl_actors(d, app, cfg, why, whylen);
  if (rc == 0) rc = decl_routes(d, app, cfg, why, whylen);
  if (rc == 0) rc = decl_check_routes(d, why, whylen);
  if (rc == 0 && cfg) { /* checked as the file was read (config/topoapps.c) */
    d->sups = cfg->supervisors;
    d->nsups = cfg->nsupervisors;
  }
  return rc;
}

void m0__app_decl_free(m0__app_decl *d) {
  free(d->actors);
  free(d->kinds);
  free(d->routes);
  free(d->route_strs);
  memset(d, 0, sizeof *d);
}
