/* Generations (host/reload.h). */
#include "host/reload.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/errors.h"
#include "base/file.h"
#include "config/certs.h"
#include "host/process.h"
#include "host/rollback.h"
#include "host/signals.h"
#include "host/spawn.h"
#include "transport/systemd.h"

extern char **environ;

/* Process-wide, as the signal pipe is: one binary, one argv per process. */
static char reload_exe[PATH_MAX];
static const m0_app *reload_app;
static int reload_argc;
static char **reload_argv;
/* The top process's end (m0__reload_exit, which m0__exit_now calls too):
 * the --pid-file it wrote, and after a hand-over, the master channel's end
 * and the generation that serves. One per process: this process becomes
 * the master; m0_serve's alone, an embedded host never reloads. */
static char reload_pidfile[PATH_MAX];
static int reload_master_fd = -1;
static pid_t reload_succ;
static bool reload_stopping;
static long reload_drain_ms;
static int reload_succ_status = -1; /* its wait status when this process reaped it (a supervisor's waitpid(-1)) */
static int reload_chan_fd = -1;      /* a later generation's end of the master channel: that status goes there */

void m0__reload_remember(const m0_app *app, int argc, char **argv) {
  const char *exe = getenv("M0__EXE"); /* the first generation's path */
  if (exe && *exe) {
    snprintf(reload_exe, sizeof reload_exe, "%s", exe);
  } else {
    ssize_t n = readlink("/proc/self/exe", reload_exe, sizeof reload_exe - 1);
    reload_exe[n > 0 ? n : 0] = 0;
  }
  unsetenv("M0__EXE");
  reload_app = app;
  reload_argc = argc;
  reload_argv = argv;
}

/* pid runs (exists and is not a zombie). */
static bool reload_running(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "re");
  if (!f) return false;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *rp = strrchr(buf, ')');
  return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

static const char *sig_name(int sig) {
  return sig == M0__SIG_HUP ? "SIGHUP" : sig == M0__SIG_USR1 ? "SIGUSR1" : "SIGUSR2";
}

static void cloexec(int fd) {
  if (fd >= 0) fcntl(fd, F_SETFD, FD_CLOEXEC);
}

/* M0__UPGRADE=listen,page,app_page,ready,prev_pid,generation,made,chan and
 * M0__RUN_DIR (written by reload_spawn). */
int m0__reload_inherit(m0__process *p) {
  const char *v = getenv("M0__UPGRADE"), *dir = getenv("M0__RUN_DIR"), *cv = getenv("M0__CHAN");
  if (cv) { /* generation 1 under a master from the start (PID 1: host/master.h) */
    int fd = atoi(cv);
    if (fd >= 3) {
      cloexec(fd);
      p->reload.chan_fd = fd;
    }
    unsetenv("M0__CHAN");
  }
  m0__rollback_start(p); /* what the predecessor kept for a rollback (host/rollback.h) */
  if (!v) return 0;
  int lfd, pfd, afd, rfd, made, chan;
  long prev;
  unsigned long long gen;
  if (!dir ||
      sscanf(v, "%d,%d,%d,%d,%ld,%llu,%d,%d", &lfd, &pfd, &afd, &rfd, &prev, &gen, &made, &chan) != 8 ||
      lfd < 0 || pfd < 0 || gen < 2) {
    fprintf(stderr, "m0: a next generation was started without what its predecessor passes (M0__UPGRADE, "
                    "M0__RUN_DIR)\n");
    return M0__EINVALID;
  }
  /* Ours now; none of them goes further than this process (a worker is
   * handed exactly what it needs: host/supervisor.c). */
  int taken[] = {lfd, pfd, afd, rfd, chan};
  for (size_t k = 0; k < sizeof taken / sizeof *taken; k++) cloexec(taken[k]);
  p->reload.chan_fd = chan;
  p->inherit_listen = lfd;
  p->inherit_page = pfd;
  p->inherit_app_page = afd;
  snprintf(p->upgrade_dir, sizeof p->upgrade_dir, "%s", dir);
  p->upgrade_dir_made = made != 0;
  p->reload.generation = gen;
  p->reload.prev_fd = rfd;
  p->reload.prev_pid = (pid_t)prev;
  unsetenv("M0__UPGRADE");
  unsetenv("M0__RUN_DIR");
  return 1;
}

#define RELOAD_DOCTOR_MAX (1 << 20) /* a doctor's JSON is a few kB; past this it is not one */

/* The signals whose bytes the handler wrote on sigfd, into *seen (bit n:
 * signal n), for raise() once the doctor is done; true on SIGTERM or SIGINT. */
static bool reload_doctor_signals(int sigfd, uint64_t *seen) {
  unsigned char b;
  while (read(sigfd, &b, 1) == 1) *seen |= b < 64 ? 1ull << b : 0;
  return *seen & (1ull << SIGTERM | 1ull << SIGINT);
}

/* What fd says until its end, within bound_ms: the doctor's bytes (malloc'd,
 * NUL-terminated) in *out. 0, or ETIMEDOUT, ECANCELED (a SIGTERM came on
 * sigfd), or an errno. A poll with a deadline, never a blocking read: a
 * doctor that hangs (a FIFO named as a file it reads, say) must not hold
 * the serving generation's main thread; a stop is acted on at once, and
 * other signals (SIGCHLD for a respawn) wait at most the bound. */
static int reload_doctor_read(int fd, int sigfd, long bound_ms, char **out, uint64_t *seen) {
  int64_t deadline = m0__now_ms() + bound_ms;
  size_t len = 0;
  char *buf = malloc(RELOAD_DOCTOR_MAX + 1);
  int err = buf ? 0 : ENOMEM;
  while (!err) {
    int64_t left = deadline - m0__now_ms();
    struct pollfd pf[2] = {{fd, POLLIN, 0}, {sigfd, POLLIN, 0}};
    int n = left > 0 ? poll(pf, sigfd >= 0 ? 2 : 1, (int)left) : 0;
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : ETIMEDOUT;
      break;
    }
    if (!pf[0].revents) {
      err = reload_doctor_signals(sigfd, seen) ? ECANCELED : 0;
      continue;
    }
    ssize_t r = read(fd, buf + len, RELOAD_DOCTOR_MAX - len);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) break;
    if (r < 0 || (len += (size_t)r) == RELOAD_DOCTOR_MAX) err = r < 0 ? errno : EFBIG;
  }
  if (err) free(buf);
  else buf[len] = 0, *out = buf;
  return err;
}

/* The doctor's JSON from its pipe (bounded: reload_doctor_read), the doctor
 * reaped either way, killed first when it did not answer. NULL: said. */
static json_t *reload_doctor_wait(pid_t pid, int fd, int sigfd, long bound_ms, unsigned long long gen) {
  char *text = NULL;
  uint64_t seen = 0;
  int err = reload_doctor_read(fd, sigfd, bound_ms, &text, &seen);
  if (err) kill(pid, SIGKILL); /* by pid: ours, not reaped yet, so not reused */
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) continue;
  json_error_t je;
  json_t *j = text ? json_loads(text, JSON_DISABLE_EOF_CHECK, &je) : NULL; /* one object on one line */
  free(text);
  for (int sig = 1; sig < 64; sig++) /* the handler writes each again, for the loop that reads the pipe */
    if (seen >> sig & 1) raise(sig);
  if (err == ETIMEDOUT)
    fprintf(stderr, "m0: reload refused: the checks did not answer within %ld ms (--reload-timeout-ms; a file the "
                    "configuration names that never ends, a FIFO say); doctor pid %d killed; generation %llu keeps "
                    "serving\n", bound_ms, (int)pid, gen);
  else if (err == ECANCELED)
    fprintf(stderr, "m0: reload refused: a SIGTERM came while the checks ran; doctor pid %d killed\n", (int)pid);
  else if (!j)
    fprintf(stderr, "m0: reload refused: the checks did not run (the doctor %s %d); generation %llu keeps serving\n",
            WIFSIGNALED(st) ? "died of signal" : "exited", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), gen);
  return j;
}

/* The doctor of this binary with this argv and environment: the same
 * ordered checks in a process of their own, so nothing of them (a TLS
 * identity loaded, nng's threads) touches the serving one. Its JSON, or
 * NULL (said). Bounded by --reload-timeout-ms, then killed. */
static json_t *reload_doctor(const m0__process *p, unsigned long long gen) {
  int argc = reload_argc;
  char **argv = calloc((size_t)argc + 2, sizeof *argv);
  int out[2] = {-1, -1};
  json_t *j = NULL;
  if (!argv || pipe2(out, O_CLOEXEC) != 0) {
    fprintf(stderr, "m0: reload refused: cannot run the checks (%s); generation %llu keeps serving\n",
            strerror(errno), gen);
    goto out;
  }
  for (int i = 0; i < argc; i++) argv[i] = reload_argv[i];
  argv[argc] = "--doctor";
  /* Its JSON on the pipe; its lines on stderr nowhere (ours says why). */
  m0__spawn_fd fds[] = {{out[1], 1}, {M0__SPAWN_DEVNULL, 2}};
  m0__spawn_spec spec = {.argv = argv, .fds = fds, .nfds = 2};
  pid_t pid;
  int rv = m0__spawn(&spec, &pid);
  close(out[1]);
  out[1] = -1;
  if (rv != 0) {
    fprintf(stderr, "m0: reload refused: cannot run the checks (%s); generation %llu keeps serving\n",
            strerror(rv), gen);
    goto out;
  }
  j = reload_doctor_wait(pid, out[0], p->stop_fd < 0 ? p->sigfd : -1, M0__CFG(p->cfg, reload_timeout_ms), gen);
out:
  if (out[0] >= 0) close(out[0]);
  if (out[1] >= 0) close(out[1]);
  free(argv);
  return j;
}

/* HUP: the configuration as it is now passes the checks and keeps what a
 * reload cannot change. Else false, said in one line. */
static bool reload_config_ok(m0__process *p) {
  unsigned long long gen = (unsigned long long)p->reload.generation;
  json_t *j = reload_doctor(p, gen);
  if (!j) return false;
  bool ok = json_is_true(json_object_get(j, "ok"));
  json_t *checks = json_object_get(j, "checks"), *topo = json_object_get(j, "topology");
  if (!ok) {
    size_t i;
    json_t *c;
    json_array_foreach(checks, i, c) {
      if (json_is_true(json_object_get(c, "ok"))) continue;
      fprintf(stderr, "m0: reload refused: %s (%s); generation %llu keeps serving\n",
              json_string_value(json_object_get(c, "detail")), json_string_value(json_object_get(c, "fix")), gen);
      break;
    }
  } else {
    const char *mode = json_string_value(json_object_get(topo, "mode"));
    long loops = (long)json_integer_value(json_object_get(topo, "loops"));
    const char *now = m0__mode_name(p->mode);
    if (!mode || strcmp(mode, now) != 0 || loops != p->loops) {
      fprintf(stderr,
              "m0: reload refused: the configuration changes the mode or the number of loops (%s with %d, now %s "
              "with %ld), which needs a restart; generation %llu keeps serving\n",
              now, p->loops, mode ? mode : "?", loops, gen);
      ok = false;
    }
  }
  json_decref(j);
  return ok;
}

/* To systemd: generation 1 is the main pid and says it itself; a later
 * one says it to the master, which says it from the main pid. */
void m0__reload_notify(m0__process *p, const char *state) {
  if (p->reload.chan_fd >= 0 && p->reload.master_fd < 0) {
    if (send(p->reload.chan_fd, state, strlen(state), MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
      /* the master is gone: so is the host */
    }
  } else {
    m0__sd_notify(state);
  }
}

/* Spawns path with reload_argv, this environment (host/spawn.h's filter)
 * and extra: exactly the descriptors in inherit (those >= 0) are inherited
 * at their numbers, no signal blocked, the host's handled ones at default. */
#define RELOAD_FDS 9 /* a next generation's six, and a rollback's three (host/rollback.h) */
static int spawn_inheriting(pid_t *pid, const char *path, const int *inherit, int n, char *const *extra) {
  m0__spawn_fd fds[RELOAD_FDS];
  for (int j = 0; j < n && j < RELOAD_FDS; j++) fds[j] = (m0__spawn_fd){inherit[j], inherit[j]};
  m0__spawn_spec spec = {.path = path, .argv = reload_argv, .extra = extra, .fds = fds, .reset_signals = true};
  spec.nfds = n < RELOAD_FDS ? n : RELOAD_FDS;
  return m0__spawn(&spec, pid);
}

/* posix_spawn of path with this process's argv and environment
 * (host/spawn.h's filter, which drops NOTIFY_SOCKET: a next generation
 * speaks to the master), M0__UPGRADE, M0__RUN_DIR and M0__EXE, and what it keeps for a
 * rollback (host/rollback.h; back: it is one). */
static int reload_spawn(m0__process *p, const char *path, int ready_w, pid_t *pid, bool back) {
  char up[160], dirv[PATH_MAX + 16], exev[PATH_MAX + 16];
  snprintf(up, sizeof up, "M0__UPGRADE=%d,%d,%d,%d,%ld,%llu,%d,%d", p->listen_fd, p->page.fd, p->page.app_fd,
           ready_w, (long)getpid(), (unsigned long long)p->reload.generation + 1,
           p->reload.generation > 1 ? p->upgrade_dir_made : p->rundir.made, p->reload.chan_fd);
  snprintf(dirv, sizeof dirv, "M0__RUN_DIR=%s", p->rundir.path);
  snprintf(exev, sizeof exev, "M0__EXE=%s", reload_exe);
  m0__rollback_pass keep;
  m0__rollback_pass_make(p, &keep, back);
  /* The ticket secret goes on, so sessions resume across the reload (config/certs.h). */
  char tickets[M0__CERTS_TICKETS_ENV];
  m0__certs_tickets_env(p->tls, tickets); /* "": none (host/spawn.h skips it) */
  char plain[32] = ""; /* the plain listener beside HTTPS, inherited as the listener is ("": none) */
  if (p->plain_fd >= 0) snprintf(plain, sizeof plain, "M0__PLAIN_FD=%d", p->plain_fd);
  char *extra[] = {up, dirv, exev, tickets, plain, keep.env[0], keep.env[1], keep.env[2], NULL};
  int inherit[RELOAD_FDS] = {p->listen_fd, p->page.fd, p->page.app_fd, ready_w, p->reload.chan_fd, p->plain_fd};
  for (int j = 0; j < keep.nfds; j++) inherit[6 + j] = keep.fds[j];
  int rv = spawn_inheriting(pid, path, inherit, 6 + keep.nfds, extra);
  explicit_bzero(tickets, sizeof tickets);
  m0__rollback_passed(&keep);
  return rv;
}

void m0__reload_ask(m0__process *p, int sig, bool serving) {
  m0__reload *r = &p->reload;
  unsigned long long gen = (unsigned long long)r->generation;
  if (!serving) {
    fprintf(stderr, "m0: reload: generation %llu is not serving (starting or draining); this %s is refused\n", gen,
            sig_name(sig));
    return;
  }
  if (r->next_pid) {
    fprintf(stderr, "m0: reload: generation %llu is still starting (pid %d); this %s is refused\n", gen + 1,
            (int)r->next_pid, sig_name(sig));
    return;
  }
  if (r->prev_fd >= 0) { /* its read end closes at its exit, or its exec as the master */
    struct pollfd pf = {r->prev_fd, 0, 0};
    if (poll(&pf, 1, 0) == 0 && reload_running(r->prev_pid)) {
      fprintf(stderr, "m0: reload: generation %llu is still draining (pid %d); this %s is refused\n", gen - 1,
              (int)r->prev_pid, sig_name(sig));
      return;
    }
    close(r->prev_fd);
    r->prev_fd = -1;
  }
  r->prev_pid = 0;
  /* SIGUSR1: the kept generation's copy, whose configuration passed when it
   * served (it checks itself again at its start, as every generation). */
  char kept[64];
  const char *back = sig == M0__SIG_USR1 ? m0__rollback_path(p, kept, sizeof kept) : NULL;
  if (sig == M0__SIG_USR1 && !back) return;
  if (sig == M0__SIG_HUP && !reload_config_ok(p)) return;
  if (r->chan_fd < 0) { /* generation 1's first reload: the channel its master will read */
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) != 0) {
      fprintf(stderr, "m0: reload: cannot make the master channel: %s; generation %llu keeps serving\n",
              strerror(errno), gen);
      return;
    }
    r->master_fd = sv[0];
    r->chan_fd = sv[1];
  }
  /* SIGUSR2: the file this binary was started from, as it is now. */
  const char *path = back ? back : sig == M0__SIG_HUP || !reload_exe[0] ? "/proc/self/exe" : reload_exe;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    fprintf(stderr, "m0: reload: cannot make a pipe: %s; generation %llu keeps serving\n", strerror(errno), gen);
    return;
  }
  pid_t pid;
  int rv = reload_spawn(p, path, fds[1], &pid, back != NULL);
  close(fds[1]);
  if (rv != 0) {
    close(fds[0]);
    fprintf(stderr, "m0: reload: cannot start generation %llu from %s: %s; generation %llu keeps serving\n", gen + 1,
            path, strerror(rv), gen);
    return;
  }
  r->next_pid = pid;
  r->next_fd = fds[0];
  r->next_reaped = false;
  r->next_stopping = false;
  r->next_deadline = m0__now_ms() + M0__CFG(p->cfg, reload_timeout_ms);
  if (back)
    fprintf(stderr, "m0: reload: generation %llu starting (pid %d, generation %llu's binary and configuration: "
                    "SIGUSR1, a rollback)\n", gen + 1, (int)pid, (unsigned long long)r->keep.gen);
  else
    fprintf(stderr, "m0: reload: generation %llu starting (pid %d, %s)\n", gen + 1, (int)pid,
            sig == M0__SIG_HUP ? reload_exe : path);
  m0__reload_notify(p, "RELOADING=1");
}

bool m0__reload_reaped(m0__process *p, pid_t pid, int status) {
  if (reload_succ > 0 && pid == reload_succ) { /* the serving one, gone before this one's exec: for the master */
    reload_succ_status = status;
    return true;
  }
  if (!p->reload.next_pid || pid != p->reload.next_pid) return false;
  p->reload.next_status = status;
  p->reload.next_reaped = true;
  return true;
}

/* The next generation's exit, once its pipe said EOF (its last holder is
 * gone): reaped here unless the supervisor's waitpid(-1) took it. */
static bool reload_status(m0__reload *r, int *status) {
  if (r->next_reaped) {
    *status = r->next_status;
    return true;
  }
  pid_t w;
  while ((w = waitpid(r->next_pid, status, 0)) < 0 && errno == EINTR) {
  }
  return w == r->next_pid;
}

bool m0__reload_next(m0__process *p) {
  m0__reload *r = &p->reload;
  unsigned long long gen = (unsigned long long)r->generation;
  char b;
  ssize_t n;
  if (r->next_fd < 0) return false;
  while ((n = read(r->next_fd, &b, 1)) < 0 && errno == EINTR) {
  }
  if (n < 0 && errno == EAGAIN) return false;
  pid_t pid = r->next_pid;
  if (n == 1) {
    r->next_pid = 0; /* not ours to wait for any more: it outlives this process */
    r->handed_over = true;
    r->succ_pid = pid;
    r->succ_fd = r->next_fd; /* open until this process ends: the successor's "still draining" */
    r->next_fd = -1;
    /* Its child until this process exits: a supervisor's waitpid(-1) may
     * reap it first (a stop while this one drains), and its exit status is
     * then the master's only through this process (m0__reload_exit). */
    reload_succ = pid;
    if (r->master_fd >= 0) { /* generation 1: the master, at its end */
      reload_master_fd = r->master_fd;
      reload_drain_ms = M0__CFG(p->cfg, drain_timeout_ms);
    } else {
      reload_chan_fd = r->chan_fd;
    }
    fprintf(stderr, "m0: reload: generation %llu serving (pid %d); generation %llu draining\n", gen + 1, (int)pid,
            gen);
    m0__rollback_handed(p);
    return true;
  }
  close(r->next_fd);
  r->next_fd = -1;
  int st = 0;
  bool known = reload_status(r, &st);
  r->next_pid = 0;
  if (known && WIFSIGNALED(st))
    fprintf(stderr, "m0: reload: generation %llu (pid %d) died of signal %d before serving; generation %llu keeps "
                    "serving\n", gen + 1, (int)pid, WTERMSIG(st), gen);
  else
    fprintf(stderr, "m0: reload: generation %llu (pid %d) exited %d before serving; generation %llu keeps serving\n",
            gen + 1, (int)pid, known ? WEXITSTATUS(st) : -1, gen);
  m0__reload_notify(p, "READY=1");
  return false;
}

void m0__reload_serving(m0__process *p) {
  m0__reload *r = &p->reload;
  if (r->generation > 1) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    atomic_store(&p->page.head->reloaded_ms, (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
  }
  atomic_store(&p->page.head->generation, r->generation);
  /* The master first: it knows this one serves before the predecessor
   * could exit (host/master.h). */
  if (r->generation > 1) {
    char st[64];
    snprintf(st, sizeof st, "MAINPID=%d\nREADY=1", (int)getpid());
    m0__reload_notify(p, st);
  } else m0__reload_notify(p, "READY=1");
  if (r->prev_fd >= 0) { /* kept open: its POLLERR says the predecessor is gone (m0__reload_ask) */
    char b = 'R';
    if (write(r->prev_fd, &b, 1) != 1) { /* the predecessor is gone: nothing to tell */ }
  }
  m0__rollback_serving(p); /* the window of what it keeps begins */
}

void m0__reload_forward(m0__process *p, int sig) {
  if (!p->reload.handed_over || p->reload.succ_pid <= 0) return;
  if (sig & M0__SIG_STOP) {
    kill(p->reload.succ_pid, SIGTERM);
    reload_stopping = true;
  }
  if (sig & M0__SIG_HUP) kill(p->reload.succ_pid, SIGHUP);
  if (sig & M0__SIG_USR2) kill(p->reload.succ_pid, SIGUSR2);
  if (sig & M0__SIG_USR1) kill(p->reload.succ_pid, SIGUSR1);
}

int m0__reload_pidfile_write(const char *path) {
  if (!path || !*path) return 0;
  char tmp[PATH_MAX + 32];
  snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
  FILE *f = fopen(tmp, "we");
  bool ok = f && fprintf(f, "%d\n", (int)getpid()) > 0;
  if (f && fclose(f) != 0) ok = false;
  if (!ok || rename(tmp, path) != 0) {
    fprintf(stderr, "m0: cannot write the pid file %s: %s (--pid-file)\n", path, strerror(errno));
    unlink(tmp);
    return M0__ESYSTEM;
  }
  snprintf(reload_pidfile, sizeof reload_pidfile, "%s", path);
  return 0;
}

/* Only the file this process wrote, still naming it (a later host may have
 * taken the path over; a FIFO put there is not waited on: base/file.h). */
void m0__reload_pidfile_remove(const char *path) {
  if (!path || !*path) return;
  char why[128];
  size_t len;
  char *text = m0__file_read(path, 64, &len, why, sizeof why);
  long pid = 0;
  bool ours = text && sscanf(text, "%ld", &pid) == 1 && pid == (long)getpid();
  free(text);
  if (ours) unlink(path);
}

/* Blocked from the teardown on, across the exec (a blocked signal is kept,
 * and never ignored, even by PID 1): the master takes them from its
 * signalfd. One that came since the last wait (the teardown reads no
 * signal) is sent on now. */
static void reload_hold(sigset_t *set) {
  sigemptyset(set);
  int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR2, SIGUSR1, SIGCHLD};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaddset(set, sigs[i]);
  sigprocmask(SIG_BLOCK, set, NULL);
  int late = m0__signals_take();
  if (late & M0__SIG_STOP) {
    kill(reload_succ, SIGTERM);
    reload_stopping = true;
  }
  if (late & M0__SIG_HUP) kill(reload_succ, SIGHUP);
  if (late & M0__SIG_USR2) kill(reload_succ, SIGUSR2);
  if (late & M0__SIG_USR1) kill(reload_succ, SIGUSR1);
}

bool m0__reload_hold(void) {
  sigset_t set;
  if (reload_master_fd < 0 || reload_succ <= 0) return false;
  reload_hold(&set);
  return true;
}

void m0__reload_exit(int code) {
  if (reload_master_fd < 0 && reload_chan_fd >= 0 && reload_succ > 0 && reload_succ_status >= 0) {
    char v[64]; /* the serving generation's exit, which only this process saw: to the master */
    int n = snprintf(v, sizeof v, "REAPED=%ld,%d", (long)reload_succ, reload_succ_status);
    if (send(reload_chan_fd, v, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) { /* the master is gone: so is the host */ }
  }
  if (reload_master_fd < 0 || reload_succ <= 0) {
    m0__reload_pidfile_remove(reload_pidfile);
    return;
  }
  sigset_t set;
  reload_hold(&set); /* again: what a thread's handler wrote since (the handlers stay until the exec) */
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  fcntl(reload_master_fd, F_SETFD, 0);
  char v[PATH_MAX + 96];
  /* A signal taken after that look by a thread that does not block it
   * (nng's) is written to the self-pipe until the exec, which would close
   * the pipe with it (a SIGUSR1 lost: no line at all): its read end goes on
   * to the master, which sends it on. */
  snprintf(v, sizeof v, "%d,%ld,%d,%ld,%d,%d,%s", reload_master_fd, (long)reload_succ, reload_stopping ? 1 : 0,
           reload_drain_ms, reload_succ_status, m0__signals_pass(), reload_pidfile);
  setenv("M0__MASTER", v, 1);
  if (code != 0)
    fprintf(stderr, "m0: generation 1 drained with exit %d; the pid goes on as the master\n", code);
  fflush(NULL);
  execve("/proc/self/exe", reload_argv, environ);
  fprintf(stderr, "m0: cannot become the master (%s): pid %d exits and the pid a supervisor knows with it; "
                  "pid %d serves on\n", strerror(errno), (int)getpid(), (int)reload_succ);
  unsetenv("M0__MASTER");
  m0__reload_pidfile_remove(reload_pidfile);
  sigprocmask(SIG_UNBLOCK, &set, NULL);
}

pid_t m0__reload_spawn_first(int chan) {
  char chv[48], exev[PATH_MAX + 16];
  snprintf(chv, sizeof chv, "M0__CHAN=%d", chan);
  snprintf(exev, sizeof exev, "M0__EXE=%s", reload_exe);
  char *extra[] = {chv, exev, NULL};
  pid_t pid;
  int rv = spawn_inheriting(&pid, "/proc/self/exe", &chan, 1, extra);
  if (rv != 0) {
    errno = rv;
    return M0__ESYSTEM;
  }
  return pid;
}

#ifdef M0_COVERAGE
void __gcov_dump(void);
#endif

_Noreturn void m0__exit_now(int code) {
  fflush(NULL);
  m0__reload_exit(code); /* generation 1 that handed over goes on as the master */
#ifdef M0_COVERAGE
  __gcov_dump();
#endif
  _exit(code);
}
