/* What the observer (host/observer.h) reads beyond its own process: each
 * worker's thread instances, which its loop writes on the shared page at
 * each sweep (transport/page.h, m0__page_instances), and the supervision
 * tree, from the application's declaration and the actors' restarts on the
 * page.
 *
 * Design notes
 * - Under --workers a thread actor's instances are each worker's own
 *   threads: no other process can look at their slots. So each worker's
 *   loop writes its own (which, and how many requests each has in flight)
 *   on its line of the page once per sweep (at most a second apart), under
 *   a sequence word, and the worker that answers a graph reads every
 *   other worker's there: at most a sweep old, and a stopped worker's
 *   stay as they were last written. Its own it reads live.
 * - The sweep also rolls the edges' rates' window (runtime/edges.h): every
 *   loop asks, one rolls it. */
#ifndef M0_HOST_OBSERVED_H
#define M0_HOST_OBSERVED_H

#include <jansson.h>

#include "actors/loop.h"

/* One thread instance of another worker, as its loop last wrote it:
 * l->services[service]'s slot, in that worker (loop index worker). */
typedef struct m0__observed_instance {
  int worker, service, slot, in_flight;
} m0__observed_instance;

/* Whether s is an actor placed nats (service/nats.h): its slots are lanes
 * to the fleet (batches in flight), not instances of this host. */
bool m0__observed_nats(const m0__loop *l, const struct m0__service *s);
/* Writes this loop's worker's thread instances on the page (prefork) and
 * rolls the edges' rates. On the loop's thread, at each sweep. */
void m0__observer_swept(m0__loop *l);
/* Calls cb for each thread instance of every worker but l's, under
 * prefork (none otherwise). */
void m0__observed_instances_each(const m0__loop *l, void (*cb)(void *arg, const m0__observed_instance *i), void *arg);
/* The supervision tree as JSON (a new reference): the doctor's
 * `supervision` (host/suptree.c, the same keys), under the process that
 * starts the actors' processes (the host; under prefork the supervisor),
 * with what is live now:
 *   {"name", "pid", "children": [{"supervisor", "strategy", "intensity",
 *    "period_ms", "on_fail", "restarted", "children": [...]}, actor...]}
 *   actor: {"actor", "placement", "instances" (declared), "live": [names],
 *           "restarts", "restart": its own budget when in no supervisor}
 * A supervisor's restarted is its children's restarts summed: instances
 * it started again (one death may start several). */
json_t *m0__observed_supervision(const m0__loop *l, pid_t top_pid);

#endif
