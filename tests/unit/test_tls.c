/* The TLS engine (http/tls.h) against OpenSSL's own client, through memory
 * BIOs, no socket: the handshake (1.3 and 1.2) and data both ways, ALPN
 * (http/1.1 chosen; a client offering only h2 refused), SNI choosing among
 * certificates, tickets resumed by another context of the same secret (as
 * another worker) and not by one of another secret, a TLS 1.2 client's
 * renegotiation refused, a key that does not
 * match its certificate refused naming the file, and bytes that are not TLS
 * failing the connection. The certificates are made here (P-256, self-signed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/tls.h"

static char dir[] = "/tmp/m0-test-tls-XXXXXX";
static char certs[256], keys[256], other_key[256];

static void write_pem(const char *path, X509 *x, EVP_PKEY *k) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_int_equal(x ? PEM_write_X509(f, x) : PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL), 1);
  fclose(f);
}

/* A self-signed certificate for name (and its key) as dir/<tag>.crt, .key. */
static void make_cert(const char *tag, const char *name) {
  EVP_PKEY *k = EVP_EC_gen("P-256");
  X509 *x = X509_new();
  assert_non_null(k);
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), -60);
  X509_gmtime_adj(X509_getm_notAfter(x), 86400);
  X509_set_pubkey(x, k);
  X509_NAME *n = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)name, -1, -1, 0);
  X509_set_issuer_name(x, n);
  char san[128];
  snprintf(san, sizeof san, "DNS:%s", name);
  X509V3_CTX v3;
  X509V3_set_ctx_nodb(&v3);
  X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
  X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, san);
  assert_non_null(e);
  X509_add_ext(x, e, -1);
  X509_EXTENSION_free(e);
  assert_true(X509_sign(x, k, EVP_sha256()) > 0);
  char p[200];
  snprintf(p, sizeof p, "%s/%s.crt", dir, tag);
  write_pem(p, x, NULL);
  snprintf(p, sizeof p, "%s/%s.key", dir, tag);
  write_pem(p, NULL, k);
  X509_free(x);
  EVP_PKEY_free(k);
}

static int setup(void **state) {
  assert_non_null(mkdtemp(dir));
  make_cert("a", "a.test");
  make_cert("b", "b.test");
  snprintf(certs, sizeof certs, "%s/a.crt,%s/b.crt", dir, dir);
  snprintf(keys, sizeof keys, "%s/a.key,%s/b.key", dir, dir);
  snprintf(other_key, sizeof other_key, "%s/b.key", dir);
  return 0;
}

static int teardown(void **state) {
  const char *names[] = {"a.crt", "a.key", "b.crt", "b.key"};
  char p[200];
  for (size_t i = 0; i < 4; i++) snprintf(p, sizeof p, "%s/%s", dir, names[i]), unlink(p);
  rmdir(dir);
  return 0;
}

/* OpenSSL's client over memory BIOs. */
typedef struct client {
  SSL_CTX *ctx;
  SSL *ssl;
  BIO *rbio, *wbio;
} client;

static void client_open(client *c, const char *sni, const unsigned char *alpn, unsigned alpn_len, int max_version,
                        SSL_SESSION *resume) {
  c->ctx = SSL_CTX_new(TLS_client_method());
  assert_non_null(c->ctx);
  if (max_version) SSL_CTX_set_max_proto_version(c->ctx, max_version);
  c->ssl = SSL_new(c->ctx);
  c->rbio = BIO_new(BIO_s_mem());
  c->wbio = BIO_new(BIO_s_mem());
  BIO_set_mem_eof_return(c->rbio, -1);
  SSL_set_bio(c->ssl, c->rbio, c->wbio);
  SSL_set_connect_state(c->ssl);
  if (sni) SSL_set_tlsext_host_name(c->ssl, sni);
  if (alpn) assert_int_equal(SSL_set_alpn_protos(c->ssl, alpn, alpn_len), 0);
  if (resume) assert_int_equal(SSL_set_session(c->ssl, resume), 1);
}

/* Closed as after a close_notify: OpenSSL makes a session it sees freed
 * mid-connection unresumable. */
static void client_close(client *c) {
  SSL_set_shutdown(c->ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
  SSL_free(c->ssl);
  SSL_CTX_free(c->ctx);
}

/* Moves bytes both ways until both ends are done (or stuck: 50 turns).
 * Returns the server's last m0__tls_read result. */
static long pump(client *c, m0__tls *s) {
  char buf[16384];
  long last = 0;
  for (int turn = 0; turn < 50; turn++) {
    int cr = SSL_do_handshake(c->ssl);
    if (cr == 1) (void)SSL_read(c->ssl, buf, sizeof buf); /* takes the tickets */
    int n;
    while ((n = BIO_read(c->wbio, buf, sizeof buf)) > 0) assert_int_equal(m0__tls_in(s, buf, (size_t)n), 0);
    last = m0__tls_read(s, buf, sizeof buf);
    size_t k;
    while ((k = m0__tls_take(s, buf, sizeof buf)) > 0) BIO_write(c->rbio, buf, (int)k);
    if (last == M0__TLS_FAILED) return last;
    if (cr == 1 && m0__tls_ready(s) && BIO_ctrl_pending(c->rbio) == 0 && BIO_ctrl_pending(c->wbio) == 0) break;
  }
  ERR_clear_error();
  return last;
}

static const unsigned char alpn_both[] = "\x02h2\x08http/1.1";

static void test_handshake_and_data(void **state) {
  char why[512];
  m0__tls_ctx *x = m0__tls_ctx_new(certs, keys, NULL, why, sizeof why);
  assert_non_null(x);
  for (int v = 0; v < 2; v++) {
    m0__tls *s = m0__tls_new(x);
    client c;
    client_open(&c, "a.test", alpn_both, sizeof alpn_both - 1, v ? TLS1_2_VERSION : 0, NULL);
    assert_int_equal(pump(&c, s), M0__TLS_AGAIN);
    assert_true(m0__tls_ready(s));
    assert_string_equal(m0__tls_version(s), v ? "TLSv1.2" : "TLSv1.3");
    assert_string_equal(m0__tls_alpn(s), "http/1.1");
    if (v) assert_non_null(strstr(SSL_get_cipher_name(c.ssl), "ECDHE"));
    /* client -> server */
    assert_int_equal(SSL_write(c.ssl, "GET / HTTP/1.1\r\n\r\n", 18), 18);
    char buf[4096];
    int n = BIO_read(c.wbio, buf, sizeof buf);
    assert_true(n > 18);
    assert_int_equal(m0__tls_in(s, buf, (size_t)n), 0);
    assert_int_equal(m0__tls_read(s, buf, sizeof buf), 18);
    assert_memory_equal(buf, "GET / HTTP/1.1\r\n\r\n", 18);
    assert_int_equal(m0__tls_read(s, buf, sizeof buf), M0__TLS_AGAIN);
    /* server -> client, then the close_notify */
    assert_int_equal(m0__tls_write(s, "HTTP/1.1 200 OK\r\n", 17), 0);
    assert_int_equal(m0__tls_close_notify(s), 0);
    size_t k = m0__tls_take(s, buf, sizeof buf);
    assert_true(k > 17);
    assert_int_equal(m0__tls_pending(s), 0);
    BIO_write(c.rbio, buf, (int)k);
    assert_int_equal(SSL_read(c.ssl, buf, sizeof buf), 17);
    assert_memory_equal(buf, "HTTP/1.1 200 OK\r\n", 17);
    assert_int_equal(SSL_read(c.ssl, buf, sizeof buf), 0);
    assert_int_equal(SSL_get_error(c.ssl, 0), SSL_ERROR_ZERO_RETURN);
    client_close(&c);
    m0__tls_free(s);
  }
  m0__tls_ctx_free(x);
}

static void test_alpn_h2_only_refused(void **state) {
  char why[512];
  m0__tls_ctx *x = m0__tls_ctx_new(certs, keys, NULL, why, sizeof why);
  m0__tls *s = m0__tls_new(x);
  client c;
  client_open(&c, NULL, (const unsigned char *)"\x02h2", 3, 0, NULL);
  assert_int_equal(pump(&c, s), M0__TLS_FAILED);
  assert_false(m0__tls_ready(s));
  client_close(&c);
  m0__tls_free(s);
  /* no ALPN at all is served (curl --no-alpn, old clients) */
  s = m0__tls_new(x);
  client_open(&c, NULL, NULL, 0, 0, NULL);
  assert_int_equal(pump(&c, s), M0__TLS_AGAIN);
  assert_true(m0__tls_ready(s));
  assert_string_equal(m0__tls_alpn(s), "");
  client_close(&c);
  m0__tls_free(s);
  m0__tls_ctx_free(x);
}

/* The certificate the client got names `name`. */
static void assert_peer(client *c, const char *name) {
  X509 *peer = SSL_get1_peer_certificate(c->ssl);
  assert_non_null(peer);
  assert_int_equal(X509_check_host(peer, name, 0, 0, NULL), 1);
  X509_free(peer);
}

static void test_sni(void **state) {
  char why[512];
  m0__tls_ctx *x = m0__tls_ctx_new(certs, keys, NULL, why, sizeof why);
  const char *ask[] = {"b.test", "a.test", "c.test", NULL};
  const char *got[] = {"b.test", "a.test", "a.test", "a.test"};
  for (int i = 0; i < 4; i++) {
    m0__tls *s = m0__tls_new(x);
    client c;
    client_open(&c, ask[i], NULL, 0, 0, NULL);
    assert_int_equal(pump(&c, s), M0__TLS_AGAIN);
    assert_peer(&c, got[i]);
    if (ask[i]) assert_string_equal(m0__tls_server_name(s), ask[i]);
    client_close(&c);
    m0__tls_free(s);
  }
  m0__tls_ctx_free(x);
}

/* A full handshake against one context, then a resumption against
 * another: resumed when it has the same secret. */
static bool resumed_across(const uint8_t *s1, const uint8_t *s2, int version) {
  char why[512];
  m0__tls_ctx *x1 = m0__tls_ctx_new(certs, keys, s1, why, sizeof why), *x2 = m0__tls_ctx_new(certs, keys, s2, why, sizeof why);
  assert_non_null(x1);
  assert_non_null(x2);
  m0__tls *s = m0__tls_new(x1);
  client c;
  client_open(&c, "a.test", NULL, 0, version, NULL);
  assert_int_equal(pump(&c, s), M0__TLS_AGAIN);
  assert_false(m0__tls_resumed(s));
  SSL_SESSION *sess = SSL_get1_session(c.ssl);
  assert_non_null(sess);
  assert_true(SSL_SESSION_is_resumable(sess));
  client_close(&c);
  m0__tls_free(s);
  s = m0__tls_new(x2);
  client_open(&c, "a.test", NULL, 0, version, sess);
  assert_int_equal(pump(&c, s), M0__TLS_AGAIN);
  bool r = m0__tls_resumed(s);
  assert_int_equal(r, SSL_session_reused(c.ssl));
  client_close(&c);
  m0__tls_free(s);
  SSL_SESSION_free(sess);
  m0__tls_ctx_free(x1);
  m0__tls_ctx_free(x2);
  return r;
}

static void test_tickets_shared_by_secret(void **state) {
  uint8_t one[M0__TLS_SECRET_BYTES], two[M0__TLS_SECRET_BYTES], back[M0__TLS_SECRET_BYTES];
  char hex[2 * M0__TLS_SECRET_BYTES + 1];
  assert_int_equal(m0__tls_secret_make(one), 0);
  assert_int_equal(m0__tls_secret_make(two), 0);
  m0__tls_secret_hex(one, hex);
  assert_true(m0__tls_secret_parse(hex, back));
  assert_memory_equal(one, back, sizeof one);
  assert_false(m0__tls_secret_parse("00zz", back));
  for (int v = 1; v >= 0; v--) {
    int version = v ? TLS1_2_VERSION : 0;
    assert_true(resumed_across(one, back, version));
    assert_false(resumed_across(one, two, version));
  }
}

/* A TLS 1.2 client that asks to renegotiate is refused: its request gets
 * the no_renegotiation alert and the connection goes on unchanged (or
 * fails): never a second handshake. */
static void test_no_renegotiation(void **state) {
  char why[512], buf[256];
  m0__tls_ctx *x = m0__tls_ctx_new(certs, keys, NULL, why, sizeof why);
  m0__tls *s = m0__tls_new(x);
  client c;
  client_open(&c, "a.test", NULL, 0, TLS1_2_VERSION, NULL);
  assert_int_equal(pump(&c, s), M0__TLS_AGAIN);
  assert_int_equal(SSL_renegotiate(c.ssl), 1);
  for (int turn = 0; turn < 10; turn++) { /* as far as both ends take it */
    (void)SSL_do_handshake(c.ssl);
    int n;
    while ((n = BIO_read(c.wbio, buf, sizeof buf)) > 0) assert_int_equal(m0__tls_in(s, buf, (size_t)n), 0);
    if (m0__tls_read(s, buf, sizeof buf) == M0__TLS_FAILED) break;
    size_t k;
    while ((k = m0__tls_take(s, buf, sizeof buf)) > 0) BIO_write(c.rbio, buf, (int)k);
  }
  assert_int_equal(SSL_renegotiate_pending(c.ssl), 1); /* never done */
  ERR_clear_error();
  client_close(&c);
  m0__tls_free(s);
  m0__tls_ctx_free(x);
}

static void test_refusals(void **state) {
  char why[512], c1[256], missing[256];
  snprintf(c1, sizeof c1, "%s/a.crt", dir);
  assert_null(m0__tls_ctx_new(c1, other_key, NULL, why, sizeof why));
  assert_non_null(strstr(why, other_key));
  assert_non_null(strstr(why, "does not match"));
  snprintf(missing, sizeof missing, "%s/none.crt", dir);
  assert_null(m0__tls_ctx_new(missing, other_key, NULL, why, sizeof why));
  assert_non_null(strstr(why, missing));
  char one_key[256];
  snprintf(one_key, sizeof one_key, "%s/a.key", dir);
  assert_null(m0__tls_ctx_new(certs, one_key, NULL, why, sizeof why)); /* two certificates, one key */
  assert_non_null(strstr(why, "no key file"));
  assert_null(m0__tls_ctx_new("", "", NULL, why, sizeof why));
}

static void test_not_tls(void **state) {
  char why[512], buf[256];
  m0__tls_ctx *x = m0__tls_ctx_new(certs, keys, NULL, why, sizeof why);
  m0__tls *s = m0__tls_new(x);
  const char *plain = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  assert_int_equal(m0__tls_in(s, plain, strlen(plain)), 0);
  assert_int_equal(m0__tls_read(s, buf, sizeof buf), M0__TLS_FAILED);
  assert_non_null(m0__tls_why(s));
  assert_int_equal(m0__tls_write(s, "x", 1), M0__TLS_FAILED);
  m0__tls_free(s);
  m0__tls_ctx_free(x);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_handshake_and_data), cmocka_unit_test(test_alpn_h2_only_refused),
      cmocka_unit_test(test_sni),                cmocka_unit_test(test_tickets_shared_by_secret),
      cmocka_unit_test(test_no_renegotiation),   cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_not_tls),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
