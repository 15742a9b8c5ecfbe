#include "host/topofile.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"
#include "host/appspec.h"
#include "transport/links.h"
#include "transport/topology.h"

/* Where "key" first appears in the text, for an error about its value
 * (jansson gives positions for syntax errors only). */
static void topo_where(const char *text, const char *key, int *line, int *col) {
  char pat[80];
  snprintf(pat, sizeof pat, "\"%s\"", key);
  const char *at = text ? strstr(text, pat) : NULL;
  *line = 1;
  *col = 1;
  for (const char *p = text; at && p < at; p++) {
    if (*p == '\n') {
      (*line)++;
      *col = 1;
    } else (*col)++;
  }
}

static void topo_fail(m0_config *cfg, const char *text, const char *key, const char *fmt, const char *what) {
  int line, col;
  topo_where(text, key, &line, &col);
  snprintf(cfg->topology_error, sizeof cfg->topology_error, "%s line %d column %d: ", M0__CFGS(cfg, topology),
           line, col);
  size_t n = strlen(cfg->topology_error);
  snprintf(cfg->topology_error + n, sizeof cfg->topology_error - n, fmt, what);
}

/* ---- where a key of an entry is: "app_actors[1].restart.period_ms" ----
 * jansson gives no positions past a syntax error, and the first "placement"
 * in the text is app_actors[0]'s, so the text (which jansson has accepted:
 * it is valid JSON) is walked along the path instead. */

static const char *js_ws(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
  return p;
}

/* p at '"': past the closing quote. */
static const char *js_string_end(const char *p) {
  for (p++; *p && *p != '"'; p++)
    if (*p == '\\' && p[1]) p++;
  return *p ? p + 1 : p;
}

/* p at a value: past it. */
static const char *js_value_end(const char *p) {
  if (*p == '"') return js_string_end(p);
  if (*p == '{' || *p == '[') {
    int depth = 0;
    for (; *p; p++) {
      if (*p == '"') {
        p = js_string_end(p) - 1;
        continue;
      }
      if (*p == '{' || *p == '[') depth++;
      else if ((*p == '}' || *p == ']') && --depth == 0) return p + 1;
    }
    return p;
  }
  while (*p && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') p++;
  return p;
}

/* Whether the string at p (at '"'), its escapes read, spells key (n bytes). */
static bool js_key_is(const char *p, const char *key, size_t n) {
  size_t k = 0;
  for (p++; *p && *p != '"'; p++) {
    char c = *p;
    if (c == '\\') {
      p++;
      switch (*p) {
      case 'b': c = '\b'; break;
      case 'f': c = '\f'; break;
      case 'n': c = '\n'; break;
      case 'r': c = '\r'; break;
      case 't': c = '\t'; break;
      case 'u': {
        unsigned v = 0;
        for (int i = 1; i <= 4; i++) {
          char h = p[i];
          if (!h) return false;
          v = v * 16 + (unsigned)(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
        }
        if (v == 0 || v > 0x7f) return false; /* every key m0 names is ASCII */
        c = (char)v;
        p += 4;
        break;
      }
      default: c = *p; /* \" \\ \/ */
      }
    }
    if (k >= n || key[k++] != c) return false;
  }
  return k == n;
}

/* In the object at p: where key (n bytes) is, or NULL; *val its value. */
static const char *js_member(const char *p, const char *key, size_t n, const char **val) {
  if (*p != '{') return NULL;
  p = js_ws(p + 1);
  while (*p == '"') {
    const char *k = p, *v = js_ws(js_ws(js_string_end(p)) + 1);
    if (js_key_is(k, key, n)) {
      *val = v;
      return k;
    }
    p = js_ws(js_value_end(v));
    if (*p != ',') break;
    p = js_ws(p + 1);
  }
  return NULL;
}

/* In the list at p: where element i is, or NULL. */
static const char *js_element(const char *p, long i) {
  if (*p != '[') return NULL;
  p = js_ws(p + 1);
  for (long k = 0; *p && *p != ']'; k++) {
    if (k == i) return p;
    p = js_ws(js_value_end(p));
    if (*p != ',') break;
    p = js_ws(p + 1);
  }
  return NULL;
}

/* Where the path's last step is in text ("a[1].b": key b of element 1 of
 * a), then `key` in it when given: as far along as it goes. */
static const char *topo_locate(const char *text, const char *path, const char *key) {
  const char *at = js_ws(text), *val = at;
  for (const char *s = path; *s;) {
    if (*s == '[') {
      char *end;
      long i = strtol(s + 1, &end, 10);
      const char *e = js_element(val, i);
      if (!e || *end != ']') return at;
      at = val = e;
      s = end + 1;
    } else {
      if (*s == '.') s++;
      size_t n = strcspn(s, ".[");
      const char *v, *k = js_member(val, s, n, &v);
      if (!k) return at;
      at = k;
      val = v;
      s += n;
    }
  }
  if (key) {
    const char *v, *k = js_member(val, key, strlen(key), &v);
    if (k) at = k;
  }
  return at;
}

/* The file is refused at path (and key in it): "FILE line L column C: ...". */
static void topo_fail_at(m0_config *cfg, const char *text, const char *path, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void topo_fail_at(m0_config *cfg, const char *text, const char *path, const char *key, const char *fmt, ...) {
  const char *at = topo_locate(text, path, key);
  int line = 1, col = 1;
  for (const char *p = text; p < at; p++) {
    if (*p == '\n') {
      line++;
      col = 1;
    } else col++;
  }
  snprintf(cfg->topology_error, sizeof cfg->topology_error, "%s line %d column %d: ", M0__CFGS(cfg, topology), line,
           col);
  size_t n = strlen(cfg->topology_error);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cfg->topology_error + n, sizeof cfg->topology_error - n, fmt, ap);
  va_end(ap);
}

/* Sets option opt from the file unless a flag or variable already did. */
static void topo_set(m0_config *cfg, int opt, long v) {
  if (cfg->v[opt].source != M0__SRC_DEFAULT) return;
  cfg->v[opt].num = v;
  snprintf(cfg->v[opt].str, sizeof cfg->v[opt].str, "%ld", v);
  cfg->v[opt].source = M0__SRC_TOPOLOGY;
}

/* ---- "app_actors" and "routes" (host/appspec.h, docs/topology.md) ---- */

/* 1..48 bytes of [a-z0-9_-]. */
static bool topo_actor_name_ok(const char *s) {
  size_t n = 0;
  for (; s && s[n]; n++)
    if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_' || s[n] == '-')) return false;
  return n >= 1 && n <= M0__ACTOR_NAME_MAX;
}

static bool topo_int_in(json_t *v, long min, long max) {
  return json_is_integer(v) && json_integer_value(v) >= min && json_integer_value(v) <= max;
}

/* The first key of object o not in known (NULL-terminated), or NULL. */
static const char *topo_unknown_key(json_t *o, const char *const *known) {
  const char *key;
  json_t *v;
  json_object_foreach(o, key, v) {
    int k = 0;
    while (known[k] && strcmp(known[k], key)) k++;
    if (!known[k]) return key;
  }
  return NULL;
}

#define NAME_RULE "1 to 48 bytes of a-z, 0-9, _ and -"

static bool topo_tls_path(const char *file, const char *path, char *out, size_t n);

/* An app actor's "secret" (a key file's path) and "trusted_network" (docs/
 * topology.md, Instances prove who they are): for process and external
 * placement. The key file itself is read by the links check (the doctor),
 * so what is wrong with it is said as serving would. */
static bool topo_app_proof(m0_config *cfg, const char *text, json_t *e, const char *p, m0__actor_spec *s) {
  json_t *sec = json_object_get(e, "secret"), *tn = json_object_get(e, "trusted_network");
  const char *which = sec ? "secret" : "trusted_network";
  if ((sec || tn) && s->placement == M0__PLACE_THREAD) {
    topo_fail_at(cfg, text, p, which,
                 "%s.%s is for process and external placement: a thread actor's instances are the host's own "
                 "(drop the key)", p, which);
    return false;
  }
  if (tn && !json_is_boolean(tn)) {
    topo_fail_at(cfg, text, p, "trusted_network", "%s.trusted_network must be true or false", p);
    return false;
  }
  s->trusted_network = tn && json_is_true(tn);
  if (!sec) return true;
  const char *sv = json_string_value(sec);
  if (!sv || !sv[0]) {
    topo_fail_at(cfg, text, p, "secret", "%s.secret must be a key file's path (a file of 16 to 4096 secret bytes, "
                                         "mode 600)", p);
    return false;
  }
  if (!topo_tls_path(M0__CFGS(cfg, topology), sv, s->secret_file, sizeof s->secret_file)) {
    topo_fail_at(cfg, text, p, "secret", "%s.secret: the path is longer than %zu bytes", p, sizeof s->secret_file - 1);
    return false;
  }
  return true;
}

/* Reads "app_actors" into *out (*n entries). false: refused, the reason in
 * cfg->topology_error. */
static bool topo_app_actors(m0_config *cfg, const char *text, json_t *list, bool tls, m0__actor_spec **out, int *n) {
  static const char *const known[] = {"name",  "placement", "instances", "url", "restart", "queue",
                                      "secret", "trusted_network", NULL};
  static const char *const rknown[] = {"intensity", "period_ms", NULL};
  *out = NULL;
  *n = 0;
  if (!json_is_array(list)) {
    topo_fail_at(cfg, text, "app_actors", NULL,
                 "app_actors must be a list of {\"name\": ..., \"placement\": \"thread\" | \"process\" | \"external\"}");
    return false;
  }
  size_t na = json_array_size(list);
  if (na > M0__ACTORS_MAX) {
    char p[40];
    snprintf(p, sizeof p, "app_actors[%d]", M0__ACTORS_MAX);
    topo_fail_at(cfg, text, p, NULL, "app_actors lists %zu actors, more than %d: declare at most %d", na,
                 M0__ACTORS_MAX, M0__ACTORS_MAX);
    return false;
  }
  m0__actor_spec *specs = na ? calloc(na, sizeof *specs) : NULL;
  if (na && !specs) {
    topo_fail_at(cfg, text, "app_actors", NULL, "app_actors: out of memory for %zu actors", na);
    return false;
  }
  char p[40];
  for (size_t i = 0; i < na; i++) {
    json_t *e = json_array_get(list, i);
    m0__actor_spec *s = &specs[i];
    snprintf(p, sizeof p, "app_actors[%zu]", i);
    if (!json_is_object(e)) {
      topo_fail_at(cfg, text, p, NULL, "%s must be an object {\"name\": ..., \"placement\": ...}", p);
      goto bad;
    }
    const char *unk = topo_unknown_key(e, known);
    if (unk) {
      topo_fail_at(cfg, text, p, unk,
                   "%s has the unknown key \"%.64s\" (its keys are name, placement, instances, url, restart, queue, "
                   "secret and trusted_network)",
                   p, unk);
      goto bad;
    }
    json_t *name = json_object_get(e, "name"), *pl = json_object_get(e, "placement");
    json_t *inst = json_object_get(e, "instances"), *url = json_object_get(e, "url");
    json_t *rs = json_object_get(e, "restart"), *q = json_object_get(e, "queue");
    if (!name) {
      topo_fail_at(cfg, text, p, NULL, "%s has no \"name\" (give every actor a name of " NAME_RULE ")", p);
      goto bad;
    }
    const char *nm = json_string_value(name);
    if (!topo_actor_name_ok(nm)) {
      if (nm) topo_fail_at(cfg, text, p, "name", "%s.name is \"%.64s\": an actor's name is " NAME_RULE, p, nm);
      else topo_fail_at(cfg, text, p, "name", "%s.name must be a string of " NAME_RULE, p);
      goto bad;
    }
    for (size_t j = 0; j < i; j++)
      if (!strcmp(specs[j].name, nm)) {
        topo_fail_at(cfg, text, p, "name", "%s.name \"%s\" is app_actors[%zu]'s too (give each actor one entry)", p,
                     nm, j);
        goto bad;
      }
    snprintf(s->name, sizeof s->name, "%s", nm);
    if (!pl) {
      topo_fail_at(cfg, text, p, NULL, "%s (%s) has no \"placement\" (say \"thread\", \"process\" or \"external\")", p,
                   nm);
      goto bad;
    }
    const char *pv = json_string_value(pl);
    if (pv && !strcmp(pv, "thread")) s->placement = M0__PLACE_THREAD;
    else if (pv && !strcmp(pv, "process")) s->placement = M0__PLACE_PROCESS;
    else if (pv && !strcmp(pv, "external")) s->placement = M0__PLACE_EXTERNAL;
    else {
      topo_fail_at(cfg, text, p, "placement", "%s.placement must be \"thread\", \"process\" or \"external\"", p);
      goto bad;
    }
    bool ext = s->placement == M0__PLACE_EXTERNAL, proc = s->placement == M0__PLACE_PROCESS;
    s->instances = ext ? 0 : 1;
    if (inst && ext) {
      topo_fail_at(cfg, text, p, "instances",
                   "%s.instances is for thread and process placement: an external actor's instances are the programs "
                   "that dial it (drop the key)",
                   p);
      goto bad;
    }
    if (inst && !topo_int_in(inst, 1, M0__INSTANCES_MAX)) {
      topo_fail_at(cfg, text, p, "instances", "%s.instances must be a whole number from 1 to %d", p,
                   M0__INSTANCES_MAX);
      goto bad;
    }
    if (inst) s->instances = (int)json_integer_value(inst);
    if (url && !ext && !proc) {
      topo_fail_at(cfg, text, p, "url",
                   "%s.url is for process and external placement: a thread actor has no URL (drop the key)", p);
      goto bad;
    }
    if (url) {
      const char *u = json_string_value(url);
      bool enc = u && m0__link_encrypted(u);
      if (enc && !tls) {
        topo_fail_at(cfg, text, p, "url",
                     "%s.url \"%.300s\" is tls+tcp, which needs the file's \"tls\" (add \"tls\": {\"cert\": ..., "
                     "\"key\": ..., \"ca\": ...}, or use ipc:// or tcp://)",
                     p, u);
        goto bad;
      }
      if (!u || (!enc && !m0__url_is_nng(u)) || !strncmp(u, "inproc://", 9)) {
        if (u && !strncmp(u, "inproc://", 9))
          topo_fail_at(cfg, text, p, "url",
                       "%s.url \"%.300s\" is inproc, which no other process can dial (use ipc:// or tcp://)", p, u);
        else if (u)
          topo_fail_at(cfg, text, p, "url", "%s.url \"%.300s\" is not an ipc:// or tcp:// URL (nor tls+tcp://)", p, u);
        else
          topo_fail_at(cfg, text, p, "url", "%s.url must be a string, an ipc:// or tcp:// URL (or tls+tcp://)", p);
        goto bad;
      }
      if (strlen(u) >= sizeof s->url) {
        topo_fail_at(cfg, text, p, "url", "%s.url is %zu bytes, longer than %zu (shorten it)", p, strlen(u),
                     sizeof s->url - 1);
        goto bad;
      }
      snprintf(s->url, sizeof s->url, "%s", u);
    }
    if (!topo_app_proof(cfg, text, e, p, s)) goto bad;
    s->restart_intensity = 5;
    s->restart_period_ms = 10000;
    if (rs && !proc) {
      topo_fail_at(cfg, text, p, "restart",
                   "%s.restart is for process placement: only a process the host spawns is restarted (drop the key)",
                   p);
      goto bad;
    }
    if (rs) {
      char rp[60];
      snprintf(rp, sizeof rp, "%s.restart", p);
      if (!json_is_object(rs)) {
        topo_fail_at(cfg, text, p, "restart",
                     "%s must be an object {\"intensity\": 0..1000, \"period_ms\": 1..86400000}", rp);
        goto bad;
      }
      const char *ru = topo_unknown_key(rs, rknown);
      json_t *ri = json_object_get(rs, "intensity"), *rpm = json_object_get(rs, "period_ms");
      if (ru) {
        topo_fail_at(cfg, text, rp, ru, "%s has the unknown key \"%.64s\" (its keys are intensity and period_ms)", rp,
                     ru);
        goto bad;
      }
      if (ri && !topo_int_in(ri, 0, 1000)) {
        topo_fail_at(cfg, text, rp, "intensity", "%s.intensity must be a whole number from 0 to 1000", rp);
        goto bad;
      }
      if (rpm && !topo_int_in(rpm, 1, 86400000)) {
        topo_fail_at(cfg, text, rp, "period_ms", "%s.period_ms must be a whole number from 1 to 86400000", rp);
        goto bad;
      }
      if (ri) s->restart_intensity = (int)json_integer_value(ri);
      if (rpm) s->restart_period_ms = (long)json_integer_value(rpm);
    }
    s->queue = 1024;
    if (q && !topo_int_in(q, 1, 65536)) {
      topo_fail_at(cfg, text, p, "queue", "%s.queue must be a whole number from 1 to 65536", p);
      goto bad;
    }
    if (q) s->queue = (int)json_integer_value(q);
    s->from_file = true;
    /* Two actors cannot listen at one address (a URL left out is built
     * from the name, ipc://<run-dir>/actor.<name>.sock). */
    char mine[256], theirs[256];
    if ((proc || ext) && m0__topology_app_url(mine, sizeof mine, s->url, "<run-dir>", s->name) == 0)
      for (size_t j = 0; j < i; j++)
        if (specs[j].placement != M0__PLACE_THREAD &&
            m0__topology_app_url(theirs, sizeof theirs, specs[j].url, "<run-dir>", specs[j].name) == 0 &&
            !strcmp(mine, theirs)) {
          topo_fail_at(cfg, text, p, s->url[0] ? "url" : NULL,
                       "%s (%s) would listen at %.300s, as app_actors[%zu] (%s) does (give each actor its own url)", p,
                       s->name, mine, j, specs[j].name);
          goto bad;
        }
  }
  *out = specs;
  *n = (int)na;
  return true;
bad:
  free(specs);
  return false;
}

/* A method: 1..31 bytes of A-Z. */
static bool topo_method_ok(const char *s) {
  size_t n = 0;
  for (; s && s[n]; n++)
    if (s[n] < 'A' || s[n] > 'Z') return false;
  return n >= 1 && n <= 31;
}

/* Reads "routes" into *out (*n entries). false: refused. */
static bool topo_routes(m0_config *cfg, const char *text, json_t *list, m0__route_spec **out, int *n) {
  static const char *const known[] = {"method", "pattern", "actor", "timeout_ms", NULL};
  *out = NULL;
  *n = 0;
  if (!json_is_array(list)) {
    topo_fail_at(cfg, text, "routes", NULL,
                 "routes must be a list of {\"method\": ..., \"pattern\": ..., \"actor\": ...}");
    return false;
  }
  size_t nr = json_array_size(list);
  if (nr > 65536) {
    topo_fail_at(cfg, text, "routes[65536]", NULL, "routes lists %zu routes, more than 65536", nr);
    return false;
  }
  m0__route_spec *specs = nr ? calloc(nr, sizeof *specs) : NULL;
  if (nr && !specs) {
    topo_fail_at(cfg, text, "routes", NULL, "routes: out of memory for %zu routes", nr);
    return false;
  }
  char p[40];
  for (size_t i = 0; i < nr; i++) {
    json_t *e = json_array_get(list, i);
    m0__route_spec *s = &specs[i];
    snprintf(p, sizeof p, "routes[%zu]", i);
    if (!json_is_object(e)) {
      topo_fail_at(cfg, text, p, NULL, "%s must be an object {\"method\": ..., \"pattern\": ..., \"actor\": ...}", p);
      goto bad;
    }
    const char *unk = topo_unknown_key(e, known);
    if (unk) {
      topo_fail_at(cfg, text, p, unk,
                   "%s has the unknown key \"%.64s\" (its keys are method, pattern, actor and timeout_ms; a file's "
                   "route is served by an actor)",
                   p, unk);
      goto bad;
    }
    json_t *m = json_object_get(e, "method"), *pat = json_object_get(e, "pattern");
    json_t *a = json_object_get(e, "actor"), *t = json_object_get(e, "timeout_ms");
    if (!m) {
      topo_fail_at(cfg, text, p, NULL, "%s has no \"method\" (say \"GET\", \"POST\", ...)", p);
      goto bad;
    }
    if (!topo_method_ok(json_string_value(m))) {
      topo_fail_at(cfg, text, p, "method", "%s.method must be a string of 1 to 31 capital letters A-Z (\"GET\", ...)",
                   p);
      goto bad;
    }
    if (!pat) {
      topo_fail_at(cfg, text, p, NULL, "%s has no \"pattern\" (say \"/path/{param}\")", p);
      goto bad;
    }
    const char *pv = json_string_value(pat);
    if (!pv || pv[0] != '/' || strlen(pv) >= sizeof s->pattern) {
      topo_fail_at(cfg, text, p, "pattern", "%s.pattern must be a string that starts with / and is shorter than %zu bytes",
                   p, sizeof s->pattern);
      goto bad;
    }
    if (!a) {
      topo_fail_at(cfg, text, p, NULL, "%s has no \"actor\" (name the actor that serves it)", p);
      goto bad;
    }
    const char *av = json_string_value(a);
    if (!topo_actor_name_ok(av)) {
      topo_fail_at(cfg, text, p, "actor", "%s.actor must be an actor's name: a string of " NAME_RULE, p);
      goto bad;
    }
    if (t && !topo_int_in(t, 1, 3600000)) {
      topo_fail_at(cfg, text, p, "timeout_ms", "%s.timeout_ms must be a whole number from 1 to 3600000", p);
      goto bad;
    }
    snprintf(s->method, sizeof s->method, "%s", json_string_value(m));
    snprintf(s->pattern, sizeof s->pattern, "%s", pv);
    snprintf(s->actor, sizeof s->actor, "%s", av);
    s->timeout_ms = t ? (long)json_integer_value(t) : 1000;
    for (size_t j = 0; j < i; j++)
      if (!strcmp(specs[j].method, s->method) && !strcmp(specs[j].pattern, s->pattern)) {
        topo_fail_at(cfg, text, p, "method", "%s is %s %.256s again, as routes[%zu] (give each method and pattern one route)",
                     p, s->method, s->pattern, j);
        goto bad;
      }
  }
  *out = specs;
  *n = (int)nr;
  return true;
bad:
  free(specs);
  return false;
}

/* A topology file is a few hundred bytes; beyond this it is not one (it was
 * cut here and read as if it ended, without a word). */
#define TOPO_FILE_MAX (1u << 20)

static char *topo_read(const char *path, char *why, size_t whylen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(why, whylen, "%s cannot be opened: %s", path, strerror(errno));
    return NULL;
  }
  char *buf = NULL;
  size_t len = 0, cap = 0, n;
  char chunk[4096];
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
    if (len + n > TOPO_FILE_MAX) {
      fclose(f);
      free(buf);
      snprintf(why, whylen, "%s is larger than %u bytes: not a topology file", path, TOPO_FILE_MAX);
      return NULL;
    }
    if (len + n + 1 > cap) {
      cap = (len + n + 1) * 2;
      char *nb = realloc(buf, cap);
      if (!nb) break;
      buf = nb;
    }
    memcpy(buf + len, chunk, n);
    len += n;
  }
  if (ferror(f)) { /* a directory, say: it opens, then every read fails */
    snprintf(why, whylen, "%s cannot be read: %s", path, strerror(errno));
    fclose(f);
    free(buf);
    return NULL;
  }
  fclose(f);
  if (!buf) buf = calloc(1, 1);
  else buf[len] = 0;
  return buf;
}

/* ---- "tls" and "plain_tcp" (docs/topology.md, Links between machines) ---- */

/* A "tls" path: as written when absolute, else joined to the directory of
 * the file (its real path, so the doctor prints a path that means the same
 * wherever its output is saved). false: too long. */
static bool topo_tls_path(const char *file, const char *path, char *out, size_t n) {
  if (path[0] == '/') return (size_t)snprintf(out, n, "%s", path) < n;
  char dir[M0__STR_MAX];
  snprintf(dir, sizeof dir, "%s", file);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  else snprintf(dir, sizeof dir, ".");
  char *real = realpath(dir[0] ? dir : "/", NULL);
  const char *base = real ? real : dir[0] ? dir : "/";
  int w = snprintf(out, n, "%s%s%s", base, base[strlen(base) - 1] == '/' ? "" : "/", path);
  free(real);
  return w > 0 && (size_t)w < n;
}

/* Reads "tls" into the three paths. false: refused. */
static bool topo_tls(m0_config *cfg, const char *text, json_t *o, char paths[3][M0__STR_MAX]) {
  static const char *const known[] = {"cert", "key", "ca", NULL};
  static const char *const what[] = {"this process's certificate", "its private key", "the CA that signs every peer's"};
  if (!json_is_object(o)) {
    topo_fail_at(cfg, text, "tls", NULL,
                 "tls must be an object {\"cert\": PATH, \"key\": PATH, \"ca\": PATH} (PEM files)");
    return false;
  }
  const char *unk = topo_unknown_key(o, known);
  if (unk) {
    topo_fail_at(cfg, text, "tls", unk, "tls has the unknown key \"%.64s\" (its keys are cert, key and ca)", unk);
    return false;
  }
  for (int i = 0; i < 3; i++) {
    json_t *v = json_object_get(o, known[i]);
    const char *sv = json_string_value(v);
    if (!v) {
      topo_fail_at(cfg, text, "tls", NULL, "tls has no \"%s\" (give all three: cert, key and ca; %s is %s, a PEM file)",
                   known[i], known[i], what[i]);
      return false;
    }
    if (!sv || !sv[0]) {
      topo_fail_at(cfg, text, "tls", known[i], "tls.%s must be a PEM file's path (%s)", known[i], what[i]);
      return false;
    }
    if (!topo_tls_path(M0__CFGS(cfg, topology), sv, paths[i], M0__STR_MAX)) {
      topo_fail_at(cfg, text, "tls", known[i], "tls.%s: the path is longer than %d bytes", known[i], M0__STR_MAX - 1);
      return false;
    }
  }
  return true;
}

/* Reads "plain_tcp" into *out (*n URLs). false: refused. */
static bool topo_plain_tcp(m0_config *cfg, const char *text, json_t *list, char (**out)[256], int *n) {
  *out = NULL;
  *n = 0;
  if (!json_is_array(list)) {
    topo_fail_at(cfg, text, "plain_tcp", NULL, "plain_tcp must be a list of tcp:// URLs (\"tcp://10.0.0.5:7000\")");
    return false;
  }
  size_t np = json_array_size(list);
  if (np > 65536) {
    topo_fail_at(cfg, text, "plain_tcp", NULL, "plain_tcp lists %zu URLs, more than 65536", np);
    return false;
  }
  char(*urls)[256] = np ? calloc(np, sizeof *urls) : NULL;
  if (np && !urls) {
    topo_fail_at(cfg, text, "plain_tcp", NULL, "plain_tcp: out of memory for %zu URLs", np);
    return false;
  }
  for (size_t i = 0; i < np; i++) {
    const char *u = json_string_value(json_array_get(list, i));
    char p[40];
    snprintf(p, sizeof p, "plain_tcp[%zu]", i);
    if (!u || strncmp(u, "tcp://", 6) || strlen(u) >= sizeof urls[i]) {
      topo_fail_at(cfg, text, p, NULL, "%s must be a tcp:// URL shorter than %zu bytes, as an actor's url is written",
                   p, sizeof urls[i]);
      free(urls);
      return false;
    }
    snprintf(urls[i], sizeof urls[i], "%s", u);
  }
  *out = urls;
  *n = (int)np;
  return true;
}

/* ---- "bus" (actors/bus.h: the fleet's NATS server and subject) ---- */

/* A subject m0 publishes into and consumes as one stream: dot-separated
 * tokens of letters, digits, '_' and '-' (no wildcard: every host must name
 * the same one subject, and the stream's name is made from it). */
static bool topo_subject_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n >= 128 || s[0] == '.' || s[n - 1] == '.') return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    bool tok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!tok && !(c == '.' && s[i + 1] != '.')) return false;
  }
  return true;
}

/* Reads "bus" into url and subject. false: refused. */
static bool topo_bus(m0_config *cfg, const char *text, json_t *o, char *url, size_t urln, char *subject, size_t subn) {
  static const char *const known[] = {"nats", "subject", NULL};
  const char *fix = "(\"bus\": {\"nats\": \"nats://HOST:PORT\", \"subject\": \"m0.fleet\"})";
  if (!json_is_object(o)) {
    topo_fail_at(cfg, text, "bus", NULL, "bus must be an object %s", fix);
    return false;
  }
  const char *unk = topo_unknown_key(o, known);
  if (unk) {
    topo_fail_at(cfg, text, "bus", unk, "bus has the unknown key \"%.64s\" (its keys are nats and subject)", unk);
    return false;
  }
  const char *u = json_string_value(json_object_get(o, "nats"));
  if (!u || (strncmp(u, "nats://", 7) && strncmp(u, "tls://", 6)) || strlen(u) >= urln || !u[u[0] == 'n' ? 7 : 6]) {
    topo_fail_at(cfg, text, "bus", json_object_get(o, "nats") ? "nats" : NULL,
                 "bus.nats must be the NATS server's URL, nats://HOST:PORT or tls://HOST:PORT, shorter than 256 bytes %s",
                 fix);
    return false;
  }
  const char *s = json_string_value(json_object_get(o, "subject"));
  if (!s || !topo_subject_ok(s) || strlen(s) >= subn) {
    topo_fail_at(cfg, text, "bus", json_object_get(o, "subject") ? "subject" : NULL,
                 "bus.subject must be a NATS subject without wildcards: dot-separated tokens of A-Z a-z 0-9 _ -, "
                 "shorter than 128 bytes %s",
                 fix);
    return false;
  }
  snprintf(url, urln, "%s", u);
  snprintf(subject, subn, "%s", s);
  return true;
}

/* The first string of the file (a value, or an object's key) that holds a
 * control byte, and the key it is under: no name, URL, path, pattern or
 * subject holds one, and each may be said in a line on stderr. */
static const char *topo_control(json_t *v, const char *under, const char **key) {
  if (json_is_string(v)) {
    *key = under;
    return m0__has_control(json_string_value(v)) ? json_string_value(v) : NULL;
  }
  const char *k, *bad = NULL;
  json_t *x;
  size_t i;
  if (json_is_object(v)) {
    json_object_foreach(v, k, x) {
      if (m0__has_control(k)) {
        *key = under;
        return k;
      }
      if ((bad = topo_control(x, k, key))) return bad;
    }
  }
  if (json_is_array(v))
    json_array_foreach(v, i, x) if ((bad = topo_control(x, under, key))) return bad;
  return NULL;
}

void m0__topofile_apply(m0_config *cfg) {
  const char *path = M0__CFGS(cfg, topology);
  if (!path[0]) return;
  char why[M0__STR_MAX + 128];
  char *text = topo_read(path, why, sizeof why);
  if (!text) {
    snprintf(cfg->topology_error, sizeof cfg->topology_error, "%s", why);
    return;
  }
  json_error_t e;
  json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &e);
  if (!root) {
    snprintf(cfg->topology_error, sizeof cfg->topology_error, "%s line %d column %d: %s", path, e.line, e.column,
             e.text);
    free(text);
    return;
  }
  if (!json_is_object(root)) {
    snprintf(cfg->topology_error, sizeof cfg->topology_error, "%s line 1 column 1: not a JSON object", path);
    goto out;
  }
  const char *ckey = NULL, *ctl = topo_control(root, "", &ckey);
  if (ctl) {
    char shown[160];
    topo_fail(cfg, text, ckey, "\"%s\" holds a control byte (a value is one line)", m0__escape(shown, sizeof shown, ctl));
    goto out;
  }
  static const char *const known[] = {"mode", "loops", "handler_threads", "connections_per_loop", "accept_sharing",
                                      "transport", "actors", "app_actors", "routes", "tls", "plain_tcp", "bus", NULL};
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    int k = 0;
    while (known[k] && strcmp(known[k], key)) k++;
    if (!known[k]) {
      topo_fail(cfg, text, key, "unknown key \"%s\"", key);
      goto out;
    }
  }
  json_t *mode = json_object_get(root, "mode"), *loops = json_object_get(root, "loops");
  const char *m = mode ? json_string_value(mode) : "single";
  if (!m || (strcmp(m, "single") && strcmp(m, "threads") && strcmp(m, "prefork"))) {
    topo_fail(cfg, text, "mode", "mode must be \"single\", \"threads\" or \"prefork\"%s", "");
    goto out;
  }
  long n = 1;
  if (loops) {
    if (!json_is_integer(loops) || json_integer_value(loops) < 1 || json_integer_value(loops) > 4096) {
      topo_fail(cfg, text, "loops", "loops must be a whole number from 1 to 4096%s", "");
      goto out;
    }
    n = (long)json_integer_value(loops);
  }
  if (!strcmp(m, "single") && n != 1) {
    topo_fail(cfg, text, "loops", "mode \"single\" has one loop, the file says %s", "more");
    goto out;
  }
  /* "tls" first: a tls+tcp transport or URL needs it, wherever it is. */
  json_t *jtls = json_object_get(root, "tls");
  char tls_paths[3][M0__STR_MAX];
  if (jtls && !topo_tls(cfg, text, jtls, tls_paths)) goto out;
  json_t *jbus = json_object_get(root, "bus");
  char bus_url[sizeof cfg->bus_url] = "", bus_subject[sizeof cfg->bus_subject] = "";
  if (jbus && !topo_bus(cfg, text, jbus, bus_url, sizeof bus_url, bus_subject, sizeof bus_subject)) goto out;
  json_t *tr = json_object_get(root, "transport");
  const char *want_transport = !strcmp(m, "prefork") ? "ipc" : "inproc";
  if (tr) {
    const char *tv = json_string_value(tr);
    if (!tv || (strcmp(tv, "inproc") && strcmp(tv, "ipc") && strcmp(tv, "tcp") && strcmp(tv, "tls+tcp"))) {
      topo_fail(cfg, text, "transport", "transport must be \"inproc\", \"ipc\" or \"tcp\"%s",
                " (or \"tls+tcp\", with \"tls\")");
      goto out;
    }
    if (!strcmp(m, "prefork") && !strcmp(tv, "inproc")) {
      topo_fail(cfg, text, "transport", "mode prefork crosses processes: inproc cannot%s (use ipc or tcp)", "");
      goto out;
    }
    if (!strcmp(tv, "tls+tcp") && !jtls) {
      topo_fail(cfg, text, "transport",
                "transport \"tls+tcp\" needs the file's \"tls\": add \"tls\": {\"cert\": PATH, \"key\": PATH, "
                "\"ca\": PATH} (this process's certificate and key, the CA that signs every peer's: PEM files)%s",
                "");
      goto out;
    }
    want_transport = tv;
  }
  json_t *ht = json_object_get(root, "handler_threads"), *cpl = json_object_get(root, "connections_per_loop");
  json_t *as = json_object_get(root, "accept_sharing");
  if (ht && (!json_is_integer(ht) || json_integer_value(ht) < 0 || json_integer_value(ht) > 4096)) {
    topo_fail(cfg, text, "handler_threads", "handler_threads must be a whole number from 0 to 4096%s", "");
    goto out;
  }
  if (cpl && (!json_is_integer(cpl) || json_integer_value(cpl) < 1 || json_integer_value(cpl) > 1000000)) {
    topo_fail(cfg, text, "connections_per_loop", "connections_per_loop must be from 1 to 1000000%s", "");
    goto out;
  }
  if (as && !json_is_boolean(as)) {
    topo_fail(cfg, text, "accept_sharing", "accept_sharing must be true or false%s", "");
    goto out;
  }
  long pool = ht ? (long)json_integer_value(ht) : 0;
  char(*plain)[256] = NULL;
  int nplain = 0;
  json_t *jplain = json_object_get(root, "plain_tcp");
  if (jplain && !topo_plain_tcp(cfg, text, jplain, &plain, &nplain)) goto out;
  json_t *actors = json_object_get(root, "actors");
  if (actors) {
    m0__topology t;
    m0__mode md = !strcmp(m, "prefork") ? M0__MODE_PREFORK : !strcmp(m, "threads") ? M0__MODE_THREADS : M0__MODE_SINGLE;
    if (!json_is_array(actors) || m0__topology_build(&t, md, (int)n, (int)pool, M0__SCHEME_INPROC, "x") != 0) {
      topo_fail(cfg, text, "actors", "actors must be a list of {\"name\", \"url\"}%s", "");
      free(plain);
      goto out;
    }
    /* The first entry that does not fit, named, at its own line when it has
     * a name (else at "actors"). */
    size_t na = json_array_size(actors), tl = strlen(want_transport);
    char bad[700] = "";
    const char *at = "actors";
    for (size_t i = 0; !bad[0] && i < na && i < (size_t)t.nactors; i++) {
      json_t *a = json_array_get(actors, i);
      const char *name = json_string_value(json_object_get(a, "name"));
      const char *url = json_string_value(json_object_get(a, "url"));
      if (name) at = name;
      if (!name || !url)
        snprintf(bad, sizeof bad, "actors[%zu] has no \"name\" or no \"url\" string (the topology's is \"%s\")", i,
                 t.actors[i].name);
      else if (strcmp(name, t.actors[i].name))
        snprintf(bad, sizeof bad, "actors[%zu] is \"%.64s\" where the topology has \"%s\"", i, name, t.actors[i].name);
      else if (strncmp(url, want_transport, tl) || strncmp(url + tl, "://", 3))
        snprintf(bad, sizeof bad, "actors[%zu] (%s) has the URL \"%.300s\", not a %s:// one", i, name, url,
                 want_transport);
      else if (strlen(url) >= sizeof cfg->topo_urls[0])
        snprintf(bad, sizeof bad, "actors[%zu] (%s) has a URL of %zu bytes, longer than %zu", i, name, strlen(url),
                 sizeof cfg->topo_urls[0] - 1);
      for (size_t j = 0; !bad[0] && j < i; j++) /* two actors cannot share an address */
        if (!strcmp(url, json_string_value(json_object_get(json_array_get(actors, j), "url"))))
          snprintf(bad, sizeof bad, "actors[%zu] (%s) has the URL of actors[%zu] (%s)", i, name, j, t.actors[j].name);
    }
    if (!bad[0] && na < (size_t)t.nactors) {
      at = "actors";
      snprintf(bad, sizeof bad, "actors lists %zu of the %d actors the file declares: \"%s\" is missing", na, t.nactors,
               t.actors[na].name);
    } else if (!bad[0] && na > (size_t)t.nactors) {
      const char *extra = json_string_value(json_object_get(json_array_get(actors, (size_t)t.nactors), "name"));
      at = extra ? extra : "actors";
      snprintf(bad, sizeof bad, "actors lists %zu actors, the file declares %d: actors[%d] (%.64s) is one too many", na,
               t.nactors, t.nactors, extra ? extra : "unnamed");
    }
    m0__topology_free(&t);
    if (bad[0]) {
      topo_fail(cfg, text, at, "%s", bad);
      free(plain);
      goto out;
    }
    cfg->topo_urls = calloc(na, sizeof *cfg->topo_urls);
    for (size_t i = 0; cfg->topo_urls && i < na; i++)
      snprintf(cfg->topo_urls[i], sizeof cfg->topo_urls[i], "%s",
               json_string_value(json_object_get(json_array_get(actors, i), "url")));
    cfg->ntopo_urls = cfg->topo_urls ? (int)na : 0;
  }
  m0__actor_spec *aa = NULL;
  m0__route_spec *fr = NULL;
  int naa = 0, nfr = 0;
  json_t *jaa = json_object_get(root, "app_actors"), *jr = json_object_get(root, "routes");
  if ((jaa && !topo_app_actors(cfg, text, jaa, jtls != NULL, &aa, &naa)) ||
      (jr && !topo_routes(cfg, text, jr, &fr, &nfr))) {
    free(aa); /* nothing of a refused file is applied */
    free(plain);
    free(cfg->topo_urls);
    cfg->topo_urls = NULL;
    cfg->ntopo_urls = 0;
    goto out;
  }
  cfg->app_actors = aa;
  cfg->napp_actors = naa;
  cfg->file_routes = fr;
  cfg->nfile_routes = nfr;
  /* tls+tcp is built as tcp is (the file's URLs); the doctor says which. */
  cfg->topo_tls_transport = tr && !strcmp(want_transport, "tls+tcp");
  snprintf(cfg->topo_transport, sizeof cfg->topo_transport, "%s",
           !tr ? "" : cfg->topo_tls_transport ? "tcp" : want_transport);
  if (jtls) {
    snprintf(cfg->tls_cert, sizeof cfg->tls_cert, "%s", tls_paths[0]);
    snprintf(cfg->tls_key, sizeof cfg->tls_key, "%s", tls_paths[1]);
    snprintf(cfg->tls_ca, sizeof cfg->tls_ca, "%s", tls_paths[2]);
  }
  cfg->plain_tcp = plain;
  cfg->nplain_tcp = nplain;
  snprintf(cfg->bus_url, sizeof cfg->bus_url, "%s", bus_url);
  snprintf(cfg->bus_subject, sizeof cfg->bus_subject, "%s", bus_subject);
  if (!strcmp(m, "prefork")) topo_set(cfg, M0__O_workers, n);
  else topo_set(cfg, M0__O_threads, n);
  if (ht) topo_set(cfg, M0__O_blocking_threads, pool);
  if (cpl) topo_set(cfg, M0__O_max_connections, (long)json_integer_value(cpl));
  if (as) topo_set(cfg, M0__O_accept_share, json_is_true(as));
out:
  json_decref(root);
  free(text);
}
