/* Eight bytes at a time, for the checks every request's bytes go through
 * (the head's line ends, a header value's control bytes): most bytes pass,
 * so a word that holds none of the bytes looked for is skipped in a few
 * instructions, and only a word that holds one is looked at byte by byte.
 *
 * Design notes
 * - m0__bytes_below(x, n) sets bit 7 of each byte of x below n (n <= 128)
 *   (the classic "hasless" of Hacker's Delight / Bit Twiddling Hacks):
 *   whether it is zero is exact; a borrow may also flag the byte just above
 *   a flagged one, never one below, so its lowest flag is a true one.
 * - m0__bytes_first gives that lowest flag's byte on a little-endian machine;
 *   elsewhere the callers look at the word's bytes one by one.
 * - Loads are memcpy (unaligned, no aliasing question); callers never load
 *   past the bytes they were given.
 */
#ifndef M0_HTTP_BYTES_H
#define M0_HTTP_BYTES_H

/* A byte table's letters and digits, set to 1: the part every table of
 * allowed bytes shares (a token's, a host's). */
#define M0__ALNUM_ONES                                                                                              \
  ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1,     \
  ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1, ['i'] = 1, ['j'] = 1,     \
  ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1,     \
  ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1, ['y'] = 1, ['z'] = 1, ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1,     \
  ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1, ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1,     \
  ['O'] = 1, ['P'] = 1, ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1,     \
  ['Y'] = 1, ['Z'] = 1

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define M0__BYTES_ONES UINT64_C(0x0101010101010101)
#define M0__BYTES_HIGHS UINT64_C(0x8080808080808080)

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define M0__BYTES_LE 1
#else
#define M0__BYTES_LE 0
#endif

static inline uint64_t m0__bytes_load(const char *s) {
  uint64_t x;
  memcpy(&x, s, sizeof x);
  return x;
}

/* Bit 7 of each byte below n (n <= 128); see the notes. */
static inline uint64_t m0__bytes_below(uint64_t x, unsigned n) {
  return (x - M0__BYTES_ONES * n) & ~x & M0__BYTES_HIGHS;
}

/* Bit 7 of each byte equal to b (exact in whether any is). */
static inline uint64_t m0__bytes_eq(uint64_t x, unsigned b) {
  uint64_t y = x ^ (M0__BYTES_ONES * b);
  return (y - M0__BYTES_ONES) & ~y & M0__BYTES_HIGHS;
}

#if M0__BYTES_LE
/* The index of the lowest flagged byte of a non-zero mask (little-endian). */
static inline unsigned m0__bytes_first(uint64_t m) { return (unsigned)__builtin_ctzll(m) >> 3; }
#endif

#endif
