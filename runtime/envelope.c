#include "runtime/envelope.h"

#include <stdio.h>
#include <string.h>

#include "base/errors.h"
#include "runtime/kinds.h"
#include "base/num.h"

void m0__env_write(uint8_t hdr[M0__ENV_HEADER], const m0__env *e, uint32_t len) {
  m0__le_put32(hdr + 0, M0__ENV_MAGIC);
  m0__le_put16(hdr + 4, e->kind);
  m0__le_put16(hdr + 6, e->flags);
  m0__le_put32(hdr + 8, e->from);
  m0__le_put32(hdr + 12, e->to);
  m0__le_put64(hdr + 16, e->seq);
  m0__le_put64(hdr + 24, e->trace_hi);
  m0__le_put64(hdr + 32, e->trace_lo);
  m0__le_put32(hdr + 40, len);
}

int m0__env_read_header(const uint8_t hdr[M0__ENV_HEADER], m0__env *e, uint32_t *len) {
  if (m0__le_get32(hdr) != M0__ENV_MAGIC) return M0__EBADMSG;
  uint16_t kind = m0__le_get16(hdr + 4);
  uint32_t plen = m0__le_get32(hdr + 40);
  uint16_t flags = m0__le_get16(hdr + 6);
  if (kind == 0 || kind >= M0__KIND_COUNT_ || (flags & ~M0__ENV_SEALED) || plen > M0__ENV_MAX_PAYLOAD)
    return M0__EBADMSG;
  e->kind = kind;
  e->flags = flags;
  e->from = m0__le_get32(hdr + 8);
  e->to = m0__le_get32(hdr + 12);
  e->seq = m0__le_get64(hdr + 16);
  e->trace_hi = m0__le_get64(hdr + 24);
  e->trace_lo = m0__le_get64(hdr + 32);
  *len = plen;
  return 0;
}

int m0__env_read(const uint8_t *buf, size_t n, m0__env *e, const uint8_t **payload, size_t *len) {
  uint32_t plen;
  if (n < M0__ENV_HEADER || m0__env_read_header(buf, e, &plen) != 0) return M0__EBADMSG;
  size_t trailer = (e->flags & M0__ENV_SEALED) ? M0__SEAL_LEN : 0;
  if ((size_t)plen + trailer != n - M0__ENV_HEADER) return M0__EBADMSG;
  *payload = buf + M0__ENV_HEADER;
  *len = plen;
  return 0;
}

const char *m0__kind_name(int kind) {
  switch (kind) {
#define M0__KIND_CASE(name, text) case M0__K_##name: return text;
    M0__KINDS(M0__KIND_CASE)
#undef M0__KIND_CASE
  default: return "?";
  }
}
