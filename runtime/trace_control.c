/* A TRACE message at a loop or the prefork supervisor (runtime/trace.h,
 * m0__trace_on_control): here, not in trace.c, because reading a message
 * needs the actor's side (runtime/actor.h), which itself calls the tracer. */
#include <stdio.h>

#include "runtime/actor.h"
#include "runtime/admit.h"
#include "runtime/trace.h"

void m0__trace_on_control(m0__tracer *t, uint32_t self, const m0__msg *m) {
  char why[256], peer[96], me[48];
  if (t && m0__tracer_control(t, m->payload, m->len, why, sizeof why) == 0) return;
  if (!t) snprintf(why, sizeof why, "this process has no tracer");
  m0__msg_peer(m, peer, sizeof peer);
  m0__actor_name(self, me, sizeof me);
  m0__refused(self, M0__REFUSE_CONTROL, M0__K_TRACE, peer);
  fprintf(stderr, "m0: %s: trace control from %s refused: %s\n", me, peer, why);
}
