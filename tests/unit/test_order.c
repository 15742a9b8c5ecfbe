/* A loop's frames in id order (http/order.h), against a recording
 * m0__http_publish (this file's, in place of http/stream.c's) and the uv
 * loop's clock moved by hand: the next id goes at once and uncopied, a
 * frame above it waits for the ids below it and then goes in order, a hole
 * is given up after M0__ORDER_WAIT_MS and what comes of it later is passed
 * on as late (the channel drops it), the first frame of a loop goes at
 * once, the drain writes everything held, and a full hold writes its
 * lowest first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "base/errors.h"
#include "http/order.h"

static uint64_t written[8192];
static char chans[8192][8];
static size_t nwritten;

uint64_t m0__http_publish(m0__http *h, const char *channel, size_t chlen, uint64_t id, const void *frame,
                          size_t flen) {
  assert_true(nwritten < sizeof written / sizeof *written);
  assert_true(chlen < sizeof chans[0]);
  assert_int_equal(flen, 7);
  assert_memory_equal(frame, "data: x", 7);
  memcpy(chans[nwritten], channel, chlen);
  chans[nwritten][chlen] = 0;
  written[nwritten++] = id;
  return 0;
}

typedef struct fixture {
  uv_loop_t uv;
  m0__http h;
  m0__order *o;
} fixture;

static int setup(void **st) {
  static fixture f;
  memset(&f, 0, sizeof f);
  uv_loop_init(&f.uv);
  f.h.uv = &f.uv;
  nwritten = 0;
  *st = &f;
  return 0;
}

static int teardown(void **st) {
  fixture *f = *st;
  m0__order_free(f->o);
  uv_loop_close(&f->uv);
  return 0;
}

static void frame(fixture *f, const char *channel, uint64_t id) {
  m0__order_frame(&f->o, &f->h, channel, strlen(channel), id, "data: x", 7);
}

static void later(fixture *f, uint64_t ms) { f->uv.time += ms; } /* uv_now reads it */

static void expect(const uint64_t *ids, size_t n) {
  assert_int_equal(nwritten, n);
  for (size_t i = 0; i < n; i++) assert_int_equal(written[i], ids[i]);
}

static void test_in_order(void **st) {
  fixture *f = *st;
  frame(f, "a", 10); /* a loop's first: at once, whatever came before it */
  frame(f, "b", 11);
  frame(f, "a", 12);
  expect((uint64_t[]){10, 11, 12}, 3);
  assert_string_equal(chans[1], "b");
  assert_int_equal(m0__order_due(f->o, &f->h), M0__ENOTFOUND); /* nothing held */
}

static void test_crossed(void **st) {
  fixture *f = *st;
  frame(f, "a", 1);
  frame(f, "a", 3); /* 2 is on its way */
  frame(f, "b", 5);
  frame(f, "a", 4);
  expect((uint64_t[]){1}, 1);
  assert_int_equal(m0__order_due(f->o, &f->h), M0__ORDER_WAIT_MS);
  later(f, 10);
  assert_int_equal(m0__order_due(f->o, &f->h), M0__ORDER_WAIT_MS - 10);
  frame(f, "b", 2);
  expect((uint64_t[]){1, 2, 3, 4, 5}, 5);
  assert_string_equal(chans[1], "b");
  assert_string_equal(chans[3], "a");
  assert_int_equal(m0__order_due(f->o, &f->h), M0__ENOTFOUND);
}

static void test_hole_given_up(void **st) {
  fixture *f = *st;
  frame(f, "a", 1);
  frame(f, "a", 3); /* 2 was taken and never published */
  later(f, M0__ORDER_WAIT_MS - 1);
  m0__order_release(f->o, &f->h, false);
  frame(f, "a", 4); /* waits with 3 */
  expect((uint64_t[]){1}, 1);
  later(f, 1);
  assert_int_equal(m0__order_due(f->o, &f->h), 0);
  m0__order_release(f->o, &f->h, false);
  expect((uint64_t[]){1, 3, 4}, 3);
  frame(f, "a", 2); /* later than the hold: passed on at once, the channel drops it */
  frame(f, "a", 5);
  expect((uint64_t[]){1, 3, 4, 2, 5}, 5);
}

static void test_drain_writes_all(void **st) {
  fixture *f = *st;
  frame(f, "a", 1);
  frame(f, "a", 9);
  frame(f, "a", 4);
  expect((uint64_t[]){1}, 1);
  m0__order_release(f->o, &f->h, true);
  expect((uint64_t[]){1, 4, 9}, 3);
  assert_int_equal(m0__order_due(f->o, &f->h), M0__ENOTFOUND);
}

static void test_full_hold(void **st) {
  fixture *f = *st;
  frame(f, "a", 1);
  for (uint64_t k = 0; k < 4096; k++) frame(f, "a", 3 + 2 * k); /* all wait for 2 (and each for the one below) */
  expect((uint64_t[]){1}, 1);
  frame(f, "a", 3 + 2 * 4096); /* the hold is full: its lowest goes first */
  expect((uint64_t[]){1, 3}, 2);
  frame(f, "a", 2); /* late now */
  assert_int_equal(written[2], 2);
  m0__order_release(f->o, &f->h, true);
  assert_int_equal(nwritten, 3 + 4096);
  for (size_t i = 4; i < nwritten; i++) assert_int_equal(written[i], written[i - 1] + 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_in_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_crossed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_hole_given_up, setup, teardown),
      cmocka_unit_test_setup_teardown(test_drain_writes_all, setup, teardown),
      cmocka_unit_test_setup_teardown(test_full_hold, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
