/* The coordinator: runs the actors of one process (its loops, their pool
 * threads, and the producer when it lives here), opens the barrier, and owns
 * this process's signals and drain. In single and threads mode it is the
 * process's top; under prefork each worker runs one, reporting to the
 * supervisor (actors/supervisor.c). */
#ifndef M0_ACTORS_COORDINATOR_H
#define M0_ACTORS_COORDINATOR_H

#include "host/config.h"
#include "transport/topology.h"

typedef struct m0__proc {
  const m0_app *app;
  const m0_producer *producer; /* NULL when the producer is not in this process */
  const m0_config *cfg;
  m0__mode mode;
  int loops;       /* loops in the whole topology */
  int first;       /* loops first .. first + here - 1 run in this process */
  int here;
  const char *run_dir; /* a worker's inherited run directory, else NULL */
  int listen_fd;       /* a worker's inherited listener, else -1 (bind) */
  int page_fd;         /* a worker's inherited shared page, else -1 (make) */
  int app_page_fd;     /* and its app page, or -1 */
  const int *handoff;  /* prefork: [2*loops] datagram sockets, SCM_RIGHTS */
  /* Embedded (m0_host_start): the host's stop is a byte on stop_fd instead
   * of a signal, no handler is installed, the environment is left alone, and
   * on_ready is called once every loop serves. */
  int stop_fd; /* -1: SIGTERM/SIGINT */
  void (*on_ready)(void *arg, int port, const char *run_dir, m0_publisher *pub);
  void *ready_arg;
} m0__proc;

/* Serves until SIGTERM/SIGINT and drains. Returns the exit code. */
int m0__coord_run(const m0__proc *p);

#endif
