/* TLS for HTTP listeners (OpenSSL 3): the engine, with no socket of its own.
 * A context (m0__tls_ctx) is one set of certificates, built once per
 * process and shared by its loops (an SSL_CTX is thread-safe once built);
 * a connection's m0__tls is an SSL over two memory BIOs: the ciphertext the
 * socket read goes in (m0__tls_in), the plaintext for the parser comes out
 * (m0__tls_read); the plaintext the writer makes goes in (m0__tls_write),
 * the ciphertext for the socket comes out (m0__tls_take). What moves the
 * bytes to and from the socket (http/io.h) is not this file's business.
 *
 * Defaults: TLS 1.2 and 1.3 only, 1.2 with ECDHE and AEAD suites only
 * (Mozilla's "intermediate"), no renegotiation, no compression, ALPN
 * http/1.1 (a client that offers only other protocols is refused with
 * no_application_protocol, as nginx does), SNI choosing among the
 * certificates by their names (the first is the default), session tickets
 * whose keys every process of the host derives from one secret
 * (m0__tls_ticket_secret) and the hour: rotated hourly, the previous hour's
 * still accepted, so every loop and worker resumes every other's sessions.
 *
 * Thread safety: a context is made and freed by one thread, used by any
 * number at once; an m0__tls belongs to its connection's loop. */
#ifndef M0_HTTP_TLS_H
#define M0_HTTP_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct m0__tls_ctx m0__tls_ctx;
typedef struct m0__tls m0__tls;

/* The most certificates a context holds (SNI). */
#define M0__TLS_CERTS_MAX 16
/* The bytes of the secret the ticket keys are derived from. */
#define M0__TLS_SECRET_BYTES 32

/* One certificate chain (the leaf first) and its key as PEM text, not
 * NUL-ended, with the names a refusal gives them (the files they were read
 * from). */
typedef struct m0__tls_pem {
  const char *cert_name, *key_name;
  const char *cert, *key;
  size_t cert_len, key_len;
  const char *ocsp; /* a DER OCSP response for the leaf, stapled when a client asks; ocsp_len 0: none */
  size_t ocsp_len;
} m0__tls_pem;
/* The most bytes a certificate or key file holds. */
#define M0__TLS_PEM_MAX (1 << 20)

/* Builds a context from n pairs of PEM text (SNI: the first is the
 * default); reads no file. secret (32 bytes) keys the session tickets;
 * NULL: a fresh random one (tickets then resume only within this process).
 * Returns the context, or NULL with "<name>: <what is wrong>" in why. */
m0__tls_ctx *m0__tls_ctx_new_pem(const m0__tls_pem *pem, int n, const uint8_t *secret, char *why, size_t whylen);
/* The same from certfiles and keyfiles, comma-separated lists of PEM files
 * paired in order, read here (the host's loops use the text its check read:
 * config/certs.h). */
m0__tls_ctx *m0__tls_ctx_new(const char *certfiles, const char *keyfiles, const uint8_t *secret, char *why,
                             size_t whylen);
void m0__tls_ctx_free(m0__tls_ctx *x);
/* ALPN offers h2 before http/1.1 (--http2: the client then sends HTTP/2's
 * preface, http/h2.h). Before the context is shared. */
void m0__tls_ctx_alpn_h2(m0__tls_ctx *x);
/* The next file of a comma-separated list *list into out (cut to n - 1
 * bytes), *list moved past it; false at the end. */
bool m0__tls_next_file(const char **list, char *out, size_t n);
/* The secret x's ticket keys are derived from, into out. */
void m0__tls_ctx_secret(const m0__tls_ctx *x, uint8_t out[M0__TLS_SECRET_BYTES]);
/* Fills out with a fresh random secret (0, or M0__ESYSTEM). */
int m0__tls_secret_make(uint8_t out[M0__TLS_SECRET_BYTES]);
/* The secret as 64 hex digits (out: 65 bytes) and back (false: not that). */
void m0__tls_secret_hex(const uint8_t s[M0__TLS_SECRET_BYTES], char out[2 * M0__TLS_SECRET_BYTES + 1]);
bool m0__tls_secret_parse(const char *hex, uint8_t out[M0__TLS_SECRET_BYTES]);

/* A connection's engine, or NULL (no memory). */
m0__tls *m0__tls_new(m0__tls_ctx *x);
void m0__tls_free(m0__tls *t);

/* What m0__tls_read and m0__tls_in say besides a count. */
enum { M0__TLS_AGAIN = 0, M0__TLS_EOF = -1, M0__TLS_FAILED = -2 };

/* Takes n bytes of ciphertext from the socket. 0, or M0__ENOMEM. */
int m0__tls_in(m0__tls *t, const void *buf, size_t n);
/* Runs the handshake as far as the input allows and decrypts into buf:
 * the plaintext bytes (> 0), M0__TLS_AGAIN (nothing more now: read the
 * socket, after writing what m0__tls_take has), M0__TLS_EOF (the peer's
 * close_notify) or M0__TLS_FAILED (a protocol error: an alert may wait in
 * m0__tls_take; write it, then close). */
long m0__tls_read(m0__tls *t, void *buf, size_t cap);
/* Encrypts n bytes of plaintext into the output. 0, or M0__TLS_FAILED
 * (before the handshake ended, or the connection failed). */
int m0__tls_write(m0__tls *t, const void *buf, size_t n);
/* Queues a close_notify into the output (0, or M0__TLS_FAILED). */
int m0__tls_close_notify(m0__tls *t);
/* Ciphertext waiting for the socket. */
size_t m0__tls_pending(const m0__tls *t);
/* Moves up to cap bytes of it into buf; returns how many. */
size_t m0__tls_take(m0__tls *t, void *buf, size_t cap);

/* The connection waits for its next request: the record buffers go
 * (about 34 KB; OpenSSL makes them again at the next record, and keeps
 * them while one is part read). Freeing them after every record instead
 * (SSL_MODE_RELEASE_BUFFERS) cost 5,600 instructions a keep-alive request. */
void m0__tls_rest(m0__tls *t);
/* Input taken but not yet read out (ciphertext or plaintext). */
bool m0__tls_buffered(const m0__tls *t);
bool m0__tls_ready(const m0__tls *t); /* the handshake is done */
bool m0__tls_resumed(const m0__tls *t);
/* The name the client asked for (SNI), or NULL; the protocol ALPN chose, or "". */
const char *m0__tls_server_name(const m0__tls *t);
const char *m0__tls_alpn(const m0__tls *t);
/* "TLSv1.3", "TLSv1.2". */
const char *m0__tls_version(const m0__tls *t);
/* Why the last M0__TLS_FAILED (OpenSSL's reason), for the log. */
const char *m0__tls_why(const m0__tls *t);

#endif
