/* The loop's side of routes served by application actors, and of deferred
 * views: every request the loop is waiting on an answer for, by id.
 *
 * Design notes
 * - An ask is one waiting request: its connection, its deadline, its
 *   instance (slot and the slot's generation) or none (a deferred view),
 *   what the access log needs. Its id is the loop's local index, the entry's
 *   generation and its place in the table, so an answer to a request that
 *   is no longer waited for (answered 504 already, or never asked) finds an
 *   entry of another generation and is dropped and counted.
 * - One batch per instance per loop pass, and at most one in flight per
 *   instance from this loop (as the pool lane): the batch is sent in the
 *   pass's uv_check, and the next one only after that instance's REPLY.
 * - The tick (a timer at a quarter of the shortest route timeout, at least
 *   10 ms, running only while something waits) answers 504 past a deadline
 *   and 502 for what was with an instance that left.
 * - Every answer the host gives itself (502, 503, 504) and every reply is
 *   counted per actor (service/service.h) and written to the access log.
 * Everything here runs on the loop's thread except m0_deferred_respond,
 * which only builds a message and puts it in the loop's inbox.
 */
#ifndef M0_ACTORS_ASKS_H
#define M0_ACTORS_ASKS_H

#include "actors/loop_state.h"

/* The table of asks. 0 or M0__ENOMEM. */
int m0__asks_open(m0__loop *l);
/* Closes the tick (the loop is ending: the drain saw to it that nothing waits). */
void m0__asks_close(m0__loop *l);
/* Frees what is left, after the loop's thread is joined. */
void m0__asks_free(m0__loop *l);
/* Sends each instance's filled batch if none of this loop's is with it. */
void m0__asks_flush(m0__loop *l);
/* A REPLY from an instance or an ANSWER from a deferred view. Its message
 * may be kept (m->nmsg set NULL) as the block of a batch to come. */
void m0__asks_on_answer(m0__loop *l, m0__msg *m);
/* The loop's ops->to_actor and ops->defer_view (actors/loop_http.c,
 * http/conn.h says what each returns). */
int m0__asks_to_actor(m0__http *h, m0__conn *c, const m0_request *req, const m0_route *route, m0_response *res);
m0_deferred *m0__asks_defer_view(m0__http *h, m0__conn *c, m0_response *res, unsigned timeout_ms);

#endif
