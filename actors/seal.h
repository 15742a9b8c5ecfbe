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
 *   tag: UMAC-64 (RFC 4418, nettle's) of header ‖ payload under the key,
 *   its nonce the stamp and pid. The header names kind, flags, from, to,
 *   seq, trace and length, so a seal proves exactly its message: a kind,
 *   an address, a byte or the stamp changed is a forgery. 64 bits are
 *   enough because a guess can only be tried online: each is one message
 *   the receiver refuses and counts, and one passes with a probability of
 *   about 2^-60. UMAC, not HMAC-SHA-256: bench/run_seal measured HMAC
 *   (mbed TLS) at +17 % on a bare 64-byte hop and +36 % at 1 KiB; UMAC
 *   hashes a byte in well under a cycle. Its one rule, a nonce never used
 *   twice with a key, holds by the stamp (below): strictly increasing in a
 *   process, and the pid tells processes apart.
 * - stamp: the sender's CLOCK_MONOTONIC in nanoseconds, strictly increasing
 *   within the process (an atomic maximum). Every sealer is a process of
 *   this host, spawned on this machine (a network peer is an instance, never
 *   sealed), so all stamps read one clock: a restarted sender (a respawned
 *   worker, a pid used again) stamps later than anything sent before it.
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
#ifndef M0_ACTORS_SEAL_H
#define M0_ACTORS_SEAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "actors/envelope.h"

#define M0__SEAL_TAG 8
#define M0__FRESH_WINDOW 4
#define M0__FRESH_STREAMS 64

/* The family's key for this process: made (the top process) or taken from
 * M0__COOKIE (a worker) before any actor starts. Until then nothing is
 * sealed, and only SELF and OUTSIDE exist. 0, or M0__ECONFIG (getrandom
 * failed; a worker whose M0__COOKIE is not 32 hex digits). inherit wipes
 * the digits it read (hex is the environment's own string). */
int m0__family_make(void);
int m0__family_inherit(char *hex);
/* "M0__COOKIE=<32 hex digits>" for a spawned worker's environment. */
void m0__family_env(char out[64]);
bool m0__family_known(void);
/* Seals the message msg (its header and payload, n bytes, the header's
 * flags already SEALED) into out. Thread safety: any thread. */
void m0__family_seal(const uint8_t *msg, size_t n, uint8_t out[M0__SEAL_LEN]);
/* The origin a seal proves for msg (n bytes before the seal): SELF (this
 * pid), FAMILY, or -1 (not this key's, or not this message's). Thread
 * safety: any thread. */
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
