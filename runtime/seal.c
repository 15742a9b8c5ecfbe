#include "runtime/seal.h"

#include <mbedtls/chachapoly.h>
#include <mbedtls/md.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "base/errors.h"
#include "base/num.h"

/* The process's key and the ChaCha20 key made from it once (design notes):
 * written before any actor starts, read only after. The last stamp is the
 * one word every sealing thread writes. */
static struct {
  uint8_t key[16];
  uint8_t tag_key[32];
  bool known;
  uint32_t pid; /* getpid() is a system call; a process of the host never forks without exec */
  _Atomic uint64_t last_stamp;
} seal_fam;

/* The label that keeps the tag's key apart from any other use of the family
 * key (M0__COOKIE is the only other). */
static const char seal_label[] = "m0 seal: ChaCha20-Poly1305 key";

static int seal_keyed(void) {
  const mbedtls_md_info_t *sha256 = mbedtls_md_info_from_type(MBEDTLS_MD_SHA256);
  if (!sha256 || mbedtls_md_hmac(sha256, seal_fam.key, sizeof seal_fam.key, (const unsigned char *)seal_label,
                                 sizeof seal_label - 1, seal_fam.tag_key) != 0)
    return M0__ECONFIG;
  seal_fam.known = true;
  seal_fam.pid = (uint32_t)getpid();
  return 0;
}

int m0__family_make(void) {
  size_t got = 0;
  while (got < sizeof seal_fam.key) {
    ssize_t n = getrandom(seal_fam.key + got, sizeof seal_fam.key - got, 0);
    if (n <= 0) return M0__ECONFIG;
    got += (size_t)n;
  }
  return seal_keyed();
}

int m0__family_inherit(char *hex) {
  if (!hex || strlen(hex) != 2 * sizeof seal_fam.key) return M0__ECONFIG;
  for (size_t i = 0; i < sizeof seal_fam.key; i++) {
    unsigned v;
    if (sscanf(hex + 2 * i, "%2x", &v) != 1) return M0__ECONFIG;
    seal_fam.key[i] = (uint8_t)v;
  }
  /* Wiped where it was read: /proc/PID/environ shows this memory. */
  memset(hex, '0', 2 * sizeof seal_fam.key);
  return seal_keyed();
}

void m0__family_env(char out[64]) {
  int n = snprintf(out, 64, "M0__COOKIE=");
  for (size_t i = 0; i < sizeof seal_fam.key; i++) n += snprintf(out + n, (size_t)(64 - n), "%02x", seal_fam.key[i]);
}

bool m0__family_known(void) { return seal_fam.known; }

uint32_t m0__seal_pid(const uint8_t seal[M0__SEAL_LEN]) { return m0__le_get32(seal + M0__SEAL_TAG + 8); }

/* Later than every stamp this process gave before, on any thread. */
static uint64_t seal_stamp(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  uint64_t last = atomic_load_explicit(&seal_fam.last_stamp, memory_order_relaxed);
  do {
    if (now <= last) now = last + 1;
  } while (!atomic_compare_exchange_weak_explicit(&seal_fam.last_stamp, &last, now, memory_order_relaxed,
                                                  memory_order_relaxed));
  return now;
}

/* The tag of msg under the seal's stamp and pid (its last 12 bytes), which
 * are the nonce: never the same twice for one key (design notes), and bound
 * to the tag as a nonce is (another gives another tag). ChaCha20 has no key
 * schedule (its key is its first state words), so a context set up on the
 * stack per call is the reentrant one: any thread may seal. false: mbed TLS
 * refused (never, with these arguments), and no tag is written. */
static bool seal_tag(const uint8_t *msg, size_t n, const uint8_t *stamp_pid, uint8_t tag[M0__SEAL_TAG]) {
  uint8_t full[16];
  mbedtls_chachapoly_context c;
  mbedtls_chachapoly_init(&c);
  bool ok = mbedtls_chachapoly_setkey(&c, seal_fam.tag_key) == 0 &&
            mbedtls_chachapoly_encrypt_and_tag(&c, 0, stamp_pid, msg, n, NULL, NULL, full) == 0;
  mbedtls_chachapoly_free(&c);
  if (ok) memcpy(tag, full, M0__SEAL_TAG);
  return ok;
}

void m0__family_seal(const uint8_t *msg, size_t n, uint8_t out[M0__SEAL_LEN]) {
  m0__le_put64(out + M0__SEAL_TAG, seal_stamp());
  m0__le_put32(out + M0__SEAL_TAG + 8, seal_fam.pid);
  if (!seal_tag(msg, n, out + M0__SEAL_TAG, out)) memset(out, 0, M0__SEAL_TAG); /* refused where it arrives */
}

int m0__family_check(const uint8_t *msg, size_t n, const uint8_t seal[M0__SEAL_LEN]) {
  if (!seal_fam.known) return M0__EINVALID;
  uint8_t tag[M0__SEAL_TAG];
  if (!seal_tag(msg, n, seal + M0__SEAL_TAG, tag)) return M0__EBADMSG;
  /* Every byte is compared, so the time taken says nothing of how many
   * matched. */
  unsigned diff = 0;
  for (size_t i = 0; i < sizeof tag; i++) diff |= tag[i] ^ seal[i];
  if (diff) return M0__EBADMSG;
  return m0__seal_pid(seal) == seal_fam.pid ? M0__ORIGIN_SELF : M0__ORIGIN_FAMILY;
}

/* ---- freshness ---- */

void m0__fresh_init(m0__fresh *f) {
  memset(f, 0, sizeof *f);
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  f->floor = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t fresh_high(const m0__fresh_stream *s) {
  uint64_t h = 0;
  for (int i = 0; i < M0__FRESH_WINDOW; i++)
    if (s->top[i] > h) h = s->top[i];
  return h;
}

/* The stream of `key`, or a new one in a free slot or in place of the one
 * heard from longest ago (the floor rises to its highest). */
static m0__fresh_stream *fresh_stream_of(m0__fresh *f, uint64_t key) {
  if (f->s[f->last].key == key) return &f->s[f->last];
  int free_at = -1, oldest = 0;
  for (int i = 0; i < M0__FRESH_STREAMS; i++) {
    if (f->s[i].key == key) return &f->s[f->last = i];
    if (!f->s[i].key) {
      if (free_at < 0) free_at = i;
    } else if (fresh_high(&f->s[i]) < fresh_high(&f->s[oldest])) {
      oldest = i;
    }
  }
  int at = free_at;
  if (at < 0) {
    at = oldest;
    uint64_t h = fresh_high(&f->s[at]);
    if (h > f->floor) f->floor = h;
  }
  memset(&f->s[at], 0, sizeof f->s[at]);
  f->s[at].key = key;
  return &f->s[f->last = at];
}

bool m0__fresh_take(m0__fresh *f, uint32_t from, const uint8_t seal[M0__SEAL_LEN]) {
  uint64_t stamp = m0__le_get64(seal + M0__SEAL_TAG);
  uint64_t key = (uint64_t)m0__seal_pid(seal) << 32 | from;
  if (!key) key = 1; /* pid 0 never seals; kept apart from a free slot all the same */
  m0__fresh_stream *s = fresh_stream_of(f, key);
  /* The lowest of the window (the floor while the window has room): a
   * stamp at or below it, or equal to one taken, was seen or is too old. */
  int low = 0;
  for (int i = 0; i < M0__FRESH_WINDOW; i++) {
    if (s->top[i] == stamp) return false;
    if (s->top[i] < s->top[low]) low = i;
  }
  if (stamp <= (s->top[low] ? s->top[low] : f->floor)) return false;
  s->top[low] = stamp;
  return true;
}
