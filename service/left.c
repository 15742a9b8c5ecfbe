/* An instance leaves its slot, and the loops are told at once.
 *
 * Design notes
 * - The slot first: not live, then a new generation (a loop that reads the
 *   new generation also sees the slot gone), its count in flight from 0 (a
 *   loop gives nothing back to a slot of another generation).
 * - Then the news: an empty REPLY from the slot (a batch of no records) into
 *   each loop's direct inbox, which wakes the loop as any REPLY does. A loop
 *   that takes a REPLY from a slot whose generation moved on answers 502 what
 *   it gave the older one (actors/asks.c, asks_left), so a dead instance's
 *   requests are answered when the host learns of the death, not at the
 *   deadline tick (a quarter of the shortest route timeout), which still
 *   sweeps for a loop that was not told (out of memory). Nothing on the
 *   request path is added: the loops read the slot's atomics as before.
 * - Not in the supervisor under --workers (it has no loops): its relay
 *   closes the dead instance's legs, and each worker's door learns it from
 *   its own pipe events, and tells its own loops.
 */
#include "service/service.h"

#include <stdio.h>

#include "runtime/edges.h"
#include "service/wire.h"

void m0__service_slot_left(m0__service *s, int k) {
  m0__slot *sl = &s->slots[k];
  atomic_store_explicit(&sl->live, 0, memory_order_release);
  atomic_fetch_add_explicit(&sl->gen, 1, memory_order_release);
  atomic_store(&sl->inflight, 0);
}

static void left_tell_loops(m0__service *s, int k);

void m0__service_tell_left(m0__service *s, int k) {
  m0__service_noted(s, k, M0_MSG_DOWN,
                    s->connected ? "\"event\":\"down\",\"reason\":\"its connection closed\""
                                 : "\"event\":\"down\",\"reason\":\"its thread ended\"");
  left_tell_loops(s, k);
}

static void left_tell_loops(m0__service *s, int k) {
  uint32_t from = m0__service_slot_id(s, k);
  for (int i = 0; !s->relay && i < s->nloops; i++) {
    nng_msg *m;
    if (m0__wire_batch_new(&m, 0) != 0) return;
    m0__env e = {.kind = M0__K_REPLY, .from = from, .to = M0__ACTOR_ID(M0__ROLE_LOOP, s->loop_base + i)};
    m0__env_write(nng_msg_body(m), &e, M0__WIRE_BATCH_HEAD);
    if (m0__inbox_put(s->loop_inbox[i], m) != 0) nng_msg_free(m);
    else m0__edge_sent(from, e.to, M0__K_REPLY); /* taken as any REPLY: runtime/edges.h */
  }
}

void m0__service_slot_ended(m0__service *s, int k, const char *why) {
  m0__service_slot_left(s, k);
  if (!why) {
    m0__service_tell_left(s, k);
    return;
  }
  char note[320]; /* why is m0_actor_exit's, made safe in JSON there (service/instance.c) */
  snprintf(note, sizeof note, "\"event\":\"down\",\"reason\":\"%s\"", why);
  m0__service_noted(s, k, M0_MSG_DOWN, note);
  left_tell_loops(s, k);
}
