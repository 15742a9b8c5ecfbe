/* The loop's end: once it is stopping and its last connection closed, it
 * says STOPPED and closes its handles, so that uv_run returns. Runs on the
 * loop's thread. */
#ifndef M0_ACTORS_LOOP_END_H
#define M0_ACTORS_LOOP_END_H

#include "actors/loop_state.h"

/* Stopping: finishes the loop once its connections are closed and no
 * hand-off is on its way to it (a sibling chose it just before it was
 * leaving; finished, it would close that connection unanswered). One that
 * never comes (its sender died between the count and the send) holds it
 * only until the drain's fresh grace has passed. */
void m0__loop_maybe_finish(m0__loop *l);

#endif
