/* A next generation's bounds (host/reload.h): its start
 * (--reload-timeout-ms: SIGTERM, then SIGKILL past the drain's bound) and
 * its stop with this one at a drain; the rollback window's end
 * (host/rollback.h) shares the top process's one deadline. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host/process.h"
#include "host/reload.h"
#include "host/rollback.h"

void m0__reload_stop_next(m0__process *p) {
  if (p->reload.next_pid) kill(p->reload.next_pid, SIGTERM);
}

void m0__reload_wait_next(m0__process *p, int64_t deadline) {
  m0__reload *r = &p->reload;
  if (!r->next_pid) return;
  unsigned long long gen = (unsigned long long)r->generation + 1;
  /* Its pipe ends when it does (or says it serves: draining by now too). */
  for (;;) {
    int64_t left = deadline - m0__now_ms();
    struct pollfd pf = {r->next_fd, POLLIN, 0};
    if (r->next_reaped || left <= 0) break;
    int n = poll(&pf, 1, (int)(left > 1000 ? 1000 : left));
    if (n > 0) {
      char b;
      if (read(r->next_fd, &b, 1) <= 0) break;
    }
  }
  int st = r->next_status;
  pid_t w = r->next_reaped ? r->next_pid : waitpid(r->next_pid, &st, WNOHANG);
  if (w != r->next_pid) {
    /* Its EOF came, its exit not yet: a moment; past the bound, killed. */
    if (m0__now_ms() < deadline) w = waitpid(r->next_pid, &st, 0);
    else {
      fprintf(stderr, "m0: reload: generation %llu (pid %d) did not stop within the bound; killed\n", gen,
              (int)r->next_pid);
      kill(r->next_pid, SIGKILL);
      waitpid(r->next_pid, &st, 0);
    }
  }
  /* A start still before its handlers dies of the SIGTERM itself. */
  if (WIFSIGNALED(st))
    fprintf(stderr, "m0: reload: generation %llu (pid %d) stopped with this one (died of signal %d)\n", gen,
            (int)r->next_pid, WTERMSIG(st));
  else
    fprintf(stderr, "m0: reload: generation %llu (pid %d) stopped with this one (exit %d)\n", gen, (int)r->next_pid,
            WEXITSTATUS(st));
  close(r->next_fd);
  r->next_fd = -1;
  r->next_pid = 0;
}

static int64_t reload_next_deadline(const m0__process *p) {
  return p->reload.next_pid && p->reload.next_fd >= 0 ? p->reload.next_deadline : INT64_MAX;
}

int64_t m0__reload_deadline(const m0__process *p) {
  int64_t next = reload_next_deadline(p), keep = m0__rollback_deadline(p); /* and the rollback window's */
  return keep < next ? keep : next;
}

/* Its exit, after SIGKILL (or found reaped): said, and this generation
 * serves on as before the signal. */
static void reload_overdue_end(m0__process *p) {
  m0__reload *r = &p->reload;
  int st = r->next_status;
  if (!r->next_reaped) {
    kill(r->next_pid, SIGKILL);
    while (waitpid(r->next_pid, &st, 0) < 0 && errno == EINTR) {
    }
  }
  unsigned long long gen = (unsigned long long)r->generation;
  fprintf(stderr, "m0: reload: generation %llu (pid %d) stopped (%s %d) before serving; generation %llu keeps "
                  "serving\n", gen + 1, (int)r->next_pid, WIFSIGNALED(st) ? "signal" : "exit",
          WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), gen);
  close(r->next_fd);
  r->next_fd = -1;
  r->next_pid = 0;
  m0__reload_notify(p, "READY=1");
}

void m0__reload_overdue(m0__process *p) {
  m0__reload *r = &p->reload;
  m0__rollback_overdue(p);
  if (!r->next_pid || r->next_fd < 0 || m0__now_ms() < r->next_deadline) return;
  unsigned long long gen = (unsigned long long)r->generation + 1;
  if (!r->next_stopping) {
    fprintf(stderr, "m0: reload: generation %llu (pid %d) has not served within %ld ms (--reload-timeout-ms); "
                    "sending it SIGTERM\n", gen, (int)r->next_pid, M0__CFG(p->cfg, reload_timeout_ms));
    kill(r->next_pid, SIGTERM);
    r->next_stopping = true;
    r->next_deadline = m0__now_ms() + M0__CFG(p->cfg, drain_timeout_ms);
    return;
  }
  /* Its pipe may never end (a child of it holds the write end): its exit is
   * what counts. */
  if (!r->next_reaped) {
    int st;
    pid_t w = waitpid(r->next_pid, &st, WNOHANG);
    if (w == r->next_pid) {
      r->next_status = st;
      r->next_reaped = true;
    } else {
      fprintf(stderr, "m0: reload: generation %llu (pid %d) did not stop within %ld ms of SIGTERM; sending it "
                      "SIGKILL\n", gen, (int)r->next_pid, M0__CFG(p->cfg, drain_timeout_ms));
    }
  }
  reload_overdue_end(p);
}
