/* What the application declares beside its routes, resolved once: its actor
 * kinds (m0_app.actors) and a topology file's "app_actors" and "routes"
 * (docs/topology.md), merged into one list of actors, each placed, and one
 * route table in which a route names a view or an actor.
 *
 *   an actor of the app with no entry in the file: placement thread, one
 *   instance; an entry in the file places it (thread, process, external);
 *   an entry with no kind in the program must be external (its instances
 *   are other programs).
 *
 * The `actors` check refuses (exit 78, one line naming the key and the fix)
 * what cannot be served: a route naming an actor nobody declares, a thread
 * or process actor with no kind in this program, an actor placed process or
 * external under --workers.
 */
#ifndef M0_CONFIG_APPSPEC_H
#define M0_CONFIG_APPSPEC_H

#include <stdbool.h>
#include <stddef.h>

#include "m0/m0.h"
#include "transport/page.h"

typedef enum m0__placement { M0__PLACE_THREAD, M0__PLACE_PROCESS, M0__PLACE_EXTERNAL, M0__PLACE_NATS } m0__placement;

#define M0__ACTOR_NAME_MAX 48
#define M0__ACTORS_MAX 64    /* actors in one application */
_Static_assert(M0__ACTORS_MAX <= M0__PAGE_APP_ACTORS, "each actor has its word on the shared page");
#define M0__INSTANCES_MAX 64 /* instances of one actor (connected at once, for external) */

/* One actor as a topology file declares it (or as the defaults place it). */
typedef struct m0__actor_spec {
  char name[M0__ACTOR_NAME_MAX + 1];
  m0__placement placement;
  int instances;          /* thread, process: how many (1..64); external: 0, any number dial in */
  char url[256];          /* process, external: where the host listens; "" = built in the run directory;
                           * nats: the NATS server (service/nats.h) */
  char subject[128];      /* nats: the subject its instances serve ("" until resolved: m0.actor.<name>) */
  int lanes;              /* nats: the batches each loop has out at once (1..64; default 2) */
  int restart_intensity;  /* process: restarts allowed within the period (0..1000; default 5) */
  long restart_period_ms; /* (1..86400000; default 10000) */
  int queue;              /* requests in flight per instance before 503 (1..65536; default 1024) */
  bool from_file;         /* declared in the topology file (the doctor prints where it came from) */
  /* How its instances prove who they are over plain tcp (runtime/proof.h):
   * a key file ("secret", resolved against the file's directory; "" none:
   * a process actor's instances are given a fresh secret), or a network
   * the file says is trusted (no proof asked). */
  char secret_file[1024];
  bool trusted_network;
} m0__actor_spec;

/* One route a topology file declares: served by an actor, or a channel's
 * stream (one of actor and stream is set; http/route_stream.h). */
typedef struct m0__route_spec {
  char method[32];
  char pattern[256];
  char actor[M0__ACTOR_NAME_MAX + 1];
  long timeout_ms; /* 1..3600000; default 1000 */
  char stream[256]; /* the channel's template ("room.{room}"), or "" */
} m0__route_spec;

/* A topology file's supervisor (docs/topology.md, Supervisors): its
 * process actors in order, one strategy and one restart budget over all of
 * them (Erlang/OTP's MaxR within MaxT); host/children.c applies it. */
typedef enum m0__sup_strategy { M0__SUP_ONE_FOR_ONE, M0__SUP_ONE_FOR_ALL, M0__SUP_REST_FOR_ONE } m0__sup_strategy;

/* How deep supervisors nest: a top one, its child supervisors, theirs... */
#define M0__SUP_DEPTH_MAX 8

typedef struct m0__sup_spec {
  char name[M0__ACTOR_NAME_MAX + 1];
  m0__sup_strategy strategy; /* default one_for_one */
  int intensity;             /* restarts allowed within period_ms (0..1000; default 5) */
  long period_ms;            /* (1..86400000; default 10000) */
  bool serve_on;             /* past its budget: its children stay down (true) or the host stops, exit 1 */
  int nchildren;
  /* app_actors placed process or thread, or other supervisors (by name), each in one supervisor */
  char children[M0__ACTORS_MAX][M0__ACTOR_NAME_MAX + 1];
} m0__sup_spec;

/* The resolved declaration. */
typedef struct m0__app_decl {
  m0__actor_spec *actors; /* [nactors]: the app's kinds in order, then the file's others */
  const m0_actor_kind **kinds; /* [nactors]: the program's kind of that name, or NULL */
  int nactors;
  m0_route *routes; /* the app's routes, then the file's (view NULL, actor or stream set) */
  size_t nroutes;
  char (*route_strs)[3][256]; /* storage for the file routes' method, pattern and stream */
  const m0__sup_spec *sups;   /* the file's supervisors (the configuration's: it outlives d) */
  int nsups;
} m0__app_decl;

/* Resolves app + cfg (cfg->app_actors, cfg->file_routes). 0, or
 * M0__ECONFIG with the check's one line in why; M0__ENOMEM. */
int m0__app_decl_make(m0__app_decl *d, const m0_app *app, const struct m0_config *cfg, char *why,
                      size_t whylen);
void m0__app_decl_free(m0__app_decl *d);
/* The index of actor `name` (n bytes) in d, or M0__ENOTFOUND. */
int m0__app_decl_find(const m0__app_decl *d, const char *name, size_t n);
const char *m0__placement_name(m0__placement p);

#endif
