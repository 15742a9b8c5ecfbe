#include "base/num.h"

#include <string.h>

static const char num_pairs[201] = /* "00" to "99": two digits a step */
    "0001020304050607080910111213141516171819"
    "2021222324252627282930313233343536373839"
    "4041424344454647484950515253545556575859"
    "6061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

char *m0__put_uint(char *p, uint64_t v) {
  int n = 1; /* its digits, then written from the last: no copy through a buffer */
  for (uint64_t t = v; t >= 10; t /= 10) n++;
  char *e = p + n;
  for (; v >= 100; v /= 100) {
    e -= 2;
    memcpy(e, num_pairs + 2 * (v % 100), 2);
  }
  if (v >= 10) memcpy(e - 2, num_pairs + 2 * v, 2);
  else e[-1] = (char)('0' + v);
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
