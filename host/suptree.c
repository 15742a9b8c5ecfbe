/* The supervision tree (docs/topology.md, Supervisors): what the end of a
 * child (a spawned process, or a thread instance that ended by itself)
 * does.
 *
 * Design notes
 * - A child in no supervisor has its actor's own budget (`restart`).
 * - One restart is one death, whatever the strategy takes down with it
 *   (Erlang's count). A supervisor within its budget applies its strategy
 *   to the unit that failed: an actor (the instance that ended; with
 *   one_for_all every instance of its siblings, rest_for_one those of the
 *   children after it) or a child supervisor (all of its subtree).
 * - Past its budget a supervisor fails to its parent, which counts that as
 *   one restart of the child supervisor and restarts its whole subtree
 *   (with fresh budgets) and what its own strategy takes with it; only
 *   the top's on_fail applies: exit (the host stops, exit 1, the line
 *   naming the top and the chain of reasons) or serve_on (its subtree
 *   stays down).
 * - A process taken down is asked by SIGTERM and waited for SUP_STOP_MS,
 *   then killed, all under the lock (a drain that begins meanwhile waits
 *   that long at most). A thread instance taken down is sent its STOP
 *   (taken_down set): it ends after the message in hand and comes back
 *   through children.c's gate, which makes it again without counting it.
 * - Everything restarted starts in the tree's order, depth first
 *   (rest_for_one: a later child may depend on an earlier one); a thread
 *   instance starts when its STOP reaches it.
 * - The tree has no cycle and at most M0__SUP_DEPTH_MAX levels (the
 *   file's check); the walks up it are bounded by that anyway.
 */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/errors.h"
#include "host/children_in.h"
#include "runtime/envelope.h"
#include "runtime/kinds.h"

#define SUP_STOP_MS 5000
#define SUP_CHAIN_MAX 600

/* What a supervisor's strategy takes down with a failed unit: the child
 * c that ended, the unit (the place among s's children) it is part of;
 * whole: the unit is a child supervisor, all of it; all: every child. */
typedef struct sup_scope {
  int s, unit;
  bool whole, all;
  const child *c;
} sup_scope;

static const char *sup_strategy_name(m0__sup_strategy s) {
  return s == M0__SUP_ONE_FOR_ALL ? "one_for_all" : s == M0__SUP_REST_FOR_ONE ? "rest_for_one" : "one_for_one";
}

/* Whether one more restart fits: fewer than intensity within period_ms.
 * Counts the restart when it does. */
static bool budget_allows(budget *r, int intensity, long period_ms) {
  int64_t now = m0__now_ms();
  if (intensity <= 0) return false;
  if (r->n == intensity && now - r->at[r->next] < period_ms) return false;
  r->at[r->next] = now;
  r->next = (r->next + 1) % intensity;
  if (r->n < intensity) r->n++;
  return true;
}

static void ending_str(const m0__ending *e, char *out, size_t n) {
  if (e->why) snprintf(out, n, "%s", e->why);
  else
    snprintf(out, n, "%s %d", WIFSIGNALED(e->status) ? "signal" : "status",
             WIFSIGNALED(e->status) ? WTERMSIG(e->status) : WEXITSTATUS(e->status));
}

void m0__suptree_noted(m0__children *ch, const child *c, const m0__ending *e, bool again) {
  char what[320], how[M0__EXIT_WHY_MAX + 16];
  ending_str(e, how, sizeof how);
  if (c->inst)
    snprintf(what, sizeof what, "\"event\":\"exited\",\"spawned\":%d,\"reason\":\"%s\",\"restarted\":%s",
             c->instance, how, again ? "true" : "false");
  else
    snprintf(what, sizeof what, "\"event\":\"exited\",\"spawned\":%d,\"pid\":%d,\"status\":\"%s\",\"restarted\":%s",
             c->instance, (int)e->pid, how, again ? "true" : "false");
  m0__service_noted(&ch->svcs[c->actor], -1, M0_MSG_EXITED, what);
}

/* The place, among s's children, of the one that leads down to place r
 * of supervisor x; -1 when s is not above (or at) x. */
static int tree_rank_at(const m0__children *ch, int s, int x, int r) {
  for (int d = 0; x >= 0 && d <= M0__SUP_DEPTH_MAX; d++) {
    if (x == s) return r;
    r = ch->sup_rank[x];
    x = ch->sup_parent[x];
  }
  return M0__ENOTFOUND;
}

static bool rank_in_scope(const m0__children *ch, const sup_scope *sc, int r) {
  if (r < 0) return false;
  if (sc->all || (sc->whole && r == sc->unit)) return true;
  m0__sup_strategy st = ch->decl->sups[sc->s].strategy;
  return st == M0__SUP_ONE_FOR_ALL || (st == M0__SUP_REST_FOR_ONE && r > sc->unit);
}

/* Whether k goes down and up with what failed. */
static bool sup_in_scope(const m0__children *ch, const sup_scope *sc, const child *k) {
  return k == sc->c || rank_in_scope(ch, sc, tree_rank_at(ch, sc->s, ch->sup_of[k->actor], ch->rank[k->actor]));
}

/* A thread instance asked to stop by its supervisor: a STOP from its
 * coordinator's id into its inbox, as the drain's (runtime/admit.h). */
static void kid_thread_stop(child *k) {
  m0__instance *in = k->inst;
  nng_msg *m;
  atomic_store(&in->taken_down, true);
  if (nng_msg_alloc(&m, M0__ENV_HEADER) != 0) return;
  m0__env e = {.kind = M0__K_STOP, .from = in->coord_id, .to = m0__service_slot_id(in->svc, in->slot)};
  m0__env_write(nng_msg_body(m), &e, 0);
  if (m0__inbox_put(&in->inbox, m) != 0) nng_msg_free(m);
}

/* Stops what sc takes down but c (already ended): threads are sent their
 * STOP, processes are stopped and reaped, each one's end kept for its note. */
static void sup_stop_kids(m0__children *ch, const sup_scope *sc) {
  int64_t deadline = m0__now_ms() + SUP_STOP_MS;
  for (int i = 0; i < ch->nkids; i++) {
    child *k = &ch->kids[i];
    if (k == sc->c || !sup_in_scope(ch, sc, k)) continue;
    k->ended_pid = 0;
    if (k->inst && !k->given_up) kid_thread_stop(k);
    else if (k->pid > 0) kill(k->pid, SIGTERM);
  }
  for (int i = 0; i < ch->nkids; i++) {
    child *k = &ch->kids[i];
    if (k == sc->c || k->inst || k->pid <= 0 || !sup_in_scope(ch, sc, k)) continue;
    if (!m0__child_wait(k, deadline)) {
      fprintf(stderr, "m0: actor %s: instance %d did not stop within %d ms; killed\n", ch->decl->actors[k->actor].name,
              k->instance, SUP_STOP_MS);
      kill(k->pid, SIGKILL);
    }
    waitpid(k->pid, &k->ended_status, 0);
    if (k->pidfd >= 0) close(k->pidfd);
    k->ended_pid = k->pid;
    k->pidfd = -1;
    k->pid = 0;
  }
}

/* The top supervisor s past its budget: the host stops (exit 1), or, on_fail
 * serve_on, its subtree stays down and its routes answer 503. */
static void sup_failed(m0__children *ch, int s, child *c, const char *chain) {
  const m0__sup_spec *sp = &ch->decl->sups[s];
  c->given_up = true;
  if (!sp->serve_on) {
    /* A worker (it spawns nothing: urls NULL) stops alone, and the prefork
     * supervisor respawns it within its respawn budget: its tree starts
     * again whole, in a fresh worker. */
    fprintf(stderr, "m0: supervisor %s: %d restarts within %ld ms, past its budget of %d; the %s stops (%s)\n",
            sp->name, sp->intensity + 1, sp->period_ms, sp->intensity, ch->urls ? "host" : "worker", chain);
    ch->draining = true; /* nothing is restarted from now on */
    atomic_store(&ch->failed, true);
    uint64_t one = 1;
    if (ch->exits && write(ch->exits->fd, &one, sizeof one) < 0) { /* an eventfd write fails only on overflow */
    }
    return;
  }
  fprintf(stderr,
          "m0: supervisor %s: %d restarts within %ld ms, past its budget of %d; its children stay down (on_fail "
          "serve_on) (%s)\n",
          sp->name, sp->intensity + 1, sp->period_ms, sp->intensity, chain);
  sup_scope sc = {.s = s, .all = true, .c = c};
  sup_stop_kids(ch, &sc);
  for (int i = 0; i < ch->nkids; i++) {
    child *k = &ch->kids[i];
    if (k == c || !sup_in_scope(ch, &sc, k)) continue;
    k->given_up = true; /* a thread one says its note as its STOP reaches it */
    if (k->ended_pid > 0) m0__suptree_noted(ch, k, &(m0__ending){k->ended_pid, k->ended_status, NULL}, false);
  }
}

/* Every supervisor below s in sc's reach starts with a fresh budget. */
static void sup_fresh_budgets(m0__children *ch, const sup_scope *sc) {
  for (int t = 0; t < ch->decl->nsups; t++) {
    if (t == sc->s || !rank_in_scope(ch, sc, tree_rank_at(ch, sc->s, ch->sup_parent[t], ch->sup_rank[t]))) continue;
    ch->sup_budgets[t].n = ch->sup_budgets[t].next = 0;
  }
}

/* k started again (a process spawned; a thread instance, c alone, makes
 * itself again once its gate returns: the others as their STOP comes). */
static void kid_start(m0__children *ch, const sup_scope *sc, child *k, const m0__ending *e) {
  if (k != sc->c)
    fprintf(stderr, "m0: supervisor %s: actor %s instance %d stopped with it (%s); started again\n",
            ch->decl->sups[sc->s].name, ch->decl->actors[k->actor].name, k->instance,
            sup_strategy_name(ch->decl->sups[sc->s].strategy));
  if (k->inst && k != sc->c) return; /* it counts and says its note as its STOP reaches it */
  atomic_fetch_add(ch->svcs[k->actor].restarts, 1);
  if (!k->inst && (!ch->urls || m0__child_spawn(ch, k) != 0)) k->given_up = true;
  if (k == sc->c) m0__suptree_noted(ch, k, e, !k->given_up);
  else if (k->ended_pid > 0) m0__suptree_noted(ch, k, &(m0__ending){k->ended_pid, k->ended_status, NULL}, !k->given_up);
  k->ended_pid = 0;
}

/* sc's strategy applied: what it takes down stopped, then started again in
 * the tree's order. */
static void sup_restart(m0__children *ch, const sup_scope *sc, child *c, const m0__ending *e) {
  sup_stop_kids(ch, sc);
  sup_fresh_budgets(ch, sc);
  for (int m = 0; m < ch->decl->nactors; m++)
    for (int i = 0; i < ch->nkids; i++) {
      child *k = &ch->kids[i];
      if (ch->flat[k->actor] != m || !sup_in_scope(ch, sc, k) || k->given_up || (k != c && k->pid > 0)) continue;
      kid_start(ch, sc, k, e);
    }
}

/* c, a child of a supervisor, ended: the first supervisor up the tree
 * within its budget restarts what its strategy says; past the top's, its
 * on_fail. */
static void sup_child_ended(m0__children *ch, child *c, const m0__ending *e) {
  char chain[SUP_CHAIN_MAX], how[M0__EXIT_WHY_MAX + 16], tmp[SUP_CHAIN_MAX];
  ending_str(e, how, sizeof how);
  snprintf(chain, sizeof chain, "actor %s instance %d ended (%s)", ch->decl->actors[c->actor].name, c->instance, how);
  sup_scope sc = {.s = ch->sup_of[c->actor], .unit = ch->rank[c->actor], .c = c};
  for (int d = 0;; d++) {
    const m0__sup_spec *sp = &ch->decl->sups[sc.s];
    if (budget_allows(&ch->sup_budgets[sc.s], sp->intensity, sp->period_ms)) break;
    int p = ch->sup_parent[sc.s];
    if (p < 0 || d >= M0__SUP_DEPTH_MAX) {
      m0__suptree_noted(ch, c, e, false);
      sup_failed(ch, sc.s, c, chain);
      return;
    }
    fprintf(stderr, "m0: supervisor %s: %d restarts within %ld ms, past its budget of %d; it fails to supervisor %s\n",
            sp->name, sp->intensity + 1, sp->period_ms, sp->intensity, ch->decl->sups[p].name);
    int n = snprintf(tmp, sizeof tmp, "supervisor %s past its budget of %d <- ", sp->name, sp->intensity);
    if (n > 0 && (size_t)n < sizeof tmp) snprintf(tmp + n, sizeof tmp - (size_t)n, "%.*s", (int)(sizeof tmp - (size_t)n - 1), chain);
    memcpy(chain, tmp, sizeof chain);
    sc = (sup_scope){.s = p, .unit = ch->sup_rank[sc.s], .whole = true, .c = c};
  }
  const m0__sup_spec *sp = &ch->decl->sups[sc.s];
  fprintf(stderr, "m0: supervisor %s: %s; %s: started again\n", sp->name, chain, sup_strategy_name(sp->strategy));
  sup_restart(ch, &sc, c, e);
}

void m0__suptree_ended(m0__children *ch, child *c, const m0__ending *e) {
  if (ch->sup_of[c->actor] >= 0) {
    sup_child_ended(ch, c, e);
    return;
  }
  const m0__actor_spec *sp = &ch->decl->actors[c->actor];
  char how[M0__EXIT_WHY_MAX + 16];
  ending_str(e, how, sizeof how);
  if (!budget_allows(&ch->restarts[c->actor], sp->restart_intensity, sp->restart_period_ms)) {
    c->given_up = true;
    fprintf(stderr, "m0: actor %s: instance %d ended (%s) after %d restarts within %ld ms, its budget; it stays down\n",
            sp->name, c->instance, how, sp->restart_intensity, sp->restart_period_ms);
    m0__suptree_noted(ch, c, e, false);
    return;
  }
  atomic_fetch_add(ch->svcs[c->actor].restarts, 1);
  fprintf(stderr, "m0: actor %s: instance %d ended (%s); started again\n", sp->name, c->instance, how);
  if (!c->inst && m0__child_spawn(ch, c) != 0) c->given_up = true;
  m0__suptree_noted(ch, c, e, !c->given_up);
}

/* ---- the tree, read from the declaration ---- */

static int tree_sup_find(const m0__app_decl *d, const char *name) {
  for (int s = 0; s < d->nsups; s++)
    if (!strcmp(d->sups[s].name, name)) return s;
  return M0__ENOTFOUND;
}

/* Numbers the actors under s depth first, from *next on. */
static void tree_flatten(m0__children *ch, int s, int depth, int *next) {
  const m0__app_decl *d = ch->decl;
  for (int m = 0; depth <= M0__SUP_DEPTH_MAX && m < d->sups[s].nchildren; m++) {
    const char *nm = d->sups[s].children[m];
    int a = m0__app_decl_find(d, nm, strlen(nm)), t;
    if (a >= 0 && ch->sup_of[a] == s) ch->flat[a] = (*next)++;
    else if (a < 0 && (t = tree_sup_find(d, nm)) >= 0 && ch->sup_parent[t] == s) tree_flatten(ch, t, depth + 1, next);
  }
}

/* s's children: actors (placed process or thread; the file's check refused
 * others) and supervisors. */
static void tree_children(m0__children *ch, int s) {
  const m0__app_decl *d = ch->decl;
  const m0__sup_spec *sp = &d->sups[s];
  for (int m = 0; m < sp->nchildren; m++) {
    int a = m0__app_decl_find(d, sp->children[m], strlen(sp->children[m])), t;
    if (a >= 0 && d->actors[a].placement != M0__PLACE_EXTERNAL) {
      ch->sup_of[a] = s;
      ch->rank[a] = m;
    } else if (a < 0 && (t = tree_sup_find(d, sp->children[m])) >= 0 && t != s) {
      ch->sup_parent[t] = s;
      ch->sup_rank[t] = m;
    }
  }
}

bool m0__suptree_init(m0__children *ch) {
  const m0__app_decl *d = ch->decl;
  size_t na = (size_t)d->nactors, ns = d->nsups > 0 ? (size_t)d->nsups : 1;
  ch->sup_of = malloc(na * sizeof *ch->sup_of);
  ch->rank = calloc(na, sizeof *ch->rank);
  ch->flat = calloc(na, sizeof *ch->flat);
  ch->sup_parent = malloc(ns * sizeof *ch->sup_parent);
  ch->sup_rank = calloc(ns, sizeof *ch->sup_rank);
  ch->sup_budgets = calloc(ns, sizeof *ch->sup_budgets);
  if (!ch->sup_of || !ch->rank || !ch->flat || !ch->sup_parent || !ch->sup_rank || !ch->sup_budgets) return false;
  for (int a = 0; a < d->nactors; a++) ch->sup_of[a] = -1;
  for (int s = 0; s < d->nsups; s++) ch->sup_parent[s] = -1;
  for (int s = 0; s < d->nsups; s++) {
    const m0__sup_spec *sp = &d->sups[s];
    if (sp->intensity > 0 && !(ch->sup_budgets[s].at = calloc((size_t)sp->intensity, sizeof(int64_t)))) return false;
    tree_children(ch, s);
  }
  int next = 0;
  for (int s = 0; s < d->nsups; s++)
    if (ch->sup_parent[s] < 0) tree_flatten(ch, s, 0, &next);
  for (int a = 0; a < d->nactors; a++)
    if (ch->sup_of[a] < 0) ch->flat[a] = next++;
  return true;
}

void m0__suptree_free(m0__children *ch) {
  for (int s = 0; ch->sup_budgets && s < ch->decl->nsups; s++) free(ch->sup_budgets[s].at);
  free(ch->sup_budgets);
  free(ch->sup_of);
  free(ch->rank);
  free(ch->flat);
  free(ch->sup_parent);
  free(ch->sup_rank);
}

/* ---- the doctor's view: who restarts what, as a tree ---- */

static json_t *doctor_actor(const m0__actor_spec *a) {
  json_t *o = json_pack("{s:s, s:s, s:i}", "actor", a->name, "placement", m0__placement_name(a->placement),
                        "instances", a->instances);
  return o;
}

static json_t *doctor_sup(const m0__app_decl *d, int s, int depth) {
  static const char *const strategies[] = {"one_for_one", "one_for_all", "rest_for_one"};
  const m0__sup_spec *sp = &d->sups[s];
  json_t *kids = json_array();
  for (int m = 0; m < sp->nchildren; m++) {
    int a = m0__app_decl_find(d, sp->children[m], strlen(sp->children[m])), t;
    if (a >= 0) json_array_append_new(kids, doctor_actor(&d->actors[a]));
    else if ((t = tree_sup_find(d, sp->children[m])) >= 0 && depth < M0__SUP_DEPTH_MAX)
      json_array_append_new(kids, doctor_sup(d, t, depth + 1));
  }
  return json_pack("{s:s, s:s, s:i, s:I, s:s, s:o}", "supervisor", sp->name, "strategy", strategies[sp->strategy],
                   "intensity", sp->intensity, "period_ms", (json_int_t)sp->period_ms, "on_fail",
                   depth ? "parent" : sp->serve_on ? "serve_on" : "exit", "children", kids);
}

/* Whether a supervisor names `name` among its children. */
static bool doctor_has_parent(const m0__app_decl *d, const char *name) {
  for (int s = 0; s < d->nsups; s++)
    for (int m = 0; m < d->sups[s].nchildren; m++)
      if (!strcmp(d->sups[s].children[m], name)) return true;
  return false;
}

json_t *m0__suptree_doctor(const m0_app *app, const struct m0_config *cfg) {
  m0__app_decl d;
  char why[512];
  json_t *out = json_array();
  if (m0__app_decl_make(&d, app, cfg, why, sizeof why) != 0) return out;
  for (int s = 0; s < d.nsups; s++)
    if (!doctor_has_parent(&d, d.sups[s].name)) json_array_append_new(out, doctor_sup(&d, s, 0));
  for (int a = 0; a < d.nactors; a++) {
    const m0__actor_spec *sp = &d.actors[a];
    if (doctor_has_parent(&d, sp->name) || (sp->placement != M0__PLACE_THREAD && sp->placement != M0__PLACE_PROCESS))
      continue;
    json_t *o = doctor_actor(sp);
    json_object_set_new(o, "restart", json_pack("{s:i, s:I}", "intensity", sp->restart_intensity, "period_ms",
                                                (json_int_t)sp->restart_period_ms));
    json_array_append_new(out, o);
  }
  m0__app_decl_free(&d);
  return out;
}
