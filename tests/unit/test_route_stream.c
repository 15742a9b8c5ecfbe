/* A stream route's channel template (http/route_stream.h): what the file's
 * reader refuses, and the channel a request fills in — the segment as
 * sent, never a name that is no channel's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "http/route_stream.h"

static void templates(void **state) {
  (void)state;
  const char *pat = "/rooms/{room}/by/{who}";
  assert_null(m0__route_stream_check("lobby", "/lobby"));
  assert_null(m0__route_stream_check("room.{room}", pat));
  assert_null(m0__route_stream_check("{room}.{who}", pat));
  assert_null(m0__route_stream_check("{room}", pat)); /* an "m0." room is 404 when asked, not here */
  struct {
    const char *tmpl, *says;
  } bad[] = {
      {"", "is empty"},
      {"m0.x", "begins \"m0.\""},
      {"m0.{room}", "begins \"m0.\""},
      {"two words", "holds a space"},
      {"tab\there", "holds a space"},
      {"room.{nope}", "names a {parameter}"},
      {"room.{room", "has a { without its }"},
      {"room.{ro{room}", "has a { without its }"},
      {"room}", "has a } that closes no {"},
      {"0123456789012345678901234567890123456789012345678901234567890123456789", "more than 64 bytes"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *got = m0__route_stream_check(bad[i].tmpl, pat);
    if (!got || !strstr(got, bad[i].says))
      fail_msg("template \"%s\": %s, want it to say \"%s\"", bad[i].tmpl, got ? got : "accepted", bad[i].says);
  }
  char longer[300];
  memset(longer, 'a', sizeof longer - 1);
  longer[sizeof longer - 1] = 0;
  assert_non_null(m0__route_stream_check(longer, pat));
}

static long fill(const char *tmpl, const char *room, const char *who, char *out, size_t cap) {
  m0_str params[2] = {{room, strlen(room)}, {who, strlen(who)}};
  m0_request req;
  memset(&req, 0, sizeof req);
  req.params = params;
  req.nparams = 2;
  return m0__route_stream_channel(tmpl, "/rooms/{room}/by/{who}", &req, out, cap);
}

static void channels(void **state) {
  (void)state;
  char out[65];
  assert_int_equal(fill("room.{room}", "blue", "ann", out, sizeof out), 9);
  assert_string_equal(out, "room.blue");
  assert_int_equal(fill("{who}@{room}", "blue", "ann", out, sizeof out), 8);
  assert_string_equal(out, "ann@blue");
  assert_int_equal(fill("room.{room}", "a%20b", "x", out, sizeof out), 10); /* as sent, not decoded */
  assert_string_equal(out, "room.a%20b");
  assert_true(fill("{room}", "m0.graph", "x", out, sizeof out) < 0); /* the host's: no channel of a route */
  char big[80];
  memset(big, 'r', sizeof big - 1);
  big[sizeof big - 1] = 0;
  assert_true(fill("room.{room}", big, "x", out, sizeof out) < 0); /* past 64 bytes */
  assert_true(fill("lobby", "x", "y", out, 3) < 0); /* does not fit the caller's buffer */
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(templates), cmocka_unit_test(channels)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
