#include "base/num.h"

char *m0__put_uint(char *p, uint64_t v) {
  int n = 1; /* its digits, then written from the last: no copy through a buffer */
  for (uint64_t t = v; t >= 10; t /= 10) n++;
  for (int k = n - 1; k >= 0; k--, v /= 10) p[k] = (char)('0' + v % 10);
  return p + n;
}

void m0__le_put16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
void m0__le_put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
void m0__le_put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
uint16_t m0__le_get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
uint32_t m0__le_get32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}
uint64_t m0__le_get64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}
