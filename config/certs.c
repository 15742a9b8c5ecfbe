/* The `certificates` check and the loops' TLS context (config/certs.h).
 * The check reads the files itself, one question at a time, so that a
 * refusal names the file and the one thing to fix; it then builds the
 * context the way serve does (http/tls.c), so nothing the check passed is
 * refused later by the loader. A reload's next generation runs it too: a
 * certificate replaced by an expired or mismatched one is refused there,
 * and the old generation serves on with the files it read. */
#include "config/certs.h"
#include "config/checks.h"
#include "runtime/seal.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define CERTS_CHAIN_MAX 10
#define CERTS_SOON_S (14 * 86400)

#define CERTS_FAIL(c, ...) ((c)->ok = false, snprintf((c)->detail, sizeof (c)->detail, __VA_ARGS__))
#define CERTS_FIX(c, ...) snprintf((c)->fix, sizeof (c)->fix, __VA_ARGS__)

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

/* Reads file's PEM certificates into ch. */
static bool certs_read_chain(const char *file, certs_chain *ch, m0__check *c) {
  FILE *f = fopen(file, "r");
  if (!f) {
    CERTS_FAIL(c, "%s: cannot be read (%s)", file, strerror(errno));
    CERTS_FIX(c, "give the host's user read access to it, %s", certs_where);
    return false;
  }
  X509 *x;
  while (ch->n < CERTS_CHAIN_MAX && (x = PEM_read_X509(f, NULL, NULL, NULL)) != NULL) ch->x[ch->n++] = x;
  fclose(f);
  ERR_clear_error();
  if (ch->n == 0) {
    CERTS_FAIL(c, "%s: holds no PEM certificate", file);
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

/* The key in keyfile is the leaf's. */
static bool certs_key_ok(const char *file, const char *keyfile, X509 *leaf, m0__check *c) {
  FILE *f = fopen(keyfile, "r");
  if (!f) {
    CERTS_FAIL(c, "%s: cannot be read (%s)", keyfile, strerror(errno));
    CERTS_FIX(c, "give the host's user read access to it, %s", certs_where);
    return false;
  }
  EVP_PKEY *k = PEM_read_PrivateKey(f, NULL, NULL, (void *)"");
  fclose(f);
  ERR_clear_error();
  if (!k) {
    CERTS_FAIL(c, "%s: holds no unencrypted PEM private key", keyfile);
    CERTS_FIX(c, "give the key as PEM without a passphrase (openssl pkey -in KEY -out %s), %s", keyfile, certs_where);
    return false;
  }
  bool same = EVP_PKEY_eq(X509_get0_pubkey(leaf), k) == 1;
  EVP_PKEY_free(k);
  if (!same) {
    CERTS_FAIL(c, "%.700s: the key does not match the certificate of %.700s", keyfile, file);
    CERTS_FIX(c, "pair each --certfile with its own key, in the same order, %s", certs_where);
  }
  return same;
}

/* One certificate file and its key: appends "names (until date)" to the
 * detail; sets the warning when it expires soon. */
static bool certs_one(const char *file, const char *keyfile, m0__check *c, char *said, size_t n) {
  certs_chain ch = {0};
  bool ok = certs_read_chain(file, &ch, c) && certs_chain_ok(file, &ch, c) &&
            certs_key_ok(file, keyfile, ch.x[0], c);
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
    snprintf(said + used, n - used, "%s%s: %s (until %s)", used ? "; " : "", file, names, until);
    time_t soon = time(NULL) + CERTS_SOON_S;
    if (X509_cmp_time(end, &soon) < 0)
      CERTS_FIX(c, "%s expires on %s: renew it before then (a SIGHUP reads the new one)", file, until);
  }
  certs_chain_free(&ch);
  return ok;
}

void m0__certs_check(const m0_config *cfg, m0__check *c) {
  const char *certs = M0__CFGS(cfg, certfile), *keys = M0__CFGS(cfg, keyfile);
  if (!certs[0]) {
    c->ok = true;
    if (keys[0]) {
      CERTS_FAIL(c, "--keyfile / M0_KEYFILE is set (%s) but no --certfile / M0_CERTFILE", keys);
      CERTS_FIX(c, "set --certfile / M0_CERTFILE to the certificate chain of that key, or unset the key");
    } else snprintf(c->detail, sizeof c->detail, "no --certfile: the listener speaks plain HTTP");
    return;
  }
  if (!keys[0]) keys = certs; /* the key in the certificate's file, as nginx allows */
  char file[M0__STR_MAX], key[M0__STR_MAX], said[M0__STR_MAX + 256] = "";
  const char *cl = certs, *kl = keys;
  c->ok = true;
  while (c->ok && m0__tls_next_file(&cl, file, sizeof file)) {
    if (!m0__tls_next_file(&kl, key, sizeof key) || !key[0]) {
      CERTS_FAIL(c, "%s: no --keyfile paired with it", file);
      CERTS_FIX(c, "list one key per certificate, in the same order (--keyfile a.key,b.key)");
    } else certs_one(file, key, c, said, sizeof said);
  }
  if (!c->ok) return;
  char why[M0__STR_MAX + 256];
  m0__tls_ctx *x = m0__tls_ctx_new(certs, keys, NULL, why, sizeof why);
  if (!x) {
    CERTS_FAIL(c, "%s", why);
    CERTS_FIX(c, "give PEM files OpenSSL 3 reads (a leaf with an RSA, EC or Ed25519 key), %s", certs_where);
    return;
  }
  m0__tls_ctx_free(x);
  snprintf(c->detail, sizeof c->detail, "HTTPS (TLS 1.2, 1.3) with %s; no kernel TLS: files (m0_respond_file) "
           "are read and encrypted by the loop, not sendfile'd", said);
}

/* The ticket secret: SHA-256 of the family's cookie (runtime/seal.h), which
 * every process of one generation shares and no one outside it knows. */
static bool certs_secret(uint8_t out[M0__TLS_SECRET_BYTES]) {
  if (!m0__family_known()) return false;
  char env[64];
  m0__family_env(env);
  unsigned len = M0__TLS_SECRET_BYTES;
  bool ok = EVP_Digest(env, strlen(env), out, &len, EVP_sha256(), NULL) == 1;
  OPENSSL_cleanse(env, sizeof env);
  return ok;
}

m0__tls_ctx *m0__certs_ctx(const m0_config *cfg, char *why, size_t whylen) {
  const char *certs = M0__CFGS(cfg, certfile), *keys = M0__CFGS(cfg, keyfile);
  why[0] = 0;
  if (!certs[0]) return NULL;
  uint8_t secret[M0__TLS_SECRET_BYTES];
  bool shared = certs_secret(secret);
  m0__tls_ctx *x = m0__tls_ctx_new(certs, keys[0] ? keys : certs, shared ? secret : NULL, why, whylen);
  OPENSSL_cleanse(secret, sizeof secret);
  if (x && M0__CFG(cfg, http2)) m0__tls_ctx_alpn_h2(x);
  return x;
}
