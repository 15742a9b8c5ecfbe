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
#ifndef M0_ACTORS_ENVELOPE_H
#define M0_ACTORS_ENVELOPE_H

#include <stddef.h>
#include <stdint.h>

#define M0__ENV_MAGIC 0x3145306du /* "m0E1" */
#define M0__ENV_HEADER 44
#define M0__ENV_MAX_PAYLOAD (16u << 20)

typedef struct m0__env {
  uint16_t kind;
  uint32_t from;
  uint32_t to;
  uint64_t seq;
  uint64_t trace_hi;
  uint64_t trace_lo;
} m0__env;

/* Writes the header for `e` and a payload of `len` bytes into hdr. */
void m0__env_write(uint8_t hdr[M0__ENV_HEADER], const m0__env *e, uint32_t len);
/* Reads and validates a whole message of n bytes. Returns 0 and sets the
 * payload span, or M0__EBADMSG (bad magic, unknown kind, length mismatch). */
int m0__env_read(const uint8_t *buf, size_t n, m0__env *e, const uint8_t **payload, size_t *len);
/* The header alone (a trace record carries one): 0 and the payload length it
 * states, or M0__EBADMSG (bad magic, unknown kind, length over the limit). */
int m0__env_read_header(const uint8_t hdr[M0__ENV_HEADER], m0__env *e, uint32_t *len);

/* Little-endian fields, shared by the envelope and the trace records. */
void m0__le_put64(uint8_t *p, uint64_t v);
uint64_t m0__le_get64(const uint8_t *p);

/* Actor ids: the role in the top byte, an index below. */
enum m0__role { M0__ROLE_COORD = 1, M0__ROLE_LOOP = 2, M0__ROLE_POOL = 3, M0__ROLE_PRODUCER = 4,
                M0__ROLE_EXTERNAL = 5, M0__ROLE_WORKER = 6 };
#define M0__ACTOR_ID(role, index) (((uint32_t)(role) << 24) | ((uint32_t)(index) & 0xffffffu))
#define M0__ACTOR_ROLE(id) ((int)((id) >> 24))
#define M0__ACTOR_INDEX(id) ((int)((id) & 0xffffffu))
/* "coordinator", "loop.3", "pool.1.2", "producer", "external.7", "worker.1" */
void m0__actor_name(uint32_t id, char *out, size_t outlen);

#endif
