/* Prometheus text for --metrics-path: every loop's line of the shared page
 * (so any loop answers for the whole topology), the bus's refusals, the
 * supervisor's respawns, and nng's own statistics for this process. Answered
 * on the loop, never queued to a pool. */
#ifndef M0_HOST_METRICS_H
#define M0_HOST_METRICS_H

#include "http/response.h"
#include "transport/page.h"

void m0__metrics_respond(const m0__page *page, m0_response *res);

#endif
