#include "host/observed.h"

#include <string.h>

#include "base/clock.h"
#include "base/errors.h"
#include "base/ids.h"
#include "config/appspec.h"
#include "runtime/edges.h"
#include "service/service.h"

_Static_assert(M0__PAGE_SLOTS == M0__SLOTS, "a page's pids line is a service's slots");

bool m0__observed_nats(const m0__loop *l, const m0__service *s) {
  const m0__app_decl *d = l->host;
  return d && s->index >= 0 && s->index < d->nactors && d->actors[s->index].placement == M0__PLACE_NATS;
}

/* This worker's block of the page: its bank's, its loop's. */
static m0__page_instances *observed_block(const m0__loop *l, int loop) {
  return &l->page->instances[(size_t)l->page->bank * l->page->head->loops + (size_t)loop];
}

/* The thread instances of this worker, each a line (transport/page.h). */
static void observed_write(m0__loop *l) {
  m0__page_instances *b = observed_block(l, l->index);
  uint64_t n = 0;
  /* odd: being written. Set, not added to: a worker that died between the
   * two stores left it odd, and its respawn's add would make it even
   * while it writes (readers would take torn lines, then none). */
  uint64_t seq = atomic_load_explicit(&b->seq, memory_order_relaxed) | 1;
  atomic_store_explicit(&b->seq, seq, memory_order_relaxed);
  atomic_thread_fence(memory_order_release); /* before any line below */
  for (int si = 0; si < l->nservices && si < 256; si++) {
    m0__service *s = l->services[si];
    for (int k = 0; !s->connected && k < s->nslots && n < M0__PAGE_INSTANCE_LINES; k++) {
      if (!atomic_load(&s->slots[k].live)) continue;
      int in = atomic_load(&s->slots[k].inflight);
      atomic_store_explicit(&b->line[n++], (uint64_t)si << 56 | (uint64_t)k << 48 | (uint64_t)(in > 0 ? in : 0),
                            memory_order_relaxed);
    }
  }
  atomic_store_explicit(&b->n, n, memory_order_relaxed);
  atomic_store_explicit(&b->seq, seq + 1, memory_order_release);
}

void m0__observer_swept(m0__loop *l) {
  m0__edges_roll((uint64_t)m0__now_ms());
  if (l->topo->mode == M0__MODE_PREFORK && l->page->instances && l->index < (int)l->page->head->loops)
    observed_write(l);
}

/* Worker w's lines, read whole (the sequence even and the same before and
 * after): how many, or 0 when its loop kept writing (seen next time). */
static int observed_read(const m0__page_instances *b, uint64_t *out) {
  for (int tries = 0; tries < 4; tries++) {
    uint64_t seq = atomic_load_explicit(&b->seq, memory_order_acquire);
    if (seq & 1) continue;
    uint64_t n = atomic_load_explicit(&b->n, memory_order_relaxed);
    if (n > M0__PAGE_INSTANCE_LINES) n = M0__PAGE_INSTANCE_LINES;
    for (uint64_t i = 0; i < n; i++) out[i] = atomic_load_explicit(&b->line[i], memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&b->seq, memory_order_relaxed) == seq) return (int)n;
  }
  return 0;
}

void m0__observed_instances_each(const m0__loop *l, void (*cb)(void *arg, const m0__observed_instance *i), void *arg) {
  if (l->topo->mode != M0__MODE_PREFORK || !l->page->instances) return;
  uint64_t lines[M0__PAGE_INSTANCE_LINES];
  for (int w = 0; w < (int)l->page->head->loops; w++) {
    if (w == l->index) continue; /* its own: live, from its slots */
    int n = observed_read(observed_block(l, w), lines);
    for (int i = 0; i < n; i++) {
      m0__observed_instance in = {.worker = w, .service = (int)(lines[i] >> 56), .slot = (int)(lines[i] >> 48 & 0xff),
                                  .in_flight = (int)(lines[i] & 0xffffffffffffull)};
      if (in.service < l->nservices && in.slot < l->services[in.service]->nslots) cb(arg, &in);
    }
  }
}

/* ---- the supervision tree ---- */

static const char *observed_strategy(m0__sup_strategy s) {
  return s == M0__SUP_ONE_FOR_ALL ? "one_for_all" : s == M0__SUP_REST_FOR_ONE ? "rest_for_one" : "one_for_one";
}

static m0__service *observed_service(const m0__loop *l, const char *name) {
  for (int i = 0; i < l->nservices; i++)
    if (!strcmp(l->services[i]->name, name)) return l->services[i];
  return NULL;
}

/* Actor a in the tree, as the doctor's (host/suptree.c: its placement,
 * instances declared), with its live instances by name (this process's:
 * under --workers a thread actor's are each worker's) and how many times
 * its instances were started again (the whole host's, on the page). */
static json_t *observed_actor(const m0__loop *l, const m0__actor_spec *a, json_int_t *restarts) {
  m0__service *s = observed_service(l, a->name);
  json_t *insts = json_array();
  json_int_t r = s ? (json_int_t)atomic_load(s->restarts) : 0;
  char inst[64];
  for (int k = 0; s && k < s->nslots; k++)
    if (atomic_load(&s->slots[k].live)) {
      m0__actor_name(m0__service_slot_id(s, k), inst, sizeof inst);
      json_array_append_new(insts, json_string(inst));
    }
  if (restarts) *restarts += r;
  return json_pack("{s:s, s:s, s:i, s:o, s:I}", "actor", a->name, "placement", m0__placement_name(a->placement),
                   "instances", a->instances, "live", insts, "restarts", r);
}

/* Supervisor `name`'s index in d, or M0__ENOTFOUND. */
static int observed_sup_index(const m0__app_decl *d, const char *name) {
  for (int s = 0; s < d->nsups; s++)
    if (!strcmp(d->sups[s].name, name)) return s;
  return M0__ENOTFOUND;
}

/* Supervisor si and what is under it (its child supervisors nested, at
 * most M0__SUP_DEPTH_MAX deep, as the file's checks hold them); restarts
 * adds what its instances were started again. A child one's on_fail is
 * "parent" (it fails to its parent), as the doctor says. */
static json_t *observed_sup(const m0__loop *l, const m0__app_decl *d, int si, int depth, json_int_t *restarts) {
  const m0__sup_spec *sp = &d->sups[si];
  json_t *kids = json_array();
  json_int_t mine = 0;
  for (int c = 0; c < sp->nchildren; c++) {
    int sub = observed_sup_index(d, sp->children[c]);
    int a = sub < 0 ? m0__app_decl_find(d, sp->children[c], strlen(sp->children[c])) : M0__ENOTFOUND;
    if (sub >= 0 && depth < M0__SUP_DEPTH_MAX) json_array_append_new(kids, observed_sup(l, d, sub, depth + 1, &mine));
    else if (a >= 0) json_array_append_new(kids, observed_actor(l, &d->actors[a], &mine));
  }
  *restarts += mine;
  return json_pack("{s:s, s:s, s:i, s:I, s:s, s:I, s:o}", "supervisor", sp->name, "strategy",
                   observed_strategy(sp->strategy), "intensity", sp->intensity, "period_ms", (json_int_t)sp->period_ms,
                   "on_fail", depth ? "parent" : sp->serve_on ? "serve_on" : "exit", "restarted", mine, "children",
                   kids);
}

/* Whether `name` (an actor or a supervisor) is a child of one of d's
 * supervisors. */
static bool observed_supervised(const m0__app_decl *d, const char *name) {
  for (int s = 0; s < d->nsups; s++)
    for (int c = 0; c < d->sups[s].nchildren; c++)
      if (!strcmp(d->sups[s].children[c], name)) return true;
  return false;
}

json_t *m0__observed_supervision(const m0__loop *l, pid_t top_pid) {
  const m0__app_decl *d = l->host;
  json_t *kids = json_array();
  json_int_t all = 0;
  for (int s = 0; d && s < d->nsups; s++)
    if (!observed_supervised(d, d->sups[s].name)) json_array_append_new(kids, observed_sup(l, d, s, 0, &all));
  for (int a = 0; d && a < d->nactors; a++) {
    const m0__actor_spec *sp = &d->actors[a];
    bool restartable = sp->placement == M0__PLACE_PROCESS || sp->placement == M0__PLACE_THREAD;
    if (!restartable || observed_supervised(d, sp->name)) continue;
    json_t *n = observed_actor(l, sp, NULL); /* restarted alone, by its own budget */
    json_object_set_new(n, "restart", json_pack("{s:i, s:I}", "intensity", sp->restart_intensity, "period_ms",
                                                (json_int_t)sp->restart_period_ms));
    json_array_append_new(kids, n);
  }
  json_t *root = json_pack("{s:s, s:o}", "name", l->topo->mode == M0__MODE_PREFORK ? "supervisor" : "host",
                           "children", kids);
  if (top_pid > 0) json_object_set_new(root, "pid", json_integer(top_pid));
  return root;
}
