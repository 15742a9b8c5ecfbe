/* The slots of an actor as its senders see them: which instance a request
 * or message goes to (the live one with the fewest in flight), how much may
 * wait with it, and where an answer goes back (service/service.h says
 * each). Read without a lock by the loops and callers, but for a connected
 * instance's MESSAGE window, under the service's mu. */
#include <time.h>

#include "service/callers.h"
#include "service/service.h"

uint32_t m0__service_slot_id(const m0__service *s, int k) {
  return M0__ACTOR_ID(M0__ROLE_APP, M0__APP_INDEX(s->index, k));
}

m0__inbox *m0__service_reply_inbox(const m0__service *s, uint32_t to) {
  int idx = M0__ACTOR_INDEX(to);
  if (M0__ACTOR_ROLE(to) == M0__ROLE_LOOP) {
    int loop = idx - s->loop_base;
    return loop >= 0 && loop < s->nloops ? s->loop_inbox[loop] : NULL;
  }
  return M0__ACTOR_ROLE(to) == M0__ROLE_CALLER || M0__ACTOR_ROLE(to) == M0__ROLE_APP
             ? m0__callers_inbox(s->callers, to)
             : NULL;
}

bool m0__service_window_take(m0__service *s, int k, uint32_t gen, int64_t deadline, int64_t until) {
  m0__slot *sl = &s->slots[k];
  bool taken = false;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    if (atomic_load(&sl->gen) != gen || !atomic_load(&sl->live)) break;
    int64_t now = m0__now_ms();
    if (sl->messages >= M0__MESSAGE_WINDOW && now >= sl->message_until) sl->messages = 0; /* not waited for any more */
    if (sl->messages < M0__MESSAGE_WINDOW) {
      sl->messages++;
      sl->message_until = until;
      taken = true;
      break;
    }
    int64_t left = deadline - now;
    if (left <= 0) break;
    struct timespec ts = m0__timespec_in(left);
    pthread_cond_timedwait(&s->room, &s->mu, &ts);
  }
  pthread_mutex_unlock(&s->mu);
  return taken;
}

void m0__service_window_give(m0__service *s, int k) {
  pthread_mutex_lock(&s->mu);
  if (s->slots[k].messages > 0) s->slots[k].messages--;
  pthread_cond_broadcast(&s->room);
  pthread_mutex_unlock(&s->mu);
}

int m0__service_live(m0__service *s) {
  int n = 0;
  for (int k = 0; k < s->nslots; k++) n += atomic_load_explicit(&s->slots[k].live, memory_order_relaxed) != 0;
  return n;
}

int m0__service_pick(m0__service *s, bool *full, uint32_t *gen) {
  int best = -1, least = 0;
  uint32_t best_gen = 0;
  bool any = false;
  int used = atomic_load_explicit(&s->used, memory_order_acquire);
  for (int k = 0; k < used; k++) {
    m0__slot *sl = &s->slots[k];
    uint32_t g = atomic_load_explicit(&sl->gen, memory_order_acquire); /* before live: see the header */
    if (!atomic_load_explicit(&sl->live, memory_order_acquire)) continue;
    any = true;
    int n = atomic_load_explicit(&sl->inflight, memory_order_relaxed);
    if (n >= s->queue) continue;
    if (best < 0 || n < least) best = k, least = n, best_gen = g;
  }
  *full = best < 0 && any;
  *gen = best_gen;
  return best;
}
