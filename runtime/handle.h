/* An actor as a handle, in the libuv manner: init, open, start, stop, close
 * with a callback. Every actor kind (a loop, a pool thread, the producer) is
 * one table of functions, m0__actor_kind, and a struct that begins with an
 * m0__handle; whoever runs actors (a process's coordinator, a test) drives
 * them only through these calls.
 *
 * Design notes
 * - open runs on the caller's thread, before any actor's thread starts: the
 *   actor's mailbox is listening before anyone dials it (an nng redial
 *   against an absent listener costs CPU: runtime/actor.c, m0__peer_open).
 * - run is the actor's thread: it builds its state (the application's make),
 *   says READY or FAILED to its coordinator, serves until STOP, says STOPPED.
 *   When run returns, the thread marks the handle exited and writes the
 *   process's exit descriptor (m0__exits): an actor's end reaches its
 *   coordinator as a descriptor readable in the same poll as its mailbox and
 *   the signals, never by looking at flags on a timer.
 * - close joins the thread, then closes the actor's peers (hang_up), then its
 *   mailbox (release), then calls back. Closing an nng socket drops what it
 *   has not sent, so nothing is closed on the actor's own thread: its last
 *   messages (STOPPED, FAILED, a pool's STOP) would be lost. A group closes
 *   every peer before any mailbox (m0__handles_close): a peer whose mailbox
 *   closed first would redial it until closed itself.
 * - A handle whose thread never returns (stuck inside the application) is
 *   never closed: the process exits without waiting for it.
 */
#ifndef M0_RUNTIME_HANDLE_H
#define M0_RUNTIME_HANDLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct m0__handle m0__handle;

/* Where the threads of one process announce their end: an eventfd,
 * readable once any has ended since the last take. */
typedef struct m0__exits {
  int fd;
} m0__exits;
int m0__exits_init(m0__exits *e);
void m0__exits_fini(m0__exits *e);
/* Clears the descriptor; then look at the handles (m0__handle_exited). */
void m0__exits_take(m0__exits *e);

typedef struct m0__actor_kind {
  const char *name;                 /* "loop", "pool", "producer" */
  int (*open)(m0__handle *h);       /* its mailbox: 0 or a negative m0__err (said on stderr) */
  void (*run)(m0__handle *h);       /* its thread */
  void (*hang_up)(m0__handle *h);   /* after the join: its peers */
  void (*release)(m0__handle *h);   /* after the group's hang_up: its mailbox */
} m0__actor_kind;

struct m0__handle {
  const m0__actor_kind *kind;
  m0__exits *exits;
  pthread_t thread;
  bool started, closed;
  atomic_bool exited;       /* its thread returned (or never started) */
  atomic_bool said_stopped; /* STOPPED or FAILED is sent: nothing more comes from it */
  atomic_bool failed;       /* its make refused */
  atomic_bool in_app;       /* inside the application: named when the drain's bound passes */
};

/* A handle that has not started: exited, so a group closes cleanly around it. */
void m0__handle_init(m0__handle *h, const m0__actor_kind *kind, m0__exits *exits);
/* The kind's open. 0 or its error. */
int m0__handle_open(m0__handle *h);
/* Its thread. 0, or M0__ENOMEM (no thread: the handle stays exited). */
int m0__handle_start(m0__handle *h);
/* True when its thread has returned. Thread safety: any thread. */
bool m0__handle_exited(m0__handle *h);
/* Closes the handles of a group whose threads have all returned (or never
 * started): joins them, hangs every one up, releases every one, then calls
 * cb (may be NULL) for each. A handle not exited is left alone and its cb
 * not called; returns how many were left. */
int m0__handles_close(m0__handle **hs, int n, void (*cb)(m0__handle *h));

#endif
