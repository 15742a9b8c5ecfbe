/* A topology file's "app_actors" and "routes" (config/appspec.h,
 * docs/topology.md, Application actors and their routes): each entry's
 * form, at the line and column of the offending key. What the table says
 * (config/topokeys.c: unknown keys, ranges, which placement takes a key) is
 * checked by walking it; what needs the entry's other keys or the entries
 * before it is said here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "config/topoapps.h"
#include "config/topokeys.h"
#include "http/route_stream.h"
#include "transport/links.h"
#include "transport/topology.h"
#include "bus/natsopt.h"

#define NAME_RULE "1 to 48 bytes of a-z, 0-9, _ and -"
_Static_assert(M0__ACTOR_NAME_MAX == 48, "NAME_RULE and the table (config/topokeys.c) say 48");
_Static_assert(M0__INSTANCES_MAX == 64 && M0__ACTORS_MAX == 64, "the table (config/topokeys.c) says instances 1..64, app_actors 64");
_Static_assert(M0__PLACE_THREAD == 0 && M0__PLACE_PROCESS == 1 && M0__PLACE_EXTERNAL == 2 && M0__PLACE_NATS == 3,
               "the table's placement bits (config/topokeys.c)");

/* One list being read: where it is, and the entries read so far. */
typedef struct topoapps_list {
  m0_config *cfg;
  const char *text;
  bool tls;   /* the file has "tls" */
  size_t i;   /* the entry being read */
  char p[40]; /* its path, "app_actors[1]" */
  const m0__actor_spec *aa; /* supervisors: the file's app_actors, which their children name */
  int naa;
} topoapps_list;

/* 1..48 bytes of [a-z0-9_-]. */
static bool topoapps_name_ok(const char *s) {
  size_t n = 0;
  for (; s && s[n]; n++)
    if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_' || s[n] == '-')) return false;
  return n >= 1 && n <= M0__ACTOR_NAME_MAX;
}

/* The entry is an object of the table's keys of `in`. */
static bool topoapps_entry_form(topoapps_list *l, json_t *e, const char *in, const char *shape, const char *more) {
  if (!json_is_object(e)) {
    m0__topo_fail_at(l->cfg, l->text, l->p, NULL, "%s must be an object %s", l->p, shape);
    return false;
  }
  const char *unk = m0__topo_unknown(e, in);
  if (unk) {
    char keys[200];
    m0__topo_key_list(in, keys, sizeof keys);
    m0__topo_fail_at(l->cfg, l->text, l->p, unk, "%s has the unknown key \"%.64s\" (its keys are %s%s)", l->p, unk,
                     keys, more);
    return false;
  }
  return true;
}

static bool topoapps_name(topoapps_list *l, json_t *e, m0__actor_spec *specs) {
  const char *nm = json_string_value(json_object_get(e, "name")), *p = l->p;
  if (!json_object_get(e, "name")) {
    m0__topo_fail_at(l->cfg, l->text, p, NULL, "%s has no \"name\" (give every actor a name of " NAME_RULE ")", p);
    return false;
  }
  if (!topoapps_name_ok(nm)) {
    if (nm) m0__topo_fail_at(l->cfg, l->text, p, "name", "%s.name is \"%.64s\": an actor's name is " NAME_RULE, p, nm);
    else m0__topo_fail_at(l->cfg, l->text, p, "name", "%s.name must be a string of " NAME_RULE, p);
    return false;
  }
  for (size_t j = 0; j < l->i; j++)
    if (!strcmp(specs[j].name, nm)) {
      m0__topo_fail_at(l->cfg, l->text, p, "name", "%s.name \"%s\" is app_actors[%zu]'s too (give each actor one entry)",
                       p, nm, j);
      return false;
    }
  snprintf(specs[l->i].name, sizeof specs[l->i].name, "%s", nm);
  return true;
}

static bool topoapps_placement(topoapps_list *l, json_t *e, m0__actor_spec *s) {
  static const char *const names[] = {[M0__PLACE_THREAD] = "thread", [M0__PLACE_PROCESS] = "process",
                                      [M0__PLACE_EXTERNAL] = "external", [M0__PLACE_NATS] = "nats"};
  json_t *pl = json_object_get(e, "placement");
  if (!pl) {
    m0__topo_fail_at(l->cfg, l->text, l->p, NULL,
                     "%s (%s) has no \"placement\" (say \"thread\", \"process\", \"external\" or \"nats\")", l->p,
                     s->name);
    return false;
  }
  const char *pv = json_string_value(pl);
  for (int k = 0; pv && k < 4; k++)
    if (!strcmp(pv, names[k])) {
      s->placement = (m0__placement)k;
      return true;
    }
  m0__topo_fail_at(l->cfg, l->text, l->p, "placement",
                   "%s.placement must be \"thread\", \"process\", \"external\" or \"nats\"", l->p);
  return false;
}

/* The url's value (the table has said whether the placement takes one). */
static bool topoapps_url(topoapps_list *l, json_t *url, m0__actor_spec *s) {
  const char *u = json_string_value(url), *p = l->p;
  const char *ipc = m0__url_prefix(M0__URL_IPC), *tcp = m0__url_prefix(M0__URL_TCP);
  m0__url_kind kind = m0__url_kind_of(u);
  if (kind == M0__URL_TLS_TCP && !l->tls) {
    m0__topo_fail_at(l->cfg, l->text, p, "url",
                     "%s.url \"%.300s\" is tls+tcp, which needs the file's \"tls\" (add \"tls\": {\"cert\": ..., "
                     "\"key\": ..., \"ca\": ...}, or use %s or %s)",
                     p, u, ipc, tcp);
    return false;
  }
  if (!u) m0__topo_fail_at(l->cfg, l->text, p, "url", "%s.url must be a string, an %s or %s URL (or %s)", p, ipc, tcp,
                           m0__url_prefix(M0__URL_TLS_TCP));
  else if (kind == M0__URL_INPROC)
    m0__topo_fail_at(l->cfg, l->text, p, "url",
                     "%s.url \"%.300s\" is inproc, which no other process can dial (use %s or %s)", p, u, ipc, tcp);
  else if (kind == M0__URL_OTHER)
    m0__topo_fail_at(l->cfg, l->text, p, "url", "%s.url \"%.300s\" is not an %s or %s URL (nor %s)", p, u, ipc, tcp,
                     m0__url_prefix(M0__URL_TLS_TCP));
  else if (strlen(u) >= sizeof s->url)
    m0__topo_fail_at(l->cfg, l->text, p, "url", "%s.url is %zu bytes, longer than %zu (shorten it)", p, strlen(u),
                     sizeof s->url - 1);
  else {
    snprintf(s->url, sizeof s->url, "%s", u);
    return true;
  }
  return false;
}

/* A nats actor's NATS server ("url", required: the bus's server is
 * another concern, and may be none) and "subject" (default
 * m0.actor.<name>: what an instance started with the actor's name alone
 * finds; docs/topology.md). */
static bool topoapps_nats(topoapps_list *l, json_t *e, m0__actor_spec *s) {
  const char *u = json_string_value(json_object_get(e, "url")), *sub = json_string_value(json_object_get(e, "subject"));
  if (!m0__nats_url_ok(u)) {
    m0__topo_fail_at(l->cfg, l->text, l->p, json_object_get(e, "url") ? "url" : NULL,
                     "%s (%s) is placed nats: its \"url\" must be the NATS server's, nats://HOST:PORT or "
                     "tls://HOST:PORT (give \"url\": \"nats://127.0.0.1:4222\")",
                     l->p, s->name);
    return false;
  }
  snprintf(s->url, sizeof s->url, "%s", u);
  if (json_object_get(e, "subject") && !m0__nats_subject_ok(sub)) {
    char full[80];
    snprintf(full, sizeof full, "%s.subject", l->p);
    m0__topo_fail_at(l->cfg, l->text, l->p, "subject", m0__topo_key_find("app_actors", "subject")->bad, full);
    return false;
  }
  if (sub) snprintf(s->subject, sizeof s->subject, "%s", sub);
  else snprintf(s->subject, sizeof s->subject, "m0.actor.%s", s->name);
  json_t *lanes = json_object_get(e, "lanes");
  s->lanes = lanes ? (int)json_integer_value(lanes) : (int)m0__topo_default("app_actors", "lanes");
  return true;
}

/* "secret" (a key file's path) and "trusted_network" (docs/topology.md,
 * Instances prove who they are). The key file itself is read by the links
 * check (the doctor), so what is wrong with it is said as serving would. */
static bool topoapps_proof(topoapps_list *l, json_t *e, m0__actor_spec *s) {
  s->trusted_network = json_is_true(json_object_get(e, "trusted_network"));
  json_t *sec = json_object_get(e, "secret");
  if (!sec) return true;
  const char *sv = json_string_value(sec);
  char full[80];
  snprintf(full, sizeof full, "%s.secret", l->p);
  if (!sv || !sv[0]) {
    m0__topo_fail_at(l->cfg, l->text, l->p, "secret", m0__topo_key_find("app_actors", "secret")->bad, full);
    return false;
  }
  if (!m0__topo_path(M0__CFGS(l->cfg, topology), sv, s->secret_file, sizeof s->secret_file)) {
    m0__topo_fail_at(l->cfg, l->text, l->p, "secret", "%s: the path is longer than %zu bytes", full,
                     sizeof s->secret_file - 1);
    return false;
  }
  return true;
}

static bool topoapps_restart(topoapps_list *l, json_t *rs, m0__actor_spec *s) {
  s->restart_intensity = (int)m0__topo_default("app_actors.restart", "intensity");
  s->restart_period_ms = m0__topo_default("app_actors.restart", "period_ms");
  if (!rs) return true;
  topoapps_list r = *l;
  snprintf(r.p, sizeof r.p, "%.30s.restart", l->p);
  if (!topoapps_entry_form(&r, rs, "app_actors.restart", "", "") ||
      !m0__topo_check_keys(l->cfg, l->text, rs, "app_actors.restart", r.p, 0))
    return false;
  json_t *ri = json_object_get(rs, "intensity"), *rpm = json_object_get(rs, "period_ms");
  if (ri) s->restart_intensity = (int)json_integer_value(ri);
  if (rpm) s->restart_period_ms = (long)json_integer_value(rpm);
  return true;
}

/* Two actors cannot listen at one address (a URL left out is built from
 * the name, ipc://<run-dir>/actor.<name>.sock). */
static bool topoapps_own_url(topoapps_list *l, const m0__actor_spec *specs) {
  const m0__actor_spec *s = &specs[l->i];
  char mine[256], theirs[256];
  if (s->placement == M0__PLACE_THREAD || s->placement == M0__PLACE_NATS ||
      m0__topology_app_url(mine, sizeof mine, s->url, "<run-dir>", s->name) != 0)
    return true;
  for (size_t j = 0; j < l->i; j++)
    if (specs[j].placement != M0__PLACE_THREAD && specs[j].placement != M0__PLACE_NATS &&
        m0__topology_app_url(theirs, sizeof theirs, specs[j].url, "<run-dir>", specs[j].name) == 0 &&
        !strcmp(mine, theirs)) {
      m0__topo_fail_at(l->cfg, l->text, l->p, s->url[0] ? "url" : NULL,
                       "%s (%s) would listen at %.300s, as app_actors[%zu] (%s) does (give each actor its own url)",
                       l->p, s->name, mine, j, specs[j].name);
      return false;
    }
  return true;
}

static bool topoapps_actor(topoapps_list *l, json_t *e, void *list) {
  m0__actor_spec *specs = list, *s = &specs[l->i];
  if (!topoapps_entry_form(l, e, "app_actors", "{\"name\": ..., \"placement\": ...}", "") ||
      !topoapps_name(l, e, specs) || !topoapps_placement(l, e, s) ||
      !m0__topo_check_keys(l->cfg, l->text, e, "app_actors", l->p, 1u << s->placement))
    return false;
  json_t *inst = json_object_get(e, "instances"), *q = json_object_get(e, "queue"), *url = json_object_get(e, "url");
  bool outside = s->placement == M0__PLACE_EXTERNAL || s->placement == M0__PLACE_NATS;
  s->instances = outside ? 0 : (int)m0__topo_default("app_actors", "instances");
  if (inst) s->instances = (int)json_integer_value(inst);
  s->queue = q ? (int)json_integer_value(q) : (int)m0__topo_default("app_actors", "queue");
  if (s->placement == M0__PLACE_NATS) {
    if (!topoapps_nats(l, e, s)) return false;
  } else if (url && !topoapps_url(l, url, s)) {
    return false;
  }
  if (!topoapps_proof(l, e, s) ||
      !topoapps_restart(l, json_object_get(e, "restart"), s))
    return false;
  s->from_file = true;
  return topoapps_own_url(l, specs);
}

/* The list's size, checked, and its storage. NULL with *ok false: refused. */
static void *topoapps_alloc(topoapps_list *l, const char *key, size_t n, size_t max, size_t size, bool *ok) {
  *ok = false;
  if (n > max) {
    char p[40];
    snprintf(p, sizeof p, "%s[%zu]", key, max);
    if (!strcmp(key, "app_actors"))
      m0__topo_fail_at(l->cfg, l->text, p, NULL, "app_actors lists %zu actors, more than %zu: declare at most %zu", n,
                       max, max);
    else m0__topo_fail_at(l->cfg, l->text, p, NULL, "%s lists %zu %s, more than %zu", key, n,
                          strcmp(key, "routes") ? "entries" : "routes", max);
    return NULL;
  }
  void *v = n ? calloc(n, size) : NULL;
  if (n && !v) {
    m0__topo_fail_at(l->cfg, l->text, key, NULL, "%s: out of memory for %zu %s", key, n,
                     strcmp(key, "app_actors") ? "routes" : "actors");
    return NULL;
  }
  *ok = true;
  return v;
}

/* Reads the file's list `key` entry by entry (entry reads list[l->i] into
 * the storage's element l->i, and may look at the ones before it): true with
 * the storage in *out (NULL when the list is empty) and its length in *n, or
 * false, refused, with nothing kept. */
static bool topoapps_read(topoapps_list *l, const char *key, json_t *list, size_t size,
                          bool (*entry)(topoapps_list *, json_t *, void *), void **out, int *n) {
  size_t len = json_array_size(list);
  bool ok;
  void *specs = topoapps_alloc(l, key, len, (size_t)m0__topo_key_find("", key)->max, size, &ok);
  for (l->i = 0; ok && l->i < len; l->i++) {
    snprintf(l->p, sizeof l->p, "%s[%zu]", key, l->i);
    ok = entry(l, json_array_get(list, l->i), specs);
  }
  if (!ok) {
    free(specs);
    return false;
  }
  *out = specs;
  *n = (int)len;
  return true;
}

bool m0__topo_app_actors(m0_config *cfg, const char *text, json_t *list, bool tls, m0__actor_spec **out, int *n) {
  topoapps_list l = {cfg, text, tls, 0, ""};
  void *specs;
  if (!topoapps_read(&l, "app_actors", list, sizeof **out, topoapps_actor, &specs, n)) return false;
  *out = specs;
  return true;
}

/* A method: 1..31 bytes of A-Z. */
static bool topoapps_method_ok(const char *s) {
  size_t n = 0;
  for (; s && s[n]; n++)
    if (s[n] < 'A' || s[n] > 'Z') return false;
  return n >= 1 && n <= 31;
}

/* A required string key of a route: present, and what ok says. */
static const char *topoapps_route_str(topoapps_list *l, json_t *e, const char *key, const char *missing,
                                      bool (*ok)(const char *)) {
  json_t *v = json_object_get(e, key);
  if (!v) {
    m0__topo_fail_at(l->cfg, l->text, l->p, NULL, "%s has no \"%s\" (%s)", l->p, key, missing);
    return NULL;
  }
  const char *sv = json_string_value(v);
  if (!ok(sv)) {
    const m0__topo_key *k = m0__topo_key_find("routes", key);
    char full[80];
    snprintf(full, sizeof full, "%s.%s", l->p, key);
    m0__topo_fail_at(l->cfg, l->text, l->p, key, k->bad, full, k->max + 1);
    return NULL;
  }
  return sv;
}

static bool topoapps_pattern_ok(const char *s) { return s && s[0] == '/' && strlen(s) < 256; }

/* A route that is a channel ("stream": its template, http/route_stream.h):
 * no actor, no timeout (a subscriber stays), GET, a template the pattern
 * fills in. */
static bool topoapps_route_stream(topoapps_list *l, json_t *e, m0__route_spec *s) {
  const char *sv = json_string_value(json_object_get(e, "stream")), *p = l->p;
  const char *bad = !sv ? "must be a string, a channel's name" : m0__route_stream_check(sv, s->pattern);
  if (json_object_get(e, "actor")) {
    m0__topo_fail_at(l->cfg, l->text, p, "stream",
                     "%s has both \"actor\" and \"stream\" (a route is served by an actor or is a channel's "
                     "stream: keep one)", p);
  } else if (json_object_get(e, "timeout_ms")) {
    m0__topo_fail_at(l->cfg, l->text, p, "timeout_ms",
                     "%s.timeout_ms is for an actor's route: a stream's subscriber stays until it goes (drop the key)",
                     p);
  } else if (bad) {
    m0__topo_fail_at(l->cfg, l->text, p, "stream",
                     "%s.stream %s (a channel: 1 to 64 visible bytes, not \"m0.\" first; a {name} of the pattern "
                     "stands for that segment, e.g. \"room.{room}\")", p, bad);
  } else if (strcmp(s->method, "GET")) {
    m0__topo_fail_at(l->cfg, l->text, p, "method",
                     "%s.method is \"%s\": a stream route is \"GET\" (a subscription is a GET, a WebSocket's "
                     "upgrade too; HEAD is answered with it)", p, s->method);
  } else {
    snprintf(s->stream, sizeof s->stream, "%s", sv);
    return true;
  }
  return false;
}

static bool topoapps_route(topoapps_list *l, json_t *e, void *list) {
  m0__route_spec *specs = list, *s = &specs[l->i];
  const char *m, *pv, *av = NULL;
  bool stream = json_object_get(e, "stream") != NULL;
  if (!topoapps_entry_form(l, e, "routes", "{\"method\": ..., \"pattern\": ..., \"actor\": ...}",
                           "; a file's route is served by an actor, or is a channel's stream") ||
      !(m = topoapps_route_str(l, e, "method", "say \"GET\", \"POST\", ...", topoapps_method_ok)) ||
      !(pv = topoapps_route_str(l, e, "pattern", "say \"/path/{param}\"", topoapps_pattern_ok)) ||
      (!stream && !(av = topoapps_route_str(l, e, "actor", "name the actor that serves it, or say \"stream\": "
                                            "CHANNEL", topoapps_name_ok))) ||
      !m0__topo_check_keys(l->cfg, l->text, e, "routes", l->p, 0))
    return false;
  json_t *t = json_object_get(e, "timeout_ms");
  snprintf(s->method, sizeof s->method, "%s", m);
  snprintf(s->pattern, sizeof s->pattern, "%s", pv);
  if (stream && !topoapps_route_stream(l, e, s)) return false;
  snprintf(s->actor, sizeof s->actor, "%s", av ? av : "");
  s->timeout_ms = stream ? 0 : t ? (long)json_integer_value(t) : m0__topo_default("routes", "timeout_ms");
  for (size_t j = 0; j < l->i; j++)
    if (!strcmp(specs[j].method, s->method) && !strcmp(specs[j].pattern, s->pattern)) {
      m0__topo_fail_at(l->cfg, l->text, l->p, "method",
                       "%s is %s %.256s again, as routes[%zu] (give each method and pattern one route)", l->p,
                       s->method, s->pattern, j);
      return false;
    }
  return true;
}

bool m0__topo_routes(m0_config *cfg, const char *text, json_t *list, m0__route_spec **out, int *n) {
  topoapps_list l = {cfg, text, false, 0, ""};
  void *specs;
  if (!topoapps_read(&l, "routes", list, sizeof **out, topoapps_route, &specs, n)) return false;
  *out = specs;
  return true;
}

/* A supervisor's word from a closed set: index into names, or M0__EINVALID
 * (refused, said). */
static int topoapps_word(topoapps_list *l, json_t *e, const char *key, const char *const *names, int n, int dflt) {
  json_t *v = json_object_get(e, key);
  if (!v) return dflt;
  for (int k = 0; json_is_string(v) && k < n; k++)
    if (!strcmp(json_string_value(v), names[k])) return k;
  char full[80];
  snprintf(full, sizeof full, "%s.%s", l->p, key);
  m0__topo_fail_at(l->cfg, l->text, l->p, key, m0__topo_key_find("supervisors", key)->bad, full);
  return M0__EINVALID;
}

/* Child k of supervisor l->i: an app_actors entry placed process or
 * thread, or a supervisor's name (config/topotree.c, once all are read),
 * in no other supervisor (nor twice in this one). */
static bool topoapps_sup_child(topoapps_list *l, json_t *c, size_t k, m0__sup_spec *sups) {
  const char *nm = json_string_value(c), *p = l->p;
  int a = 0;
  while (nm && a < l->naa && strcmp(l->aa[a].name, nm)) a++;
  if (!topoapps_name_ok(nm)) {
    m0__topo_fail_at(l->cfg, l->text, p, "children",
                     "%s.children[%zu] %s%.64s%s is no actor of app_actors (name an entry placed \"process\" or "
                     "\"thread\", or a supervisor)",
                     p, k, nm ? "\"" : "", nm ? nm : "is not a string and", nm ? "\"" : "");
    return false;
  }
  if (a < l->naa && l->aa[a].placement != M0__PLACE_PROCESS && l->aa[a].placement != M0__PLACE_THREAD) {
    m0__topo_fail_at(l->cfg, l->text, p, "children",
                     "%s.children[%zu] \"%s\" is placed %s: a supervisor restarts only what the host runs "
                     "(place it \"process\" or \"thread\", or leave it out)",
                     p, k, nm, m0__placement_name(l->aa[a].placement));
    return false;
  }
  for (size_t j = 0; j <= l->i; j++)
    for (int m = 0; m < (j == l->i ? (int)k : sups[j].nchildren); m++)
      if (!strcmp(sups[j].children[m], nm)) {
        m0__topo_fail_at(l->cfg, l->text, p, "children",
                         "%s.children[%zu] \"%s\" is supervisors[%zu]'s child too (an actor or a supervisor has at "
                         "most one supervisor: name it once)",
                         p, k, nm, j);
        return false;
      }
  snprintf(sups[l->i].children[k], sizeof sups[l->i].children[k], "%s", nm);
  return true;
}

static bool topoapps_sup_name(topoapps_list *l, json_t *e, m0__sup_spec *sups) {
  const char *nm = json_string_value(json_object_get(e, "name")), *p = l->p;
  if (!topoapps_name_ok(nm)) {
    m0__topo_fail_at(l->cfg, l->text, p, nm ? "name" : NULL,
                     "%s needs a \"name\" of " NAME_RULE " (the host's stderr names it when it gives up)", p);
    return false;
  }
  for (size_t j = 0; j < l->i; j++)
    if (!strcmp(sups[j].name, nm)) {
      m0__topo_fail_at(l->cfg, l->text, p, "name", "%s.name \"%s\" is supervisors[%zu]'s too (give each its own)", p,
                       nm, j);
      return false;
    }
  snprintf(sups[l->i].name, sizeof sups[l->i].name, "%s", nm);
  return true;
}

static bool topoapps_supervisor(topoapps_list *l, json_t *e, void *list) {
  static const char *const strategies[] = {[M0__SUP_ONE_FOR_ONE] = "one_for_one", [M0__SUP_ONE_FOR_ALL] = "one_for_all",
                                           [M0__SUP_REST_FOR_ONE] = "rest_for_one"};
  static const char *const fails[] = {"exit", "serve_on"};
  m0__sup_spec *sups = list, *s = &sups[l->i];
  if (!topoapps_entry_form(l, e, "supervisors", "{\"name\": ..., \"strategy\": ..., \"children\": [...]}", "") ||
      !topoapps_sup_name(l, e, sups) || !m0__topo_check_keys(l->cfg, l->text, e, "supervisors", l->p, 0))
    return false;
  int st = topoapps_word(l, e, "strategy", strategies, 3, M0__SUP_ONE_FOR_ONE);
  int of = st < 0 ? -1 : topoapps_word(l, e, "on_fail", fails, 2, 0);
  if (of < 0) return false;
  s->strategy = (m0__sup_strategy)st;
  s->serve_on = of == 1;
  json_t *ri = json_object_get(e, "intensity"), *rp = json_object_get(e, "period_ms");
  json_t *ch = json_object_get(e, "children");
  s->intensity = ri ? (int)json_integer_value(ri) : (int)m0__topo_default("supervisors", "intensity");
  s->period_ms = rp ? (long)json_integer_value(rp) : m0__topo_default("supervisors", "period_ms");
  const m0__topo_key *ck = m0__topo_key_find("supervisors", "children");
  if (!ch || json_array_size(ch) < (size_t)ck->min || json_array_size(ch) > (size_t)ck->max) {
    char full[80];
    snprintf(full, sizeof full, "%s.children", l->p);
    m0__topo_fail_at(l->cfg, l->text, l->p, ch ? "children" : NULL, ck->bad, full);
    return false;
  }
  for (size_t k = 0; k < json_array_size(ch); k++)
    if (!topoapps_sup_child(l, json_array_get(ch, k), k, sups)) return false;
  s->nchildren = (int)json_array_size(ch);
  return true;
}

bool m0__topo_supervisors(m0_config *cfg, const char *text, json_t *list, const m0__actor_spec *aa, int naa,
                          m0__sup_spec **out, int *n) {
  topoapps_list l = {cfg, text, false, 0, "", aa, naa};
  void *specs;
  if (!topoapps_read(&l, "supervisors", list, sizeof **out, topoapps_supervisor, &specs, n)) return false;
  if (!m0__topo_sup_tree(cfg, text, aa, naa, specs, *n)) {
    free(specs);
    return false;
  }
  *out = specs;
  return true;
}
