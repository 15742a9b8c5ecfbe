/* How an application actor's instance proves who it is over plain tcp: a
 * challenge and its answer, NATS-nkeys style, so no secret crosses the wire.
 *
 *   the actor's socket -> the instance   HELLO, payload: nonce (32 random bytes) || context
 *   the instance -> the actor's socket   HELLO, payload: HMAC-SHA256(secret, that whole payload) (32 bytes)
 *
 * context is "m0-instance-proof-1 " followed by the actor's name, so a proof
 * made for one actor (or by anything that is not an m0 instance) is no
 * proof for another. docs/wire.md (Proving who you are) is this for an
 * instance written in another language.
 *
 * Design notes
 * - The secret is bytes, used as the HMAC key as they are: a key file's
 *   one line of 16 to 4096 printable characters (its newline not
 *   included: what any language reads back the same), or, for the
 *   instances the host spawns, 64 hex digits it draws from getrandom at
 *   start and hands them in their environment (M0__ACTOR_SECRET), never on
 *   a command line. An outside instance names its key file in
 *   M0_ACTOR_SECRET_FILE.
 * - A key file must be a regular file of this user that neither group nor
 *   others may read or write (like ssh's private keys): a secret others can
 *   read proves nothing.
 * - Which links need it is the host's (service/service.h): plain tcp://,
 *   unless the topology says the network is trusted. ipc:// is the run
 *   directory's permissions; tls+tcp:// is the CA's certificate.
 */
#ifndef M0_RUNTIME_PROOF_H
#define M0_RUNTIME_PROOF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define M0__PROOF_NONCE 32
#define M0__PROOF_MAC 32
#define M0__PROOF_CONTEXT "m0-instance-proof-1 "
#define M0__SECRET_MIN 16
#define M0__SECRET_MAX 4096
/* A challenge: the nonce, the context's prefix and an actor's name. */
#define M0__CHALLENGE_MAX (M0__PROOF_NONCE + sizeof M0__PROOF_CONTEXT + 64)
/* How long a dialed instance has to answer its challenge before its
 * connection is closed (refused: proof). */
#define M0__PROOF_MS 3000

typedef struct m0__secret {
  uint8_t key[M0__SECRET_MAX];
  size_t len; /* 0: none */
} m0__secret;

/* Reads a key file (the rules above). 0, or M0__ECONFIG with the one-line
 * reason in why and its fix in fix. */
int m0__secret_read_file(const char *path, m0__secret *out, char *why, size_t whylen, char *fix, size_t fixlen);
/* A fresh secret for spawned instances: 64 hex digits from getrandom. 0 or
 * M0__ESYSTEM. */
int m0__secret_make(m0__secret *out);
/* The secret as given in an environment variable's value (printable, 16 to
 * 4096 bytes). 0 or M0__EINVALID. */
int m0__secret_from_text(const char *text, m0__secret *out);

/* Writes a fresh challenge for actor `actor` into out (M0__CHALLENGE_MAX
 * bytes): its length, or 0 when getrandom failed. */
size_t m0__proof_challenge(uint8_t *out, const char *actor);
/* The proof of challenge c (n bytes) under the secret: 0, or M0__EINVALID
 * (mbed TLS refused; nothing is a proof then). */
int m0__proof_answer(const m0__secret *s, const uint8_t *c, size_t n, uint8_t out[M0__PROOF_MAC]);
/* Whether proof (n bytes) answers challenge c under the secret (every byte
 * compared, whatever matched). */
bool m0__proof_check(const m0__secret *s, const uint8_t *c, size_t cn, const uint8_t *proof, size_t n);

#endif
