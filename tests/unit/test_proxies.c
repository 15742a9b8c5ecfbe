/* Who the client is (http/proxies.h): the list of trusted proxies as the
 * operator writes it (and what it refuses), and the walk over Forwarded and
 * X-Forwarded-For from a trusted peer, right to left, to the first address
 * not trusted: a client's own header never names someone else. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "base/errors.h"
#include "http/proxies.h"

static void test_parse(void **st) {
  m0__proxies px;
  char err[128];
  assert_int_equal(m0__proxies_parse("10.0.0.0/8, 192.0.2.7,::1,2001:db8::/32", &px, err, sizeof err), 0);
  assert_int_equal(px.n, 4);
  assert_int_equal(px.nets[0].bits, 96 + 8);
  assert_int_equal(px.nets[1].bits, 128);
  assert_int_equal(px.nets[3].bits, 32);
  assert_int_equal(m0__proxies_parse("", &px, err, sizeof err), 0);
  assert_int_equal(px.n, 0);
  const char *bad[] = {"10.0.0.0/33", "10.0.0.1/", "10.0.0.1/8x", "::1/129", "host.example", "10.0.0.256",
                       "10.0.0.1,,10.0.0.2", "1.2.3.4/-1"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    err[0] = 0;
    assert_int_equal(m0__proxies_parse(bad[i], &px, err, sizeof err), M0__EINVALID);
    assert_non_null(strstr(err, "is not an address"));
  }
  char many[64 * 12] = "";
  for (int i = 0; i < 33; i++) snprintf(many + strlen(many), sizeof many - strlen(many), "%s10.0.0.%d", i ? "," : "", i);
  assert_int_equal(m0__proxies_parse(many, &px, err, sizeof err), M0__EINVALID);
  assert_non_null(strstr(err, "more than 32"));
}

static void test_trust(void **st) {
  m0__proxies px;
  char err[128];
  assert_int_equal(m0__proxies_parse("10.0.0.0/8,192.0.2.0/25,2001:db8::/32", &px, err, sizeof err), 0);
  uint8_t a[16];
  const struct {
    const char *addr;
    bool trusted;
  } cases[] = {{"10.1.2.3", true},    {"11.0.0.1", false},       {"192.0.2.127", true}, {"192.0.2.128", false},
               {"2001:db8::1", true}, {"[2001:db8:1::5]", true}, {"2001:db9::1", false}, {"::ffff:10.0.0.1", true}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    assert_true(m0__addr_parse(cases[i].addr, strlen(cases[i].addr), a));
    if (m0__proxies_trust(&px, a) != cases[i].trusted) fail_msg("%s", cases[i].addr);
  }
  assert_false(m0__addr_parse("", 0, a));
  assert_false(m0__addr_parse("[]", 2, a));
  assert_false(m0__addr_parse("1.2.3.4:80", 10, a));
}

static const char *client(const m0__proxies *px, const char *peer, const m0_header *h, size_t n) {
  static char out[M0__ADDR_TEXT];
  m0_request req = {.headers = h, .nheaders = n};
  m0__client_addr(px, peer, &req, out);
  return out;
}

#define H(n, v) {{n, sizeof n - 1}, {v, sizeof v - 1}}

static void test_walk(void **st) {
  m0__proxies px;
  char err[128];
  assert_int_equal(m0__proxies_parse("10.0.0.0/8", &px, err, sizeof err), 0);
  const m0_header xff[] = {H("X-Forwarded-For", "203.0.113.9, 10.0.0.2")};
  /* from an untrusted peer: the header is not believed */
  assert_string_equal(client(&px, "198.51.100.1", xff, 1), "198.51.100.1");
  assert_string_equal(client(NULL, "10.0.0.1", xff, 1), "10.0.0.1");
  /* from a trusted one: right to left past the trusted hops */
  assert_string_equal(client(&px, "10.0.0.1", xff, 1), "203.0.113.9");
  /* a client that forged its own entry: the first untrusted from the right wins */
  const m0_header forged[] = {H("X-Forwarded-For", "1.1.1.1, 203.0.113.9")};
  assert_string_equal(client(&px, "10.0.0.1", forged, 1), "203.0.113.9");
  /* two header lines are one list, the last line the nearest proxy's */
  const m0_header two[] = {H("X-Forwarded-For", "6.6.6.6"), H("Host", "x"), H("x-forwarded-for", "203.0.113.9")};
  assert_string_equal(client(&px, "10.0.0.1", two, 3), "203.0.113.9");
  const m0_header two_trusted[] = {H("X-Forwarded-For", "203.0.113.7"), H("X-Forwarded-For", "10.0.0.3")};
  assert_string_equal(client(&px, "10.0.0.1", two_trusted, 2), "203.0.113.7");
  /* every hop trusted: the leftmost */
  const m0_header all[] = {H("X-Forwarded-For", "10.9.9.9,10.0.0.2")};
  assert_string_equal(client(&px, "10.0.0.1", all, 1), "10.9.9.9");
  /* garbage stops the walk at the last trusted hop */
  const m0_header junk[] = {H("X-Forwarded-For", "203.0.113.9, unknown, 10.0.0.2")};
  assert_string_equal(client(&px, "10.0.0.1", junk, 1), "10.0.0.2");
  const m0_header empty[] = {H("X-Forwarded-For", "")};
  assert_string_equal(client(&px, "10.0.0.1", empty, 1), "10.0.0.1");
  /* X-Forwarded-For, when sent, wins: a client's own Forwarded beside it is not believed */
  const m0_header both[] = {H("X-Forwarded-For", "203.0.113.9"), H("Forwarded", "for=8.8.8.8")};
  assert_string_equal(client(&px, "10.0.0.1", both, 2), "203.0.113.9");
  /* Forwarded alone, with quoting, ports and brackets */
  const m0_header fwd[] = {H("Forwarded", "for=\"[2001:db8::7]:4711\";proto=https, For=10.0.0.2:80")};
  assert_string_equal(client(&px, "10.0.0.1", fwd, 1), "2001:db8::7");
  const m0_header fwd_v4[] = {H("Forwarded", "by=10.0.0.9;for=192.0.2.60;proto=http")};
  assert_string_equal(client(&px, "10.0.0.1", fwd_v4, 1), "192.0.2.60");
  const m0_header fwd_hidden[] = {H("Forwarded", "for=_hidden, for=10.0.0.2")};
  assert_string_equal(client(&px, "10.0.0.1", fwd_hidden, 1), "10.0.0.2");
  const m0_header fwd_none[] = {H("Forwarded", "proto=https")};
  assert_string_equal(client(&px, "10.0.0.1", fwd_none, 1), "10.0.0.1");
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_parse), cmocka_unit_test(test_trust),
                                     cmocka_unit_test(test_walk)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
