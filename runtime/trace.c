#include "runtime/trace.h"

#include <nng/nng.h>
#include <nng/protocol/pipeline0/push.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "runtime/kinds.h"
#include "runtime/recent.h"
#include "base/errors.h"
#include "base/nng_compat.h"
#include "base/ids.h"
#include "base/num.h"
#include "transport/topology.h"
#include "base/clock.h"

/* "-": JSON lines on stderr, each written at once. An nng URL: binary
 * records on a push socket dialed to it (m0trace listens there and prints
 * the same JSON lines), so every process of a prefork host can trace to one
 * watcher.
 *
 * Design notes
 * - Over nng a record is 68 bytes copied into a batch, not text: formatting
 *   a JSON line (two actor names, a kind, the trace id, all by snprintf)
 *   took ~6,800 instructions per record in the host (callgrind): tracing
 *   on cost the pool lane ~9,100 instructions per request, now ~200
 *   (bench/profile_trace). m0trace formats instead.
 * - The records are batched: a message carries up to TRACE_BATCH bytes of
 *   whole records, sent when the next would not fit, and at the latest
 *   TRACE_FLUSH_MS after it was written (by a thread of the tracer's own,
 *   asleep on a condition variable: an nng sleep aio's every expiry cost
 *   nng 1.5.2's expire thread up to a millisecond of spinning, 2 % of a CPU
 *   at 20 ticks a second; bench/RESULTS.md, "nng timers").
 *   One nng message per record cost the pool lane a third of its throughput
 *   (bench/run_trace); a batch costs one send per ~480 records.
 * - Never waiting: a batch that cannot be queued at once (nobody listening
 *   for a while) is dropped and its records counted; the count is printed
 *   when the tracer is freed. Tracing must never slow the host down, and
 *   each record still carries the time it was made.
 * - One batch per process, under a mutex held only to copy a record in (and
 *   to hand a full batch to nng, which copies it and does not block).
 * - Switched while running: every process has a tracer (off when --trace is
 *   empty), and m0__trace_live counts those on, so the hook's one branch
 *   reads one word that stays in every core's cache while nothing traces.
 *   A control (a TRACE message, actors/loop.c) changes the sink, the
 *   filters and `on` under the mutex; `on` and the kinds' mask are also
 *   atomics, read without it, so a message of a kind not kept costs no
 *   lock. The actors' filter is names, matched under the mutex (naming two
 *   actors is ~200 instructions, paid only while an actors' filter is set):
 *   a name is not yet an id in this process (an application actor's
 *   instance, another worker's loop), and a prefix ("pool") names actors
 *   that come and go. */
enum { REQUESTS_NONE, REQUESTS_SAMPLED, REQUESTS_ALL };
#define TRACE_BATCH 32768
#define TRACE_FLUSH_MS 50

atomic_uint m0__trace_live;

struct m0__tracer {
  atomic_bool on;
  atomic_uint kinds; /* bit k: kind k is kept; bit 0: requests served on a loop ("http") */
  atomic_int requests; /* which of those: REQUESTS_* */
  uint32_t process, pid;
  FILE *out; /* "-": stderr; NULL: an nng sink, once dialed */
  pthread_mutex_t mu; /* the actors' filter, the sink, the batch */
  int nactors;        /* 0: every actor */
  char actors[M0__TRACE_ACTORS][49];
  bool nng; /* the push socket is open and the flusher runs */
  nng_socket sock;
  nng_dialer dialer;
  char url[M0__URL_MAX];
  atomic_ulong dropped;
  char batch[TRACE_BATCH];
  size_t len;
  unsigned long records;
  pthread_cond_t tick; /* CLOCK_MONOTONIC; signalled to stop */
  pthread_t flusher;
  bool stopping;
};

/* Under t->mu. */
static void trace_flush(m0__tracer *t) {
  if (!t->len) return;
  if (nng_send(t->sock, t->batch, t->len, NNG_FLAG_NONBLOCK) != 0) atomic_fetch_add(&t->dropped, t->records);
  t->len = 0;
  t->records = 0;
}

static void *trace_flusher(void *arg) {
  m0__tracer *t = arg;
  pthread_mutex_lock(&t->mu);
  while (!t->stopping) {
    struct timespec until = m0__timespec_in(TRACE_FLUSH_MS);
    pthread_cond_timedwait(&t->tick, &t->mu, &until);
    trace_flush(t);
  }
  pthread_mutex_unlock(&t->mu);
  return NULL;
}

static int trace_open(m0__tracer *t) {
  if (nng_push0_open(&t->sock) != 0) return M0__ETRANSPORT;
  nng_socket_set_int(t->sock, NNG_OPT_SENDBUF, 1024);
  nng_socket_set_ms(t->sock, NNG_OPT_RECONNMAXT, 200);
  return 0;
}

/* Under t->mu: records go to url from now. The push socket and its flusher
 * are made at the first URL; a later one replaces the dialer (nng queues
 * nothing for a pipe that is gone, so no record goes to the old address
 * after this returns but those already handed to its pipe). */
static int trace_dial(m0__tracer *t, const char *url) {
  if (!t->nng) {
    if (trace_open(t) != 0) return M0__ETRANSPORT;
    if (pthread_create(&t->flusher, NULL, trace_flusher, t) != 0) {
      m0__socket_close(t->sock);
      return M0__ENOMEM;
    }
    t->nng = true;
  } else if (!strcmp(t->url, url)) return 0;
  nng_dialer d;
  if (nng_dial(t->sock, url, &d, NNG_FLAG_NONBLOCK) != 0) return M0__ETRANSPORT;
  if (t->url[0]) nng_dialer_close(t->dialer);
  t->dialer = d;
  snprintf(t->url, sizeof t->url, "%s", url);
  return 0;
}

/* Under t->mu: a control switched tracing off. The sink goes with what is
 * batched and queued for it (closing the push socket drops its queue), so
 * an m0trace that listens at the URL later sees nothing made before it
 * switched tracing on; the next control that switches it on names "to". */
static void trace_forget(m0__tracer *t) {
  t->len = 0;
  t->records = 0;
  m0__socket_close(t->sock);
  t->url[0] = 0;
  trace_open(t); /* failing, every send fails and is counted */
}

/* Under t->mu. */
static void trace_switch(m0__tracer *t, bool on) {
  if (atomic_load(&t->on) == on) return;
  atomic_store(&t->on, on);
  if (on) atomic_fetch_add(&m0__trace_live, 1);
  else atomic_fetch_sub(&m0__trace_live, 1);
}

m0__tracer *m0__tracer_new(const char *dest, uint32_t process) {
  m0__tracer *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->process = process;
  t->pid = (uint32_t)getpid(); /* a process of the host never forks without exec */
  atomic_init(&t->kinds, UINT32_MAX);
  atomic_init(&t->requests, REQUESTS_SAMPLED);
  pthread_mutex_init(&t->mu, NULL);
  m0__cond_init_monotonic(&t->tick);
  if (!dest || !dest[0]) return t;
  if (strcmp(dest, "-") == 0) t->out = stderr;
  else if (trace_dial(t, dest) != 0) {
    m0__tracer_free(t);
    return NULL;
  }
  pthread_mutex_lock(&t->mu);
  trace_switch(t, true);
  pthread_mutex_unlock(&t->mu);
  return t;
}

void m0__tracer_free(m0__tracer *t) {
  if (!t) return;
  pthread_mutex_lock(&t->mu);
  trace_switch(t, false);
  t->stopping = true;
  pthread_cond_signal(&t->tick);
  pthread_mutex_unlock(&t->mu);
  if (t->nng) {
    pthread_join(t->flusher, NULL); /* it flushed once more on its way out */
    trace_flush(t);                  /* no other user is left */
    unsigned long dropped = atomic_load(&t->dropped);
    if (dropped)
      fprintf(stderr, "m0: trace: %lu records dropped (nobody was receiving at the trace address)\n", dropped);
    m0__socket_close(t->sock);
  }
  pthread_cond_destroy(&t->tick);
  pthread_mutex_destroy(&t->mu);
  free(t);
}

/* A filter's name keeps an actor whose name is it, or begins with it and a
 * dot: "pool" keeps pool.1.0, "pool.1" keeps pool.1.0, not pool.10.0. */
static bool name_keeps(const char *f, const char *name) {
  size_t n = strlen(f);
  return !strncmp(name, f, n) && (name[n] == 0 || name[n] == '.');
}

/* Under t->mu. */
static bool trace_keeps(const m0__tracer *t, const m0__env *e) {
  if (!t->nactors) return true;
  char from[64], to[64];
  m0__actor_name(e->from, from, sizeof from);
  m0__actor_name(e->to, to, sizeof to);
  for (int i = 0; i < t->nactors; i++)
    if (name_keeps(t->actors[i], from) || name_keeps(t->actors[i], to)) return true;
  return false;
}

static _Thread_local uint32_t my_tid; /* gettid is a system call: asked once per thread */
/* The other requests of the batch this thread sends next (m0__trace_batch). */
static _Thread_local const uint64_t (*batch_ids)[2];
static _Thread_local size_t batch_n;

static void trace_one(m0__tracer *t, int dir, const m0__env *e, size_t bytes);

void m0__trace_record(m0__tracer *t, bool recv, const m0__env *e, size_t bytes) {
  trace_one(t, recv ? M0__TRACE_RECV : M0__TRACE_SEND, e, bytes);
  if (recv || !batch_n) return;
  for (size_t i = 0; i < batch_n; i++) m0__trace_request(t, false, e, bytes, batch_ids[i][0], batch_ids[i][1]);
  batch_n = 0;
}

void m0__trace_batch(const uint64_t (*ids)[2], size_t n) {
  batch_ids = ids;
  batch_n = ids ? n : 0;
}

void m0__trace_request(m0__tracer *t, bool recv, const m0__env *e, size_t bytes, uint64_t hi, uint64_t lo) {
  m0__env mine = *e;
  mine.trace_hi = hi;
  mine.trace_lo = lo;
  trace_one(t, recv ? M0__TRACE_RECV : M0__TRACE_SEND, &mine, bytes);
}

void m0__trace_served(m0__tracer *t, uint32_t loop, uint64_t hi, uint64_t lo, uint8_t flags, uint64_t n,
                      size_t bytes) {
  if (!t) return;
  int which = atomic_load_explicit(&t->requests, memory_order_relaxed);
  if (which == REQUESTS_NONE || (which == REQUESTS_SAMPLED && (!(hi || lo) || !(flags & 1)))) return;
  m0__env e = {.kind = 0, .from = loop, .to = loop, .seq = n, .trace_hi = hi, .trace_lo = lo};
  trace_one(t, M0__TRACE_SERVE, &e, bytes);
}

int m0__trace_ids_add(m0__trace_ids *l, uint64_t first_hi, uint64_t first_lo, uint64_t hi, uint64_t lo) {
  if ((!hi && !lo) || (hi == first_hi && lo == first_lo)) return 0;
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 16;
    void *ids = realloc(l->ids, cap * sizeof *l->ids);
    if (!ids) return M0__ENOMEM;
    l->ids = ids;
    l->cap = cap;
  }
  l->ids[l->n][0] = hi;
  l->ids[l->n][1] = lo;
  l->n++;
  return 0;
}

void m0__trace_ids_free(m0__trace_ids *l) {
  free(l->ids);
  *l = (m0__trace_ids){0};
}

static void trace_one(m0__tracer *t, int dir, const m0__env *e, size_t bytes) {
  if (!t || !atomic_load_explicit(&t->on, memory_order_relaxed)) return;
  if (e->kind >= 32 || !(atomic_load_explicit(&t->kinds, memory_order_relaxed) >> e->kind & 1)) return;
  if (!my_tid) my_tid = (uint32_t)syscall(SYS_gettid);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  m0__trace_rec r = {.e = *e, .bytes = (uint32_t)bytes, .t_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec,
                     .recv = dir == M0__TRACE_RECV, .served = dir == M0__TRACE_SERVE, .pid = t->pid, .tid = my_tid,
                     .process = t->process};
  uint8_t rec[M0__TRACE_RECORD];
  m0__env_write(rec, &r.e, r.bytes);
  m0__le_put64(rec + M0__ENV_HEADER, r.t_ns);
  m0__le_put32(rec + M0__ENV_HEADER + 8, (uint32_t)dir);
  m0__le_put32(rec + M0__ENV_HEADER + 12, r.pid);
  m0__le_put32(rec + M0__ENV_HEADER + 16, r.tid);
  m0__le_put32(rec + M0__ENV_HEADER + 20, r.process);
  pthread_mutex_lock(&t->mu);
  bool keep = trace_keeps(t, e);
  if (!keep) {
  } else if (t->out) {
    char line[512];
    m0__trace_format(&r, line, sizeof line);
    fputs(line, t->out); /* one write: lines from threads never interleave */
  } else if (t->nng) {
    if (t->len + sizeof rec > sizeof t->batch) trace_flush(t);
    memcpy(t->batch + t->len, rec, sizeof rec);
    t->len += sizeof rec;
    t->records++;
  }
  pthread_mutex_unlock(&t->mu);
  if (keep) m0__recent_put(rec); /* for the observer's page (runtime/recent.h) */
}

/* ---- control ----
 * A control is read member by member through ctl_members (one entry per
 * member a control may hold), into a trace_ctl, then applied under the
 * mutex (ctl_apply): a refused control changes nothing. */

typedef struct trace_ctl {
  json_t *on; /* NULL: not named */
  const char *to;
  int nactors, requests; /* -1: not named */
  uint32_t kinds;
  bool has_kinds;
  char actors[M0__TRACE_ACTORS][49];
  char *why;
  size_t whylen;
} trace_ctl;

/* Each returns false with why written: the control is refused. */
static bool ctl_on(trace_ctl *c, json_t *v) {
  c->on = v;
  if (json_is_boolean(v)) return true;
  snprintf(c->why, c->whylen, "\"on\" is true or false");
  return false;
}

static bool ctl_to(trace_ctl *c, json_t *v) {
  const char *u = json_string_value(v), *bad = u && m0__url_is_nng(u) ? m0__url_undialable(u) : "not an nng URL";
  if (!u || strlen(u) >= M0__URL_MAX || bad) {
    snprintf(c->why, c->whylen, "\"to\" cannot be dialed: %s", u ? bad : "not a string");
    return false;
  }
  c->to = u;
  return true;
}

static bool ctl_actors(trace_ctl *c, json_t *v) {
  if (!json_is_array(v) || json_array_size(v) > M0__TRACE_ACTORS) {
    snprintf(c->why, c->whylen, "\"actors\" is a list of at most %d actor names", M0__TRACE_ACTORS);
    return false;
  }
  size_t i;
  json_t *a;
  json_array_foreach(v, i, a) {
    const char *n = json_string_value(a);
    if (!n || strlen(n) >= sizeof c->actors[0] || !m0__actor_name_known(n)) {
      snprintf(c->why, c->whylen,
               "\"actors\": %.60s is no actor's name (loop.0, pool, pool.0.1, coordinator, an application actor's)",
               n ? n : "a non-string");
      return false;
    }
    snprintf(c->actors[i], sizeof c->actors[i], "%s", n);
  }
  c->nactors = (int)json_array_size(v);
  return true;
}

/* A kind's number by its name ("http": 0, a request served on a loop), or
 * M0__KIND_COUNT_ when n names none. */
static int ctl_kind(const char *n) {
  if (n && !strcmp(n, "http")) return 0;
  int k = 1;
  while (k < M0__KIND_COUNT_ && (!n || strcmp(n, m0__kind_name(k)))) k++;
  return k;
}

static bool ctl_kinds(trace_ctl *c, json_t *v) {
  size_t i;
  json_t *a;
  if (!json_is_array(v)) {
    snprintf(c->why, c->whylen, "\"kinds\" is a list of kinds (job, result...)");
    return false;
  }
  json_array_foreach(v, i, a) {
    const char *n = json_string_value(a);
    int k = ctl_kind(n);
    if (k == M0__KIND_COUNT_) {
      snprintf(c->why, c->whylen, "\"kinds\": %.40s is no kind", n ? n : "a non-string");
      return false;
    }
    c->kinds |= 1u << k;
  }
  if (!json_array_size(v)) c->kinds = UINT32_MAX; /* []: every kind */
  c->has_kinds = true;
  return true;
}

static bool ctl_requests(trace_ctl *c, json_t *v) {
  static const char *const names[] = {[REQUESTS_NONE] = "none", [REQUESTS_SAMPLED] = "sampled",
                                      [REQUESTS_ALL] = "all"};
  const char *w = json_string_value(v);
  for (int r = 0; w && r < (int)(sizeof names / sizeof names[0]); r++)
    if (!strcmp(w, names[r])) {
      c->requests = r;
      return true;
    }
  snprintf(c->why, c->whylen, "\"requests\" is \"sampled\", \"all\" or \"none\"");
  return false;
}

static const struct {
  const char *name;
  bool (*read)(trace_ctl *c, json_t *v);
} ctl_members[] = {
    {"on", ctl_on}, {"to", ctl_to}, {"actors", ctl_actors}, {"kinds", ctl_kinds}, {"requests", ctl_requests},
};

static bool ctl_read(trace_ctl *c, json_t *root) {
  const char *key;
  json_t *v;
  if (!json_is_object(root)) {
    snprintf(c->why, c->whylen, "a trace control is a JSON object");
    return false;
  }
  json_object_foreach(root, key, v) {
    size_t i = 0;
    while (i < sizeof ctl_members / sizeof ctl_members[0] && strcmp(key, ctl_members[i].name)) i++;
    if (i == sizeof ctl_members / sizeof ctl_members[0]) {
      snprintf(c->why, c->whylen, "unknown member \"%.40s\" (on, to, actors, kinds, requests)", key);
      return false;
    }
    if (!ctl_members[i].read(c, v)) return false;
  }
  return true;
}

/* Under t->mu: the control read, made the tracer's; false (why written)
 * when its sink cannot be, with nothing changed. */
static bool ctl_apply(m0__tracer *t, const trace_ctl *c) {
  bool on = json_is_true(c->on);
  if (c->to && t->out) {
    snprintf(c->why, c->whylen, "this host traces to stderr (--trace -): its records cannot go to %.100s", c->to);
    return false;
  }
  if (on && !c->to && !t->out && !t->url[0]) {
    snprintf(c->why, c->whylen, "nowhere to send the records: a control that switches tracing on names \"to\"");
    return false;
  }
  if (c->to && trace_dial(t, c->to) != 0) {
    snprintf(c->why, c->whylen, "\"to\" cannot be dialed: %.100s", c->to);
    return false;
  }
  if (c->nactors >= 0) {
    memcpy(t->actors, c->actors, sizeof c->actors);
    t->nactors = c->nactors;
  }
  if (c->has_kinds) atomic_store(&t->kinds, c->kinds);
  if (c->requests >= 0) atomic_store(&t->requests, c->requests);
  if (c->on) trace_switch(t, on);
  if (c->on && !on && t->nng) trace_forget(t);
  return true;
}

int m0__tracer_control(m0__tracer *t, const void *json, size_t len, char *why, size_t whylen) {
  json_error_t jerr;
  json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
  trace_ctl c = {.nactors = -1, .requests = -1, .why = why, .whylen = whylen};
  bool ok = ctl_read(&c, root);
  if (ok) {
    pthread_mutex_lock(&t->mu);
    ok = ctl_apply(t, &c);
    pthread_mutex_unlock(&t->mu);
  }
  json_decref(root);
  return ok ? 0 : M0__EINVALID;
}
