/* One process skeleton for every kind of host process: the single/threads
 * host, the prefork supervisor, a spawned worker, the embedded host. Set-up
 * (run directory, shared page, topology, listener, signals, the exit
 * descriptor, the tracer), the wait every top actor serves from, the banner
 * and readiness, the ordered teardown.
 *
 * Design notes
 * - Order of set-up: what a worker inherits exists before any worker does
 *   (run directory, page, topology, listener, signals); the tracer, which
 *   starts nng's threads, is separate (m0__process_trace) so the supervisor
 *   opens it while its workers start.
 * - A worker inherits its run directory, page and listener by descriptor and
 *   owns none of them: it neither makes nor removes them.
 * - The wait: a top actor waits in ONE poll on its mailbox, the signal pipe
 *   (or an embedded host's stop pipe) and the exit descriptor its actors'
 *   threads write when they end (runtime/handle.h). Nothing is polled on a
 *   timer to find out that something happened.
 * - Teardown runs after the actors are closed (their peers and mailboxes);
 *   with a thread still inside the application, only what no thread can
 *   touch is released (the process is about to exit).
 */
#ifndef M0_HOST_PROCESS_H
#define M0_HOST_PROCESS_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/actor.h"
#include "runtime/handle.h"
#include "runtime/trace.h"
#include "config/appspec.h"
#include "config/options.h"
#include "host/reload_state.h"
#include "transport/page.h"
#include "transport/rundir.h"
#include "transport/topology.h"
#include "base/clock.h"

typedef struct m0__process {
  /* what the process is: filled by its caller */
  const m0_app *app;
  const m0_config *cfg;
  m0__mode mode;
  int loops;                /* in the whole topology */
  int pool;                 /* handler threads behind each loop */
  const char *inherit_dir;  /* a worker's run directory, else NULL (made) */
  int inherit_listen;       /* a worker's or systemd's listener, else -1 (bound) */
  int inherit_plain;        /* systemd's second listener (the plain one), else -1 (M0__PLAIN_FD, or bound) */
  int inherit_page, inherit_app_page; /* a worker's pages, else -1 (made) */
  int stop_fd;              /* embedded: a byte here stops it; -1: SIGTERM/SIGINT */
  bool children;            /* the supervisor: SIGCHLD wakes its wait too */
  /* a next generation's top process (host/reload.h): the run directory it
   * takes over, and whether the first generation made it (so the last one
   * removes it) */
  char upgrade_dir[PATH_MAX];
  bool upgrade_dir_made;
  m0__reload reload;
  /* what set-up makes */
  m0__app_decl decl; /* the application's actors and every route (config/appspec.h) */
  m0_app served;     /* the application as served: its routes are decl's */
  bool decl_made;
  m0__rundir rundir;
  m0__rundir sockets; /* generation N > 1: its own ipc sockets, in <run-dir>/gN */
  const char *sockdir; /* where this generation's ipc sockets are: rundir.path, or sockets.path */
  int reload_sig;      /* after M0__WAIT_RELOAD: M0__SIG_HUP, M0__SIG_USR2 or M0__SIG_USR1 */
  bool reload_pending; /* one came with SIGCHLD: M0__WAIT_RELOAD at the next wait */
  bool said_serving;   /* the banner was said: a next generation that never served leaves the run directory be */
  m0__page page;
  m0__topology topo;
  char inproc_ns[48]; /* this host's inproc namespace, m0-<pid>.<host> (transport/topology.h) */
  m0__tracer *trace;
  int listen_fd, port;
  int plain_fd, plain_port; /* the plain listener beside HTTPS (--plain-port), or -1 */
  int sigfd;
  m0__exits exits;
  bool page_made, topo_made;
  struct m0__tls_ctx *tls; /* HTTPS (--certfile): the loops' TLS context (config/certs.h), or NULL */
  bool tables_user, tables_owner; /* counts into the process's tables; they are on this page (runtime/admit.h) */
} m0__process;

/* What a configuration makes of this process: mode (single, threads,
 * prefork), loops in the topology, pool threads per loop; nothing inherited,
 * stopped by signals. The one place that choice is made (serve, embed, the
 * supervisor, a worker and the doctor all start from it). */
void m0__process_describe(m0__process *p, const m0_app *app, const m0_config *cfg);
/* Makes (or takes over) everything but the tracer. 0, or a negative m0__err
 * with its one line on stderr. */
int m0__process_setup(m0__process *p);
/* Opens this process's tracer: to where --trace names, or off when it is
 * empty (m0trace can switch it on: runtime/trace.h). `process` is whose
 * records they are (M0__TRACE_HOST, _SUPERVISOR, _WORKER + i). */
void m0__process_trace(m0__process *p, uint32_t process);

/* "m0: <what>" on stderr, and when the process is out of descriptors, the
 * limit and how many are open (base/errors.h, m0__fds_spent): the reason
 * nng's and libuv's failures leave out. */
void m0__say_cannot(const char *fmt, ...) __attribute__((format(printf, 1, 2)));


#endif
