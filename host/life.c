#include "host/life.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/admit.h"
#include "base/errors.h"
#include "host/reload.h"
#include "http/tls.h"
#include "host/rollback.h"
#include "host/signals.h"
#include "transport/listen.h"
#include "transport/systemd.h"

/* The stop pipe or the signals said something: what the wait returns, or
 * -1 to wait on. */
static int process_signalled(m0__process *p) {
  if (p->stop_fd >= 0) {
    char b;
    return read(p->stop_fd, &b, 1) >= 0 ? M0__WAIT_STOP : -1;
  }
  int sig = m0__signals_take();
  /* Handed over: this pid is the one a supervisor knows, and the
   * signal is meant for the generation that serves now. */
  if (p->reload.handed_over && !p->inherit_dir) {
    m0__reload_forward(p, sig);
    sig &= ~(M0__SIG_HUP | M0__SIG_USR2 | M0__SIG_USR1);
  }
  if (sig & M0__SIG_STOP) return M0__WAIT_STOP;
  /* Only the top process reloads; a reload that came with a death
   * is answered at the next wait, once the supervisor has reaped. */
  if ((sig & (M0__SIG_HUP | M0__SIG_USR2 | M0__SIG_USR1)) && !p->inherit_dir) {
    p->reload_sig = sig & M0__SIG_USR2 ? M0__SIG_USR2 : sig & M0__SIG_HUP ? M0__SIG_HUP : M0__SIG_USR1;
    if (!(sig & M0__SIG_CHILD)) return M0__WAIT_RELOAD;
    p->reload_pending = true;
  }
  return sig & M0__SIG_CHILD ? M0__WAIT_CHILD : -1;
}

/* poll's timeout until deadline or a next generation's start bound (-1:
 * none, -2: deadline passed); *next that bound. */
static int process_timeout(m0__process *p, int64_t deadline, int64_t *next) {
  int64_t now = m0__now_ms(), left = deadline == INT64_MAX ? -1 : deadline - now;
  if (deadline != INT64_MAX && left <= 0) return -2;
  *next = m0__reload_deadline(p); /* a next generation's start is bounded */
  if (*next != INT64_MAX && (left < 0 || *next - now < left)) left = *next > now ? *next - now : 0;
  return left < 0 ? -1 : left > 1000000 ? 1000000 : (int)left;
}

int m0__process_wait(m0__process *p, m0__actor *self, int64_t deadline, m0__msg *m) {
  int fd = -1;
  if (self && self->open) m0__actor_recv_fd(self, &fd);
  if (p->reload_pending) {
    p->reload_pending = false;
    return M0__WAIT_RELOAD;
  }
  for (;;) {
    if (fd >= 0) {
      int rv = m0__recv(self, m, M0__RECV_NOWAIT);
      if (rv == 0) return M0__WAIT_MSG;
      if (rv == M0__EBADMSG) continue; /* refused, counted and named (runtime/admit.h) */
    }
    struct pollfd pf[4] = {
        {p->sigfd, POLLIN, 0}, {p->exits.fd, POLLIN, 0}, {fd, POLLIN, 0}, {p->reload.next_fd, POLLIN, 0}};
    int64_t next = INT64_MAX;
    int timeout = process_timeout(p, deadline, &next);
    if (timeout == -2) return M0__WAIT_TIMEOUT;
    int n = poll(pf, 4, timeout);
    if (next != INT64_MAX && m0__now_ms() >= next) {
      m0__reload_overdue(p); /* may have closed next_fd: poll again */
      continue;
    }
    if (n < 0 && errno != EINTR) return M0__WAIT_TIMEOUT;
    if (n <= 0) continue;
    int said = pf[0].revents & POLLIN ? process_signalled(p) : -1;
    if (said >= 0) return said;
    if (pf[1].revents & POLLIN) {
      m0__exits_take(&p->exits);
      return M0__WAIT_EXIT;
    }
    if (pf[3].revents & (POLLIN | POLLHUP)) return M0__WAIT_NEXT;
  }
}

void m0__process_banner(m0__process *p, int first, int here) {
  if (p->inherit_dir) { /* a worker: the supervisor says the rest */
    fprintf(stderr, "m0: worker %d serving (pid %d)\n", first, (int)getpid());
    return;
  }
  char host[64];
  m0__listen_host(p->listen_fd, M0__CFGS(p->cfg, host), host, sizeof host); /* a handed-over one's own */
  const char *scheme = M0__CFGS(p->cfg, certfile)[0] ? "https" : "http";
  if (p->plain_fd >= 0) /* before the line a starter waits for */
    fprintf(stderr, "m0: %s plain HTTP on http://%s:%d (the metrics path; 308 to https for the rest)\n", p->app->name,
            host, p->plain_port);
  if (p->mode == M0__MODE_PREFORK)
    fprintf(stderr,
            "m0: %s listening on %s://%s:%d (prefork, %d workers, %d pool threads per loop, pid %d, generation "
            "%llu)\n",
            p->app->name, scheme, host, p->port, p->loops, p->pool, (int)getpid(), (unsigned long long)p->reload.generation);
  else
    fprintf(stderr, "m0: %s listening on %s://%s:%d (%s, %d loop%s, %d pool thread%s per loop, pid %d, generation %llu)\n",
            p->app->name, scheme, host, p->port, m0__mode_name(p->mode), here, here == 1 ? "" : "s", p->pool,
            p->pool == 1 ? "" : "s", (int)getpid(), (unsigned long long)p->reload.generation);
  p->said_serving = true;
  if (p->stop_fd < 0) m0__reload_serving(p); /* READY=1, and a predecessor told */
}

void m0__process_teardown(m0__process *p, bool clean) {
  if (clean) {
    bool last = !p->tables_user || m0__refusals_release();
    p->tables_user = false;
    /* Another host of this process still counts into the tables on this
     * page: its mapping stays (the run directory goes), never unmapped
     * under a thread of theirs. */
    if (p->page_made && p->tables_owner && !last) p->page.head = NULL;
    if (p->page_made) m0__page_close(&p->page);
    if (p->trace) m0__tracer_free(p->trace);
    p->trace = NULL;
    p->page_made = false;
  }
  if (!p->inherit_dir) {
    m0__rundir_close(&p->sockets); /* a generation's own (N > 1) */
    /* Handed over: the next generation's now. A next generation that
     * never served (a refused reload) leaves it to the one that serves. */
    if (!p->reload.handed_over && (p->reload.generation < 2 || p->said_serving)) m0__rundir_close(&p->rundir);
  }
  if (p->topo_made) m0__topology_free(&p->topo);
  p->topo_made = false;
  m0__tls_ctx_free(p->tls); /* the loops that used it are joined */
  p->tls = NULL;
  /* The master-to-be keeps its handlers, the signals blocked (host/master.h). */
  bool hold = p->stop_fd < 0 && p->sigfd >= 0 && !p->inherit_dir && m0__reload_hold();
  if (p->stop_fd < 0 && p->sigfd >= 0 && !hold) m0__signals_restore();
  p->sigfd = -1;
  if (clean) m0__exits_fini(&p->exits);
  if (clean && p->decl_made) m0__app_decl_free(&p->decl);
  p->decl_made = !clean && p->decl_made;
}
