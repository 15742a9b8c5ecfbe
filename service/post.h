/* The post: how any thread of a host — main, a view, a pool thread, a
 * deferred answer's thread, a thread instance — sends a message to an
 * application actor or calls it and waits for the answer (m0_send, m0_call,
 * m0_ask), and how a name ("echo", "echo.2") becomes an instance.
 *
 * Design notes
 * - A caller (service/callers.h) is one of the host's M0__CALLERS slots: an
 *   id of role CALLER, an inbox its answers come to, and the call it waits
 *   for. A thread takes one for one send or call and gives it back, so any
 *   thread can call without being an actor, and a thread instance that
 *   calls keeps its own mailbox for its requests (they wait for it, in
 *   order). More calls at once than callers are refused (EAGAIN).
 * - A call's id is the post's counter, unique in the host: an answer that
 *   comes after its call gave up (a late one, or one for a caller slot's
 *   earlier call) is dropped and counted, never taken for a later call's.
 *   So is one from another instance than the one asked, or from the slot
 *   asked after its instance was replaced (its generation moved on).
 * - An answer reaches the caller's inbox wherever the actor runs: a thread
 *   instance puts it there (m0__service_reply_inbox names callers), a
 *   connected instance's comes through its service's reply thread, and
 *   under --workers through the relay and the worker's door.
 * - "echo" picks as a route does (the live instance with the fewest in
 *   flight, below the actor's queue bound); "echo.2" is that instance,
 *   refused when it is not live or at its bound. A send counts in flight
 *   until a thread instance has taken it; a connected instance's socket
 *   takes it or refuses it within its send timeout.
 * - The posts of the process are listed (a host's is added when its actors
 *   are made): a thread that names no host gets its own host's (a thread
 *   instance's), or the process's only one.
 */
#ifndef M0_SERVICE_POST_H
#define M0_SERVICE_POST_H

#include <pthread.h>
#include <stdatomic.h>

#include "service/boxes.h"
#include "service/callers.h"
#include "service/service.h"

/* A connected instance's own call, passed on (service/post.c's book). */
#define M0__FORWARDS 256
typedef struct m0__forward {
  uint32_t asker, target; /* whose call, and who must answer it */
  uint64_t call;          /* the asker's id for it (0: a free entry) */
  int64_t until;          /* past it the entry may be reused */
} m0__forward;

typedef struct m0__post {
  m0__callers callers;
  m0__boxes *boxes; /* its mailboxes and monitors (outlive it while a mailbox is open) */
  m0__tracer *trace;
  m0__service *const *all; /* the host's actors, by name */
  int nall;
  _Atomic uint64_t calls; /* the last call id given */
  struct m0__post *next;  /* in the process's list */
  pthread_mutex_t book_mu;
  m0__forward book[M0__FORWARDS]; /* connected instances' calls passed on, waiting for their answer */
} m0__post;

/* Makes the post of a host's actors (all is kept, not copied) and lists it
 * in the process. 0 or M0__ENOMEM. */
int m0__post_init(m0__post *p, m0__service *const *all, int nall, m0__tracer *trace);
/* Unlisted and freed, after every actor and caller has stopped. */
void m0__post_fini(m0__post *p);
/* The post of the calling thread's host, or the process's only one; NULL
 * when there is none, or several and this thread belongs to none. */
m0__post *m0__post_current(void);
/* This thread belongs to p's host: thread instance `as` (its id), at its
 * start; its sends and calls are from that id (service/callers.h). */
void m0__post_enter(m0__post *p, uint32_t as);

/* Fire and forget: 0, or a negative m0__err with errno: ENOENT (no such
 * actor or instance), EHOSTDOWN (none live), EAGAIN (its mailbox is full,
 * or every caller is busy), EMSGSIZE, ENOMEM. */
int m0__post_send(m0__post *p, const char *actor, uint32_t type, const void *data, size_t len);
/* Sends and waits up to timeout_ms for the answer: 0 and *out (the
 * answer's type and a copy of its data, in out_mem, the caller's to free),
 * or a negative m0__err with errno as above, ETIMEDOUT, or ENODATA (the
 * actor answered nothing). */
int m0__post_call(m0__post *p, const char *actor, uint32_t type, const void *data, size_t len, unsigned timeout_ms,
                  uint32_t *out_type, m0_str *out_data, void **out_mem);
/* m0_ask: req as a one-record REQUEST batch, its REPLY into *out. */
int m0__post_ask(m0__post *p, const char *actor, const m0_request *req, unsigned timeout_ms, m0_answer *out);

/* ---- mailboxes and monitors (service/boxes.h) ---- */

/* Opens mailbox `name` (1..48 of [a-z0-9_-], no actor's): its index, or a
 * negative m0__err with errno EINVAL, EEXIST, ENOSPC, ENOMEM. */
int m0__post_box_open(m0__post *p, const char *name);
/* watcher (an actor's or a mailbox's name) is sent a note (m0_monitor's
 * types) of each instance of actor that comes, leaves or exits: 0, or errno
 * ENOENT (no such actor), EINVAL (a bad watcher name), ENOSPC. */
int m0__post_watch(m0__post *p, const char *actor, const char *watcher);
/* What the services ask of the post (service/service.h): the monitors'
 * notes, the way back to a connected instance's own call, and its calls. */
extern const m0__service_hooks m0__post_hooks;

#endif
