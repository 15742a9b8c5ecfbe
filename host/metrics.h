/* Prometheus text for --metrics-path: every loop's line of the shared page
 * (so any loop answers for the whole topology), the bus's refusals, the
 * supervisor's respawns, and, for this process, request latency by route
 * and by application actor (http/latency.h) and nng's own statistics.
 * Answered on the loop, never queued to a pool. */
#ifndef M0_HOST_METRICS_H
#define M0_HOST_METRICS_H

#include "actors/service.h"
#include "http/response.h"
#include "transport/page.h"

/* services: the application's actors in this process (their counters are
 * this process's: under --workers, each worker answers for its own). */
/* process: the label of this process ("host", "worker.i"); app: the
 * application its loops serve (its routes' latency). */
void m0__metrics_respond(const m0__page *page, const char *process, const m0_app *app, m0__service *const *services,
                         int nservices, m0_response *res);

#endif
