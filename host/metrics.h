/* Prometheus text for --metrics-path, answered on the loop, never queued to
 * a pool. Everything but nng's statistics comes from the shared page
 * (transport/page.h: every process adds there), so whichever loop of
 * whichever worker answers, a scrape shows one series per host (or per loop)
 * and a counter never goes back between scrapes: every loop's line, the
 * bus's refusals, the supervisor's respawns, answers by route and status
 * class, request latency by route and by application actor
 * (base/latency.h), WebSocket messages and closes. nng's own statistics are
 * the answering process's (labelled so): its sockets are its own. */
#ifndef M0_HOST_METRICS_H
#define M0_HOST_METRICS_H

#include "service/service.h"
#include "http/response.h"
#include "transport/page.h"

/* services: the application's actors in this process (their counters are
 * on the page, the whole host's; their live instances this process's). */
/* process: the label of this process ("host", "worker.i"); app: the
 * application its loops serve (its routes' latency). */
void m0__metrics_respond(const m0__page *page, const char *process, const m0_app *app, m0__service *const *services,
                         int nservices, m0_response *res);

#endif
