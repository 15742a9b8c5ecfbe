#include "host/appactors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "host/children.h"
#include "service/nats.h"
#include "service/relay.h"
#include "transport/topology.h"

/* Actor s's counts on the page: the row its name keys (transport/page.h), not
 * its place in this generation's list, which a reload may change. Without a
 * row (every one taken) it counts in its own and /metrics shows none. */
static void app_actors_rows(m0__service *s, m0__process *pr) {
  if (pr->page.names && s->index < M0__PAGE_APP_ACTORS) /* m0trace's names (transport/page.h) */
    snprintf(pr->page.names->actors[s->index], M0__PAGE_NAME_MAX, "%s", s->name);
  if (!pr->page.rows || (s->row = m0__page_actor_row(&pr->page, s->name, true)) < 0) return;
  s->restarts = &pr->page.restarts[s->row]; /* the host's count, whoever spawns */
  s->st = &pr->page.actors[s->row];         /* and its requests, whoever asks */
  if (pr->page.observed) s->pids = pr->page.observed->pids[s->row]; /* its instances' pids, whoever spawns */
}

/* What actor i's instances must prove at url (runtime/proof.h), set on its
 * service before it listens: nothing (ipc, tls+tcp, a trusted network),
 * its key file's secret, or a fresh one for the instances spawned here. 0
 * or M0__ECONFIG (said on stderr; the doctor's links check says it first). */
static int app_actors_proof(m0__app_actors *a, int i, const m0__actor_spec *sp, const char *url) {
  bool plain = m0__url_kind_of(url) == M0__URL_TCP;
  if (!sp->secret_file[0] && (!plain || sp->trusted_network)) return 0;
  if (!a->secrets && !(a->secrets = calloc((size_t)a->n, sizeof *a->secrets))) return M0__ENOMEM;
  m0__secret *sec = &a->secrets[i];
  char why[900], fix[900];
  if (sp->secret_file[0]) {
    if (m0__secret_read_file(sp->secret_file, sec, why, sizeof why, fix, sizeof fix) != 0) {
      fprintf(stderr, "m0: actor %s: secret: %s (%s)\n", sp->name, why, fix);
      return M0__ECONFIG;
    }
  } else if (sp->placement != M0__PLACE_PROCESS || m0__secret_make(sec) != 0) {
    fprintf(stderr, "m0: actor %s: its instances dial plain tcp at %s, and nothing proves who they are (give it "
                    "\"secret\", use %s, or set \"trusted_network\": true)\n", sp->name, url,
            m0__url_prefix(M0__URL_TLS_TCP));
    return M0__ECONFIG;
  }
  a->svcs[i].secret = sec;
  return 0;
}

/* Actor sp's connected instances at its one stable URL (docs/actors.md):
 * an external actor's default one is in the run directory, not in this
 * generation's <run-dir>/gN; a URL the file fixes is that URL. A process
 * actor's default one is this generation's own (its instances are). */
static int app_actors_url(char *out, size_t n, const m0__actor_spec *sp, const m0__process *pr) {
  bool stable = sp->placement == M0__PLACE_EXTERNAL || sp->url[0];
  return m0__topology_app_url(out, n, sp->url, stable ? pr->rundir.path : pr->sockdir, sp->name);
}

/* Listens at url: at once in the first generation, else once the previous
 * generation has released a stable URL (service/service.h); asks wait for
 * the instances moving over meanwhile. */
static int app_actors_listen(m0__service *s, const m0__actor_spec *sp, const char *url, m0__process *pr,
                             m0_publisher *pub) {
  bool stable = sp->placement == M0__PLACE_EXTERNAL || sp->url[0];
  s->stable = stable;
  if (pr->reload.generation > 1 && stable) return m0__service_listen_later(s, url, pr->trace, pub);
  return m0__service_listen(s, url, pr->trace, pub);
}

/* What every thread-placed instance is opened with. */
typedef struct app_open_ctx {
  uint32_t coord_id;
  const char *coord_url;
  m0_publisher *pub;
  m0__handle **handles;
  int *nhandles;
} app_open_ctx;

int m0__app_actors_handles(const m0__app_decl *decl) {
  int n = 0;
  for (int i = 0; i < decl->nactors; i++)
    if (decl->actors[i].placement == M0__PLACE_THREAD) n += decl->actors[i].instances;
  return n;
}

/* Under --workers, actor sp's door in worker `first`: its instances are
 * the supervisor's, reached through the relay's legs (service/relay.h). */
static int app_actors_door(m0__service *s, const m0__actor_spec *sp, char *url, size_t n, m0__process *pr, int first,
                           m0_publisher *pub) {
  s->door = true;
  if (m0__topology_door_url(url, n, pr->sockdir, sp->name, first) != 0) {
    fprintf(stderr, "m0: actor %s: its door's URL is too long\n", sp->name);
    return M0__ETOOBIG;
  }
  int rv = m0__service_listen(s, url, pr->trace, pub);
  if (rv != 0) return rv;
  /* Its instances reach it once the supervisor has bound their URL
   * after the previous generation's drain: asks wait for them. */
  if (pr->reload.generation > 1) atomic_store(&s->expect_until, m0__now_ms() + 5 * M0__REJOIN_MS);
  return 0;
}

/* Actor i placed on threads: its instances, each a handle of this
 * process with a mailbox in the host's inproc namespace. */
static int app_actors_instances(m0__app_actors *a, int i, const m0__app_decl *decl, m0__process *pr,
                                const app_open_ctx *o) {
  const m0__actor_spec *sp = &decl->actors[i];
  m0__service *s = &a->svcs[i];
  s->nslots = sp->instances;
  atomic_store(&s->used, sp->instances);
  for (int k = 0; k < sp->instances; k++) {
    m0__instance *in = &a->inst[a->ninst++];
    m0__handle_init(&in->h, &m0__instance_kind, &pr->exits);
    in->kind = decl->kinds[i];
    in->svc = s;
    in->post = &a->post;
    in->slot = k;
    in->ctx = (m0_actor_ctx){.actor = sp->name, .instance = k, .instances = sp->instances, .config = pr->cfg,
                             .publisher = o->pub};
    in->trace = pr->trace;
    in->coord_id = o->coord_id;
    in->coord_url = o->coord_url;
    if (m0__inbox_init(&in->inbox) != 0 ||
        m0__topology_instance_url(in->url, sizeof in->url, pr->inproc_ns, sp->name, k) != 0 ||
        m0__handle_open(&in->h) != 0)
      return M0__ETRANSPORT;
    o->handles[(*o->nhandles)++] = &in->h;
  }
  return 0;
}

/* Actor i placed nats: its lanes and their NATS connection, in each
 * process that has loops (every worker its own: its answers come back to
 * it). */
static int app_actors_nats(m0__app_actors *a, int i, const m0__actor_spec *sp) {
  if (!a->nats && !(a->nats = calloc((size_t)a->n, sizeof *a->nats))) return M0__ENOMEM;
  return m0__nats_open(&a->nats[i], &a->svcs[i], sp->url, sp->subject, sp->lanes);
}

/* Actor i: its door (a worker), its listener (placed process or
 * external), its lanes (nats) or its instances (thread). */
static int app_actors_one(m0__app_actors *a, int i, const m0__app_decl *decl, m0__process *pr, int first,
                          const app_open_ctx *o) {
  const m0__actor_spec *sp = &decl->actors[i];
  m0__service *s = &a->svcs[i];
  if (sp->placement == M0__PLACE_THREAD) return app_actors_instances(a, i, decl, pr, o);
  if (sp->placement == M0__PLACE_NATS) return app_actors_nats(a, i, sp);
  if (pr->mode == M0__MODE_PREFORK) return app_actors_door(s, sp, a->urls[i], sizeof a->urls[i], pr, first, o->pub);
  if (app_actors_url(a->urls[i], sizeof a->urls[i], sp, pr) != 0) {
    fprintf(stderr, "m0: actor %s: its URL is too long\n", sp->name);
    return M0__ETOOBIG;
  }
  int rv = app_actors_proof(a, i, sp, a->urls[i]);
  return rv != 0 ? rv : app_actors_listen(s, sp, a->urls[i], pr, o->pub);
}

int m0__app_actors_open(m0__app_actors *a, m0__process *pr, const m0__app_decl *decl, m0__inbox *loop_inboxes,
                        size_t inbox_stride, int here, int first, uint32_t coord_id, const char *coord_url,
                        m0_publisher *pub, m0__handle **handles, int *nhandles) {
  memset(a, 0, sizeof *a);
  a->reload = &pr->reload;
  if (decl->nactors == 0) return 0;
  a->n = decl->nactors;
  a->svcs = calloc((size_t)a->n, sizeof *a->svcs);
  a->svc_ptrs = calloc((size_t)a->n, sizeof *a->svc_ptrs);
  a->loop_inbox = calloc((size_t)here, sizeof *a->loop_inbox);
  int nthreads = m0__app_actors_handles(decl);
  a->inst = calloc(nthreads ? (size_t)nthreads : 1, sizeof *a->inst);
  a->urls = calloc((size_t)a->n, sizeof *a->urls);
  if (!a->svcs || !a->svc_ptrs || !a->loop_inbox || !a->inst || !a->urls) return M0__ENOMEM;
  for (int i = 0; i < here; i++) a->loop_inbox[i] = (m0__inbox *)((char *)loop_inboxes + (size_t)i * inbox_stride);
  if (m0__post_init(&a->post, a->svc_ptrs, a->n, pr->trace) != 0) return M0__ENOMEM;
  a->post_made = true;
  const app_open_ctx o = {coord_id, coord_url, pub, handles, nhandles};
  for (int i = 0; i < a->n; i++) {
    const m0__actor_spec *sp = &decl->actors[i];
    a->svc_ptrs[i] = &a->svcs[i];
    m0__service_init(&a->svcs[i], i, sp->name, sp->queue, a->loop_inbox, here, first);
    a->svcs[i].callers = &a->post.callers; /* a call's answer finds its caller */
    a->svcs[i].hooks = &m0__post_hooks;   /* and the post hears of its instances and their calls */
    a->svcs[i].hooks_arg = &a->post;
    a->svcs[i].spawned = sp->placement == M0__PLACE_PROCESS; /* the observer's placement */
    app_actors_rows(&a->svcs[i], pr);
    int rv = app_actors_one(a, i, decl, pr, first, &o);
    if (rv != 0) return rv;
  }
  bool none = true;
  /* Under --workers the supervisor spawns the process instances; each
   * worker restarts its own thread ones. */
  a->children = m0__children_start(decl, a->svcs, pr->mode != M0__MODE_PREFORK ? a->urls : NULL, a->inst, a->ninst,
                                   &pr->exits, &none);
  if (!a->children && !none) return M0__ENOMEM;
  return 0;
}

/* Actor i's URL, its relay to every worker's door, listening. 0 or a
 * negative m0__err (said on stderr). doors: room for nworkers. */
static int app_actors_front_one(m0__app_actors *a, int i, const m0__actor_spec *sp, m0__process *pr,
                                char (*doors)[M0__URL_MAX], int nworkers, m0_publisher *pub) {
  int rv = 0;
  for (int w = 0; rv == 0 && w < nworkers; w++)
    if (m0__topology_door_url(doors[w], sizeof doors[w], pr->sockdir, sp->name, w) != 0) rv = M0__ETOOBIG;
  if (rv == 0 && app_actors_url(a->urls[i], sizeof a->urls[i], sp, pr) != 0) rv = M0__ETOOBIG;
  if (rv != 0) {
    fprintf(stderr, "m0: actor %s: its URL is too long\n", sp->name);
    return rv;
  }
  if ((rv = app_actors_proof(a, i, sp, a->urls[i])) != 0 ||
      (rv = m0__relay_init(&a->relays[i], &a->svcs[i], doors, nworkers)) != 0 ||
      (rv = app_actors_listen(&a->svcs[i], sp, a->urls[i], pr, pub)) != 0)
    return rv;
  return m0__relay_start(&a->relays[i]);
}

int m0__app_actors_front(m0__app_actors *a, m0__process *pr, const m0__app_decl *decl, int nworkers,
                         m0_publisher *pub) {
  memset(a, 0, sizeof *a);
  a->reload = &pr->reload;
  int connected = 0;
  for (int i = 0; i < decl->nactors; i++) {
    connected += decl->actors[i].placement != M0__PLACE_THREAD && decl->actors[i].placement != M0__PLACE_NATS;
    /* Named here too, thread actors included (each worker's own): the
     * supervisor's tracer takes m0trace's --actor echo, and names its
     * records as the workers and the observer do (echo.0, not app.0.0). */
    m0__app_actor_named(i, decl->actors[i].name);
  }
  if (connected == 0) return 0;
  a->n = decl->nactors;
  a->svcs = calloc((size_t)a->n, sizeof *a->svcs);
  a->svc_ptrs = calloc((size_t)a->n, sizeof *a->svc_ptrs);
  a->relays = calloc((size_t)a->n, sizeof *a->relays);
  char(*urls)[M0__URL_MAX] = a->urls = calloc((size_t)a->n, sizeof *urls);
  char(*doors)[M0__URL_MAX] = calloc((size_t)nworkers, sizeof *doors);
  if (!a->svcs || !a->svc_ptrs || !a->relays || !urls || !doors || m0__post_init(&a->post, a->svc_ptrs, a->n, pr->trace) != 0) {
    free(doors);
    return M0__ENOMEM;
  }
  /* The supervisor's post: its process and external instances' own calls of
   * one another (a singleton that calls); the workers' thread actors are
   * not here (their services have no instance in this process). */
  a->post_made = true;
  int rv = 0;
  for (int i = 0; rv == 0 && i < a->n; i++) {
    m0__service *s = &a->svcs[i];
    m0__service_init(s, i, decl->actors[i].name, decl->actors[i].queue, NULL, 0, 0);
    a->svc_ptrs[i] = s;
    s->callers = &a->post.callers;
    s->hooks = &m0__post_hooks;
    s->hooks_arg = &a->post;
    app_actors_rows(s, pr);
    if (decl->actors[i].placement != M0__PLACE_THREAD && /* each worker has its own */
        decl->actors[i].placement != M0__PLACE_NATS)
      rv = app_actors_front_one(a, i, &decl->actors[i], pr, doors, nworkers, pub);
  }
  free(doors);
  if (rv != 0) return rv;
  bool none;
  a->children = m0__children_start(decl, a->svcs, urls, NULL, 0, &pr->exits, &none);
  return !a->children && !none ? M0__ENOMEM : 0;
}

void m0__app_actors_drain(m0__app_actors *a) { m0__children_drain(a->children); }

void m0__app_actors_stop(m0__app_actors *a, m0__actor *coord, int64_t deadline) {
  m0__children_drain(a->children); /* before STOP: an instance it ends is not started again */
  for (int k = 0; k < a->ninst; k++) {
    m0__instance *in = &a->inst[k];
    if (!in->h.started || m0__handle_exited(&in->h)) continue;
    m0__peer to;
    m0__peer_direct(&to, m0__service_slot_id(in->svc, in->slot), &in->inbox);
    m0__send(coord, &to, M0__K_STOP, 0, 0, NULL, 0);
  }
  /* Handed over: the instances at a stable URL are told the host reloads,
   * and redial it, which this generation releases once they have left, for
   * the next one to bind (docs/actors.md, Across a reload). A process
   * actor's at this generation's own URL stop. */
  bool reload = a->reload && a->reload->handed_over;
  for (int i = 0; i < a->n; i++) m0__service_stop_instances(&a->svcs[i], reload && a->svcs[i].stable);
  m0__children_stop(a->children, deadline);
  a->children = NULL;
  for (int i = 0; i < a->n; i++) {
    m0__service_await_instances(&a->svcs[i], deadline); /* external ones */
    if (reload && a->svcs[i].stable) m0__service_release(&a->svcs[i]);
  }
}

void m0__app_actors_close(m0__app_actors *a) {
  for (int i = 0; a->nats && i < a->n; i++) m0__nats_close(a->nats[i]); /* first: no REPLY into a closing loop */
  free(a->nats);
  for (int i = 0; i < a->n; i++) m0__service_close(&a->svcs[i]);
  for (int i = 0; a->relays && i < a->n; i++) m0__relay_close(&a->relays[i]); /* after: no reply comes now */
  free(a->relays);
  if (a->secrets) memset(a->secrets, 0, (size_t)a->n * sizeof *a->secrets);
  free(a->secrets);
  for (int k = 0; k < a->ninst; k++) m0__inbox_fini(&a->inst[k].inbox);
  if (a->post_made) m0__post_fini(&a->post);
  free(a->svcs);
  free(a->svc_ptrs);
  free(a->inst);
  free(a->loop_inbox);
  free(a->urls);
  memset(a, 0, sizeof *a);
}
