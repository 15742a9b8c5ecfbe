/* libFuzzer: an HTTPS connection whole (http/tls_io.c over http/tls.c,
 * then http/conn.c, and http/h2*.c when ALPN says h2), as fuzz_conn drives
 * plain HTTP. One end of a socketpair is a real m0 connection with a TLS
 * context (a P-256 certificate the harness makes once) on a real libuv
 * loop; the harness is an OpenSSL client over memory BIOs on the other
 * end. The input's first byte chooses ALPN (none, http/1.1, h2 with
 * --http2) and whether records are tampered with; the rest is plaintext,
 * encrypted by the client, whose ciphertext is written in pieces the input
 * chooses (a record spans reads; the close_notify lands with the last
 * record), a byte of it flipped when tampering; then the client half-closes
 * and, past a bound of loop turns, the loop drains. Checked: the connection
 * ends; what the server wrote is TLS records back to back (RFC 8446 §5.1:
 * a content type, version 0x0303, a length within 2^14 + 256); and, on
 * HTTP/1.1, the plaintext the client reads starts with a status line. */
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "http/tls.h"
#include "tests/fuzz/fz_conn.h"

#define FZ_OUT (4u << 20)

/* Made once per run (libFuzzer's init): the server's context, h2 on and
 * off, and the client's. */
static struct {
  m0__tls_ctx *h1, *h2;
  SSL_CTX *client;
} fz;

/* A self-signed P-256 certificate and its key, into two files in dir. */
static void fz_make_cert(const char *crt, const char *key) {
  EVP_PKEY *k = EVP_EC_gen("P-256");
  X509 *x = X509_new();
  if (!k || !x) abort();
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), 86400);
  X509_set_pubkey(x, k);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1,
                             -1, 0);
  X509_set_issuer_name(x, X509_get_subject_name(x));
  if (!X509_sign(x, k, EVP_sha256())) abort();
  FILE *f = fopen(crt, "w"), *g = fopen(key, "w");
  if (!f || !g || !PEM_write_X509(f, x) || !PEM_write_PrivateKey(g, k, NULL, NULL, 0, NULL, NULL)) abort();
  fclose(f);
  fclose(g);
  X509_free(x);
  EVP_PKEY_free(k);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fz_ignore_sigpipe();
  char dir[] = "/tmp/m0-fuzz-tls-XXXXXX", crt[64], key[64], why[256];
  if (!mkdtemp(dir)) abort();
  snprintf(crt, sizeof crt, "%s/c.pem", dir);
  snprintf(key, sizeof key, "%s/k.pem", dir);
  fz_make_cert(crt, key);
  fz.h1 = m0__tls_ctx_new(crt, key, NULL, why, sizeof why);
  fz.h2 = m0__tls_ctx_new(crt, key, NULL, why, sizeof why);
  if (!fz.h1 || !fz.h2) abort();
  m0__tls_ctx_alpn_h2(fz.h2);
  unlink(crt);
  unlink(key);
  rmdir(dir);
  fz.client = SSL_CTX_new(TLS_client_method());
  if (!fz.client) abort();
  return 0;
}

/* A client over memory BIOs: cin takes what the server wrote, cout holds
 * what the client would send. */
typedef struct {
  SSL *ssl;
  BIO *cin, *cout;
  int fd;
  uint8_t *plain; /* what the client read, decrypted */
  size_t nplain;
  uint8_t *wire; /* every byte the server wrote */
  size_t nwire;
} fz_client;

/* Moves the server's bytes into the client and reads what it can. */
static void fz_pump_in(fz_client *c) {
  uint8_t buf[16384];
  ssize_t r;
  while ((r = read(c->fd, buf, sizeof buf)) > 0) {
    if (c->nwire + (size_t)r <= FZ_OUT) memcpy(c->wire + c->nwire, buf, (size_t)r);
    c->nwire += (size_t)r;
    BIO_write(c->cin, buf, (int)r);
  }
  int n;
  while (c->nplain < FZ_OUT && (n = SSL_read(c->ssl, c->plain + c->nplain, (int)(FZ_OUT - c->nplain))) > 0)
    c->nplain += (size_t)n;
}

/* The piece sizes: the input's bytes again, from the start, round and
 * round (they are also the plaintext). */
typedef struct {
  const uint8_t *p;
  size_t n, at;
} fz_pick;

static size_t fz_next(fz_pick *k, size_t mod) {
  uint8_t b = k->p[k->at++ % k->n];
  return 1 + b % mod;
}

static void fz_pump_client(void *arg) { fz_pump_in(arg); }

/* Writes the client's pending ciphertext in pieces k chooses, running the
 * loop after each; flips one byte when tamper says. */
static void fz_pump_out(fz_client *c, uv_loop_t *loop, fz_pick *k, bool tamper) {
  uint8_t buf[65536];
  int n = BIO_read(c->cout, buf, sizeof buf);
  if (n <= 0) return;
  if (tamper) buf[fz_next(k, (size_t)n) - 1] ^= 0x5a;
  for (int at = 0; at < n;) {
    int piece = (int)fz_next(k, 97);
    if (piece > n - at) piece = n - at;
    if (write(c->fd, buf + at, (size_t)piece) < 0) return;
    at += piece;
    uv_run(loop, UV_RUN_NOWAIT);
    fz_pump_in(c);
  }
}

/* The server's bytes: TLS records back to back. */
static void fz_check_records(const uint8_t *o, size_t n) {
  for (size_t at = 0; at < n;) {
    if (n - at < 5) abort();
    size_t len = (size_t)o[at + 3] << 8 | o[at + 4];
    if (o[at] < 20 || o[at] > 23 || o[at + 1] != 3 || len > 16384 + 256 || len > n - at - 5) abort();
    at += 5 + len;
  }
}

static void fz_session(m0__http *h, uv_loop_t *loop, fz_client *c, const uint8_t *data, size_t size) {
  uint8_t mode = data[0];
  static const unsigned char h11[] = "\x08http/1.1", h2[] = "\x02h2";
  if (mode % 3 == 1) SSL_set_alpn_protos(c->ssl, h11, sizeof h11 - 1);
  if (mode % 3 == 2) SSL_set_alpn_protos(c->ssl, h2, sizeof h2 - 1);
  bool tamper = mode & 0x80;
  fz_pick k = {data, size, 0};
  for (int turns = 0; turns < 200 && !SSL_is_init_finished(c->ssl); turns++) {
    SSL_do_handshake(c->ssl);
    fz_pump_out(c, loop, &k, false);
    uv_run(loop, UV_RUN_NOWAIT);
    fz_pump_in(c);
    if (h->nconns == 0) return;
  }
  /* The rest: plaintext in records of up to 256 bytes. */
  const uint8_t *at = data + 1, *end = data + size;
  while (at < end && h->nconns > 0) {
    size_t n = (size_t)(end - at) < 256 ? (size_t)(end - at) : 256;
    if (SSL_write(c->ssl, at, (int)n) <= 0) break;
    at += n;
    if (at >= end) SSL_shutdown(c->ssl); /* the close_notify with the last record */
    fz_pump_out(c, loop, &k, tamper);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) return 0;
  uv_loop_t loop;
  uv_loop_init(&loop);
  m0__http h;
  memset(&h, 0, sizeof h);
  bool h2 = data[0] % 3 == 2;
  m0__http_config cfg = fz_config();
  cfg.tls = h2 ? fz.h2 : fz.h1;
  cfg.http2 = h2;
  m0__http_init(&h, &loop, &cfg, &fz_ops, NULL);
  fz_client c = {.ssl = SSL_new(fz.client), .cin = BIO_new(BIO_s_mem()), .cout = BIO_new(BIO_s_mem()),
                 .fd = sv[1], .plain = malloc(FZ_OUT), .wire = malloc(FZ_OUT)};
  if (!c.ssl || !c.cin || !c.cout || !c.plain || !c.wire || m0__http_adopt(&h, sv[0], false) != 0) abort();
  SSL_set_bio(c.ssl, c.cin, c.cout);
  SSL_set_connect_state(c.ssl);
  fz_session(&h, &loop, &c, data, size);
  shutdown(sv[1], SHUT_WR);
  fz_until_gone(&h, &loop, fz_pump_client, &c);
  if (c.nwire <= FZ_OUT) fz_check_records(c.wire, c.nwire);
  if (!h2 && c.nplain && memcmp(c.plain, "HTTP/1.1 ", 9) != 0) abort();
  fz_end(&h, &loop);
  SSL_free(c.ssl);
  free(c.plain);
  free(c.wire);
  close(sv[1]);
  return 0;
}
