/* Numbers as bytes, shared by every layer: decimal digits written by hand
 * (snprintf costs ~1,700 instructions per number, and the response head, the
 * trace records and m0trace's lines write several per message), and the
 * explicit little-endian fields of the envelope and the trace records, which
 * cross threads, processes and machines alike. */
#ifndef M0_BASE_NUM_H
#define M0_BASE_NUM_H

#include <stdint.h>

/* Writes v in decimal at p (no terminator); returns the end. At most 20 bytes. */
char *m0__put_uint(char *p, uint64_t v);

void m0__le_put16(uint8_t *p, uint16_t v);
void m0__le_put32(uint8_t *p, uint32_t v);
void m0__le_put64(uint8_t *p, uint64_t v);
uint16_t m0__le_get16(const uint8_t *p);
uint32_t m0__le_get32(const uint8_t *p);
uint64_t m0__le_get64(const uint8_t *p);

#endif
