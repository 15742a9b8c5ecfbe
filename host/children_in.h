/* What host/children.c (the processes it spawns, the thread instances it
 * restarts, its watcher) and host/suptree.c (the supervision tree's
 * decisions) share. Everything here is touched under m0__children.mu. */
#ifndef M0_HOST_CHILDREN_IN_H
#define M0_HOST_CHILDREN_IN_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

#include "config/appspec.h"
#include "runtime/handle.h"
#include "service/instance.h"
#include "service/service.h"

typedef struct m0__children m0__children; /* host/children.h's */

typedef struct child {
  int actor, instance;
  m0__instance *inst; /* a thread instance, which makes itself again; NULL: a process */
  pid_t pid;          /* 0: not running */
  int pidfd;          /* -1 when not running */
  bool given_up;
  pid_t ended_pid; /* stopped by its supervisor: which process, and how it ended (the monitors' note) */
  int ended_status;
} child;

/* How a child ended: a process's pid and wait status, or a thread's why. */
typedef struct m0__ending {
  pid_t pid;
  int status;
  const char *why;
} m0__ending;

/* A restart budget's clock: the last `intensity` restart times, a ring
 * (an actor's own, or a supervisor's over all its children). */
typedef struct budget {
  int64_t *at;
  int n, next;
} budget;

struct m0__children {
  const m0__app_decl *decl;
  m0__service *svcs;
  char (*urls)[M0__URL_MAX]; /* NULL: no process is spawned here (a worker: its supervisor's) */
  child *kids;
  int nkids;
  budget *restarts;    /* [decl->nactors]: an actor in no supervisor */
  int *sup_of;         /* [decl->nactors]: its supervisor (decl->sups), or -1 */
  int *rank;           /* [decl->nactors]: its place among that supervisor's children */
  int *flat;           /* [decl->nactors]: its place in the tree, depth first: the order of a start */
  int *sup_parent;     /* [decl->nsups]: the supervisor it is a child of, or -1 (a top) */
  int *sup_rank;       /* [decl->nsups]: its place among its parent's children */
  budget *sup_budgets; /* [decl->nsups] */
  m0__exits *exits;    /* the top's wait, woken when a supervisor stops the host */
  atomic_bool failed;  /* a supervisor past its budget, on_fail exit: the host stops, exit 1 */
  pthread_mutex_t mu;  /* kids, against the watcher and the thread instances */
  pthread_t watcher;
  int stop_efd;
  bool draining; /* the host's drain began: an instance that ends stays down */
  bool stopping; /* the watcher ends */
};

/* children.c */
int m0__child_spawn(m0__children *ch, child *c);
bool m0__child_wait(const child *c, int64_t deadline);

/* suptree.c: the tree read from decl (false: out of memory); what a child's
 * end does (its own budget, or its supervisor's strategy, up the tree). */
bool m0__suptree_init(m0__children *ch);
void m0__suptree_free(m0__children *ch);
void m0__suptree_ended(m0__children *ch, child *c, const m0__ending *e);
/* The monitors' note of c's end (service/post.h). */
void m0__suptree_noted(m0__children *ch, const child *c, const m0__ending *e, bool again);

#endif
