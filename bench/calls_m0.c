/* bench/calls_m0.c — m0's side of bench/run_calls: call round trips and
 * send throughput from an embedding program's main thread to an
 * application actor "pong", and the floors under them.
 *
 *   m0_calls call N SIZE CALLER_CPU ACTOR_CPU     pong on a thread of the host
 *   m0_calls send N SIZE CALLER_CPU ACTOR_CPU     m0_send N times, then a call for the count
 *   m0_calls ipc-call N SIZE CALLER_CPU ACTOR_CPU pong in a second process over ipc
 *   m0_calls floor N SIZE CALLER_CPU ACTOR_CPU    eventfd, condvar, inbox and spin ping-pong, no host
 *   m0_calls floor-send N SIZE CALLER_CPU ACTOR_CPU  N messages through m0's inbox alone
 *   m0_calls floor-ipc N SIZE CALLER_CPU ACTOR_CPU   a unix socketpair ping-pong between two processes
 *   m0_calls actor URL CPU                        (ipc-call's child: m0_actor_run)
 *
 * Prints one line of JSON on stdout; exits 1 on any failure (a refused
 * call, a wrong answer, a lost message), saying it on stderr.
 *
 * Pinning: main pins itself to ACTOR_CPU before m0_host_start, so every
 * thread the host starts (the instance's, the loop's, nng's) inherits that
 * CPU, then moves itself to CALLER_CPU: one side per CPU, as CAF's and
 * Erlang's arms of the script are pinned.
 *
 * ipc-call: pong is placed "external" at an ipc:// URL (written when an
 * embedded host refused "process"; it spawns such instances now) and this
 * program starts itself as the instance (fork then exec, as the host does
 * for "process"), which runs m0_actor_run exactly as a spawned process
 * instance does: the same dial, the same wire, the same host-side path. */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "m0/m0.h"
#include "runtime/inbox.h"

enum { CALLS_PING = 1, CALLS_TICK = 2, CALLS_COUNT = 3 };
#define CALLS_TIMEOUT_MS 5000
#define CALLS_LIVE_WAIT_MS 20000

typedef struct calls_pong {
  uint64_t ticks;
} calls_pong;

static void *calls_make(const m0_actor_ctx *ctx, char *err, size_t errlen) {
  (void)ctx;
  calls_pong *p = calloc(1, sizeof *p);
  if (!p) snprintf(err, errlen, "no memory");
  return p;
}

static void calls_free(void *state) { free(state); }

static void calls_message(void *state, uint32_t type, m0_str data, m0_reply *rep) {
  calls_pong *p = state;
  if (type == CALLS_TICK) p->ticks++;
  if (!rep) return;
  if (type == CALLS_COUNT) m0_reply_message(rep, type, &p->ticks, sizeof p->ticks);
  else m0_reply_message(rep, type, data.p, data.n);
}

/* A kind must answer requests too; pong serves no route. */
static void calls_receive(void *state, const m0_request *req, m0_reply *rep) {
  (void)state;
  (void)req;
  m0_reply_send(rep, 404, NULL, NULL, 0);
}

static const m0_actor_kind calls_kinds[] = {
    {.name = "pong", .make = calls_make, .receive = calls_receive, .free = calls_free, .message = calls_message}};
/* An application must answer HTTP too; the bench sends it nothing. */
static void calls_handle(void *state, const m0_request *req, m0_response *res) {
  (void)state;
  (void)req;
  m0_respond(res, 404, NULL, NULL, 0, M0_BODY_STATIC);
}

static const m0_app calls_app = {.name = "calls", .handle = calls_handle, .actors = calls_kinds, .nactors = 1};

static int64_t calls_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int calls_pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  int rv = pthread_setaffinity_np(pthread_self(), sizeof s, &s);
  if (rv) fprintf(stderr, "m0_calls: cannot pin to CPU %d: %s\n", cpu, strerror(rv));
  return rv ? -1 : 0;
}

static int calls_cmp(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Median, p99 (nearest rank) and the rate of n round trips timed in ns[],
 * as one JSON line. */
static void calls_print_rtt(const char *what, int64_t *ns, long n, int64_t total_ns, long extra) {
  qsort(ns, (size_t)n, sizeof *ns, calls_cmp);
  long k99 = (long)((double)n * 0.99 + 0.5) - 1;
  if (k99 < 0) k99 = 0;
  printf("{\"arm\": \"%s\", \"n\": %ld, \"median_us\": %.3f, \"p99_us\": %.3f, \"per_s\": %.1f, "
         "\"refused\": %ld}\n",
         what, n, (double)ns[n / 2] / 1e3, (double)ns[k99] / 1e3, (double)n * 1e9 / (double)total_ns, extra);
}

/* n sequential calls of size bytes to "pong", each answer checked. */
static int calls_loop(m0_host *h, const char *what, long n, size_t size) {
  int64_t *ns = malloc((size_t)n * sizeof *ns);
  char *buf = malloc(size ? size : 1);
  if (!ns || !buf) return -1;
  for (size_t i = 0; i < size; i++) buf[i] = (char)('a' + i % 26);
  int rv = 0;
  int64_t t0 = calls_now_ns();
  for (long i = 0; i < n && rv == 0; i++) {
    m0_message m;
    buf[0] = (char)i;
    int64_t a = calls_now_ns();
    if (m0_call(h, "pong", CALLS_PING, buf, size, CALLS_TIMEOUT_MS, &m) != 0) {
      fprintf(stderr, "m0_calls: call %ld of %ld: %s\n", i + 1, n, strerror(errno));
      rv = -1;
      break;
    }
    ns[i] = calls_now_ns() - a;
    if (m.type != CALLS_PING || m.data.n != size || memcmp(m.data.p, buf, size) != 0) {
      fprintf(stderr, "m0_calls: call %ld of %ld: a wrong answer (type %u, %zu bytes)\n", i + 1, n, m.type, m.data.n);
      rv = -1;
    }
    m0_message_free(&m);
  }
  if (rv == 0) calls_print_rtt(what, ns, n, calls_now_ns() - t0, 0);
  free(ns);
  free(buf);
  return rv;
}

/* The instance's tick count, by a call. -1 when refused. */
static int64_t calls_count(m0_host *h) {
  m0_message m;
  if (m0_call(h, "pong", CALLS_COUNT, NULL, 0, CALLS_TIMEOUT_MS, &m) != 0) {
    fprintf(stderr, "m0_calls: the count call: %s\n", strerror(errno));
    return -1;
  }
  uint64_t c = 0;
  if (m.data.n == sizeof c) memcpy(&c, m.data.p, sizeof c);
  m0_message_free(&m);
  return (int64_t)c;
}

/* n sends of size bytes (EAGAIN retried and counted), then a call for the
 * count: the whole run is timed, and the count must be n. */
static int calls_send(m0_host *h, long n, size_t size) {
  char buf[65536] = {0};
  if (size > sizeof buf) return -1;
  int64_t base = calls_count(h);
  if (base < 0) return -1;
  long refused = 0;
  int64_t t0 = calls_now_ns();
  for (long i = 0; i < n; i++) {
    while (m0_send(h, "pong", CALLS_TICK, buf, size) != 0) {
      if (errno != EAGAIN) {
        fprintf(stderr, "m0_calls: send %ld of %ld: %s\n", i + 1, n, strerror(errno));
        return -1;
      }
      refused++;
    }
  }
  int64_t got = calls_count(h);
  int64_t total = calls_now_ns() - t0;
  if (got - base != n) {
    fprintf(stderr, "m0_calls: %ld sent, the actor counted %lld\n", n, (long long)(got - base));
    return -1;
  }
  printf("{\"arm\": \"m0-send\", \"n\": %ld, \"seconds\": %.6f, \"per_s\": %.1f, \"refused\": %ld}\n", n,
         (double)total / 1e9, (double)n * 1e9 / (double)total, refused);
  return 0;
}

/* Retries a call until pong answers (an external instance dials in after
 * the host starts; a thread one is live once its make returned), at most
 * CALLS_LIVE_WAIT_MS. */
static int calls_wait_live(m0_host *h) {
  int64_t until = calls_now_ns() + (int64_t)CALLS_LIVE_WAIT_MS * 1000000;
  while (calls_now_ns() < until) {
    m0_message m;
    if (m0_call(h, "pong", CALLS_PING, "x", 1, 1000, &m) == 0) {
      m0_message_free(&m);
      return 0;
    }
    if (errno != EHOSTDOWN && errno != ETIMEDOUT) break;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  fprintf(stderr, "m0_calls: pong never answered: %s\n", strerror(errno));
  return -1;
}

/* The ipc case: a topology file placing pong external at an ipc URL in a
 * fresh directory, written to path. */
static int calls_topology(char *dir, char *url, size_t urln, char *path, size_t pathn) {
  if (!mkdtemp(dir)) return -1;
  snprintf(url, urln, "ipc://%s/pong.sock", dir);
  snprintf(path, pathn, "%s/topo.json", dir);
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "{\"app_actors\": [{\"name\": \"pong\", \"placement\": \"external\", \"url\": \"%s\"}]}\n", url);
  return fclose(f);
}

static pid_t calls_spawn_actor(const char *url, int cpu) {
  char cpus[16];
  snprintf(cpus, sizeof cpus, "%d", cpu);
  pid_t pid = fork();
  if (pid == 0) {
    execl("/proc/self/exe", "m0_calls", "actor", url, cpus, (char *)NULL);
    _exit(127);
  }
  return pid;
}

static int calls_host(const char *mode, long n, size_t size, int caller_cpu, int actor_cpu) {
  bool ipc = !strcmp(mode, "ipc-call");
  char dir[] = "/tmp/m0-calls-XXXXXX", url[256], topo[256];
  if (ipc && calls_topology(dir, url, sizeof url, topo, sizeof topo) != 0) return -1;
  char *argv[] = {"calls", "--port", "0", "--host", "127.0.0.1", ipc ? "--topology" : NULL, topo, NULL};
  char err[1024] = "";
  int code = 0;
  if (calls_pin(ipc ? caller_cpu : actor_cpu) != 0) return -1;
  m0_host *h = m0_host_start(&calls_app, NULL, ipc ? 7 : 5, argv, &code, err, sizeof err);
  if (!h) {
    fprintf(stderr, "m0_calls: the host did not start (exit %d): %s\n", code, err);
    return -1;
  }
  pid_t child = ipc ? calls_spawn_actor(url, actor_cpu) : 0;
  int rv = calls_pin(caller_cpu);
  /* m0_host_start returns before a thread instance is live (its make runs
   * on its own thread): a call at once can fail EHOSTDOWN (1 in 100 here,
   * pinned on a busy machine; reported). Both cases wait for pong. */
  if (rv == 0) rv = calls_wait_live(h);
  if (rv == 0 && !strcmp(mode, "send")) rv = calls_send(h, n, size);
  else if (rv == 0) rv = calls_loop(h, ipc ? "m0-ipc-call" : "m0-call", n, size);
  if (m0_host_stop(h) != 0) rv = -1;
  if (child > 0) {
    kill(child, SIGTERM);
    int st = 0;
    waitpid(child, &st, 0);
  }
  if (ipc) {
    unlink(topo);
    rmdir(dir);
  }
  return rv;
}

/* ---- the floors: two threads ping-ponging without the host ---- */

typedef struct calls_floor {
  int cpu;
  long n;
  int ping, pong;            /* eventfds */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int turn;                  /* 0: the caller's, 1: the answerer's */
} calls_floor;

static void *calls_floor_efd(void *arg) {
  calls_floor *f = arg;
  calls_pin(f->cpu);
  uint64_t v;
  for (long i = 0; i < f->n; i++)
    if (read(f->ping, &v, sizeof v) != sizeof v || write(f->pong, &v, sizeof v) != sizeof v) break;
  return NULL;
}

static void *calls_floor_cv(void *arg) {
  calls_floor *f = arg;
  calls_pin(f->cpu);
  for (long i = 0; i < f->n; i++) {
    pthread_mutex_lock(&f->mu);
    while (f->turn != 1) pthread_cond_wait(&f->cv, &f->mu);
    f->turn = 0;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
  }
  return NULL;
}

/* The spin floor: each side spins on an atomic turn, never sleeping (what
 * Erlang's schedulers do for a while before they sleep): the cache line's
 * trip between the CPUs, and a CPU burnt on each side. */
typedef struct calls_spin {
  int cpu;
  long n;
  _Atomic long turn; /* 2i+1: the answerer's, 2i+2: the caller's */
} calls_spin;

static void *calls_spin_answer(void *arg) {
  calls_spin *f = arg;
  calls_pin(f->cpu);
  for (long i = 0; i < f->n; i++) {
    while (atomic_load_explicit(&f->turn, memory_order_acquire) != 2 * i + 1) {
    }
    atomic_store_explicit(&f->turn, 2 * i + 2, memory_order_release);
  }
  return NULL;
}

static int calls_spin_run(long n, int caller_cpu, int actor_cpu) {
  calls_spin f = {.cpu = actor_cpu, .n = n};
  int64_t *ns = malloc((size_t)n * sizeof *ns);
  pthread_t t;
  if (!ns || pthread_create(&t, NULL, calls_spin_answer, &f)) return -1;
  calls_pin(caller_cpu);
  int64_t t0 = calls_now_ns();
  for (long i = 0; i < n; i++) {
    int64_t a = calls_now_ns();
    atomic_store_explicit(&f.turn, 2 * i + 1, memory_order_release);
    while (atomic_load_explicit(&f.turn, memory_order_acquire) != 2 * i + 2) {
    }
    ns[i] = calls_now_ns() - a;
  }
  int64_t total = calls_now_ns() - t0;
  pthread_join(t, NULL);
  calls_print_rtt("floor-spin", ns, n, total, 0);
  free(ns);
  return 0;
}

/* The across-process floor: size bytes over a unix stream socketpair to a
 * forked child on actor_cpu that writes them back; one write and one read
 * each way, two processes asleep in turn. */
static int calls_unix_run(long n, size_t size, int caller_cpu, int actor_cpu) {
  int sv[2];
  char buf[65536] = {0};
  if (size > sizeof buf || size == 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    calls_pin(actor_cpu);
    ssize_t k;
    while ((k = read(sv[1], buf, sizeof buf)) > 0)
      if (write(sv[1], buf, (size_t)k) != k) break;
    _exit(0);
  }
  close(sv[1]);
  int64_t *ns = malloc((size_t)n * sizeof *ns);
  if (pid < 0 || !ns || calls_pin(caller_cpu) != 0) return -1;
  int64_t t0 = calls_now_ns();
  int rv = 0;
  for (long i = 0; i < n && rv == 0; i++) {
    int64_t a = calls_now_ns();
    size_t got = 0;
    if (write(sv[0], buf, size) != (ssize_t)size) rv = -1;
    while (rv == 0 && got < size) {
      ssize_t k = read(sv[0], buf + got, size - got);
      if (k <= 0) rv = -1;
      else got += (size_t)k;
    }
    ns[i] = calls_now_ns() - a;
  }
  int64_t total = calls_now_ns() - t0;
  close(sv[0]);
  waitpid(pid, NULL, 0);
  if (rv == 0) calls_print_rtt("floor-unix", ns, n, total, 0);
  free(ns);
  return rv;
}

static int calls_floor_run(const char *what, bool efd, long n, int caller_cpu, int actor_cpu) {
  calls_floor f = {.cpu = actor_cpu, .n = n, .ping = eventfd(0, 0), .pong = eventfd(0, 0)};
  pthread_mutex_init(&f.mu, NULL);
  pthread_cond_init(&f.cv, NULL);
  int64_t *ns = malloc((size_t)n * sizeof *ns);
  pthread_t t;
  if (!ns || f.ping < 0 || f.pong < 0 || pthread_create(&t, NULL, efd ? calls_floor_efd : calls_floor_cv, &f)) return -1;
  calls_pin(caller_cpu);
  int64_t t0 = calls_now_ns();
  for (long i = 0; i < n; i++) {
    int64_t a = calls_now_ns();
    uint64_t v = 1;
    if (efd) {
      if (write(f.ping, &v, sizeof v) != sizeof v || read(f.pong, &v, sizeof v) != sizeof v) return -1;
    } else {
      pthread_mutex_lock(&f.mu);
      f.turn = 1;
      pthread_cond_signal(&f.cv);
      while (f.turn != 0) pthread_cond_wait(&f.cv, &f.mu);
      pthread_mutex_unlock(&f.mu);
    }
    ns[i] = calls_now_ns() - a;
  }
  int64_t total = calls_now_ns() - t0;
  pthread_join(t, NULL);
  calls_print_rtt(what, ns, n, total, 0);
  free(ns);
  close(f.ping);
  close(f.pong);
  return 0;
}

/* ---- the inbox floor: m0's own primitive (runtime/inbox.h: a mutex ring
 * of nng messages, an eventfd wake when it goes from empty), no host: a
 * thread instance's inbox as m0_send fills it, less the name, the caller,
 * the envelope, the edge counters and the instance's loop. ---- */

typedef struct calls_inbox_floor {
  int cpu;
  long n;
  m0__inbox in, back; /* back: the answers of the call floor */
  _Atomic long queued;
  bool answer;
} calls_inbox_floor;

static void calls_inbox_wait(m0__inbox *b) {
  struct pollfd pf = {.fd = b->efd, .events = POLLIN};
  (void)poll(&pf, 1, 1000);
}

static void *calls_inbox_receiver(void *arg) {
  calls_inbox_floor *f = arg;
  calls_pin(f->cpu);
  for (long got = 0; got < f->n;) {
    nng_msg *m = m0__inbox_take(&f->in);
    if (!m) {
      calls_inbox_wait(&f->in);
      continue;
    }
    got++;
    atomic_fetch_sub(&f->queued, 1);
    if (f->answer && m0__inbox_put(&f->back, m) == 0) continue;
    nng_msg_free(m);
  }
  return NULL;
}

static int calls_inbox_floor_run(bool call, long n, size_t size, int caller_cpu, int actor_cpu) {
  calls_inbox_floor f = {.cpu = actor_cpu, .n = n, .answer = call};
  int64_t *ns = call ? malloc((size_t)n * sizeof *ns) : NULL;
  if ((call && !ns) || m0__inbox_init(&f.in) || m0__inbox_init(&f.back)) return -1;
  pthread_t t;
  if (pthread_create(&t, NULL, calls_inbox_receiver, &f)) return -1;
  calls_pin(caller_cpu);
  long refused = 0;
  int64_t t0 = calls_now_ns();
  for (long i = 0; i < n; i++) {
    int64_t a = calls_now_ns();
    nng_msg *m;
    if (nng_msg_alloc(&m, size) != 0) return -1;
    while (atomic_load(&f.queued) >= 1024) refused++; /* the default queue bound */
    atomic_fetch_add(&f.queued, 1);
    if (m0__inbox_put(&f.in, m) != 0) return -1;
    if (!call) continue;
    while (!(m = m0__inbox_take(&f.back))) calls_inbox_wait(&f.back);
    nng_msg_free(m);
    ns[i] = calls_now_ns() - a;
  }
  pthread_join(t, NULL);
  int64_t total = calls_now_ns() - t0;
  if (call) calls_print_rtt("floor-inbox", ns, n, total, 0);
  else
    printf("{\"arm\": \"floor-inbox-send\", \"n\": %ld, \"seconds\": %.6f, \"per_s\": %.1f, \"refused\": %ld}\n", n,
           (double)total / 1e9, (double)n * 1e9 / (double)total, refused);
  free(ns);
  m0__inbox_fini(&f.in);
  m0__inbox_fini(&f.back);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 4 && !strcmp(argv[1], "actor")) {
    if (calls_pin(atoi(argv[3])) != 0) return 1;
    return m0_actor_run(&calls_kinds[0], argv[2], 0);
  }
  if (argc != 6) {
    fprintf(stderr, "usage: m0_calls call|send|ipc-call|floor|floor-send|floor-ipc N SIZE CALLER_CPU ACTOR_CPU\n");
    return 2;
  }
  long n = atol(argv[2]);
  size_t size = (size_t)atol(argv[3]);
  int caller = atoi(argv[4]), actor = atoi(argv[5]);
  if (n < 1) return 2;
  if (!strcmp(argv[1], "floor")) {
    int rv = calls_floor_run("floor-eventfd", true, n, caller, actor);
    if (rv == 0) rv = calls_floor_run("floor-condvar", false, n, caller, actor);
    if (rv == 0) rv = calls_inbox_floor_run(true, n, size, caller, actor);
    if (rv == 0) rv = calls_spin_run(n, caller, actor);
    return rv ? 1 : 0;
  }
  if (!strcmp(argv[1], "floor-ipc")) return calls_unix_run(n, size, caller, actor) ? 1 : 0;
  if (!strcmp(argv[1], "floor-send")) return calls_inbox_floor_run(false, n, size, caller, actor) ? 1 : 0;
  if (strcmp(argv[1], "call") && strcmp(argv[1], "send") && strcmp(argv[1], "ipc-call")) return 2;
  return calls_host(argv[1], n, size, caller, actor) ? 1 : 0;
}
