/* The rollback window (host/rollback.h). */
#include "host/rollback.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/errors.h"
#include "host/process.h"

/* path's bytes in a new memfd (close-on-exec, named name), or M0__ESYSTEM
 * (errno). */
static int rollback_copy(const char *path, const char *name) {
  int in = open(path, O_RDONLY | O_CLOEXEC);
  if (in < 0) return M0__ESYSTEM;
  int out = memfd_create(name, MFD_CLOEXEC);
  struct stat st;
  int err = out < 0 || fstat(in, &st) != 0 ? errno : 0;
  for (off_t left = err ? 0 : st.st_size; left > 0;) {
    ssize_t n = sendfile(out, in, NULL, (size_t)left);
    if (n <= 0) {
      err = n < 0 ? errno : EIO; /* the file shrank under us: not a copy of it */
      break;
    }
    left -= n;
  }
  close(in);
  if (err) {
    if (out >= 0) close(out);
    errno = err;
    return M0__ESYSTEM;
  }
  return out;
}

static long keep_ms(const m0__process *p) { return M0__CFG(p->cfg, reload_keep_ms); }

/* M0__KEEP=exe fd,topology fd (-1: none),generation; M0__ROLLBACK=generation;
 * M0__TOPOLOGY_FD=fd (the text this generation read: config/topofile.c; left
 * in the environment for the workers, whose spawn passes it on). */
void m0__rollback_start(m0__process *p) {
  m0__keep *k = &p->reload.keep;
  *k = (m0__keep){.exe_fd = -1, .topo_fd = -1, .own_topo_fd = -1, .deadline = INT64_MAX};
  const char *v = getenv("M0__KEEP"), *b = getenv("M0__ROLLBACK"), *t = getenv("M0__TOPOLOGY_FD");
  unsigned long long gen = 0;
  if (v && sscanf(v, "%d,%d,%llu", &k->exe_fd, &k->topo_fd, &gen) == 3 && k->exe_fd >= 0 && gen > 0) {
    k->gen = gen;
    fcntl(k->exe_fd, F_SETFD, FD_CLOEXEC);
    if (k->topo_fd >= 0) fcntl(k->topo_fd, F_SETFD, FD_CLOEXEC);
  }
  if (b) k->back_to = strtoull(b, NULL, 10);
  unsetenv("M0__KEEP");
  unsetenv("M0__ROLLBACK");
  if (t) {
    k->own_topo_fd = atoi(t);
    fcntl(k->own_topo_fd, F_SETFD, FD_CLOEXEC);
  } else if (keep_ms(p) > 0 && M0__CFGS(p->cfg, topology)[0]) {
    /* Read a moment ago by the configuration (a file changed in between
     * would be kept as it is now: the window is a few ms at start). */
    k->own_topo_fd = rollback_copy(M0__CFGS(p->cfg, topology), "m0-topology");
    if (k->own_topo_fd < 0)
      fprintf(stderr, "m0: rollback: cannot keep a copy of %s (%s); a rollback to this generation will read the "
                      "file as it is then\n", M0__CFGS(p->cfg, topology), strerror(errno));
  }
}

static void rollback_drop(m0__keep *k) {
  if (k->exe_fd >= 0) close(k->exe_fd);
  if (k->topo_fd >= 0) close(k->topo_fd);
  k->exe_fd = k->topo_fd = -1;
  k->gen = 0;
  k->deadline = INT64_MAX;
}

void m0__rollback_serving(m0__process *p) {
  m0__keep *k = &p->reload.keep;
  unsigned long long gen = (unsigned long long)p->reload.generation;
  if (!k->gen) return;
  k->deadline = m0__now_ms() + keep_ms(p);
  if (k->back_to)
    fprintf(stderr, "m0: rollback: rolled back to generation %llu: generation %llu (pid %d) serves its binary and "
                    "configuration; generation %llu's are kept for %ld ms (SIGUSR1 goes forward again)\n",
            (unsigned long long)k->back_to, gen, (int)getpid(), (unsigned long long)k->gen, keep_ms(p));
  else
    fprintf(stderr, "m0: rollback: generation %llu (pid %d) serves; generation %llu's binary and configuration are "
                    "kept for %ld ms (SIGUSR1 brings them back)\n", gen, (int)getpid(), (unsigned long long)k->gen,
            keep_ms(p));
}

void m0__rollback_handed(m0__process *p) {
  m0__keep *k = &p->reload.keep;
  if (!k->gen) return;
  fprintf(stderr, "m0: rollback: generation %llu's binary and configuration dropped: generation %llu serves now\n",
          (unsigned long long)k->gen, (unsigned long long)p->reload.generation + 1);
  rollback_drop(k);
}

int64_t m0__rollback_deadline(const m0__process *p) { return p->reload.keep.gen ? p->reload.keep.deadline : INT64_MAX; }

void m0__rollback_overdue(m0__process *p) {
  m0__keep *k = &p->reload.keep;
  if (!k->gen || m0__now_ms() < k->deadline) return;
  fprintf(stderr, "m0: rollback: generation %llu's binary and configuration dropped after %ld ms "
                  "(--reload-keep-ms); generation %llu (pid %d) serves on\n", (unsigned long long)k->gen, keep_ms(p),
          (unsigned long long)p->reload.generation, (int)getpid());
  k->dropped = k->gen;
  rollback_drop(k);
}

const char *m0__rollback_path(m0__process *p, char *buf, size_t n) {
  m0__keep *k = &p->reload.keep;
  unsigned long long gen = (unsigned long long)p->reload.generation;
  if (k->gen) {
    snprintf(buf, n, "/proc/self/fd/%d", k->exe_fd);
    return buf;
  }
  if (keep_ms(p) <= 0)
    fprintf(stderr, "m0: rollback: nothing is kept (--reload-keep-ms is 0); this SIGUSR1 is refused; generation %llu "
                    "serves on\n", gen);
  else if (k->dropped)
    fprintf(stderr, "m0: rollback: generation %llu was dropped after %ld ms (--reload-keep-ms); this SIGUSR1 is "
                    "refused; generation %llu serves on\n", (unsigned long long)k->dropped, keep_ms(p), gen);
  else
    fprintf(stderr, "m0: rollback: no earlier generation is kept; this SIGUSR1 is refused; generation %llu serves "
                    "on\n", gen);
  return NULL;
}

void m0__rollback_pass_make(m0__process *p, m0__rollback_pass *pass, int back) {
  m0__keep *k = &p->reload.keep;
  int n = 0;
  memset(pass, 0, sizeof *pass);
  pass->exe_copy = -1;
  if (keep_ms(p) > 0) {
    /* This generation, for the next one to keep: its running executable
     * (the inode, whatever the path holds now) and the text it read. */
    const char *base = strrchr(p->app && p->app->name ? p->app->name : "m0", '/');
    pass->exe_copy = rollback_copy("/proc/self/exe", base ? base + 1 : p->app && p->app->name ? p->app->name : "m0");
    if (pass->exe_copy < 0) {
      fprintf(stderr, "m0: rollback: cannot copy this generation's executable (%s): it will not be kept\n",
              strerror(errno));
    } else {
      snprintf(pass->keep, sizeof pass->keep, "M0__KEEP=%d,%d,%llu", pass->exe_copy, k->own_topo_fd,
               (unsigned long long)p->reload.generation);
      pass->env[n++] = pass->keep;
      pass->fds[pass->nfds++] = pass->exe_copy;
      if (k->own_topo_fd >= 0) pass->fds[pass->nfds++] = k->own_topo_fd;
    }
  }
  if (back && k->gen) {
    snprintf(pass->back, sizeof pass->back, "M0__ROLLBACK=%llu", (unsigned long long)k->gen);
    pass->env[n++] = pass->back;
    if (k->topo_fd >= 0) {
      snprintf(pass->topo, sizeof pass->topo, "M0__TOPOLOGY_FD=%d", k->topo_fd);
      pass->env[n++] = pass->topo;
      pass->fds[pass->nfds++] = k->topo_fd;
    }
  }
  pass->env[n] = NULL;
}

void m0__rollback_passed(m0__rollback_pass *pass) {
  if (pass->exe_copy >= 0) close(pass->exe_copy);
  pass->exe_copy = -1;
}
