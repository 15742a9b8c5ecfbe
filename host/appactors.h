/* The application's actors in one process (config/appspec.h declares them):
 * a service per actor (service/service.h), a thread instance handle per
 * instance placed `thread`, the listening socket of each actor whose
 * instances dial in (`process`, `external`), and the supervisor of the
 * processes spawned for `process` actors (host/children.h).
 *
 * Design notes
 * - Opened by the coordinator after its loops (their inboxes are where
 *   replies go) and before any thread starts: thread instances are handles
 *   in the coordinator's group, so the barrier waits for their READY and a
 *   FAILED make is exit 78 like a loop's.
 * - An actor whose instances dial plain tcp (unless the file trusts its
 *   network), or that names a key file, asks each to prove it holds the
 *   secret (runtime/proof.h): the key file's, or one drawn here for the
 *   process instances this host spawns (handed over in their environment).
 * - Stopped after every loop has drained (no request is inside an actor
 *   then): STOP to each thread instance and each connected instance, then
 *   the spawned processes are asked (SIGTERM) and waited for within what is
 *   left of the drain's bound.
 */
#ifndef M0_HOST_APPACTORS_H
#define M0_HOST_APPACTORS_H

#include "service/instance.h"
#include "service/post.h"
#include "service/service.h"
#include "config/appspec.h"
#include "host/process.h"

typedef struct m0__children m0__children;

typedef struct m0__app_actors {
  int n;
  m0__service *svcs;      /* [n] */
  m0__service **svc_ptrs; /* [n], what loops hold */
  m0__instance *inst;     /* thread instances */
  int ninst;
  m0__children *children; /* process instances, or NULL */
  m0__inbox **loop_inbox; /* [here] */
  char (*urls)[M0__URL_MAX]; /* [n]: where connected instances dial */
  struct m0__relay *relays;  /* [n]: the supervisor's (m0__app_actors_front), else NULL */
  m0__secret *secrets;       /* [n]: what each actor's instances prove they hold (len 0: no proof asked) */
  struct m0__nats **nats;    /* [n]: a nats actor's forwarder (service/nats.h), else NULL */
  const m0__reload *reload;  /* the process's: at the stop, whether this generation handed over */
  m0__post post;             /* how any thread of this host sends and calls them (service/post.h) */
  bool post_made;
} m0__app_actors;

/* Makes the services and thread instances of decl for this process's
 * loops (first .. first+here-1, whose inboxes are given), adding each
 * instance's handle to handles (room for m0__app_actors_handles(decl)
 * more), listening for connected ones, and spawning process instances
 * (argv: the host's own, for /proc/self/exe). pub is the process's
 * publisher: what instances publish through (thread instances directly,
 * connected ones by PUBLISH). 0 or a negative m0__err (said on stderr). */
int m0__app_actors_open(m0__app_actors *a, m0__process *pr, const m0__app_decl *decl, m0__inbox *loop_inboxes,
                        size_t inbox_stride, int here, int first, uint32_t coord_id, const char *coord_url,
                        m0_publisher *pub, m0__handle **handles, int *nhandles);
/* The supervisor's side under --workers: each process or external actor
 * listens at its URL, its instances relayed to every worker's door
 * (service/relay.h), and process instances are spawned here, once for the
 * host (a worker's m0__app_actors_open listens at its door instead and
 * spawns none). Stopped and closed as above. 0 or a negative m0__err. */
int m0__app_actors_front(m0__app_actors *a, m0__process *pr, const m0__app_decl *decl, int nworkers,
                         m0_publisher *pub);
/* How many handles decl adds (its thread instances). */
int m0__app_actors_handles(const m0__app_decl *decl);
/* The drain began: a spawned instance that ends from now on is not
 * restarted (it stays down until the stop below). */
void m0__app_actors_drain(m0__app_actors *a);
/* After the loops drained: every instance is asked to stop; spawned ones
 * are waited for until deadline (then killed), and connected ones until
 * they have left (or deadline), so no STOP is lost in a closing socket. */
void m0__app_actors_stop(m0__app_actors *a, m0__actor *coord, int64_t deadline);
/* After the handles are closed. */
void m0__app_actors_close(m0__app_actors *a);

#endif
