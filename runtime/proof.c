#include "runtime/proof.h"

#include "base/errors.h"

#include <errno.h>
#include <fcntl.h>
#include <mbedtls/md.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

static int proof_random(uint8_t *out, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom(out + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return M0__ESYSTEM;
    got += (size_t)r;
  }
  return 0;
}

int m0__secret_read_file(const char *path, m0__secret *out, char *why, size_t whylen, char *fix, size_t fixlen) {
  out->len = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK); /* a FIFO: refused below, not waited on */
  if (fd < 0) {
    snprintf(why, whylen, "the key file %s cannot be read: %s", path, strerror(errno));
    snprintf(fix, fixlen, "give a key file this user can read");
    return M0__ECONFIG;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    snprintf(why, whylen, "the key file %s is not a regular file", path);
    snprintf(fix, fixlen, "give a file that holds the secret");
    return M0__ECONFIG;
  }
  if (st.st_uid != geteuid() || (st.st_mode & 077)) {
    close(fd);
    if (st.st_uid != geteuid()) {
      snprintf(why, whylen, "the key file %s belongs to uid %u, not to this user (uid %u)", path,
               (unsigned)st.st_uid, (unsigned)geteuid());
      snprintf(fix, fixlen, "chown it to this user, then chmod 600 %s", path);
    } else {
      snprintf(why, whylen, "the key file %s may be read or written by group or others (mode %03o)", path,
               (unsigned)(st.st_mode & 0777));
      snprintf(fix, fixlen, "chmod 600 %s", path);
    }
    return M0__ECONFIG;
  }
  ssize_t n = read(fd, out->key, sizeof out->key);
  uint8_t more;
  bool longer = n == (ssize_t)sizeof out->key && read(fd, &more, 1) == 1;
  close(fd);
  if (n > 0 && out->key[n - 1] == '\n') n--;
  if (n > 0 && out->key[n - 1] == '\r') n--;
  bool printable = n > 0;
  for (ssize_t i = 0; i < n; i++) printable &= out->key[i] > ' ' && out->key[i] < 0x7f;
  if (n < M0__SECRET_MIN || longer || !printable) {
    snprintf(why, whylen, "the key file %s %s: a secret is one line of %d to %d printable characters", path,
             longer ? "holds more than 4096 bytes" : n < M0__SECRET_MIN ? "holds too few bytes"
                                                                       : "holds a space or a control character",
             M0__SECRET_MIN, M0__SECRET_MAX);
    snprintf(fix, fixlen, "make one: head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n' > %s; chmod 600 %s", path,
             path);
    memset(out->key, 0, sizeof out->key);
    out->len = 0;
    return M0__ECONFIG;
  }
  out->len = (size_t)n;
  return 0;
}

int m0__secret_make(m0__secret *out) {
  uint8_t raw[32];
  if (proof_random(raw, sizeof raw) != 0) return M0__ESYSTEM;
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < sizeof raw; i++) {
    out->key[2 * i] = (uint8_t)hex[raw[i] >> 4];
    out->key[2 * i + 1] = (uint8_t)hex[raw[i] & 15];
  }
  out->len = 2 * sizeof raw;
  return 0;
}

int m0__secret_from_text(const char *text, m0__secret *out) {
  size_t n = text ? strlen(text) : 0;
  out->len = 0;
  if (n < M0__SECRET_MIN || n > M0__SECRET_MAX) return M0__EINVALID;
  for (size_t i = 0; i < n; i++)
    if ((uint8_t)text[i] <= ' ' || (uint8_t)text[i] >= 0x7f) return M0__EINVALID;
  memcpy(out->key, text, n);
  out->len = n;
  return 0;
}

size_t m0__proof_challenge(uint8_t *out, const char *actor) {
  if (proof_random(out, M0__PROOF_NONCE) != 0) return 0;
  size_t n = M0__PROOF_NONCE;
  size_t cl = sizeof M0__PROOF_CONTEXT - 1, al = strnlen(actor, 64);
  memcpy(out + n, M0__PROOF_CONTEXT, cl);
  memcpy(out + n + cl, actor, al);
  return n + cl + al;
}

int m0__proof_answer(const m0__secret *s, const uint8_t *c, size_t n, uint8_t out[M0__PROOF_MAC]) {
  const mbedtls_md_info_t *md = mbedtls_md_info_from_type(MBEDTLS_MD_SHA256);
  return md && mbedtls_md_hmac(md, s->key, s->len, c, n, out) == 0 ? 0 : M0__EINVALID;
}

bool m0__proof_check(const m0__secret *s, const uint8_t *c, size_t cn, const uint8_t *proof, size_t n) {
  if (!s->len || n != M0__PROOF_MAC) return false;
  uint8_t want[M0__PROOF_MAC];
  if (m0__proof_answer(s, c, cn, want) != 0) return false;
  unsigned diff = 0;
  for (size_t i = 0; i < M0__PROOF_MAC; i++) diff |= want[i] ^ proof[i];
  return diff == 0;
}
