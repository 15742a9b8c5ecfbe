#include "actors/envelope.h"

#include <stdio.h>
#include <string.h>

#include "actors/errors.h"
#include "actors/kinds.h"
#include "http/response.h"

static void env_put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void env_put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
void m0__le_put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint16_t env_get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t env_get32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}
uint64_t m0__le_get64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

void m0__env_write(uint8_t hdr[M0__ENV_HEADER], const m0__env *e, uint32_t len) {
  env_put32(hdr + 0, M0__ENV_MAGIC);
  env_put16(hdr + 4, e->kind);
  env_put16(hdr + 6, 0);
  env_put32(hdr + 8, e->from);
  env_put32(hdr + 12, e->to);
  m0__le_put64(hdr + 16, e->seq);
  m0__le_put64(hdr + 24, e->trace_hi);
  m0__le_put64(hdr + 32, e->trace_lo);
  env_put32(hdr + 40, len);
}

int m0__env_read_header(const uint8_t hdr[M0__ENV_HEADER], m0__env *e, uint32_t *len) {
  if (env_get32(hdr) != M0__ENV_MAGIC) return M0__EBADMSG;
  uint16_t kind = env_get16(hdr + 4);
  uint32_t plen = env_get32(hdr + 40);
  if (kind == 0 || kind >= M0__KIND_COUNT_ || env_get16(hdr + 6) != 0 || plen > M0__ENV_MAX_PAYLOAD)
    return M0__EBADMSG;
  e->kind = kind;
  e->from = env_get32(hdr + 8);
  e->to = env_get32(hdr + 12);
  e->seq = m0__le_get64(hdr + 16);
  e->trace_hi = m0__le_get64(hdr + 24);
  e->trace_lo = m0__le_get64(hdr + 32);
  *len = plen;
  return 0;
}

int m0__env_read(const uint8_t *buf, size_t n, m0__env *e, const uint8_t **payload, size_t *len) {
  uint32_t plen;
  if (n < M0__ENV_HEADER || m0__env_read_header(buf, e, &plen) != 0) return M0__EBADMSG;
  if ((size_t)plen != n - M0__ENV_HEADER) return M0__EBADMSG;
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

/* By hand, not by snprintf: m0trace names two actors per record it prints
 * (~1,700 instructions each by snprintf). */
void m0__actor_name(uint32_t id, char *out, size_t outlen) {
  static const char *const roles[] = {[M0__ROLE_COORD] = "coordinator", [M0__ROLE_LOOP] = "loop",
                                      [M0__ROLE_POOL] = "pool", [M0__ROLE_PRODUCER] = "producer",
                                      [M0__ROLE_EXTERNAL] = "external", [M0__ROLE_WORKER] = "worker"};
  int role = M0__ACTOR_ROLE(id);
  unsigned idx = (unsigned)M0__ACTOR_INDEX(id);
  if (role < M0__ROLE_COORD || role > M0__ROLE_WORKER) {
    snprintf(out, outlen, "actor.%08x", (unsigned)id);
    return;
  }
  char b[48], *p = b;
  for (const char *r = roles[role]; *r;) *p++ = *r++;
  if (role == M0__ROLE_POOL) { /* pool.<loop>.<thread> */
    *p++ = '.';
    p = m0__put_uint(p, idx >> 12);
    *p++ = '.';
    p = m0__put_uint(p, idx & 0xfff);
  } else if (role != M0__ROLE_COORD && role != M0__ROLE_PRODUCER) {
    *p++ = '.';
    p = m0__put_uint(p, idx);
  }
  size_t n = (size_t)(p - b);
  if (outlen == 0) return;
  if (n >= outlen) n = outlen - 1;
  memcpy(out, b, n);
  out[n] = 0;
}
