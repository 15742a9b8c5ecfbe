/* The coordinator: the top actor of one process that runs loops (single,
 * threads, a prefork worker, the embedded host). It starts its loops, their
 * pool threads and the producer when it lives here (runtime/handle.h), opens
 * the barrier, and owns the drain. Under prefork each worker runs one,
 * reporting to the supervisor (host/supervisor.c). */
#ifndef M0_HOST_COORDINATOR_H
#define M0_HOST_COORDINATOR_H

#include "host/process.h"

struct m0__post; /* service/post.h: the host's callers */

typedef struct m0__proc {
  m0__process proc;            /* the process: described by the caller (m0__process_describe) */
  const m0_producer *producer; /* NULL when the producer is not in this process */
  int first, here;             /* loops first .. first + here - 1 run in this process */
  const int *handoff;          /* prefork: [2*loops] datagram sockets, SCM_RIGHTS */
  /* Embedded (m0_host_start): proc.stop_fd set, no handler installed, the
   * environment left alone, and on_ready called once every loop serves. */
  void (*on_ready)(void *arg, int port, const char *run_dir, m0_publisher *pub, struct m0__post *post);
  void *ready_arg;
} m0__proc;

/* Serves until stopped and drains. Returns 0 or a negative m0__err
 * (m0__exit_code turns it into the process's exit code). */
int m0__coord_run(m0__proc *p);

#endif
