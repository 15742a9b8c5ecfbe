#include "transport/links.h"

#include <errno.h>
#include <nng/supplemental/tls/tls.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "base/file.h"
#include "transport/ipc_watch.h"

/* A dialer's or listener's TLS configuration: the NNG_OPT_TLS_CONFIG
 * pointer option, which nng 1.5 (Debian 12) and 1.10 (Debian 13) both take
 * (1.10's own setters are not in Debian 13's headers). */
#define links_dialer_tls(d, c) nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, c)
#define links_listener_tls(l, c) nng_listener_set_ptr(l, NNG_OPT_TLS_CONFIG, c)

#ifdef __SANITIZE_ADDRESS__
/* LeakSanitizer's hook, in builds with it. nng 1.5.2 (Debian 12) never
 * frees an ipc pipe whose SP greeting completed after its listener's accept
 * was cancelled (ipc_ep_close closes it, nothing reaps it): at exit the pipe
 * and its endpoint hold each other. What nng_listen and nng_dial made is
 * nng's to free, not m0's, so no leak under them is reported; what it points
 * to is then reachable, and any leak of m0's own is still a report. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) {
  return "leak:nng_listen\nleak:nng_listener_create\nleak:nng_dial\nleak:nng_dialer_create\n";
}
#endif

#define LINKS_PATH_MAX 1024
#define LINKS_PEM_MAX (1u << 20) /* a certificate chain is a few kB */

/* The process's identity (links.h, Design notes). */
static struct {
  pthread_mutex_t mu;
  bool set;  /* loaded */
  bool used; /* a link has been made with it: it can no longer change */
  char paths[3][LINKS_PATH_MAX];
  char *pem[3];           /* the files' text: cert, key, ca */
  nng_tls_config *server; /* every listener's */
} links = {.mu = PTHREAD_MUTEX_INITIALIZER};

enum { L_CERT, L_KEY, L_CA };
static const char *const links_what[3] = {"TLS certificate", "TLS key", "TLS CA"};

int m0__link_reach(const char *url) {
  return strncmp(url, "inproc://", 9) == 0 ? 0 : strncmp(url, "ipc://", 6) == 0 ? 1 : 2;
}

int m0__link_listen(nng_socket s, const char *url) {
  if (m0__link_reach(url) == 1) return m0__ipc_listen(s, url); /* watched: transport/ipc_watch.h */
  if (!m0__link_encrypted(url)) return nng_listen(s, url, NULL, 0);
  pthread_mutex_lock(&links.mu);
  nng_tls_config *cfg = links.set ? links.server : NULL;
  if (cfg) {
    nng_tls_config_hold(cfg);
    links.used = true;
  }
  pthread_mutex_unlock(&links.mu);
  if (!cfg) return NNG_EINVAL; /* no identity: nothing is made */
  nng_listener l;
  int rv = nng_listener_create(&l, s, url);
  if (rv == 0) {
    if ((rv = links_listener_tls(l, cfg)) == 0) rv = nng_listener_start(l, 0);
    if (rv != 0) nng_listener_close(l);
  }
  nng_tls_config_free(cfg); /* the listener holds its own */
  return rv;
}

void m0__link_unwatch(nng_socket s) { m0__ipc_unwatch(s); }

/* A configuration with the identity's certificate, key and CA, peers
 * required to present a certificate the CA signed. 0 or nng's error, and
 * *bad the file it could not take (-1: none of them). */
static int links_config(nng_tls_config **out, nng_tls_mode mode, char *const pem[3], bool loading, int *bad) {
  nng_tls_config *c;
  *bad = -1;
  int rv = nng_tls_config_alloc(&c, mode);
  if (rv != 0) return rv;
  /* When loading, the certificate alone first, so a key that is refused is
   * not blamed on the certificate (own_cert takes both). */
  nng_tls_config *probe;
  if (loading && (rv = nng_tls_config_alloc(&probe, NNG_TLS_MODE_CLIENT)) == 0) {
    if ((rv = nng_tls_config_ca_chain(probe, pem[L_CERT], NULL)) != 0) *bad = L_CERT;
    nng_tls_config_free(probe);
  }
  if (rv == 0 && (rv = nng_tls_config_own_cert(c, pem[L_CERT], pem[L_KEY], NULL)) != 0) *bad = L_KEY;
  if (rv == 0 && (rv = nng_tls_config_ca_chain(c, pem[L_CA], NULL)) != 0) *bad = L_CA;
  if (rv == 0) rv = nng_tls_config_auth_mode(c, NNG_TLS_AUTH_MODE_REQUIRED);
  if (rv != 0) {
    nng_tls_config_free(c);
    return rv;
  }
  *out = c;
  return 0;
}

int m0__link_dial(nng_socket s, const char *url, int flags) {
  if (m0__link_reach(url) == 1) return m0__ipc_dial(s, url, flags); /* watched: transport/ipc_watch.h */
  if (!m0__link_encrypted(url)) return nng_dial(s, url, NULL, flags);
  nng_url *u;
  int rv = nng_url_parse(&u, url);
  if (rv != 0) return rv;
  nng_tls_config *cfg = NULL;
  int bad;
  pthread_mutex_lock(&links.mu);
  if (!links.set) rv = NNG_EINVAL; /* no identity: nothing is made */
  else if ((rv = links_config(&cfg, NNG_TLS_MODE_CLIENT, links.pem, false, &bad)) == 0) links.used = true;
  pthread_mutex_unlock(&links.mu);
  if (rv == 0) {
    nng_dialer d;
    if ((rv = nng_dialer_create(&d, s, url)) == 0) {
      /* The peer's certificate must name the host this URL dials. */
      if ((rv = links_dialer_tls(d, cfg)) == 0 &&
          (rv = nng_dialer_set_string(d, NNG_OPT_TLS_SERVER_NAME, u->u_hostname)) == 0)
        rv = nng_dialer_start(d, flags);
      if (rv != 0) nng_dialer_close(d); /* as nng_dial does */
    }
    nng_tls_config_free(cfg); /* the dialer holds its own */
  }
  nng_url_free(u);
  return rv;
}

/* Reads path (at most LINKS_PEM_MAX bytes) into a NUL-terminated string. */
/* A FIFO, device or directory is refused, not waited on (base/file.h). */
static char *links_read(const char *path, const char *what, char *err, size_t errlen) {
  char why[128];
  size_t n;
  char *buf = m0__file_read(path, LINKS_PEM_MAX, &n, why, sizeof why);
  if (buf) return buf;
  if (strncmp(why, "holds more than", 15) == 0)
    snprintf(err, errlen, "%s %s is larger than %u bytes: not a PEM file", what, path, LINKS_PEM_MAX);
  else
    snprintf(err, errlen, "%s %s %s", what, path, why);
  return NULL;
}

/* What a look at the text can say about why mbed TLS refused it ("" when
 * nothing: it looks like PEM of the right kind). */
static const char *links_pem_why(const char *text, int which) {
  if (!text[0]) return ": the file is empty";
  if (which == L_KEY) {
    if (!strstr(text, "-----BEGIN") || !strstr(text, "PRIVATE KEY-----"))
      return ": it holds no PEM private key (-----BEGIN ... PRIVATE KEY-----)";
    if (strstr(text, "ENCRYPTED")) return ": the key is encrypted (give the key without a passphrase)";
    return ": the key does not parse";
  }
  if (!strstr(text, "-----BEGIN CERTIFICATE-----"))
    return ": it holds no PEM certificate (-----BEGIN CERTIFICATE-----)";
  return ": a certificate in it does not parse";
}

int m0__links_tls(const char *cert, const char *key, const char *ca, char *err, size_t errlen) {
  const char *paths[3] = {cert, key, ca};
  for (int i = 0; i < 3; i++)
    if (!paths[i] || !paths[i][0] || strlen(paths[i]) >= LINKS_PATH_MAX) {
      snprintf(err, errlen, "%s: %s", links_what[i],
               !paths[i] || !paths[i][0] ? "no file named" : "its path is too long");
      return M0__ECONFIG;
    }
  pthread_mutex_lock(&links.mu);
  bool same = links.set && !strcmp(links.paths[0], cert) && !strcmp(links.paths[1], key) && !strcmp(links.paths[2], ca);
  if (!same && links.used)
    snprintf(err, errlen, "TLS certificate %s: this process's identity is already %s and in use (it cannot change)",
             cert, links.paths[0]);
  bool used = links.used;
  pthread_mutex_unlock(&links.mu);
  if (same) return 0; /* loaded once */
  if (used) return M0__ECONFIG;
  char *pem[3] = {NULL, NULL, NULL};
  int rv = M0__ECONFIG;
  for (int i = 0; i < 3; i++)
    if (!(pem[i] = links_read(paths[i], links_what[i], err, errlen))) goto out;
  nng_tls_config *server;
  int bad, nrv = links_config(&server, NNG_TLS_MODE_SERVER, pem, true, &bad);
  if (nrv != 0) {
    if (bad < 0)
      snprintf(err, errlen, "%s %s: nng cannot make a TLS configuration: %s", links_what[L_CERT], cert,
               nng_strerror(nrv));
    else
      snprintf(err, errlen, "%s %s cannot be parsed: mbed TLS refused it (%s)%s", links_what[bad], paths[bad],
               nng_strerror(nrv), links_pem_why(pem[bad], bad));
    goto out;
  }
  pthread_mutex_lock(&links.mu);
  nng_tls_config *old = links.set ? links.server : NULL;
  for (int i = 0; i < 3; i++) {
    free(links.pem[i]);
    links.pem[i] = pem[i];
    pem[i] = NULL;
    snprintf(links.paths[i], sizeof links.paths[i], "%s", paths[i]);
  }
  links.server = server;
  links.set = true;
  pthread_mutex_unlock(&links.mu);
  if (old) nng_tls_config_free(old);
  rv = 0;
out:
  for (int i = 0; i < 3; i++) free(pem[i]);
  return rv;
}

int m0__links_tls_env(char *err, size_t errlen) {
  static const char *const vars[3] = {"M0_TLS_CERT", "M0_TLS_KEY", "M0_TLS_CA"};
  const char *v[3];
  char missing[64] = "";
  int n = 0;
  for (int i = 0; i < 3; i++) {
    v[i] = getenv(vars[i]);
    if (v[i] && !v[i][0]) v[i] = NULL;
    if (!v[i]) {
      size_t k = strlen(missing);
      snprintf(missing + k, sizeof missing - k, "%s%s", k ? ", " : "", vars[i]);
      n++;
    }
  }
  if (n == 3) {
    snprintf(err, errlen,
             "a tls+tcp:// link needs this program's certificate: set M0_TLS_CERT, M0_TLS_KEY and M0_TLS_CA "
             "(PEM files: its certificate, its key, the CA that signs the host's)");
    return M0__ECONFIG;
  }
  if (n) {
    snprintf(err, errlen, "%s %s not set: set M0_TLS_CERT, M0_TLS_KEY and M0_TLS_CA (all three) or none", missing,
             n == 1 ? "is" : "are");
    return M0__ECONFIG;
  }
  return m0__links_tls(v[0], v[1], v[2], err, errlen);
}

bool m0__links_tls_files(const char **cert, const char **key, const char **ca) {
  pthread_mutex_lock(&links.mu);
  bool set = links.set;
  pthread_mutex_unlock(&links.mu);
  if (!set) return false;
  /* They do not change once a link has used them, and a child is spawned
   * after its actor's link is made. */
  *cert = links.paths[0];
  *key = links.paths[1];
  *ca = links.paths[2];
  return true;
}

bool m0__link_encrypted(const char *url) { return url && strncmp(url, "tls+tcp://", 10) == 0; }
