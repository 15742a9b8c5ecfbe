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

#include "base/errors.h"
#include "host/process.h"
#include "host/spawn.h"
#include "transport/links.h"

typedef struct child {
  int actor, instance;
  pid_t pid;   /* 0: not running */
  int pidfd;   /* -1 when not running */
  bool given_up;
  pid_t ended_pid; /* stopped by its supervisor: which process, and how it ended (the monitors' note) */
  int ended_status;
} child;

/* A restart budget's clock: the last `intensity` restart times, a ring
 * (an actor's own, or a supervisor's over all its children). */
typedef struct budget {
  int64_t *at;
  int n, next;
} budget;

struct m0__children {
  const m0__app_decl *decl;
  m0__service *svcs;
  char (*urls)[M0__URL_MAX];
  child *kids;
  int nkids;
  budget *restarts;         /* [decl->nactors]: an actor in no supervisor */
  int *sup_of;              /* [decl->nactors]: its supervisor (decl->sups), or -1 */
  int *rank;                /* [decl->nactors]: its place among that supervisor's children */
  budget *sup_budgets;      /* [decl->nsups] */
  m0__exits *exits;         /* the top's wait, woken when a supervisor stops the host */
  atomic_bool failed;       /* a supervisor past its budget, on_fail exit: the host stops, exit 1 */
  pthread_mutex_t mu;       /* kids, against the watcher */
  pthread_t watcher;
  int stop_efd;
  bool draining; /* the host's drain began: an instance that ends stays down */
  bool stopping; /* the watcher ends */
};

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
static int child_spawn(m0__children *ch, child *c) {
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

/* Whether one more restart fits: fewer than intensity within period_ms.
 * Counts the restart when it does. */
static bool budget_allows(budget *r, int intensity, long period_ms) {
  int64_t now = m0__now_ms();
  if (intensity <= 0) return false;
  if (r->n == intensity && now - r->at[r->next] < period_ms) return false;
  r->at[r->next] = now;
  r->next = (r->next + 1) % intensity;
  if (r->n < intensity) r->n++;
  return true;
}

static bool restart_allowed(m0__children *ch, int a) {
  const m0__actor_spec *sp = &ch->decl->actors[a];
  return budget_allows(&ch->restarts[a], sp->restart_intensity, sp->restart_period_ms);
}

/* The monitors' note of c's end (pid, how it ended, whether it is started
 * again): service/post.h. */
static void child_noted(m0__children *ch, const child *c, pid_t pid, int status, bool again) {
  char what[160];
  snprintf(what, sizeof what, "\"event\":\"exited\",\"spawned\":%d,\"pid\":%d,\"status\":\"%s %d\",\"restarted\":%s",
           c->instance, (int)pid, WIFSIGNALED(status) ? "signal" : "status",
           WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), again ? "true" : "false");
  m0__service_noted(&ch->svcs[c->actor], -1, M0_MSG_EXITED, what);
}

static bool child_wait(const child *c, int64_t deadline);

/* Supervisors (decl->sups; docs/topology.md, Supervisors). One restart
 * is one death, whatever the strategy takes down with it (Erlang's count);
 * a sibling taken down is asked by SIGTERM and waited for SUP_STOP_MS,
 * then killed, all on this thread under the lock (a drain that begins
 * meanwhile waits that long at most). */
#define SUP_STOP_MS 5000

static const char *sup_strategy_name(m0__sup_strategy s) {
  return s == M0__SUP_ONE_FOR_ALL ? "one_for_all" : s == M0__SUP_REST_FOR_ONE ? "rest_for_one" : "one_for_one";
}

/* Whether k goes down and up with c, which died, under supervisor s. */
static bool sup_in_scope(const m0__children *ch, int s, const child *c, const child *k) {
  if (k == c) return true;
  if (ch->sup_of[k->actor] != s) return false;
  m0__sup_strategy st = ch->decl->sups[s].strategy;
  return st == M0__SUP_ONE_FOR_ALL || (st == M0__SUP_REST_FOR_ONE && ch->rank[k->actor] > ch->rank[c->actor]);
}

/* Stops and reaps the running kids of s that go with c (all: every one of
 * s's), each one's end kept for its note. */
static void sup_stop_kids(m0__children *ch, int s, const child *c, bool all) {
  int64_t deadline = m0__now_ms() + SUP_STOP_MS;
  for (int i = 0; i < ch->nkids; i++) {
    child *k = &ch->kids[i];
    if (k == c || !(all ? ch->sup_of[k->actor] == s : sup_in_scope(ch, s, c, k))) continue;
    k->ended_pid = 0;
    if (k->pid > 0) kill(k->pid, SIGTERM);
  }
  for (int i = 0; i < ch->nkids; i++) {
    child *k = &ch->kids[i];
    if (k == c || k->pid <= 0 || !(all ? ch->sup_of[k->actor] == s : sup_in_scope(ch, s, c, k))) continue;
    if (!child_wait(k, deadline)) {
      fprintf(stderr, "m0: actor %s: instance %d did not stop within %d ms; killed\n", ch->decl->actors[k->actor].name,
              k->instance, SUP_STOP_MS);
      kill(k->pid, SIGKILL);
    }
    waitpid(k->pid, &k->ended_status, 0);
    if (k->pidfd >= 0) close(k->pidfd);
    k->ended_pid = k->pid;
    k->pidfd = -1;
    k->pid = 0;
  }
}

/* Supervisor s past its budget: the host stops (exit 1), or, on_fail
 * serve_on, its children stay down and their routes answer 503. */
static void sup_failed(m0__children *ch, int s, child *c) {
  const m0__sup_spec *sp = &ch->decl->sups[s];
  c->given_up = true;
  if (!sp->serve_on) {
    fprintf(stderr, "m0: supervisor %s: %d restarts within %ld ms, past its budget of %d; the host stops\n", sp->name,
            sp->intensity + 1, sp->period_ms, sp->intensity);
    ch->draining = true; /* nothing is restarted from now on */
    atomic_store(&ch->failed, true);
    uint64_t one = 1;
    if (ch->exits && write(ch->exits->fd, &one, sizeof one) < 0) { /* an eventfd write fails only on overflow */
    }
    return;
  }
  fprintf(stderr,
          "m0: supervisor %s: %d restarts within %ld ms, past its budget of %d; its children stay down (on_fail "
          "serve_on)\n",
          sp->name, sp->intensity + 1, sp->period_ms, sp->intensity);
  sup_stop_kids(ch, s, c, true);
  for (int i = 0; i < ch->nkids; i++) {
    child *k = &ch->kids[i];
    if (ch->sup_of[k->actor] != s || k == c) continue;
    k->given_up = true;
    if (k->ended_pid > 0) child_noted(ch, k, k->ended_pid, k->ended_status, false);
  }
}

/* c, a child of a supervisor, ended (pid, status): its strategy applied. */
static void sup_child_exited(m0__children *ch, child *c, pid_t pid, int status) {
  int s = ch->sup_of[c->actor];
  const m0__sup_spec *sp = &ch->decl->sups[s];
  if (!budget_allows(&ch->sup_budgets[s], sp->intensity, sp->period_ms)) {
    child_noted(ch, c, pid, status, false);
    sup_failed(ch, s, c);
    return;
  }
  fprintf(stderr, "m0: supervisor %s: actor %s instance %d ended (%s %d); %s: started again\n", sp->name,
          ch->decl->actors[c->actor].name, c->instance, WIFSIGNALED(status) ? "signal" : "status",
          WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), sup_strategy_name(sp->strategy));
  sup_stop_kids(ch, s, c, false);
  c->ended_pid = pid;
  c->ended_status = status;
  /* Started again in the supervisor's order (rest_for_one: a later child
   * may depend on an earlier one). */
  for (int m = 0; m < sp->nchildren; m++)
    for (int i = 0; i < ch->nkids; i++) {
      child *k = &ch->kids[i];
      if (ch->sup_of[k->actor] != s || ch->rank[k->actor] != m || !sup_in_scope(ch, s, c, k) || k->given_up ||
          k->pid > 0)
        continue;
      if (k != c)
        fprintf(stderr, "m0: supervisor %s: actor %s instance %d stopped with it (%s); started again\n", sp->name,
                ch->decl->actors[k->actor].name, k->instance, sup_strategy_name(sp->strategy));
      atomic_fetch_add(ch->svcs[k->actor].restarts, 1);
      if (child_spawn(ch, k) != 0) k->given_up = true;
      if (k->ended_pid > 0) child_noted(ch, k, k->ended_pid, k->ended_status, !k->given_up);
      k->ended_pid = 0;
    }
}

static void child_exited(m0__children *ch, child *c) {
  int status = 0;
  pid_t pid = c->pid;
  waitpid(c->pid, &status, 0);
  close(c->pidfd);
  c->pidfd = -1;
  c->pid = 0;
  if (ch->draining || ch->stopping) return;
  if (ch->sup_of[c->actor] >= 0) {
    sup_child_exited(ch, c, pid, status);
    return;
  }
  const m0__actor_spec *sp = &ch->decl->actors[c->actor];
  if (!restart_allowed(ch, c->actor)) {
    c->given_up = true;
    fprintf(stderr,
            "m0: actor %s: instance %d ended (%s %d) after %d restarts within %ld ms, its budget; it stays down\n",
            sp->name, c->instance, WIFSIGNALED(status) ? "signal" : "status",
            WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), sp->restart_intensity, sp->restart_period_ms);
    child_noted(ch, c, pid, status, false);
    return;
  }
  atomic_fetch_add(ch->svcs[c->actor].restarts, 1);
  fprintf(stderr, "m0: actor %s: instance %d ended (%s %d); started again\n", sp->name, c->instance,
          WIFSIGNALED(status) ? "signal" : "status", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  if (child_spawn(ch, c) != 0) c->given_up = true;
  child_noted(ch, c, pid, status, !c->given_up);
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

/* Which supervisor each actor has, and its place there; each supervisor's
 * clock. false: out of memory. */
static bool children_sups(m0__children *ch) {
  const m0__app_decl *d = ch->decl;
  ch->sup_of = malloc((size_t)d->nactors * sizeof *ch->sup_of);
  ch->rank = calloc((size_t)d->nactors, sizeof *ch->rank);
  ch->sup_budgets = calloc(d->nsups > 0 ? (size_t)d->nsups : 1, sizeof *ch->sup_budgets);
  if (!ch->sup_of || !ch->rank || !ch->sup_budgets) return false;
  for (int a = 0; a < d->nactors; a++) ch->sup_of[a] = -1;
  for (int s = 0; s < d->nsups; s++) {
    const m0__sup_spec *sp = &d->sups[s];
    if (sp->intensity > 0 && !(ch->sup_budgets[s].at = calloc((size_t)sp->intensity, sizeof(int64_t)))) return false;
    for (int m = 0; m < sp->nchildren; m++) {
      int a = m0__app_decl_find(d, sp->children[m], strlen(sp->children[m]));
      if (a < 0 || d->actors[a].placement != M0__PLACE_PROCESS) continue; /* the file's check refused it */
      ch->sup_of[a] = s;
      ch->rank[a] = m;
    }
  }
  return true;
}

static void children_free(m0__children *ch) {
  for (int a = 0; ch->restarts && a < ch->decl->nactors; a++) free(ch->restarts[a].at);
  for (int s = 0; ch->sup_budgets && s < ch->decl->nsups; s++) free(ch->sup_budgets[s].at);
  free(ch->restarts);
  free(ch->sup_budgets);
  free(ch->sup_of);
  free(ch->rank);
  free(ch->kids);
  if (ch->stop_efd >= 0) close(ch->stop_efd);
  pthread_mutex_destroy(&ch->mu);
  free(ch);
}

m0__children *m0__children_start(const m0__app_decl *decl, m0__service *svcs, char (*urls)[M0__URL_MAX],
                                 m0__exits *exits, bool *none) {
  int total = 0;
  for (int a = 0; a < decl->nactors; a++)
    if (decl->actors[a].placement == M0__PLACE_PROCESS) total += decl->actors[a].instances;
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
  bool ok = ch->kids && ch->restarts && ch->stop_efd >= 0 && children_sups(ch);
  for (int a = 0; ok && a < decl->nactors; a++) {
    const m0__actor_spec *sp = &decl->actors[a];
    if (sp->placement != M0__PLACE_PROCESS) continue;
    if (sp->restart_intensity > 0 && !(ch->restarts[a].at = calloc((size_t)sp->restart_intensity, sizeof(int64_t))))
      ok = false;
    for (int k = 0; ok && k < sp->instances; k++) {
      child *c = &ch->kids[ch->nkids++];
      c->actor = a;
      c->instance = k;
      c->pidfd = -1;
      ok = child_spawn(ch, c) == 0;
    }
  }
  if (ok && pthread_create(&ch->watcher, NULL, watch, ch) != 0) ok = false;
  if (!ok) {
    ch->stopping = true;
    for (int i = 0; i < ch->nkids; i++)
      if (ch->kids[i].pid > 0) {
        kill(ch->kids[i].pid, SIGKILL);
        waitpid(ch->kids[i].pid, NULL, 0);
        if (ch->kids[i].pidfd >= 0) close(ch->kids[i].pidfd);
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
static bool child_wait(const child *c, int64_t deadline) {
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
  for (int i = 0; i < ch->nkids; i++)
    if (ch->kids[i].pid > 0) kill(ch->kids[i].pid, SIGTERM);
  for (int i = 0; i < ch->nkids; i++) {
    child *c = &ch->kids[i];
    if (c->pid <= 0) continue;
    if (!child_wait(c, deadline)) {
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
