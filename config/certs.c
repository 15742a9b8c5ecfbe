/* The `certificates` check and the loops' TLS context (config/certs.h).
 * Design notes:
 * - The files are read once per generation, here, by the process that runs
 *   the check (serve's top process; under --workers the supervisor). The
 *   check reads each file's bytes, one question at a time, so that a
 *   refusal names the file and the one thing to fix; it then builds the
 *   context from those same bytes the way the loops do, so nothing the
 *   check passed is refused later by the loader.
 * - What passed goes into a memfd sealed read-only (a bundle: the names and
 *   the PEM text of each pair), cfg->certs_fd. The process's loops build
 *   their context from it; the supervisor hands it to every worker it
 *   spawns or respawns (M0__CERTS_FD), which builds from it and never opens
 *   the paths: a worker respawned after an operator replaced the files
 *   with bad or half-written ones serves the ones its generation checked
 *   (nginx's master reads them, its workers inherit them).
 * - A reload's next generation runs the check again: it reads the files as
 *   they are then, and one that fails is refused while the old generation
 *   serves on with the bytes it read.
 * - The ticket secret is not the files': generation 1 derives it from its
 *   cookie, and it goes on by M0__TICKETS to every worker and to the next
 *   generation, so a session resumes across a reload. */
#include "config/certs.h"
#include "base/file.h"
#include "config/checks.h"
#include "runtime/seal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ocsp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CERTS_CHAIN_MAX 10
#define CERTS_SOON_S (14 * 86400)

#define CERTS_FAIL(c, ...) ((c)->ok = false, snprintf((c)->detail, sizeof (c)->detail, __VA_ARGS__))
#define CERTS_FIX(c, ...) snprintf((c)->fix, sizeof (c)->fix, __VA_ARGS__)
#define CERTS_OK(c, ...) ((c)->ok = true, snprintf((c)->detail, sizeof (c)->detail, __VA_ARGS__))

static const char certs_where[] = "or point --certfile / M0_CERTFILE (and --keyfile / M0_KEYFILE) at the right files";

typedef struct certs_chain {
  X509 *x[CERTS_CHAIN_MAX];
  int n;
} certs_chain;

static void certs_chain_free(certs_chain *ch) {
  for (int i = 0; i < ch->n; i++) X509_free(ch->x[i]);
  ch->n = 0;
}

/* "2027-01-31" */
static void certs_date(const ASN1_TIME *t, char *out, size_t n) {
  struct tm tm;
  if (ASN1_TIME_to_tm(t, &tm) != 1) snprintf(out, n, "?");
  else snprintf(out, n, "%04d-%02d-%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
}

/* The leaf's DNS and IP names, comma-separated; false when it has none. */
static bool certs_names(X509 *leaf, char *out, size_t n) {
  out[0] = 0;
  GENERAL_NAMES *gens = X509_get_ext_d2i(leaf, NID_subject_alt_name, NULL, NULL);
  int k = 0;
  for (int i = 0; gens && i < sk_GENERAL_NAME_num(gens); i++) {
    const GENERAL_NAME *g = sk_GENERAL_NAME_value(gens, i);
    char ip[64] = "";
    const char *name = NULL;
    if (g->type == GEN_DNS) name = (const char *)ASN1_STRING_get0_data(g->d.dNSName);
    else if (g->type == GEN_IPADD && ASN1_STRING_length(g->d.iPAddress) == 4) {
      const unsigned char *a = ASN1_STRING_get0_data(g->d.iPAddress);
      snprintf(ip, sizeof ip, "%u.%u.%u.%u", a[0], a[1], a[2], a[3]);
      name = ip;
    } else if (g->type == GEN_IPADD) name = "an IPv6 address";
    if (!name) continue;
    size_t used = strlen(out);
    snprintf(out + used, n - used, "%s%s", k++ ? ", " : "", name);
  }
  GENERAL_NAMES_free(gens);
  return k > 0;
}

/* file's bytes (malloc'd, *len of them), or NULL with the check failed: a
 * FIFO, device or directory is refused without being read (base/file.h:
 * a FIFO would hang the doctor, the start and a reload's checks). */
static char *certs_slurp(const char *file, size_t *len, m0__check *c) {
  char why[256];
  char *buf = m0__file_read(file, M0__TLS_PEM_MAX, len, why, sizeof why);
  if (buf) return buf;
  CERTS_FAIL(c, "%s: %s", file, why);
  if (strncmp(why, "is not a regular file", 21) == 0) {
    CERTS_FIX(c, "give the PEM file itself (a regular file, not a FIFO, device or directory), %s", certs_where);
  } else if (strncmp(why, "holds more than", 15) == 0) {
    CERTS_FAIL(c, "%s: holds more than %d bytes: not a PEM certificate or key", file, M0__TLS_PEM_MAX);
    CERTS_FIX(c, "give the PEM chain and key files themselves (a chain is a few kB), %s", certs_where);
  } else {
    CERTS_FIX(c, "give the host's user read access to it, %s", certs_where);
  }
  return NULL;
}

/* p's PEM certificates into ch. */
static bool certs_read_chain(const m0__tls_pem *p, certs_chain *ch, m0__check *c) {
  BIO *b = BIO_new_mem_buf(p->cert, (int)p->cert_len);
  X509 *x;
  while (b && ch->n < CERTS_CHAIN_MAX && (x = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL) ch->x[ch->n++] = x;
  BIO_free(b);
  ERR_clear_error();
  if (ch->n == 0) {
    CERTS_FAIL(c, "%s: holds no PEM certificate", p->cert_name);
    CERTS_FIX(c, "give a PEM file beginning -----BEGIN CERTIFICATE----- (the leaf, then its intermediates), %s",
              certs_where);
    return false;
  }
  return true;
}

/* Every certificate of the chain valid now, each issued by the next. */
static bool certs_chain_ok(const char *file, const certs_chain *ch, m0__check *c) {
  for (int i = 0; i < ch->n; i++) {
    char date[32];
    if (X509_cmp_current_time(X509_get0_notAfter(ch->x[i])) < 0) {
      certs_date(X509_get0_notAfter(ch->x[i]), date, sizeof date);
      CERTS_FAIL(c, "%s: certificate %d of the chain%s expired on %s", file, i + 1, i ? "" : " (the leaf)", date);
      CERTS_FIX(c, "renew it (openssl x509 -noout -enddate -in %s shows the date), %s", file, certs_where);
      return false;
    }
    if (X509_cmp_current_time(X509_get0_notBefore(ch->x[i])) > 0) {
      certs_date(X509_get0_notBefore(ch->x[i]), date, sizeof date);
      CERTS_FAIL(c, "%s: certificate %d of the chain is not valid before %s", file, i + 1, date);
      CERTS_FIX(c, "check this machine's clock, or use a certificate valid now, %s", certs_where);
      return false;
    }
    if (i + 1 < ch->n && X509_check_issued(ch->x[i + 1], ch->x[i]) != X509_V_OK) {
      CERTS_FAIL(c, "%s: certificate %d did not issue certificate %d: the chain is out of order", file, i + 2, i + 1);
      CERTS_FIX(c, "put the leaf first, then the certificate that issued it, and so on (cat leaf.pem intermediate.pem)");
      return false;
    }
  }
  return true;
}

/* The key in p is the leaf's. */
static bool certs_key_ok(const m0__tls_pem *p, X509 *leaf, m0__check *c) {
  BIO *b = BIO_new_mem_buf(p->key, (int)p->key_len);
  EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, (void *)"") : NULL;
  BIO_free(b);
  ERR_clear_error();
  if (!k) {
    CERTS_FAIL(c, "%s: holds no unencrypted PEM private key", p->key_name);
    CERTS_FIX(c, "give the key as PEM without a passphrase (openssl pkey -in KEY -out %s), %s", p->key_name,
              certs_where);
    return false;
  }
  bool same = EVP_PKEY_eq(X509_get0_pubkey(leaf), k) == 1;
  EVP_PKEY_free(k);
  if (!same) {
    CERTS_FAIL(c, "%.700s: the key does not match the certificate of %.700s", p->key_name, p->cert_name);
    CERTS_FIX(c, "pair each --certfile with its own key, in the same order, %s", certs_where);
  }
  return same;
}

/* p's OCSP response (read from ocsp) against its chain: DER, successful,
 * answering for the leaf (by its issuer, the chain's second), good, and
 * current (thisUpdate not ahead, nextUpdate not passed; 5 minutes' leeway
 * for clocks). */
static bool certs_ocsp_ok(const m0__tls_pem *p, const char *ocsp, const certs_chain *ch, m0__check *c) {
  const unsigned char *at = (const unsigned char *)p->ocsp;
  OCSP_RESPONSE *r = p->ocsp_len <= LONG_MAX ? d2i_OCSP_RESPONSE(NULL, &at, (long)p->ocsp_len) : NULL;
  OCSP_BASICRESP *bs = r && OCSP_response_status(r) == OCSP_RESPONSE_STATUS_SUCCESSFUL ? OCSP_response_get1_basic(r) : NULL;
  OCSP_CERTID *id = ch->n > 1 ? OCSP_cert_to_id(NULL, ch->x[0], ch->x[1]) : NULL;
  int status = -1, reason;
  ASN1_GENERALIZEDTIME *revoked, *this_upd = NULL, *next_upd = NULL;
  bool found = bs && id && OCSP_resp_find_status(bs, id, &status, &reason, &revoked, &this_upd, &next_upd) == 1;
  if (!r || at != (const unsigned char *)p->ocsp + p->ocsp_len) CERTS_FAIL(c, "%s: not a DER OCSP response", ocsp);
  else if (!bs) CERTS_FAIL(c, "%s: the responder's answer is %s, not successful", ocsp,
                           OCSP_response_status_str(OCSP_response_status(r)));
  else if (ch->n < 2) CERTS_FAIL(c, "%s: %s holds no issuer to match the response against", ocsp, p->cert_name);
  else if (!found) CERTS_FAIL(c, "%s: answers for another certificate than %s's", ocsp, p->cert_name);
  else if (status != V_OCSP_CERTSTATUS_GOOD) CERTS_FAIL(c, "%s: says %s's certificate is %s", ocsp, p->cert_name,
                                                        OCSP_cert_status_str(status));
  else if (OCSP_check_validity(this_upd, next_upd, 300, -1) != 1) CERTS_FAIL(c, "%s: is out of date", ocsp);
  else c->ok = true;
  if (!c->ok)
    CERTS_FIX(c, "fetch a current one for the leaf (openssl ocsp -issuer ISSUER -cert LEAF -url URL -respout FILE; "
                 "the chain must hold the issuer), or leave this certificate's --ocsp-response entry empty");
  ERR_clear_error();
  OCSP_CERTID_free(id);
  OCSP_BASICRESP_free(bs);
  OCSP_RESPONSE_free(r);
  return c->ok;
}

/* One certificate file and its key (and its OCSP response, read from
 * ocsp, when one is given): appends "names (until date)" to the detail;
 * sets the warning when it expires soon. */
static bool certs_one(const m0__tls_pem *p, const char *ocsp, m0__check *c, char *said, size_t n) {
  const char *file = p->cert_name;
  certs_chain ch = {0};
  bool ok = certs_read_chain(p, &ch, c) && certs_chain_ok(file, &ch, c) && certs_key_ok(p, ch.x[0], c) &&
            (!p->ocsp || certs_ocsp_ok(p, ocsp, &ch, c));
  char names[512], until[32];
  if (ok && !certs_names(ch.x[0], names, sizeof names)) {
    CERTS_FAIL(c, "%s: the certificate names no host (no subjectAltName DNS or IP entry; clients ignore the CN)",
               file);
    CERTS_FIX(c, "make it with the names it serves (openssl req ... -addext subjectAltName=DNS:example.org), %s",
              certs_where);
    ok = false;
  }
  if (ok) {
    const ASN1_TIME *end = X509_get0_notAfter(ch.x[0]);
    certs_date(end, until, sizeof until);
    size_t used = strlen(said);
    snprintf(said + used, n - used, "%s%s: %s (until %s%s)", used ? "; " : "", file, names, until,
             p->ocsp ? ", OCSP stapled" : "");
    time_t soon = time(NULL) + CERTS_SOON_S;
    if (X509_cmp_time(end, &soon) < 0)
      CERTS_FIX(c, "%s expires on %s: renew it before then (a SIGHUP reads the new one)", file, until);
  }
  certs_chain_free(&ch);
  return ok;
}

/* The pairs the check read: names and bytes malloc'd (a key in its
 * certificate's file shares the certificate's bytes: the file is read once). */
typedef struct certs_bundle {
  m0__tls_pem pem[M0__TLS_CERTS_MAX];
  int n;
} certs_bundle;

static void certs_bundle_free(certs_bundle *b) {
  for (int i = 0; i < b->n; i++) {
    m0__tls_pem *p = &b->pem[i];
    if (p->key != p->cert) free((char *)p->key);
    free((char *)p->ocsp);
    free((char *)p->cert);
    free((char *)p->cert_name);
    free((char *)p->key_name);
  }
  b->n = 0;
}

/* Reads the pair file, key (and ocsp, unless "") into the next of b
 * (false: the check failed). */
static bool certs_read_pair(certs_bundle *b, const char *file, const char *key, const char *ocsp, m0__check *c) {
  if (b->n == M0__TLS_CERTS_MAX) {
    CERTS_FAIL(c, "%s: more than %d certificates", file, M0__TLS_CERTS_MAX);
    CERTS_FIX(c, "serve at most %d names' certificates from one host", M0__TLS_CERTS_MAX);
    return false;
  }
  m0__tls_pem *p = &b->pem[b->n++];
  if (!(p->cert_name = strdup(file)) || !(p->key_name = strdup(key))) {
    CERTS_FAIL(c, "%s: out of memory", file);
    return false;
  }
  if (!(p->cert = certs_slurp(file, &p->cert_len, c))) return false;
  if (!strcmp(file, key)) {
    p->key = p->cert;
    p->key_len = p->cert_len;
  } else if (!(p->key = certs_slurp(key, &p->key_len, c))) return false;
  return !ocsp[0] || (p->ocsp = certs_slurp(ocsp, &p->ocsp_len, c)) != NULL;
}

/* Every pair of the lists read into b and checked; said: what passed. */
static void certs_read_all(const m0_config *cfg, const char *keys, certs_bundle *b, m0__check *c, char *said,
                           size_t n) {
  char file[M0__STR_MAX], key[M0__STR_MAX], ocsp[M0__STR_MAX];
  const char *cl = M0__CFGS(cfg, certfile), *kl = keys, *ol = M0__CFGS(cfg, ocsp_response);
  c->ok = true;
  while (c->ok && m0__tls_next_file(&cl, file, sizeof file)) {
    if (!m0__tls_next_file(&ol, ocsp, sizeof ocsp)) ocsp[0] = 0;
    if (!m0__tls_next_file(&kl, key, sizeof key) || !key[0]) {
      CERTS_FAIL(c, "%s: no --keyfile paired with it", file);
      CERTS_FIX(c, "list one key per certificate, in the same order (--keyfile a.key,b.key)");
    } else if (certs_read_pair(b, file, key, ocsp, c)) certs_one(&b->pem[b->n - 1], ocsp, c, said, n);
  }
  bool extra_key = c->ok && m0__tls_next_file(&kl, key, sizeof key);
  if (extra_key || (c->ok && m0__tls_next_file(&ol, ocsp, sizeof ocsp))) {
    CERTS_FAIL(c, "%s: a --%s with no --certfile paired with it", extra_key ? key : ocsp,
               extra_key ? "keyfile" : "ocsp-response");
    CERTS_FIX(c, "list one entry per certificate, in the same order (--keyfile a.key,b.key, --ocsp-response a.der,)");
  }
}

/* The bundle's bytes: "m0-certs\n", the number of pairs, then per pair a
 * line of five lengths (certificate name, certificate, key name, key, OCSP
 * response; the names with their NUL) and those bytes. malloc'd, *len of
 * them. */
static char *certs_pack(const certs_bundle *b, size_t *len) {
  size_t cap = 64;
  for (int i = 0; i < b->n; i++)
    cap += 128 + strlen(b->pem[i].cert_name) + strlen(b->pem[i].key_name) + 2 + b->pem[i].cert_len + b->pem[i].key_len +
           b->pem[i].ocsp_len;
  char *out = malloc(cap);
  if (!out) return NULL;
  size_t k = (size_t)snprintf(out, cap, "m0-certs\n%d\n", b->n);
  for (int i = 0; i < b->n; i++) {
    const m0__tls_pem *p = &b->pem[i];
    size_t cn = strlen(p->cert_name) + 1, kn = strlen(p->key_name) + 1;
    k += (size_t)snprintf(out + k, cap - k, "%zu %zu %zu %zu %zu\n", cn, p->cert_len, kn, p->key_len, p->ocsp_len);
    memcpy(out + k, p->cert_name, cn), k += cn;
    memcpy(out + k, p->cert, p->cert_len), k += p->cert_len;
    memcpy(out + k, p->key_name, kn), k += kn;
    memcpy(out + k, p->key, p->key_len), k += p->key_len;
    if (p->ocsp_len) memcpy(out + k, p->ocsp, p->ocsp_len), k += p->ocsp_len;
  }
  *len = k;
  return out;
}

/* The bundle in a memfd sealed read-only (what a worker is handed): its
 * descriptor (close-on-exec), or -1 with errno. */
static int certs_seal(const certs_bundle *b) {
  size_t len;
  char *bytes = certs_pack(b, &len);
  int fd = bytes ? memfd_create("m0-certs", MFD_CLOEXEC | MFD_ALLOW_SEALING) : -1;
  size_t done = 0;
  while (fd >= 0 && done < len) {
    ssize_t w = write(fd, bytes + done, len - done);
    if (w <= 0 && errno != EINTR) break;
    if (w > 0) done += (size_t)w;
  }
  int err = !bytes ? ENOMEM : errno;
  free(bytes);
  int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL;
  if (fd >= 0 && (done < len || fcntl(fd, F_ADD_SEALS, seals) != 0)) {
    err = done < len ? (err ? err : EIO) : errno;
    close(fd);
    fd = -1;
  }
  if (fd < 0) errno = err;
  return fd;
}

/* Keeps b's bytes in cfg (the check passed them). cfg is the checks'
 * const view of a configuration its caller owns and may write (serve,
 * embed): certs_fd is the one field a check writes (config/options.h). */
static void certs_keep(const m0_config *view, const certs_bundle *b, m0__check *c) {
  m0_config *cfg = (m0_config *)view;
  int fd = certs_seal(b);
  if (fd < 0) {
    CERTS_FAIL(c, "cannot keep the certificates' bytes for the loops and workers (memfd: %s)", strerror(errno));
    CERTS_FIX(c, "this needs Linux 3.17 or later with memfd sealing");
    return;
  }
  if (cfg->certs_held) close(cfg->certs_fd);
  cfg->certs_fd = fd;
  cfg->certs_held = true;
}

void m0__certs_check(const m0_config *cfg, m0__check *c) {
  const char *certs = M0__CFGS(cfg, certfile), *keys = M0__CFGS(cfg, keyfile);
  if (!certs[0]) {
    c->ok = true;
    const char *ocsp = M0__CFGS(cfg, ocsp_response);
    if (keys[0] || ocsp[0]) {
      CERTS_FAIL(c, "--%s is set (%s) but no --certfile / M0_CERTFILE", keys[0] ? "keyfile / M0_KEYFILE" :
                 "ocsp-response / M0_OCSP_RESPONSE", keys[0] ? keys : ocsp);
      CERTS_FIX(c, "set --certfile / M0_CERTFILE to the certificate chain it belongs to, or unset it");
    } else snprintf(c->detail, sizeof c->detail, "no --certfile: the listener speaks plain HTTP");
    return;
  }
  if (!keys[0]) keys = certs; /* the key in the certificate's file, as nginx allows */
  char said[M0__STR_MAX + 256] = "", why[M0__STR_MAX + 256];
  certs_bundle b = {.n = 0};
  certs_read_all(cfg, keys, &b, c, said, sizeof said);
  m0__tls_ctx *x = c->ok ? m0__tls_ctx_new_pem(b.pem, b.n, NULL, why, sizeof why) : NULL;
  if (c->ok && !x) {
    CERTS_FAIL(c, "%s", why);
    CERTS_FIX(c, "give PEM files OpenSSL 3 reads (a leaf with an RSA, EC or Ed25519 key), %s", certs_where);
  }
  m0__tls_ctx_free(x);
  if (c->ok) certs_keep(cfg, &b, c);
  certs_bundle_free(&b);
  if (c->ok)
    snprintf(c->detail, sizeof c->detail, "HTTPS (TLS 1.2, 1.3) with %s, read once here (workers are handed these "
             "bytes; a SIGHUP reads the files again); no kernel TLS: files (m0_respond_file) are read and "
             "encrypted by the loop, not sendfile'd", said);
}

/* --plain-port: a plain HTTP listener beside HTTPS (http/plain.c). */
void m0__plain_port_check(const m0_config *cfg, m0__check *c) {
  long plain = M0__CFG(cfg, plain_port), port = M0__CFG(cfg, port);
  if (plain < 0) {
    CERTS_OK(c, "no --plain-port: one listener, --port's");
  } else if (!M0__CFGS(cfg, certfile)[0]) {
    CERTS_FAIL(c, "--plain-port / M0_PLAIN_PORT is %ld but there is no --certfile: --port speaks plain HTTP already",
               plain);
    CERTS_FIX(c, "set --certfile (HTTPS on --port, plain HTTP on --plain-port), or unset --plain-port");
  } else if (plain && plain == port) {
    CERTS_FAIL(c, "--plain-port and --port are both %ld", plain);
    CERTS_FIX(c, "give the plain listener a port of its own (80 beside 443, as nginx's two listen lines)");
  } else {
    CERTS_OK(c, "plain HTTP on port %ld beside HTTPS: the metrics path is served there, every other request is "
                "sent to HTTPS with 308", plain);
  }
}

/* The ticket secret: the one handed on by a supervisor or a predecessor
 * (M0__TICKETS, m0__certs_tickets_env; wiped where it was read, as
 * /proc/PID/environ shows that memory), else SHA-256 of the family's cookie
 * (runtime/seal.h), which every process of the first generation shares and
 * no one outside it knows. */
static bool certs_secret(uint8_t out[M0__TLS_SECRET_BYTES]) {
  char *given = getenv("M0__TICKETS");
  if (given) {
    bool ok = m0__tls_secret_parse(given, out);
    memset(given, '0', strlen(given));
    unsetenv("M0__TICKETS"); /* read once: a second context here is not handed zeros */
    if (ok) return true;
  }
  if (!m0__family_known()) return false;
  char env[64];
  m0__family_env(env);
  unsigned len = M0__TLS_SECRET_BYTES;
  bool ok = EVP_Digest(env, strlen(env), out, &len, EVP_sha256(), NULL) == 1;
  OPENSSL_cleanse(env, sizeof env);
  return ok;
}

void m0__certs_tickets_env(const m0__tls_ctx *x, char out[M0__CERTS_TICKETS_ENV]) {
  out[0] = 0;
  if (!x) return;
  uint8_t secret[M0__TLS_SECRET_BYTES];
  char hex[2 * M0__TLS_SECRET_BYTES + 1];
  m0__tls_ctx_secret(x, secret);
  m0__tls_secret_hex(secret, hex);
  snprintf(out, M0__CERTS_TICKETS_ENV, "M0__TICKETS=%s", hex);
  OPENSSL_cleanse(secret, sizeof secret);
  OPENSSL_cleanse(hex, sizeof hex);
}

int m0__certs_pass_make(const m0_config *cfg, const m0__tls_ctx *x, m0__certs_pass *out) {
  int fd = cfg->certs_held ? cfg->certs_fd : -1;
  out->fd[0] = 0;
  if (fd >= 0) snprintf(out->fd, sizeof out->fd, "M0__CERTS_FD=%d", fd);
  m0__certs_tickets_env(x, out->tickets);
  return fd;
}

/* The line at *at (before end) of want numbers into v; *at past it. */
static bool certs_nums(const char **at, const char *end, size_t *v, int want) {
  char line[128];
  size_t k = 0;
  while (*at + k < end && k < sizeof line - 1 && (*at)[k] != '\n') k++;
  if (*at + k >= end || (*at)[k] != '\n') return false;
  memcpy(line, *at, k);
  line[k] = 0;
  *at += k + 1;
  char *s = line, *e;
  for (int i = 0; i < want; i++, s = e) {
    unsigned long long n = strtoull(s, &e, 10);
    if (e == s || n > 2 * M0__TLS_PEM_MAX) return false;
    v[i] = (size_t)n;
  }
  return *s == 0;
}

/* The bundle's bytes (certs_pack) read back into b, pointing into them. */
static bool certs_unpack(const char *at, size_t len, certs_bundle *b) {
  const char *end = at + len;
  size_t n, v[5];
  if (len < 9 || memcmp(at, "m0-certs\n", 9) != 0) return false;
  at += 9;
  if (!certs_nums(&at, end, &n, 1) || n < 1 || n > M0__TLS_CERTS_MAX) return false;
  for (b->n = 0; b->n < (int)n; b->n++) {
    m0__tls_pem *p = &b->pem[b->n];
    if (!certs_nums(&at, end, v, 5) || v[0] < 1 || v[2] < 1 ||
        (size_t)(end - at) < v[0] + v[1] + v[2] + v[3] + v[4] || at[v[0] - 1] || at[v[0] + v[1] + v[2] - 1])
      return false;
    *p = (m0__tls_pem){.cert_name = at, .cert = at + v[0], .cert_len = v[1], .key_name = at + v[0] + v[1],
                       .key = at + v[0] + v[1] + v[2], .key_len = v[3], .ocsp_len = v[4]};
    p->ocsp = v[4] ? p->key + v[3] : NULL;
    at += v[0] + v[1] + v[2] + v[3] + v[4];
  }
  return at == end;
}

bool m0__certs_inherit(m0_config *cfg, const char *fd_text) {
  char *e;
  long fd = fd_text ? strtol(fd_text, &e, 10) : -1;
  if (!fd_text || e == fd_text || *e || fd < 0 || fd > INT32_MAX) return false;
  int seals = fcntl((int)fd, F_GET_SEALS);
  if (seals < 0 || !(seals & F_SEAL_WRITE)) return false; /* not the supervisor's sealed bytes */
  fcntl((int)fd, F_SETFD, FD_CLOEXEC);
  if (cfg->certs_held) close(cfg->certs_fd);
  cfg->certs_fd = (int)fd;
  cfg->certs_held = true;
  return true;
}

m0__tls_ctx *m0__certs_ctx(const m0_config *cfg, char *why, size_t whylen) {
  const char *certs = M0__CFGS(cfg, certfile);
  why[0] = 0;
  if (!certs[0]) return NULL;
  struct stat st = {0};
  void *map = MAP_FAILED;
  if (cfg->certs_held && fstat(cfg->certs_fd, &st) == 0 && st.st_size > 0)
    map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, cfg->certs_fd, 0);
  certs_bundle b = {.n = 0};
  if (map == MAP_FAILED || !certs_unpack(map, (size_t)st.st_size, &b)) {
    snprintf(why, whylen, "%s: the certificates' bytes the check `certificates` read are not here (a worker is "
             "handed its supervisor's, M0__CERTS_FD); the files are not read again", certs);
    if (map != MAP_FAILED) munmap(map, (size_t)st.st_size);
    return NULL;
  }
  uint8_t secret[M0__TLS_SECRET_BYTES];
  bool shared = certs_secret(secret);
  m0__tls_ctx *x = m0__tls_ctx_new_pem(b.pem, b.n, shared ? secret : NULL, why, whylen);
  OPENSSL_cleanse(secret, sizeof secret);
  munmap(map, (size_t)st.st_size);
  if (x && M0__CFG(cfg, http2)) m0__tls_ctx_alpn_h2(x);
  return x;
}
