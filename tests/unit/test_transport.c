/* transport/: the listener's addresses and its refusals, systemd's two
 * protocols at their edges (socket activation refused with the reason rather
 * than served wrong), the run directory (where a private one is made, what
 * closing removes, and that a host refused in another's directory removes
 * nothing), the shared page (sizes, attach by path and by descriptor, each
 * refusal naming what it refused), the descriptor hand-off, and topology
 * URLs that cannot be built. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <linux/netlink.h>
#include <unistd.h>

#include "base/errors.h"
#include "transport/handoff.h"
#include "transport/listen.h"
#include "transport/page.h"
#include "transport/rundir.h"
#include "transport/systemd.h"
#include "transport/topology.h"

#define assert_contains(hay, needle)                                              \
  do {                                                                            \
    if (!strstr((hay), (needle))) fail_msg("\"%s\" does not say \"%s\"", (hay), (needle)); \
  } while (0)

/* A fresh private directory of this test's own (not through rundir.c). */
static void tmpdir(char *out, size_t n) {
  snprintf(out, n, "/tmp/m0-test-transport-XXXXXX");
  assert_non_null(mkdtemp(out));
}

static void rm_tree(const char *dir) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

static void touch(const char *dir, const char *name, const char *content) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs(content, f);
  fclose(f);
}

static bool exists(const char *dir, const char *name) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return access(p, F_OK) == 0;
}

static bool fd_open(int fd) { return fcntl(fd, F_GETFD) >= 0; }

/* The lowest descriptor not open now: with RLIMIT_NOFILE set to it plus k,
 * exactly k more can be opened. */
static int lowest_free(void) {
  int fd = dup(0);
  assert_true(fd >= 0);
  close(fd);
  return fd;
}

/* ---- listen.c ---- */

static void test_parse_host(void **st) {
  struct sockaddr_storage ss;
  socklen_t len;
  assert_true(m0__parse_host("127.0.0.1", &ss, &len));
  assert_int_equal(ss.ss_family, AF_INET);
  assert_int_equal(len, sizeof(struct sockaddr_in));
  assert_true(m0__parse_host("localhost", &ss, &len));
  assert_int_equal(ss.ss_family, AF_INET);
  assert_int_equal(((struct sockaddr_in *)&ss)->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
  const char *v6[] = {"::", "::1", "[::1]", "[fe80::1]", "2001:db8::7"};
  for (size_t i = 0; i < sizeof v6 / sizeof *v6; i++) {
    assert_true(m0__parse_host(v6[i], &ss, &len));
    assert_int_equal(ss.ss_family, AF_INET6);
    assert_int_equal(len, sizeof(struct sockaddr_in6));
  }
  assert_true(m0__parse_host("[::1]", &ss, &len));
  assert_memory_equal(&((struct sockaddr_in6 *)&ss)->sin6_addr, &in6addr_loopback, sizeof in6addr_loopback);
  char longbr[80];
  snprintf(longbr, sizeof longbr, "[%070d]", 0); /* too long to be an address in brackets */
  const char *bad[] = {"", "[", "[]", "[::1", "::1]", "1.2.3", "256.1.1.1", "example.com", "127.0.0.1:80", longbr};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) assert_false(m0__parse_host(bad[i], &ss, &len));
}

static void test_listen(void **st) {
  char err[256] = "";
  int port = -1;
  assert_int_equal(m0__listen("example.com", 0, 16, &port, err, sizeof err), M0__EINVALID);
  assert_string_equal(err, "cannot read the address example.com");
  int fd = m0__listen("127.0.0.1", 0, 16, &port, err, sizeof err);
  assert_true(fd >= 0);
  assert_true(port > 0);
  assert_int_equal(m0__listen_port(fd), port);
  assert_true(fcntl(fd, F_GETFL) & O_NONBLOCK);
  assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
  /* the same port again: in use, named */
  char want[128];
  snprintf(want, sizeof want, "cannot bind 127.0.0.1 port %d: Address already in use", port);
  assert_int_equal(m0__listen("127.0.0.1", port, 16, &port, err, sizeof err), M0__EBIND);
  assert_string_equal(err, want);
  close(fd);
  /* IPv6, where this machine has it */
  int probe = socket(AF_INET6, SOCK_STREAM, 0);
  struct sockaddr_in6 lo = {.sin6_family = AF_INET6, .sin6_addr = in6addr_loopback};
  bool v6 = probe >= 0 && bind(probe, (struct sockaddr *)&lo, sizeof lo) == 0;
  if (probe >= 0) close(probe);
  if (v6) {
    fd = m0__listen("[::1]", 0, 16, &port, err, sizeof err);
    assert_true(fd >= 0);
    assert_true(port > 0);
    assert_int_equal(m0__listen_port(fd), port);
    close(fd);
  } else {
    print_message("skipped: IPv6 listening (no ::1 here)\n");
  }
  /* an address this machine does not have (TEST-NET-1, unless it has) */
  int other = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in tn = {.sin_family = AF_INET};
  inet_pton(AF_INET, "192.0.2.1", &tn.sin_addr);
  bool has_it = bind(other, (struct sockaddr *)&tn, sizeof tn) == 0;
  close(other);
  if (!has_it) {
    assert_int_equal(m0__listen("192.0.2.1", 0, 16, &port, err, sizeof err), M0__EBIND);
    assert_string_equal(err, "cannot bind 192.0.2.1 port 0: Cannot assign requested address");
  } else {
    print_message("skipped: 192.0.2.1 is an address of this machine\n");
  }
  /* no descriptor left for a socket */
  struct rlimit old, tight;
  getrlimit(RLIMIT_NOFILE, &old);
  tight = old;
  tight.rlim_cur = (rlim_t)lowest_free();
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &tight), 0);
  int rv = m0__listen("127.0.0.1", 0, 16, &port, err, sizeof err);
  setrlimit(RLIMIT_NOFILE, &old);
  assert_int_equal(rv, M0__ESYSTEM);
  assert_string_equal(err, "socket: Too many open files");
}

static void test_listen_host(void **st) {
  char err[256], out[64];
  int port, fd = m0__listen("127.0.0.1", 0, 4, &port, err, sizeof err);
  m0__listen_host(fd, "fallback", out, sizeof out);
  assert_string_equal(out, "127.0.0.1");
  close(fd);
  fd = m0__listen("::1", 0, 4, &port, err, sizeof err);
  if (fd >= 0) {
    m0__listen_host(fd, "fallback", out, sizeof out);
    assert_string_equal(out, "[::1]");
    close(fd);
  } else {
    print_message("skipped: the name of an IPv6 listener (no ::1 here)\n");
  }
  int u = socket(AF_UNIX, SOCK_STREAM, 0);
  m0__listen_host(u, "fallback", out, sizeof out);
  assert_string_equal(out, "fallback");
  close(u);
  m0__listen_host(1000, "not open", out, sizeof out);
  assert_string_equal(out, "not open");
}

static void test_listen_port(void **st) {
  int p[2];
  assert_int_equal(pipe(p), 0);
  assert_int_equal(m0__listen_port(p[0]), M0__ESYSTEM); /* not a socket */
  close(p[0]);
  close(p[1]);
  int u = socket(AF_UNIX, SOCK_STREAM, 0);
  assert_int_equal(m0__listen_port(u), M0__EINVALID); /* a socket without a port */
  close(u);
}

/* ---- systemd.c ---- */

static int dgram_at(const char *path, bool abstract) {
  int s = socket(AF_UNIX, SOCK_DGRAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  memcpy(sa.sun_path + (abstract ? 1 : 0), path, strlen(path));
  socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path) + (abstract ? 1 : 0));
  assert_int_equal(bind(s, (struct sockaddr *)&sa, len), 0);
  return s;
}

static void got_datagram(int s, const char *want) {
  char buf[64];
  struct timeval tv = {5, 0};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ssize_t n = recv(s, buf, sizeof buf, 0);
  assert_int_equal(n, (ssize_t)strlen(want));
  assert_memory_equal(buf, want, (size_t)n);
}

static void test_sd_notify(void **st) {
  unsetenv("NOTIFY_SOCKET");
  assert_int_equal(m0__sd_notify("READY=1"), M0__ENOTFOUND);
  setenv("NOTIFY_SOCKET", "", 1);
  assert_int_equal(m0__sd_notify("READY=1"), M0__ENOTFOUND);
  setenv("NOTIFY_SOCKET", "relative/notify", 1);
  assert_int_equal(m0__sd_notify("READY=1"), M0__EINVALID);
  char longp[200];
  memset(longp, 'n', sizeof longp - 1);
  longp[0] = '/';
  longp[sizeof longp - 1] = 0;
  setenv("NOTIFY_SOCKET", longp, 1);
  assert_int_equal(m0__sd_notify("READY=1"), M0__EINVALID);
  char d[64], path[128];
  tmpdir(d, sizeof d);
  snprintf(path, sizeof path, "%s/notify", d);
  setenv("NOTIFY_SOCKET", path, 1);
  assert_int_equal(m0__sd_notify("READY=1"), M0__ESYSTEM); /* nobody listens there: lost, said so */
  int s = dgram_at(path, false);
  assert_int_equal(m0__sd_notify("READY=1"), 0);
  got_datagram(s, "READY=1");
  close(s);
  char name[64], at[80];
  snprintf(name, sizeof name, "m0-test-transport-%d", (int)getpid());
  snprintf(at, sizeof at, "@%s", name);
  s = dgram_at(name, true);
  setenv("NOTIFY_SOCKET", at, 1);
  assert_int_equal(m0__sd_notify("STOPPING=1"), 0);
  got_datagram(s, "STOPPING=1");
  close(s);
  /* out of descriptors: lost, said so, nothing else */
  setenv("NOTIFY_SOCKET", at, 1);
  struct rlimit old, tight;
  getrlimit(RLIMIT_NOFILE, &old);
  tight = old;
  tight.rlim_cur = (rlim_t)lowest_free();
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &tight), 0);
  int rv = m0__sd_notify("READY=1");
  setrlimit(RLIMIT_NOFILE, &old);
  assert_int_equal(rv, M0__ESYSTEM);
  unsetenv("NOTIFY_SOCKET");
  rm_tree(d);
}

/* Runs m0__sd_listen_fd with descriptor 3 replaced by `fd` (-1: closed) and
 * the variables given (pid NULL: this process's). Returns its result. */
static int activated_two(int fd, int fd4, const char *pid, const char *fds, char *err, size_t n, int *plain) {
  int saved = fcntl(3, F_DUPFD_CLOEXEC, 10), saved4 = fcntl(4, F_DUPFD_CLOEXEC, 10); /* put back after */
  if (fd >= 0) assert_int_equal(dup2(fd, 3), 3);
  else close(3);
  if (fd4 >= 0) assert_int_equal(dup2(fd4, 4), 4);
  else close(4);
  char me[24];
  snprintf(me, sizeof me, "%d", (int)getpid());
  if (pid) setenv("LISTEN_PID", pid, 1);
  else setenv("LISTEN_PID", me, 1);
  if (fds) setenv("LISTEN_FDS", fds, 1);
  else unsetenv("LISTEN_FDS");
  err[0] = 0;
  int rv = m0__sd_listen_fd(plain, err, n);
  if (rv == 3) {
    assert_true(fcntl(3, F_GETFL) & O_NONBLOCK);
    assert_true(fcntl(3, F_GETFD) & FD_CLOEXEC);
  }
  if (*plain == 4) {
    assert_true(fcntl(4, F_GETFL) & O_NONBLOCK);
    assert_true(fcntl(4, F_GETFD) & FD_CLOEXEC);
  }
  unsetenv("LISTEN_PID");
  unsetenv("LISTEN_FDS");
  close(3);
  close(4);
  if (saved >= 0) {
    dup2(saved, 3);
    close(saved);
  }
  if (saved4 >= 0) {
    dup2(saved4, 4);
    close(saved4);
  }
  return rv;
}

static int activated(int fd, const char *pid, const char *fds, char *err, size_t n) {
  int plain;
  int rv = activated_two(fd, -1, pid, fds, err, n, &plain);
  assert_int_equal(plain, -1);
  return rv;
}

static void test_sd_listen_fd(void **st) {
  char err[512];
  int l = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(l, 4), 0);
  unsetenv("LISTEN_PID");
  unsetenv("LISTEN_FDS");
  int plain;
  assert_int_equal(m0__sd_listen_fd(&plain, err, sizeof err), M0__ENOTFOUND); /* not activated */
  assert_int_equal(activated(l, NULL, "1", err, sizeof err), 3);
  assert_int_equal(activated(l, "1", "1", err, sizeof err), M0__ENOTFOUND);     /* another process's */
  assert_int_equal(activated(l, "x", "1", err, sizeof err), M0__ENOTFOUND);
  assert_int_equal(activated(l, NULL, NULL, err, sizeof err), M0__ENOTFOUND);   /* LISTEN_PID alone */
  assert_int_equal(activated(l, NULL, "0", err, sizeof err), M0__ENOTFOUND);    /* nothing handed over */
  /* two: the second is the plain listener beside HTTPS */
  assert_int_equal(activated_two(l, l, NULL, "2", err, sizeof err, &plain), 3);
  assert_int_equal(plain, 4);
  int pp[2];
  assert_int_equal(pipe(pp), 0);
  assert_int_equal(activated_two(l, pp[0], NULL, "2", err, sizeof err, &plain), M0__ECONFIG);
  assert_contains(err, "socket activation: descriptor 4 is a pipe, where m0 serves a listening TCP socket");
  close(pp[0]);
  close(pp[1]);
  assert_int_equal(activated(l, NULL, "3", err, sizeof err), M0__ECONFIG);
  assert_string_equal(err, "socket activation hands over 3 descriptors (LISTEN_FDS=3), but m0 serves at most two "
                           "listeners, descriptors 3 and 4 (give the .socket unit one ListenStream=, or two: "
                           "HTTPS's, then the plain one beside it)");
  const char *not_counts[] = {"abc", "", "-1", "1x"};
  for (size_t i = 0; i < sizeof not_counts / sizeof *not_counts; i++) {
    assert_int_equal(activated(l, NULL, not_counts[i], err, sizeof err), M0__ECONFIG);
    char want[64];
    snprintf(want, sizeof want, "LISTEN_FDS=%s is not a count of descriptors", not_counts[i]);
    assert_contains(err, want);
  }
  /* descriptor 3 is not a listener: each said as what it is */
  int p[2];
  assert_int_equal(pipe(p), 0);
  assert_int_equal(activated(p[0], NULL, "1", err, sizeof err), M0__ECONFIG);
  assert_contains(err, "socket activation: descriptor 3 is a pipe, where m0 serves a listening TCP socket");
  close(p[0]);
  close(p[1]);
  assert_int_equal(activated(-1, NULL, "1", err, sizeof err), M0__ECONFIG);
  assert_contains(err, "descriptor 3 is not open");
  int f = open("/dev/null", O_RDONLY);
  assert_int_equal(activated(f, NULL, "1", err, sizeof err), M0__ECONFIG);
  assert_contains(err, "descriptor 3 is not a socket");
  close(f);
  char d[64], path[128];
  tmpdir(d, sizeof d);
  snprintf(path, sizeof path, "%s/file", d);
  f = open(path, O_RDWR | O_CREAT, 0600);
  assert_int_equal(activated(f, NULL, "1", err, sizeof err), M0__ECONFIG);
  assert_contains(err, "descriptor 3 is a regular file");
  close(f);
  rm_tree(d);
  int u = socket(AF_INET, SOCK_DGRAM, 0);
  assert_int_equal(activated(u, NULL, "1", err, sizeof err), M0__ECONFIG);
  assert_contains(err, "descriptor 3 is a datagram (UDP) socket");
  close(u);
  int t = socket(AF_INET, SOCK_STREAM, 0);
  assert_int_equal(activated(t, NULL, "1", err, sizeof err), M0__ECONFIG);
  assert_contains(err, "descriptor 3 is a TCP socket that is not listening");
  close(t);
  int x = socket(AF_UNIX, SOCK_STREAM, 0);
  assert_int_equal(activated(x, NULL, "1", err, sizeof err), M0__ECONFIG);
  assert_contains(err, "descriptor 3 is a unix socket");
  close(x);
  x = socket(AF_UNIX, SOCK_SEQPACKET, 0);
  assert_int_equal(activated(x, NULL, "1", err, sizeof err), M0__ECONFIG);
  assert_contains(err, "descriptor 3 is a unix socket");
  close(x);
  x = socket(AF_NETLINK, SOCK_RAW, 0);
  assert_int_equal(activated(x, NULL, "1", err, sizeof err), M0__ECONFIG);
  assert_contains(err, "descriptor 3 is not an IP socket");
  close(x);
  x = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP); /* root only */
  if (x >= 0) {
    assert_int_equal(activated(x, NULL, "1", err, sizeof err), M0__ECONFIG);
    assert_contains(err, "descriptor 3 is not a stream socket");
    close(x);
  } else {
    print_message("skipped: descriptor 3 a raw IP socket (needs root)\n");
  }
  close(l);
}

static void test_sd_private(void **st) {
  const char *private[] = {"LISTEN_PID=1", "LISTEN_FDS=1", "LISTEN_FDNAMES=web", "NOTIFY_SOCKET=/run/n"};
  for (size_t i = 0; i < 4; i++) assert_true(m0__sd_private(private[i]));
  const char *kept[] = {"M0_PORT=8080", "LISTEN=1", "LISTEN_PIDS=1", "NOTIFY_SOCKETS=x", "PATH=/bin"};
  for (size_t i = 0; i < 5; i++) assert_false(m0__sd_private(kept[i]));
}

/* ---- rundir.c ---- */

static void test_rundir_given(void **st) {
  char d[64], err[256] = "";
  tmpdir(d, sizeof d);
  touch(d, "notes.txt", "the user's\n");
  m0__rundir r;
  assert_int_equal(m0__rundir_open(&r, d, err, sizeof err), 0);
  assert_string_equal(r.path, d);
  assert_false(r.made);
  /* a host refused here (it never made its page) removes nothing */
  touch(d, "page", "another host's\n");
  touch(d, "loop.0.sock", "");
  m0__rundir_close(&r);
  assert_true(exists(d, "page"));
  assert_true(exists(d, "loop.0.sock"));
  assert_string_equal(r.path, "");
  /* a host that made its page removes m0's own files only, and keeps the directory */
  assert_int_equal(m0__rundir_open(&r, d, err, sizeof err), 0);
  r.ours = true;
  touch(d, "app-page", "");
  touch(d, "worker.1.sock", "");
  touch(d, ".sock", "");
  touch(d, "x.socket", "");
  m0__rundir_close(&r);
  assert_false(exists(d, "page"));
  assert_false(exists(d, "app-page"));
  assert_false(exists(d, "loop.0.sock"));
  assert_false(exists(d, "worker.1.sock"));
  assert_true(exists(d, "notes.txt"));
  assert_true(exists(d, ".sock"));
  assert_true(exists(d, "x.socket"));
  assert_int_equal(access(d, F_OK), 0);
  m0__rundir_close(&r); /* twice: nothing more */
  /* no directory given at all: a private one */
  assert_int_equal(m0__rundir_open(&r, NULL, err, sizeof err), 0);
  assert_true(r.made);
  char made[PATH_MAX];
  snprintf(made, sizeof made, "%s", r.path);
  m0__rundir_close(&r);
  assert_int_not_equal(access(made, F_OK), 0);
  /* a directory that went away under it: nothing to remove, no harm */
  assert_int_equal(m0__rundir_open(&r, "/nonexistent/m0-run", err, sizeof err), 0);
  r.ours = true;
  m0__rundir_close(&r);
  assert_string_equal(r.path, "");
  rm_tree(d);
}

/* Where a private run directory is made: $XDG_RUNTIME_DIR if this user can
 * write there, else $TMPDIR, else /tmp; 0700; removed at close. */
static void private_in(const char *xdg, const char *tmp, const char *want_base) {
  if (xdg) setenv("XDG_RUNTIME_DIR", xdg, 1);
  else unsetenv("XDG_RUNTIME_DIR");
  if (tmp) setenv("TMPDIR", tmp, 1);
  else unsetenv("TMPDIR");
  m0__rundir r;
  char err[256] = "", prefix[128];
  assert_int_equal(m0__rundir_open(&r, "", err, sizeof err), 0);
  assert_true(r.made);
  snprintf(prefix, sizeof prefix, "%s/m0-", want_base);
  assert_memory_equal(r.path, prefix, strlen(prefix));
  struct stat sb;
  assert_int_equal(stat(r.path, &sb), 0);
  assert_int_equal(sb.st_mode & 07777, 0700);
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s", r.path);
  touch(path, "page", "");
  m0__rundir_close(&r);
  assert_int_not_equal(access(path, F_OK), 0);
}

static void test_rundir_private(void **st) {
  char *old_xdg = getenv("XDG_RUNTIME_DIR") ? strdup(getenv("XDG_RUNTIME_DIR")) : NULL;
  char *old_tmp = getenv("TMPDIR") ? strdup(getenv("TMPDIR")) : NULL;
  char x[64], t[64];
  tmpdir(x, sizeof x);
  tmpdir(t, sizeof t);
  private_in(x, t, x);
  private_in("/nonexistent/xdg", t, t);
  private_in(NULL, t, t);
  private_in("/nonexistent/xdg", "/nonexistent/tmp", "/tmp");
  private_in(NULL, NULL, "/tmp");
  /* root may write to /proc but no directory can be made there */
  if (access("/proc", W_OK | X_OK) == 0) {
    setenv("XDG_RUNTIME_DIR", "/proc", 1);
    m0__rundir r;
    char err[256] = "";
    assert_int_equal(m0__rundir_open(&r, "", err, sizeof err), M0__ERUNDIR);
    assert_contains(err, "cannot make a private run directory in /proc: ");
    assert_false(r.made);
    m0__rundir_close(&r);
  } else {
    print_message("skipped: a private run directory that cannot be made (needs root)\n");
  }
  if (old_xdg) setenv("XDG_RUNTIME_DIR", old_xdg, 1);
  else unsetenv("XDG_RUNTIME_DIR");
  if (old_tmp) setenv("TMPDIR", old_tmp, 1);
  else unsetenv("TMPDIR");
  free(old_xdg);
  free(old_tmp);
  rm_tree(x);
  rm_tree(t);
}

/* ---- page.c ---- */

static off_t size_of(const char *dir, const char *name) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  struct stat sb;
  assert_int_equal(stat(p, &sb), 0);
  assert_int_equal(sb.st_mode & 0777, 0600);
  return sb.st_size;
}

static void test_page_create_attach(void **st) {
  char d[64], err[512] = "";
  tmpdir(d, sizeof d);
  m0__page pg, other;
  assert_int_equal(m0__page_create(&pg, d, 3, 5, err, sizeof err), 0);
  /* head, two banks of loop lines (host/reload.h), refusals, bus, edges, the recent records, restarts, the
   * host's figures, the actors' lines, each loop's figures, the rows' keys, the actors' names, what the observer
   * reads (the rates' window, marks and rates, the spawned instances' pids, per bank and loop its instances) */
  assert_int_equal(size_of(d, "page"), 64 + 2 * 3 * 128 + M0__PAGE_REFUSAL_LINES * (8 + 8 * M0__PAGE_REFUSAL_REASONS) +
                                           448 + M0__PAGE_EDGE_LINES * 32 +
                                           64 + M0__PAGE_TRACE_LINES * 80 + M0__PAGE_APP_ACTORS * 8 + 64 +
                                           M0__PAGE_APP_ACTORS * 256 + 3 * sizeof(m0__loop_figures) +
                                           M0__PAGE_CHANNEL_LINES * sizeof(m0__channel_line) +
                                           (M0__PAGE_ROW_NONE + M0__PAGE_APP_ACTORS + 1) * 8 +
                                           M0__PAGE_APP_ACTORS * M0__PAGE_NAME_MAX + 8 + 2 * M0__PAGE_EDGE_LINES * 8 +
                                           M0__PAGE_APP_ACTORS * M0__PAGE_SLOTS * 8 +
                                           2 * 3 * (16 + M0__PAGE_INSTANCE_LINES * 8));
  assert_int_equal(size_of(d, "app-page"), 5 * 8);
  assert_int_equal(pg.head->loops, 3);
  assert_int_equal(pg.head->app_slots, 5);
  assert_non_null(pg.app);
  pg.lines[2].requests = 42;
  pg.app[4] = 7;
  /* another mapping by path sees the same words */
  assert_int_equal(m0__page_attach(&other, d, err, sizeof err), 0);
  assert_int_equal(other.head->loops, 3);
  assert_int_equal(other.lines[2].requests, 42);
  assert_null(other.app); /* by path: the loops' page only */
  assert_int_equal(atomic_load(&other.head->generation), 1);
  /* Generation 2 has the other bank; generation 3 the first again. */
  m0__page_use_bank(&other, 2);
  assert_int_equal(other.lines[2].requests, 0);
  other.lines[2].requests = 9;
  assert_int_equal(pg.lines[2].requests, 42);
  assert_int_equal((char *)other.refusals - (char *)other.head, (char *)pg.refusals - (char *)pg.head); /* shared */
  m0__page_use_bank(&other, 3);
  assert_int_equal(other.lines[2].requests, 42);
  m0__page_close(&other);
  /* by descriptor, as a worker inherits them */
  int fd = dup(pg.fd), app_fd = dup(pg.app_fd);
  assert_int_equal(m0__page_attach_fd(&other, fd, app_fd, err, sizeof err), 0);
  assert_int_equal(other.app[4], 7);
  other.app[0] = 9;
  assert_int_equal(pg.app[0], 9);
  assert_int_equal(m0__page_next_id(&other), 1);
  assert_int_equal(m0__page_next_id(&pg), 2);
  m0__page_close(&other);
  assert_false(fd_open(fd));
  assert_false(fd_open(app_fd));
  /* an app descriptor for a page that wants no app words: none mapped */
  m0__page plain;
  char d2[64];
  tmpdir(d2, sizeof d2);
  assert_int_equal(m0__page_create(&plain, d2, 1, 0, err, sizeof err), 0);
  fd = dup(plain.fd);
  app_fd = dup(pg.app_fd);
  assert_int_equal(m0__page_attach_fd(&other, fd, app_fd, err, sizeof err), 0);
  assert_null(other.app);
  m0__page_close(&other);
  close(app_fd);
  m0__page_close(&plain);
  rm_tree(d2);
  /* no app descriptor: no app words */
  fd = dup(pg.fd);
  assert_int_equal(m0__page_attach_fd(&other, fd, -1, err, sizeof err), 0);
  assert_null(other.app);
  assert_int_equal(other.app_fd, -1);
  m0__page_close(&other);
  m0__page_close(&pg);
  m0__page_close(&pg); /* twice: nothing more */
  assert_int_equal(pg.fd, -1);
  /* a second host's page in the same directory is refused, naming it */
  char want[160];
  assert_int_equal(m0__page_create(&other, d, 1, 0, err, sizeof err), M0__EPAGE);
  snprintf(want, sizeof want, "cannot make %s/page: it exists (another host uses this run directory", d);
  assert_contains(err, want);
  /* an app page left there, the page itself not: refused, the page closed */
  char p[128];
  snprintf(p, sizeof p, "%s/page", d);
  unlink(p);
  assert_int_equal(m0__page_create(&other, d, 1, 2, err, sizeof err), M0__EPAGE);
  snprintf(want, sizeof want, "cannot make %s/app-page: it exists", d);
  assert_contains(err, want);
  assert_null(other.head);
  assert_int_equal(other.fd, -1);
  /* no page without app words: no app page made */
  unlink(p);
  snprintf(p, sizeof p, "%s/app-page", d);
  unlink(p);
  assert_int_equal(m0__page_create(&pg, d, 1, 0, err, sizeof err), 0);
  assert_false(exists(d, "app-page"));
  assert_null(pg.app);
  m0__page_close(&pg);
  rm_tree(d);
}

/* Rows keyed by what they count (transport/page.h, m0__page_rows): found or
 * taken, the same row from another mapping, a new key a new row, never the
 * no-route row, and none once every row is taken. */
static void test_page_rows(void **st) {
  (void)st;
  char d[64], err[512] = "", name[32];
  tmpdir(d, sizeof d);
  m0__page pg, other;
  assert_int_equal(m0__page_create(&pg, d, 2, 0, err, sizeof err), 0);
  assert_int_equal(m0__page_attach(&other, d, err, sizeof err), 0);
  assert_int_equal(m0__page_route_row(&pg, "GET", "/a", false), M0__ENOTFOUND); /* not taken yet */
  int a = m0__page_route_row(&pg, "GET", "/a", true);
  assert_true(a >= 0 && a < M0__PAGE_ROW_NONE);
  assert_int_equal(m0__page_route_row(&pg, "GET", "/a", true), a);
  assert_int_equal(m0__page_route_row(&other, "GET", "/a", false), a); /* another process's lookup */
  int b = m0__page_route_row(&other, "POST", "/a", true);
  assert_true(b >= 0 && b != a);
  assert_int_equal(m0__page_route_row(&pg, "POST", "/a", false), b);
  int echo = m0__page_actor_row(&pg, "echo", true);
  assert_true(echo >= 0 && echo < M0__PAGE_APP_ACTORS);
  assert_int_equal(m0__page_actor_row(&other, "echo", false), echo);
  assert_int_equal(m0__page_actor_row(&pg, "/a", false), M0__ENOTFOUND); /* actors' rows are their own */
  /* every route row taken: each key its own row, then none */
  bool used[M0__PAGE_ROW_NONE] = {false};
  used[a] = used[b] = true;
  for (int i = 0; i < M0__PAGE_ROW_NONE - 2; i++) {
    snprintf(name, sizeof name, "/r%d", i);
    int r = m0__page_route_row(i % 2 ? &pg : &other, "GET", name, true);
    assert_true(r >= 0 && r < M0__PAGE_ROW_NONE && !used[r]);
    used[r] = true;
  }
  assert_int_equal(m0__page_route_row(&pg, "GET", "/one-more", true), M0__ENOTFOUND);
  assert_int_equal(m0__page_route_row(&pg, "GET", "/a", true), a); /* the old ones keep theirs */
  for (int i = 0; i < M0__PAGE_APP_ACTORS - 1; i++) {
    snprintf(name, sizeof name, "actor%d", i);
    assert_true(m0__page_actor_row(&pg, name, true) >= 0);
  }
  assert_int_equal(m0__page_actor_row(&other, "late", true), M0__ENOTFOUND);
  assert_int_equal(m0__page_actor_row(&other, "echo", true), echo);
  m0__page_close(&other);
  m0__page_close(&pg);
  rm_tree(d);
}

static void test_page_refusals(void **st) {
  char d[64], err[512] = "", want[256];
  tmpdir(d, sizeof d);
  m0__page pg;
  /* a directory that does not exist */
  assert_int_equal(m0__page_create(&pg, "/nonexistent/m0", 1, 0, err, sizeof err), M0__EPAGE);
  assert_string_equal(err, "cannot open /nonexistent/m0/page: No such file or directory");
  /* attach: no page, a page too small, a file that is not a page */
  assert_int_equal(m0__page_attach(&pg, d, err, sizeof err), M0__EPAGE);
  snprintf(want, sizeof want, "no shared page at %s/page", d);
  assert_string_equal(err, want);
  touch(d, "page", "short");
  assert_int_equal(m0__page_attach(&pg, d, err, sizeof err), M0__EPAGE);
  assert_string_equal(err, want);
  char junk[200];
  memset(junk, 'j', sizeof junk - 1);
  junk[sizeof junk - 1] = 0;
  touch(d, "page", junk);
  assert_int_equal(m0__page_attach(&pg, d, err, sizeof err), M0__EPAGE);
  snprintf(want, sizeof want, "%s/page is not an m0 shared page (magic word missing)", d);
  assert_string_equal(err, want);
  assert_null(pg.head);
  assert_int_equal(pg.fd, -1);
  /* a page of another layout version */
  char p[128];
  snprintf(p, sizeof p, "%s/page", d);
  unlink(p);
  m0__page made;
  assert_int_equal(m0__page_create(&made, d, 1, 1, err, sizeof err), 0);
  made.head->version = M0__PAGE_VERSION + 1;
  assert_int_equal(m0__page_attach(&pg, d, err, sizeof err), M0__EPAGE);
  assert_string_equal(err, want);
  int fd = dup(made.fd);
  assert_int_equal(m0__page_attach_fd(&pg, fd, -1, err, sizeof err), M0__EPAGE);
  snprintf(want, sizeof want, "descriptor %d is not an m0 shared page (magic word missing)", fd);
  assert_string_equal(err, want);
  assert_false(fd_open(fd)); /* refused: closed */
  made.head->version = M0__PAGE_VERSION;
  /* attach_fd: a pipe, a descriptor that is not open, one opened read-only */
  int pp[2];
  assert_int_equal(pipe(pp), 0);
  assert_int_equal(m0__page_attach_fd(&pg, pp[0], -1, err, sizeof err), M0__EPAGE);
  snprintf(want, sizeof want, "inherited descriptor %d is not a shared page", pp[0]);
  assert_string_equal(err, want);
  close(pp[0]);
  close(pp[1]);
  assert_int_equal(m0__page_attach_fd(&pg, 1000, -1, err, sizeof err), M0__EPAGE);
  assert_string_equal(err, "inherited descriptor 1000 is not a shared page");
  int ro = open(p, O_RDONLY);
  assert_int_equal(m0__page_attach_fd(&pg, ro, -1, err, sizeof err), M0__EPAGE);
  assert_string_equal(err, "cannot map the inherited shared page: Permission denied");
  assert_null(pg.head);
  close(ro);
  char ap[128];
  snprintf(ap, sizeof ap, "%s/app-page", d);
  fd = dup(made.fd);
  ro = open(ap, O_RDONLY);
  assert_int_equal(m0__page_attach_fd(&pg, fd, ro, err, sizeof err), M0__EPAGE);
  assert_string_equal(err, "cannot map the inherited app page: Permission denied");
  assert_null(pg.head);
  assert_null(pg.app);
  assert_false(fd_open(fd));
  close(ro);
  /* attach by path to a page file this user cannot map (read-only file system
   * is not at hand; a page file turned into a directory will do) */
  m0__page_close(&made);
  unlink(p);
  unlink(ap);
  assert_int_equal(mkdir(p, 0700), 0);
  assert_int_equal(m0__page_attach(&pg, d, err, sizeof err), M0__EPAGE);
  snprintf(want, sizeof want, "cannot open %s/page: Is a directory", d);
  assert_string_equal(err, want);
  rmdir(p);
  rm_tree(d);
}

/* A page that cannot be sized: the file-size limit below it. */
static void test_page_cannot_size(void **st) {
  char d[64], err[512] = "", want[256];
  tmpdir(d, sizeof d);
  struct rlimit old, tight;
  getrlimit(RLIMIT_FSIZE, &old);
  tight = old;
  tight.rlim_cur = 16;
  void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &tight), 0);
  m0__page pg;
  int rv = m0__page_create(&pg, d, 1, 0, err, sizeof err);
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, was);
  assert_int_equal(rv, M0__EPAGE);
  snprintf(want, sizeof want, "cannot size %s/page: File too large", d);
  assert_string_equal(err, want);
  rm_tree(d);
}

/* ---- handoff.c ---- */

static void test_handoff(void **st) {
  int hf[4];
  assert_int_equal(m0__handoff_make(hf, 2), 0);
  for (int i = 0; i < 4; i++) {
    assert_true(fcntl(hf[i], F_GETFD) & FD_CLOEXEC);
    assert_true(fcntl(hf[i], F_GETFL) & O_NONBLOCK);
  }
  /* nothing waiting */
  errno = 0;
  assert_int_equal(m0__handoff_recv(hf[0]), M0__ESYSTEM);
  assert_int_equal(errno, EAGAIN);
  /* a descriptor goes across, loop 1's channel apart from loop 0's */
  int p[2];
  assert_int_equal(pipe(p), 0);
  assert_int_equal(m0__handoff_send(hf[3], p[1]), 0);
  assert_int_equal(m0__handoff_recv(hf[0]), M0__ESYSTEM); /* not loop 0's */
  int got = m0__handoff_recv(hf[2]);
  assert_true(got >= 0 && got != p[1]);
  assert_true(fcntl(got, F_GETFD) & FD_CLOEXEC);
  assert_int_equal(write(got, "x", 1), 1); /* the same pipe */
  char c = 0;
  assert_int_equal(read(p[0], &c, 1), 1);
  assert_int_equal(c, 'x');
  close(got);
  /* a message without a descriptor is no hand-off, and the next one still is */
  assert_int_equal(send(hf[1], "h", 1, 0), 1);
  assert_int_equal(m0__handoff_send(hf[1], p[1]), 0);
  assert_int_equal(m0__handoff_recv(hf[0]), M0__EINVALID);
  got = m0__handoff_recv(hf[0]);
  assert_true(got >= 0);
  close(got);
  /* two descriptors in one message: refused, and neither left open here */
  {
    bool before[64];
    for (int fd = 0; fd < 64; fd++) before[fd] = fd_open(fd);
    int two[2] = {p[0], p[1]};
    char byte = 'h';
    struct iovec iov = {&byte, 1};
    union {
      char buf[CMSG_SPACE(sizeof two)];
      struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof u);
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof two);
    memcpy(CMSG_DATA(cm), two, sizeof two);
    assert_int_equal(sendmsg(hf[1], &msg, 0), 1);
    assert_int_equal(m0__handoff_recv(hf[0]), M0__EINVALID);
    for (int fd = 0; fd < 64; fd++) assert_int_equal(fd_open(fd), before[fd]);
  }
  /* credentials, not a descriptor (a receiver with SO_PASSCRED): no hand-off,
   * and never the pid taken for a descriptor */
  int one = 1;
  assert_int_equal(setsockopt(hf[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof one), 0);
  assert_int_equal(send(hf[1], "h", 1, 0), 1);
  assert_int_equal(m0__handoff_recv(hf[0]), M0__EINVALID);
  one = 0;
  setsockopt(hf[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof one);
  /* an empty datagram: nothing */
  assert_int_equal(send(hf[1], "", 0, 0), 0);
  assert_int_equal(m0__handoff_recv(hf[0]), M0__EINVALID);
  /* the receiving end closed: the send fails, said so */
  close(hf[2]);
  assert_int_equal(m0__handoff_send(hf[3], p[1]), M0__ESYSTEM);
  close(hf[3]);
  close(hf[0]);
  close(hf[1]);
  assert_int_equal(m0__handoff_send(hf[1], p[1]), M0__ESYSTEM); /* not a socket any more */
  close(p[0]);
  close(p[1]);
}

/* Out of descriptors part way: what was made is closed again. */
static void test_handoff_make_fails(void **st) {
  int hf[8];
  int first = lowest_free();
  bool before[64];
  for (int fd = 0; fd < 64; fd++) before[fd] = fd_open(fd);
  struct rlimit old, tight;
  getrlimit(RLIMIT_NOFILE, &old);
  tight = old;
  tight.rlim_cur = (rlim_t)first + 5; /* at most two pairs fit, so four do not */
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &tight), 0);
  int rv = m0__handoff_make(hf, 4);
  setrlimit(RLIMIT_NOFILE, &old);
  assert_int_equal(rv, M0__ESYSTEM);
  for (int fd = 0; fd < 64; fd++) assert_int_equal(fd_open(fd), before[fd]);
}

/* A hand-off is checked against the listener's family as it was when the
 * loop began to listen: one that comes after the drain closed the listener
 * (a sibling chose this loop just before) is still a connection to take,
 * and a number that names no connection (the listener, a file) never is. */
static void test_handoff_check(void **st) {
  char err[256] = "";
  int port = -1;
  int lf = m0__listen("127.0.0.1", 0, 16, &port, err, sizeof err);
  assert_true(lf >= 0);
  int family = m0__handoff_family(lf);
  assert_int_equal(family, AF_INET);
  int c = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(connect(c, (struct sockaddr *)&to, sizeof to), 0);
  int fd = -1;
  for (int i = 0; i < 1000 && fd < 0; i++) {
    fd = accept(lf, NULL, NULL);
    if (fd < 0) usleep(1000); /* the listener is non-blocking: the kernel's handshake, bounded */
  }
  assert_true(fd >= 0);
  assert_int_equal(m0__handoff_check(fd, family), 0);
  assert_int_equal(m0__handoff_check(lf, family), M0__EINVALID); /* listening */
  assert_int_equal(m0__handoff_check(fd, AF_INET6), M0__EINVALID);
  assert_int_equal(m0__handoff_check(fd, -1), M0__EINVALID); /* no family known */
  int file = open("/dev/null", O_RDONLY);
  assert_int_equal(m0__handoff_check(file, family), M0__EINVALID);
  close(lf); /* the drain closed the listener: the connection is still one of its family */
  assert_int_equal(m0__handoff_check(fd, family), 0);
  close(file);
  close(fd);
  close(c);
}

/* ---- topology.c ---- */

static void test_topology_refusals(void **st) {
  m0__topology t;
  assert_int_equal(m0__topology_build(&t, M0__MODE_SINGLE, 1, 0, M0__SCHEME_TCP, "10.0.0.1"), M0__EINVALID);
  assert_null(t.actors);
  char longdir[300];
  memset(longdir, 'd', sizeof longdir - 1);
  longdir[0] = '/';
  longdir[sizeof longdir - 1] = 0;
  assert_int_equal(m0__topology_build(&t, M0__MODE_SINGLE, 1, 0, M0__SCHEME_IPC, longdir), M0__ETOOBIG);
  assert_null(t.actors);
  assert_int_equal(m0__topology_build(&t, M0__MODE_PREFORK, 2, 1, M0__SCHEME_IPC, "/run/m0"), 0);
  assert_int_equal(t.nactors, 2 + 2 + 2 + 2);
  assert_string_equal(m0__topology_find(&t, M0__ACTOR_ID(M0__ROLE_WORKER, 1))->url, "ipc:///run/m0/worker.1.sock");
  assert_null(m0__topology_find(&t, M0__ACTOR_ID(M0__ROLE_LOOP, 2)));
  static char urls[8][256];
  assert_int_equal(m0__topology_use_urls(&t, M0__SCHEME_IPC, (const char(*)[256])urls, 7, "/r"), M0__EINVALID);
  for (int k = 0; k < 8; k++) snprintf(urls[k], sizeof urls[k], "ipc://<run-dir>/a%d-<pid>.sock", k);
  assert_int_equal(m0__topology_use_urls(&t, M0__SCHEME_IPC, (const char(*)[256])urls, 8, "/r"), 0);
  char want[64];
  snprintf(want, sizeof want, "ipc:///r/a3-%d.sock", (int)getpid());
  assert_string_equal(t.actors[3].url, want);
  /* a run directory that makes a URL too long */
  assert_int_equal(m0__topology_use_urls(&t, M0__SCHEME_IPC, (const char(*)[256])urls, 8, longdir), M0__ETOOBIG);
  m0__topology_free(&t);
  assert_null(t.actors);
  assert_int_equal(t.nactors, 0);
  assert_int_equal(m0__scheme_parse("inproc"), M0__SCHEME_INPROC);
  assert_int_equal(m0__scheme_parse("ipc"), M0__SCHEME_IPC);
  assert_int_equal(m0__scheme_parse("tcp"), M0__SCHEME_TCP);
  assert_int_equal(m0__scheme_parse("udp"), -1);
  assert_string_equal(m0__scheme_name(M0__SCHEME_TCP), "tcp");
  assert_string_equal(m0__scheme_name(M0__SCHEME_IPC), "ipc");
  assert_string_equal(m0__scheme_name(M0__SCHEME_INPROC), "inproc");
  assert_string_equal(m0__mode_name(M0__MODE_PREFORK), "prefork");
  assert_string_equal(m0__mode_name(M0__MODE_THREADS), "threads");
  assert_string_equal(m0__mode_name(M0__MODE_SINGLE), "single");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_host),        cmocka_unit_test(test_listen),
      cmocka_unit_test(test_listen_port),       cmocka_unit_test(test_listen_host),
      cmocka_unit_test(test_sd_notify),
      cmocka_unit_test(test_sd_listen_fd),      cmocka_unit_test(test_sd_private),
      cmocka_unit_test(test_rundir_given),      cmocka_unit_test(test_rundir_private),
      cmocka_unit_test(test_page_create_attach), cmocka_unit_test(test_page_rows), cmocka_unit_test(test_page_refusals),
      cmocka_unit_test(test_page_cannot_size),  cmocka_unit_test(test_handoff),
      cmocka_unit_test(test_handoff_make_fails), cmocka_unit_test(test_handoff_check),
      cmocka_unit_test(test_topology_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
