/* Accept sharing: the loop's listener, its accept4 batch, and the hand-off
 * of an accepted connection to the least-loaded sibling loop.
 *
 * Design notes
 * - Accept: the listener is a uv_poll on the (shared or dup'd) listening
 *   descriptor and the loop calls accept4 itself, so an accepted socket is a
 *   plain descriptor it may keep or hand to a sibling. Past max-connections
 *   the loop stops polling the listener: new connections wait in the backlog.
 *   The plain listener beside HTTPS (--plain-port), when there is one, is
 *   polled, stopped and closed with it; its connections are adopted by the
 *   loop that accepted them, never handed on (m0__http_adopt's plain).
 * - Accept sharing: the winner of an accept hands the connection to the
 *   least-loaded sibling (open + pending on the shared page; ties stay; a
 *   rotating start; a sibling leaving or stuck in one pass > 2 ms is skipped).
 *   Within one process the descriptor is an integer in a HANDOFF message;
 *   across processes it travels by SCM_RIGHTS (transport/handoff.h). On any
 *   failure the acceptor keeps the connection: nothing is dropped.
 * - The pass mark (pass_start_ms on the loop's page line) is what "stuck"
 *   is judged by: set by a pass's first read (http/conn.h, busy_since) or
 *   after its I/O (m0__accept_pass_begin), cleared before the loop waits.
 * Everything here runs on the loop's own thread; what siblings see of it is
 * the page line's atomics.
 */
#ifndef M0_ACTORS_ACCEPT_H
#define M0_ACTORS_ACCEPT_H

#include <stdbool.h>
#include <uv.h>

#include "actors/loop_state.h"

/* Polls the listener (on) or leaves new connections in the backlog. A no-op
 * before GO, after STOP, and (on) while recycling. */
void m0__accept_poll(m0__loop *l, bool on);
/* A HANDOFF message from a sibling in this process: the descriptor is ours. */
void m0__accept_on_handoff(m0__loop *l, const m0__msg *m);
/* Prefork: the hand-in socket is readable (p->data is the loop). A libuv
 * callback, so it takes the handle. */
void m0__accept_on_handin(uv_poll_t *p, int status, int events);
/* From the pass's uv_check: marks the pass unless a read already did. */
void m0__accept_pass_begin(m0__loop *l);
/* The uv_prepare before the loop waits: clears the mark (p->data is the
 * loop). A libuv callback, so it takes the handle. */
void m0__accept_on_pass_end(uv_prepare_t *p);
/* Threads mode: the siblings' mailboxes (no-wait peers). 0 or an m0__err;
 * on an error, m0__accept_close still cleans up. */
int m0__accept_open(m0__loop *l);
void m0__accept_close(m0__loop *l);

#endif
