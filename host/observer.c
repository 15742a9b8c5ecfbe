#include "host/observer.h"
#include "host/observed.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <nng/nng.h>

#include "runtime/admit.h"
#include "runtime/edges.h"
#include "runtime/kinds.h"
#include "runtime/recent.h"
#include "service/service.h"
#include "base/ids.h"
#include "bus/natsopt.h"
#include "config/appspec.h"

/* Where actor `name` (of role `role`, index `idx`) lives: its process. */
static void process_of(const m0__topology *t, int role, int idx, char *out, size_t n) {
  if (t->mode != M0__MODE_PREFORK) snprintf(out, n, "host");
  else if (role == M0__ROLE_COORD || role == M0__ROLE_PRODUCER) snprintf(out, n, "supervisor");
  else if (role == M0__ROLE_POOL) snprintf(out, n, "worker.%d", idx >> 12);
  else snprintf(out, n, "worker.%d", idx);
}

/* The pid of actor (role, idx)'s process: this one's, or under prefork the
 * supervisor's (this worker's parent: it spawned it) or worker i's, which
 * the supervisor writes on the page at each spawn (0: not known yet). */
static pid_t pid_of(const m0__loop *l, int role, int idx) {
  if (l->topo->mode != M0__MODE_PREFORK) return getpid();
  if (role == M0__ROLE_COORD || role == M0__ROLE_PRODUCER) return getppid();
  int w = role == M0__ROLE_POOL ? idx >> 12 : idx;
  return w >= 0 && w < (int)l->page->head->loops ? (pid_t)atomic_load(&l->page->lines[w].pid) : 0;
}

/* The messages counted on each edge (runtime/edges.h), by names: an
 * instance's name repeats in each worker, and its counts add up. */
typedef struct counts {
  char from[M0__PAGE_EDGE_LINES][48], to[M0__PAGE_EDGE_LINES][48];
  uint64_t n[M0__PAGE_EDGE_LINES], waiting[M0__PAGE_EDGE_LINES], kinds[M0__PAGE_EDGE_LINES];
  double rate[M0__PAGE_EDGE_LINES];
  int count;
} counts;

static void count_add(void *arg, uint32_t from, uint32_t to, const m0__edge_counts *ec) {
  counts *c = arg;
  char f[48], t[48];
  m0__actor_name(from, f, sizeof f);
  m0__actor_name(to, t, sizeof t);
  uint64_t waiting = ec->n > ec->taken ? ec->n - ec->taken : 0;
  int i = 0;
  while (i < c->count && (strcmp(c->from[i], f) || strcmp(c->to[i], t))) i++;
  if (i == c->count) {
    if (c->count == M0__PAGE_EDGE_LINES) return;
    snprintf(c->from[i], sizeof c->from[0], "%s", f);
    snprintf(c->to[i], sizeof c->to[0], "%s", t);
    c->count++;
  }
  c->n[i] += ec->n;
  c->waiting[i] += waiting;
  c->kinds[i] |= ec->kinds;
  c->rate[i] += ec->rate;
}

/* Adds the edge from -> to carrying kinds (space-separated); returns it. */
static json_t *edge(json_t *edges, const char *from, const char *to, const char *kinds) {
  json_t *k = json_array();
  char buf[160];
  snprintf(buf, sizeof buf, "%s", kinds);
  for (char *save, *w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save)) json_array_append_new(k, json_string(w));
  json_t *e = json_pack("{s:s, s:s, s:o}", "from", from, "to", to, "kinds", k);
  json_array_append_new(edges, e);
  return e;
}

typedef struct refusals {
  uint32_t actor[64];
  uint64_t n[64], why[64][M0__PAGE_REFUSAL_REASONS]; /* why: by reason (runtime/admit.h) */
  int count;
} refusals;

static void refusal_add(void *arg, uint32_t actor, int reason, uint64_t n) {
  refusals *r = arg;
  int i = 0;
  while (i < r->count && r->actor[i] != actor) i++;
  if (i == r->count) {
    if (r->count == 64) return;
    r->actor[r->count++] = actor;
  }
  r->n[i] += n;
  if (reason >= 0 && reason < M0__PAGE_REFUSAL_REASONS) r->why[i][reason] += n;
}

/* Sets node n's refused (how many) and refusals (by reason, the ones
 * counted) of actor. */
static void refused(json_t *n, const refusals *r, uint32_t actor) {
  int i = 0;
  while (i < r->count && r->actor[i] != actor) i++;
  json_t *why = json_object();
  for (int k = 0; i < r->count && k < M0__PAGE_REFUSAL_REASONS; k++)
    if (r->why[i][k]) json_object_set_new(why, m0__refusal_name(k), json_integer((json_int_t)r->why[i][k]));
  json_object_set_new(n, "refused", json_integer(i < r->count ? (json_int_t)r->n[i] : 0));
  json_object_set_new(n, "refusals", why);
}

/* The edges no rule declares that carried messages between two instances
 * (an instance's asks, m0_ask: which actor it asks is its code's choice),
 * drawn with the kinds seen on them and "seen". */
static void draw_seen(json_t *edges, json_t *nodes, const counts *cn) {
  json_t *names = json_object(), *e; /* the nodes, by name */
  size_t i;
  json_array_foreach(nodes, i, e) json_object_set(names, json_string_value(json_object_get(e, "name")), e);
  for (int k = 0; cn && k < cn->count; k++) {
    bool known = false;
    json_array_foreach(edges, i, e) {
      known = known || (!strcmp(json_string_value(json_object_get(e, "from")), cn->from[k]) &&
                        !strcmp(json_string_value(json_object_get(e, "to")), cn->to[k]));
    }
    json_t *src = json_object_get(names, cn->from[k]), *dst = json_object_get(names, cn->to[k]);
    if (known || !src || !dst || strcmp(json_string_value(json_object_get(src, "role")), "instance") ||
        strcmp(json_string_value(json_object_get(dst, "role")), "instance"))
      continue; /* between two instances only: the rules cover the rest */
    char kinds[160] = "";
    size_t kl = 0;
    for (int b = 1; b < M0__KIND_COUNT_ && kl < sizeof kinds; b++)
      if (cn->kinds[k] >> b & 1)
        kl += (size_t)snprintf(kinds + kl, sizeof kinds - kl, "%s%s", kl ? " " : "", m0__kind_name(b));
    json_object_set_new(edge(edges, cn->from[k], cn->to[k], kinds), "seen", json_true());
  }
  json_decref(names);
}

/* Each edge's messages so far (the page makes them a rate), and what waits
 * for each receiver (sent, not yet taken), on its edges and its node: not
 * known of an instance outside the host (outside: their names), whose
 * receipts no one here sees, nor of an application actor's socket. */
static void count_edges(json_t *edges, json_t *nodes, const counts *cn, json_t *outside) {
  json_t *waits = json_object(), *e; /* name -> waiting, summed over its edges in */
  size_t i;
  json_array_foreach(edges, i, e) {
    const char *f = json_string_value(json_object_get(e, "from")), *to = json_string_value(json_object_get(e, "to"));
    uint64_t n = 0, w = 0;
    double rate = 0;
    for (int k = 0; cn && k < cn->count; k++)
      if (!strcmp(cn->from[k], f) && !strcmp(cn->to[k], to)) n += cn->n[k], w += cn->waiting[k], rate += cn->rate[k];
    json_object_set_new(e, "messages", json_integer((json_int_t)n));
    json_object_set_new(e, "rate", json_real((double)(int64_t)(rate * 10 + 0.5) / 10)); /* a tenth is enough */
    if (json_object_get(outside, to)) continue;
    json_object_set_new(e, "waiting", json_integer((json_int_t)w));
    json_object_set_new(waits, to, json_integer(json_integer_value(json_object_get(waits, to)) + (json_int_t)w));
    char own[128]; /* and as loop.i's worker's (under prefork its thread instances are its own: worker.i/echo.0) */
    snprintf(own, sizeof own, "worker.%s/%s", strncmp(f, "loop.", 5) ? "-" : f + 5, to);
    json_object_set_new(waits, own, json_integer(json_integer_value(json_object_get(waits, own)) + (json_int_t)w));
  }
  json_array_foreach(nodes, i, e) {
    const char *who = json_string_value(json_object_get(e, "name"));
    const char *proc = json_string_value(json_object_get(e, "process"));
    char own[128];
    if (!strcmp(json_string_value(json_object_get(e, "role")), "instance") && proc && !strncmp(proc, "worker.", 7))
      who = (snprintf(own, sizeof own, "%s/%s", proc, who), own); /* a worker's own instance: its loop's edges */
    if (!json_object_get(outside, who) && strcmp(json_string_value(json_object_get(e, "role")), "app"))
      json_object_set_new(e, "waiting", json_integer(json_integer_value(json_object_get(waits, who))));
  }
  json_decref(waits);
}

/* What a graph is drawn from: the loop's topology and page, this
 * process's name, this machine's, and the refusals counted so far. */
typedef struct graph {
  const m0__loop *l;
  const m0__topology *t;
  bool prefork, has_producer;
  const char *process;
  char host[256];
  refusals rf;
  json_t *nodes, *edges, *outside; /* outside: names of instances outside the host */
} graph;

/* A node per actor of the topology, with a loop's figures from the page. */
static void graph_actors(graph *g) {
  char name[64], proc[32];
  for (int a = 0; a < g->t->nactors; a++) {
    const m0__actor_desc *d = &g->t->actors[a];
    int role = M0__ACTOR_ROLE(d->id), idx = M0__ACTOR_INDEX(d->id);
    m0__actor_name(d->id, name, sizeof name);
    process_of(g->t, role, idx, proc, sizeof proc);
    json_t *n = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "name", name, "role", m0__role_name(role), "process",
                          proc, "thread", role == M0__ROLE_COORD || role == M0__ROLE_WORKER ? "main" : name,
                          "machine", g->host, "url", d->url);
    refused(n, &g->rf, d->id);
    if (role == M0__ROLE_PRODUCER) g->has_producer = true;
    pid_t pid = pid_of(g->l, role, idx);
    if (pid > 0) json_object_set_new(n, "pid", json_integer(pid));
    if (role == M0__ROLE_WORKER && idx < (int)g->l->page->head->loops)
      json_object_set_new(n, "respawns", json_integer((json_int_t)atomic_load(&g->l->page->lines[idx].respawns)));
    if (role == M0__ROLE_LOOP && idx < (int)g->l->page->head->loops) {
      const m0__loop_line *ln = &g->l->page->lines[idx];
      json_object_set_new(n, "requests", json_integer((json_int_t)atomic_load(&ln->requests)));
      json_object_set_new(n, "open", json_integer((json_int_t)atomic_load(&ln->open)));
      json_object_set_new(n, "streams", json_integer((json_int_t)atomic_load(&ln->streams)));
      json_object_set_new(n, "handoffs", json_integer((json_int_t)atomic_load(&ln->handoffs)));
      json_object_set_new(n, "queued", json_integer((json_int_t)atomic_load(&ln->queued)));
    }
    json_array_append_new(g->nodes, n);
  }
}

/* Loop i's edges: to and from its boss, the producer, its pool threads
 * and (one process) its siblings. */
static void graph_loop_edges(graph *g, int i) {
  char loop[32], boss[32], other[64];
  snprintf(loop, sizeof loop, "loop.%d", i);
  if (g->prefork) snprintf(boss, sizeof boss, "worker.%d", i);
  else snprintf(boss, sizeof boss, "coordinator");
  edge(g->edges, boss, loop, "go stop");
  edge(g->edges, loop, boss, "ready failed stopped died leaving");
  if (g->has_producer) edge(g->edges, "producer", loop, "frame");
  for (int j = 0; j < g->t->pool; j++) {
    char pool[40];
    snprintf(pool, sizeof pool, "pool.%d.%d", i, j);
    edge(g->edges, loop, pool, "job stop");
    edge(g->edges, pool, loop, "result");
    edge(g->edges, pool, boss, "ready failed died");
  }
  /* accept sharing: siblings of one process */
  for (int k = 0; !g->prefork && k < g->t->loops; k++)
    if (k != i) {
      snprintf(other, sizeof other, "loop.%d", k);
      edge(g->edges, loop, other, "handoff");
    }
}

/* The kinds each pair exchanges (ARCHITECTURE.md, the table of actors). */
static void graph_edges(graph *g) {
  char other[64];
  for (int i = 0; i < g->t->loops; i++) graph_loop_edges(g, i);
  if (g->prefork)
    for (int w = 0; w < g->t->loops; w++) {
      snprintf(other, sizeof other, "worker.%d", w);
      edge(g->edges, "coordinator", other, "go");
      edge(g->edges, other, "coordinator", "ready");
    }
  if (g->has_producer) {
    edge(g->edges, "coordinator", "producer", "go stop");
    edge(g->edges, "producer", "coordinator", "ready failed stopped");
  }
}

/* How application actor s is placed, as the topology says. */
static const char *placement_of(const graph *g, const m0__service *s) {
  if (m0__observed_nats(g->l, s)) return "nats";
  return !s->connected ? "thread" : s->spawned ? "process" : "external";
}

/* Slot k's pid: a thread instance's is its process's (worker w's under
 * prefork, or this one's: w < 0); a connected one's the peer of its ipc
 * pipe (a spawned instance dials ipc), at a worker's door (a relay's leg)
 * as the supervisor saw it (the page's pids); 0 when not known (tcp). */
static pid_t instance_pid(const graph *g, m0__service *s, int k, int w) {
  if (m0__observed_nats(g->l, s)) return 0; /* a lane: its instances are anywhere in the fleet */
  if (!s->connected) return w < 0 ? getpid() : pid_of(g->l, M0__ROLE_WORKER, w);
  if (s->door) return s->pids ? (pid_t)atomic_load(&s->pids[k]) : 0;
  uint64_t pid = 0;
  nng_pipe p = {.id = atomic_load(&s->slots[k].pipe)};
  if (!p.id || nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_PID, &pid) != 0) return 0;
  return (pid_t)pid;
}

/* Where slot k's instance is: its machine. */
static void instance_where(const graph *g, m0__service *s, int k, char *where, size_t n) {
  if (s->door) { /* a relay's leg: where the relay said its instance dialed from */
    pthread_mutex_lock(&s->mu);
    snprintf(where, n, "%s", s->slots[k].where[0] ? s->slots[k].where : g->host);
    pthread_mutex_unlock(&s->mu);
  } else if (s->connected) {
    m0__pipe_where(atomic_load(&s->slots[k].pipe), g->host, where, n);
  } else {
    snprintf(where, n, "%s", g->host);
  }
}

/* Slot k of application actor s, live, with in_flight requests: its node
 * and edges. w: the worker whose thread instance it is under prefork (its
 * own loop alone sends to it), or -1: this process's. */
static void graph_instance(graph *g, m0__service *s, int k, int w, int in_flight) {
  char inst[64], where[256], other[64], proc[32];
  m0__actor_name(m0__service_slot_id(s, k), inst, sizeof inst);
  instance_where(g, s, k, where, sizeof where);
  snprintf(proc, sizeof proc, "%s", s->connected ? "connected" : g->process);
  if (w >= 0) snprintf(proc, sizeof proc, "worker.%d", w);
  if (s->connected) json_object_set_new(g->outside, inst, json_true());
  json_t *n = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:s}", "name", inst, "role", "instance", "actor",
                        s->name, "process", proc, "thread", s->connected || m0__observed_nats(g->l, s) ? "" : inst,
                        "machine", where, "in_flight",
                        in_flight, "placement", placement_of(g, s));
  pid_t pid = instance_pid(g, s, k, w);
  if (pid > 0) json_object_set_new(n, "pid", json_integer(pid));
  if (m0__observed_nats(g->l, s)) json_object_set_new(n, "lane", json_true()); /* a batch's way to the fleet */
  json_array_append_new(g->nodes, n);
  int mine = !g->prefork || s->connected ? -1 : w >= 0 ? w : g->l->index; /* the loop that sends to it, or all */
  for (int i = 0; i < g->t->loops; i++) {
    if (mine >= 0 && i != mine) continue;
    snprintf(other, sizeof other, "loop.%d", i);
    edge(g->edges, other, inst, "request");
    edge(g->edges, inst, other, "reply");
  }
  if (s->connected) edge(g->edges, inst, s->name, "publish");
  else if (!m0__observed_nats(g->l, s)) /* a lane is no thread of its own: it says nothing */
    edge(g->edges, inst, g->prefork ? proc : "coordinator", "ready failed"); /* its process's coordinator */
}

/* An application actor's requests answered so far, by the whole host (its
 * line on the page), and those of them not answered by it (503, 504, 502). */
static void service_requests(json_t *n, const m0__service_stats *st) {
  uint64_t ok = atomic_load(&st->ok), failed = atomic_load(&st->no_instance) + atomic_load(&st->queue_full) +
                                             atomic_load(&st->timeout) + atomic_load(&st->bad_reply) +
                                             atomic_load(&st->died);
  json_object_set_new(n, "requests", json_integer((json_int_t)(ok + failed)));
  json_object_set_new(n, "failed", json_integer((json_int_t)failed));
}

/* Application actor si's instances in the other workers (prefork: its
 * thread instances, as their loops last wrote them on the page). */
typedef struct others {
  graph *g;
  int si, live, in_flight;
} others;

static void other_instance(void *arg, const m0__observed_instance *in) {
  others *o = arg;
  if (in->service != o->si) return;
  o->live++;
  o->in_flight += in->in_flight;
  graph_instance(o->g, o->g->l->services[in->service], in->slot, in->worker, in->in_flight);
}

/* Application actors: their instances live in every process (this one's,
 * and under prefork every worker's thread instances). */
static void graph_services(graph *g) {
  for (int si = 0; si < g->l->nservices; si++) {
    m0__service *s = g->l->services[si];
    others o = {.g = g, .si = si};
    for (int k = 0; k < s->nslots; k++) {
      if (!atomic_load(&s->slots[k].live)) continue;
      int in = atomic_load(&s->slots[k].inflight);
      o.live++;
      o.in_flight += in;
      graph_instance(g, s, k, -1, in);
    }
    m0__observed_instances_each(g->l, other_instance, &o);
    json_t *n = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:I}", "name", s->name, "role", "app", "process",
                          g->process, "placement", placement_of(g, s), "url", s->connected ? s->url : "", "instances",
                          o.live, "in_flight", o.in_flight, "restarts", (json_int_t)atomic_load(s->restarts));
    refused(n, &g->rf, M0__ACTOR_ID(M0__ROLE_APP, M0__APP_INDEX(si, 0xfff)));
    service_requests(n, s->st);
    if (m0__observed_nats(g->l, s)) { /* its NATS server and subject (the topology's) */
      const m0__actor_spec *sp = &((const m0__app_decl *)g->l->host)->actors[s->index];
      char shown[sizeof sp->url]; /* its password as "***" */
      json_object_set_new(n, "url", json_string(m0__nats_url_shown(sp->url, shown, sizeof shown)));
      json_object_set_new(n, "subject", json_string(sp->subject));
    }
    json_array_append_new(g->nodes, n);
  }
}

char *m0__observer_graph(const m0__loop *l, const char *process) {
  graph *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  *g = (graph){.l = l, .t = l->topo, .prefork = l->topo->mode == M0__MODE_PREFORK, .process = process,
               .host = "localhost", .nodes = json_array(), .edges = json_array(), .outside = json_object()};
  gethostname(g->host, sizeof g->host - 1);
  m0__refusals_each(refusal_add, &g->rf);
  graph_actors(g);
  graph_edges(g);
  graph_services(g);
  /* What the page counted on each edge (runtime/edges.h). */
  counts *cn = calloc(1, sizeof *cn); /* 61 KiB: not on the loop's stack */
  if (cn) m0__edges_each(count_add, cn);
  draw_seen(g->edges, g->nodes, cn);
  count_edges(g->edges, g->nodes, cn, g->outside);
  free(cn);
  json_decref(g->outside);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  json_t *root = json_pack("{s:I, s:s, s:s, s:s, s:o, s:o, s:o}", "t",
                           (json_int_t)now.tv_sec * 1000 + now.tv_nsec / 1000000, "mode", m0__mode_name(g->t->mode),
                           "machine", g->host, "process", process, "nodes", g->nodes, "edges", g->edges,
                           "supervision", m0__observed_supervision(l, g->prefork ? getppid() : getpid()));
  char *text = root ? json_dumps(root, JSON_COMPACT) : NULL;
  json_decref(root);
  free(g);
  return text;
}

/* ---- an actor's recent records ---- */

typedef struct picked {
  const char *actor;
  size_t len;
  m0__trace_rec r[M0__OBSERVER_RECORDS];
  int n, head; /* the last M0__OBSERVER_RECORDS, a ring */
} picked;

/* name is the actor's, or one of its instances' (actor "echo": "echo.0"). */
static bool of_actor(const picked *p, const char *name) {
  return !strncmp(name, p->actor, p->len) && (name[p->len] == 0 || name[p->len] == '.');
}

static void pick(void *arg, const m0__trace_rec *r) {
  picked *p = arg;
  char from[64], to[64];
  m0__actor_name(r->e.from, from, sizeof from);
  m0__actor_name(r->e.to, to, sizeof to);
  if (!of_actor(p, from) && !of_actor(p, to)) return;
  p->r[(p->head + p->n) % M0__OBSERVER_RECORDS] = *r;
  if (p->n < M0__OBSERVER_RECORDS) p->n++;
  else p->head = (p->head + 1) % M0__OBSERVER_RECORDS;
}

char *m0__observer_records(const char *actor) {
  picked *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->actor = actor;
  p->len = strlen(actor);
  m0__recent_each(pick, p);
  json_t *recs = json_array();
  for (int i = 0; i < p->n; i++) {
    char line[512];
    m0__trace_format(&p->r[(p->head + i) % M0__OBSERVER_RECORDS], line, sizeof line);
    json_array_append_new(recs, json_loads(line, 0, NULL)); /* the very record m0trace prints */
  }
  free(p);
  json_t *root = json_pack("{s:s, s:o}", "actor", actor, "records", recs);
  char *text = root ? json_dumps(root, JSON_COMPACT) : NULL;
  json_decref(root);
  return text;
}
