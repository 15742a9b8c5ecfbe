/* The relay: how the instances of a process or external actor serve every
 * worker of a --workers host. The actor's URL is the supervisor's (one
 * address for any program to dial, as in a single or threads host); each
 * worker listens for the actor at a door of its own; the relay, in the
 * supervisor, carries each instance's batches between the two.
 *
 * Design notes
 * - One leg per (instance, worker): a pair1 socket the relay dials to that
 *   worker's door, so the worker's service (service/service.h) sees each
 *   instance as one connection, exactly as a threads host sees the instance
 *   itself: it picks by least in flight, answers 502 when the leg goes (its
 *   instance left), 504 at a deadline. A worker that dies and is respawned
 *   is redialed by nng; its door is the same path.
 * - Each time a leg's pipe connects, the relay introduces it: a READY,
 *   sealed as the supervisor's (a worker's door admits it from the family
 *   only), naming the instance's slot here and where it dialed from. The
 *   worker gives the leg that slot, so slot k is the same instance in every
 *   process (echo.k in every graph, trace and metric), and the observer
 *   says the instance's machine, not the relay's.
 * - Each direction is checked where it enters: the supervisor's service
 *   (the actor's URL) admits what instances send, as any host's does, and
 *   hands each REPLY (or RETURN) here, stamped with its slot, to go back on
 *   the leg of the worker its `to` names; a leg carries only REQUEST (and
 *   MESSAGE) batches on to its instance. Anything else is dropped and
 *   counted (m0__relay.dropped).
 * - Who asked, in which worker. A loop's id says its worker (a worker's
 *   loop has the worker's index). Any other asker — a caller
 *   (service/post.h: m0_ask, m0_call, m0_send from any thread), a thread
 *   instance — has the same id in every worker (caller.0 is the same number
 *   in each), so the relay names it to the instance by
 *   its row in a book of (worker, id): the REQUEST leaves with `from`
 *   relayed.<row> (base/ids.h), the instance answers to that, and the
 *   REPLY's `to` is given back its id on the way to that row's worker.
 *   A table rather than an encoding in the id: a worker and a whole 32-bit
 *   id do not fit in 24 bits, and a caller's index is the post's to choose.
 *   Rows are never taken back: askers are a small, fixed set per worker (a
 *   worker's thread instances and its M0__CALLERS), and a respawned worker
 *   has the same ones, so an answer after its asker's worker died reaches
 *   its successor, which refuses it as it would a late one. The book grows
 *   by doubling to M0__RELAY_BOOK_MAX rows; an asker past it is dropped
 *   and counted. Only the relay's thread touches the book (no lock): the
 *   service's reply thread checks a `to` only for its role and range.
 * - The routing is every kind's: relay.c's relay_kinds lists each kind a
 *   leg carries with the kind that answers it (REQUEST and REPLY, MESSAGE
 *   and RETURN; a kind more is one line there).
 * - One thread owns every leg (opens, reads, writes, closes): it wakes on
 *   an eventfd the service writes when an instance comes or goes (it then
 *   makes the legs match the slots), on its inbox of replies, and on each
 *   leg's receive descriptor. Nothing else touches a leg, so no lock.
 * - STOP is the supervisor's: a worker that drains does not stop the
 *   instances (the others still serve), and a leg never carries it.
 * - A REQUEST is sent as a loop's is, waiting (up to the poly socket's
 *   100 ms send timeout) for the socket to take it: it takes one message
 *   at a time, and two workers' batches arrive together. A REPLY is put on
 *   its leg's send queue without waiting (a worker gone is not waited for);
 *   an introduction waits up to the leg's 100 ms (a leg not introduced is
 *   no instance to its worker until it connects again).
 * - The hop costs the supervisor one nng receive and one send per batch,
 *   both ways; the relay records no trace of its own (the worker's and the
 *   instance's records are the two ends).
 */
#ifndef M0_SERVICE_RELAY_H
#define M0_SERVICE_RELAY_H

#include <nng/nng.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "runtime/inbox.h"
#include "service/service.h"

typedef struct m0__relay_leg {
  nng_socket sock;
  bool open;
  int fd;                 /* its receive descriptor */
  atomic_bool introduce;  /* its pipe (re)connected: the worker is told which instance it carries */
  struct m0__relay *r;
} m0__relay_leg;

/* The rows of the book: at most this many askers, across every worker. */
#define M0__RELAY_BOOK_MAX 65536

typedef struct m0__relay_asker {
  uint32_t from; /* its id in its worker */
  int worker;
} m0__relay_asker;

typedef struct m0__relay {
  m0__service *svc;            /* the actor's URL: its slots are the instances */
  int nworkers;
  char (*doors)[M0__URL_MAX];  /* [nworkers] */
  m0__relay_leg *legs;         /* [M0__SLOTS * nworkers] */
  unsigned *leg_pipe;          /* [M0__SLOTS]: the instance each slot's legs were dialed for (0: none) */
  m0__inbox replies;           /* REPLY messages for the legs, from the service's reply thread */
  bool inbox_made;
  int wake;                    /* eventfd: an instance came or went, a leg connected, or the relay is closing */
  char host[64];               /* this machine's name: where an instance over ipc dialed from */
  uint64_t seq;                /* of its introductions */
  atomic_bool closing;
  pthread_t thread;
  bool started;
  m0__relay_asker *book;       /* [book_cap]: row n is relayed.n (the relay's thread alone) */
  uint32_t *book_index;        /* [2 * book_cap]: open addressing by (worker, from), row + 1 (0: empty) */
  int nbook, book_cap;
  atomic_ullong dropped;       /* a REPLY for no worker or a gone leg, a leg's message that is not a REQUEST,
                                * an asker past the book */
} m0__relay;

/* Makes the relay of svc (inited, not listening yet: its pipe events wake
 * the relay from the start) to the doors of nworkers workers, in order
 * (doors is copied). 0 or M0__ENOMEM (then closed). */
int m0__relay_init(m0__relay *r, m0__service *svc, char (*doors)[M0__URL_MAX], int nworkers);
/* Starts its thread, once svc listens. 0 or M0__ENOMEM. */
int m0__relay_start(m0__relay *r);
/* A REPLY from slot k's instance (its envelope's `from` stamped), addressed
 * to `to`: on 0 the message is the relay's; else it is still the caller's
 * (`to` names no worker's loop and no row of the book, or the kind is none
 * that comes back). Thread safety: any thread. */
int m0__relay_reply(m0__relay *r, uint32_t to, nng_msg *m);
/* An instance came or went: the legs are made to match the slots. */
void m0__relay_wake(m0__relay *r);
/* Closes every leg and joins the thread. */
void m0__relay_close(m0__relay *r);

#endif
