/* TLS for HTTP listeners: OpenSSL 3 over memory BIOs (http/tls.h says what
 * and why). Design notes:
 * - One SSL_CTX per certificate, all of one m0__tls_ctx: the first is the
 *   one every connection starts with; the servername callback moves a
 *   connection to the certificate whose names (X509_check_host) match its
 *   SNI. Each SSL_CTX's app data is the m0__tls_ctx, so a callback finds the
 *   secret and the list whichever SSL_CTX the connection is on now.
 * - The ticket key of hour h is HMAC-SHA256(secret, "m0 tls ticket" h
 *   label), derived at the first ticket of the hour and kept for it and the
 *   next (keys[h % 2], under the context's lock: the loops share it).
 *   Nothing changes when the hour turns but the number, so processes that
 *   share the secret agree without a message; a ticket of the previous
 *   hour is accepted and renewed, an older one makes a full handshake.
 * - The server's session cache is off: tickets are the resumption (nothing
 *   per session held by the host, nothing locked between loops).
 * - OpenSSL's error queue is per thread: every failure here takes its
 *   reason and clears the queue, so no later call sees a stale error. */
#include "http/tls.h"
#include "base/file.h"
#include "base/errors.h"

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define TLS_TICKET_PERIOD_S 3600
#define TLS_CIPHERS_12                                                                                            \
  "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"                     \
  "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

/* One hour's ticket key: derived once, kept while the hour or the next
 * asks for it. */
typedef struct tls_keys {
  uint64_t hour; /* 0: none yet */
  unsigned char name[16], aes[32], mac[32];
} tls_keys;

/* A certificate's stapled OCSP response (--ocsp-response), DER. */
typedef struct tls_ocsp {
  unsigned char *der;
  size_t len;
} tls_ocsp;

struct m0__tls_ctx {
  SSL_CTX *ctx[M0__TLS_CERTS_MAX];
  tls_ocsp ocsp[M0__TLS_CERTS_MAX]; /* by ctx: len 0, none */
  int n;
  uint8_t secret[M0__TLS_SECRET_BYTES];
  pthread_mutex_t lock; /* the loops' handshakes share keys[] */
  tls_keys keys[2];     /* by hour % 2: this hour's and the last */
};

struct m0__tls {
  SSL *ssl;
  BIO *rbio, *wbio; /* owned by ssl */
  unsigned long err;
};

/* The ALPN protocols this host speaks, in wire form. */
static const unsigned char tls_alpn_wire[] = "\x08http/1.1";

int m0__tls_secret_make(uint8_t out[M0__TLS_SECRET_BYTES]) {
  return getrandom(out, M0__TLS_SECRET_BYTES, 0) == M0__TLS_SECRET_BYTES ? 0 : M0__ESYSTEM;
}

void m0__tls_secret_hex(const uint8_t s[M0__TLS_SECRET_BYTES], char out[2 * M0__TLS_SECRET_BYTES + 1]) {
  for (int i = 0; i < M0__TLS_SECRET_BYTES; i++) snprintf(out + 2 * i, 3, "%02x", s[i]);
}

bool m0__tls_secret_parse(const char *hex, uint8_t out[M0__TLS_SECRET_BYTES]) {
  if (!hex || strlen(hex) != 2 * M0__TLS_SECRET_BYTES) return false;
  for (int i = 0; i < M0__TLS_SECRET_BYTES; i++) {
    unsigned v;
    if (sscanf(hex + 2 * i, "%2x", &v) != 1) return false;
    out[i] = (uint8_t)v;
  }
  return true;
}

/* One 32-byte piece of hour h's ticket key: label 'n' its name (16 bytes
 * used), 'a' the AES key, 'h' the HMAC key. */
static bool tls_ticket_piece(const m0__tls_ctx *x, uint64_t h, char label, unsigned char out[32]) {
  unsigned char msg[24] = "m0 tls ticket ";
  for (int i = 0; i < 8; i++) msg[14 + i] = (unsigned char)(h >> (56 - 8 * i));
  msg[22] = (unsigned char)label;
  unsigned len = 32;
  return HMAC(EVP_sha256(), x->secret, M0__TLS_SECRET_BYTES, msg, 23, out, &len) != NULL;
}

/* Hour h's key into out (a copy: the cache may change under another
 * loop once the lock is let go). false: HMAC failed. */
static bool tls_keys_of(m0__tls_ctx *x, uint64_t h, tls_keys *out) {
  pthread_mutex_lock(&x->lock);
  tls_keys *k = &x->keys[h % 2];
  bool ok = k->hour == h;
  if (!ok) {
    unsigned char name[32];
    ok = tls_ticket_piece(x, h, 'n', name) && tls_ticket_piece(x, h, 'a', k->aes) &&
         tls_ticket_piece(x, h, 'h', k->mac);
    memcpy(k->name, name, sizeof k->name);
    k->hour = ok ? h : 0;
  }
  if (ok) *out = *k;
  pthread_mutex_unlock(&x->lock);
  return ok;
}

/* Sets up the cipher and MAC with the keys k: 1, or M0__ESYSTEM (any
 * negative is OpenSSL's "fatal" here). */
static int tls_ticket_keys(tls_keys *k, unsigned char *iv, EVP_CIPHER_CTX *cctx, EVP_MAC_CTX *hctx, int enc) {
  OSSL_PARAM params[] = {OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, k->mac, sizeof k->mac),
                         OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
                         OSSL_PARAM_construct_end()};
  int ok = EVP_CipherInit_ex(cctx, EVP_aes_256_cbc(), NULL, k->aes, iv, enc) && EVP_MAC_CTX_set_params(hctx, params);
  OPENSSL_cleanse(k, sizeof *k);
  return ok ? 1 : M0__ESYSTEM;
}

/* OpenSSL's ticket key callback: enc 1 makes a ticket with this hour's
 * key; enc 0 opens one whose name is this hour's or the last (2: renew, 0:
 * unknown); a negative return is a failure. */
static int tls_on_ticket(SSL *s, unsigned char name[16], unsigned char *iv, EVP_CIPHER_CTX *cctx, EVP_MAC_CTX *hctx,
                         int enc) {
  m0__tls_ctx *x = SSL_CTX_get_app_data(SSL_get_SSL_CTX(s));
  uint64_t now = (uint64_t)time(NULL) / TLS_TICKET_PERIOD_S;
  tls_keys k;
  if (enc) {
    if (!tls_keys_of(x, now, &k) || RAND_bytes(iv, EVP_CIPHER_iv_length(EVP_aes_256_cbc())) != 1)
      return M0__ESYSTEM;
    memcpy(name, k.name, 16);
    return tls_ticket_keys(&k, iv, cctx, hctx, 1);
  }
  for (uint64_t back = 0; back < 2; back++) {
    if (!tls_keys_of(x, now - back, &k)) return M0__ESYSTEM;
    if (memcmp(name, k.name, 16) != 0) {
      OPENSSL_cleanse(&k, sizeof k);
      continue;
    }
    int rv = tls_ticket_keys(&k, iv, cctx, hctx, 0);
    return rv == 1 && back ? 2 : rv;
  }
  return 0; /* unknown: a full handshake */
}

/* SNI: the certificate whose names match the one asked for; the default
 * (the first) when none does, as nginx's default server. */
static int tls_on_servername(SSL *s, int *alert, void *arg) {
  const m0__tls_ctx *x = arg;
  const char *name = SSL_get_servername(s, TLSEXT_NAMETYPE_host_name);
  if (!name) return SSL_TLSEXT_ERR_OK;
  for (int i = 0; i < x->n; i++) {
    X509 *leaf = SSL_CTX_get0_certificate(x->ctx[i]);
    if (leaf && X509_check_host(leaf, name, 0, 0, NULL) == 1) {
      if (i) SSL_set_SSL_CTX(s, x->ctx[i]);
      return SSL_TLSEXT_ERR_OK;
    }
  }
  return SSL_TLSEXT_ERR_OK;
}

/* --http2: h2 first (the server's preference), then http/1.1. */
static const unsigned char tls_alpn_h2_wire[] = "\x02h2\x08http/1.1";

/* The client's choice among arg's protocols (tls_alpn_wire, or
 * tls_alpn_h2_wire: wire form, NUL-ended). */
static int tls_on_alpn(SSL *s, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                       unsigned inlen, void *arg) {
  (void)s;
  const unsigned char *wire = arg;
  unsigned char *sel;
  if (SSL_select_next_proto(&sel, outlen, wire, (unsigned)strlen((const char *)wire), in, inlen) !=
      OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_ALERT_FATAL; /* no_application_protocol */
  *out = sel;
  return SSL_TLSEXT_ERR_OK;
}

/* A client asked for the certificate's status (status_request): the
 * response the check read, stapled (OpenSSL frees the copy). The context
 * is the one SNI chose, so is the response (arg). */
static int tls_on_status(SSL *s, void *arg) {
  const tls_ocsp *o = arg;
  unsigned char *copy = OPENSSL_memdup(o->der, o->len);
  if (copy && SSL_set_tlsext_status_ocsp_resp(s, copy, (long)o->len) == 1) return SSL_TLSEXT_ERR_OK;
  OPENSSL_free(copy);
  return SSL_TLSEXT_ERR_NOACK;
}

/* x's i-th context staples p's OCSP response, if it has one. */
static bool tls_use_ocsp(m0__tls_ctx *x, int i, const m0__tls_pem *p) {
  if (!p->ocsp_len) return true;
  tls_ocsp *o = &x->ocsp[i];
  if (!(o->der = malloc(p->ocsp_len))) return false;
  memcpy(o->der, p->ocsp, p->ocsp_len);
  o->len = p->ocsp_len;
  return SSL_CTX_set_tlsext_status_cb(x->ctx[i], tls_on_status) == 1 && SSL_CTX_set_tlsext_status_arg(x->ctx[i], o) == 1;
}

void m0__tls_ctx_alpn_h2(m0__tls_ctx *x) {
  for (int i = 0; i < x->n; i++) SSL_CTX_set_alpn_select_cb(x->ctx[i], tls_on_alpn, (void *)tls_alpn_h2_wire);
}

static void tls_why(char *why, size_t whylen, const char *file, const char *what) {
  unsigned long e = ERR_peek_last_error();
  const char *r = e ? ERR_reason_error_string(e) : NULL;
  snprintf(why, whylen, "%s: %s%s%s", file, what, r ? ": " : "", r ? r : "");
  ERR_clear_error();
}

/* p's certificate text into c: the leaf, then the certificates that issued
 * it, in order (what SSL_CTX_use_certificate_chain_file does with a file). */
static bool tls_use_chain(SSL_CTX *c, const m0__tls_pem *p) {
  BIO *b = p->cert_len <= INT_MAX ? BIO_new_mem_buf(p->cert, (int)p->cert_len) : NULL;
  X509 *leaf = b ? PEM_read_bio_X509_AUX(b, NULL, NULL, NULL) : NULL, *ca;
  bool ok = leaf && SSL_CTX_use_certificate(c, leaf) == 1 && SSL_CTX_clear_chain_certs(c) == 1;
  X509_free(leaf);
  while (ok && (ca = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL)
    if (SSL_CTX_add0_chain_cert(c, ca) != 1) X509_free(ca), ok = false;
  unsigned long e = ERR_peek_last_error(); /* the end of the text reads as "no start line" */
  if (ok && e && !(ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE)) ok = false;
  if (ok) ERR_clear_error();
  BIO_free(b);
  return ok;
}

static EVP_PKEY *tls_read_key(const m0__tls_pem *p) {
  BIO *b = p->key_len <= INT_MAX ? BIO_new_mem_buf(p->key, (int)p->key_len) : NULL;
  EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, (void *)"") : NULL;
  BIO_free(b);
  return k;
}

/* One SSL_CTX for p's certificate and key, with the host's defaults. */
static SSL_CTX *tls_ctx_one(m0__tls_ctx *x, const m0__tls_pem *p, char *why, size_t whylen) {
  EVP_PKEY *pkey = NULL;
  SSL_CTX *c = SSL_CTX_new(TLS_server_method());
  if (!c) return tls_why(why, whylen, p->cert_name, "cannot make a TLS context"), NULL;
  SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
  SSL_CTX_set_options(c, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_num_tickets(c, 1);
  SSL_CTX_set_app_data(c, x);
  if (SSL_CTX_set_cipher_list(c, TLS_CIPHERS_12) != 1 ||
      SSL_CTX_set_session_id_context(c, (const unsigned char *)"m0", 2) != 1 ||
      SSL_CTX_set_tlsext_ticket_key_evp_cb(c, tls_on_ticket) != 1) {
    tls_why(why, whylen, p->cert_name, "cannot set the TLS defaults");
  } else if (!tls_use_chain(c, p)) {
    tls_why(why, whylen, p->cert_name, "cannot read the certificate chain (PEM, the leaf first)");
  } else if (!(pkey = tls_read_key(p))) {
    tls_why(why, whylen, p->key_name, "cannot read the private key (PEM, unencrypted)");
  } else if (SSL_CTX_use_PrivateKey(c, pkey) != 1 || SSL_CTX_check_private_key(c) != 1) {
    tls_why(why, whylen, p->key_name, "the key does not match the certificate");
  } else {
    EVP_PKEY_free(pkey);
    SSL_CTX_set_tlsext_servername_callback(c, tls_on_servername);
    SSL_CTX_set_tlsext_servername_arg(c, x);
    SSL_CTX_set_alpn_select_cb(c, tls_on_alpn, (void *)tls_alpn_wire);
    return c;
  }
  EVP_PKEY_free(pkey);
  SSL_CTX_free(c);
  return NULL;
}

bool m0__tls_next_file(const char **list, char *out, size_t n) {
  const char *s = *list, *e = strchr(s, ',');
  size_t len = e ? (size_t)(e - s) : strlen(s);
  if (!*s && !e) return false;
  if (len >= n) len = n - 1;
  memcpy(out, s, len);
  out[len] = 0;
  *list = e ? e + 1 : s + strlen(s);
  return true;
}

m0__tls_ctx *m0__tls_ctx_new_pem(const m0__tls_pem *pem, int n, const uint8_t *secret, char *why, size_t whylen) {
  if (n <= 0 || n > M0__TLS_CERTS_MAX)
    return snprintf(why, whylen, "--certfile: %s", n <= 0 ? "no certificate given" : "too many certificates"), NULL;
  m0__tls_ctx *x = calloc(1, sizeof *x);
  if (!x) return snprintf(why, whylen, "out of memory"), NULL;
  pthread_mutex_init(&x->lock, NULL);
  if (secret) memcpy(x->secret, secret, M0__TLS_SECRET_BYTES);
  else if (m0__tls_secret_make(x->secret) != 0) {
    snprintf(why, whylen, "cannot make the session ticket secret (getrandom)");
    m0__tls_ctx_free(x);
    return NULL;
  }
  for (; x->n < n; x->n++) {
    if (!(x->ctx[x->n] = tls_ctx_one(x, &pem[x->n], why, whylen))) {
      m0__tls_ctx_free(x);
      return NULL;
    }
    if (!tls_use_ocsp(x, x->n, &pem[x->n])) {
      snprintf(why, whylen, "%s: cannot keep its OCSP response (out of memory)", pem[x->n].cert_name);
      x->n++;
      m0__tls_ctx_free(x);
      return NULL;
    }
  }
  return x;
}

/* path's bytes, malloc'd (*len of them), or NULL: unreadable, or past
 * M0__TLS_PEM_MAX (not a certificate). */
static char *tls_file(const char *path, size_t *len) {
  char why[128]; /* a FIFO or device is refused, not waited on (base/file.h) */
  return m0__file_read(path, M0__TLS_PEM_MAX, len, why, sizeof why);
}

/* The files of two comma-separated lists read into pem[] (the names and
 * bytes malloc'd), or false with why; *n pairs either way. */
static bool tls_files(const char *certfiles, const char *keyfiles, m0__tls_pem *pem, int *n, char *why,
                      size_t whylen) {
  char cert[4096], key[4096];
  const char *cl = certfiles ? certfiles : "", *kl = keyfiles ? keyfiles : "";
  for (*n = 0; m0__tls_next_file(&cl, cert, sizeof cert); (*n)++) {
    if (!m0__tls_next_file(&kl, key, sizeof key) || !*key)
      return snprintf(why, whylen, "%s: no key file paired with it (one --keyfile per --certfile, in order)", cert),
             false;
    if (*n == M0__TLS_CERTS_MAX) return snprintf(why, whylen, "%s: more than %d certificates", cert, *n), false;
    m0__tls_pem *p = &pem[*n];
    p->cert_name = strdup(cert);
    p->key_name = strdup(key);
    p->cert = tls_file(cert, &p->cert_len);
    p->key = tls_file(key, &p->key_len);
    if (!p->cert || !p->key || !p->cert_name || !p->key_name)
      return snprintf(why, whylen, "%s: cannot be read (or past %d bytes)", p->cert ? key : cert, M0__TLS_PEM_MAX),
             (*n)++, false;
  }
  if (m0__tls_next_file(&kl, key, sizeof key))
    return snprintf(why, whylen, "%s: a key file with no certificate paired with it", key), false;
  return true;
}

m0__tls_ctx *m0__tls_ctx_new(const char *certfiles, const char *keyfiles, const uint8_t *secret, char *why,
                             size_t whylen) {
  m0__tls_pem pem[M0__TLS_CERTS_MAX] = {{0}};
  int n = 0;
  bool read = tls_files(certfiles, keyfiles, pem, &n, why, whylen);
  m0__tls_ctx *x = read ? m0__tls_ctx_new_pem(pem, n, secret, why, whylen) : NULL;
  for (int i = 0; i < n; i++) {
    free((char *)pem[i].cert_name);
    free((char *)pem[i].key_name);
    free((char *)pem[i].cert);
    free((char *)pem[i].key);
  }
  return x;
}

void m0__tls_ctx_secret(const m0__tls_ctx *x, uint8_t out[M0__TLS_SECRET_BYTES]) {
  memcpy(out, x->secret, M0__TLS_SECRET_BYTES);
}

void m0__tls_ctx_free(m0__tls_ctx *x) {
  if (!x) return;
  for (int i = 0; i < x->n; i++) {
    SSL_CTX_free(x->ctx[i]);
    free(x->ocsp[i].der);
  }
  pthread_mutex_destroy(&x->lock);
  OPENSSL_cleanse(x, sizeof *x);
  free(x);
}

m0__tls *m0__tls_new(m0__tls_ctx *x) {
  m0__tls *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->ssl = SSL_new(x->ctx[0]);
  t->rbio = BIO_new(BIO_s_mem());
  t->wbio = BIO_new(BIO_s_mem());
  if (!t->ssl || !t->rbio || !t->wbio) {
    BIO_free(t->rbio);
    BIO_free(t->wbio);
    SSL_free(t->ssl);
    free(t);
    ERR_clear_error();
    return NULL;
  }
  BIO_set_mem_eof_return(t->rbio, -1); /* empty: "read again", not EOF */
  SSL_set_bio(t->ssl, t->rbio, t->wbio);
  SSL_set_accept_state(t->ssl);
  return t;
}

void m0__tls_rest(m0__tls *t) {
  int freed = SSL_free_buffers(t->ssl); /* 0: a record is part read, its buffer stays */
  (void)freed;
}

void m0__tls_free(m0__tls *t) {
  if (!t) return;
  SSL_free(t->ssl);
  free(t);
}

int m0__tls_in(m0__tls *t, const void *buf, size_t n) {
  while (n > 0) {
    int k = n > INT_MAX ? INT_MAX : (int)n;
    int w = BIO_write(t->rbio, buf, k);
    if (w <= 0) return ERR_clear_error(), M0__ENOMEM;
    buf = (const char *)buf + w;
    n -= (size_t)w;
  }
  return 0;
}

/* What SSL_read's or SSL_write's r means here. */
static long tls_result(m0__tls *t, int r) {
  switch (SSL_get_error(t->ssl, r)) {
  case SSL_ERROR_WANT_READ:
  case SSL_ERROR_WANT_WRITE:
    return M0__TLS_AGAIN;
  case SSL_ERROR_ZERO_RETURN:
    return M0__TLS_EOF;
  default:
    t->err = ERR_peek_last_error();
    ERR_clear_error();
    return M0__TLS_FAILED;
  }
}

/* An emptied memory BIO keeps the room its largest burst took (a 1 MiB
 * answer: 1 MiB, for the connection's life): once empty with more than
 * TLS_BIO_KEEP of room it is swapped for a new one, so an idle connection
 * holds no buffer. The SSL owns both BIOs: set0 frees the old one. */
#define TLS_BIO_KEEP 4096

static bool tls_bio_fat(BIO *b) {
  BUF_MEM *m = NULL;
  return BIO_ctrl_pending(b) == 0 && BIO_get_mem_ptr(b, &m) == 1 && m && m->max > TLS_BIO_KEEP;
}

static void tls_bio_trim(m0__tls *t, bool read_side) {
  BIO *old = read_side ? t->rbio : t->wbio, *fresh;
  if (!tls_bio_fat(old) || !(fresh = BIO_new(BIO_s_mem()))) return;
  if (read_side) {
    BIO_set_mem_eof_return(fresh, -1);
    SSL_set0_rbio(t->ssl, fresh);
    t->rbio = fresh;
  } else {
    SSL_set0_wbio(t->ssl, fresh);
    t->wbio = fresh;
  }
}

long m0__tls_read(m0__tls *t, void *buf, size_t cap) {
  int r = SSL_read(t->ssl, buf, cap > INT_MAX ? INT_MAX : (int)cap);
  if (r > 0) return r;
  long rv = tls_result(t, r); /* before the trim: SSL_get_error asks the read BIO why */
  tls_bio_trim(t, true);
  return rv;
}

int m0__tls_write(m0__tls *t, const void *buf, size_t n) {
  if (!SSL_is_init_finished(t->ssl)) return M0__TLS_FAILED;
  while (n > 0) {
    int r = SSL_write(t->ssl, buf, n > INT_MAX ? INT_MAX : (int)n);
    if (r <= 0) return (void)tls_result(t, r), M0__TLS_FAILED; /* a memory BIO never asks to wait */
    buf = (const char *)buf + r;
    n -= (size_t)r;
  }
  return 0;
}

int m0__tls_close_notify(m0__tls *t) {
  if (!SSL_is_init_finished(t->ssl)) return M0__TLS_FAILED;
  int r = SSL_shutdown(t->ssl);
  if (r < 0) return (void)tls_result(t, r), M0__TLS_FAILED;
  return 0;
}

size_t m0__tls_pending(const m0__tls *t) { return BIO_ctrl_pending(t->wbio); }

size_t m0__tls_take(m0__tls *t, void *buf, size_t cap) {
  int r = BIO_read(t->wbio, buf, cap > INT_MAX ? INT_MAX : (int)cap);
  tls_bio_trim(t, false);
  return r > 0 ? (size_t)r : 0;
}

bool m0__tls_buffered(const m0__tls *t) { return BIO_ctrl_pending(t->rbio) > 0 || SSL_has_pending(t->ssl); }
bool m0__tls_ready(const m0__tls *t) { return SSL_is_init_finished(t->ssl); }
bool m0__tls_resumed(const m0__tls *t) { return SSL_session_reused(t->ssl); }
const char *m0__tls_server_name(const m0__tls *t) { return SSL_get_servername(t->ssl, TLSEXT_NAMETYPE_host_name); }
const char *m0__tls_version(const m0__tls *t) { return SSL_get_version(t->ssl); }

const char *m0__tls_alpn(const m0__tls *t) {
  const unsigned char *p;
  unsigned n;
  SSL_get0_alpn_selected(t->ssl, &p, &n);
  if (n == 2 && memcmp(p, "h2", 2) == 0) return "h2";
  return n == 8 && memcmp(p, "http/1.1", 8) == 0 ? "http/1.1" : "";
}

const char *m0__tls_why(const m0__tls *t) {
  const char *r = t->err ? ERR_reason_error_string(t->err) : NULL;
  return r ? r : "the peer broke the protocol";
}
