#include "service/callers.h"

#include <string.h>

#include "base/ids.h"

void m0__callers_init(m0__callers *cs, m0__tracer *trace) {
  memset(cs, 0, sizeof *cs);
  pthread_mutex_init(&cs->mu, NULL);
  for (int i = 0; i < M0__CALLERS; i++) {
    m0__caller *c = &cs->c[i];
    c->self.id = M0__ACTOR_ID(M0__ROLE_CALLER, i);
    c->self.trace = trace;
    c->self.inbox = &c->inbox;
    c->self.recv_fd = -1;
  }
}

void m0__callers_fini(m0__callers *cs) {
  for (int i = 0; i < M0__CALLERS; i++)
    if (cs->c[i].made) m0__inbox_fini(&cs->c[i].inbox);
  pthread_mutex_destroy(&cs->mu);
}

m0__inbox *m0__callers_inbox(m0__callers *cs, uint32_t id) {
  if (!cs || !id) return NULL;
  /* Its inbox was made before the call went, and is never unmade while the
   * host runs. */
  if (M0__ACTOR_ROLE(id) != M0__ROLE_CALLER) {
    for (int i = 0; i < M0__CALLERS; i++)
      if (atomic_load(&cs->c[i].as) == id && atomic_load(&cs->c[i].call)) return &cs->c[i].inbox;
    return NULL;
  }
  int i = M0__ACTOR_INDEX(id);
  return i < M0__CALLERS && atomic_load(&cs->c[i].call) ? &cs->c[i].inbox : NULL;
}

m0__caller *m0__caller_take(m0__callers *cs, uint32_t as) {
  m0__caller *c = NULL;
  pthread_mutex_lock(&cs->mu);
  for (int i = 0; i < M0__CALLERS && !c; i++) {
    m0__caller *t = &cs->c[i];
    if (t->busy || (!t->made && m0__inbox_init(&t->inbox) != 0)) continue;
    t->made = t->busy = true;
    c = t;
  }
  pthread_mutex_unlock(&cs->mu);
  if (c) {
    c->self.id = as ? as : M0__ACTOR_ID(M0__ROLE_CALLER, (int)(c - cs->c));
    atomic_store(&c->as, as);
  }
  return c;
}

void m0__caller_give(m0__callers *cs, m0__caller *c) {
  atomic_store(&c->call, 0);
  atomic_store(&c->as, 0);
  for (nng_msg *m; (m = m0__inbox_take(&c->inbox));) {
    atomic_fetch_add(&cs->dropped, 1);
    nng_msg_free(m);
  }
  pthread_mutex_lock(&cs->mu);
  c->busy = false;
  pthread_mutex_unlock(&cs->mu);
}
