/* What crosses between actors and what a watcher reads of it: the envelope
 * refusing every malformed header (runtime/envelope.h), kind and actor names,
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
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/pipeline0/pull.h>

#include "runtime/actor.h"
#include "runtime/envelope.h"
#include "base/errors.h"
#include "runtime/kinds.h"
#include "base/nng_compat.h"
#include "host/signals.h"
#include "runtime/trace.h"
#include "service/wire.h"

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
      {6, 2, "a flag other than SEALED"},
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
  uint8_t longer[sizeof buf + M0__SEAL_LEN];
  memcpy(longer, buf, sizeof buf);
  assert_int_equal(m0__env_read(longer, sizeof buf + 1, &got, &p, &n), M0__EBADMSG);
  /* SEALED: exactly M0__SEAL_LEN bytes after the payload, which the length
   * does not count; one byte fewer or more is refused */
  m0__le_put16(longer + 6, M0__ENV_SEALED);
  assert_int_equal(m0__env_read(longer, sizeof longer, &got, &p, &n), 0);
  assert_int_equal(got.flags, M0__ENV_SEALED);
  assert_int_equal(n, sizeof buf - M0__ENV_HEADER);
  assert_int_equal(m0__env_read(longer, sizeof longer - 1, &got, &p, &n), M0__EBADMSG);
  assert_int_equal(m0__env_read(longer, sizeof buf, &got, &p, &n), M0__EBADMSG);
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
                                      "reply",   "answer", "publish", "chunk", "trace", "hello",
                                      "message", "return", "stream", "credit"};
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
      {M0__ACTOR_ID(M0__ROLE_APP, M0__APP_INDEX(2, 1)), "app.2.1"}, /* an actor nobody named */
      {M0__ACTOR_ID(M0__ROLE_CALLER, 1), "caller.1"},
      {M0__ACTOR_ID(M0__ROLE_RELAYED, 3), "relayed.3"},
      {M0__ACTOR_ID(0x7f, 1), "actor.7f000001"}, /* a role past the last */
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
                     .bytes = 4294967295u, .t_ns = 1000000000ull * 1796143398u + 5, .recv = true,
                     .pid = 4294967295u, .tid = 7, .process = M0__TRACE_WORKER + 3};
  return r;
}

static void test_trace_format(void **st) {
  m0__trace_rec r = sample();
  char line[512];
  const char *want = "{\"t\":1796143398.000000005,\"dir\":\"recv\",\"from\":\"pool.3.1\",\"to\":\"loop.3\","
                     "\"kind\":\"result\",\"seq\":18446744073709551615,\"bytes\":4294967295,"
                     "\"trace\":\"ffffffffffffffff0000000000000001\",\"process\":\"worker.3\",\"pid\":4294967295,"
                     "\"tid\":7}\n";
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
  r.e.from = M0__ACTOR_ID(0x7f, 2);
  r.t_ns = 0;
  m0__trace_format(&r, line, sizeof line);
  assert_true(has(line, "{\"t\":0.000000000,") && has(line, "\"from\":\"actor.7f000002\"") && has(line, "\"kind\":\"?\""));
  /* a record on the wire: decoded back to the same, or refused */
  uint8_t rec[M0__TRACE_RECORD];
  r = sample();
  m0__env_write(rec, &r.e, r.bytes % M0__ENV_MAX_PAYLOAD);
  m0__le_put64(rec + M0__ENV_HEADER, r.t_ns);
  m0__le_put32(rec + M0__ENV_HEADER + 8, 1);
  m0__le_put32(rec + M0__ENV_HEADER + 12, r.pid);
  m0__le_put32(rec + M0__ENV_HEADER + 16, r.tid);
  m0__le_put32(rec + M0__ENV_HEADER + 20, r.process);
  m0__trace_rec back;
  assert_int_equal(m0__trace_decode(rec, &back), 0);
  assert_true(back.recv && back.t_ns == r.t_ns && back.e.seq == r.e.seq && back.e.kind == M0__K_RESULT);
  assert_true(back.pid == r.pid && back.tid == 7 && back.process == M0__TRACE_WORKER + 3);
  m0__le_put32(rec + M0__ENV_HEADER + 8, 2); /* serve, but a message's kind */
  assert_int_equal(m0__trace_decode(rec, &back), M0__EBADMSG);
  m0__le_put16(rec + 4, 0); /* serve: kind 0 */
  assert_int_equal(m0__trace_decode(rec, &back), 0);
  assert_true(back.served && !back.recv && back.e.kind == 0 && back.e.seq == r.e.seq);
  assert_string_equal(m0__trace_kind_name(&back), "http");
  m0__trace_format(&back, line, sizeof line);
  assert_non_null(strstr(line, "\"dir\":\"serve\",\"from\":\"pool.3.1\",\"to\":\"loop.3\",\"kind\":\"http\""));
  m0__le_put32(rec + M0__ENV_HEADER + 8, 3); /* no direction */
  assert_int_equal(m0__trace_decode(rec, &back), M0__EBADMSG);
  m0__le_put16(rec + 4, M0__K_RESULT);
  m0__le_put32(rec + M0__ENV_HEADER + 8, 0);
  assert_int_equal(m0__trace_decode(rec, &back), 0);
  assert_false(back.recv);
  rec[4] = 0; /* kind 0 */
  assert_int_equal(m0__trace_decode(rec, &back), M0__EBADMSG);
}

/* The sequence numbers of the records in the next batch at pull (flushed
 * within 50 ms of the first): each a byte of out, NUL-terminated. */
static void batch_seqs(nng_socket pull, char *out, size_t outlen) {
  uint8_t *buf;
  size_t n, k = 0;
  if (nng_recv(pull, &buf, &n, NNG_FLAG_ALLOC) != 0) fail_msg("no batch arrived");
  for (size_t at = 0; at + M0__TRACE_RECORD <= n && k + 1 < outlen; at += M0__TRACE_RECORD) {
    m0__trace_rec r;
    assert_int_equal(m0__trace_decode(buf + at, &r), 0);
    out[k++] = (char)r.e.seq;
  }
  out[k] = 0;
  nng_free(buf, n);
}

static int control(m0__tracer *t, const char *json, char *why) {
  why[0] = 0;
  return m0__tracer_control(t, json, strlen(json), why, 256);
}

/* Tracing switched while running (what a TRACE message from m0trace does):
 * a tracer made off costs nothing until a control names where its records
 * go; then filters by actor (a name or a prefix of whole parts) and by kind,
 * each kept until a control replaces it; off again. Every malformed control
 * is refused with why and changes nothing. (Each check writes a record that
 * is dropped, then one that is kept, and reads the batch: the kept one
 * alone is in it; nothing waits for something not to happen.) */
static void test_trace_control(void **st) {
  nng_socket pull;
  assert_int_equal(nng_pull0_open(&pull), 0);
  assert_int_equal(nng_listen(pull, "inproc://test-wire-control", NULL, 0), 0);
  nng_socket_set_ms(pull, NNG_OPT_RECVTIMEO, 3000);
  m0__app_actor_named(0, "echo");
  unsigned live = atomic_load(&m0__trace_live);
  m0__tracer *t = m0__tracer_new("", M0__TRACE_HOST);
  assert_non_null(t);
  assert_int_equal(atomic_load(&m0__trace_live), live); /* off: the hook's branch is not taken */
  char why[256], got[64];
  assert_int_equal(control(t, "{\"on\":true}", why), M0__EINVALID);
  assert_true(has(why, "nowhere to send the records"));
  assert_int_equal(atomic_load(&m0__trace_live), live);
  const char *bad[][2] = {
      {"not json", "a JSON object"},
      {"[true]", "a JSON object"},
      {"{\"on\":1}", "\"on\" is true or false"},
      {"{\"on\":true,\"on\":false}", "a JSON object"},
      {"{\"bogus\":1}", "unknown member \"bogus\""},
      {"{\"to\":\"http://127.0.0.1:1\"}", "\"to\" cannot be dialed"},
      {"{\"to\":7}", "not a string"},
      {"{\"actors\":[\"lop.0\"]}", "lop.0 is no actor's name"},
      {"{\"actors\":[\"loop.x\"]}", "loop.x is no actor's name"},
      {"{\"actors\":[\"pool.1.2.3\"]}", "pool.1.2.3 is no actor's name"},
      {"{\"actors\":[\"loop.\"]}", "loop. is no actor's name"},
      {"{\"actors\":[7]}", "a non-string is no actor's name"},
      {"{\"actors\":\"loop.0\"}", "a list of at most 16"},
      {"{\"kinds\":[\"jobs\"]}", "jobs is no kind"},
      {"{\"kinds\":\"job\"}", "a list of kinds"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    if (control(t, bad[i][0], why) != M0__EINVALID || !has(why, bad[i][1]))
      fail_msg("control %s: want refused with '%s', got '%s'", bad[i][0], bad[i][1], why);
  }
  assert_int_equal(control(t, "{\"on\":true,\"to\":\"inproc://test-wire-control\"}", why), 0);
  assert_int_equal(atomic_load(&m0__trace_live), live + 1);
  m0__env job = {.kind = M0__K_JOB, .from = M0__ACTOR_ID(M0__ROLE_LOOP, 0), .to = M0__ACTOR_ID(M0__ROLE_POOL, 1)};
  m0__env go = {.kind = M0__K_GO, .from = M0__ACTOR_ID(M0__ROLE_COORD, 0), .to = M0__ACTOR_ID(M0__ROLE_LOOP, 1)};
  m0__env req = {.kind = M0__K_REQUEST, .from = M0__ACTOR_ID(M0__ROLE_LOOP, 1), .to = M0__ACTOR_ID(M0__ROLE_APP, 3)};
  job.seq = 'a', go.seq = 'b';
  m0__trace_record(t, false, &job, 1);
  m0__trace_record(t, false, &go, 1);
  batch_seqs(pull, got, sizeof got);
  assert_string_equal(got, "ab"); /* every actor, every kind */
  const char *only[][2] = {{"{\"actors\":[\"pool.0.1\"]}", "a"}, {"{\"actors\":[\"pool\"]}", "a"},
                           {"{\"actors\":[\"pool.0\"]}", "a"},   {"{\"actors\":[\"loop.1\"]}", "bc"},
                           {"{\"actors\":[\"coordinator\", \"echo\"]}", "bc"}, {"{\"actors\":[\"echo.3\"]}", "c"},
                           {"{\"actors\":[\"loop.0\"]}", "a"}};
  for (size_t i = 0; i < sizeof only / sizeof *only; i++) {
    assert_int_equal(control(t, only[i][0], why), 0);
    job.seq = 'a', go.seq = 'b', req.seq = 'c';
    m0__trace_record(t, false, &job, 1);
    m0__trace_record(t, true, &go, 1);
    m0__trace_record(t, false, &req, 1);
    batch_seqs(pull, got, sizeof got);
    if (strcmp(got, only[i][1])) fail_msg("control %s: kept '%s', want '%s'", only[i][0], got, only[i][1]);
  }
  /* kinds narrow too, and the actors' filter stays until replaced */
  assert_int_equal(control(t, "{\"actors\":[],\"kinds\":[\"go\",\"request\"]}", why), 0);
  m0__trace_record(t, false, &job, 1);
  m0__trace_record(t, false, &go, 1);
  m0__trace_record(t, false, &req, 1);
  batch_seqs(pull, got, sizeof got);
  assert_string_equal(got, "bc");
  assert_int_equal(control(t, "{\"actors\":[\"loop.1\"]}", why), 0); /* the kinds stay: go, request */
  m0__trace_record(t, false, &job, 1);
  m0__trace_record(t, false, &req, 1);
  m0__trace_record(t, false, &go, 1);
  batch_seqs(pull, got, sizeof got);
  assert_string_equal(got, "cb");
  assert_int_equal(control(t, "{\"actors\":[],\"kinds\":[]}", why), 0);
  /* requests served on a loop: those sampled by default, then all, none;
   * kind "http" keeps them alone */
  uint32_t loop2 = M0__ACTOR_ID(M0__ROLE_LOOP, 2);
  m0__trace_served(t, loop2, 0, 0, 0, 'd', 5);     /* no traceparent */
  m0__trace_served(t, loop2, 1, 2, 0, 'e', 5);     /* not sampled */
  m0__trace_served(t, loop2, 1, 2, 1, 'f', 5);     /* sampled */
  m0__trace_record(t, false, &job, 1);
  batch_seqs(pull, got, sizeof got);
  assert_string_equal(got, "fa");
  assert_int_equal(control(t, "{\"requests\":\"all\",\"kinds\":[\"http\"]}", why), 0);
  m0__trace_served(t, loop2, 0, 0, 0, 'd', 5);
  m0__trace_record(t, false, &job, 1);
  m0__trace_served(t, loop2, 1, 2, 0, 'e', 5);
  batch_seqs(pull, got, sizeof got);
  assert_string_equal(got, "de");
  assert_int_equal(control(t, "{\"requests\":\"none\",\"kinds\":[]}", why), 0);
  m0__trace_served(t, loop2, 1, 2, 1, 'f', 5);
  m0__trace_record(t, false, &job, 1);
  batch_seqs(pull, got, sizeof got);
  assert_string_equal(got, "a");
  assert_int_equal(control(t, "{\"requests\":\"some\"}", why), M0__EINVALID);
  assert_true(has(why, "\"requests\" is"));
  assert_int_equal(control(t, "{\"requests\":\"sampled\"}", why), 0);
  /* a refused control leaves it as it was: still on, every actor and kind */
  assert_int_equal(control(t, "{\"on\":false,\"kinds\":[\"nope\"]}", why), M0__EINVALID);
  m0__trace_record(t, false, &job, 1);
  batch_seqs(pull, got, sizeof got);
  assert_string_equal(got, "a");
  assert_int_equal(control(t, "{\"on\":false}", why), 0);
  assert_int_equal(atomic_load(&m0__trace_live), live);
  m0__trace_record(t, false, &job, 1); /* off: dropped */
  /* off forgot where records went: back on names it again */
  assert_int_equal(control(t, "{\"on\":true}", why), M0__EINVALID);
  assert_true(has(why, "nowhere to send the records"));
  assert_int_equal(control(t, "{\"on\":true,\"to\":\"inproc://test-wire-control\"}", why), 0);
  go.seq = 'b';
  m0__trace_record(t, false, &go, 1);
  batch_seqs(pull, got, sizeof got);
  assert_string_equal(got, "b");
  m0__tracer_free(t);
  assert_int_equal(atomic_load(&m0__trace_live), live);
  /* a tracer writing to stderr switches, but its records go nowhere else */
  t = m0__tracer_new("-", M0__TRACE_HOST);
  assert_int_equal(atomic_load(&m0__trace_live), live + 1);
  assert_int_equal(control(t, "{\"to\":\"inproc://test-wire-control\"}", why), M0__EINVALID);
  assert_true(has(why, "traces to stderr"));
  assert_int_equal(control(t, "{\"on\":false}", why), 0);
  assert_int_equal(atomic_load(&m0__trace_live), live);
  m0__tracer_free(t);
  m0__socket_close(pull);
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
  m0__tracer *t = m0__tracer_new("-", M0__TRACE_SUPERVISOR);
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
  m0__tracer_free(NULL);
  m0__trace_record(NULL, false, &(m0__env){.kind = M0__K_GO}, 0); /* an actor of a tool: no tracer */
  char *out = capture_stderr(trace_two_to_stderr, NULL);
  char *nl = strchr(out, '\n');
  assert_non_null(nl);
  assert_true(has(out, "\"dir\":\"send\",\"from\":\"coordinator\",\"to\":\"loop.0\",\"kind\":\"go\",\"seq\":1,\"bytes\":0,"));
  assert_true(has(nl, "\"dir\":\"recv\",\"from\":\"coordinator\",\"to\":\"loop.0\",\"kind\":\"stop\",\"seq\":2,\"bytes\":9,"));
  char who[64];
  snprintf(who, sizeof who, "\"process\":\"supervisor\",\"pid\":%d,\"tid\":%d}", (int)getpid(), (int)syscall(SYS_gettid));
  assert_true(has(out, who) && has(nl, who));
  assert_int_equal(strlen(nl + 1), strchr(nl + 1, '\n') - nl); /* exactly two lines */
  free(out);
}

/* Records are sent in batches of whole records of at most 32 KiB: 481 of 68
 * bytes, the next one starts the next batch; none is lost or reordered. */
static void test_trace_batches(void **st) {
  nng_socket pull;
  assert_int_equal(nng_pull0_open(&pull), 0);
  assert_int_equal(nng_listen(pull, "inproc://test-wire-batches", NULL, 0), 0);
  nng_socket_set_ms(pull, NNG_OPT_RECVTIMEO, 3000);
  m0__tracer *t = m0__tracer_new("inproc://test-wire-batches", M0__TRACE_HOST);
  assert_non_null(t);
  const int total = 1200, per = 32768 / M0__TRACE_RECORD;
  assert_int_equal(per, 481);
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
  /* 1200 records written at once: a batch is full at exactly 481 (the 482nd
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
  m0__tracer *t = m0__tracer_new("inproc://test-wire-flush", M0__TRACE_HOST);
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
  m0__tracer *t = m0__tracer_new("ipc:///tmp/m0-test-wire-nobody-listens.sock", M0__TRACE_HOST);
  assert_non_null(t);
  m0__env e = {.kind = M0__K_JOB, .from = M0__ACTOR_ID(M0__ROLE_LOOP, 0), .to = M0__ACTOR_ID(M0__ROLE_POOL, 0)};
  dropped_total = 700000; /* more batches than nng queues (1024 of 481) */
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
  /* A pipe that blocked would hang the take or the handler: SIGALRM ends the
   * test instead. A bound, not a pace: the storm below took 57 s under TSan
   * beside stress-ng and another suite. */
  alarm(240);
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
  assert_int_equal(rv, M0__ESYSTEM);
  sigaction(SIGTERM, NULL, &sa);
  assert_true(sa.sa_handler == SIG_DFL);
  alarm(0);
}

/* ---- the wire of application actors (service/wire.h, docs/wire.md) ---- */

#define STR(x) ((m0_str){x, sizeof(x) - 1})

static bool str_is(m0_str s, const char *want, size_t n) { return s.n == n && (n == 0 || memcmp(s.p, want, n) == 0); }
#define STR_IS(s, lit) str_is(s, lit, sizeof(lit) - 1)

/* A batch's payload, copied out of its message so a test may cut or change it. */
typedef struct wbuf {
  uint8_t b[4096];
  size_t n;
} wbuf;

static void wbuf_of(wbuf *w, nng_msg *m) {
  w->n = m0__msg_payload_len(m);
  assert_true(w->n <= sizeof w->b);
  memcpy(w->b, m0__msg_payload(m), w->n);
  nng_msg_free(m);
}

static m0_header req_hdrs[] = {{STR("Host"), STR("example.test")}, {STR("X-Empty"), STR("")},
                               {STR("Accept"), STR("*/*")}};
static m0_str req_params[] = {STR("42"), STR("caf\xc3\xa9")};

static m0_request sample_request(void) {
  return (m0_request){.method = STR("POST"), .target = STR("/notes/42/caf\xc3\xa9?a=1&b=2"),
                      .path = STR("/notes/42/caf\xc3\xa9"), .version_minor = 0, .headers = req_hdrs, .nheaders = 3,
                      .body = {"hi\0there", 8}, .params = req_params, .nparams = 2,
                      .trace_hi = 0x0123456789abcdefull, .trace_lo = 0xfedcba9876543210ull};
}

/* One request record's batch: head (8) + fixed part (48) + strings. */
static void one_request(wbuf *w, const m0_request *q) {
  nng_msg *m;
  assert_int_equal(m0__wire_batch_new(&m, 0), 0);
  assert_int_equal(m0__wire_request_add(m, 7, q), 0);
  wbuf_of(w, m);
}

static m0_header rep_hdrs[] = {{STR("Content-Type"), STR("application/json")}, {STR("X-Instance"), STR("3")},
                               {STR("X-Empty"), STR("")}};

static void one_reply(wbuf *w, uint64_t id, int status, const m0_header *h, size_t nh) {
  nng_msg *m;
  assert_int_equal(m0__wire_batch_new(&m, 0), 0);
  assert_int_equal(m0__wire_reply_add(m, id, status, h, nh, "{\"ok\":1}", 8), 0);
  wbuf_of(w, m);
}

static int read_requests(const uint8_t *p, size_t n, int *count) {
  m0__wire_rd r;
  static m0__wire_request q;
  *count = 0;
  if (m0__wire_open(&r, p, n) != 0) return M0__EBADMSG;
  int rv;
  while ((rv = m0__wire_next_request(&r, &q)) == 1) ++*count;
  return rv;
}

static int read_replies(const uint8_t *p, size_t n, int *count, m0__wire_reply *last) {
  m0__wire_rd r;
  *count = 0;
  if (m0__wire_open(&r, p, n) != 0) return M0__EBADMSG;
  int rv;
  while ((rv = m0__wire_next_reply(&r, last)) == 1) ++*count;
  return rv;
}

/* A request with every field set reads back as it was written, twice in one
 * batch, with its path and query derived from the target. */
static void test_wire_request_roundtrip(void **st) {
  nng_msg *m;
  assert_int_equal(m0__wire_batch_new(&m, 0), 0);
  assert_int_equal(m0__wire_batch_count(m), 0);
  m0_request q = sample_request();
  assert_int_equal(m0__wire_request_add(m, 18446744073709551615ull, &q), 0);
  m0_request g = {.method = STR("GET"), .target = STR("/x?"), .path = STR("/x"), .version_minor = 1};
  assert_int_equal(m0__wire_request_add(m, 2, &g), 0);
  assert_int_equal(m0__wire_batch_count(m), 2);
  wbuf w;
  wbuf_of(&w, m);
  /* the head: version 1, flags 0, count 2, little-endian */
  assert_int_equal(m0__le_get16(w.b), 1);
  assert_int_equal(m0__le_get16(w.b + 2), 0);
  assert_int_equal(m0__le_get32(w.b + 4), 2);
  /* the first record's fixed part at 8: id, trace, lengths, counts, reserved */
  assert_true(m0__le_get64(w.b + 8) == 18446744073709551615ull);
  assert_true(m0__le_get64(w.b + 16) == q.trace_hi && m0__le_get64(w.b + 24) == q.trace_lo);
  assert_int_equal(m0__le_get32(w.b + 32), 4);         /* method */
  assert_int_equal(m0__le_get32(w.b + 36), q.target.n); /* target */
  assert_int_equal(m0__le_get32(w.b + 40), q.path.n);   /* path */
  assert_int_equal(m0__le_get32(w.b + 44), 8);          /* body */
  assert_int_equal(m0__le_get16(w.b + 48), 3);
  assert_int_equal(w.b[50], 2);
  assert_int_equal(w.b[51], 0);
  assert_int_equal(m0__le_get32(w.b + 52), 0);
  assert_memory_equal(w.b + 56, "POST", 4);

  m0__wire_rd r;
  static m0__wire_request got;
  assert_int_equal(m0__wire_open(&r, w.b, w.n), 0);
  assert_int_equal(r.left, 2);
  assert_int_equal(m0__wire_next_request(&r, &got), 1);
  const m0_request *x = &got.req;
  assert_true(got.id == 18446744073709551615ull);
  assert_true(STR_IS(x->method, "POST") && STR_IS(x->target, "/notes/42/caf\xc3\xa9?a=1&b=2"));
  assert_true(STR_IS(x->path, "/notes/42/caf\xc3\xa9") && STR_IS(x->query, "a=1&b=2"));
  assert_true(x->path.p == x->target.p); /* a prefix of the target, not a copy */
  assert_int_equal(x->version_minor, 0);
  assert_true(x->trace_hi == q.trace_hi && x->trace_lo == q.trace_lo);
  assert_int_equal(x->nheaders, 3);
  for (size_t i = 0; i < 3; i++)
    assert_true(str_is(x->headers[i].name, req_hdrs[i].name.p, req_hdrs[i].name.n) &&
                str_is(x->headers[i].value, req_hdrs[i].value.p, req_hdrs[i].value.n));
  assert_int_equal(x->nparams, 2);
  assert_true(STR_IS(x->params[0], "42") && STR_IS(x->params[1], "caf\xc3\xa9"));
  assert_true(str_is(x->body, "hi\0there", 8));
  /* every span lies in the payload */
  assert_true((const uint8_t *)x->body.p > w.b && (const uint8_t *)x->body.p + x->body.n <= w.b + w.n);
  /* the second: a '?' with nothing after it is an empty query; no headers, params or body */
  assert_int_equal(m0__wire_next_request(&r, &got), 1);
  assert_int_equal(got.id, 2);
  assert_true(STR_IS(got.req.path, "/x") && got.req.query.n == 0 && got.req.nheaders == 0 &&
              got.req.nparams == 0 && got.req.body.n == 0 && got.req.version_minor == 1);
  assert_true(got.req.trace_hi == 0 && got.req.trace_lo == 0);
  assert_int_equal(m0__wire_next_request(&r, &got), 0);
  assert_int_equal(m0__wire_next_request(&r, &got), 0); /* and stays done */

  /* a target whose tail is not a query: the query is empty */
  m0_request f = {.method = STR("GET"), .target = STR("/y#z"), .path = STR("/y"), .version_minor = 1};
  one_request(&w, &f);
  assert_int_equal(m0__wire_open(&r, w.b, w.n), 0);
  assert_int_equal(m0__wire_next_request(&r, &got), 1);
  assert_true(STR_IS(got.req.path, "/y") && got.req.query.n == 0);
  /* an empty batch is read as done at once */
  assert_int_equal(m0__wire_batch_new(&m, 0), 0);
  wbuf_of(&w, m);
  assert_int_equal(w.n, M0__WIRE_BATCH_HEAD);
  assert_int_equal(m0__wire_open(&r, w.b, w.n), 0);
  assert_int_equal(m0__wire_next_request(&r, &got), 0);
}

/* A reply with headers and a body reads back as written. */
static void test_wire_reply_roundtrip(void **st) {
  nng_msg *m;
  assert_int_equal(m0__wire_batch_new(&m, 0), 0);
  assert_int_equal(m0__wire_reply_add(m, 99, 201, rep_hdrs, 3, "{\"ok\":1}", 8), 0);
  assert_int_equal(m0__wire_reply_add(m, 100, 599, NULL, 0, NULL, 0), 0);
  assert_int_equal(m0__wire_batch_count(m), 2);
  wbuf w;
  wbuf_of(&w, m);
  /* the record's fixed part: id, status, nheaders, body length */
  assert_int_equal(m0__le_get64(w.b + 8), 99);
  assert_int_equal(m0__le_get16(w.b + 16), 201);
  assert_int_equal(m0__le_get16(w.b + 18), 3);
  assert_int_equal(m0__le_get32(w.b + 20), 8);
  assert_int_equal(m0__le_get32(w.b + 24), 12); /* the first header's name length */
  assert_int_equal(m0__le_get32(w.b + 28), 16); /* and its value's */
  assert_memory_equal(w.b + 32, "Content-Typeapplication/json", 28);
  m0__wire_rd r;
  static m0__wire_reply got;
  assert_int_equal(m0__wire_open(&r, w.b, w.n), 0);
  assert_int_equal(m0__wire_next_reply(&r, &got), 1);
  assert_true(got.id_read && got.id == 99 && got.status == 201 && got.nhdrs == 3);
  for (size_t i = 0; i < 3; i++)
    assert_true(str_is(got.hdrs[i].name, rep_hdrs[i].name.p, rep_hdrs[i].name.n) &&
                str_is(got.hdrs[i].value, rep_hdrs[i].value.p, rep_hdrs[i].value.n));
  assert_true(STR_IS(got.body, "{\"ok\":1}"));
  assert_int_equal(m0__wire_next_reply(&r, &got), 1);
  assert_true(got.id == 100 && got.status == 599 && got.nhdrs == 0 && got.body.n == 0);
  assert_int_equal(m0__wire_next_reply(&r, &got), 0);
  assert_false(got.id_read); /* the end names no record */
  /* bodies past 64 KiB: every length is 32 bits, both ways */
  size_t big = 70000;
  char *body = malloc(big);
  assert_non_null(body);
  for (size_t i = 0; i < big; i++) body[i] = (char)(i * 7);
  assert_int_equal(m0__wire_batch_new(&m, 0), 0);
  assert_int_equal(m0__wire_reply_add(m, 3, 200, NULL, 0, body, big), 0);
  assert_int_equal(m0__wire_open(&r, m0__msg_payload(m), m0__msg_payload_len(m)), 0);
  assert_int_equal(m0__wire_next_reply(&r, &got), 1);
  assert_true(str_is(got.body, body, big));
  assert_int_equal(m0__wire_next_reply(&r, &got), 0);
  nng_msg_free(m);
  m0_request q = {.method = STR("PUT"), .target = STR("/big"), .path = STR("/big"), .version_minor = 1,
                  .body = {body, big}};
  assert_int_equal(m0__wire_batch_new(&m, 0), 0);
  assert_int_equal(m0__wire_request_add(m, 4, &q), 0);
  static m0__wire_request back;
  assert_int_equal(m0__wire_open(&r, m0__msg_payload(m), m0__msg_payload_len(m)), 0);
  assert_int_equal(m0__wire_next_request(&r, &back), 1);
  assert_true(str_is(back.req.body, body, big));
  assert_int_equal(m0__wire_next_request(&r, &back), 0);
  nng_msg_free(m);
  free(body);
}

/* Every way a batch's head can be wrong is refused. */
static void test_wire_head_refusals(void **st) {
  wbuf w;
  m0_request q = sample_request();
  one_request(&w, &q);
  m0__wire_rd r;
  for (size_t n = 0; n < M0__WIRE_BATCH_HEAD; n++)
    if (m0__wire_open(&r, w.b, n) != M0__EBADMSG) fail_msg("a head of %zu bytes was read", n);
  assert_int_equal(m0__wire_open(&r, w.b, M0__WIRE_BATCH_HEAD), 0); /* a head alone opens (its record is missing) */
  struct {
    size_t at;
    uint8_t v;
    const char *what;
  } bad[] = {{0, 2, "version 2"}, {0, 0, "version 0"}, {1, 1, "version 257"},
             {2, 1, "flags set"},  {3, 0x80, "flags set (high byte)"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    wbuf b = w;
    b.b[bad[i].at] = bad[i].v;
    if (m0__wire_open(&r, b.b, b.n) != M0__EBADMSG) fail_msg("%s: not refused", bad[i].what);
  }
  /* the count: 65536 opens, 65537 does not */
  wbuf b = w;
  m0__le_put32(b.b + 4, M0__WIRE_MAX_COUNT);
  assert_int_equal(m0__wire_open(&r, b.b, b.n), 0);
  assert_int_equal(r.left, 65536);
  m0__le_put32(b.b + 4, M0__WIRE_MAX_COUNT + 1);
  if (m0__wire_open(&r, b.b, b.n) != M0__EBADMSG) fail_msg("a count of 65537: not refused");
  m0__le_put32(b.b + 4, 0xffffffffu);
  assert_int_equal(m0__wire_open(&r, b.b, b.n), M0__EBADMSG);
}

/* A request record cut at any byte, or with bytes after it, or a field
 * over its limit, is refused; so is the same for a reply. */
static void test_wire_request_refusals(void **st) {
  wbuf w;
  m0_request q = sample_request();
  one_request(&w, &q);
  int count;
  assert_int_equal(read_requests(w.b, w.n, &count), 0);
  assert_int_equal(count, 1);
  /* cut at each byte of the record (the head still says one) */
  for (size_t n = M0__WIRE_BATCH_HEAD; n < w.n; n++)
    if (read_requests(w.b, n, &count) != M0__EBADMSG || count != 0)
      fail_msg("a record cut to %zu of its %zu bytes was read", n - M0__WIRE_BATCH_HEAD, w.n - M0__WIRE_BATCH_HEAD);
  /* bytes after the last record; and a count of 0 with a record after it */
  wbuf b = w;
  b.b[b.n++] = 0;
  if (read_requests(b.b, b.n, &count) != M0__EBADMSG || count != 1) fail_msg("a byte after the last record: not refused");
  b = w;
  m0__le_put32(b.b + 4, 0);
  if (read_requests(b.b, b.n, &count) != M0__EBADMSG || count != 0) fail_msg("a record past the count: not refused");
  /* a count of 2 with one record */
  b = w;
  m0__le_put32(b.b + 4, 2);
  if (read_requests(b.b, b.n, &count) != M0__EBADMSG || count != 1) fail_msg("a count past the records: not refused");
  /* the fixed part's fields, at their offsets in the record (8 + ...) */
  const size_t rec = M0__WIRE_BATCH_HEAD;
  struct {
    size_t at, width;
    uint32_t v;
    const char *what;
  } bad[] = {
      {40, 2, 101, "101 headers"},
      {40, 2, 0xffff, "65535 headers"},
      {42, 1, 9, "9 path parameters"},
      {42, 1, 255, "255 path parameters"},
      {43, 1, 2, "HTTP/1.2"},
      {44, 4, 1, "the reserved field set"},
      {47, 1, 0x80, "the reserved field set (high byte)"},
      {32, 4, (uint32_t)q.target.n + 1, "a path one byte longer than its target"},
      {32, 4, 0xffffffffu, "a path of 4 GiB"},
      {24, 4, 0xffffffffu, "a method of 4 GiB"},
      {28, 4, 0xffffffffu, "a target of 4 GiB"},
      {36, 4, 9, "a body one byte past the payload"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    b = w;
    uint8_t *at = b.b + rec + bad[i].at;
    if (bad[i].width == 4) m0__le_put32(at, bad[i].v);
    else if (bad[i].width == 2) m0__le_put16(at, (uint16_t)bad[i].v);
    else *at = (uint8_t)bad[i].v;
    if (read_requests(b.b, b.n, &count) != M0__EBADMSG) fail_msg("%s: not refused", bad[i].what);
  }
  /* at the limits, read: a path as long as its target, 100 headers, 8 parameters */
  b = w;
  m0__le_put32(b.b + rec + 32, (uint32_t)q.target.n);
  assert_int_equal(read_requests(b.b, b.n, &count), 0);
  static m0_header many[100];
  for (int i = 0; i < 100; i++) many[i] = (m0_header){STR("X"), STR("y")};
  m0_str eight[8] = {STR("a"), STR("b"), STR("c"), STR("d"), STR("e"), STR("f"), STR("g"), STR("h")};
  m0_request full = {.method = STR("GET"), .target = STR("/"), .path = STR("/"), .headers = many, .nheaders = 100,
                     .params = eight, .nparams = 8, .version_minor = 1};
  one_request(&b, &full);
  assert_int_equal(read_requests(b.b, b.n, &count), 0);
  assert_int_equal(count, 1);
  /* one header more, or one parameter more, really there: refused for the count alone */
  full.nparams = 0;
  one_request(&b, &full); /* its 100 headers are its last bytes */
  memcpy(b.b + b.n, "\1\0\0\0\0\0\0\0X", 9);
  b.n += 9;
  m0__le_put16(b.b + rec + 40, 101);
  if (read_requests(b.b, b.n, &count) != M0__EBADMSG) fail_msg("a record with 101 headers: not refused");
  m0__le_put16(b.b + rec + 40, 100);
  assert_int_equal(read_requests(b.b, b.n - 9, &count), 0);
  full.nparams = 8;
  full.nheaders = 0;
  one_request(&b, &full); /* its 8 parameters are its last bytes */
  memcpy(b.b + b.n, "\1\0\0\0i", 5);
  b.n += 5;
  b.b[rec + 42] = 9;
  if (read_requests(b.b, b.n, &count) != M0__EBADMSG) fail_msg("a record with 9 path parameters: not refused");
  full.nheaders = 100;
  /* the encoder refuses past the limits, and leaves the batch as it was */
  nng_msg *m;
  assert_int_equal(m0__wire_batch_new(&m, 0), 0);
  full.nheaders = 101;
  assert_int_equal(m0__wire_request_add(m, 1, &full), M0__ETOOBIG);
  full.nheaders = 100;
  full.nparams = 9;
  assert_int_equal(m0__wire_request_add(m, 1, &full), M0__ETOOBIG);
  assert_int_equal(m0__wire_batch_count(m), 0);
  assert_int_equal(m0__msg_payload_len(m), M0__WIRE_BATCH_HEAD);
  nng_msg_free(m);
}

/* A batch holds at most 65536 records: the encoder refuses the next one, and
 * the full batch reads to its end. */
static void test_wire_count_limit(void **st) {
  nng_msg *m;
  assert_int_equal(m0__wire_batch_new(&m, 0), 0);
  m0_request e = {.method = STR("GET"), .target = STR("/"), .path = STR("/"), .version_minor = 1};
  for (uint64_t i = 0; i < M0__WIRE_MAX_COUNT; i++)
    if (m0__wire_request_add(m, i, &e) != 0) fail_msg("record %llu refused", (unsigned long long)i);
  assert_int_equal(m0__wire_batch_count(m), M0__WIRE_MAX_COUNT);
  size_t len = m0__msg_payload_len(m);
  assert_int_equal(m0__wire_request_add(m, 65536, &e), M0__ETOOBIG);
  assert_int_equal(m0__msg_payload_len(m), len);
  int count;
  assert_int_equal(read_requests(m0__msg_payload(m), len, &count), 0);
  assert_int_equal(count, M0__WIRE_MAX_COUNT);
  nng_msg_free(m);
  assert_int_equal(m0__wire_batch_new(&m, 0), 0);
  for (uint64_t i = 0; i < M0__WIRE_MAX_COUNT; i++) assert_int_equal(m0__wire_reply_add(m, i, 200, NULL, 0, NULL, 0), 0);
  assert_int_equal(m0__wire_reply_add(m, 65536, 200, NULL, 0, NULL, 0), M0__ETOOBIG);
  m0__wire_reply last;
  assert_int_equal(read_replies(m0__msg_payload(m), m0__msg_payload_len(m), &count, &last), 0);
  assert_int_equal(count, M0__WIRE_MAX_COUNT);
  nng_msg_free(m);
}

static void test_wire_reply_refusals(void **st) {
  wbuf w;
  one_reply(&w, 5, 200, rep_hdrs, 3);
  int count;
  static m0__wire_reply got;
  assert_int_equal(read_replies(w.b, w.n, &count, &got), 0);
  assert_int_equal(count, 1);
  for (size_t n = M0__WIRE_BATCH_HEAD; n < w.n; n++)
    if (read_replies(w.b, n, &count, &got) != M0__EBADMSG || count != 0)
      fail_msg("a reply cut to %zu of its %zu bytes was read", n - M0__WIRE_BATCH_HEAD, w.n - M0__WIRE_BATCH_HEAD);
  wbuf b = w;
  b.b[b.n++] = 'x';
  if (read_replies(b.b, b.n, &count, &got) != M0__EBADMSG || count != 1) fail_msg("a byte after the last reply: not refused");
  assert_false(got.id_read); /* no record is to blame */
  /* the status: 200..599 */
  const int statuses[] = {0, 100, 199, 600, 999, 65535};
  for (size_t i = 0; i < sizeof statuses / sizeof *statuses; i++) {
    b = w;
    m0__le_put16(b.b + 16, (uint16_t)statuses[i]);
    if (read_replies(b.b, b.n, &count, &got) != M0__EBADMSG || !got.id_read || got.id != 5)
      fail_msg("status %d: not refused (with its id)", statuses[i]);
  }
  for (int s = 200; s <= 599; s += 399) {
    b = w;
    m0__le_put16(b.b + 16, (uint16_t)s);
    assert_int_equal(read_replies(b.b, b.n, &count, &got), 0);
    assert_int_equal(got.status, s);
  }
  /* 101 headers */
  b = w;
  m0__le_put16(b.b + 18, 101);
  if (read_replies(b.b, b.n, &count, &got) != M0__EBADMSG || !got.id_read) fail_msg("101 headers: not refused");
  /* 101 headers really there */
  {
    static m0_header hundred[100];
    for (int i = 0; i < 100; i++) hundred[i] = (m0_header){STR("X"), STR("y")};
    nng_msg *m;
    assert_int_equal(m0__wire_batch_new(&m, 0), 0);
    assert_int_equal(m0__wire_reply_add(m, 12, 200, hundred, 100, NULL, 0), 0); /* its headers are its last bytes */
    wbuf_of(&b, m);
    assert_int_equal(read_replies(b.b, b.n, &count, &got), 0);
    memcpy(b.b + b.n, "\1\0\0\0\1\0\0\0Xy", 10);
    b.n += 10;
    m0__le_put16(b.b + 18, 101);
    if (read_replies(b.b, b.n, &count, &got) != M0__EBADMSG || !got.id_read || got.id != 12)
      fail_msg("a reply with 101 headers: not refused");
  }
  /* what the host will not write: each header alone in a reply */
  static char longname[258], longvalue[8194];
  memset(longname, 'n', sizeof longname - 1);
  memset(longvalue, 'v', sizeof longvalue - 1);
  struct {
    m0_header h;
    bool ok;
    const char *what;
  } hs[] = {
      {{STR("X Y"), STR("1")}, false, "a name with a space"},
      {{STR("X:Y"), STR("1")}, false, "a name with a colon"},
      {{STR("X\xe9"), STR("1")}, false, "a name with a byte over 127"},
      {{{"X\0", 2}, STR("1")}, false, "a name with a NUL"},
      {{STR(""), STR("1")}, false, "an empty name"},
      {{{longname, 257}, STR("1")}, false, "a name of 257 bytes"},
      {{{longname, 256}, STR("1")}, true, "a name of 256 bytes"},
      {{STR("X"), STR("a\rb")}, false, "a value with CR"},
      {{STR("X"), STR("a\nb")}, false, "a value with LF"},
      {{STR("X"), {"a\0b", 3}}, false, "a value with NUL"},
      {{STR("X"), {longvalue, 8193}}, false, "a value of 8193 bytes"},
      {{STR("X"), {longvalue, 8192}}, true, "a value of 8192 bytes"},
      {{STR("X"), STR("\t\xff ok")}, true, "a value with a tab and a byte over 127"},
      {{STR("X"), STR("a\x7f")}, false, "a value with DEL"},
      {{STR("X"), STR("a\x01b")}, false, "a value with a control byte"},
      {{STR("Date"), STR("x")}, false, "Date (the host's)"},
      {{STR("server"), STR("x")}, false, "Server (the host's)"},
      {{STR("Keep-Alive"), STR("5")}, false, "Keep-Alive"},
      {{STR("Content-Length"), STR("3")}, false, "Content-Length"},
      {{STR("content-LENGTH"), STR("3")}, false, "content-LENGTH"},
      {{STR("Transfer-Encoding"), STR("chunked")}, false, "Transfer-Encoding"},
      {{STR("connection"), STR("close")}, false, "Connection"},
      {{STR("Content-Lengths"), STR("3")}, true, "Content-Lengths (not a framing header)"},
      {{STR("!#$%&'*+-.^_`|~09azAZ"), STR("")}, true, "every token character"},
  };
  for (size_t i = 0; i < sizeof hs / sizeof *hs; i++) {
    nng_msg *m;
    assert_int_equal(m0__wire_batch_new(&m, 0), 0);
    assert_int_equal(m0__wire_reply_add(m, 11, 200, &hs[i].h, 1, "b", 1), 0); /* the encoder writes what it is given */
    int rv = read_replies(m0__msg_payload(m), m0__msg_payload_len(m), &count, &got);
    nng_msg_free(m);
    if (hs[i].ok && rv != 0) fail_msg("%s: refused", hs[i].what);
    if (!hs[i].ok && (rv != M0__EBADMSG || !got.id_read || got.id != 11)) fail_msg("%s: not refused (with its id)", hs[i].what);
    if (m0__wire_header_ok(hs[i].h.name.p, hs[i].h.name.n, hs[i].h.value.p, hs[i].h.value.n) != hs[i].ok)
      fail_msg("%s: m0__wire_header_ok says otherwise", hs[i].what);
  }
  /* the encoder refuses past its limits */
  nng_msg *m;
  assert_int_equal(m0__wire_batch_new(&m, 0), 0);
  static m0_header many[101];
  for (int i = 0; i < 101; i++) many[i] = (m0_header){STR("X"), STR("y")};
  assert_int_equal(m0__wire_reply_add(m, 1, 200, many, 101, NULL, 0), M0__ETOOBIG);
  assert_int_equal(m0__wire_reply_add(m, 1, -1, NULL, 0, NULL, 0), M0__ETOOBIG);
  assert_int_equal(m0__wire_reply_add(m, 1, 65536, NULL, 0, NULL, 0), M0__ETOOBIG);
  assert_int_equal(m0__wire_batch_count(m), 0);
  assert_int_equal(m0__wire_reply_add(m, 1, 200, many, 100, NULL, 0), 0);
  nng_msg_free(m);
}

/* A reply that does not decode says whether its id was read: the host then
 * answers that request 502, not 504. Its id is read once its first 8 bytes
 * are there; the records before it were read. */
/* STREAM and CREDIT (service/wire.h): each op back as it went, and what
 * does not decode refused, an OPEN's id still read. */
static void test_wire_stream(void **st) {
  (void)st;
  m0_header h = {{"X-A", 3}, {"b", 1}};
  nng_msg *m;
  m0__wire_stream ws;
  assert_int_equal(m0__wire_stream_new(&m, M0__STREAM_OPEN, 77, 201, &h, 1, "hey", 3), 0);
  assert_int_equal(m0__wire_stream_read(m0__msg_payload(m), m0__msg_payload_len(m), &ws), 0);
  assert_true(ws.op == M0__STREAM_OPEN && ws.id == 77 && ws.open.status == 201 && ws.open.nhdrs == 1);
  assert_true(ws.open.body.n == 3 && !memcmp(ws.open.body.p, "hey", 3));
  m0__le_put16(m0__msg_payload(m) + 12, 99); /* a status that does not decode */
  assert_int_equal(m0__wire_stream_read(m0__msg_payload(m), m0__msg_payload_len(m), &ws), M0__EBADMSG);
  assert_true(ws.open.id_read && ws.id == 77);
  nng_msg_free(m);
  assert_int_equal(m0__wire_stream_new(&m, M0__STREAM_DATA, 5, 0, NULL, 0, "abc", 3), 0);
  assert_int_equal(m0__wire_stream_read(m0__msg_payload(m), m0__msg_payload_len(m), &ws), 0);
  assert_true(ws.op == M0__STREAM_DATA && ws.id == 5 && ws.data.n == 3 && !memcmp(ws.data.p, "abc", 3));
  assert_int_equal(m0__wire_stream_read(m0__msg_payload(m), 12, &ws), M0__EBADMSG); /* DATA of no bytes */
  assert_int_equal(m0__wire_stream_read(m0__msg_payload(m), 11, &ws), M0__EBADMSG); /* short */
  m0__le_put32(m0__msg_payload(m), M0__STREAM_END);
  assert_int_equal(m0__wire_stream_read(m0__msg_payload(m), 15, &ws), M0__EBADMSG); /* an END with bytes */
  assert_int_equal(m0__wire_stream_read(m0__msg_payload(m), 12, &ws), 0);
  m0__le_put32(m0__msg_payload(m), 9);
  assert_int_equal(m0__wire_stream_read(m0__msg_payload(m), 12, &ws), M0__EBADMSG); /* no such op */
  nng_msg_free(m);
  uint8_t c[M0__WIRE_CREDIT_LEN];
  uint32_t op, n;
  uint64_t id;
  m0__wire_credit_put(c, M0__CREDIT_MORE, 9, 4096);
  assert_int_equal(m0__wire_credit_read(c, sizeof c, &op, &id, &n), 0);
  assert_true(op == M0__CREDIT_MORE && id == 9 && n == 4096);
  m0__wire_credit_put(c, M0__CREDIT_GONE, 9, 1);
  assert_int_equal(m0__wire_credit_read(c, sizeof c, &op, &id, &n), M0__EBADMSG); /* GONE carries 0 */
  assert_int_equal(m0__wire_credit_read(c, sizeof c - 1, &op, &id, &n), M0__EBADMSG);
}

static void test_wire_reply_id_read(void **st) {
  nng_msg *m;
  assert_int_equal(m0__wire_batch_new(&m, 0), 0);
  assert_int_equal(m0__wire_reply_add(m, 1, 200, NULL, 0, "a", 1), 0);
  size_t first = m0__msg_payload_len(m);
  assert_int_equal(m0__wire_reply_add(m, 0x1122334455667788ull, 200, rep_hdrs, 3, "bb", 2), 0);
  wbuf w;
  wbuf_of(&w, m);
  int count;
  static m0__wire_reply got;
  for (size_t n = first; n < w.n; n++) {
    int rv = read_replies(w.b, n, &count, &got);
    if (rv != M0__EBADMSG || count != 1) fail_msg("cut at %zu: %d records read, %d", n, count, rv);
    bool want = n - first >= 8;
    if (got.id_read != want) fail_msg("the second record cut to %zu bytes: id_read %d", n - first, got.id_read);
    if (want && got.id != 0x1122334455667788ull) fail_msg("cut to %zu bytes: id %llx", n - first,
                                                          (unsigned long long)got.id);
  }
  /* cut after its id, in its fixed part: the id alone */
  assert_int_equal(read_replies(w.b, first + 8, &count, &got), M0__EBADMSG);
  assert_true(got.id_read && got.id == 0x1122334455667788ull);
  /* the whole batch reads, and its end names no record */
  assert_int_equal(read_replies(w.b, w.n, &count, &got), 0);
  assert_int_equal(count, 2);
  assert_false(got.id_read);
  /* a head that does not open reads no id */
  wbuf b = w;
  b.b[0] = 2;
  m0__wire_rd r;
  assert_int_equal(m0__wire_open(&r, b.b, b.n), M0__EBADMSG);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_envelope_refusals), cmocka_unit_test(test_names),
      cmocka_unit_test(test_trace_format),      cmocka_unit_test(test_trace_stderr),
      cmocka_unit_test(test_trace_batches),     cmocka_unit_test(test_trace_flush_deadline),
      cmocka_unit_test(test_trace_dropped),     cmocka_unit_test(test_trace_control),
      cmocka_unit_test(test_signals),
      cmocka_unit_test(test_wire_request_roundtrip), cmocka_unit_test(test_wire_reply_roundtrip),
      cmocka_unit_test(test_wire_head_refusals),     cmocka_unit_test(test_wire_request_refusals),
      cmocka_unit_test(test_wire_count_limit),       cmocka_unit_test(test_wire_reply_refusals),
      cmocka_unit_test(test_wire_reply_id_read),     cmocka_unit_test(test_wire_stream),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
