/* The one spawn (host/spawn.h) every process the host starts goes through:
 * its one environment filter (m0's private M0__*, systemd's activation and
 * notify socket, and M0_TLS_* when asked, never reach the child; extra
 * variables do), its one descriptor list (a listed descriptor at the number
 * the list gives, /dev/null where asked, nothing else of the parent's), its
 * process group and its signal reset (a signal the parent ignores is at
 * its default in the child). The child is /bin/sh, which says what it got
 * on the pipe the list puts at descriptor 1. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host/spawn.h"

/* Runs script under /bin/sh through m0__spawn with spec's settings, its
 * descriptor 1 a pipe; its output in out, its exit status returned. */
static int run(m0__spawn_spec spec, const char *script, char *out, size_t n) {
  int p[2];
  assert_int_equal(pipe2(p, O_CLOEXEC), 0);
  char *argv[] = {"sh", "-c", (char *)script, NULL};
  m0__spawn_fd fds[8];
  int nfds = 0;
  fds[nfds++] = (m0__spawn_fd){p[1], 1};
  for (int i = 0; i < spec.nfds; i++) fds[nfds++] = spec.fds[i];
  spec.path = "/bin/sh";
  spec.argv = argv;
  spec.fds = fds;
  spec.nfds = nfds;
  pid_t pid;
  assert_int_equal(m0__spawn(&spec, &pid), 0);
  close(p[1]);
  size_t got = 0;
  ssize_t k;
  while (got < n - 1 && (k = read(p[0], out + got, n - 1 - got)) > 0) got += (size_t)k;
  out[got] = 0;
  close(p[0]);
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  return st;
}

static void test_environment(void **st) {
  setenv("M0__PRIVATE", "x", 1);
  setenv("NOTIFY_SOCKET", "/run/systemd/notify", 1);
  setenv("LISTEN_FDS", "1", 1);
  setenv("M0_TLS_CERT", "/etc/cert.pem", 1);
  setenv("M0_THREADS", "3", 1);
  char *extra[] = {"M0__WORKER=2", NULL};
  const char *say = "echo \"[$M0__PRIVATE][$NOTIFY_SOCKET][$LISTEN_FDS][$M0_TLS_CERT][$M0_THREADS][$M0__WORKER]\"";
  char out[512];
  run((m0__spawn_spec){.extra = extra}, say, out, sizeof out);
  assert_string_equal(out, "[][][][/etc/cert.pem][3][2]\n"); /* a worker's, a next generation's */
  run((m0__spawn_spec){.extra = extra, .drop_tls = true}, say, out, sizeof out);
  assert_string_equal(out, "[][][][][3][2]\n"); /* an actor instance's: the host's identity in extra, or none */
  unsetenv("M0__PRIVATE");
  unsetenv("NOTIFY_SOCKET");
  unsetenv("LISTEN_FDS");
  unsetenv("M0_TLS_CERT");
  unsetenv("M0_THREADS");
}

static void test_descriptors(void **st) {
  int kept = open("/dev/null", O_RDONLY | O_CLOEXEC), moved = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int other = open("/dev/null", O_RDONLY | O_CLOEXEC);
  assert_true(kept >= 0 && moved >= 0 && other >= 0);
  m0__spawn_fd fds[] = {{kept, kept}, {moved, 9}, {M0__SPAWN_DEVNULL, 2}, {-1, 7}};
  char script[256], out[256];
  snprintf(script, sizeof script,
           "for f in %d 9 %d 7; do if [ -e /proc/self/fd/$f ]; then printf y; else printf n; fi; done; "
           "readlink /proc/$$/fd/2",
           kept, other);
  run((m0__spawn_spec){.fds = fds, .nfds = 4}, script, out, sizeof out);
  assert_string_equal(out, "yynn/dev/null\n"); /* listed, moved, not listed, skipped; stderr to /dev/null */
  close(kept);
  close(moved);
  close(other);
}

static void test_signals_and_group(void **st) {
  struct sigaction ign = {.sa_handler = SIG_IGN}, old;
  sigemptyset(&ign.sa_mask);
  sigaction(SIGTERM, &ign, &old);
  /* SigIgn's bit for SIGTERM (15): 0x4000. */
  const char *say = "grep SigIgn /proc/$$/status | tr -d '\\t'; cut -d' ' -f5 /proc/$$/stat; echo $$";
  char out[256];
  run((m0__spawn_spec){.reset_signals = true}, say, out, sizeof out);
  unsigned long long ign_mask = 0;
  long pgid = 0, pid = 0;
  assert_int_equal(sscanf(out, "SigIgn:%llx\n%ld\n%ld", &ign_mask, &pgid, &pid), 3);
  assert_int_equal(ign_mask & 0x4000, 0); /* at its default */
  assert_int_not_equal(pgid, pid);        /* the parent's group */
  run((m0__spawn_spec){.own_group = true}, say, out, sizeof out);
  assert_int_equal(sscanf(out, "SigIgn:%llx\n%ld\n%ld", &ign_mask, &pgid, &pid), 3);
  assert_int_not_equal(ign_mask & 0x4000, 0); /* ignored stays ignored across exec */
  assert_int_equal(pgid, pid);                /* a group of its own */
  sigaction(SIGTERM, &old, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_environment), cmocka_unit_test(test_descriptors),
                                     cmocka_unit_test(test_signals_and_group)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
