/* One spawn (host/spawn.h). */
#include "host/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>

#include "transport/systemd.h"

extern char **environ;

/* The signals the host handles (host/signals.c, the master, the
 * supervisor): at their default in a child that starts afresh. */
static const int spawn_handled[] = {SIGTERM, SIGINT, SIGPIPE, SIGHUP, SIGUSR2, SIGCHLD};

/* The environment filter: whether entry e of this process's environment
 * reaches the child. */
static bool spawn_keeps(const char *e, bool drop_tls) {
  if (!strncmp(e, "M0__", 4) || m0__sd_private(e)) return false;
  return !(drop_tls && !strncmp(e, "M0_TLS_", 7));
}

/* The child's environment (its strings are environ's and extra's): a
 * calloc'd array the caller frees, or NULL. */
static char **spawn_env(const m0__spawn_spec *s) {
  size_t ne = 0, nx = 0;
  while (environ[ne]) ne++;
  while (s->extra && s->extra[nx]) nx++;
  char **env = calloc(ne + nx + 1, sizeof *env);
  if (!env) return NULL;
  size_t k = 0;
  for (size_t e = 0; e < ne; e++)
    if (spawn_keeps(environ[e], s->drop_tls)) env[k++] = environ[e];
  for (size_t x = 0; x < nx; x++)
    if (s->extra[x][0]) env[k++] = s->extra[x];
  env[k] = NULL;
  return env;
}

static void spawn_fds(posix_spawn_file_actions_t *fa, const m0__spawn_spec *s) {
  for (int j = 0; j < s->nfds; j++) {
    const m0__spawn_fd *d = &s->fds[j];
    if (d->fd == M0__SPAWN_DEVNULL) posix_spawn_file_actions_addopen(fa, d->at, "/dev/null", O_WRONLY, 0);
    else if (d->fd >= 0) posix_spawn_file_actions_adddup2(fa, d->fd, d->at);
  }
}

static void spawn_attrs(posix_spawnattr_t *at, const m0__spawn_spec *s) {
  short flags = 0;
  if (s->own_group) {
    posix_spawnattr_setpgroup(at, 0);
    flags |= POSIX_SPAWN_SETPGROUP;
  }
  if (s->reset_signals) {
    sigset_t none, def;
    sigemptyset(&none);
    sigemptyset(&def);
    for (size_t j = 0; j < sizeof spawn_handled / sizeof spawn_handled[0]; j++) sigaddset(&def, spawn_handled[j]);
    posix_spawnattr_setsigmask(at, &none);
    posix_spawnattr_setsigdefault(at, &def);
    flags |= POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  }
  posix_spawnattr_setflags(at, flags);
}

int m0__spawn(const m0__spawn_spec *s, pid_t *pid) {
  char **env = spawn_env(s);
  if (!env) return ENOMEM;
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&at);
  spawn_fds(&fa, s);
  spawn_attrs(&at, s);
  int rv = posix_spawn(pid, s->path ? s->path : "/proc/self/exe", &fa, &at, s->argv, env);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  free(env);
  return rv;
}
