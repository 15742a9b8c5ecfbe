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
 */
#ifndef M0_SERVICE_BOXES_H
#define M0_SERVICE_BOXES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "runtime/inbox.h"

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
  m0__box box[M0__BOXES];
  m0__watch watch[M0__WATCHES];
  int nwatch;
  _Atomic unsigned long long missed; /* notes a watcher could not take */
} m0__boxes;

void m0__boxes_init(m0__boxes *b);
void m0__boxes_fini(m0__boxes *b);
/* Opens mailbox `name`: its index, or an errno negated (-EEXIST taken,
 * -ENOSPC every box in use, -ENOMEM). The name's form is the caller's to
 * check. */
int m0__box_open(m0__boxes *b, const char *name);
/* Closes box i (what waits in it is dropped). */
void m0__box_close(m0__boxes *b, int i);
/* The open box named by the n bytes at name, held for a send (give it back
 * with m0__box_release), or M0__ENOTFOUND. */
int m0__box_hold(m0__boxes *b, const char *name, size_t n);
void m0__box_release(m0__boxes *b, int i);
/* Adds a watch: 0, -EEXIST (the same one is there) or -ENOSPC. */
int m0__boxes_watch(m0__boxes *b, int actor, const char *watcher);

#endif
