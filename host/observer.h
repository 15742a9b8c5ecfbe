/* The observer's graph (m0_respond_graph): the host's actors as a graph,
 * answered on a loop as JSON (or streamed, once a second: http/stream.h),
 * and drawn by the dashboard's page; and an actor's recent trace records.
 *
 *   {"t": unix ms, "mode", "machine": hostname, "process": who answered,
 *    "nodes": [{"name", "role", "process", "thread", "url", ...figures}],
 *    "edges": [{"from", "to", "kinds": ["job", "stop"], "messages", "rate"}],
 *    "supervision": the tree of who starts whom again (host/observed.h)}
 *
 * Nodes: every actor of the topology (the doctor's `topology.actors`), each
 * application actor (its socket, by name) and each of its instances live
 * now ("echo.0"). Edges: who sends which kinds to whom, by the rules of
 * ARCHITECTURE.md's table of message kinds, for this topology — every
 * message a trace shows is on one of them (test_observer checks it against
 * m0trace); and the edges between two instances that carried messages (an
 * instance's asks, m0_ask: no rule says whom it asks), as seen, with the
 * kinds counted on them. Figures: a loop's from the shared page (every
 * process's); an actor's refusals, and what waits for it on each edge
 * (sent, not yet taken: runtime/edges.h) and each edge's rate, from the
 * page; an application actor's instances and in flight are this
 * process's, and under --workers every other worker's thread instances as
 * its loop last wrote them on the page (host/observed.h).
 *
 * Design notes
 * - The process and thread of each actor follow from the mode: single and
 *   threads, one process ("host"); prefork, the supervisor (coordinator,
 *   producer) and worker i (worker.i, loop.i, its pool threads). Every loop,
 *   pool thread, producer and thread instance is a thread of its own; the
 *   coordinator is the process's main thread.
 * - Built with jansson on the loop that answers: a few hundred
 *   microseconds for a large topology, asked once a second by a page. */
#ifndef M0_HOST_OBSERVER_H
#define M0_HOST_OBSERVER_H

#include "actors/loop.h"

/* l's host's graph as JSON (malloc'd, or NULL); process is this
 * process's label. */
char *m0__observer_graph(const m0__loop *l, const char *process);
/* The recent trace records (runtime/recent.h) of the actor named `actor`
 * (from or to it; an application actor's: of any of its instances), the
 * last M0__OBSERVER_RECORDS, oldest first, as JSON (malloc'd, or NULL):
 *   {"actor": name, "records": [m0trace's record objects]} */
#define M0__OBSERVER_RECORDS 40
char *m0__observer_records(const char *actor);

#endif
