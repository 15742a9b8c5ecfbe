/* The family's seal: what proves that a message was written, as it is, by
 * one of this host's processes, and that it is not one seen before.
 *
 * Design notes
 * - The key: 16 bytes from getrandom, made by the top process (each
 *   generation its own) and handed to the workers it spawns in their
 *   environment (M0__COOKIE: never argv, never a file; a process's
 *   environment is readable by its user and root only), where a worker
 *   wipes it once read. An application actor's instance never gets it, and
 *   the key never crosses a socket.
 * - The seal, the M0__SEAL_LEN (20) bytes after the payload:
 *     tag[8]  stamp u64  pid u32
 *   tag: ChaCha20-Poly1305 (RFC 8439, mbed TLS's mbedtls_chachapoly) with
 *   header ‖ payload as its additional data and nothing to encrypt, its
 *   12-byte nonce the stamp and pid as they stand in the seal, under a
 *   256-bit key made once from the family key (HMAC-SHA-256 of a label),
 *   the 16-byte tag cut to its first 8. The header names kind, flags, from,
 *   to, seq, trace and length, so a seal proves exactly its message: a
 *   kind, an address, a byte or the stamp changed is a forgery. 64 bits are
 *   enough because a guess can only be tried online: each is one message
 *   the receiver refuses and counts, and one passes with a probability of
 *   about 2^-64. Poly1305's key is new for every nonce (ChaCha20's first
 *   block), so refused guesses teach nothing about the next nonce's (unlike
 *   GMAC's one hash key per key, where a short tag loses strength with
 *   every forgery tried). Why this MAC: the project's crypto is mbed TLS's,
 *   and of what 2.28 and 3.6 both offer it is the cheapest from 1 KiB up
 *   and needs no context per thread (bench/run_seal's figures are in
 *   ARCHITECTURE's Admission; none of mbed TLS's MACs keeps the hop within
 *   3 % at 1 KiB).
 * - The nonce is never used twice under a key, which ChaCha20-Poly1305
 *   needs (a repeated nonce gives the two messages one Poly1305 key, and
 *   their tags give it away). A key lives one generation: its top process
 *   and the workers it spawns. Within a process the stamp is strictly
 *   increasing (below). Two living processes have two pids. A pid used
 *   again belongs to a process started after the first one ended, and the
 *   stamp is one clock for every process of the machine (CLOCK_MONOTONIC;
 *   a worker is forked and exec'd by the top process, so it shares its time
 *   namespace): the new process's first stamp is its clock at that moment,
 *   later than every stamp the old one gave. A stamp runs ahead of the
 *   clock only when sealers crowd one nanosecond (the atomic maximum adds
 *   1), by at most a few nanoseconds; an exit, a reap, a fork and an exec
 *   take far longer. The pid is read once, when the key is set, which is
 *   why a process of the host never forks without exec.
 * - Freshness, at the receiver (m0__fresh, one per mailbox, its thread's):
 *   per stream (sender pid, `from`), the M0__FRESH_WINDOW highest stamps
 *   taken. A stamp equal to one of them, or below their lowest once the
 *   window is full, is a replay; a later one overtaken by at most
 *   WINDOW - 1 others of its stream (two sockets of one sender) is still
 *   taken. A stream not seen before must be stamped after the table's
 *   floor: when the mailbox opened (a message sealed before that was for
 *   an earlier receiver at this address: a respawned worker is not told a
 *   STOP captured from its predecessor), raised to a stream's highest when
 *   the stream is dropped for a newer one (the table holds
 *   M0__FRESH_STREAMS).
 */
#ifndef M0_RUNTIME_SEAL_H
#define M0_RUNTIME_SEAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/envelope.h"

#define M0__SEAL_TAG 8
#define M0__FRESH_WINDOW 4
#define M0__FRESH_STREAMS 64

/* The family's key for this process: made (the top process) or taken from
 * M0__COOKIE (a worker) before any actor starts. Until then nothing is
 * sealed, and only SELF and OUTSIDE exist. 0, or M0__ECONFIG (getrandom
 * failed; a worker whose M0__COOKIE is not 32 hex digits; mbed TLS without
 * SHA-256 for the tag's key). inherit wipes the digits it read (hex is the
 * environment's own string). */
int m0__family_make(void);
int m0__family_inherit(char *hex);
/* "M0__COOKIE=<32 hex digits>" for a spawned worker's environment. */
void m0__family_env(char out[64]);
bool m0__family_known(void);
/* Seals the message msg (its header and payload, n bytes, the header's
 * flags already SEALED) into out. Thread safety: any thread. */
void m0__family_seal(const uint8_t *msg, size_t n, uint8_t out[M0__SEAL_LEN]);
/* Where a message comes from (runtime/admit.h: the admission table's
 * columns); a seal proves the first two. */
enum m0__origin { M0__ORIGIN_SELF = 0, M0__ORIGIN_FAMILY = 1, M0__ORIGIN_LOCAL = 2, M0__ORIGIN_OUTSIDE = 3 };

/* The origin a seal proves for msg (n bytes before the seal): SELF (this
 * pid), FAMILY, M0__EINVALID (no key known) or M0__EBADMSG (not this
 * key's, or not this message's). Thread safety: any thread. */
int m0__family_check(const uint8_t *msg, size_t n, const uint8_t seal[M0__SEAL_LEN]);
/* The sender's pid a seal names. */
uint32_t m0__seal_pid(const uint8_t seal[M0__SEAL_LEN]);

/* A mailbox's record of the stamps it took (design notes), kept in its
 * m0__actor. Thread safety: the mailbox's thread only. */
typedef struct m0__fresh_stream {
  uint64_t key;                      /* pid << 32 | from; 0: free */
  uint64_t top[M0__FRESH_WINDOW];    /* the highest stamps taken, unordered; 0: none yet */
} m0__fresh_stream;
typedef struct m0__fresh {
  uint64_t floor; /* a stream not seen must be stamped after it */
  int last;       /* the stream found last: a mailbox hears mostly one sender at a time */
  m0__fresh_stream s[M0__FRESH_STREAMS];
} m0__fresh;
/* Empty, its floor now. */
void m0__fresh_init(m0__fresh *f);
/* Whether a sealed message from `from` (its seal already checked) is new:
 * true, and it is recorded; false, a replay. */
bool m0__fresh_take(m0__fresh *f, uint32_t from, const uint8_t seal[M0__SEAL_LEN]);

#endif
