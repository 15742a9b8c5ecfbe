/* base/text.h: a value said in a line is one line, whatever it holds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "base/text.h"

static void control_found(void **state) {
  (void)state;
  assert_false(m0__has_control(""));
  assert_false(m0__has_control(NULL));
  assert_false(m0__has_control("/run/m0 x\\y \xc3\xa9")); /* space, backslash and UTF-8 are no control bytes */
  assert_true(m0__has_control("a\nb"));
  assert_true(m0__has_control("a\tb"));
  assert_true(m0__has_control("\x1b[2J"));
  assert_true(m0__has_control("a\x7f"));
}

static void escaped(void **state) {
  (void)state;
  char out[64];
  assert_string_equal(m0__escape(out, sizeof out, "x\nm0: forged"), "x\\nm0: forged");
  assert_string_equal(m0__escape(out, sizeof out, "a\rb\tc\\d"), "a\\rb\\tc\\\\d");
  assert_string_equal(m0__escape(out, sizeof out, "\x01\x1b\x7f"), "\\x01\\x1b\\x7f");
  assert_string_equal(m0__escape(out, sizeof out, "plain \xc3\xa9"), "plain \xc3\xa9");
  assert_string_equal(m0__escape(out, sizeof out, NULL), "");
}

/* Cut short, never in the middle of an escape: "ab\" alone would read as
 * an escaped next byte. */
static void cut_whole(void **state) {
  (void)state;
  char out[5];
  assert_string_equal(m0__escape(out, sizeof out, "abc\n"), "abc");
  assert_string_equal(m0__escape(out, sizeof out, "ab\x01"), "ab");
  assert_string_equal(m0__escape(out, sizeof out, "abcdefg"), "abcd");
  assert_false(m0__has_control(out));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(control_found),
      cmocka_unit_test(escaped),
      cmocka_unit_test(cut_whole),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
