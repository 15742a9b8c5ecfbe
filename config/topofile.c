/* Topology files (config/topofile.h): the file read, its keys walked by the
 * schema's table (config/topokeys.h), each key's handler in the table's
 * order, and the whole applied only when every key is accepted. */
#include "config/topofile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/text.h"
#include "config/topoapps.h"
#include "config/topokeys.h"
#include "transport/topology.h"

/* What the file says, kept aside until all of it is accepted. */
typedef struct topo_file {
  m0_config *cfg;
  const char *text;
  json_t *root;
  const char *mode;      /* "single", "threads", "prefork" */
  long loops, pool;      /* pool: handler_threads (0 when absent) */
  const char *transport; /* the file's, or the mode's own */
  char tls_paths[3][M0__STR_MAX];
  char bus_url[256], bus_subject[128];
  char (*plain)[256];
  int nplain;
  char (*urls)[256];
  int nurls;
  m0__actor_spec *aa;
  int naa;
  m0__route_spec *fr;
  int nfr;
  m0__sup_spec *sups;
  int nsups;
} topo_file;

/* Sets option opt from the file unless a flag or variable already did. */
static void topo_set(m0_config *cfg, int opt, long v) {
  if (cfg->v[opt].source != M0__SRC_DEFAULT) return;
  cfg->v[opt].num = v;
  snprintf(cfg->v[opt].str, sizeof cfg->v[opt].str, "%ld", v);
  cfg->v[opt].source = M0__SRC_TOPOLOGY;
}

/* The table's line for a key of the file (no path: the key is its own). */
static bool topo_refuse(topo_file *f, const char *key) {
  m0__topo_fail_at(f->cfg, f->text, "", key, m0__topo_key_find("", key)->bad, key);
  return false;
}

/* A topology file is a few hundred bytes; beyond this it is not one (it was
 * cut here and read as if it ended, without a word). */
#define TOPO_FILE_MAX (1u << 20)

/* Not a FIFO, device or directory: one would hang the doctor, a start and
 * a reload's checks (base/file.h). */
static char *topo_read(const char *path, char *why, size_t whylen) {
  char what[128];
  size_t len;
  char *buf = m0__file_read(path, TOPO_FILE_MAX, &len, what, sizeof what);
  if (buf) return buf;
  if (strncmp(what, "holds more than", 15) == 0)
    snprintf(why, whylen, "%s is larger than %u bytes: not a topology file", path, TOPO_FILE_MAX);
  else
    snprintf(why, whylen, "%s %s", path, what);
  return NULL;
}

/* A "tls" path: as written when absolute, else joined to the directory of
 * the file (its real path, so the doctor prints a path that means the same
 * wherever its output is saved). false: too long. */
bool m0__topo_path(const char *file, const char *path, char *out, size_t n) {
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

/* ---- the file's keys, each a handler (the table says which are whole
 * numbers, booleans, lists and objects, and has checked them) ---- */

static bool topo_mode(topo_file *f, json_t *v) {
  f->mode = v ? json_string_value(v) : "single";
  if (!f->mode || (strcmp(f->mode, "single") && strcmp(f->mode, "threads") && strcmp(f->mode, "prefork")))
    return topo_refuse(f, "mode");
  f->transport = !strcmp(f->mode, "prefork") ? "ipc" : "inproc";
  return true;
}

static bool topo_loops(topo_file *f, json_t *v) {
  f->loops = v ? (long)json_integer_value(v) : m0__topo_default("", "loops");
  if (!strcmp(f->mode, "single") && f->loops != 1) {
    m0__topo_fail_at(f->cfg, f->text, "", "loops", "mode \"single\" has one loop, the file says more");
    return false;
  }
  return true;
}

static bool topo_handler_threads(topo_file *f, json_t *v) {
  f->pool = v ? (long)json_integer_value(v) : 0;
  return true;
}

static bool topo_transport(topo_file *f, json_t *v) {
  if (!v) return true;
  const char *tv = json_string_value(v);
  if (!tv || (strcmp(tv, "inproc") && strcmp(tv, "ipc") && strcmp(tv, "tcp") && strcmp(tv, "tls+tcp")))
    return topo_refuse(f, "transport");
  if (!strcmp(f->mode, "prefork") && !strcmp(tv, "inproc")) {
    m0__topo_fail_at(f->cfg, f->text, "", "transport", "mode prefork crosses processes: inproc cannot (use ipc or tcp)");
    return false;
  }
  if (!strcmp(tv, "tls+tcp") && !json_object_get(f->root, "tls")) {
    m0__topo_fail_at(f->cfg, f->text, "", "transport",
                     "transport \"tls+tcp\" needs the file's \"tls\": add \"tls\": {\"cert\": PATH, \"key\": PATH, "
                     "\"ca\": PATH} (this process's certificate and key, the CA that signs every peer's: PEM files)");
    return false;
  }
  f->transport = tv;
  return true;
}

/* "tls" into the three paths (docs/topology.md, Links between machines). */
static bool topo_tls(topo_file *f, json_t *o) {
  static const char *const keys[] = {"cert", "key", "ca"};
  static const char *const what[] = {"this process's certificate", "its private key", "the CA that signs every peer's"};
  const char *unk = o ? m0__topo_unknown(o, "tls") : NULL;
  if (unk) {
    m0__topo_fail_at(f->cfg, f->text, "tls", unk, "tls has the unknown key \"%.64s\" (its keys are cert, key and ca)",
                     unk);
    return false;
  }
  for (int i = 0; o && i < 3; i++) {
    json_t *v = json_object_get(o, keys[i]);
    const char *sv = json_string_value(v);
    if (!v)
      m0__topo_fail_at(f->cfg, f->text, "tls", NULL,
                       "tls has no \"%s\" (give all three: cert, key and ca; %s is %s, a PEM file)", keys[i], keys[i],
                       what[i]);
    else if (!sv || !sv[0])
      m0__topo_fail_at(f->cfg, f->text, "tls", keys[i], "tls.%s must be a PEM file's path (%s)", keys[i], what[i]);
    else if (!m0__topo_path(M0__CFGS(f->cfg, topology), sv, f->tls_paths[i], M0__STR_MAX))
      m0__topo_fail_at(f->cfg, f->text, "tls", keys[i], "tls.%s: the path is longer than %d bytes", keys[i],
                       M0__STR_MAX - 1);
    else continue;
    return false;
  }
  return true;
}

/* "plain_tcp": the tcp URLs off loopback that may be served in the clear. */
static bool topo_plain_tcp(topo_file *f, json_t *list) {
  if (!list) return true;
  const char *tcp = m0__url_prefix(M0__URL_TCP);
  if (!json_is_array(list)) {
    m0__topo_fail_at(f->cfg, f->text, "plain_tcp", NULL, "plain_tcp must be a list of %s URLs (\"%s10.0.0.5:7000\")",
                     tcp, tcp);
    return false;
  }
  size_t np = json_array_size(list), max = (size_t)m0__topo_key_find("", "plain_tcp")->max;
  if (np > max) {
    m0__topo_fail_at(f->cfg, f->text, "plain_tcp", NULL, "plain_tcp lists %zu URLs, more than %zu", np, max);
    return false;
  }
  f->plain = np ? calloc(np, sizeof *f->plain) : NULL;
  if (np && !f->plain) {
    m0__topo_fail_at(f->cfg, f->text, "plain_tcp", NULL, "plain_tcp: out of memory for %zu URLs", np);
    return false;
  }
  for (size_t i = 0; i < np; i++) {
    const char *u = json_string_value(json_array_get(list, i));
    char p[40];
    snprintf(p, sizeof p, "plain_tcp[%zu]", i);
    if (m0__url_kind_of(u) != M0__URL_TCP || strlen(u) >= sizeof f->plain[i]) {
      m0__topo_fail_at(f->cfg, f->text, p, NULL, "%s must be a %s URL shorter than %zu bytes, as an actor's url is written",
                       p, tcp, sizeof f->plain[i]);
      return false;
    }
    snprintf(f->plain[i], sizeof f->plain[i], "%s", u);
  }
  f->nplain = (int)np;
  return true;
}

/* ---- "bus" (bus/bus.h: the fleet's NATS server and subject) ---- */

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

/* "bus" into its URL and subject. */
static bool topo_bus(topo_file *f, json_t *o) {
  if (!o) return true;
  const char *fix = "(\"bus\": {\"nats\": \"nats://HOST:PORT\", \"subject\": \"m0.fleet\"})";
  const char *unk = m0__topo_unknown(o, "bus");
  if (unk) {
    m0__topo_fail_at(f->cfg, f->text, "bus", unk, "bus has the unknown key \"%.64s\" (its keys are nats and subject)",
                     unk);
    return false;
  }
  const char *u = json_string_value(json_object_get(o, "nats"));
  if (!u || (strncmp(u, "nats://", 7) && strncmp(u, "tls://", 6)) || strlen(u) >= sizeof f->bus_url ||
      !u[u[0] == 'n' ? 7 : 6]) {
    m0__topo_fail_at(f->cfg, f->text, "bus", json_object_get(o, "nats") ? "nats" : NULL,
                     "bus.nats must be the NATS server's URL, nats://HOST:PORT or tls://HOST:PORT, shorter than 256 "
                     "bytes %s",
                     fix);
    return false;
  }
  const char *s = json_string_value(json_object_get(o, "subject"));
  if (!s || !topo_subject_ok(s) || strlen(s) >= sizeof f->bus_subject) {
    m0__topo_fail_at(f->cfg, f->text, "bus", json_object_get(o, "subject") ? "subject" : NULL,
                     "bus.subject must be a NATS subject without wildcards: dot-separated tokens of A-Z a-z 0-9 _ -, "
                     "shorter than 128 bytes %s",
                     fix);
    return false;
  }
  snprintf(f->bus_url, sizeof f->bus_url, "%s", u);
  snprintf(f->bus_subject, sizeof f->bus_subject, "%s", s);
  return true;
}

/* ---- "actors": every actor of the topology, in its order ---- */

/* What is wrong with actors[i] (t's actor i), in bad; *at its name when
 * it has one. */
static void topo_actor_entry(const topo_file *f, json_t *actors, const m0__topology *t, size_t i, char *bad, size_t n,
                             const char **at) {
  json_t *a = json_array_get(actors, i);
  const char *name = json_string_value(json_object_get(a, "name"));
  const char *url = json_string_value(json_object_get(a, "url"));
  if (name) *at = name;
  if (!name || !url)
    snprintf(bad, n, "actors[%zu] has no \"name\" or no \"url\" string (the topology's is \"%s\")", i,
             t->actors[i].name);
  else if (strcmp(name, t->actors[i].name))
    snprintf(bad, n, "actors[%zu] is \"%.64s\" where the topology has \"%s\"", i, name, t->actors[i].name);
  else if (!m0__url_in_transport(url, f->transport))
    snprintf(bad, n, "actors[%zu] (%s) has the URL \"%.300s\", not a %s:// one", i, name, url, f->transport);
  else if (strlen(url) >= sizeof f->cfg->topo_urls[0])
    snprintf(bad, n, "actors[%zu] (%s) has a URL of %zu bytes, longer than %zu", i, name, strlen(url),
             sizeof f->cfg->topo_urls[0] - 1);
  for (size_t j = 0; !bad[0] && j < i; j++) /* two actors cannot share an address */
    if (!strcmp(url, json_string_value(json_object_get(json_array_get(actors, j), "url"))))
      snprintf(bad, n, "actors[%zu] (%s) has the URL of actors[%zu] (%s)", i, name, j, t->actors[j].name);
}

/* The first entry that does not fit, named, at its own line when it has a
 * name (else at "actors"). */
static bool topo_actors_fit(topo_file *f, json_t *actors, const m0__topology *t) {
  size_t na = json_array_size(actors), nt = (size_t)t->nactors;
  char bad[700] = "";
  const char *at = "actors";
  for (size_t i = 0; !bad[0] && i < na && i < nt; i++) topo_actor_entry(f, actors, t, i, bad, sizeof bad, &at);
  if (!bad[0] && na < nt) {
    at = "actors";
    snprintf(bad, sizeof bad, "actors lists %zu of the %d actors the file declares: \"%s\" is missing", na, t->nactors,
             t->actors[na].name);
  } else if (!bad[0] && na > nt) {
    const char *extra = json_string_value(json_object_get(json_array_get(actors, nt), "name"));
    at = extra ? extra : "actors";
    snprintf(bad, sizeof bad, "actors lists %zu actors, the file declares %d: actors[%d] (%.64s) is one too many", na,
             t->nactors, t->nactors, extra ? extra : "unnamed");
  }
  if (bad[0]) m0__topo_fail(f->cfg, f->text, at, "%s", bad);
  return !bad[0];
}

static bool topo_actors(topo_file *f, json_t *actors) {
  if (!actors) return true;
  m0__topology t;
  m0__mode md = !strcmp(f->mode, "prefork") ? M0__MODE_PREFORK
              : !strcmp(f->mode, "threads") ? M0__MODE_THREADS : M0__MODE_SINGLE;
  if (m0__topology_build(&t, md, (int)f->loops, (int)f->pool, M0__SCHEME_INPROC, "x") != 0) return topo_refuse(f, "actors");
  bool ok = topo_actors_fit(f, actors, &t);
  m0__topology_free(&t);
  size_t na = json_array_size(actors);
  if (ok && (f->urls = calloc(na ? na : 1, sizeof *f->urls))) {
    for (size_t i = 0; i < na; i++)
      snprintf(f->urls[i], sizeof f->urls[i], "%s", json_string_value(json_object_get(json_array_get(actors, i), "url")));
    f->nurls = (int)na;
  }
  return ok;
}

static bool topo_app_actors(topo_file *f, json_t *v) {
  return !v || m0__topo_app_actors(f->cfg, f->text, v, json_object_get(f->root, "tls") != NULL, &f->aa, &f->naa);
}

static bool topo_routes(topo_file *f, json_t *v) { return !v || m0__topo_routes(f->cfg, f->text, v, &f->fr, &f->nfr); }

static bool topo_supervisors(topo_file *f, json_t *v) {
  return !v || m0__topo_supervisors(f->cfg, f->text, v, f->aa, f->naa, &f->sups, &f->nsups);
}

/* The handlers, in the order they read (a key's handler may use what the
 * ones before it read: actors needs the mode, loops, pool and transport). */
static const struct topo_reader {
  const char *key;
  bool (*read)(topo_file *f, json_t *v);
} topo_readers[] = {
    {"mode", topo_mode},       {"loops", topo_loops},       {"handler_threads", topo_handler_threads},
    {"tls", topo_tls},         {"bus", topo_bus},           {"transport", topo_transport},
    {"plain_tcp", topo_plain_tcp}, {"actors", topo_actors}, {"app_actors", topo_app_actors},
    {"routes", topo_routes},   {"supervisors", topo_supervisors}, /* after app_actors: it names them */
};

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

/* Copies what the file said into cfg (every key was accepted). */
static void topo_commit(topo_file *f) {
  m0_config *cfg = f->cfg;
  json_t *root = f->root, *ht = json_object_get(root, "handler_threads");
  json_t *cpl = json_object_get(root, "connections_per_loop"), *as = json_object_get(root, "accept_sharing");
  bool tr = json_object_get(root, "transport") != NULL;
  cfg->topo_urls = f->urls;
  cfg->ntopo_urls = f->nurls;
  cfg->app_actors = f->aa;
  cfg->napp_actors = f->naa;
  cfg->file_routes = f->fr;
  cfg->nfile_routes = f->nfr;
  cfg->supervisors = f->sups;
  cfg->nsupervisors = f->nsups;
  /* tls+tcp is built as tcp is (the file's URLs); the doctor says which. */
  cfg->topo_tls_transport = tr && !strcmp(f->transport, "tls+tcp");
  snprintf(cfg->topo_transport, sizeof cfg->topo_transport, "%s",
           !tr ? "" : cfg->topo_tls_transport ? "tcp" : f->transport);
  if (json_object_get(root, "tls")) {
    snprintf(cfg->tls_cert, sizeof cfg->tls_cert, "%s", f->tls_paths[0]);
    snprintf(cfg->tls_key, sizeof cfg->tls_key, "%s", f->tls_paths[1]);
    snprintf(cfg->tls_ca, sizeof cfg->tls_ca, "%s", f->tls_paths[2]);
  }
  cfg->plain_tcp = f->plain;
  cfg->nplain_tcp = f->nplain;
  snprintf(cfg->bus_url, sizeof cfg->bus_url, "%s", f->bus_url);
  snprintf(cfg->bus_subject, sizeof cfg->bus_subject, "%s", f->bus_subject);
  topo_set(cfg, !strcmp(f->mode, "prefork") ? M0__O_workers : M0__O_threads, f->loops);
  if (ht) topo_set(cfg, M0__O_blocking_threads, f->pool);
  if (cpl) topo_set(cfg, M0__O_max_connections, (long)json_integer_value(cpl));
  if (as) topo_set(cfg, M0__O_accept_share, json_is_true(as));
}

/* Reads the parsed file: its form, then each handler. false: refused. */
static bool topo_walk(topo_file *f) {
  if (!json_is_object(f->root)) {
    snprintf(f->cfg->topology_error, sizeof f->cfg->topology_error, "%s line 1 column 1: not a JSON object",
             M0__CFGS(f->cfg, topology));
    return false;
  }
  const char *ckey = NULL, *ctl = topo_control(f->root, "", &ckey), *unk;
  char shown[160];
  if (ctl) {
    m0__topo_fail(f->cfg, f->text, ckey, "\"%s\" holds a control byte (a value is one line)",
                  m0__escape(shown, sizeof shown, ctl));
    return false;
  }
  if ((unk = m0__topo_unknown(f->root, ""))) {
    m0__topo_fail(f->cfg, f->text, unk, "unknown key \"%s\"", unk);
    return false;
  }
  if (!m0__topo_check_keys(f->cfg, f->text, f->root, "", "", 0)) return false;
  for (size_t i = 0; i < sizeof topo_readers / sizeof topo_readers[0]; i++)
    if (!topo_readers[i].read(f, json_object_get(f->root, topo_readers[i].key))) return false;
  return true;
}

int m0__config_load(m0_config *cfg, int argc, char **argv, char *why, size_t whylen) {
  int rc = m0__config_parse(cfg, argc, argv, why, whylen);
  if (rc == 0) m0__topofile_apply(cfg);
  return rc;
}

void m0__topofile_apply(m0_config *cfg) {
  const char *path = M0__CFGS(cfg, topology);
  if (!path[0]) return;
  char why[M0__STR_MAX + 128], kept[64];
  const char *tfd = getenv("M0__TOPOLOGY_FD"); /* a rollback: the text as it was (host/rollback.h) */
  if (tfd) snprintf(kept, sizeof kept, "/proc/self/fd/%d", atoi(tfd));
  char *text = topo_read(tfd ? kept : path, why, sizeof why);
  if (!text) {
    snprintf(cfg->topology_error, sizeof cfg->topology_error, "%s", why);
    return;
  }
  json_error_t e;
  topo_file f = {.cfg = cfg, .text = text, .root = json_loads(text, JSON_REJECT_DUPLICATES, &e)};
  if (!f.root)
    snprintf(cfg->topology_error, sizeof cfg->topology_error, "%s line %d column %d: %s", path, e.line, e.column,
             e.text);
  else if (topo_walk(&f)) topo_commit(&f);
  else { /* nothing of a refused file is applied */
    free(f.plain);
    free(f.urls);
    free(f.aa);
    free(f.fr);
    free(f.sups);
  }
  json_decref(f.root);
  free(text);
}
