#include "host/children.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/errors.h"
#include "host/children_in.h"
#include "host/process.h"
#include "host/spawn.h"
#include "transport/links.h"

static int pidfd_of(pid_t pid) {
  int fd = (int)syscall(SYS_pidfd_open, pid, 0);
#if defined(__SANITIZE_THREAD__)
  /* ThreadSanitizer does not see a raw system call make a descriptor: the
   * number, once a connection a loop accepted and closed, still looked
   * like that connection to it, and this thread's close (or dup) a race
   * with the accept. So a number is made where it sees it (open), and the
   * pidfd moved onto it and its own number closed by raw calls it ignores. */
  int seen = fd >= 0 ? open("/dev/null", O_RDONLY | O_CLOEXEC) : -1;
  if (seen >= 0 && syscall(SYS_dup3, fd, seen, O_CLOEXEC) < 0) {
    close(seen);
    seen = -1;
  }
  if (fd >= 0) syscall(SYS_close, fd);
  fd = seen;
#endif
  return fd;
}

/* fork+exec of this program as instance k of actor a. */
int m0__child_spawn(m0__children *ch, child *c) {
  const m0__actor_spec *sp = &ch->decl->actors[c->actor];
  char e_actor[80], e_inst[40], e_url[M0__URL_MAX + 16], e_parent[40];
  snprintf(e_actor, sizeof e_actor, "M0__ACTOR=%s", sp->name);
  snprintf(e_inst, sizeof e_inst, "M0__ACTOR_INSTANCE=%d", c->instance);
  snprintf(e_url, sizeof e_url, "M0__ACTOR_URL=%s", ch->urls[c->actor]);
  snprintf(e_parent, sizeof e_parent, "M0__ACTOR_PARENT=%d", (int)getpid());
  /* A tls+tcp:// instance presents the host's own identity (m0_actor_run
   * reads it from M0_TLS_*); the host's environment's M0_TLS_* never
   * reach a child. */
  const char *tls[3];
  char e_tls[3][1100];
  bool with_tls = m0__link_encrypted(ch->urls[c->actor]) && m0__links_tls_files(&tls[0], &tls[1], &tls[2]);
  static const char *const tls_vars[3] = {"M0_TLS_CERT", "M0_TLS_KEY", "M0_TLS_CA"};
  for (int i = 0; with_tls && i < 3; i++) snprintf(e_tls[i], sizeof e_tls[i], "%s=%s", tls_vars[i], tls[i]);
  /* Its proof's secret (runtime/proof.h), in its environment (readable by
   * this user alone, in /proc), never on its command line. */
  const m0__secret *sec = ch->svcs[c->actor].secret;
  char e_secret[sizeof "M0__ACTOR_SECRET=" + M0__SECRET_MAX];
  if (sec) snprintf(e_secret, sizeof e_secret, "M0__ACTOR_SECRET=%.*s", (int)sec->len, (const char *)sec->key);
  char *extra[9];
  int k = 0;
  extra[k++] = e_actor;
  extra[k++] = e_inst;
  extra[k++] = e_url;
  extra[k++] = e_parent;
  for (int i = 0; with_tls && i < 3; i++) extra[k++] = e_tls[i];
  if (sec) extra[k++] = e_secret;
  extra[k] = NULL;
  /* Its command line is the room its title has (host/title.h): the name,
   * padded so that "m0: APP actor NAME I" fits. */
  char id[80], name[160];
  snprintf(id, sizeof id, "%s.%d", sp->name, c->instance);
  snprintf(name, sizeof name, "%-120s", id);
  char *argv[] = {name, NULL};
  /* A process group of its own: a signal to the host's group (Ctrl-C, a
   * unit's stop) reaches the host, whose drain stops its instances after
   * their requests are answered, not the instances at once. */
  m0__spawn_spec spec = {.argv = argv, .extra = extra, .drop_tls = true, .own_group = true};
  pid_t pid;
  int rv = m0__spawn(&spec, &pid);
  if (sec) memset(e_secret, 0, sizeof e_secret);
  if (rv != 0) {
    fprintf(stderr, "m0: cannot spawn instance %d of actor %s: %s\n", c->instance, sp->name, strerror(rv));
    return M0__ESYSTEM;
  }
  c->pid = pid;
  c->pidfd = pidfd_of(pid);
  return 0;
}

bool m0__child_wait(const child *c, int64_t deadline);

/* c, a process, ended: reaped, and its end given to its budget or its
 * supervisor (host/suptree.c). */
static void child_exited(m0__children *ch, child *c) {
  int status = 0;
  pid_t pid = c->pid;
  waitpid(c->pid, &status, 0);
  close(c->pidfd);
  c->pidfd = -1;
  c->pid = 0;
  if (ch->draining || ch->stopping) return;
  m0__suptree_ended(ch, c, &(m0__ending){pid, status, NULL});
}

/* A thread instance's gate (service/instance.h, again): on its own thread,
 * once its serving ended. Taken down by its supervisor: made again
 * unless given up (the restart was counted where it died); ended by
 * itself: its budget or its supervisor decides; a drain's STOP: down. */
static bool children_again(void *arg, m0__instance *in, const char *why, bool taken) {
  m0__children *ch = arg;
  bool go = false;
  pthread_mutex_lock(&ch->mu);
  child *c = NULL;
  for (int i = 0; !c && i < ch->nkids; i++)
    if (ch->kids[i].inst == in) c = &ch->kids[i];
  if (c && !ch->draining && taken) {
    go = !c->given_up;
    if (go) atomic_fetch_add(ch->svcs[c->actor].restarts, 1);
    m0__suptree_noted(ch, c, &(m0__ending){0, 0, "taken down by its supervisor"}, go);
  } else if (c && !ch->draining && why && !c->given_up) {
    m0__suptree_ended(ch, c, &(m0__ending){0, 0, why});
    go = !c->given_up && !ch->draining;
  }
  pthread_mutex_unlock(&ch->mu);
  return go;
}

static void *watch(void *arg) {
  m0__children *ch = arg;
  struct pollfd *pf = calloc((size_t)ch->nkids + 1, sizeof *pf);
  pid_t *pids = calloc((size_t)ch->nkids + 1, sizeof *pids); /* whose end each pidfd says */
  if (!pf || !pids) {
    free(pf);
    free(pids);
    return NULL;
  }
  for (;;) {
    pthread_mutex_lock(&ch->mu);
    int n = 0;
    pf[n++] = (struct pollfd){ch->stop_efd, POLLIN, 0};
    for (int i = 0; i < ch->nkids; i++) {
      pids[i] = ch->kids[i].pid;
      pf[n++] = (struct pollfd){ch->kids[i].pidfd, POLLIN, 0};
    }
    bool stopping = ch->stopping;
    pthread_mutex_unlock(&ch->mu);
    if (stopping) break;
    if (poll(pf, (nfds_t)n, -1) < 0 && errno != EINTR) break;
    if (pf[0].revents) break;
    pthread_mutex_lock(&ch->mu);
    /* A supervisor may have stopped and started a sibling since the poll:
     * a pidfd number reused by its new process says nothing of it. */
    for (int i = 0; i < ch->nkids; i++)
      if (pf[i + 1].fd >= 0 && pf[i + 1].revents && ch->kids[i].pidfd == pf[i + 1].fd && ch->kids[i].pid == pids[i])
        child_exited(ch, &ch->kids[i]);
    pthread_mutex_unlock(&ch->mu);
  }
  free(pf);
  free(pids);
  return NULL;
}

static void children_free(m0__children *ch) {
  for (int a = 0; ch->restarts && a < ch->decl->nactors; a++) free(ch->restarts[a].at);
  free(ch->restarts);
  m0__suptree_free(ch);
  free(ch->kids);
  if (ch->stop_efd >= 0) close(ch->stop_efd);
  pthread_mutex_destroy(&ch->mu);
  free(ch);
}

/* Actor a's kids: its processes spawned (urls: here), or its thread
 * instances (of inst[ninst]) given this gate. false: out of memory, or a
 * spawn failed (said). */
static bool children_actor(m0__children *ch, int a, m0__instance *inst, int ninst) {
  const m0__actor_spec *sp = &ch->decl->actors[a];
  if (sp->placement == M0__PLACE_EXTERNAL || (sp->placement == M0__PLACE_PROCESS && !ch->urls)) return true;
  if (sp->restart_intensity > 0 && !(ch->restarts[a].at = calloc((size_t)sp->restart_intensity, sizeof(int64_t))))
    return false;
  if (sp->placement == M0__PLACE_THREAD) {
    for (int i = 0; i < ninst; i++) {
      m0__instance *in = &inst[i];
      if (in->svc != &ch->svcs[a]) continue;
      ch->kids[ch->nkids++] = (child){.actor = a, .instance = in->slot, .inst = in, .pidfd = -1};
      pthread_mutex_init(&in->gate, NULL); /* never destroyed: the instance may outlive ch (a glibc mutex needs none) */
      in->again = children_again;
      in->again_arg = ch;
      in->gated = true; /* before its thread starts: read there only */
    }
    return true;
  }
  for (int k = 0; k < sp->instances; k++) {
    child *c = &ch->kids[ch->nkids++];
    *c = (child){.actor = a, .instance = k, .pidfd = -1};
    if (m0__child_spawn(ch, c) != 0) return false;
  }
  return true;
}

static int children_count(const m0__app_decl *decl, bool spawn, int ninst) {
  int total = ninst;
  for (int a = 0; spawn && a < decl->nactors; a++)
    if (decl->actors[a].placement == M0__PLACE_PROCESS) total += decl->actors[a].instances;
  return total;
}

m0__children *m0__children_start(const m0__app_decl *decl, m0__service *svcs, char (*urls)[M0__URL_MAX],
                                 m0__instance *inst, int ninst, m0__exits *exits, bool *none) {
  int total = children_count(decl, urls != NULL, ninst);
  *none = total == 0;
  if (total == 0) return NULL;
  m0__children *ch = calloc(1, sizeof *ch);
  if (!ch) return NULL;
  ch->decl = decl;
  ch->svcs = svcs;
  ch->urls = urls;
  ch->exits = exits;
  atomic_init(&ch->failed, false);
  ch->kids = calloc((size_t)total, sizeof *ch->kids);
  ch->restarts = calloc((size_t)decl->nactors, sizeof *ch->restarts);
  ch->stop_efd = eventfd(0, EFD_CLOEXEC);
  pthread_mutex_init(&ch->mu, NULL);
  bool ok = ch->kids && ch->restarts && ch->stop_efd >= 0 && m0__suptree_init(ch);
  for (int a = 0; ok && a < decl->nactors; a++) ok = children_actor(ch, a, inst, ninst);
  if (ok && pthread_create(&ch->watcher, NULL, watch, ch) != 0) ok = false;
  if (!ok) {
    ch->stopping = true;
    for (int i = 0; i < ch->nkids; i++) {
      if (ch->kids[i].inst) ch->kids[i].inst->again = NULL;
      if (ch->kids[i].pid > 0) {
        kill(ch->kids[i].pid, SIGKILL);
        waitpid(ch->kids[i].pid, NULL, 0);
        if (ch->kids[i].pidfd >= 0) close(ch->kids[i].pidfd);
      }
    }
    children_free(ch);
    return NULL;
  }
  return ch;
}

void m0__children_drain(m0__children *ch) {
  if (!ch) return;
  pthread_mutex_lock(&ch->mu);
  ch->draining = true;
  pthread_mutex_unlock(&ch->mu);
}

/* Whether c has exited (not reaped: waitpid is the caller's). */
static bool child_gone(const child *c) {
  siginfo_t si = {0};
  return waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == c->pid;
}

/* Waits until c exits or the clock passes deadline; true when it exited.
 * Only the clock ends the wait: a poll() that returns early (EINTR from a
 * worker's or a sibling's SIGCHLD, a second SIGTERM) waits again for what
 * is left. Without a pidfd, the exit is looked for every 10 ms. */
bool m0__child_wait(const child *c, int64_t deadline) {
  bool by_fd = c->pidfd >= 0;
  for (;;) {
    if (!by_fd && child_gone(c)) return true;
    int64_t left = deadline - m0__now_ms();
    if (left <= 0) return child_gone(c);
    int ms = left > 1000000 ? 1000000 : (int)left;
    if (!by_fd && ms > 10) ms = 10;
    struct pollfd pf = {c->pidfd, POLLIN, 0};
    int rv = by_fd ? poll(&pf, 1, ms) : poll(NULL, 0, ms);
    if (rv > 0) return true;
    if (rv < 0 && errno != EINTR) by_fd = false; /* cannot wait on it: looked for every 10 ms */
  }
}

void m0__children_stop(m0__children *ch, int64_t deadline) {
  if (!ch) return;
  pthread_mutex_lock(&ch->mu);
  ch->draining = ch->stopping = true;
  pthread_mutex_unlock(&ch->mu);
  uint64_t one = 1;
  if (write(ch->stop_efd, &one, sizeof one) < 0) { /* an eventfd write fails only on overflow */
  }
  pthread_join(ch->watcher, NULL);
  for (int i = 0; i < ch->nkids; i++) { /* a thread instance that ends from now on stays down */
    m0__instance *in = ch->kids[i].inst;
    if (!in) continue;
    pthread_mutex_lock(&in->gate);
    in->again = NULL;
    pthread_mutex_unlock(&in->gate);
  }
  for (int i = 0; i < ch->nkids; i++)
    if (ch->kids[i].pid > 0) kill(ch->kids[i].pid, SIGTERM);
  for (int i = 0; i < ch->nkids; i++) {
    child *c = &ch->kids[i];
    if (c->pid <= 0) continue;
    if (!m0__child_wait(c, deadline)) {
      fprintf(stderr, "m0: actor %s: instance %d did not stop within the drain's bound; killed\n",
              ch->decl->actors[c->actor].name, c->instance);
      kill(c->pid, SIGKILL);
    }
    waitpid(c->pid, NULL, 0);
    if (c->pidfd >= 0) close(c->pidfd);
  }
  children_free(ch);
}

bool m0__children_failed(const m0__children *ch) { return ch && atomic_load(&ch->failed); }
