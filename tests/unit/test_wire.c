/* What crosses between actors and what a watcher reads of it: the envelope
 * refusing every malformed header (actors/envelope.h), kind and actor names,
 * the error texts, trace records (batches of whole records, records nobody
 * took counted and reported, the JSON line and its truncation), and the
 * signal pipe (docs/reference.md, Tracing; ARCHITECTURE.md). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/pipeline0/pull.h>

#include "actors/envelope.h"
#include "base/errors.h"
#include "actors/kinds.h"
#include "base/nng_compat.h"
#include "host/signals.h"
#include "actors/trace.h"

static bool has(const char *hay, const char *needle) {
  if (!strstr(hay, needle)) {
    print_error("expected \"%s\" in \"%s\"\n", needle, hay);
    return false;
  }
  return true;
}

/* Every way a header can be wrong is refused; a right one is read. */
static void test_envelope_refusals(void **st) {
  uint8_t buf[M0__ENV_HEADER + 3];
  m0__env e = {.kind = M0__K_GO, .from = 1, .to = 2, .seq = 3}, got;
  const uint8_t *p;
  size_t n;
  uint32_t plen;
  m0__env_write(buf, &e, 3);
  assert_int_equal(m0__env_read(buf, sizeof buf, &got, &p, &n), 0);
  assert_int_equal(m0__env_read_header(buf, &got, &plen), 0);
  assert_int_equal(plen, 3);
  struct {
    size_t at;
    uint8_t v;
    const char *what;
  } bad[] = {
      {0, 'x', "magic"},
      {3, 0x30, "magic's last byte (the version: m0E0)"},
      {4, 0, "kind 0"},
      {4, M0__KIND_COUNT_, "a kind past the last"},
      {5, 1, "a kind in the high byte"},
      {6, 1, "flags set"},
      {7, 0x80, "flags set (high byte)"},
      {43, 0x01, "a payload length of 16 MiB + 3 (over the limit)"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    uint8_t b[sizeof buf];
    memcpy(b, buf, sizeof b);
    b[bad[i].at] = bad[i].v;
    if (m0__env_read_header(b, &got, &plen) != M0__EBADMSG || m0__env_read(b, sizeof b, &got, &p, &n) != M0__EBADMSG)
      fail_msg("%s: not refused", bad[i].what);
  }
  /* short of a header, or the length field not the bytes that came */
  for (size_t len = 0; len < sizeof buf; len++)
    if (m0__env_read(buf, len, &got, &p, &n) != M0__EBADMSG) fail_msg("%zu bytes of %zu read as a message", len, sizeof buf);
  uint8_t longer[sizeof buf + 1];
  memcpy(longer, buf, sizeof buf);
  assert_int_equal(m0__env_read(longer, sizeof longer, &got, &p, &n), M0__EBADMSG);
  /* the largest payload the limit allows is a header that reads */
  m0__env_write(buf, &e, M0__ENV_MAX_PAYLOAD);
  assert_int_equal(m0__env_read_header(buf, &got, &plen), 0);
  assert_int_equal(plen, M0__ENV_MAX_PAYLOAD);
  /* little-endian 64-bit fields */
  uint8_t w[8];
  m0__le_put64(w, 0x0102030405060708ull);
  assert_int_equal(w[0], 8);
  assert_int_equal(w[7], 1);
  assert_true(m0__le_get64(w) == 0x0102030405060708ull);
}

static void test_names(void **st) {
  /* every kind has its own name; anything else is "?" */
  static const char *const kinds[] = {"ready", "failed", "go",      "stop", "stopped", "died",
                                      "leaving", "frame",  "handoff", "job",  "result", "request",
                                      "reply",   "answer"};
  assert_int_equal(M0__KIND_COUNT_ - 1, sizeof kinds / sizeof *kinds);
  for (int k = 1; k < M0__KIND_COUNT_; k++) assert_string_equal(m0__kind_name(k), kinds[k - 1]);
  assert_string_equal(m0__kind_name(0), "?");
  assert_string_equal(m0__kind_name(M0__KIND_COUNT_), "?");
  assert_string_equal(m0__kind_name(-1), "?");
  /* actors */
  struct {
    uint32_t id;
    const char *name;
  } names[] = {
      {M0__ACTOR_ID(M0__ROLE_COORD, 0), "coordinator"},
      {M0__ACTOR_ID(M0__ROLE_PRODUCER, 0), "producer"},
      {M0__ACTOR_ID(M0__ROLE_LOOP, 12), "loop.12"},
      {M0__ACTOR_ID(M0__ROLE_POOL, (4095 << 12) | 4095), "pool.4095.4095"},
      {M0__ACTOR_ID(M0__ROLE_EXTERNAL, 7), "external.7"},
      {M0__ACTOR_ID(M0__ROLE_WORKER, 1), "worker.1"},
      {M0__ACTOR_ID(0, 5), "actor.00000005"},   /* a role nobody has */
      {M0__ACTOR_ID(7, 1), "actor.07000001"},   /* a role past the last */
      {0xff000000u, "actor.ff000000"},
  };
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    char b[32];
    m0__actor_name(names[i].id, b, sizeof b);
    assert_string_equal(b, names[i].name);
  }
  /* cut to the buffer, always terminated; a zero-length buffer untouched */
  char b[6] = "zzzzz";
  m0__actor_name(M0__ACTOR_ID(M0__ROLE_LOOP, 12345), b, 5);
  assert_string_equal(b, "loop");
  m0__actor_name(M0__ACTOR_ID(M0__ROLE_LOOP, 1), b, 0);
  assert_string_equal(b, "loop");
  /* every error has its own text; 0 is ok; anything else says so */
  static const char *const texts[] = {"out of memory", "malformed message envelope", "nng transport error",
                                      "timed out", "closed", "cannot bind the listener", "run directory unusable",
                                      "shared page unusable", "the application's make failed", "too big",
                                      "invalid argument"};
  int codes[] = {M0__ENOMEM, M0__EBADMSG, M0__ETRANSPORT, M0__ETIMEDOUT, M0__ECLOSED, M0__EBIND,
                 M0__ERUNDIR,  M0__EPAGE,   M0__EMAKE,      M0__ETOOBIG,   M0__EINVALID};
  for (size_t i = 0; i < sizeof codes / sizeof *codes; i++) {
    assert_true(codes[i] < 0);
    assert_string_equal(m0__strerror(codes[i]), texts[i]);
  }
  assert_string_equal(m0__strerror(M0__OK), "ok");
  assert_string_equal(m0__strerror(1), "unknown error");
  assert_string_equal(m0__strerror(-1), "unknown error");
  assert_string_equal(m0__strerror(-100), "unknown error");
}

/* ---- tracing ---- */

static m0__trace_rec sample(void) {
  m0__trace_rec r = {.e = {.kind = M0__K_RESULT, .from = M0__ACTOR_ID(M0__ROLE_POOL, (3 << 12) | 1),
                           .to = M0__ACTOR_ID(M0__ROLE_LOOP, 3), .seq = 18446744073709551615ull,
                           .trace_hi = 0xffffffffffffffffull, .trace_lo = 1},
                     .bytes = 4294967295u, .t_ns = 1000000000ull * 1796143398u + 5, .recv = true};
  return r;
}

static void test_trace_format(void **st) {
  m0__trace_rec r = sample();
  char line[512];
  const char *want = "{\"t\":1796143398.000000005,\"dir\":\"recv\",\"from\":\"pool.3.1\",\"to\":\"loop.3\","
                     "\"kind\":\"result\",\"seq\":18446744073709551615,\"bytes\":4294967295,"
                     "\"trace\":\"ffffffffffffffff0000000000000001\"}\n";
  assert_int_equal(m0__trace_format(&r, line, sizeof line), strlen(want));
  assert_string_equal(line, want);
  json_error_t e;
  json_t *j = json_loads(line, JSON_DECODE_INT_AS_REAL, &e); /* the longest fields still make JSON */
  assert_non_null(j);
  assert_string_equal(json_string_value(json_object_get(j, "kind")), "result");
  json_decref(j);
  /* cut to the buffer, terminated; nothing written into a zero-length one */
  char small[11];
  assert_int_equal(m0__trace_format(&r, small, sizeof small), 10);
  assert_string_equal(small, "{\"t\":17961");
  char none[4] = "abc";
  assert_int_equal(m0__trace_format(&r, none, 0), 0);
  assert_string_equal(none, "abc");
  /* an unknown kind and an unknown role still format */
  r.e.kind = 99;
  r.e.from = M0__ACTOR_ID(9, 2);
  r.t_ns = 0;
  m0__trace_format(&r, line, sizeof line);
  assert_true(has(line, "{\"t\":0.000000000,") && has(line, "\"from\":\"actor.09000002\"") && has(line, "\"kind\":\"?\""));
  /* a record on the wire: decoded back to the same, or refused */
  uint8_t rec[M0__TRACE_RECORD];
  r = sample();
  m0__env_write(rec, &r.e, r.bytes % M0__ENV_MAX_PAYLOAD);
  m0__le_put64(rec + M0__ENV_HEADER, r.t_ns);
  m0__le_put64(rec + M0__ENV_HEADER + 8, 1);
  m0__trace_rec back;
  assert_int_equal(m0__trace_decode(rec, &back), 0);
  assert_true(back.recv && back.t_ns == r.t_ns && back.e.seq == r.e.seq && back.e.kind == M0__K_RESULT);
  m0__le_put64(rec + M0__ENV_HEADER + 8, 2); /* neither send nor recv */
  assert_int_equal(m0__trace_decode(rec, &back), M0__EBADMSG);
  m0__le_put64(rec + M0__ENV_HEADER + 8, 0);
  assert_int_equal(m0__trace_decode(rec, &back), 0);
  assert_false(back.recv);
  rec[4] = 0; /* kind 0 */
  assert_int_equal(m0__trace_decode(rec, &back), M0__EBADMSG);
}

/* Runs fn(arg) with stderr going to a file; returns what was written. */
static char *capture_stderr(void (*fn)(void *), void *arg) {
  fflush(stderr);
  char path[] = "/tmp/m0-test-wire-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  unlink(path);
  int saved = dup(2);
  dup2(fd, 2);
  fn(arg);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  off_t n = lseek(fd, 0, SEEK_END);
  char *buf = calloc(1, (size_t)n + 1);
  assert_int_equal(pread(fd, buf, (size_t)n, 0), n);
  close(fd);
  return buf;
}

static void trace_two_to_stderr(void *arg) {
  m0__tracer *t = m0__tracer_new("-");
  assert_non_null(t);
  m0__env e = {.kind = M0__K_GO, .from = M0__ACTOR_ID(M0__ROLE_COORD, 0), .to = M0__ACTOR_ID(M0__ROLE_LOOP, 0),
               .seq = 1};
  m0__trace_record(t, false, &e, 0);
  e.kind = M0__K_STOP;
  e.seq = 2;
  m0__trace_record(t, true, &e, 9);
  m0__tracer_free(t);
}

static void test_trace_stderr(void **st) {
  assert_null(m0__tracer_new(NULL));
  assert_null(m0__tracer_new(""));
  m0__tracer_free(NULL);
  char *out = capture_stderr(trace_two_to_stderr, NULL);
  char *nl = strchr(out, '\n');
  assert_non_null(nl);
  assert_true(has(out, "\"dir\":\"send\",\"from\":\"coordinator\",\"to\":\"loop.0\",\"kind\":\"go\",\"seq\":1,\"bytes\":0,"));
  assert_true(has(nl, "\"dir\":\"recv\",\"from\":\"coordinator\",\"to\":\"loop.0\",\"kind\":\"stop\",\"seq\":2,\"bytes\":9,"));
  assert_int_equal(strlen(nl + 1), strchr(nl + 1, '\n') - nl); /* exactly two lines */
  free(out);
}

/* Records are sent in batches of whole records of at most 32 KiB: 546 of 60
 * bytes, the next one starts the next batch; none is lost or reordered. */
static void test_trace_batches(void **st) {
  nng_socket pull;
  assert_int_equal(nng_pull0_open(&pull), 0);
  assert_int_equal(nng_listen(pull, "inproc://test-wire-batches", NULL, 0), 0);
  nng_socket_set_ms(pull, NNG_OPT_RECVTIMEO, 3000);
  m0__tracer *t = m0__tracer_new("inproc://test-wire-batches");
  assert_non_null(t);
  const int total = 1200, per = 32768 / M0__TRACE_RECORD;
  assert_int_equal(per, 546);
  m0__env e = {.kind = M0__K_FRAME, .from = M0__ACTOR_ID(M0__ROLE_PRODUCER, 0), .to = M0__ACTOR_ID(M0__ROLE_LOOP, 0)};
  for (int i = 0; i < total; i++) {
    e.seq = (uint64_t)i;
    m0__trace_record(t, false, &e, (size_t)i);
  }
  int seen = 0, batches = 0, full = 0;
  while (seen < total) {
    uint8_t *buf;
    size_t n;
    if (nng_recv(pull, &buf, &n, NNG_FLAG_ALLOC) != 0) fail_msg("%d of %d records arrived", seen, total);
    assert_int_equal(n % M0__TRACE_RECORD, 0);
    assert_true(n <= (size_t)per * M0__TRACE_RECORD);
    full += n == (size_t)per * M0__TRACE_RECORD;
    for (size_t k = 0; k < n / M0__TRACE_RECORD; k++, seen++) {
      m0__trace_rec r;
      assert_int_equal(m0__trace_decode(buf + k * M0__TRACE_RECORD, &r), 0);
      assert_int_equal(r.e.seq, (uint64_t)seen);
      assert_int_equal(r.bytes, (uint32_t)seen);
    }
    nng_free(buf, n);
    batches++;
  }
  assert_int_equal(seen, total);
  /* 1200 records written at once: a batch is full at exactly 546 (the 547th
   * starts the next); the 50 ms tick may cut one short, and would need to
   * twice, within the microseconds of the writes, to leave none full */
  assert_true(batches >= (total + per - 1) / per);
  if (full < 1) fail_msg("no batch of exactly %d records (%d batches)", per, batches);
  m0__tracer_free(t);
  m0__socket_close(pull);
}

/* A lone record leaves on the flusher's 50 ms tick, not when a batch fills,
 * also when the tick's deadline falls in the next second (the tracer made
 * 960-990 ms into one). (Bounded by the receive's 5 s, not timed: a loaded
 * machine may be slow, never this wrong.) */
static void test_trace_flush_deadline(void **st) {
  nng_socket pull;
  assert_int_equal(nng_pull0_open(&pull), 0);
  assert_int_equal(nng_listen(pull, "inproc://test-wire-flush", NULL, 0), 0);
  nng_socket_set_ms(pull, NNG_OPT_RECVTIMEO, 5000);
  struct timespec now;
  do {
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_nsec < 960000000L) {
      struct timespec nap = {0, 960000000L - now.tv_nsec};
      nanosleep(&nap, NULL);
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while (now.tv_nsec < 960000000L || now.tv_nsec > 990000000L);
  m0__tracer *t = m0__tracer_new("inproc://test-wire-flush");
  assert_non_null(t);
  m0__env e = {.kind = M0__K_GO, .from = M0__ACTOR_ID(M0__ROLE_COORD, 0), .to = M0__ACTOR_ID(M0__ROLE_LOOP, 0)};
  for (int round = 0; round < 3; round++) {
    e.seq = (uint64_t)round;
    m0__trace_record(t, false, &e, 0);
    uint8_t *buf;
    size_t n;
    if (nng_recv(pull, &buf, &n, NNG_FLAG_ALLOC) != 0) fail_msg("round %d: a lone record never left", round);
    assert_int_equal(n, M0__TRACE_RECORD);
    m0__trace_rec r;
    assert_int_equal(m0__trace_decode(buf, &r), 0);
    assert_int_equal(r.e.seq, (uint64_t)round);
    nng_free(buf, n);
  }
  m0__tracer_free(t);
  m0__socket_close(pull);
}

/* Nobody listens: nothing waits, the records that could not be queued are
 * counted, and the count is said at the end. */
static unsigned long dropped_total;
static void trace_to_nobody(void *arg) {
  m0__tracer *t = m0__tracer_new("ipc:///tmp/m0-test-wire-nobody-listens.sock");
  assert_non_null(t);
  m0__env e = {.kind = M0__K_JOB, .from = M0__ACTOR_ID(M0__ROLE_LOOP, 0), .to = M0__ACTOR_ID(M0__ROLE_POOL, 0)};
  dropped_total = 700000; /* more batches than nng queues (1024 of 546) */
  for (unsigned long i = 0; i < dropped_total; i++) m0__trace_record(t, false, &e, 1);
  m0__tracer_free(t);
}

static void test_trace_dropped(void **st) {
  char *err = capture_stderr(trace_to_nobody, NULL);
  unsigned long n = 0;
  if (sscanf(err, "m0: trace: %lu records dropped (nobody was receiving at the trace address)\n", &n) != 1)
    fail_msg("no count of dropped records on stderr: \"%s\"", err);
  /* at most 1024 batches of 546 records were queued; every other was dropped */
  assert_true(n >= dropped_total - 1024ul * 546 && n <= dropped_total);
  assert_true(has(err, "nobody was receiving at the trace address"));
  free(err);
}

/* ---- signals ---- */

static void test_signals(void **st) {
  alarm(30); /* a pipe that blocked would hang the take or the handler: SIGALRM ends the test instead */
  int fd = m0__signals_install(false);
  assert_true(fd >= 0);
  assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
  assert_int_equal(m0__signals_take(), 0);
  raise(SIGTERM);
  assert_int_equal(m0__signals_take(), M0__SIG_STOP);
  assert_int_equal(m0__signals_take(), 0);
  raise(SIGINT);
  raise(SIGINT);
  assert_int_equal(m0__signals_take(), M0__SIG_STOP);
  /* SIGPIPE is ignored: a write to a closed socket is an error, not a death */
  struct sigaction sa;
  sigaction(SIGPIPE, NULL, &sa);
  assert_true(sa.sa_handler == SIG_IGN);
  /* a storm of signals never blocks the handler (the pipe is non-blocking
   * and a full one already says "stop") */
  for (int i = 0; i < 200000; i++) raise(SIGTERM);
  assert_int_equal(m0__signals_take(), M0__SIG_STOP);
  assert_int_equal(m0__signals_take(), 0);
  m0__signals_restore();
  sigaction(SIGTERM, NULL, &sa);
  assert_true(sa.sa_handler == SIG_DFL);
  assert_int_equal(fcntl(fd, F_GETFD), -1); /* closed */
  m0__signals_restore();                     /* twice is harmless */

  /* the supervisor's: SIGCHLD too, told apart */
  fd = m0__signals_install(true);
  assert_true(fd >= 0);
  raise(SIGCHLD);
  assert_int_equal(m0__signals_take(), M0__SIG_CHILD);
  raise(SIGCHLD);
  raise(SIGTERM);
  assert_int_equal(m0__signals_take(), M0__SIG_CHILD | M0__SIG_STOP);
  m0__signals_restore();
  sigaction(SIGCHLD, NULL, &sa);
  assert_true(sa.sa_handler == SIG_DFL);

  /* no descriptor left (EMFILE): -1, and no handler installed */
  struct rlimit old, low;
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
  int lowest = dup(0);
  assert_true(lowest >= 0);
  close(lowest);
  low = old;
  low.rlim_cur = (rlim_t)lowest + 1; /* one descriptor free: a pipe needs two */
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
  int rv = m0__signals_install(false);
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
  assert_int_equal(rv, -1);
  sigaction(SIGTERM, NULL, &sa);
  assert_true(sa.sa_handler == SIG_DFL);
  alarm(0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_envelope_refusals), cmocka_unit_test(test_names),
      cmocka_unit_test(test_trace_format),      cmocka_unit_test(test_trace_stderr),
      cmocka_unit_test(test_trace_batches),     cmocka_unit_test(test_trace_flush_deadline),
      cmocka_unit_test(test_trace_dropped),
      cmocka_unit_test(test_signals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
