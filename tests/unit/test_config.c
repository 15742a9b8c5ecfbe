/* The configuration as its readers rely on it (docs/reference.md: Reading the
 * command line, Flags and variables, Checks, The doctor; docs/topology.md):
 * m0__config_load's flags, variables and their refusals; every check of
 * config/checks.c refusing what it should and passing what it should; the
 * topology file reader's refusals, each naming the file, the line and the
 * key; a file's "app_actors" and "routes" (every refusal at the offending
 * key's line and column) and their merge with a program's actor kinds and
 * routes (config/appspec.c, the `actors` check); the doctor's JSON and its
 * round trip; m0_serve's exit codes without a server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/errors.h"
#include "config/appspec.h"
#include "config/checks.h"
#include "config/options.h"
#include "config/topofile.h"
#include "runtime/trace.h"
#include "transport/page.h"

extern char **environ;
int m0__doctor(const m0_config *cfg, const m0_app *app, const m0__check *checks, int first_fail);

static char tmpdir[] = "/tmp/m0-test-config-XXXXXX";

static void dummy_view(void *state, const m0_request *req, m0_response *res) {}
static const m0_route routes[] = {{"GET", "/", dummy_view, M0_ON_LOOP}};
static const m0_app app_routes = {.name = "t", .routes = routes, .nroutes = 1};

/* No M0_ variable of the environment ctest runs in leaks into a test. */
static void clear_m0_env(void) {
  char names[64][64];
  int n = 0;
  for (char **e = environ; *e && n < 64; e++)
    if (!strncmp(*e, "M0_", 3)) {
      const char *eq = strchr(*e, '=');
      snprintf(names[n++], sizeof names[0], "%.*s", (int)(eq ? eq - *e : (long)strlen(*e)), *e);
    }
  for (int i = 0; i < n; i++) unsetenv(names[i]);
}

static int setup(void **st) {
  clear_m0_env();
  return 0;
}

/* m0__config_load on a command line given as a NULL-terminated list. */
static int load(m0_config *cfg, char *why, size_t whylen, ...) {
  char *argv[32] = {"prog"};
  int argc = 1;
  va_list ap;
  va_start(ap, whylen);
  for (char *a; argc < 31 && (a = va_arg(ap, char *));) argv[argc++] = a;
  va_end(ap);
  why[0] = 0;
  m0__config_fini(cfg); /* a previous load's topology URLs */
  return m0__config_load(cfg, argc, argv, why, whylen);
}
#define LOAD(cfg, why, ...) load(cfg, why, sizeof why, __VA_ARGS__, (char *)NULL)

static m0_config *cfg_new(void) {
  m0_config *c = calloc(1, sizeof *c);
  assert_non_null(c);
  return c;
}
static void cfg_done(m0_config *c) {
  m0__config_fini(c);
  free(c);
}

static bool has(const char *hay, const char *needle) {
  if (!strstr(hay, needle)) {
    print_error("expected \"%s\" in \"%s\"\n", needle, hay);
    return false;
  }
  return true;
}

/* ---- reading the command line ---- */

static void test_flag_forms(void **st) {
  m0_config *c = cfg_new();
  char why[1200];
  assert_int_equal(LOAD(c, why, "--port", "9000", "--max-body-bytes=12", "--metrics-path", "/m"), 0);
  assert_int_equal(M0__CFG(c, port), 9000);
  assert_int_equal(c->v[M0__O_port].source, M0__SRC_FLAG);
  assert_int_equal(M0__CFG(c, max_body_bytes), 12);
  assert_string_equal(M0__CFGS(c, metrics_path), "/m");
  assert_int_equal(M0__CFG(c, threads), 1); /* untouched: the default */
  assert_int_equal(c->v[M0__O_threads].source, M0__SRC_DEFAULT);
  assert_false(c->help || c->version || c->doctor);
  long v = -1;
  assert_true(m0_config_get(c, "max-body-bytes", &v));
  assert_int_equal(v, 12);
  assert_true(m0_config_get(c, "M0_ACCEPT_SHARE", &v)); /* an option without a flag goes by its variable */
  assert_int_equal(v, 1);
  v = -7;
  assert_false(m0_config_get(c, "no-such-option", &v));
  assert_int_equal(v, -7); /* an unknown name leaves out alone */
  m0__config_fini(c);

  /* -h, --help, --version, --doctor: taken, and nothing else changes */
  assert_int_equal(LOAD(c, why, "-h"), 0);
  assert_true(c->help);
  assert_int_equal(LOAD(c, why, "--help", "--version", "--doctor"), 0);
  assert_true(c->help && c->version && c->doctor);

  /* a boolean flag alone is on; =VALUE reads every documented spelling */
  assert_int_equal(LOAD(c, why, "--access-log"), 0);
  assert_int_equal(M0__CFG(c, access_log), 1);
  const char *on[] = {"1", "true", "yes", "on"}, *off[] = {"0", "false", "no", "off"};
  for (int i = 0; i < 4; i++) {
    char a[40];
    snprintf(a, sizeof a, "--access-log=%s", off[i]);
    assert_int_equal(LOAD(c, why, "--access-log", a), 0);
    assert_int_equal(M0__CFG(c, access_log), 0);
    snprintf(a, sizeof a, "--access-log=%s", on[i]);
    assert_int_equal(LOAD(c, why, a), 0);
    assert_int_equal(M0__CFG(c, access_log), 1);
    setenv("M0_ACCEPT_SHARE", off[i], 1);
    assert_int_equal(LOAD(c, why, "--port", "1"), 0);
    assert_int_equal(M0__CFG(c, accept_share), 0);
    assert_int_equal(c->v[M0__O_accept_share].source, M0__SRC_ENV);
    assert_string_equal(c->env_error, "");
  }
  unsetenv("M0_ACCEPT_SHARE");
  /* the names the doctor prints */
  assert_string_equal(m0__config_name(M0__O_max_connections), "max-connections");
  assert_string_equal(m0__config_name(M0__O_accept_share), "M0_ACCEPT_SHARE");
  assert_true(m0__config_is_str(M0__O_run_dir));
  assert_false(m0__config_is_str(M0__O_port));
  assert_string_equal(m0__source_name(M0__SRC_DEFAULT), "default");
  assert_string_equal(m0__source_name(M0__SRC_ENV), "env");
  assert_string_equal(m0__source_name(M0__SRC_TOPOLOGY), "topology");
  assert_string_equal(m0__source_name(M0__SRC_FLAG), "flag");
  cfg_done(c);
}

/* Each command line that cannot be read is 2 and one reason naming the flag
 * and the value. */
static void test_flag_refusals(void **st) {
  static char longval[2001];
  memset(longval, 'x', 2000);
  struct {
    const char *args[3];
    const char *reason;
  } rows[] = {
      {{"--prot", "9"}, "unknown flag '--prot'"},
      {{"--doctor=1"}, "unknown flag '--doctor'"},
      {{"stray"}, "unexpected argument 'stray'"},
      {{"--"}, "unexpected argument '--'"},
      {{"-p"}, "unexpected argument '-p'"},
      {{"--port"}, "--port needs a value"},
      {{"--port="}, "--port wants a whole number from 0 to 65535, not ''"},
      {{"--port", "-1"}, "--port wants a whole number from 0 to 65535, not '-1'"},
      {{"--port", "65536"}, "not '65536'"},
      {{"--port", "12ab"}, "not '12ab'"},
      {{"--port", "99999999999999999999"}, "not '99999999999999999999'"}, /* overflows a long */
      {{"--max-uri-bytes", "255"}, "--max-uri-bytes wants a whole number from 256 to 1048576"},
      {{"--access-log=maybe"}, "--access-log cannot take 'maybe' (1, true, yes, on or 0, false, no, off)"},
      {{"--access-log="}, "--access-log cannot take ''"},
      {{"--host", "example.com"}, "--host cannot take 'example.com' (an IPv4 or IPv6 address"},
      {{"--host", "300.1.1.1"}, "--host cannot take '300.1.1.1'"},
      {{"--run-dir", longval}, "--run-dir takes at most 1023 bytes, not 2000"},
  };
  m0_config *c = cfg_new();
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    char why[1200] = "";
    char *argv[4] = {"prog", (char *)rows[i].args[0], (char *)rows[i].args[1], NULL};
    int argc = rows[i].args[1] ? 3 : 2;
    int rc = m0__config_load(c, argc, argv, why, sizeof why);
    if (rc != 2 || !strstr(why, rows[i].reason))
      fail_msg("row %zu (%s %s): rc %d, reason \"%s\", want 2 and \"%s\"", i, rows[i].args[0],
               rows[i].args[1] ? rows[i].args[1] : "", rc, why, rows[i].reason);
    m0__config_fini(c);
  }
  cfg_done(c);
}

/* A variable that cannot be read is kept for the environment check (78),
 * never replaced by the default in silence, and a flag does not rescue it. */
static void test_variables(void **st) {
  m0_config *c = cfg_new();
  m0__check ch[M0__CHECK_COUNT];
  char why[1200];
  setenv("M0_PORT", "9001", 1);
  setenv("M0_HOST", "::1", 1);
  assert_int_equal(LOAD(c, why, "--doctor"), 0);
  assert_int_equal(M0__CFG(c, port), 9001);
  assert_int_equal(c->v[M0__O_port].source, M0__SRC_ENV);
  assert_string_equal(M0__CFGS(c, host), "::1");
  assert_int_equal(LOAD(c, why, "--port", "9002"), 0); /* the flag outranks the variable */
  assert_int_equal(M0__CFG(c, port), 9002);
  assert_int_equal(c->v[M0__O_port].source, M0__SRC_FLAG);
  unsetenv("M0_HOST");

  const char *bad[][2] = {{"M0_PORT", "abc"},         {"M0_PORT", ""},          {"M0_ACCESS_LOG", "maybe"},
                          {"M0_HOST", "example.com"}, {"M0_THREADS", "2x"},     {"M0_MAX_URI_BYTES", "1"},
                          {"M0_DRAIN_TIMEOUT_MS", "0"}, {"M0_WORKERS", "99999999999999999999"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    unsetenv("M0_PORT");
    setenv(bad[i][0], bad[i][1], 1);
    assert_int_equal(LOAD(c, why, "--port", "0"), 0);
    char want[200];
    snprintf(want, sizeof want, "cannot read the variable %s=%s", bad[i][0], bad[i][1]);
    int first = m0__checks_run(c, &app_routes, ch);
    if (first != M0__C_environment || strcmp(ch[first].detail, want) || !has(ch[first].fix, "unset it"))
      fail_msg("%s=%s: first failing check %d \"%s\", want environment \"%s\"", bad[i][0], bad[i][1], first,
               first >= 0 ? ch[first].detail : "", want);
    unsetenv(bad[i][0]);
  }
  /* the value read is not the default in disguise: M0_PORT=abc keeps 8080
   * only as a placeholder, and the check names the variable, not the port */
  setenv("M0_PORT", "abc", 1);
  assert_int_equal(LOAD(c, why, "--doctor"), 0);
  assert_int_equal(c->v[M0__O_port].source, M0__SRC_DEFAULT);
  assert_string_equal(c->env_error, "M0_PORT=abc");
  /* two that cannot be read: the first of the table (M0_PORT before
   * M0_THREADS) is the one named */
  setenv("M0_THREADS", "many", 1);
  assert_int_equal(LOAD(c, why, "--doctor"), 0);
  assert_string_equal(c->env_error, "M0_PORT=abc");
  unsetenv("M0_PORT");
  assert_int_equal(LOAD(c, why, "--doctor"), 0);
  assert_string_equal(c->env_error, "M0_THREADS=many");
  unsetenv("M0_THREADS");
  cfg_done(c);
}

/* ---- the checks ---- */

/* Runs the checks on a command line: the first failing check's index. */
static int checks_for(const m0_app *app, m0__check *ch, ...) {
  char *argv[32] = {"prog"};
  int argc = 1;
  va_list ap;
  va_start(ap, ch);
  for (char *a; argc < 31 && (a = va_arg(ap, char *));) argv[argc++] = a;
  va_end(ap);
  m0_config *c = cfg_new();
  char why[1200];
  int rc = m0__config_load(c, argc, argv, why, sizeof why);
  if (rc != 0) fail_msg("the command line was refused: %s", why);
  int first = m0__checks_run(c, app, ch);
  cfg_done(c);
  return first;
}
#define CHECKS(app, ch, ...) checks_for(app, ch, __VA_ARGS__, (char *)NULL)

/* The first failing check is `id`, its detail says `detail` and its fix `fix`. */
static void refused(int first, const m0__check *ch, int id, const char *detail, const char *fix) {
  if (first != id) fail_msg("first failing check %d (%s), want %d (%s)", first, first >= 0 ? ch[first].detail : "-",
                            id, ch[id].name);
  assert_false(ch[id].ok);
  assert_true(has(ch[id].detail, detail));
  assert_true(has(ch[id].fix, fix));
}

static void test_checks_counts_and_modes(void **st) {
  m0__check ch[M0__CHECK_COUNT];
  assert_int_equal(CHECKS(&app_routes, ch, "--port", "0"), -1);
  static const char *const order[] = {"workers-count", "workers-vs-application", "threads-count", "workers-vs-threads",
                                      "threads-vs-application", "blocking-threads-count", "environment", "topology",
                                      "actors", "run-dir", "application", "trace", "supervision",
                                      "pool-routes", "trusted-proxies", "certificates", "plain-port", "io", "descriptors"};
  for (int i = 0; i < M0__CHECK_COUNT; i++) {
    assert_string_equal(ch[i].name, order[i]);
    assert_true(ch[i].ok);
    assert_string_equal(ch[i].fix, "");
  }
  refused(CHECKS(&app_routes, ch, "--workers", "0"), ch, M0__C_workers_count, "workers is 0 (flag)", "from 1 to 4096");
  refused(CHECKS(&app_routes, ch, "--plain-port", "0"), ch, M0__C_plain_port,
          "--plain-port / M0_PLAIN_PORT is 0 but there is no --certfile", "set --certfile");
  refused(CHECKS(&app_routes, ch, "--io", "kqueue"), ch, M0__C_io, "--io kqueue is not a transport", "epoll, uring or auto");
  refused(CHECKS(&app_routes, ch, "--trusted-proxies", "10.0.0.0/8,proxy.example"), ch, M0__C_trusted_proxies,
          "--trusted-proxies: \"proxy.example\" is not an address", "comma-separated");
  assert_int_equal(CHECKS(&app_routes, ch, "--trusted-proxies", "10.0.0.0/8, ::1"), -1);
  assert_string_equal(ch[M0__C_trusted_proxies].detail, "2 trusted: their Forwarded / X-Forwarded-For names the client");
  /* beyond 4096 a pool thread's actor id would be another's (the doctor
   * printed no actors and said ok) */
  refused(CHECKS(&app_routes, ch, "--workers", "4097"), ch, M0__C_workers_count, "workers is 4097", "from 1 to 4096");
  refused(CHECKS(&app_routes, ch, "--threads", "-3"), ch, M0__C_threads_count, "threads is -3 (flag)", "from 1 to 4096");
  refused(CHECKS(&app_routes, ch, "--threads", "5000"), ch, M0__C_threads_count, "threads is 5000", "--threads");
  refused(CHECKS(&app_routes, ch, "--blocking-threads", "-1"), ch, M0__C_blocking_threads_count,
          "blocking-threads is -1 (flag)", "from 0 to 4096");
  refused(CHECKS(&app_routes, ch, "--blocking-threads", "4097"), ch, M0__C_blocking_threads_count,
          "blocking-threads is 4097", "M0_BLOCKING_THREADS");
  /* each count within its bound, but together more threads in one process
   * than any host should start (the doctor said ok to 4097 per worker and
   * 16.8 million loops and pool threads under --threads) */
  refused(CHECKS(&app_routes, ch, "--workers", "4096", "--blocking-threads", "4096"), ch,
          M0__C_blocking_threads_count, "4096 workers with 4096 handler threads each make 16781312 threads, "
          "more than 4096", "at most 4096 loops and handler threads in all: --workers x (1 + --blocking-threads)");
  refused(CHECKS(&app_routes, ch, "--threads", "64", "--blocking-threads", "100"), ch, M0__C_blocking_threads_count,
          "64 loops with 100 handler threads each make 6464 threads", "--threads x (1 + --blocking-threads)");
  assert_int_equal(CHECKS(&app_routes, ch, "--threads", "16", "--blocking-threads", "255"), -1);
  assert_int_equal(CHECKS(&app_routes, ch, "--workers", "512", "--blocking-threads", "7"), -1);
  /* two failures: the first is the refusal, the second is still reported */
  refused(CHECKS(&app_routes, ch, "--workers", "0", "--threads", "0"), ch, M0__C_workers_count, "workers is 0", "--workers");
  assert_false(ch[M0__C_threads_count].ok);
  assert_true(has(ch[M0__C_threads_count].detail, "threads is 0 (flag)"));
  refused(CHECKS(&app_routes, ch, "--workers", "2", "--threads", "3"), ch, M0__C_workers_vs_threads,
          "both workers (2, flag) and threads (3, flag) are above 1", "choose one mode");
  assert_true(has(ch[M0__C_workers_vs_threads - 1].detail, "3 loops"));
}

static void test_checks_application(void **st) {
  m0__check ch[M0__CHECK_COUNT];
  /* max_threads: -1 any number, 0 falls back to max_workers, N at most N */
  m0_app any = app_routes, fallback = app_routes, two = app_routes;
  any.max_threads = -1;
  any.max_workers = 1;
  fallback.max_workers = 3;
  two.max_threads = 2;
  assert_int_equal(m0__app_max_threads(&any), 0);
  assert_int_equal(m0__app_max_threads(&fallback), 3);
  assert_int_equal(m0__app_max_threads(&two), 2);
  assert_int_equal(m0__app_max_threads(&app_routes), 0);
  assert_int_equal(CHECKS(&any, ch, "--threads", "64"), -1);
  assert_true(has(ch[M0__C_threads_vs_application].detail, "t allows any number of loops"));
  refused(CHECKS(&any, ch, "--workers", "2"), ch, M0__C_workers_vs_application,
          "2 workers asked, but t serves at most 1", "set --workers / M0_WORKERS to 1 or fewer");
  refused(CHECKS(&fallback, ch, "--threads", "4"), ch, M0__C_threads_vs_application,
          "4 loops asked, but t serves at most 3", "set --threads / M0_THREADS to 3 or fewer");
  assert_int_equal(CHECKS(&two, ch, "--threads", "2"), -1);
  /* how many, not "limited" */
  assert_string_equal(ch[M0__C_threads_vs_application].detail, "t allows at most 2 loops");
  assert_int_equal(CHECKS(&any, ch, "--port", "0"), -1);
  assert_string_equal(ch[M0__C_workers_vs_application].detail, "t allows at most 1 worker");
  assert_string_equal(ch[M0__C_threads_vs_application].detail, "t allows any number of loops");
  assert_int_equal(CHECKS(&fallback, ch, "--port", "0"), -1);
  assert_string_equal(ch[M0__C_workers_vs_application].detail, "t allows at most 3 workers");
  assert_string_equal(ch[M0__C_threads_vs_application].detail, "t allows at most 3 loops");
  refused(CHECKS(&two, ch, "--threads", "3"), ch, M0__C_threads_vs_application, "at most 2", "2 or fewer");

  /* exactly one of handle and routes */
  m0_app both = app_routes, neither = {.name = "n"}, unnamed = {0}, handler = {.name = "h", .handle = dummy_view};
  both.handle = dummy_view;
  refused(CHECKS(&both, ch, "--port", "0"), ch, M0__C_application, "application t gives both handle and routes",
          "set exactly one of m0_app.handle and m0_app.routes");
  refused(CHECKS(&neither, ch, "--port", "0"), ch, M0__C_application, "application n gives neither handle nor routes",
          "exactly one");
  refused(CHECKS(&unnamed, ch, "--port", "0"), ch, M0__C_application, "application (unnamed) gives neither", "m0_app");
  /* a routes pointer with no routes is no views table (it passed as "answers
   * with a views table" and answered 404 to everything) */
  m0_app empty = {.name = "e", .routes = routes, .nroutes = 0};
  refused(CHECKS(&empty, ch, "--port", "0"), ch, M0__C_application, "application e gives neither handle nor routes",
          "exactly one");
  assert_int_equal(CHECKS(&handler, ch, "--port", "0"), -1);
  assert_string_equal(ch[M0__C_application].detail, "h answers with a handler");
  assert_int_equal(CHECKS(&app_routes, ch, "--port", "0"), -1);
  assert_string_equal(ch[M0__C_application].detail, "t answers with a views table");
}

/* An M0_ variable m0 does not read (a typo: M0_THREAD=2 served one loop in
 * silence) is named by the environment check, never refused, never with its
 * value; the host's own, the application's own (M0_<APP>_) and M0__ are
 * known. A variable out of range is told its range. */
static void test_variables_unknown(void **st) {
  m0__check ch[M0__CHECK_COUNT];
  setenv("M0_THREAD", "2", 1);
  setenv("M0_API_KEY", "sekrit-value", 1);
  setenv("M0_TLS_CERT", "/x", 1);   /* an outside instance's: reserved */
  setenv("M0__WORKER_X", "1", 1);   /* the host's: reserved */
  setenv("M0_T_KNOB", "1", 1);      /* the application t's own */
  setenv("M0_RUN_DIR", "", 1);      /* an option's */
  assert_int_equal(CHECKS(&app_routes, ch, "--port", "0"), -1);
  const char *d = ch[M0__C_environment].detail;
  assert_true(ch[M0__C_environment].ok);
  assert_true(has(d, "2 it does not read, ignored"));
  assert_true(has(d, "M0_THREAD (did you mean M0_THREADS?)"));
  assert_true(has(d, "M0_API_KEY"));
  assert_null(strstr(d, "sekrit-value"));
  assert_true(!strstr(d, "M0_TLS_CERT") && !strstr(d, "M0__WORKER_X") && !strstr(d, "M0_T_KNOB") &&
              !strstr(d, "M0_RUN_DIR"));
  char names[M0__UNKNOWN_MAX][64];
  assert_int_equal(m0__config_unknown_vars("t", names, M0__UNKNOWN_MAX), 2);
  /* another application's knob is not this one's */
  assert_int_equal(m0__config_unknown_vars("host_check", names, M0__UNKNOWN_MAX), 3);
  assert_null(m0__config_near_var("M0_API_KEY"));
  assert_string_equal(m0__config_near_var("M0_WORKER"), "M0_WORKERS");
  assert_string_equal(m0__config_near_var("M0_DRAIN_TIMEOUT_M"), "M0_DRAIN_TIMEOUT_MS");
  unsetenv("M0_THREAD");
  unsetenv("M0_API_KEY");
  unsetenv("M0_TLS_CERT");
  unsetenv("M0__WORKER_X");
  unsetenv("M0_T_KNOB");
  unsetenv("M0_RUN_DIR");
  assert_int_equal(CHECKS(&app_routes, ch, "--port", "0"), -1);
  assert_string_equal(ch[M0__C_environment].detail, "every M0_ variable read");

  /* out of range: the fix says the range, as the flag's refusal does */
  const char *ranges[][3] = {{"M0_PORT", "70000", "set M0_PORT to a whole number from 0 to 65535, or unset it"},
                             {"M0_MAX_URI_BYTES", "1", "set M0_MAX_URI_BYTES to a whole number from 256 to 1048576"},
                             {"M0_THREADS", "2x", "set M0_THREADS to a whole number from 1 to 4096"},
                             {"M0_ACCESS_LOG", "maybe", "set M0_ACCESS_LOG to a boolean (1, true, yes, on or 0"}};
  for (size_t i = 0; i < sizeof ranges / sizeof *ranges; i++) {
    setenv(ranges[i][0], ranges[i][1], 1);
    int first = CHECKS(&app_routes, ch, "--port", "0");
    if (first != M0__C_environment || !has(ch[first].fix, ranges[i][2]))
      fail_msg("%s=%s: check %d fix \"%s\", want \"%s\"", ranges[i][0], ranges[i][1], first,
               first >= 0 ? ch[first].fix : "", ranges[i][2]);
    unsetenv(ranges[i][0]);
  }
}

/* M0_NEEDS_POOL: a view that blocks is refused without a pool, and with
 * M0_ON_LOOP (check pool-routes), naming the route and the fix. */
static void test_checks_pool_routes(void **st) {
  m0__check ch[M0__CHECK_COUNT];
  static const m0_route blocking[] = {{"GET", "/health", dummy_view, M0_ON_LOOP},
                                      {"GET", "/slow", dummy_view, M0_NEEDS_POOL}};
  static const m0_route both[] = {{"POST", "/x", dummy_view, M0_ON_LOOP | M0_NEEDS_POOL}};
  m0_app a = {.name = "b", .routes = blocking, .nroutes = 2}, b = {.name = "c", .routes = both, .nroutes = 1};
  refused(CHECKS(&a, ch, "--port", "0"), ch, M0__C_pool_routes,
          "route GET /slow needs the pool (M0_NEEDS_POOL: its view blocks), but blocking-threads is 0 (default)",
          "--blocking-threads 1 or more");
  refused(CHECKS(&a, ch, "--blocking-threads", "0"), ch, M0__C_pool_routes, "blocking-threads is 0 (flag)",
          "M0_BLOCKING_THREADS");
  assert_int_equal(CHECKS(&a, ch, "--blocking-threads", "1"), -1);
  assert_string_equal(ch[M0__C_pool_routes].detail, "1 route that blocks served by the pool");
  refused(CHECKS(&b, ch, "--blocking-threads", "2"), ch, M0__C_pool_routes,
          "route POST /x is flagged both M0_ON_LOOP and M0_NEEDS_POOL", "keep one flag");
  assert_int_equal(CHECKS(&app_routes, ch, "--port", "0"), -1);
  assert_string_equal(ch[M0__C_pool_routes].detail, "no route needs the pool");
}

/* The descriptors a topology opens at start against RLIMIT_NOFILE: 130
 * loops under 1024 crashed in uv_loop_close, 8 under 64 said "loop.0
 * cannot start" and crashed. */
static void test_checks_descriptors(void **st) {
  m0__check ch[M0__CHECK_COUNT];
  struct rlimit saved, low;
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
  low = saved;
  low.rlim_cur = 1024;
  if (saved.rlim_cur < 1024) skip();
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
  int f130 = CHECKS(&app_routes, ch, "--threads", "130");
  m0__check c130 = ch[M0__C_descriptors];
  int f8 = CHECKS(&app_routes, ch, "--threads", "8");
  m0__check c8 = ch[M0__C_descriptors];
  int fpool = CHECKS(&app_routes, ch, "--threads", "20", "--blocking-threads", "30");
  m0__check cpool = ch[M0__C_descriptors];
  int fw = CHECKS(&app_routes, ch, "--workers", "2", "--blocking-threads", "200");
  m0__check cw = ch[M0__C_descriptors];
  low.rlim_cur = 64;
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
  int f64 = CHECKS(&app_routes, ch, "--threads", "8");
  m0__check c64 = ch[M0__C_descriptors];
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);

  assert_int_equal(f130, M0__C_descriptors);
  assert_false(c130.ok);
  assert_true(has(c130.detail, "the host needs about 14") && has(c130.detail, "(130 loops, 0 handler threads per loop"));
  assert_true(has(c130.detail, "RLIMIT_NOFILE is 1024"));
  assert_true(has(c130.fix, "ulimit -n") && has(c130.fix, "or serve at most 9") && has(c130.fix, "loops here (--threads 9"));
  assert_int_equal(f8, -1);
  assert_true(has(c8.detail, "the host needs about") && has(c8.detail, "of RLIMIT_NOFILE 1024 descriptors to start"));
  assert_int_equal(fpool, M0__C_descriptors);
  assert_true(has(cpool.detail, "(20 loops, 30 handler threads per loop"));
  assert_int_equal(fw, M0__C_descriptors);
  assert_true(has(cw.detail, "each worker needs about") && has(cw.fix, "fewer workers or handler threads"));
  assert_int_equal(f64, M0__C_descriptors);
  assert_true(has(c64.detail, "RLIMIT_NOFILE is 64") && has(c64.fix, "loops here (--threads "));
}


static void test_checks_supervision(void **st) {
  m0__check ch[M0__CHECK_COUNT];
  refused(CHECKS(&app_routes, ch, "--max-requests", "5"), ch, M0__C_supervision,
          "--max-requests asks the supervisor to replace workers, but there are none (workers is 1)", "--workers 2");
  refused(CHECKS(&app_routes, ch, "--worker-timeout-ms", "2000"), ch, M0__C_supervision,
          "--worker-timeout-ms asks the supervisor", "--workers 2 or more");
  refused(CHECKS(&app_routes, ch, "--max-requests-jitter", "3"), ch, M0__C_supervision,
          "--max-requests-jitter asks the supervisor", "leave worker recycling and timeouts off");
  refused(CHECKS(&app_routes, ch, "--workers", "2", "--worker-timeout-ms", "999"), ch, M0__C_supervision,
          "--worker-timeout-ms 999 is shorter than a loop's quietest turn (1000 ms)", "1000 or more");
  assert_int_equal(CHECKS(&app_routes, ch, "--workers", "2", "--worker-timeout-ms", "1000", "--max-requests", "50"), -1);
  assert_string_equal(ch[M0__C_supervision].detail, "recycle after 50 requests, replace a worker stuck past its timeout");
  assert_int_equal(CHECKS(&app_routes, ch, "--workers", "2"), -1);
  assert_string_equal(ch[M0__C_supervision].detail,
                      "recycle after 0 (never) requests, replace a worker stuck (never: no timeout)");
  assert_int_equal(CHECKS(&app_routes, ch, "--port", "0"), -1);
  assert_string_equal(ch[M0__C_supervision].detail, "no supervisor in this mode");
}

/* What the trace check accepts, the tracer can dial: a URL nng refuses
 * synchronously was served untraced without a word. */
static void test_checks_trace(void **st) {
  m0__check ch[M0__CHECK_COUNT];
  assert_int_equal(CHECKS(&app_routes, ch, "--port", "0"), -1);
  assert_string_equal(ch[M0__C_trace].detail, "tracing off");
  assert_int_equal(CHECKS(&app_routes, ch, "--trace", "-"), -1);
  assert_string_equal(ch[M0__C_trace].detail, "trace records to stderr");
  refused(CHECKS(&app_routes, ch, "--trace", "/tmp/trace.log"), ch, M0__C_trace,
          "trace destination /tmp/trace.log is neither - nor an nng URL", "--trace ipc:///path");
  refused(CHECKS(&app_routes, ch, "--trace", "udp://1.2.3.4:5"), ch, M0__C_trace, "neither - nor an nng URL", "-");
  const char *refuse[][2] = {
      {"tcp://127.0.0.1", "a tcp URL is tcp://HOST:PORT"}, {"tcp://:7000", "tcp://HOST:PORT"},
      {"tcp://127.0.0.1:x", "a port from 1 to 65535"},     {"tcp://127.0.0.1:0", "a port from 1 to 65535"},
      {"tcp://127.0.0.1:70000", "a port"},                 {"tcp://127.0.0.1:7000/path", "nothing after it"},
      {"tcp://u@127.0.0.1:7000", "tcp://HOST:PORT"},       {"tcp://[::1", "nng cannot parse it"},
      {"tcp://127.0.0.1:7000?q", "nothing after it"},      {"tcp://127.0.0.1:7000#f", "nothing after it"},
      {"ipc://", "an ipc URL needs a path"},
  };
  for (size_t i = 0; i < sizeof refuse / sizeof *refuse; i++) {
    char want[300];
    snprintf(want, sizeof want, "trace destination %s cannot be dialed: ", refuse[i][0]);
    refused(CHECKS(&app_routes, ch, "--trace", refuse[i][0]), ch, M0__C_trace, want, "--trace -");
    assert_true(has(ch[M0__C_trace].detail, refuse[i][1]));
  }
  const char *accept[] = {"ipc:///tmp/m0-test-config-trace.sock", "tcp://127.0.0.1:1", "tcp://[::1]:1",
                          "tcp://127.0.0.1:1/", "inproc://m0-test-config-trace"};
  for (size_t i = 0; i < sizeof accept / sizeof *accept; i++) {
    assert_int_equal(CHECKS(&app_routes, ch, "--trace", accept[i]), -1);
    char want[200];
    snprintf(want, sizeof want, "trace records to %s", accept[i]);
    assert_string_equal(ch[M0__C_trace].detail, want);
    m0__tracer *t = m0__tracer_new(accept[i], M0__TRACE_HOST); /* and the tracer takes it */
    if (!t) fail_msg("the check accepts --trace %s, the tracer cannot dial it", accept[i]);
    m0__tracer_free(t);
  }
  for (size_t i = 0; i < 2; i++) assert_null(m0__tracer_new(refuse[i][0], M0__TRACE_HOST)); /* what nng itself refuses */
}

static void test_checks_run_dir(void **st) {
  m0__check ch[M0__CHECK_COUNT];
  char d[300], f[300], missing[300];
  snprintf(d, sizeof d, "%s/run", tmpdir);
  snprintf(f, sizeof f, "%s/file", tmpdir);
  snprintf(missing, sizeof missing, "%s/none", tmpdir);
  assert_int_equal(mkdir(d, 0700), 0);
  int fd = open(f, O_CREAT | O_WRONLY, 0600);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(CHECKS(&app_routes, ch, "--port", "0"), -1);
  assert_true(has(ch[M0__C_run_dir].detail, "a private 0700 directory made at start"));
  assert_int_equal(CHECKS(&app_routes, ch, "--run-dir", d), -1);
  assert_true(has(ch[M0__C_run_dir].detail, "mode 0700"));
  char want[400];
  snprintf(want, sizeof want, "run directory %s is missing", missing);
  refused(CHECKS(&app_routes, ch, "--run-dir", missing), ch, M0__C_run_dir, want, "create it with mode 0700");
  snprintf(want, sizeof want, "run directory %s is not a directory", f); /* not "missing": it is there */
  refused(CHECKS(&app_routes, ch, "--run-dir", f), ch, M0__C_run_dir, want, "name a directory");
  char under_file[400];
  snprintf(under_file, sizeof under_file, "%s/x", f); /* ENOTDIR: missing as well */
  snprintf(want, sizeof want, "run directory %s is missing", under_file);
  refused(CHECKS(&app_routes, ch, "--run-dir", under_file), ch, M0__C_run_dir, want, "create it");

  /* a socket path has room for 107 bytes: DIR/loop.0.sock fits in a DIR of
   * 95, not 96 (the host exited 1 at its first mailbox, the doctor said ok);
   * prefork puts every mailbox there: coordinator.sock, pool.I.J.sock */
  char d95[200], d96[200];
  snprintf(d95, sizeof d95, "%s/%0*d", tmpdir, 95 - (int)strlen(tmpdir) - 1, 0);
  snprintf(d96, sizeof d96, "%s/%0*d", tmpdir, 96 - (int)strlen(tmpdir) - 1, 0);
  assert_int_equal(strlen(d95), 95);
  assert_int_equal(mkdir(d95, 0700), 0);
  assert_int_equal(mkdir(d96, 0700), 0);
  assert_int_equal(CHECKS(&app_routes, ch, "--run-dir", d95), -1);
  snprintf(want, sizeof want, "run directory %s is too long for its sockets: the path of its loop.0.sock would be 108 "
           "bytes, a socket's has room for 107", d96);
  refused(CHECKS(&app_routes, ch, "--run-dir", d96), ch, M0__C_run_dir, want, "at most 95 bytes");
  snprintf(want, sizeof want, "%s is too long for its sockets: the path of its coordinator.sock would be 112 bytes", d95);
  refused(CHECKS(&app_routes, ch, "--run-dir", d95, "--workers", "2", "--blocking-threads", "1"), ch, M0__C_run_dir,
          want, "at most 90 bytes");
  /* the longest pool thread's name within the bound of 4096 loops and pool
   * threads in all (pool.1000.1000.sock is refused before: 1002001 threads) */
  snprintf(want, sizeof want, "%s is too long for its sockets: the path of its pool.1000.2.sock would be 112", d95);
  refused(CHECKS(&app_routes, ch, "--run-dir", d95, "--workers", "1001", "--blocking-threads", "3"), ch,
          M0__C_run_dir, want, "at most 90 bytes");
  /* threads over inproc: only loop.i.sock goes there (loop.10.sock in a 95 is 108) */
  assert_int_equal(CHECKS(&app_routes, ch, "--run-dir", d95, "--threads", "10", "--blocking-threads", "1"), -1);
  refused(CHECKS(&app_routes, ch, "--run-dir", d95, "--threads", "11"), ch, M0__C_run_dir, "its loop.10.sock would be 108",
          "at most 94 bytes");
  rmdir(d95);
  rmdir(d96);
  assert_int_equal(chmod(d, 0750), 0);
  snprintf(want, sizeof want, "run directory %s has mode 0750, open to other users", d);
  refused(CHECKS(&app_routes, ch, "--run-dir", d), ch, M0__C_run_dir, want, "chmod 0700");
  assert_int_equal(chmod(d, 0700), 0);
  if (geteuid() == 0) {
    /* one this user cannot even look at (its parent is 0700 root's): not
     * "missing", it may well be there */
    assert_int_equal(setresuid(65534, 65534, 0), 0);
    int first = CHECKS(&app_routes, ch, "--run-dir", d);
    assert_int_equal(setresuid(0, 0, 0), 0);
    snprintf(want, sizeof want, "run directory %s cannot be looked at: Permission denied", d);
    refused(first, ch, M0__C_run_dir, want, "give this user access to it");
    assert_int_equal(chmod(tmpdir, 0711), 0);
    /* another user's directory: chown it, then look as that user */
    assert_int_equal(chown(d, 65534, 65534), 0);
    snprintf(want, sizeof want, "run directory %s belongs to uid 65534, not this user", d);
    refused(CHECKS(&app_routes, ch, "--run-dir", d), ch, M0__C_run_dir, want, "a directory this user owns");
    assert_int_equal(chown(d, 0, 0), 0);
    /* a directory this user cannot write: root writes everywhere, so the
     * check runs as uid 65534 (real and effective: access() reads the real
     * one), the saved uid 0 to come back */
    assert_int_equal(setresuid(65534, 65534, 0), 0);
    first = CHECKS(&app_routes, ch, "--run-dir", d);
    assert_int_equal(setresuid(0, 0, 0), 0);
    assert_int_equal(chmod(tmpdir, 0700), 0);
    snprintf(want, sizeof want, "run directory %s is not writable", d);
    refused(first, ch, M0__C_run_dir, want, "chown");
  } else {
    assert_int_equal(chmod(d, 0500), 0);
    snprintf(want, sizeof want, "run directory %s is not writable", d);
    refused(CHECKS(&app_routes, ch, "--run-dir", d), ch, M0__C_run_dir, want, "chown");
    assert_int_equal(chmod(d, 0700), 0);
  }
  rmdir(d);
  unlink(f);
}

/* ---- topology files ---- */

static const char *topo_write(const char *name, const char *text) {
  static char paths[8][300];
  static int next;
  char *path = paths[next++ % 8];
  snprintf(path, sizeof paths[0], "%s/%s", tmpdir, name);
  FILE *fp = fopen(path, "w");
  assert_non_null(fp);
  fputs(text, fp);
  fclose(fp);
  return path;
}

/* The file is refused: the error names the file, `line` (0: any line) and
 * says `what`; the topology check carries it and its fix. */
static void topo_refused(const char *label, const char *text, int line, const char *what) {
  const char *path = topo_write("t.json", text);
  m0_config *c = cfg_new();
  char why[1200], at[400];
  assert_int_equal(LOAD(c, why, "--topology", path), 0);
  if (line) snprintf(at, sizeof at, "%s line %d column ", path, line);
  else snprintf(at, sizeof at, "%s ", path);
  if (strncmp(c->topology_error, at, strlen(at)) || !strstr(c->topology_error, what))
    fail_msg("%s: the error is \"%s\", want it to begin \"%s\" and say \"%s\"", label, c->topology_error, at, what);
  m0__check ch[M0__CHECK_COUNT];
  int first = m0__checks_run(c, &app_routes, ch);
  assert_int_equal(first, M0__C_topology);
  char detail[1400];
  snprintf(detail, sizeof detail, "topology file %s", c->topology_error);
  assert_string_equal(ch[first].detail, detail);
  assert_true(has(ch[first].fix, "correct the file"));
  /* nothing of a refused file is applied */
  assert_int_equal(c->ntopo_urls, 0);
  assert_int_equal(c->v[M0__O_threads].source, M0__SRC_DEFAULT);
  cfg_done(c);
}

static void test_topology_refusals(void **st) {
  topo_refused("a list", "[1, 2]\n", 1, "not a JSON object");
  topo_refused("empty", "", 1, "expected");
  topo_refused("a syntax error", "{\n  \"mode\": \"threads\",\n  \"loops\" 2\n}\n", 3, "");
  topo_refused("a duplicate key", "{\n  \"loops\": 2,\n  \"loops\": 3\n}\n", 3, "duplicate object key");
  topo_refused("unknown key", "{\n  \"mode\": \"threads\",\n  \"colour\": \"blue\"\n}\n", 3, "unknown key \"colour\"");
  /* a key spelled with an escape is still the key it spells */
  topo_refused("unknown escaped key", "{\"c\\u006flour\": 1}", 1, "unknown key \"colour\"");
  topo_refused("mode not a string", "{\n  \"mode\": 2\n}\n", 2, "mode must be \"single\", \"threads\" or \"prefork\"");
  topo_refused("mode unknown", "{\n\n  \"mode\": \"cluster\"\n}\n", 3, "mode must be");
  topo_refused("loops a string", "{\n  \"mode\": \"threads\",\n  \"loops\": \"2\"\n}\n", 3,
               "loops must be a whole number from 1 to 4096");
  topo_refused("loops a fraction", "{\"mode\": \"threads\", \"loops\": 2.5}", 1, "loops must be a whole number");
  topo_refused("loops 0", "{\"mode\": \"threads\", \"loops\": 0}", 1, "loops must be");
  topo_refused("loops 4097", "{\"mode\": \"prefork\",\n\"loops\": 4097}", 2, "from 1 to 4096");
  topo_refused("single with 2 loops", "{\"mode\": \"single\",\n \"loops\": 2}", 2, "mode \"single\" has one loop");
  topo_refused("no mode, 2 loops", "{\"loops\": 2}", 1, "mode \"single\" has one loop"); /* single is the default */
  topo_refused("transport a number", "{\n\"transport\": 4}", 2, "transport must be \"inproc\", \"ipc\" or \"tcp\"");
  topo_refused("transport unknown", "{\"transport\": \"udp\"}", 1, "transport must be");
  topo_refused("prefork over inproc", "{\"mode\": \"prefork\", \"loops\": 2,\n \"transport\": \"inproc\"}", 2,
               "mode prefork crosses processes: inproc cannot (use ipc or tcp)");
  topo_refused("handler_threads a string", "{\"handler_threads\": \"1\"}", 1,
               "handler_threads must be a whole number from 0 to 4096");
  topo_refused("handler_threads -1", "{\n\"handler_threads\": -1}", 2, "handler_threads must be");
  topo_refused("handler_threads 4097", "{\"handler_threads\": 4097}", 1, "handler_threads must be");
  topo_refused("connections_per_loop 0", "{\n\n\"connections_per_loop\": 0}", 3,
               "connections_per_loop must be from 1 to 1000000");
  topo_refused("connections_per_loop too many", "{\"connections_per_loop\": 1000001}", 1, "connections_per_loop");
  topo_refused("connections_per_loop a bool", "{\"connections_per_loop\": true}", 1, "connections_per_loop");
  topo_refused("accept_sharing a string", "{\n \"accept_sharing\": \"yes\"}", 2, "accept_sharing must be true or false");
  topo_refused("accept_sharing 1", "{\"accept_sharing\": 1}", 1, "accept_sharing must be true or false");
  topo_refused("actors an object", "{\n\"actors\": {}}", 2, "actors must be a list of {\"name\", \"url\"}");
}

#define A(n, u) "{\"name\": \"" n "\", \"url\": \"" u "\"}"

static void test_topology_actors(void **st) {
  topo_refused("an actor without url",
               "{\"mode\": \"threads\", \"loops\": 2, \"actors\": [\n" A("coordinator", "inproc://a") ",\n"
               "{\"name\": \"producer\"},\n" A("loop.0", "inproc://c") ",\n" A("loop.1", "inproc://d") "]}",
               3, "actors[1] has no \"name\" or no \"url\" string (the topology's is \"producer\")");
  topo_refused("an actor that is a name only",
               "{\"actors\": [\n" A("coordinator", "inproc://a") ",\n\"producer\",\n" A("loop.0", "inproc://c") "]}", 2,
               "actors[1] has no \"name\" or no \"url\" string (the topology's is \"producer\")");
  topo_refused("an actor too many, without a name",
               "{\"actors\": [" A("coordinator", "inproc://a") ", " A("producer", "inproc://b") ", "
               A("loop.0", "inproc://c") ",\n {\"url\": \"inproc://d\"}]}",
               1, "actors lists 4 actors, the file declares 3: actors[3] (unnamed) is one too many");
  topo_refused("an actor's url a number",
               "{\"actors\": [\n{\"name\": \"coordinator\", \"url\": 7}]}", 2, "actors[0] has no \"name\" or no \"url\"");
  topo_refused("out of order",
               "{\"mode\": \"threads\", \"loops\": 2, \"actors\": [\n" A("coordinator", "inproc://a") ",\n"
               A("producer", "inproc://b") ",\n" A("loop.1", "inproc://c") ",\n" A("loop.0", "inproc://d") "]}",
               4, "actors[2] is \"loop.1\" where the topology has \"loop.0\"");
  topo_refused("a url of another transport",
               "{\"transport\": \"tcp\", \"actors\": [\n" A("coordinator", "tcp://127.0.0.1:1") ",\n"
               A("producer", "ipc:///tmp/p.sock") ",\n" A("loop.0", "tcp://127.0.0.1:3") "]}",
               3, "actors[1] (producer) has the URL \"ipc:///tmp/p.sock\", not a tcp:// one");
  topo_refused("a url without ://",
               "{\"actors\": [" A("coordinator", "inproc:/a") ", " A("producer", "inproc://b") ", "
               A("loop.0", "inproc://c") "]}", 1, "actors[0] (coordinator) has the URL \"inproc:/a\", not a inproc:// one");
  char text[2000], longurl[300];
  memset(longurl, 'u', sizeof longurl - 1);
  longurl[sizeof longurl - 1] = 0;
  snprintf(text, sizeof text, "{\"actors\": [" A("coordinator", "inproc://a") ",\n" A("producer", "inproc://%s") ", "
           A("loop.0", "inproc://c") "]}", longurl);
  topo_refused("a url too long", text, 2, "actors[1] (producer) has a URL of 308 bytes, longer than 255");
  topo_refused("two actors at one address",
               "{\"actors\": [" A("coordinator", "inproc://a") ",\n" A("producer", "inproc://b") ",\n"
               A("loop.0", "inproc://a") "]}", 3, "actors[2] (loop.0) has the URL of actors[0] (coordinator)");
  topo_refused("an actor missing",
               "{\"mode\": \"threads\", \"loops\": 2,\n \"actors\": [" A("coordinator", "inproc://a") ", "
               A("producer", "inproc://b") ", " A("loop.0", "inproc://c") "]}",
               2, "actors lists 3 of the 4 actors the file declares: \"loop.1\" is missing");
  topo_refused("an actor too many",
               "{\"actors\": [" A("coordinator", "inproc://a") ", " A("producer", "inproc://b") ", "
               A("loop.0", "inproc://c") ",\n" A("pool.0.0", "inproc://d") "]}",
               2, "actors lists 4 actors, the file declares 3: actors[3] (pool.0.0) is one too many");
  /* files that are not files, or too big to be one */
  char path[300];
  snprintf(path, sizeof path, "%s/none.json", tmpdir);
  m0_config *c = cfg_new();
  char why[1200], want[600];
  assert_int_equal(LOAD(c, why, "--topology", path), 0);
  snprintf(want, sizeof want, "%s cannot be read: No such file or directory", path);
  assert_string_equal(c->topology_error, want);
  assert_int_equal(LOAD(c, why, "--topology", tmpdir), 0);
  snprintf(want, sizeof want, "%s is not a regular file (a directory)", tmpdir);
  assert_string_equal(c->topology_error, want);
  /* a FIFO: its open would wait for a writer for ever (base/file.h) */
  char fifo[320];
  snprintf(fifo, sizeof fifo, "%s/fifo.json", tmpdir);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  assert_int_equal(LOAD(c, why, "--topology", fifo), 0);
  snprintf(want, sizeof want, "%s is not a regular file (a FIFO)", fifo);
  assert_string_equal(c->topology_error, want);
  unlink(fifo);
  cfg_done(c);
  /* a valid object padded past 1 MiB was cut at 1 MiB and refused as a
   * syntax error at the cut */
  size_t big = (1u << 20) + 10;
  char *pad = malloc(big + 1);
  assert_non_null(pad);
  memset(pad, ' ', big);
  pad[0] = '{';
  pad[big - 1] = '}';
  pad[big] = 0;
  const char *p = topo_write("big.json", pad);
  free(pad);
  c = cfg_new();
  assert_int_equal(LOAD(c, why, "--topology", p), 0);
  snprintf(want, sizeof want, "%s is larger than 1048576 bytes: not a topology file", p);
  assert_string_equal(c->topology_error, want);
  cfg_done(c);
}

/* A file that is read: what it sets, from where, and what flags override. */
static void test_topology_applied(void **st) {
  m0_config *c = cfg_new();
  char why[1200];
  m0__check ch[M0__CHECK_COUNT];
  /* {} is single mode with nothing else said */
  assert_int_equal(LOAD(c, why, "--topology", topo_write("empty.json", "{}")), 0);
  assert_string_equal(c->topology_error, "");
  assert_int_equal(M0__CFG(c, threads), 1);
  assert_int_equal(c->v[M0__O_threads].source, M0__SRC_TOPOLOGY);
  assert_int_equal(c->v[M0__O_blocking_threads].source, M0__SRC_DEFAULT);
  assert_string_equal(c->topo_transport, "");
  assert_int_equal(m0__checks_run(c, &app_routes, ch), -1);
  char want[500];
  snprintf(want, sizeof want, "topology file %s/empty.json read", tmpdir);
  assert_string_equal(ch[M0__C_topology].detail, want);
  /* whitespace past the first 4 KiB read: the whole file is read */
  char text[12000];
  memset(text, ' ', sizeof text);
  snprintf(text + 10000, sizeof text - 10000, "{\"mode\": \"threads\", \"loops\": 3, \"accept_sharing\": false}");
  text[0] = '\n';
  assert_int_equal(LOAD(c, why, "--topology", topo_write("padded.json", text)), 0);
  assert_string_equal(c->topology_error, "");
  assert_int_equal(M0__CFG(c, threads), 3);
  assert_int_equal(M0__CFG(c, accept_share), 0);
  assert_int_equal(c->v[M0__O_accept_share].source, M0__SRC_TOPOLOGY);
  /* every key, and the actors' URLs as written */
  const char *full = "{\"mode\": \"prefork\", \"loops\": 2, \"handler_threads\": 1, \"connections_per_loop\": 77,"
                     " \"accept_sharing\": true, \"transport\": \"ipc\", \"actors\": ["
                     A("coordinator", "ipc://<run-dir>/c.sock") ", " A("producer", "ipc://<run-dir>/p.sock") ", "
                     A("worker.0", "ipc://<run-dir>/w0.sock") ", " A("worker.1", "ipc://<run-dir>/w1.sock") ", "
                     A("loop.0", "ipc://<run-dir>/l0.sock") ", " A("loop.1", "ipc://<run-dir>/l1.sock") ", "
                     A("pool.0.0", "ipc://<run-dir>/p00.sock") ", " A("pool.1.0", "ipc://<run-dir>/p10.sock") "]}";
  const char *fp = topo_write("full.json", full);
  assert_int_equal(LOAD(c, why, "--topology", fp), 0);
  assert_string_equal(c->topology_error, "");
  assert_int_equal(M0__CFG(c, workers), 2);
  assert_int_equal(c->v[M0__O_workers].source, M0__SRC_TOPOLOGY);
  assert_int_equal(M0__CFG(c, blocking_threads), 1);
  assert_int_equal(M0__CFG(c, max_connections), 77);
  assert_int_equal(M0__CFG(c, accept_share), 1);
  assert_string_equal(c->topo_transport, "ipc");
  assert_int_equal(c->ntopo_urls, 8);
  assert_string_equal(c->topo_urls[0], "ipc://<run-dir>/c.sock");
  assert_string_equal(c->topo_urls[7], "ipc://<run-dir>/p10.sock");
  assert_int_equal(m0__checks_run(c, &app_routes, ch), -1);
  /* a flag outranks the file; one that changes the actor count makes m0
   * build the URLs (ipc), which the check says */
  assert_int_equal(LOAD(c, why, "--topology", fp, "--blocking-threads", "2", "--max-connections", "5"), 0);
  assert_int_equal(M0__CFG(c, blocking_threads), 2);
  assert_int_equal(c->v[M0__O_blocking_threads].source, M0__SRC_FLAG);
  assert_int_equal(M0__CFG(c, max_connections), 5);
  assert_int_equal(c->v[M0__O_workers].source, M0__SRC_TOPOLOGY);
  assert_int_equal(m0__checks_run(c, &app_routes, ch), -1);
  assert_true(has(ch[M0__C_topology].detail, "the flags change its topology, so m0 builds every actor's URL"));
  /* the same in a tcp file is refused: m0 cannot invent tcp addresses */
  const char *tcp = "{\"mode\": \"threads\", \"loops\": 2, \"transport\": \"tcp\", \"actors\": ["
                    A("coordinator", "tcp://127.0.0.1:1") ", " A("producer", "tcp://127.0.0.1:2") ", "
                    A("loop.0", "tcp://127.0.0.1:3") ", " A("loop.1", "tcp://127.0.0.1:4") "]}";
  const char *tp = topo_write("tcp.json", tcp);
  assert_int_equal(LOAD(c, why, "--topology", tp), 0);
  assert_int_equal(m0__checks_run(c, &app_routes, ch), -1);
  assert_int_equal(LOAD(c, why, "--topology", tp, "--threads", "3"), 0);
  snprintf(want, sizeof want, "topology file %s lists 4 tcp actors, but the flags and variables make a topology of 5",
           tp);
  refused(m0__checks_run(c, &app_routes, ch), ch, M0__C_topology, want, "list every actor's tcp URL");
  /* an inproc file under --workers 2 */
  const char *ip = topo_write("inproc.json", "{\"transport\": \"inproc\"}");
  assert_int_equal(LOAD(c, why, "--topology", ip, "--workers", "2"), 0);
  snprintf(want, sizeof want, "topology file %s says transport inproc, but --workers 2 crosses processes", ip);
  refused(m0__checks_run(c, &app_routes, ch), ch, M0__C_topology, want, "set \"transport\" to ipc or tcp");
  /* M0_TOPOLOGY names the file as --topology does */
  setenv("M0_TOPOLOGY", tp, 1);
  assert_int_equal(LOAD(c, why, "--port", "0"), 0);
  assert_int_equal(c->ntopo_urls, 4);
  assert_int_equal(M0__CFG(c, threads), 2);
  unsetenv("M0_TOPOLOGY");
  cfg_done(c);
}

/* ---- a file's "app_actors" and "routes" ---- */

/* The file is refused at the nth (1-based) occurrence of `at` in the text:
 * "FILE line L column C: " then a reason that says `what` (and so names the
 * key path); the topology check carries it; nothing of the file applies. */
static void app_refused(const char *label, const char *text, const char *at, int nth, const char *what) {
  const char *p = text;
  for (int k = 0; p && k < nth; k++) p = strstr(k ? p + 1 : p, at);
  if (!p) fail_msg("%s: the test's text holds no occurrence %d of %s", label, nth, at);
  int line = 1, col = 1;
  for (const char *q = text; q < p; q++) {
    if (*q == '\n') {
      line++;
      col = 1;
    } else col++;
  }
  const char *path = topo_write("app.json", text);
  m0_config *c = cfg_new();
  char why[1200], want[400];
  assert_int_equal(LOAD(c, why, "--topology", path), 0);
  snprintf(want, sizeof want, "%s line %d column %d: ", path, line, col);
  if (strncmp(c->topology_error, want, strlen(want)) || !strstr(c->topology_error, what))
    fail_msg("%s: the error is \"%s\", want it to begin \"%s\" and say \"%s\"", label, c->topology_error, want, what);
  m0__check ch[M0__CHECK_COUNT];
  assert_int_equal(m0__checks_run(c, &app_routes, ch), M0__C_topology);
  assert_true(has(ch[M0__C_topology].detail, c->topology_error));
  assert_true(has(ch[M0__C_topology].fix, "correct the file"));
  assert_int_equal(c->napp_actors, 0);
  assert_null(c->app_actors);
  assert_int_equal(c->nfile_routes, 0);
  assert_null(c->file_routes);
  assert_int_equal(c->ntopo_urls, 0);
  assert_int_equal(c->v[M0__O_threads].source, M0__SRC_DEFAULT);
  cfg_done(c);
}

#define EXT(n) "{\"name\": \"" n "\", \"placement\": \"external\"}"
#define RT(m, p, a) "{\"method\": \"" m "\", \"pattern\": \"" p "\", \"actor\": \"" a "\"}"

static void test_app_actors_refusals(void **st) {
  app_refused("app_actors an object", "{\"mode\": \"single\",\n \"app_actors\": {}}", "\"app_actors\"", 1,
              "app_actors must be a list of {\"name\"");
  app_refused("app_actors a string", "{\"app_actors\": \"echo\"}", "\"app_actors\"", 1, "app_actors must be a list");
  app_refused("an entry a string", "{\"app_actors\": [" EXT("a") ",\n  \"b\"]}", "\"b\"", 1,
              "app_actors[1] must be an object");
  app_refused("an unknown key", "{\"app_actors\": [\n  " EXT("a") ",\n  {\"name\": \"b\", \"colour\": 1}]}",
              "\"colour\"", 1, "app_actors[1] has the unknown key \"colour\" (its keys are name, placement");
  /* a key spelled with an escape is the key it spells, found where it is */
  app_refused("an escaped key", "{\"app_actors\": [\n  " EXT("a") ",\n  {\"name\": \"b\", \"pl\\u0061cement\": 3}]}",
              "\"pl\\u0061", 1, "app_actors[1].placement must be \"thread\", \"process\", \"external\" or \"nats\"");
  app_refused("no name", "{\"app_actors\": [" EXT("a") ",\n  {\"placement\": \"thread\"}]}", "{\"placement\"", 1,
              "app_actors[1] has no \"name\" (give every actor a name of 1 to 48 bytes of a-z, 0-9, _ and -)");
  app_refused("a name a number", "{\"app_actors\": [" EXT("a") ",\n {\"name\": 7, \"placement\": \"thread\"}]}",
              "\"name\"", 2, "app_actors[1].name must be a string of 1 to 48 bytes");
  app_refused("a name in capitals", "{\"app_actors\": [\n {\"name\": \"Echo\", \"placement\": \"thread\"}]}",
              "\"name\"", 1, "app_actors[0].name is \"Echo\": an actor's name is 1 to 48 bytes of a-z, 0-9, _ and -");
  app_refused("a name empty", "{\"app_actors\": [{\"placement\": \"external\", \"name\": \"\"}]}", "\"name\"", 1,
              "app_actors[0].name is \"\"");
  app_refused("a name with a dot", "{\"app_actors\": [" EXT("a.b") "]}", "\"name\"", 1, "app_actors[0].name is \"a.b\"");
  app_refused("a name of 49 bytes", "{\"app_actors\": [" EXT("abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcde") "]}",
              "\"name\"", 1, "app_actors[0].name is \"abcdefghij");
  app_refused("two entries of one name",
              "{\"app_actors\": [\n  " EXT("a") ",\n  " EXT("b") ",\n  {\"name\": \"a\", \"placement\": \"thread\"}]}",
              "\"name\"", 3, "app_actors[2].name \"a\" is app_actors[0]'s too (give each actor one entry)");
  app_refused("no placement", "{\"app_actors\": [" EXT("a") ",\n  {\"name\": \"b\"}]}", "{\"name\": \"b\"", 1,
              "app_actors[1] (b) has no \"placement\" (say \"thread\", \"process\", \"external\" or \"nats\")");
  app_refused("placement misspelt", "{\"app_actors\": [\n  " EXT("a") ",\n  {\"name\": \"b\", \"placement\": \"threads\"}]}",
              "\"placement\"", 2, "app_actors[1].placement must be \"thread\", \"process\", \"external\" or \"nats\"");
  app_refused("placement a bool", "{\"app_actors\": [{\"name\": \"b\", \"placement\": true}]}", "\"placement\"", 1,
              "app_actors[0].placement must be");
  app_refused("instances of an external actor",
              "{\"app_actors\": [\n  {\"name\": \"b\", \"placement\": \"external\", \"instances\": 2}]}", "\"instances\"", 1,
              "app_actors[0].instances is for thread and process placement: an external actor's instances are the "
              "programs that dial it (drop the key)");
  const char *inst[] = {"0", "65", "\"2\"", "1.5", "-1"};
  for (size_t i = 0; i < sizeof inst / sizeof *inst; i++) {
    char text[300];
    snprintf(text, sizeof text, "{\"app_actors\": [{\"name\": \"a\", \"placement\": \"process\", \"instances\": 1},\n"
             "  {\"name\": \"b\", \"placement\": \"thread\", \"instances\": %s}]}", inst[i]);
    app_refused("instances out of range", text, "\"instances\"", 2,
                "app_actors[1].instances must be a whole number from 1 to 64");
  }
  app_refused("a url for a thread", "{\"app_actors\": [{\"name\": \"b\", \"placement\": \"thread\",\n \"url\": \"ipc:///x\"}]}",
              "\"url\"", 1,
              "app_actors[0].url is for process, external and nats placement: a thread actor has no URL (drop the key)");
  app_refused("a url a number", "{\"app_actors\": [{\"name\": \"b\", \"placement\": \"external\", \"url\": 7}]}", "\"url\"", 1,
              "app_actors[0].url must be a string, an ipc:// or tcp:// URL");
  app_refused("an inproc url", "{\"app_actors\": [{\"name\": \"b\", \"placement\": \"process\", \"url\": \"inproc://b\"}]}",
              "\"url\"", 1, "app_actors[0].url \"inproc://b\" is inproc, which no other process can dial (use ipc:// or tcp://)");
  app_refused("an http url", "{\"app_actors\": [{\"name\": \"b\", \"placement\": \"external\", \"url\": \"http://x:1\"}]}",
              "\"url\"", 1, "app_actors[0].url \"http://x:1\" is not an ipc:// or tcp:// URL");
  app_refused("an empty url", "{\"app_actors\": [{\"name\": \"b\", \"placement\": \"external\", \"url\": \"\"}]}",
              "\"url\"", 1, "app_actors[0].url \"\" is not an ipc:// or tcp:// URL");
  char text[1200], u[300];
  memset(u, 'u', 256 - 7);
  u[256 - 7] = 0; /* "ipc:///" + 249: 256 bytes */
  snprintf(text, sizeof text, "{\"app_actors\": [{\"name\": \"b\", \"placement\": \"external\",\n \"url\": \"ipc:///%s\"}]}", u);
  app_refused("a url of 256 bytes", text, "\"url\"", 1, "app_actors[0].url is 256 bytes, longer than 255 (shorten it)");
  app_refused("two actors at one url",
              "{\"app_actors\": [{\"name\": \"a\", \"placement\": \"external\", \"url\": \"tcp://127.0.0.1:7\"},\n"
              " {\"name\": \"b\", \"placement\": \"process\", \"url\": \"tcp://127.0.0.1:7\"}]}", "\"url\"", 2,
              "app_actors[1] (b) would listen at tcp://127.0.0.1:7, as app_actors[0] (a) does (give each actor its own url)");
  app_refused("a url that is another's built one",
              "{\"app_actors\": [" EXT("a") ",\n {\"name\": \"b\", \"placement\": \"external\", "
              "\"url\": \"ipc://<run-dir>/actor.a.sock\"}]}", "\"url\"", 1,
              "app_actors[1] (b) would listen at ipc://<run-dir>/actor.a.sock, as app_actors[0] (a) does");
  app_refused("restart of an external actor",
              "{\"app_actors\": [{\"name\": \"b\", \"placement\": \"external\",\n \"restart\": {\"intensity\": 1}}]}",
              "\"restart\"", 1,
              "app_actors[0].restart is for process and thread placement: only an instance the host runs is restarted "
              "(drop the key)");
  app_refused("restart a number", "{\"app_actors\": [{\"name\": \"b\", \"placement\": \"process\", \"restart\": 5}]}",
              "\"restart\"", 1,
              "app_actors[0].restart must be an object {\"intensity\": 0..1000, \"period_ms\": 1..86400000}");
  app_refused("restart's unknown key",
              "{\"app_actors\": [{\"name\": \"b\", \"placement\": \"process\",\n \"restart\": {\"intensity\": 1, \"period\": 5}}]}",
              "\"period\"", 1, "app_actors[0].restart has the unknown key \"period\" (its keys are intensity and period_ms)");
  const char *intensity[] = {"-1", "1001", "\"5\"", "2.0"};
  for (size_t i = 0; i < sizeof intensity / sizeof *intensity; i++) {
    snprintf(text, sizeof text, "{\"app_actors\": [{\"name\": \"a\", \"placement\": \"process\", \"restart\": "
             "{\"intensity\": 3}},\n {\"name\": \"b\", \"placement\": \"process\", \"restart\": {\"intensity\": %s}}]}",
             intensity[i]);
    app_refused("restart.intensity out of range", text, "\"intensity\"", 2,
                "app_actors[1].restart.intensity must be a whole number from 0 to 1000");
  }
  const char *period[] = {"0", "86400001", "null"};
  for (size_t i = 0; i < sizeof period / sizeof *period; i++) {
    snprintf(text, sizeof text, "{\"app_actors\": [{\"name\": \"b\", \"placement\": \"process\", \"restart\": "
             "{\"period_ms\": %s,\n \"intensity\": 1}}]}", period[i]);
    app_refused("restart.period_ms out of range", text, "\"period_ms\"", 1,
                "app_actors[0].restart.period_ms must be a whole number from 1 to 86400000");
  }
  const char *queue[] = {"0", "65537", "\"8\"", "false"};
  for (size_t i = 0; i < sizeof queue / sizeof *queue; i++) {
    snprintf(text, sizeof text, "{\"app_actors\": [{\"name\": \"a\", \"placement\": \"thread\", \"queue\": 8},\n"
             " {\"name\": \"b\", \"placement\": \"external\", \"queue\": %s}]}", queue[i]);
    app_refused("queue out of range", text, "\"queue\"", 2, "app_actors[1].queue must be a whole number from 1 to 65536");
  }
  /* 65 entries: more than an application holds */
  char *many = malloc(65 * 64 + 100);
  assert_non_null(many);
  strcpy(many, "{\"app_actors\": [");
  for (int i = 0; i < 65; i++)
    sprintf(many + strlen(many), "%s\n {\"name\": \"a%d\", \"placement\": \"external\"}", i ? "," : "", i);
  strcat(many, "]}");
  app_refused("65 actors", many, "{\"name\": \"a64\"", 1, "app_actors lists 65 actors, more than 64: declare at most 64");
  free(many);
  /* a file whose actors are fine and whose app_actors are not applies
   * neither (not the actors' URLs either) */
  app_refused("actors fine, app_actors not",
              "{\"actors\": [" A("coordinator", "inproc://a") ", " A("producer", "inproc://b") ", "
              A("loop.0", "inproc://c") "],\n \"app_actors\": [{\"name\": \"x\", \"placement\": \"nowhere\"}]}",
              "\"placement\"", 1, "app_actors[0].placement must be");
}

static void test_routes_refusals(void **st) {
  app_refused("routes an object", "{\n\"routes\": {\"GET /\": \"a\"}}", "\"routes\"", 1,
              "routes must be a list of {\"method\": ..., \"pattern\": ..., \"actor\": ...}");
  app_refused("a route a string", "{\"routes\": [" RT("GET", "/a", "a") ",\n \"GET /b\"]}", "\"GET /b\"", 1,
              "routes[1] must be an object {\"method\"");
  app_refused("a route with a view", "{\"routes\": [" RT("GET", "/a", "a") ",\n {\"method\": \"GET\", \"view\": \"v\"}]}",
              "\"view\"", 1,
              "routes[1] has the unknown key \"view\" (its keys are method, pattern, actor, timeout_ms and stream; a file's "
              "route is served by an actor, or is a channel's stream)");
  app_refused("no method", "{\"routes\": [" RT("GET", "/a", "a") ",\n {\"pattern\": \"/b\", \"actor\": \"a\"}]}",
              "{\"pattern\": \"/b\"", 1, "routes[1] has no \"method\" (say \"GET\", \"POST\", ...)");
  const char *methods[] = {"\"get\"", "\"\"", "\"GET \"", "\"ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEF\"", "7", "\"M-SEARCH\""};
  for (size_t i = 0; i < sizeof methods / sizeof *methods; i++) {
    char text[400];
    snprintf(text, sizeof text, "{\"routes\": [" RT("GET", "/a", "a") ",\n {\"pattern\": \"/b\", \"actor\": \"a\", "
             "\"method\": %s}]}", methods[i]);
    app_refused("a method that is not one", text, "\"method\"", 2,
                "routes[1].method must be a string of 1 to 31 capital letters A-Z");
  }
  app_refused("no pattern", "{\"routes\": [\n {\"method\": \"GET\", \"actor\": \"a\"}]}", "{\"method\"", 1,
              "routes[0] has no \"pattern\" (say \"/path/{param}\")");
  char longpat[300];
  memset(longpat, 'p', 256);
  longpat[0] = '/';
  longpat[256] = 0;
  const char *patterns[] = {"\"a/b\"", "\"\"", "[\"/\"]", longpat};
  for (size_t i = 0; i < sizeof patterns / sizeof *patterns; i++) {
    char text[800];
    snprintf(text, sizeof text, "{\"routes\": [" RT("GET", "/a", "a") ",\n {\"method\": \"GET\", \"actor\": \"a\", "
             "\"pattern\": %s%s%s}]}", i == 3 ? "\"" : "", patterns[i], i == 3 ? "\"" : "");
    app_refused("a pattern that is not one", text, "\"pattern\"", 2,
                "routes[1].pattern must be a string that starts with / and is shorter than 256 bytes");
  }
  app_refused("no actor", "{\"routes\": [\n {\"method\": \"GET\", \"pattern\": \"/a\"}]}", "{\"method\"", 1,
              "routes[0] has no \"actor\" (name the actor that serves it, or say \"stream\": CHANNEL)");
  app_refused("an actor that is no name", "{\"routes\": [{\"method\": \"GET\",\n \"actor\": \"Echo\", \"pattern\": \"/a\"}]}",
              "\"actor\"", 1, "routes[0].actor must be an actor's name: a string of 1 to 48 bytes of a-z, 0-9, _ and -");
  app_refused("an actor a number", "{\"routes\": [{\"method\": \"GET\", \"actor\": 1, \"pattern\": \"/a\"}]}", "\"actor\"", 1,
              "routes[0].actor must be an actor's name");
  const char *timeouts[] = {"0", "3600001", "\"1000\"", "1e3"};
  for (size_t i = 0; i < sizeof timeouts / sizeof *timeouts; i++) {
    char text[400];
    snprintf(text, sizeof text, "{\"routes\": [{\"method\": \"GET\", \"pattern\": \"/a\", \"actor\": \"a\", \"timeout_ms\": 5},\n"
             " {\"method\": \"GET\", \"pattern\": \"/b\", \"actor\": \"a\", \"timeout_ms\": %s}]}", timeouts[i]);
    app_refused("timeout_ms out of range", text, "\"timeout_ms\"", 2,
                "routes[1].timeout_ms must be a whole number from 1 to 3600000");
  }
  app_refused("one method and pattern twice",
              "{\"routes\": [\n " RT("GET", "/a", "a") ",\n " RT("POST", "/a", "a") ",\n " RT("GET", "/a", "b") "]}",
              "\"method\"", 3, "routes[2] is GET /a again, as routes[0] (give each method and pattern one route)");
  /* a good app_actors does not keep a bad routes from being refused, nor is
   * it applied */
  app_refused("app_actors fine, routes not", "{\"app_actors\": [" EXT("a") "],\n \"routes\": [{\"method\": \"GET\"}]}",
              "{\"method\"", 1, "routes[0] has no \"pattern\"");
}

/* A good file: every field as written, every default as documented. */
static void test_app_actors_read(void **st) {
  m0_config *c = cfg_new();
  char why[1200];
  const char *good =
      "{\"mode\": \"threads\", \"loops\": 2,\n"
      " \"app_actors\": [\n"
      "  {\"name\": \"echo\", \"placement\": \"thread\"},\n"
      "  {\"name\": \"re-size_2\", \"placement\": \"process\", \"instances\": 64, \"url\": \"ipc://<run-dir>/r.<pid>.sock\",\n"
      "   \"restart\": {\"intensity\": 0, \"period_ms\": 86400000}, \"queue\": 65536},\n"
      "  {\"name\": \"spell\", \"placement\": \"external\", \"url\": \"tcp://127.0.0.1:7400\", \"queue\": 1},\n"
      "  {\"name\": \"p\", \"placement\": \"process\", \"restart\": {\"intensity\": 1000}},\n"
      "  {\"name\": \"x\", \"placement\": \"external\"},\n"
      "  {\"name\": \"t\", \"placement\": \"thread\", \"instances\": 3, \"queue\": 2}\n"
      " ],\n"
      " \"routes\": [\n"
      "  {\"method\": \"GET\", \"pattern\": \"/echo/{id}\", \"actor\": \"echo\"},\n"
      "  {\"method\": \"PROPFIND\", \"pattern\": \"/\", \"actor\": \"x\", \"timeout_ms\": 3600000},\n"
      "  {\"method\": \"GET\", \"pattern\": \"/spell\", \"actor\": \"nobody-yet\", \"timeout_ms\": 1}\n"
      " ]}\n";
  assert_int_equal(LOAD(c, why, "--topology", topo_write("good.json", good)), 0);
  assert_string_equal(c->topology_error, "");
  assert_int_equal(M0__CFG(c, threads), 2); /* the rest of the file still applies */
  assert_int_equal(c->napp_actors, 6);
  const m0__actor_spec *a = c->app_actors;
  assert_string_equal(a[0].name, "echo");
  assert_int_equal(a[0].placement, M0__PLACE_THREAD);
  assert_int_equal(a[0].instances, 1);
  assert_string_equal(a[0].url, "");
  assert_int_equal(a[0].restart_intensity, 5);
  assert_int_equal(a[0].restart_period_ms, 10000);
  assert_int_equal(a[0].queue, 1024);
  assert_true(a[0].from_file);
  assert_string_equal(a[1].name, "re-size_2");
  assert_int_equal(a[1].placement, M0__PLACE_PROCESS);
  assert_int_equal(a[1].instances, 64);
  assert_string_equal(a[1].url, "ipc://<run-dir>/r.<pid>.sock"); /* placeholders kept */
  assert_int_equal(a[1].restart_intensity, 0);
  assert_int_equal(a[1].restart_period_ms, 86400000);
  assert_int_equal(a[1].queue, 65536);
  assert_int_equal(a[2].placement, M0__PLACE_EXTERNAL);
  assert_int_equal(a[2].instances, 0);
  assert_string_equal(a[2].url, "tcp://127.0.0.1:7400");
  assert_int_equal(a[2].queue, 1);
  assert_int_equal(a[3].placement, M0__PLACE_PROCESS);
  assert_int_equal(a[3].instances, 1);
  assert_string_equal(a[3].url, "");
  assert_int_equal(a[3].restart_intensity, 1000);
  assert_int_equal(a[3].restart_period_ms, 10000);
  assert_int_equal(a[4].placement, M0__PLACE_EXTERNAL);
  assert_int_equal(a[4].instances, 0);
  assert_int_equal(a[4].queue, 1024);
  assert_int_equal(a[5].instances, 3);
  assert_int_equal(a[5].queue, 2);
  for (int i = 0; i < 6; i++) assert_true(a[i].from_file);
  assert_int_equal(c->nfile_routes, 3);
  const m0__route_spec *r = c->file_routes;
  assert_string_equal(r[0].method, "GET");
  assert_string_equal(r[0].pattern, "/echo/{id}");
  assert_string_equal(r[0].actor, "echo");
  assert_int_equal(r[0].timeout_ms, 1000);
  assert_string_equal(r[1].method, "PROPFIND");
  assert_string_equal(r[1].pattern, "/");
  assert_int_equal(r[1].timeout_ms, 3600000);
  assert_string_equal(r[2].actor, "nobody-yet"); /* the file reads names; the actors check judges them */
  assert_int_equal(r[2].timeout_ms, 1);
  /* a name of exactly 48 bytes, a method of 31 letters, a pattern of 255
   * bytes; empty lists */
  char text[1200], pat[256];
  memset(pat, 'p', 255);
  pat[0] = '/';
  pat[255] = 0;
  snprintf(text, sizeof text, "{\"app_actors\": [" EXT("abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcd") "],"
           " \"routes\": [{\"method\": \"ABCDEFGHIJKLMNOPQRSTUVWXYZABCDE\", \"pattern\": \"%s\", \"actor\": \"a\"}]}", pat);
  assert_int_equal(LOAD(c, why, "--topology", topo_write("edge.json", text)), 0);
  assert_string_equal(c->topology_error, "");
  assert_int_equal(strlen(c->app_actors[0].name), 48);
  assert_int_equal(strlen(c->file_routes[0].method), 31);
  assert_int_equal(strlen(c->file_routes[0].pattern), 255);
  assert_int_equal(LOAD(c, why, "--topology", topo_write("empty-lists.json", "{\"app_actors\": [], \"routes\": []}")), 0);
  assert_string_equal(c->topology_error, "");
  assert_int_equal(c->napp_actors, 0);
  assert_int_equal(c->nfile_routes, 0);
  /* 64 entries is the most */
  char *many = malloc(64 * 64 + 100);
  assert_non_null(many);
  strcpy(many, "{\"app_actors\": [");
  for (int i = 0; i < 64; i++)
    sprintf(many + strlen(many), "%s{\"name\": \"a%d\", \"placement\": \"external\"}", i ? "," : "", i);
  strcat(many, "]}");
  assert_int_equal(LOAD(c, why, "--topology", topo_write("many.json", many)), 0);
  free(many);
  assert_string_equal(c->topology_error, "");
  assert_int_equal(c->napp_actors, 64);
  cfg_done(c);
}

/* ---- the declaration: the program's actors and routes with the file's ---- */

static void fake_receive(void *state, const m0_request *req, m0_reply *rep) {}
static const m0_actor_kind fake_kinds[] = {{.name = "echo", .receive = fake_receive},
                                           {.name = "silent", .receive = fake_receive}};
static const m0_route fake_routes[] = {
    {"GET", "/v", dummy_view, M0_ON_LOOP},
    {"GET", "/actor/echo", NULL, 0, "echo", 0},
    {"POST", "/actor/echo", NULL, 0, "echo", 250},
    {"GET", "/actor/silent", NULL, 0, "silent"},
};
static const m0_app fake_app = {.name = "fake", .routes = fake_routes, .nroutes = 4, .actors = fake_kinds, .nactors = 2};

static m0__actor_spec spec(const char *name, m0__placement p) {
  m0__actor_spec s = {.placement = p, .instances = p == M0__PLACE_EXTERNAL ? 0 : 1, .restart_intensity = 5,
                      .restart_period_ms = 10000, .queue = 1024, .from_file = true};
  snprintf(s.name, sizeof s.name, "%s", name);
  return s;
}
static m0__route_spec rspec(const char *m, const char *p, const char *a, long t) {
  m0__route_spec r = {.timeout_ms = t};
  snprintf(r.method, sizeof r.method, "%s", m);
  snprintf(r.pattern, sizeof r.pattern, "%s", p);
  snprintf(r.actor, sizeof r.actor, "%s", a);
  return r;
}
/* A configuration holding these app_actors and routes (copies, freed by
 * m0__config_fini), as a file would leave them. */
static m0_config *cfg_with(const m0__actor_spec *a, int na, const m0__route_spec *r, int nr) {
  m0_config *c = cfg_new();
  if (na) {
    c->app_actors = calloc((size_t)na, sizeof *a);
    memcpy(c->app_actors, a, (size_t)na * sizeof *a);
  }
  if (nr) {
    c->file_routes = calloc((size_t)nr, sizeof *r);
    memcpy(c->file_routes, r, (size_t)nr * sizeof *r);
  }
  c->napp_actors = na;
  c->nfile_routes = nr;
  return c;
}

/* m0__app_decl_make refuses with M0__ECONFIG, a line that says `what`, and
 * leaves d empty. */
static void decl_refused(const m0_app *app, const m0_config *c, bool prefork, const char *what) {
  m0__app_decl d;
  char why[1500];
  int rc = m0__app_decl_make(&d, app, c, why, sizeof why);
  if (rc != M0__ECONFIG || !strstr(why, what)) fail_msg("rc %d, why \"%s\", want M0__ECONFIG and \"%s\"", rc, why, what);
  assert_null(d.actors);
  assert_null(d.kinds);
  assert_null(d.routes);
  assert_int_equal(d.nactors, 0);
  assert_int_equal(d.nroutes, 0);
  m0__app_decl_free(&d);
}

static void test_app_decl_merge(void **st) {
  assert_string_equal(m0__placement_name(M0__PLACE_THREAD), "thread");
  assert_string_equal(m0__placement_name(M0__PLACE_PROCESS), "process");
  assert_string_equal(m0__placement_name(M0__PLACE_EXTERNAL), "external");
  m0__app_decl d;
  char why[1500];
  /* no file: the program's kinds, each on a thread, one instance, and its
   * routes as they are */
  m0_config *c = cfg_with(NULL, 0, NULL, 0);
  assert_int_equal(m0__app_decl_make(&d, &fake_app, c, why, sizeof why), 0);
  assert_int_equal(d.nactors, 2);
  for (int i = 0; i < 2; i++) {
    assert_string_equal(d.actors[i].name, fake_kinds[i].name);
    assert_ptr_equal(d.kinds[i], &fake_kinds[i]);
    assert_int_equal(d.actors[i].placement, M0__PLACE_THREAD);
    assert_int_equal(d.actors[i].instances, 1);
    assert_string_equal(d.actors[i].url, "");
    assert_int_equal(d.actors[i].restart_intensity, 5);
    assert_int_equal(d.actors[i].restart_period_ms, 10000);
    assert_int_equal(d.actors[i].queue, 1024);
    assert_false(d.actors[i].from_file);
  }
  assert_int_equal(d.nroutes, 4);
  for (int i = 0; i < 4; i++) assert_memory_equal(&d.routes[i], &fake_routes[i], sizeof fake_routes[i]);
  assert_int_equal(m0__app_decl_find(&d, "silent", 6), 1);
  assert_int_equal(m0__app_decl_find(&d, "silently", 6), 1); /* n bytes of it */
  assert_int_equal(m0__app_decl_find(&d, "sil", 3), M0__ENOTFOUND);
  assert_int_equal(m0__app_decl_find(&d, "nope", 4), M0__ENOTFOUND);
  m0__app_decl_free(&d);
  assert_null(d.actors);
  assert_int_equal(d.nactors, 0);
  m0__app_decl_free(&d); /* twice is harmless */
  cfg_done(c);
  /* a NULL configuration is no file */
  assert_int_equal(m0__app_decl_make(&d, &fake_app, NULL, why, sizeof why), 0);
  assert_int_equal(d.nactors, 2);
  m0__app_decl_free(&d);
  /* an app with neither actors nor routes: nothing */
  m0_app bare = {.name = "bare", .handle = dummy_view};
  assert_int_equal(m0__app_decl_make(&d, &bare, NULL, why, sizeof why), 0);
  assert_int_equal(d.nactors, 0);
  assert_int_equal(d.nroutes, 0);
  m0__app_decl_free(&d);

  /* the file: silent placed in processes, an external actor of its own;
   * GET /actor/echo served by it instead, a route of its own appended */
  m0__actor_spec fa[] = {spec("ext", M0__PLACE_EXTERNAL), spec("silent", M0__PLACE_PROCESS)};
  fa[1].instances = 3;
  fa[1].restart_intensity = 9;
  fa[1].restart_period_ms = 777;
  fa[1].queue = 12;
  snprintf(fa[1].url, sizeof fa[1].url, "ipc:///tmp/silent.sock");
  m0__route_spec fr[] = {rspec("PUT", "/new/{id}", "silent", 40), rspec("GET", "/actor/echo", "ext", 7),
                         rspec("GET", "/v", "echo", 1000)};
  c = cfg_with(fa, 2, fr, 3);
  assert_int_equal(m0__app_decl_make(&d, &fake_app, c, why, sizeof why), 0);
  assert_string_equal(why, "");
  /* the decl owns what it holds: the file's specs may go */
  memset(c->app_actors, 'X', 2 * sizeof *c->app_actors);
  memset(c->file_routes, 'X', 3 * sizeof *c->file_routes);
  cfg_done(c);
  assert_int_equal(d.nactors, 3);
  assert_string_equal(d.actors[0].name, "echo"); /* the program's order first */
  assert_false(d.actors[0].from_file);
  assert_int_equal(d.actors[0].placement, M0__PLACE_THREAD);
  assert_ptr_equal(d.kinds[0], &fake_kinds[0]);
  assert_string_equal(d.actors[1].name, "silent"); /* placed by the file */
  assert_true(d.actors[1].from_file);
  assert_ptr_equal(d.kinds[1], &fake_kinds[1]);
  assert_int_equal(d.actors[1].placement, M0__PLACE_PROCESS);
  assert_int_equal(d.actors[1].instances, 3);
  assert_int_equal(d.actors[1].restart_intensity, 9);
  assert_int_equal(d.actors[1].restart_period_ms, 777);
  assert_int_equal(d.actors[1].queue, 12);
  assert_string_equal(d.actors[1].url, "ipc:///tmp/silent.sock");
  assert_string_equal(d.actors[2].name, "ext"); /* then the file's others */
  assert_null(d.kinds[2]);
  assert_true(d.actors[2].from_file);
  assert_int_equal(d.actors[2].placement, M0__PLACE_EXTERNAL);
  assert_int_equal(m0__app_decl_find(&d, "ext", 3), 2);
  assert_int_equal(d.nroutes, 5);
  /* GET /v: a view in the program, an actor in the file: the file's */
  assert_string_equal(d.routes[0].method, "GET");
  assert_string_equal(d.routes[0].pattern, "/v");
  assert_null(d.routes[0].view);
  assert_int_equal(d.routes[0].flags, 0);
  assert_string_equal(d.routes[0].actor, "echo");
  assert_int_equal(d.routes[0].timeout_ms, 1000);
  /* GET /actor/echo in its place, served by ext */
  assert_string_equal(d.routes[1].method, "GET");
  assert_string_equal(d.routes[1].pattern, "/actor/echo");
  assert_string_equal(d.routes[1].actor, "ext");
  assert_null(d.routes[1].view);
  assert_int_equal(d.routes[1].timeout_ms, 7);
  assert_true(d.routes[1].pattern != fake_routes[1].pattern);
  /* the rest of the program's as they are */
  assert_memory_equal(&d.routes[2], &fake_routes[2], sizeof fake_routes[2]);
  assert_memory_equal(&d.routes[3], &fake_routes[3], sizeof fake_routes[3]);
  /* PUT /new/{id} appended */
  assert_string_equal(d.routes[4].method, "PUT");
  assert_string_equal(d.routes[4].pattern, "/new/{id}");
  assert_string_equal(d.routes[4].actor, "silent");
  assert_null(d.routes[4].view);
  assert_int_equal(d.routes[4].flags, 0);
  assert_int_equal(d.routes[4].timeout_ms, 40);
  m0__app_decl_free(&d);

  /* prefork: thread placement only, and a file that places every actor on
   * a thread is served */
  m0__actor_spec th[] = {spec("echo", M0__PLACE_THREAD), spec("silent", M0__PLACE_THREAD)};
  th[0].instances = 4;
  c = cfg_with(th, 2, NULL, 0);
  assert_int_equal(m0__app_decl_make(&d, &fake_app, c, why, sizeof why), 0);
  assert_int_equal(d.actors[0].instances, 4);
  m0__app_decl_free(&d);
  cfg_done(c);
  /* a program with routes naming an external actor of the file, and a
   * handle instead of routes with only the file's */
  m0_app handled = {.name = "h", .handle = dummy_view};
  m0__actor_spec ex[] = {spec("far", M0__PLACE_EXTERNAL)};
  m0__route_spec er[] = {rspec("GET", "/far", "far", 5)};
  c = cfg_with(ex, 1, er, 1);
  assert_int_equal(m0__app_decl_make(&d, &handled, c, why, sizeof why), 0);
  assert_int_equal(d.nactors, 1);
  assert_null(d.kinds[0]);
  assert_int_equal(d.nroutes, 1);
  assert_string_equal(d.routes[0].actor, "far");
  m0__app_decl_free(&d);
  cfg_done(c);
}

static void test_app_decl_refusals(void **st) {
  /* the program's kinds */
  m0_actor_kind k[3] = {fake_kinds[0], fake_kinds[1], fake_kinds[1]};
  m0_app app = fake_app;
  app.actors = k;
  app.nactors = 3;
  decl_refused(&app, NULL, false,
               "m0_app.actors[1] and m0_app.actors[2] are both named \"silent\": give each actor kind its own name");
  const char *bad[] = {"Echo", "", "a b", "a.b", "abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcde"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    k[2].name = bad[i];
    char want[300];
    snprintf(want, sizeof want, "m0_app.actors[2] is named \"%s\", not 1 to 48 bytes of a-z, 0-9, _ and -: rename the "
             "actor kind", bad[i]);
    decl_refused(&app, NULL, false, want);
  }
  k[2].name = NULL;
  decl_refused(&app, NULL, false, "m0_app.actors[2] is named \"(null)\"");
  k[2].name = "abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcd"; /* 48: a name */
  m0__app_decl d;
  char why[1500];
  assert_int_equal(m0__app_decl_make(&d, &app, NULL, why, sizeof why), 0);
  m0__app_decl_free(&d);
  k[2].receive = NULL;
  decl_refused(&app, NULL, false, "m0_app.actors[2] (\"abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcd\") has no "
               "receive: set its receive function");
  app.actors = NULL;
  decl_refused(&app, NULL, false, "m0_app.nactors is 3 but m0_app.actors is NULL: set both, or neither");

  /* more than 64 actors, the program's and the file's together (64 is the
   * most); a file entry that places a kind of the program is not one more */
  static m0_actor_kind many[60];
  static char names[60][8];
  for (int i = 0; i < 60; i++) {
    snprintf(names[i], sizeof names[i], "k%d", i);
    many[i] = (m0_actor_kind){.name = names[i], .receive = fake_receive};
  }
  m0_app big = {.name = "big", .handle = dummy_view, .actors = many, .nactors = 60};
  m0__actor_spec ext[5];
  for (int i = 0; i < 5; i++) {
    char n[8];
    snprintf(n, sizeof n, "x%d", i);
    ext[i] = spec(n, M0__PLACE_EXTERNAL);
  }
  m0_config *c = cfg_with(ext, 5, NULL, 0);
  decl_refused(&big, c, false, "the program and app_actors declare 65 actors, more than 64: declare at most 64");
  cfg_done(c);
  ext[4] = spec("k7", M0__PLACE_THREAD);
  c = cfg_with(ext, 5, NULL, 0);
  assert_int_equal(m0__app_decl_make(&d, &big, c, why, sizeof why), 0);
  assert_int_equal(d.nactors, 64);
  m0__app_decl_free(&d);
  cfg_done(c);

  /* routes */
  m0_route r[2] = {{"GET", "/x", NULL, 0, "nope", 0}, {"GET", "/v", dummy_view, 0}};
  m0_app ra = fake_app;
  ra.routes = r;
  ra.nroutes = 2;
  decl_refused(&ra, NULL, false,
               "route GET /x names actor \"nope\", which neither the program nor app_actors declares: add it to "
               "app_actors with placement external, or fix the name");
  m0__actor_spec nope[] = {spec("nope", M0__PLACE_EXTERNAL)};
  c = cfg_with(nope, 1, NULL, 0); /* declared in the file: served */
  assert_int_equal(m0__app_decl_make(&d, &ra, c, why, sizeof why), 0);
  m0__app_decl_free(&d);
  cfg_done(c);
  r[0].actor = "";
  decl_refused(&ra, NULL, false, "route GET /x names actor \"\", which neither");
  r[0].view = dummy_view;
  r[0].actor = "echo";
  decl_refused(&ra, NULL, false,
               "route GET /x (m0_app.routes[0]) has both a view and the actor \"echo\": set one of view and actor");
  r[0].view = NULL;
  r[0].actor = NULL;
  decl_refused(&ra, NULL, false,
               "route GET /x (m0_app.routes[0]) has neither a view nor an actor: set one of view and actor");
  m0__route_spec fr[] = {rspec("GET", "/ok", "echo", 5), rspec("DELETE", "/y/{id}", "nobody", 5)};
  c = cfg_with(NULL, 0, fr, 2);
  decl_refused(&fake_app, c, false,
               "route DELETE /y/{id} names actor \"nobody\", which neither the program nor app_actors declares: add it "
               "to app_actors with placement external, or fix the name");
  cfg_done(c);
  /* a file route that replaces the program's route that had neither view
   * nor actor: served */
  m0__route_spec fx[] = {rspec("GET", "/x", "silent", 5)};
  c = cfg_with(NULL, 0, fx, 1);
  assert_int_equal(m0__app_decl_make(&d, &ra, c, why, sizeof why), 0);
  m0__app_decl_free(&d);
  cfg_done(c);

  /* placement: a thread or a process needs this program's kind */
  m0__actor_spec th[] = {spec("echo", M0__PLACE_PROCESS), spec("ghost", M0__PLACE_THREAD)};
  c = cfg_with(th, 2, NULL, 0);
  decl_refused(&fake_app, c, false,
               "app_actors places actor \"ghost\" on a thread, but it has no actor kind \"ghost\" in this program: "
               "place it \"external\"");
  cfg_done(c);
  th[1].placement = M0__PLACE_PROCESS;
  c = cfg_with(th, 2, NULL, 0);
  decl_refused(&fake_app, c, false, "app_actors places actor \"ghost\" on a process, but it has no actor kind \"ghost\"");
  cfg_done(c);

  /* prefork serves process and external placements too (the supervisor's
   * relay, service/relay.h): nothing to refuse */
  th[1] = spec("far", M0__PLACE_EXTERNAL);
  c = cfg_with(th, 2, NULL, 0);
  assert_int_equal(m0__app_decl_make(&d, &fake_app, c, why, sizeof why), 0);
  assert_int_equal(d.actors[0].placement, M0__PLACE_PROCESS);
  m0__app_decl_free(&d);
  cfg_done(c);
}

/* The `actors` check: after `topology`, the declaration's line split into
 * the detail and the fix, exit 78 when serving. */
static void test_checks_actors(void **st) {
  m0__check ch[M0__CHECK_COUNT];
  assert_int_equal(M0__C_actors, M0__C_topology + 1);
  assert_int_equal(CHECKS(&app_routes, ch, "--port", "0"), -1);
  assert_string_equal(ch[M0__C_actors].name, "actors");
  assert_string_equal(ch[M0__C_actors].detail, "no application actors");
  assert_int_equal(CHECKS(&fake_app, ch, "--port", "0"), -1);
  assert_string_equal(ch[M0__C_actors].detail,
                      "2 application actors (0 placed by the topology file), 3 routes served by actors");
  const char *ext = topo_write("ext.json", "{\"app_actors\": [" EXT("echo") ", " EXT("far") "],\n \"routes\": ["
                                           RT("GET", "/v", "far") ", " RT("GET", "/far", "far") "]}");
  assert_int_equal(CHECKS(&fake_app, ch, "--topology", ext), -1);
  assert_string_equal(ch[M0__C_actors].detail,
                      "3 application actors (2 placed by the topology file), 5 routes served by actors");
  assert_int_equal(CHECKS(&fake_app, ch, "--topology", ext, "--workers", "2"), -1); /* relayed, not refused */
  assert_true(ch[M0__C_actors].ok);
  const char *unk = topo_write("unk.json", "{\"routes\": [" RT("GET", "/a: b", "nope") "]}");
  refused(CHECKS(&app_routes, ch, "--topology", unk), ch, M0__C_actors,
          "route GET /a: b names actor \"nope\", which neither the program nor app_actors declares",
          "add it to app_actors with placement external, or fix the name");
  assert_string_equal(ch[M0__C_actors].detail,
                      "route GET /a: b names actor \"nope\", which neither the program nor app_actors declares");
  assert_string_equal(ch[M0__C_actors].fix, "add it to app_actors with placement external, or fix the name");
  /* a refused topology file applies nothing: the actors check judges the
   * program alone */
  const char *broken = topo_write("broken.json", "{\"app_actors\": [{\"name\": \"far\"}]}");
  assert_int_equal(CHECKS(&fake_app, ch, "--topology", broken), M0__C_topology);
  assert_true(ch[M0__C_actors].ok);
  /* the program's own refusal */
  m0_route r[] = {{"GET", "/x", NULL, 0, "nope"}};
  m0_app bad = fake_app;
  bad.routes = r;
  bad.nroutes = 1;
  refused(CHECKS(&bad, ch, "--port", "0"), ch, M0__C_actors, "route GET /x names actor \"nope\"", "fix the name");
}

/* ---- the doctor and m0_serve ---- */

/* Runs fn with stdout (fd 1) going to a file; returns what it wrote. */
static char *capture_fd(int fd, int (*fn)(void *), void *arg, int *rc) {
  fflush(NULL);
  char path[300];
  snprintf(path, sizeof path, "%s/captured", tmpdir);
  int out = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
  assert_true(out >= 0);
  int saved = dup(fd);
  dup2(out, fd);
  *rc = fn(arg);
  fflush(NULL);
  dup2(saved, fd);
  close(saved);
  off_t n = lseek(out, 0, SEEK_END);
  char *buf = calloc(1, (size_t)n + 1);
  assert_int_equal(pread(out, buf, (size_t)n, 0), n);
  close(out);
  unlink(path);
  return buf;
}

typedef struct doc_run {
  const m0_app *app;
  char *argv[8];
} doc_run;

static int doctor_fn(void *arg) {
  doc_run *d = arg;
  int argc = 0;
  while (d->argv[argc]) argc++;
  m0_config *c = cfg_new();
  char why[1200];
  assert_int_equal(m0__config_load(c, argc, d->argv, why, sizeof why), 0);
  m0__check ch[M0__CHECK_COUNT];
  int first = m0__checks_run(c, d->app, ch);
  int rc = m0__doctor(c, d->app, ch, first);
  cfg_done(c);
  return rc;
}

/* The doctor's one JSON line for argv on app; its exit code in *rc. */
static json_t *doctor(const m0_app *app, int *rc, ...) {
  doc_run d = {.app = app, .argv = {"prog"}};
  va_list ap;
  va_start(ap, rc);
  for (int i = 1; i < 7 && (d.argv[i] = va_arg(ap, char *)); i++) {}
  va_end(ap);
  char *out = capture_fd(1, doctor_fn, &d, rc);
  size_t n = strlen(out);
  assert_true(n > 2 && out[n - 1] == '\n' && !memchr(out, '\n', n - 1)); /* one line */
  json_error_t e;
  json_t *j = json_loads(out, 0, &e);
  if (!j) fail_msg("the doctor printed no JSON: %s (%s)", out, e.text);
  free(out);
  return j;
}
#define DOCTOR(app, rc, ...) doctor(app, rc, __VA_ARGS__, (char *)NULL)

static size_t slots(int loops) { return (size_t)loops * 3; }

static void test_doctor(void **st) {
  int rc;
  m0_app a = app_routes;
  a.page_slots = slots;
  a.name = NULL;
  json_t *j = DOCTOR(&a, &rc, "--threads", "2"); /* a nameless app is served; the doctor says "" */
  assert_int_equal(rc, 0);
  assert_string_equal(json_string_value(json_object_get(json_object_get(j, "application"), "name")), "");
  json_t *c10 = json_array_get(json_object_get(j, "checks"), M0__C_application);
  assert_string_equal(json_string_value(json_object_get(c10, "detail")), "(unnamed) answers with a views table");
  json_t *c2 = json_array_get(json_object_get(j, "checks"), M0__C_workers_vs_application);
  assert_string_equal(json_string_value(json_object_get(c2, "detail")), "(unnamed) allows any number of workers");
  json_decref(j);
  a.name = "slotted";
  j = DOCTOR(&a, &rc, "--threads", "2");
  assert_int_equal(rc, 0);
  assert_true(json_is_true(json_object_get(j, "ok")));
  assert_int_equal(json_integer_value(json_object_get(j, "exit")), 0);
  json_t *app = json_object_get(j, "application");
  assert_string_equal(json_string_value(json_object_get(app, "name")), "slotted");
  assert_int_equal(json_integer_value(json_object_get(app, "page_slots")), 6);
  json_t *checks = json_object_get(j, "checks");
  assert_int_equal(json_array_size(checks), M0__CHECK_COUNT);
  for (size_t i = 0; i < json_array_size(checks); i++) /* a passing check has no fix */
    assert_null(json_object_get(json_array_get(checks, i), "fix"));
  json_decref(j);

  /* M0_ACCEPT_SHARE=0: accept_sharing false, its source env */
  setenv("M0_ACCEPT_SHARE", "0", 1);
  j = DOCTOR(&app_routes, &rc, "--threads", "2");
  unsetenv("M0_ACCEPT_SHARE");
  assert_true(json_is_false(json_object_get(json_object_get(j, "topology"), "accept_sharing")));
  assert_string_equal(json_string_value(json_object_get(json_object_get(j, "sources"), "M0_ACCEPT_SHARE")), "env");
  assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "config"), "M0_ACCEPT_SHARE")), 0);
  json_decref(j);

  /* prefork with --run-dir: the actors' ipc URLs are in that directory */
  char d[300], want[400];
  snprintf(d, sizeof d, "%s/rd", tmpdir);
  assert_int_equal(mkdir(d, 0700), 0);
  j = DOCTOR(&app_routes, &rc, "--workers", "2", "--run-dir", d);
  assert_int_equal(rc, 0);
  json_t *topo = json_object_get(j, "topology"), *actors = json_object_get(topo, "actors");
  assert_string_equal(json_string_value(json_object_get(topo, "mode")), "prefork");
  assert_string_equal(json_string_value(json_object_get(topo, "transport")), "ipc");
  assert_int_equal(json_array_size(actors), 6);
  snprintf(want, sizeof want, "ipc://%s/loop.1.sock", d);
  assert_string_equal(json_string_value(json_object_get(json_array_get(actors, 5), "url")), want);
  json_decref(j);
  rmdir(d);
  j = DOCTOR(&app_routes, &rc, "--workers", "2"); /* no run dir yet: a placeholder */
  actors = json_object_get(json_object_get(j, "topology"), "actors");
  assert_string_equal(json_string_value(json_object_get(json_array_get(actors, 0), "url")), "ipc://<run-dir>/coordinator.sock");
  json_decref(j);

  /* a tcp topology file: its transport and its URLs, placeholders kept */
  char tp[300];
  snprintf(tp, sizeof tp, "%s/tcp.json", tmpdir);
  FILE *fp = fopen(tp, "w");
  fputs("{\"transport\": \"tcp\", \"actors\": [" A("coordinator", "tcp://127.0.0.1:7100") ", "
        A("producer", "tcp://127.0.0.1:7101") ", " A("loop.0", "tcp://127.0.0.1:7102") "]}", fp);
  fclose(fp);
  j = DOCTOR(&app_routes, &rc, "--topology", tp);
  assert_int_equal(rc, 0);
  topo = json_object_get(j, "topology");
  actors = json_object_get(topo, "actors");
  assert_string_equal(json_string_value(json_object_get(topo, "transport")), "tcp");
  assert_int_equal(json_array_size(actors), 3);
  assert_string_equal(json_string_value(json_object_get(json_array_get(actors, 2), "url")), "tcp://127.0.0.1:7102");
  assert_string_equal(json_string_value(json_object_get(json_array_get(actors, 2), "name")), "loop.0");
  json_decref(j);
  /* with a flag that changes it, m0's own URLs (and the check refuses) */
  j = DOCTOR(&app_routes, &rc, "--topology", tp, "--threads", "2");
  assert_int_equal(rc, 78);
  actors = json_object_get(json_object_get(j, "topology"), "actors");
  assert_int_equal(json_array_size(actors), 4);
  assert_string_equal(json_string_value(json_object_get(json_array_get(actors, 3), "url")), "inproc://m0-<pid>/loop.1");
  json_decref(j);

  /* more than a topology holds, or a run dir too long for any URL: refused,
   * and the doctor lists no actors rather than wrong ones */
  const char *huge[][2] = {{"--blocking-threads", "5000"}, {"--threads", "5000"}};
  for (int i = 0; i < 2; i++) {
    j = DOCTOR(&app_routes, &rc, huge[i][0], huge[i][1]);
    assert_int_equal(rc, 78);
    assert_int_equal(json_array_size(json_object_get(json_object_get(j, "topology"), "actors")), 0);
    json_decref(j);
  }
  char longdir[400];
  snprintf(longdir, sizeof longdir, "/%0300d", 0);
  j = DOCTOR(&app_routes, &rc, "--workers", "2", "--run-dir", longdir);
  assert_int_equal(rc, 78);
  assert_int_equal(json_array_size(json_object_get(json_object_get(j, "topology"), "actors")), 0);
  json_decref(j);

  /* a refusal: ok false, exit 78, the failing check with fix and exit */
  j = DOCTOR(&app_routes, &rc, "--threads", "5000");
  assert_int_equal(rc, 78);
  assert_true(json_is_false(json_object_get(j, "ok")));
  assert_int_equal(json_integer_value(json_object_get(j, "exit")), 78);
  json_t *tc = json_array_get(json_object_get(j, "checks"), M0__C_threads_count);
  assert_string_equal(json_string_value(json_object_get(tc, "name")), "threads-count");
  assert_true(json_is_false(json_object_get(tc, "ok")));
  assert_true(has(json_string_value(json_object_get(tc, "fix")), "from 1 to 4096"));
  assert_int_equal(json_integer_value(json_object_get(tc, "exit")), 78);
  json_decref(j);
}

/* The doctor's topology object written as a file. */
static const char *topo_save(const char *name, json_t *topo) {
  char *text = json_dumps(topo, JSON_INDENT(2));
  const char *p = topo_write(name, text);
  free(text);
  return p;
}

/* The doctor of app on argv prints a topology; saved and read back with
 * --topology it prints the same one (and exits 0 both times). Returns the
 * first doctor's JSON. */
static json_t *round_trips(const char *label, const m0_app *app, const char *a1, const char *a2) {
  int rc;
  json_t *j0 = DOCTOR(app, &rc, a1, a2);
  if (rc != 0) fail_msg("%s: the doctor exits %d", label, rc);
  json_t *t0 = json_object_get(j0, "topology");
  char name[80];
  snprintf(name, sizeof name, "rt-%s.json", label);
  const char *path = topo_save(name, t0);
  json_t *j1 = DOCTOR(app, &rc, "--topology", path);
  json_t *t1 = json_object_get(j1, "topology");
  if (rc != 0 || !json_equal(t0, t1)) {
    char *s0 = json_dumps(t0, JSON_COMPACT), *s1 = json_dumps(t1, JSON_COMPACT);
    fail_msg("%s: rc %d; saved %s\nreread %s", label, rc, s0, s1);
  }
  json_decref(j1);
  return j0;
}

static void test_doctor_actors(void **st) {
  int rc;
  /* no actors: both lists, empty */
  json_t *j = round_trips("none", &app_routes, "--threads", "2");
  json_t *topo = json_object_get(j, "topology");
  assert_true(json_is_array(json_object_get(topo, "app_actors")));
  assert_int_equal(json_array_size(json_object_get(topo, "app_actors")), 0);
  assert_int_equal(json_array_size(json_object_get(topo, "routes")), 0);
  json_decref(j);

  /* the program's two kinds on threads, its routes that name actors (a
   * timeout of 0 printed as the 1000 it means), the view's route not */
  j = round_trips("program", &fake_app, "--threads", "2");
  topo = json_object_get(j, "topology");
  json_t *want = json_loads(
      "{\"app_actors\": [{\"name\": \"echo\", \"placement\": \"thread\", \"instances\": 1, \"queue\": 1024},"
      "                  {\"name\": \"silent\", \"placement\": \"thread\", \"instances\": 1, \"queue\": 1024}],"
      " \"routes\": [{\"method\": \"GET\", \"pattern\": \"/actor/echo\", \"actor\": \"echo\", \"timeout_ms\": 1000},"
      "             {\"method\": \"POST\", \"pattern\": \"/actor/echo\", \"actor\": \"echo\", \"timeout_ms\": 250},"
      "             {\"method\": \"GET\", \"pattern\": \"/actor/silent\", \"actor\": \"silent\", \"timeout_ms\": 1000}]}",
      0, NULL);
  assert_non_null(want);
  assert_true(json_equal(json_object_get(topo, "app_actors"), json_object_get(want, "app_actors")));
  assert_true(json_equal(json_object_get(topo, "routes"), json_object_get(want, "routes")));
  json_decref(want);
  /* the keys in the schema's order */
  const char *key;
  json_t *v;
  const char *order[] = {"name", "placement", "instances", "queue"};
  int k = 0;
  json_object_foreach(json_array_get(json_object_get(topo, "app_actors"), 0), key, v) assert_string_equal(key, order[k++]);
  json_decref(j);

  /* every placement: a process (its built URL with <run-dir> kept, its
   * restart), an external actor (no instances), a URL with <pid> as written;
   * the file's route in the program's route's place */
  const char *file = topo_write(
      "placed.json",
      "{\"mode\": \"threads\", \"loops\": 2, \"app_actors\": [\n"
      "  {\"name\": \"silent\", \"placement\": \"process\", \"instances\": 2, \"restart\": {\"intensity\": 3}, \"queue\": 9},\n"
      "  {\"name\": \"echo\", \"placement\": \"external\", \"url\": \"ipc:///tmp/m0-<pid>/e.sock\"},\n"
      "  {\"name\": \"far\", \"placement\": \"external\"}],\n"
      " \"routes\": [" RT("POST", "/actor/echo", "far") ",\n {\"method\": \"GET\", \"pattern\": \"/far\", \"actor\": \"far\", "
      "\"timeout_ms\": 20}]}");
  j = round_trips("placed", &fake_app, "--topology", file);
  topo = json_object_get(j, "topology");
  want = json_loads(
      "{\"app_actors\": [{\"name\": \"echo\", \"placement\": \"external\", \"url\": \"ipc:///tmp/m0-<pid>/e.sock\","
      "                   \"queue\": 1024},"
      "                  {\"name\": \"silent\", \"placement\": \"process\", \"instances\": 2,"
      "                   \"url\": \"ipc://<run-dir>/actor.silent.sock\","
      "                   \"restart\": {\"intensity\": 3, \"period_ms\": 10000}, \"queue\": 9},"
      "                  {\"name\": \"far\", \"placement\": \"external\", \"url\": \"ipc://<run-dir>/actor.far.sock\","
      "                   \"queue\": 1024}],"
      " \"routes\": [{\"method\": \"GET\", \"pattern\": \"/actor/echo\", \"actor\": \"echo\", \"timeout_ms\": 1000},"
      "             {\"method\": \"POST\", \"pattern\": \"/actor/echo\", \"actor\": \"far\", \"timeout_ms\": 1000},"
      "             {\"method\": \"GET\", \"pattern\": \"/actor/silent\", \"actor\": \"silent\", \"timeout_ms\": 1000},"
      "             {\"method\": \"GET\", \"pattern\": \"/far\", \"actor\": \"far\", \"timeout_ms\": 20}]}",
      0, NULL);
  assert_non_null(want);
  if (!json_equal(json_object_get(topo, "app_actors"), json_object_get(want, "app_actors")) ||
      !json_equal(json_object_get(topo, "routes"), json_object_get(want, "routes"))) {
    char *s = json_dumps(topo, JSON_COMPACT);
    fail_msg("the doctor's topology is %s", s);
  }
  json_decref(want);
  json_decref(j);
  /* a run directory does not change the description: <run-dir> stays */
  char d[300];
  snprintf(d, sizeof d, "%s/rd-actors", tmpdir);
  assert_int_equal(mkdir(d, 0700), 0);
  j = DOCTOR(&fake_app, &rc, "--topology", file, "--run-dir", d);
  assert_int_equal(rc, 0);
  json_t *silent = json_array_get(json_object_get(json_object_get(j, "topology"), "app_actors"), 1);
  assert_string_equal(json_string_value(json_object_get(silent, "url")), "ipc://<run-dir>/actor.silent.sock");
  json_decref(j);
  rmdir(d);

  /* under --workers too: the actors' URLs are the supervisor's */
  j = DOCTOR(&fake_app, &rc, "--topology", file, "--threads", "1", "--workers", "2");
  assert_int_equal(rc, 0);
  json_t *c = json_array_get(json_object_get(j, "checks"), M0__C_actors);
  assert_string_equal(json_string_value(json_object_get(c, "name")), "actors");
  assert_true(json_is_true(json_object_get(c, "ok")));
  assert_int_equal(json_array_size(json_object_get(json_object_get(j, "topology"), "app_actors")), 3);
  json_decref(j);
  /* a declaration that cannot be served: no lists rather than wrong ones */
  const char *ghost = topo_write("ghost.json", "{\"routes\": [" RT("GET", "/g", "ghost") "]}");
  j = DOCTOR(&fake_app, &rc, "--topology", ghost);
  assert_int_equal(rc, 78);
  assert_int_equal(json_array_size(json_object_get(json_object_get(j, "topology"), "app_actors")), 0);
  assert_int_equal(json_array_size(json_object_get(json_object_get(j, "topology"), "routes")), 0);
  json_decref(j);
}

typedef struct serve_run {
  int argc;
  char **argv;
  const m0_app *app; /* NULL: app_routes */
} serve_run;

static int serve_fn(void *arg) {
  serve_run *s = arg;
  return m0_serve(s->app ? s->app : &app_routes, NULL, s->argc, s->argv);
}

/* The doctor shows the generation of a host serving in the run directory
 * named (read from its page), and null without one. */
static void test_doctor_running(void **st) {
  (void)st;
  int rc;
  char dir[] = "/tmp/m0-doctor-XXXXXX", err[256];
  assert_non_null(mkdtemp(dir));
  json_t *j = DOCTOR(&app_routes, &rc, "--port", "0", "--run-dir", dir);
  assert_true(json_is_null(json_object_get(j, "running")));
  json_decref(j);
  m0__page pg;
  assert_int_equal(m0__page_create(&pg, dir, 1, 0, err, sizeof err), 0);
  atomic_store(&pg.head->generation, 3);
  atomic_store(&pg.head->reloaded_ms, 1234);
  j = DOCTOR(&app_routes, &rc, "--port", "0", "--run-dir", dir);
  json_t *r = json_object_get(j, "running");
  assert_int_equal(json_integer_value(json_object_get(r, "generation")), 3);
  assert_int_equal(json_integer_value(json_object_get(r, "reloads")), 2);
  assert_int_equal(json_integer_value(json_object_get(r, "last_reload_unix_ms")), 1234);
  json_decref(j);
  m0__page_close(&pg);
  char path[64];
  snprintf(path, sizeof path, "%s/page", dir);
  unlink(path);
  rmdir(dir);
}

/* m0_serve's exit codes where no server starts. */
/* The doctor says what an app allows as it means it, and which M0_
 * variables it ignored (names only). */
static void test_doctor_bounds(void **st) {
  int rc;
  m0_app any = app_routes, two = app_routes;
  any.max_threads = -1;
  any.max_workers = 1;
  two.max_threads = 2;
  json_t *j = DOCTOR(&any, &rc, "--port", "0");
  assert_int_equal(rc, 0);
  json_t *a = json_object_get(j, "application");
  assert_int_equal(json_integer_value(json_object_get(a, "max_threads")), -1); /* was 0: read as a limit */
  assert_int_equal(json_integer_value(json_object_get(a, "max_workers")), 1);
  assert_int_equal(json_array_size(json_object_get(j, "unknown_variables")), 0);
  json_decref(j);
  j = DOCTOR(&two, &rc, "--port", "0");
  assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "application"), "max_threads")), 2);
  json_decref(j);
  setenv("M0_THREAD", "2", 1);
  j = DOCTOR(&app_routes, &rc, "--port", "0");
  assert_int_equal(rc, 0);
  json_t *u = json_object_get(j, "unknown_variables");
  assert_int_equal(json_array_size(u), 1);
  assert_string_equal(json_string_value(json_object_get(json_array_get(u, 0), "name")), "M0_THREAD");
  assert_string_equal(json_string_value(json_object_get(json_array_get(u, 0), "did_you_mean")), "M0_THREADS");
  json_decref(j);
  unsetenv("M0_THREAD");
}

static void test_serve_codes(void **st) {
  int rc;
  char *help[] = {"prog", "--help", NULL}, *version[] = {"prog", "--version", NULL}, *bad[] = {"prog", "--prot", NULL};
  serve_run s = {2, help};
  char *out = capture_fd(1, serve_fn, &s, &rc);
  assert_int_equal(rc, 0);
  assert_true(has(out, "usage: prog [flags]") && has(out, "--max-body-bytes V") && has(out, "M0_ACCEPT_SHARE"));
  assert_true(has(out, "78 a configuration that was read and will not be served"));
  free(out);
  s.argv = version;
  out = capture_fd(1, serve_fn, &s, &rc);
  assert_int_equal(rc, 0);
  assert_true(!strncmp(out, "m0 ", 3) && has(out, "(nng ") && has(out, ", libuv "));
  free(out);
  s.argv = bad;
  char *err = capture_fd(2, serve_fn, &s, &rc);
  assert_int_equal(rc, 2);
  assert_true(has(err, "usage: prog") && has(err, "\nm0: unknown flag '--prot'\n"));
  free(err);
  /* a program that passes no argv at all: the variables still count (were
   * they ignored, this would serve: SIGALRM ends the test instead) */
  setenv("M0_PORT", "abc", 1);
  s.argc = 0;
  s.argv = NULL;
  alarm(20);
  err = capture_fd(2, serve_fn, &s, &rc);
  alarm(0);
  unsetenv("M0_PORT");
  assert_int_equal(rc, 78);
  assert_string_equal(err, "m0: cannot read the variable M0_PORT=abc (set M0_PORT to a whole number from 0 to 65535, "
                           "or unset it)\n");
  free(err);
  /* the actors check refuses: 78 and its one line, nothing served. (One
   * process: were it not refused, a host of --workers would spawn this
   * test binary as its workers, each running every test again.) */
  const char *ghost = topo_write("serve-ghost.json", "{\"routes\": [" RT("GET", "/g", "ghost") "]}");
  char *one[] = {"prog", "--topology", (char *)ghost, "--port", "0", NULL};
  serve_run gs = {5, one, &fake_app};
  alarm(20);
  err = capture_fd(2, serve_fn, &gs, &rc);
  alarm(0);
  assert_int_equal(rc, 78);
  assert_string_equal(err, "m0: route GET /g names actor \"ghost\", which neither the program nor app_actors declares "
                           "(add it to app_actors with placement external, or fix the name)\n");
  free(err);
}

int main(void) {
  /* A worker spawned by a supervisor this binary started (a refusal that
   * regressed and let --workers 2 serve) is this binary again: it must not
   * run the tests, or each one spawns more. */
  if (getenv("M0__WORKER")) return 1;
  if (!mkdtemp(tmpdir)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_flag_forms, setup),
      cmocka_unit_test_setup(test_flag_refusals, setup),
      cmocka_unit_test_setup(test_variables, setup),
      cmocka_unit_test_setup(test_checks_counts_and_modes, setup),
      cmocka_unit_test_setup(test_checks_application, setup),
      cmocka_unit_test_setup(test_variables_unknown, setup),
      cmocka_unit_test_setup(test_checks_pool_routes, setup),
      cmocka_unit_test_setup(test_checks_descriptors, setup),
      cmocka_unit_test_setup(test_checks_supervision, setup),
      cmocka_unit_test_setup(test_checks_trace, setup),
      cmocka_unit_test_setup(test_checks_run_dir, setup),
      cmocka_unit_test_setup(test_topology_refusals, setup),
      cmocka_unit_test_setup(test_topology_actors, setup),
      cmocka_unit_test_setup(test_topology_applied, setup),
      cmocka_unit_test_setup(test_app_actors_refusals, setup),
      cmocka_unit_test_setup(test_routes_refusals, setup),
      cmocka_unit_test_setup(test_app_actors_read, setup),
      cmocka_unit_test_setup(test_app_decl_merge, setup),
      cmocka_unit_test_setup(test_app_decl_refusals, setup),
      cmocka_unit_test_setup(test_checks_actors, setup),
      cmocka_unit_test_setup(test_doctor, setup),
      cmocka_unit_test_setup(test_doctor_actors, setup),
      cmocka_unit_test_setup(test_doctor_bounds, setup),
      cmocka_unit_test_setup(test_doctor_running, setup),
      cmocka_unit_test_setup(test_serve_codes, setup),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "test_config: could not remove %s\n", tmpdir);
  return rc;
}
