/* The pool lane, the loop's side: requests the loop will not answer itself
 * go into one batch per pool thread, leave as one JOB per pool thread per
 * loop pass, and come back as one RESULT of whole responses (actors/pool.h
 * for why the lane batches, and for the pool thread's side).
 *
 * Design notes
 * - At most one batch is in flight per pool thread: a batch is sent only
 *   when its thread has answered the last one, so a slow thread collects a
 *   bigger next batch instead of a queue of messages.
 * - A request goes to the thread with no batch in flight first, then the one
 *   with the fewest waiting: a busy thread is not handed more while another
 *   idles.
 * - The flush runs in the pass's uv_check, after every read of the pass, so
 *   every request the pass parsed rides in the same JOB.
 * - A JOB that cannot be sent stays the loop's and is tried again next pass:
 *   nothing is dropped.
 * Everything here runs on the loop's own thread.
 */
#ifndef M0_ACTORS_LANE_H
#define M0_ACTORS_LANE_H

#include "actors/loop_state.h"

/* The pool threads' peers (their direct inboxes) and the batches. 0 or
 * M0__ENOMEM; on an error, m0__lane_close still cleans up. */
int m0__lane_open(m0__loop *l);
void m0__lane_close(m0__loop *l);
/* The loop's ops->defer (actors/loop_http.c; asked only when the loop has
 * a pool): a request into the batch of the pool thread with the least
 * waiting, preferring one with no batch in flight. 0, or M0__ENOMEM. */
int m0__lane_defer(m0__http *h, m0__conn *c, const m0_request *req, int route, const m0_response *res);
/* Sends each filled batch whose thread has none in flight; publishes the
 * loop's queued count. Once per loop pass. */
void m0__lane_flush(m0__loop *l);
/* A RESULT from pool thread j: its answers into their connections. */
void m0__lane_on_result(m0__loop *l, const m0__msg *m);

#endif
