#include "transport/topology.h"

#include <arpa/inet.h>
#include <nng/nng.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/errors.h"

const char *m0__mode_name(m0__mode m) {
  return m == M0__MODE_THREADS ? "threads" : m == M0__MODE_PREFORK ? "prefork" : "single";
}
const char *m0__scheme_name(m0__scheme s) {
  return s == M0__SCHEME_IPC ? "ipc" : s == M0__SCHEME_TCP ? "tcp" : "inproc";
}

static int topology_url(char *out, size_t n, m0__scheme scheme, const char *where, const char *name,
                        int k) {
  int w;
  if (scheme == M0__SCHEME_INPROC) {
    w = snprintf(out, n, "inproc://%s/%s", where, name);
  } else if (scheme == M0__SCHEME_IPC) {
    w = snprintf(out, n, "ipc://%s/%s.sock", where, name);
  } else {
    const char *colon = strrchr(where, ':');
    if (!colon) return M0__EINVALID;
    w = snprintf(out, n, "tcp://%.*s:%d", (int)(colon - where), where, atoi(colon + 1) + k);
  }
  return w > 0 && (size_t)w < n ? 0 : M0__ETOOBIG;
}

int m0__topology_build(m0__topology *t, m0__mode mode, int loops, int pool, m0__scheme scheme,
                       const char *where) {
  memset(t, 0, sizeof *t);
  t->mode = mode;
  t->scheme = scheme;
  t->loops = loops;
  t->pool = pool;
  int per_loop = 1 + pool + (mode == M0__MODE_PREFORK ? 1 : 0);
  t->actors = calloc((size_t)(2 + loops * per_loop), sizeof *t->actors);
  if (!t->actors) return M0__ENOMEM;
  uint32_t ids[2] = {M0__ACTOR_ID(M0__ROLE_COORD, 0), M0__ACTOR_ID(M0__ROLE_PRODUCER, 0)};
  for (int i = 0; i < 2; i++) t->actors[t->nactors++].id = ids[i];
  if (mode == M0__MODE_PREFORK) /* each worker process's own coordinator */
    for (int l = 0; l < loops; l++) t->actors[t->nactors++].id = M0__ACTOR_ID(M0__ROLE_WORKER, l);
  for (int l = 0; l < loops; l++) t->actors[t->nactors++].id = M0__ACTOR_ID(M0__ROLE_LOOP, l);
  for (int l = 0; l < loops; l++)
    for (int j = 0; j < pool; j++)
      t->actors[t->nactors++].id = M0__ACTOR_ID(M0__ROLE_POOL, M0__POOL_INDEX(l, j));
  for (int k = 0; k < t->nactors; k++) {
    m0__actor_desc *a = &t->actors[k];
    m0__actor_name(a->id, a->name, sizeof a->name);
    int rv = topology_url(a->url, sizeof a->url, scheme, where, a->name, k);
    if (rv) {
      m0__topology_free(t);
      return rv;
    }
  }
  return 0;
}

int m0__scheme_parse(const char *name) {
  return !strcmp(name, "inproc") ? M0__SCHEME_INPROC : !strcmp(name, "ipc") ? M0__SCHEME_IPC
       : !strcmp(name, "tcp")    ? M0__SCHEME_TCP : -1;
}

/* Copies src to out replacing every <pid> and <run-dir>. */
static int topology_fill(char *out, size_t n, const char *src, const char *pid, const char *run_dir) {
  size_t k = 0;
  while (*src) {
    const char *with = NULL;
    size_t skip = 0;
    if (!strncmp(src, "<pid>", 5)) with = pid, skip = 5;
    else if (!strncmp(src, "<run-dir>", 9)) with = run_dir, skip = 9;
    size_t len = with ? strlen(with) : 1;
    if (k + len >= n) return M0__ETOOBIG;
    memcpy(out + k, with ? with : src, len);
    k += len;
    src += with ? skip : 1;
  }
  out[k] = 0;
  return 0;
}

int m0__topology_use_urls(m0__topology *t, m0__scheme scheme, const char (*urls)[256], int n, const char *run_dir) {
  if (n != t->nactors) return M0__EINVALID;
  char pid[24];
  snprintf(pid, sizeof pid, "%d", (int)getpid());
  for (int k = 0; k < n; k++) {
    int rv = topology_fill(t->actors[k].url, sizeof t->actors[k].url, urls[k], pid, run_dir);
    if (rv) return rv;
  }
  t->scheme = scheme;
  return 0;
}

void m0__topology_free(m0__topology *t) {
  free(t->actors);
  t->actors = NULL;
  t->nactors = 0;
}

const m0__actor_desc *m0__topology_find(const m0__topology *t, uint32_t id) {
  for (int k = 0; k < t->nactors; k++)
    if (t->actors[k].id == id) return &t->actors[k];
  return NULL;
}

m0__scheme m0__topology_scheme(m0__mode mode, const char *file_transport) {
  int s = file_transport && file_transport[0] ? m0__scheme_parse(file_transport) : -1;
  if (s >= 0) return (m0__scheme)s;
  return mode == M0__MODE_PREFORK ? M0__SCHEME_IPC : M0__SCHEME_INPROC;
}

/* Built for the mode's scheme, then the file's URLs in their place.
 * describe: placeholders for what only a running host knows (<pid>, and
 * <run-dir> when none was given), the file's URLs as written. */
static int topology_plan(m0__topology *t, m0__mode mode, int loops, int pool, const char *file_transport,
                         const char (*file_urls)[256], int nfile, const char *run_dir, const char *ns, bool describe) {
  m0__scheme scheme = m0__topology_scheme(mode, file_transport);
  char where[4096];
  if (scheme == M0__SCHEME_IPC) snprintf(where, sizeof where, "%s", run_dir ? run_dir : "<run-dir>");
  else if (describe) snprintf(where, sizeof where, "m0-<pid>");
  else if (ns) snprintf(where, sizeof where, "%s", ns);
  else snprintf(where, sizeof where, "m0-%d", (int)getpid());
  /* A tcp topology needs the file's addresses; the others can be built. */
  int rv = m0__topology_build(t, mode, loops, pool, scheme == M0__SCHEME_TCP ? M0__SCHEME_INPROC : scheme, where);
  if (rv != 0) return rv;
  if (nfile == t->nactors) {
    if (!describe) rv = m0__topology_use_urls(t, scheme, file_urls, nfile, run_dir);
    else {
      for (int k = 0; k < nfile; k++) snprintf(t->actors[k].url, sizeof t->actors[k].url, "%s", file_urls[k]);
      t->scheme = scheme;
    }
  }
  if (rv != 0) m0__topology_free(t);
  return rv;
}

int m0__topology_make(m0__topology *t, m0__mode mode, int loops, int pool, const char *file_transport,
                      const char (*file_urls)[256], int nfile, const char *run_dir, const char *ns) {
  return topology_plan(t, mode, loops, pool, file_transport, file_urls, nfile, run_dir, ns, false);
}

int m0__topology_describe(m0__topology *t, m0__mode mode, int loops, int pool, const char *file_transport,
                          const char (*file_urls)[256], int nfile, const char *run_dir) {
  return topology_plan(t, mode, loops, pool, file_transport, file_urls, nfile, run_dir, NULL, true);
}

int m0__topology_outside_url(char *out, size_t n, const char *run_dir, int loop) {
  int w = snprintf(out, n, "ipc://%s/loop.%d.sock", run_dir, loop);
  return w > 0 && (size_t)w < n ? 0 : M0__ETOOBIG;
}

int m0__topology_app_url(char *out, size_t n, const char *file_url, const char *run_dir, const char *name) {
  if (file_url && file_url[0]) {
    char pid[24];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    return topology_fill(out, n, file_url, pid, run_dir ? run_dir : "<run-dir>");
  }
  int w = snprintf(out, n, "ipc://%s/actor.%s.sock", run_dir ? run_dir : "<run-dir>", name);
  return w > 0 && (size_t)w < n ? 0 : M0__ETOOBIG;
}

int m0__topology_door_url(char *out, size_t n, const char *run_dir, const char *name, int worker) {
  int w = snprintf(out, n, "ipc://%s/actor.%s.w%d.sock", run_dir ? run_dir : "<run-dir>", name, worker);
  return w > 0 && (size_t)w < n ? 0 : M0__ETOOBIG;
}

int m0__topology_instance_url(char *out, size_t n, const char *ns, const char *name, int k) {
  int w = snprintf(out, n, "inproc://%s/actor.%s.%d", ns, name, k);
  return w > 0 && (size_t)w < n ? 0 : M0__ETOOBIG;
}

bool m0__url_is_nng(const char *s) {
  return !strncmp(s, "inproc://", 9) || !strncmp(s, "ipc://", 6) || !strncmp(s, "tcp://", 6);
}

/* By nng's own rules for a dialer, read from nng_url_parse (which starts no
 * thread and binds nothing): a tcp URL needs a host and a port (a number)
 * and nothing after them, an ipc URL a path. Without this a trace URL nng
 * refuses was a host that served untraced and said nothing. */
const char *m0__url_undialable(const char *url) {
  nng_url *u;
  if (nng_url_parse(&u, url) != 0) return "nng cannot parse it";
  const char *why = NULL;
  if (!strcmp(u->u_scheme, "ipc")) {
    if (!u->u_path[0]) why = "an ipc URL needs a path (ipc:///path/to/socket)";
  } else if (!strcmp(u->u_scheme, "tcp")) {
    char *end = NULL;
    long port = u->u_port[0] ? strtol(u->u_port, &end, 10) : 0;
    if (!u->u_hostname[0] || !end || *end || port < 1 || port > 65535 || u->u_userinfo || u->u_query ||
        u->u_fragment || (u->u_path[0] && strcmp(u->u_path, "/")))
      why = "a tcp URL is tcp://HOST:PORT, a port from 1 to 65535 and nothing after it";
  }
  nng_url_free(u);
  return why;
}


static const char *const topology_prefixes[] = {"", "inproc://", "ipc://", "tcp://", "tls+tcp://"};

m0__url_kind m0__url_kind_of(const char *url) {
  for (int k = M0__URL_INPROC; url && k <= M0__URL_TLS_TCP; k++)
    if (!strncmp(url, topology_prefixes[k], strlen(topology_prefixes[k]))) return (m0__url_kind)k;
  return M0__URL_OTHER;
}

const char *m0__url_prefix(m0__url_kind k) {
  return k >= M0__URL_OTHER && k <= M0__URL_TLS_TCP ? topology_prefixes[k] : "";
}

bool m0__url_in_transport(const char *url, const char *transport) {
  size_t n = strlen(transport);
  return !strncmp(url, transport, n) && !strncmp(url + n, "://", 3);
}

bool m0__url_loopback(const char *url) {
  nng_url *u;
  if (nng_url_parse(&u, url) != 0) return false;
  char host[256];
  const char *h = u->u_hostname ? u->u_hostname : "";
  size_t n = strlen(h);
  if (n >= 2 && h[0] == '[' && h[n - 1] == ']') snprintf(host, sizeof host, "%.*s", (int)(n - 2), h + 1);
  else snprintf(host, sizeof host, "%s", h);
  nng_url_free(u);
  struct in_addr a4;
  struct in6_addr a6;
  if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  if (inet_pton(AF_INET6, host, &a6) == 1)
    return IN6_IS_ADDR_LOOPBACK(&a6) || (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
  return !strcasecmp(host, "localhost");
}
