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

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_found), cmocka_unit_test(test_params),
                                     cmocka_unit_test(test_not_allowed)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
