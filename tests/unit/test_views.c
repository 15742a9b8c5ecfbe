/* The views table: exact routes, parameters, HEAD for GET, 404, 405 with
 * Allow, OPTIONS. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "http/views.h"

static void v(void *s, const m0_request *r, m0_response *res) {}
static void w(void *s, const m0_request *r, m0_response *res) {}

static const m0_route routes[] = {
    {"GET", "/notes", v, 0},
    {"POST", "/notes", w, 0},
    {"GET", "/notes/{id}", v, M0_ON_LOOP},
    {"DELETE", "/notes/{id}/tags/{tag}", w, 0},
};

static m0__match match(const char *method, const char *path) {
  m0__match m;
  m0__views_match(routes, 4, (m0_str){method, strlen(method)}, (m0_str){path, strlen(path)}, &m);
  return m;
}

static void test_found(void **st) {
  m0__match m = match("POST", "/notes");
  assert_int_equal(m.kind, M0__VIEW_FOUND);
  assert_ptr_equal(m.route, &routes[1]);
  m = match("HEAD", "/notes");
  assert_int_equal(m.kind, M0__VIEW_FOUND);
  assert_ptr_equal(m.route, &routes[0]);
}

static void test_params(void **st) {
  m0__match m = match("DELETE", "/notes/42/tags/red");
  assert_int_equal(m.kind, M0__VIEW_FOUND);
  assert_int_equal(m.nparams, 2);
  assert_int_equal(m.params[0].n, 2);
  assert_memory_equal(m.params[0].p, "42", 2);
  assert_memory_equal(m.params[1].p, "red", 3);
  assert_int_equal(match("GET", "/notes/").kind, M0__VIEW_NOT_FOUND); /* a parameter is never empty */
  assert_int_equal(match("GET", "/notes/1/x").kind, M0__VIEW_NOT_FOUND);
}

static void test_not_allowed(void **st) {
  m0__match m = match("PUT", "/notes");
  assert_int_equal(m.kind, M0__VIEW_NOT_ALLOWED);
  assert_string_equal(m.allow, "GET, HEAD, POST, OPTIONS");
  m = match("OPTIONS", "/notes/7");
  assert_int_equal(m.kind, M0__VIEW_OPTIONS);
  assert_string_equal(m.allow, "GET, HEAD, OPTIONS");
  assert_int_equal(match("GET", "/nope").kind, M0__VIEW_NOT_FOUND);
  assert_int_equal(match("GET", "/notesx").kind, M0__VIEW_NOT_FOUND);
}

static m0__match match_in(const m0_route *rs, size_t n, const char *method, const char *path) {
  m0__match m;
  m0__views_match(rs, n, (m0_str){method, strlen(method)}, (m0_str){path, strlen(path)}, &m);
  return m;
}

/* A path is matched exactly: a trailing slash is another path, and a
 * parameter stops at the next slash. */
static void test_trailing_slash(void **st) {
  static const m0_route rs[] = {{"GET", "/a", v, 0}, {"GET", "/b/", v, 0}, {"GET", "/c/{x}", v, 0}};
  assert_int_equal(match_in(rs, 3, "GET", "/a").kind, M0__VIEW_FOUND);
  assert_int_equal(match_in(rs, 3, "GET", "/a/").kind, M0__VIEW_NOT_FOUND);
  assert_int_equal(match_in(rs, 3, "GET", "/b/").kind, M0__VIEW_FOUND);
  assert_int_equal(match_in(rs, 3, "GET", "/b").kind, M0__VIEW_NOT_FOUND);
  assert_int_equal(match_in(rs, 3, "GET", "/c/1/").kind, M0__VIEW_NOT_FOUND);
  assert_int_equal(match_in(rs, 3, "GET", "/").kind, M0__VIEW_NOT_FOUND);
  assert_int_equal(match_in(rs, 3, "GET", "").kind, M0__VIEW_NOT_FOUND);
  m0__match m = match_in(rs, 3, "GET", "/c/a%2Fb"); /* an escaped slash is the parameter's */
  assert_int_equal(m.kind, M0__VIEW_FOUND);
  assert_int_equal(m.params[0].n, 5);
}

/* Methods are case-sensitive (RFC 9110 9.1); HEAD is answered by GET only. */
static void test_methods(void **st) {
  static const m0_route rs[] = {{"POST", "/p", w, 0}, {"GET", "/g", v, 0}, {"HEAD", "/h", v, 0}};
  assert_int_equal(match_in(rs, 3, "get", "/g").kind, M0__VIEW_NOT_ALLOWED);
  m0__match m = match_in(rs, 3, "HEAD", "/p"); /* a POST route does not answer HEAD */
  assert_int_equal(m.kind, M0__VIEW_NOT_ALLOWED);
  assert_string_equal(m.allow, "POST, OPTIONS");
  m = match_in(rs, 3, "HEAD", "/h");
  assert_int_equal(m.kind, M0__VIEW_FOUND);
  assert_ptr_equal(m.route, &rs[2]);
  m = match_in(rs, 3, "GET", "/h");
  assert_int_equal(m.kind, M0__VIEW_NOT_ALLOWED);
  assert_string_equal(m.allow, "HEAD, OPTIONS");
  m = match_in(rs, 3, "OPTIONS", "/g");
  assert_int_equal(m.kind, M0__VIEW_OPTIONS);
  assert_string_equal(m.allow, "GET, HEAD, OPTIONS");
  assert_int_equal(match_in(rs, 3, "OPTIONS", "/nope").kind, M0__VIEW_NOT_FOUND); /* OPTIONS of no path: 404 */
}

/* Allow names each method once, in table order, whatever routes share the
 * path; a method whose name holds another's is still listed. */
static void test_allow_list(void **st) {
  static const m0_route rs[] = {
      {"GET", "/x/{id}", v, 0},  {"GET", "/x/{name}", v, 0}, {"HEAD", "/x/{id}", v, 0}, {"FORGET", "/x/{id}", w, 0},
      {"GETX", "/x/{id}", w, 0}, {"PUT", "/x/{id}", w, 0},   {"PUT", "/x/{k}", w, 0},   {"OPTIONS", "/y", w, 0},
  };
  m0__match m = match_in(rs, 8, "DELETE", "/x/1");
  assert_int_equal(m.kind, M0__VIEW_NOT_ALLOWED);
  assert_string_equal(m.allow, "GET, HEAD, FORGET, GETX, PUT, OPTIONS");
  static const m0_route longer_first[] = {{"GETX", "/z", w, 0}, {"GET", "/z", v, 0}};
  m = match_in(longer_first, 2, "POST", "/z");
  assert_string_equal(m.allow, "GETX, GET, HEAD, OPTIONS");
  /* a route of its own for OPTIONS answers it, not the host */
  m = match_in(rs, 8, "OPTIONS", "/y");
  assert_int_equal(m.kind, M0__VIEW_FOUND);
  assert_ptr_equal(m.route, &rs[7]);
}

/* A parameter is one non-empty segment; a pattern may hold at most
 * M0__MAX_PARAMS of them, and a broken pattern ({ without }) matches nothing. */
static void test_params_edges(void **st) {
  static const m0_route rs[] = {
      {"GET", "/f/{a}.{ext}", v, 0},
      {"GET", "/m/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}", v, 0},
      {"GET", "/n/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}/{i}", v, 0},
      {"GET", "/broken/{id", v, 0},
      {"GET", "/{a}{b}", v, 0},
  };
  m0__match m = match_in(rs, 5, "GET", "/m/1/2/3/4/5/6/7/8");
  assert_int_equal(m.kind, M0__VIEW_FOUND);
  assert_int_equal(m.nparams, 8);
  assert_memory_equal(m.params[7].p, "8", 1);
  assert_int_equal(match_in(rs, 5, "GET", "/n/1/2/3/4/5/6/7/8/9").kind, M0__VIEW_NOT_FOUND);
  assert_int_equal(match_in(rs, 5, "GET", "/broken/7").kind, M0__VIEW_NOT_FOUND);
  assert_int_equal(match_in(rs, 5, "GET", "/broken/{id").kind, M0__VIEW_NOT_FOUND);
  /* a parameter runs to the next slash, so a literal after it in the same
   * segment never matches, and two in one segment neither */
  assert_int_equal(match_in(rs, 5, "GET", "/f/a.txt").kind, M0__VIEW_NOT_FOUND);
  assert_int_equal(match_in(rs, 5, "GET", "/ab").kind, M0__VIEW_NOT_FOUND);
  m = match_in(rs, 5, "GET", "/m/1/2/3/4/5/6/7/8");
  assert_int_equal(m.params[0].n, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_found),      cmocka_unit_test(test_params),
                                     cmocka_unit_test(test_not_allowed), cmocka_unit_test(test_trailing_slash),
                                     cmocka_unit_test(test_methods),    cmocka_unit_test(test_allow_list),
                                     cmocka_unit_test(test_params_edges)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
