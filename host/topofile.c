#include "host/topofile.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Sets option opt from the file unless a flag or variable already did. */
static void topo_set(m0_config *cfg, int opt, long v) {
  if (cfg->v[opt].source != M0__SRC_DEFAULT) return;
  cfg->v[opt].num = v;
  snprintf(cfg->v[opt].str, sizeof cfg->v[opt].str, "%ld", v);
  cfg->v[opt].source = M0__SRC_TOPOLOGY;
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
  static const char *const known[] = {"mode", "loops", "handler_threads", "connections_per_loop", "accept_sharing",
                                      "transport", "actors", NULL};
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
  json_t *tr = json_object_get(root, "transport");
  const char *want_transport = !strcmp(m, "prefork") ? "ipc" : "inproc";
  if (tr) {
    const char *tv = json_string_value(tr);
    if (!tv || (strcmp(tv, "inproc") && strcmp(tv, "ipc") && strcmp(tv, "tcp"))) {
      topo_fail(cfg, text, "transport", "transport must be \"inproc\", \"ipc\" or \"tcp\"%s", "");
      goto out;
    }
    if (!strcmp(m, "prefork") && !strcmp(tv, "inproc")) {
      topo_fail(cfg, text, "transport", "mode prefork crosses processes: inproc cannot%s (use ipc or tcp)", "");
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
  json_t *actors = json_object_get(root, "actors");
  if (actors) {
    m0__topology t;
    m0__mode md = !strcmp(m, "prefork") ? M0__MODE_PREFORK : !strcmp(m, "threads") ? M0__MODE_THREADS : M0__MODE_SINGLE;
    if (!json_is_array(actors) || m0__topology_build(&t, md, (int)n, (int)pool, M0__SCHEME_INPROC, "x") != 0) {
      topo_fail(cfg, text, "actors", "actors must be a list of {\"name\", \"url\"}%s", "");
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
      goto out;
    }
    cfg->topo_urls = calloc(na, sizeof *cfg->topo_urls);
    for (size_t i = 0; cfg->topo_urls && i < na; i++)
      snprintf(cfg->topo_urls[i], sizeof cfg->topo_urls[i], "%s",
               json_string_value(json_object_get(json_array_get(actors, i), "url")));
    cfg->ntopo_urls = cfg->topo_urls ? (int)na : 0;
  }
  snprintf(cfg->topo_transport, sizeof cfg->topo_transport, "%s", tr ? want_transport : "");
  if (!strcmp(m, "prefork")) topo_set(cfg, M0__O_workers, n);
  else topo_set(cfg, M0__O_threads, n);
  if (ht) topo_set(cfg, M0__O_blocking_threads, pool);
  if (cpl) topo_set(cfg, M0__O_max_connections, (long)json_integer_value(cpl));
  if (as) topo_set(cfg, M0__O_accept_share, json_is_true(as));
out:
  json_decref(root);
  free(text);
}
