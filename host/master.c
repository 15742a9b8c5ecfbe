/* The master (host/master.h). */
#include "host/master.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host/process.h"
#include "host/reload.h"
#include "host/title.h"
#include "transport/systemd.h"

#define MASTER_GRACE_MS 5000 /* past the drain's bound, for the last generation's teardown */

typedef struct master {
  int chan;      /* the master channel: generations say here which one serves */
  int sigfd;     /* TERM, INT, HUP, USR2, USR1, CHLD */
  pid_t current; /* the serving generation */
  pid_t past[8];  /* generations that served before it: their exits are said */
  bool stopping;
  bool done;     /* the serving generation exited */
  int code;      /* ... with this */
  int64_t deadline; /* stopping: the last child's exit is waited for until then */
  long drain_ms;
} master;

static int master_code(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st); }

/* A child's exit, reaped here, or by the generation that spawned it, still
 * its parent then (REAPED=): a supervisor's waitpid(-1) takes its
 * successor's exit when a stop ends that one first. */
static void master_exited(master *m, pid_t w, int st) {
  for (size_t i = 0; w != m->current && i < sizeof m->past / sizeof m->past[0]; i++)
    if (m->past[i] == w)
      fprintf(stderr, "m0: master: the generation that served before (pid %d) %s %d\n", (int)w,
              WIFEXITED(st) ? "exited" : "died of signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
  if (w != m->current || m->done) return;
  m->done = true;
  m->code = master_code(st);
  if (!m->stopping) {
    fprintf(stderr, "m0: master: the serving generation (pid %d) %s %d; exiting %d\n", (int)w,
            WIFEXITED(st) ? "exited" : "died of signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), m->code);
    m->deadline = m0__now_ms() + m->drain_ms + MASTER_GRACE_MS;
  }
}

/* Every datagram waiting on the channel: MAINPID=<pid> names the serving
 * generation, REAPED=<pid>,<wait status> is a child's exit its parent took;
 * the other lines go to systemd from this pid. */
static void master_read_chan(master *m) {
  char buf[512];
  ssize_t n;
  while ((n = recv(m->chan, buf, sizeof buf - 1, MSG_DONTWAIT)) > 0) {
    buf[n] = 0;
    char fwd[512] = "";
    size_t used = 0;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
      if (!strncmp(line, "REAPED=", 7)) { /* the generation that spawned it reaped it: its exit */
        long pid = 0;
        int st = 0;
        if (sscanf(line + 7, "%ld,%d", &pid, &st) == 2) master_exited(m, (pid_t)pid, st);
        continue;
      }
      if (!strncmp(line, "MAINPID=", 8)) {
        pid_t now = (pid_t)atol(line + 8);
        if (now != m->current) {
          memmove(m->past + 1, m->past, sizeof m->past - sizeof m->past[0]);
          m->past[0] = m->current;
        }
        m->current = now;
        continue;
      }
      int w = snprintf(fwd + used, sizeof fwd - used, "%s%s", used ? "\n" : "", line);
      if (w > 0 && (size_t)w < sizeof fwd - used) used += (size_t)w;
    }
    if (used) m0__sd_notify(fwd);
  }
}

/* Every child that has exited: the serving generation's exit ends the
 * master; the others (a drained generation, an orphan) are only reaped. */
static void master_reap(master *m) {
  master_read_chan(m); /* a successor's word comes before its predecessor's exit */
  int st;
  pid_t w;
  while ((w = waitpid(-1, &st, WNOHANG)) > 0) master_exited(m, w, st);
}

static void master_signal(master *m, int sig) {
  if (sig == SIGCHLD) {
    master_reap(m);
    return;
  }
  master_read_chan(m); /* forward to the one that serves now */
  if (sig == SIGHUP || sig == SIGUSR2 || sig == SIGUSR1) {
    if (!m->stopping && !m->done) kill(m->current, sig);
    return;
  }
  if (m->stopping) return;
  m->stopping = true;
  m->deadline = m0__now_ms() + m->drain_ms + MASTER_GRACE_MS;
  m0__sd_notify("STOPPING=1");
  if (!m->done) kill(m->current, sig);
}

/* Once the serving generation has exited: the others (a generation still
 * draining, a child re-parented here) until none is left or the bound. */
static bool master_children_left(master *m) {
  int st;
  pid_t w;
  while ((w = waitpid(-1, &st, WNOHANG)) > 0) {
  }
  return !(w < 0 && errno == ECHILD) && m0__now_ms() < m->deadline;
}

/* What generation 1's signal handlers wrote after its last look (its
 * self-pipe's read end, kept across the exec; negative: none): a signal
 * that came between that look and the exec, taken by a thread that did not
 * block it. Read before the descriptors are closed; the signal numbers in
 * *late. Returns how many. */
static size_t master_late(int fd, unsigned char *late, size_t n) {
  if (fd < 0) return 0;
  ssize_t got = read(fd, late, n); /* non-blocking: the pipe was made so */
  close(fd);
  return got > 0 ? (size_t)got : 0;
}

/* Those signals, handled as if they came now: before any pending here. */
static void master_late_signals(master *m, const unsigned char *late, size_t n) {
  for (size_t i = 0; i < n; i++) master_signal(m, late[i]);
}

/* M0__MASTER=chan,serving pid,stopping,drain ms,its wait status if generation
 * 1 reaped it (-1 if not),generation 1's signal pipe (negative if none),pid file
 * (m0__reload_exit):
 * not the configuration, which the master never reads again (a file
 * changed since must not stop it). */
int m0__master_run(const m0_app *app) {
  master m = {.chan = -1};
  const char *v = getenv("M0__MASTER");
  long cur = 0;
  int stopping = 0, at = 0, reaped = -1, sigpipe = -1;
  if (!v || sscanf(v, "%d,%ld,%d,%ld,%d,%d,%n", &m.chan, &cur, &stopping, &m.drain_ms, &reaped, &sigpipe, &at) != 6 ||
      !at || m.chan < 3 || cur <= 0) {
    fprintf(stderr, "m0: a master was started without what generation 1 passes (M0__MASTER)\n");
    return 1;
  }
  char pidfile[PATH_MAX];
  snprintf(pidfile, sizeof pidfile, "%s", v + at);
  unsetenv("M0__MASTER");
  m.current = (pid_t)cur;
  if (stopping) { /* a SIGTERM reached generation 1 in its drain: already sent on */
    m.stopping = true;
    m.deadline = m0__now_ms() + m.drain_ms + MASTER_GRACE_MS;
  }
  unsigned char late[64];
  size_t nlate = master_late(sigpipe, late, sizeof late);
  /* Nothing of generation 1 but the channel and stdio. */
  close_range(3, (unsigned)m.chan - 1, 0);
  close_range((unsigned)m.chan + 1, ~0u, 0);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  m0__title_set(app->name, "master");
  /* Blocked since before the exec (m0__reload_exit): none was lost. */
  sigset_t set;
  sigemptyset(&set);
  int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR2, SIGUSR1, SIGCHLD};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaddset(&set, sigs[i]);
  sigprocmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);
  if ((m.sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
    fprintf(stderr, "m0: master: cannot make a signalfd: %s\n", strerror(errno));
    return 1;
  }
  master_reap(&m); /* a child may have exited before the exec: no SIGCHLD for it here */
  master_late_signals(&m, late, nlate);
  if (!m.done && reaped >= 0) { /* generation 1 reaped it in its drain */
    m.done = true;
    m.code = master_code(reaped);
    m.deadline = m0__now_ms() + m.drain_ms + MASTER_GRACE_MS;
  }
  if (!m.done && kill(m.current, 0) != 0) { /* reaped before the exec: its code is not known */
    fprintf(stderr, "m0: master: the serving generation (pid %d) is gone; exiting 1\n", (int)m.current);
    m.done = true;
    m.code = 1;
    m.deadline = m0__now_ms() + m.drain_ms + MASTER_GRACE_MS;
  }
  for (;;) {
    if (m.done && !master_children_left(&m)) break;
    struct pollfd pf[2] = {{m.sigfd, POLLIN, 0}, {m.chan, POLLIN, 0}};
    int64_t left = m.done ? m.deadline - m0__now_ms() : -1;
    int n = poll(pf, 2, m.done ? (int)(left < 0 ? 0 : left > 1000 ? 1000 : left) : -1);
    if (n < 0 && errno != EINTR) break;
    if (pf[1].revents & POLLIN) master_read_chan(&m);
    struct signalfd_siginfo si;
    while (read(m.sigfd, &si, sizeof si) == (ssize_t)sizeof si) master_signal(&m, (int)si.ssi_signo);
  }
  m0__reload_pidfile_remove(pidfile);
  return m.code;
}

int m0__master_first(const m0_app *app, const m0_config *cfg) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) != 0) {
    fprintf(stderr, "m0: cannot make the master channel: %s\n", strerror(errno));
    return 1;
  }
  sigset_t set;
  sigemptyset(&set);
  int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR2, SIGUSR1, SIGCHLD};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaddset(&set, sigs[i]);
  sigprocmask(SIG_BLOCK, &set, NULL); /* from now on for the signalfd; generation 1 gets none blocked */
  pid_t pid = m0__reload_spawn_first(sv[1]);
  close(sv[1]);
  if (pid < 0) {
    fprintf(stderr, "m0: cannot start generation 1: %s\n", strerror(errno));
    return 1;
  }
  const char *pidfile = M0__CFGS(cfg, pid_file);
  if (m0__reload_pidfile_write(pidfile) != 0) {
    kill(pid, SIGTERM);
    pidfile = "";
  }
  char v[PATH_MAX + 96];
  snprintf(v, sizeof v, "%d,%ld,0,%ld,-1,-1,%s", sv[0], (long)pid, M0__CFG(cfg, drain_timeout_ms), pidfile);
  setenv("M0__MASTER", v, 1);
  return m0__master_run(app);
}
