/* What a generation knows of its reloads, kept in its process
 * (host/process.h): its number, the next generation starting, its
 * successor, the master channel and the rollback window. Types alone, so
 * the process can hold them while host/reload.c and host/rollback.c, which
 * act on the whole process, include host/process.h. */
#ifndef M0_HOST_RELOAD_STATE_H
#define M0_HOST_RELOAD_STATE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The rollback window (host/rollback.h). */
typedef struct m0__keep {
  uint64_t gen;     /* the generation kept; 0: none */
  int exe_fd;       /* its executable (a memfd copy) */
  int topo_fd;      /* its topology text (a memfd), -1: it read none */
  int64_t deadline; /* CLOCK_MONOTONIC ms: dropped then; INT64_MAX until this one serves */
  uint64_t dropped; /* the last one dropped by its window, for the refusal's line */
  int own_topo_fd;  /* this generation's own topology text, for its successor to keep; -1: none */
  uint64_t back_to; /* this generation was started by a rollback to this generation (0: no) */
} m0__keep;

typedef struct m0__reload {
  uint64_t generation; /* this process's: 1, or its predecessor's + 1 */
  /* as the next generation */
  int prev_fd;    /* to the predecessor: one byte once this one serves, then closed; -1 none */
  pid_t prev_pid; /* the predecessor, until it has exited */
  /* with a next generation starting */
  pid_t next_pid; /* 0: none */
  int next_fd;    /* the pipe's read end: a byte when it serves, EOF when it ended first */
  int next_status;
  bool next_reaped;
  bool handed_over; /* the next generation serves: this one drains and leaves the run directory to it */
  int64_t next_deadline; /* it must serve by then (--reload-timeout-ms), or be stopped; INT64_MAX: none */
  bool next_stopping;    /* past it: sent SIGTERM, SIGKILL at next_deadline */
  /* after the hand-over */
  pid_t succ_pid; /* the generation that serves now: a signal that reaches this one goes on to it */
  int succ_fd;    /* the pipe's read end, open until this process ends: its successor sees it close */
  /* the master channel (host/master.h): generation 1 holds both ends,
   * every later generation chan_fd only; -1: none yet */
  int chan_fd, master_fd;
  m0__keep keep; /* the rollback window (host/rollback.h) */
} m0__reload;

#endif
