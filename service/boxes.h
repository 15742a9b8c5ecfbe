/* A host's mailboxes (m0_mailbox_open) and monitors (m0_monitor), kept by
 * its post (service/post.h): a mailbox is a name a thread of the program
 * owns and receives on without being an actor; a monitor names a watcher
 * (an actor or a mailbox) to be sent a note when an instance of the watched
 * actor comes, leaves, or — a spawned process — exits.
 *
 * Design notes
 * - A mailbox is a direct inbox with a name and a bound (M0__BOX_QUEUE
 *   messages waiting; a send past it is refused, EAGAIN). Its id is role
 *   MAILBOX and its index. A name is an actor's or a mailbox's, never both
 *   (the post refuses to open a mailbox an actor has the name of).
 * - Closing a mailbox drops what waits in it; a send to its name then is
 *   ENOENT, and a call it did not answer waits out its own bound.
 * - Opening and closing take the boxes' mutex; a send finds its box under
 *   it too (32 names, compared once each), then puts into the inbox after.
 *   A box is not reused while a send may still hold it: closing marks it
 *   closing, and it is free again only once no send is inside it.
 * - The table outlives its host while a mailbox is open: the program's
 *   thread may still hold one (blocked in m0_mailbox_recv) when the host
 *   stops. Each open mailbox holds a reference, the post one; the host's
 *   stop marks the table stopped (a receive then ends with ECANCELED, a
 *   reply with EPIPE, without touching the host) and the last reference
 *   frees it.
 */
#ifndef M0_SERVICE_BOXES_H
#define M0_SERVICE_BOXES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "m0/m0.h"
#include "runtime/actor.h"
#include "runtime/inbox.h"
#include "service/callers.h"

#define M0__BOXES 32
#define M0__BOX_QUEUE 4096
#define M0__WATCHES 64
#define M0__NAME_MAX 48

typedef struct m0__box {
  char name[M0__NAME_MAX + 1]; /* "" : free (under mu) */
  m0__inbox inbox;             /* made on first use, kept until the host stops */
  bool made;
  atomic_int queued; /* messages put and not yet received */
  atomic_int users;  /* sends inside it now (it is not reused meanwhile) */
} m0__box;

typedef struct m0__watch {
  int actor;                      /* the watched actor's index in the post */
  char watcher[M0__NAME_MAX + 1]; /* an actor's or a mailbox's name */
} m0__watch;

typedef struct m0__boxes {
  pthread_mutex_t mu;
  int refs;                /* the post's, and one per open mailbox (under mu) */
  atomic_bool stopped;     /* the host stopped: callers is gone */
  m0__callers *callers;    /* where a reply goes (NULL once stopped; under mu) */
  /* or, to a connected instance's own call, this way (the post's: service/
   * service.h's hooks' answer); not called once stopped */
  bool (*answer)(void *arg, uint32_t from, uint32_t to, nng_msg *ret);
  void *answer_arg;
  m0__tracer *trace;
  m0__box box[M0__BOXES];
  m0__watch watch[M0__WATCHES];
  int nwatch;
  _Atomic unsigned long long missed; /* notes a watcher could not take */
} m0__boxes;

/* A table with the post's reference, or NULL. */
m0__boxes *m0__boxes_new(m0__callers *callers, m0__tracer *trace);
/* The host stops: every receive wakes and ends, and the post's reference
 * goes. */
void m0__boxes_stop(m0__boxes *b);
/* Opens mailbox `name`: its index, or an errno negated (-EEXIST taken,
 * -ENOSPC every box in use, -ENOMEM). The name's form is the caller's to
 * check. */
int m0__box_open(m0__boxes *b, const char *name);
/* Closes box i (what waits in it is dropped) and gives its reference back
 * (the table may be freed). */
void m0__box_close(m0__boxes *b, int i);
/* What a mailbox received: the message, its data copied into mem (the
 * receiver's to free), and the call it answers (0: a send) from whom. */
typedef struct m0__received {
  uint32_t type;
  m0_str data;
  void *mem;
  uint64_t call;
  uint32_t from;
} m0__received;
/* The next message of box i, waiting up to timeout_ms: 0, or M0__ETIMEDOUT
 * (errno ETIMEDOUT), M0__ECLOSED (ECANCELED: the host stopped) or
 * M0__ENOMEM. One receiver per box at a time. */
int m0__box_recv(m0__boxes *b, int i, unsigned timeout_ms, m0__received *out);
/* Answers a received call: 0, or a negative m0__err with errno EINVAL (a
 * send: nobody waits), EPIPE (its caller gave up, or the host stopped),
 * EMSGSIZE, ENOMEM. */
int m0__box_reply(m0__boxes *b, int i, const m0__received *call, uint32_t type, const void *data, size_t len);
/* The open box named by the n bytes at name, held for a send (give it back
 * with m0__box_release), or M0__ENOTFOUND. */
int m0__box_hold(m0__boxes *b, const char *name, size_t n);
void m0__box_release(m0__boxes *b, int i);
/* Adds a watch: 0, -EEXIST (the same one is there) or -ENOSPC. */
int m0__boxes_watch(m0__boxes *b, int actor, const char *watcher);

#endif
