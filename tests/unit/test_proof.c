/* runtime/proof.h: the challenge's form, the proof of docs/wire.md's worked
 * check, and what a key file must be. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/errors.h"
#include "runtime/proof.h"

static void test_worked_check(void **st) {
  (void)st;
  m0__secret s;
  assert_int_equal(m0__secret_from_text("0123456789abcdef", &s), 0);
  uint8_t c[M0__CHALLENGE_MAX] = {0};
  const char *ctx = M0__PROOF_CONTEXT "echo";
  memcpy(c + 32, ctx, strlen(ctx));
  size_t n = 32 + strlen(ctx);
  uint8_t mac[M0__PROOF_MAC];
  assert_int_equal(m0__proof_answer(&s, c, n, mac), 0);
  static const uint8_t want[32] = {0x3e, 0xb9, 0x73, 0xaa, 0x84, 0x3d, 0xb5, 0x5e, 0x76, 0x23, 0x1c,
                                   0x13, 0x10, 0x91, 0xe0, 0xbb, 0x81, 0x89, 0xd1, 0x89, 0x88, 0x98,
                                   0xe7, 0x3a, 0x1e, 0xb5, 0x79, 0xdd, 0xc4, 0x0f, 0x17, 0xfb};
  assert_memory_equal(mac, want, 32);
  assert_true(m0__proof_check(&s, c, n, mac, 32));
  mac[31] ^= 1;
  assert_false(m0__proof_check(&s, c, n, mac, 32));
  assert_false(m0__proof_check(&s, c, n, mac, 31));
  m0__secret none = {.len = 0};
  assert_false(m0__proof_check(&none, c, n, want, 32));
}

static void test_challenge(void **st) {
  (void)st;
  uint8_t a[M0__CHALLENGE_MAX], b[M0__CHALLENGE_MAX];
  size_t na = m0__proof_challenge(a, "echo"), nb = m0__proof_challenge(b, "echo");
  assert_int_equal(na, 32 + strlen(M0__PROOF_CONTEXT "echo"));
  assert_int_equal(na, nb);
  assert_memory_equal(a + 32, M0__PROOF_CONTEXT "echo", na - 32);
  assert_memory_not_equal(a, b, 32); /* a fresh nonce each time */
}

static const char *key_write(const char *text, mode_t mode) {
  static char path[64];
  snprintf(path, sizeof path, "/tmp/m0-test-proof-%d.key", (int)getpid());
  unlink(path);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  chmod(path, mode);
  return path;
}

static void test_key_files(void **st) {
  (void)st;
  m0__secret s;
  char why[600], fix[600];
  const char *p = key_write("0123456789abcdef\n", 0600);
  assert_int_equal(m0__secret_read_file(p, &s, why, sizeof why, fix, sizeof fix), 0);
  assert_int_equal(s.len, 16); /* the newline is not part of it */
  p = key_write("0123456789abcdef\n", 0640);
  assert_int_equal(m0__secret_read_file(p, &s, why, sizeof why, fix, sizeof fix), M0__ECONFIG);
  assert_non_null(strstr(fix, "chmod 600"));
  p = key_write("short\n", 0600);
  assert_int_equal(m0__secret_read_file(p, &s, why, sizeof why, fix, sizeof fix), M0__ECONFIG);
  p = key_write("0123456789 abcdef\n", 0600);
  assert_int_equal(m0__secret_read_file(p, &s, why, sizeof why, fix, sizeof fix), M0__ECONFIG);
  unlink(p);
  assert_int_equal(m0__secret_read_file(p, &s, why, sizeof why, fix, sizeof fix), M0__ECONFIG);
  assert_int_equal(m0__secret_make(&s), 0);
  assert_int_equal(s.len, 64);
  m0__secret t;
  char text[65];
  memcpy(text, s.key, 64);
  text[64] = 0;
  assert_int_equal(m0__secret_from_text(text, &t), 0); /* what a spawned instance reads back */
  assert_int_equal(m0__secret_from_text("has a space 12345", &t), M0__EINVALID);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_worked_check),
      cmocka_unit_test(test_challenge),
      cmocka_unit_test(test_key_files),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
