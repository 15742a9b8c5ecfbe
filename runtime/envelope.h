/* The one message envelope. Every actor message is a fixed 44-byte header in
 * little-endian order followed by the payload:
 *
 *   u32 magic  u16 kind  u16 flags  u32 from  u32 to  u64 seq
 *   u64 trace_hi  u64 trace_lo  u32 payload length
 *
 * The header is explicit bytes, not a struct, because the same envelope
 * crosses threads (inproc), processes (ipc) and machines (tcp). A message from
 * outside (m0pub, an embedding program) is validated like any other input.
 */
#ifndef M0_RUNTIME_ENVELOPE_H
#define M0_RUNTIME_ENVELOPE_H

#include <stddef.h>
#include <stdint.h>

#include "base/ids.h"
#include "base/num.h"

#define M0__ENV_MAGIC 0x3145306du /* "m0E1" */
#define M0__ENV_HEADER 44
#define M0__ENV_MAX_PAYLOAD (16u << 20)

/* flags: 0, or SEALED: the payload is followed by the family's seal
 * (M0__SEAL_LEN bytes), which the length does not count. */
#define M0__ENV_SEALED 1u
/* The seal: a tag (8 bytes), the sender's stamp (u64) and pid (u32); what
 * they prove is runtime/seal.h's. */
#define M0__SEAL_LEN 20

typedef struct m0__env {
  uint16_t kind;
  uint16_t flags;
  uint32_t from;
  uint32_t to;
  uint64_t seq;
  uint64_t trace_hi;
  uint64_t trace_lo;
} m0__env;

/* Writes the header for `e` and a payload of `len` bytes into hdr. */
void m0__env_write(uint8_t hdr[M0__ENV_HEADER], const m0__env *e, uint32_t len);
/* Reads and validates a whole message of n bytes. Returns 0 and sets the
 * payload span, or M0__EBADMSG (bad magic, unknown kind, flags other than 0
 * or SEALED, length mismatch). A sealed message's seal is the
 * M0__SEAL_LEN bytes after the payload span. */
int m0__env_read(const uint8_t *buf, size_t n, m0__env *e, const uint8_t **payload, size_t *len);
/* The header alone (a trace record carries one): 0 and the payload length it
 * states, or M0__EBADMSG (bad magic, unknown kind, length over the limit). */
int m0__env_read_header(const uint8_t hdr[M0__ENV_HEADER], m0__env *e, uint32_t *len);

#endif
