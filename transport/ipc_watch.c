#include "transport/ipc_watch.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/ids.h"


/* The sockets at path in f, /proc/net/unix read again from its start (Num
 * RefCount Protocol Flags Type St Inode Path): how many listen (flags
 * __SO_ACCEPTCON, state 01), and in *held how many others (a listener's
 * accepted connections carry its path; the dialing ends carry none). */
static int unix_at(FILE *f, const char *path, int *held) {
  char line[4096 + 128];
  size_t n = strlen(path);
  int listening = 0;
  *held = 0;
  rewind(f);
  while (fgets(line, sizeof line, f)) {
    unsigned long flags = 0;
    unsigned st = 0;
    int at = 0;
    if (sscanf(line, "%*s %*s %*s %lx %*s %x %*s %n", &flags, &st, &at) < 2 || !at) continue;
    size_t len = strcspn(line + at, "\n");
    if (len != n || memcmp(line + at, path, n)) continue;
    if ((flags & 0x10000) && st == 1) listening++;
    else ++*held;
  }
  return listening;
}

bool m0__unix_listening(const char *path) {
  FILE *f = fopen("/proc/net/unix", "re");
  if (!f) return true;
  int held, n = unix_at(f, path, &held);
  fclose(f);
  return n > 0;
}

#if NNG_MAJOR_VERSION == 1 && NNG_MINOR_VERSION < 10

typedef struct {
  nng_socket sock;
  bool dialer;    /* a dialer (d), else a listener (l) */
  nng_listener l;
  nng_dialer d;
  char url[M0__URL_MAX];
  int64_t since;  /* stopped-looking since (0: not): a listener's more connections at its path than pipes, a
                   * dialer's no pipe and no try */
  uint64_t tries; /* a dialer's connections and failed tries, as last seen */
} ipc_watched;

typedef struct {
  pthread_t thread;
  int wake; /* an eventfd: stop */
  atomic_bool stop;
  /* /proc/net/unix, open for the thread's life: read again at each look
   * (a descriptor opened and closed each second by this thread would take
   * the numbers the loops' connections let go of, which ThreadSanitizer's
   * descriptor model reports as races with their close). */
  FILE *net;
} ipc_runner;

/* The process's watched listeners (ipc_watch.h, Design notes). */
static struct {
  pthread_mutex_t mu;
  ipc_watched *w;
  int n, cap;
  ipc_runner *run; /* the thread, while any listener is watched */
} watch = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int ipc_listen_now(nng_socket s, const char *url, nng_listener *l) {
  int rv = nng_listener_create(l, s, url);
  if (rv == 0 && (rv = nng_listener_start(*l, 0)) != 0) nng_listener_close(*l);
  return rv;
}

/* A listener found stopped: closed (the pipes it made with it: their
 * peers redial; nng unlinks its path) and made again at its URL, unless
 * another has bound the path by then (a next generation's: nng's listen
 * would connect to it to see, and close before the greeting). */
static void watched_relisten(ipc_watched *w) {
  struct stat st;
  nng_listener_close(w->l);
  int rv = lstat(w->url + strlen("ipc://"), &st) == 0 ? NNG_EADDRINUSE : ipc_listen_now(w->sock, w->url, &w->l);
  w->since = 0;
  fprintf(stderr,
          "m0: the ipc listener at %s had stopped taking connections (nng 1.5.2 stops one for good when a peer "
          "closes during its greeting): %s\n",
          w->url, rv == 0 ? "it listens there again, and its peers redial" : nng_strerror(rv));
  if (rv != 0) w->l = (nng_listener)NNG_LISTENER_INITIALIZER; /* watched no more */
}

/* The statistic `name` of the listener or dialer (scope) id, found by its
 * "id" (nng 1.5.2's nng_stat_find_listener and _dialer return the first
 * one's, whichever it is). */
static nng_stat *endpoint_stat(nng_stat *st, const char *scope, int id, const char *name) {
  for (; st; st = nng_stat_next(st)) {
    if (nng_stat_type(st) != NNG_STAT_SCOPE) continue;
    nng_stat *found = NULL;
    if (strcmp(nng_stat_name(st), scope) == 0) {
      nng_stat *c = nng_stat_child(st), *want = NULL;
      bool it = false;
      for (; c; c = nng_stat_next(c)) {
        if (strcmp(nng_stat_name(c), "id") == 0) it = nng_stat_value(c) == (uint64_t)id;
        else if (strcmp(nng_stat_name(c), name) == 0) want = c;
      }
      found = it ? want : NULL;
    } else {
      found = endpoint_stat(nng_stat_child(st), scope, id, name);
    }
    if (found) return found;
  }
  return NULL;
}

/* A listener looked at: one whose greeting failed once and that holds
 * more connections at its path than it has pipes for M0__IPC_STUCK_MS is
 * made again. */
static void listener_look(ipc_watched *w, nng_stat *snap, FILE *net, int64_t now) {
  int id = nng_listener_id(w->l), held;
  nng_stat *pipes = id > 0 ? endpoint_stat(snap, "listener", id, "pipes") : NULL;
  nng_stat *other = pipes ? endpoint_stat(snap, "listener", id, "other") : NULL;
  if (!other) return;
  (void)unix_at(net, w->url + strlen("ipc://"), &held);
  /* Stopped only after a greeting failed (counted as "other"): a peer
   * still greeting, however slow, is no stop. A listener made again starts
   * at 0, so the connections the stopped one took and kept (nng 1.5.2 shuts
   * them but never frees them) are not taken for a new stop. */
  if (held <= (int)nng_stat_value(pipes) || nng_stat_value(other) == 0) w->since = 0;
  else if (!w->since) w->since = now;
  else if (now - w->since >= M0__IPC_STUCK_MS) watched_relisten(w);
}

/* A dialer's tries: its connections and each way one failed. */
static uint64_t dialer_tries(nng_stat *snap, int id) {
  static const char *const counted[] = {"connect", "refused", "disconnect", "canceled", "other",
                                        "timeout", "proto",   "auth",       "oom",      "reject"};
  uint64_t n = 0;
  for (size_t i = 0; i < sizeof counted / sizeof *counted; i++) {
    nng_stat *st = endpoint_stat(snap, "dialer", id, counted[i]);
    if (st) n += nng_stat_value(st);
  }
  return n;
}

/* A dialer looked at: one with no pipe that has not tried for
 * M0__IPC_STUCK_MS has stopped (a live one tries again within its
 * reconnect time): closed (nothing of it is in flight) and dialed again.
 * false when it is gone (its socket closed): no longer watched. */
static bool dialer_look(ipc_watched *w, nng_stat *snap, int64_t now) {
  int id = nng_dialer_id(w->d);
  nng_stat *pipes = id > 0 ? endpoint_stat(snap, "dialer", id, "pipes") : NULL;
  if (!pipes) return false;
  uint64_t tries = dialer_tries(snap, id);
  if (nng_stat_value(pipes) > 0 || tries != w->tries) {
    w->tries = tries;
    w->since = 0;
  } else if (!w->since) {
    w->since = now;
  } else if (now - w->since >= M0__IPC_STUCK_MS) {
    nng_dialer_close(w->d);
    int rv = nng_dial(w->sock, w->url, &w->d, NNG_FLAG_NONBLOCK);
    fprintf(stderr,
            "m0: the ipc dialer to %s had stopped dialing (nng 1.5.2 stops one for good when its peer closes "
            "during the greeting): %s\n",
            w->url, rv == 0 ? "it dials again" : nng_strerror(rv));
    w->since = 0;
    w->tries = 0;
    return rv == 0;
  }
  return true;
}

/* Each endpoint looked at (under mu); the dialers gone are let go. */
static void watch_look(FILE *net) {
  nng_stat *snap;
  if (watch.n == 0 || nng_stats_get(&snap) != 0) return;
  int64_t now = m0__now_ms();
  for (int i = 0; i < watch.n;) {
    ipc_watched *w = &watch.w[i];
    if (!w->dialer) listener_look(w, snap, net, now);
    if (w->dialer && !dialer_look(w, snap, now)) watch.w[i] = watch.w[--watch.n];
    else i++;
  }
  nng_stats_free(snap);
}

static void *watch_thread(void *arg) {
  ipc_runner *r = arg;
  struct pollfd pf = {.fd = r->wake, .events = POLLIN};
  while (!atomic_load(&r->stop)) {
    if (poll(&pf, 1, M0__IPC_LOOK_MS) < 0 && errno != EINTR) break;
    pthread_mutex_lock(&watch.mu);
    watch_look(r->net);
    pthread_mutex_unlock(&watch.mu);
  }
  return NULL;
}

static void runner_wake(ipc_runner *r) {
  uint64_t one = 1;
  if (write(r->wake, &one, sizeof one) < 0) { /* a full counter wakes already */
  }
}

/* Under mu: the thread, when none runs. NULL without memory or a thread. */
static ipc_runner *runner_start(void) {
  ipc_runner *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  atomic_init(&r->stop, false);
  r->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  r->net = fopen("/proc/net/unix", "re"); /* none: nothing can be watched */
  if (r->wake < 0 || !r->net || pthread_create(&r->thread, NULL, watch_thread, r) != 0) {
    if (r->wake >= 0) close(r->wake);
    if (r->net) fclose(r->net);
    free(r);
    return NULL;
  }
  return r;
}

/* Under mu: a place for one more endpoint, the thread started if none
 * runs; NULL without memory (the endpoint is then not watched). */
static ipc_watched *watch_add(nng_socket s, const char *url) {
  if (watch.n == watch.cap) {
    int cap = watch.cap ? 2 * watch.cap : 8;
    ipc_watched *more = realloc(watch.w, (size_t)cap * sizeof *more);
    if (more) watch.w = more, watch.cap = cap;
  }
  if (watch.n == watch.cap || strlen(url) >= M0__URL_MAX) return NULL;
  if (!watch.run) watch.run = runner_start();
  ipc_watched *w = &watch.w[watch.n++];
  *w = (ipc_watched){.sock = s};
  snprintf(w->url, sizeof w->url, "%s", url);
  return w;
}

int m0__ipc_listen(nng_socket s, const char *url) {
  nng_listener l;
  int rv = ipc_listen_now(s, url, &l);
  if (rv != 0) return rv;
  pthread_mutex_lock(&watch.mu);
  ipc_watched *w = watch_add(s, url);
  if (w) w->l = l;
  pthread_mutex_unlock(&watch.mu);
  return 0;
}

int m0__ipc_dial(nng_socket s, const char *url, int flags) {
  nng_dialer d;
  int rv = nng_dial(s, url, &d, flags);
  if (rv != 0) return rv;
  pthread_mutex_lock(&watch.mu);
  ipc_watched *w = watch_add(s, url);
  if (w) w->dialer = true, w->d = d;
  pthread_mutex_unlock(&watch.mu);
  return 0;
}

void m0__ipc_unwatch(nng_socket s) {
  ipc_runner *done = NULL;
  pthread_mutex_lock(&watch.mu);
  for (int i = 0; i < watch.n;)
    if (nng_socket_id(watch.w[i].sock) == nng_socket_id(s)) watch.w[i] = watch.w[--watch.n];
    else i++;
  if (watch.n == 0) {
    done = watch.run;
    watch.run = NULL;
    free(watch.w);
    watch.w = NULL;
    watch.cap = 0;
  }
  pthread_mutex_unlock(&watch.mu);
  if (done) { /* joined outside mu: it takes mu each turn */
    atomic_store(&done->stop, true);
    runner_wake(done);
    pthread_join(done->thread, NULL);
    close(done->wake);
    fclose(done->net);
    free(done);
  }
}

#else /* nng 1.10 and later accept on after a peer gone during its greeting */

int m0__ipc_listen(nng_socket s, const char *url) { return nng_listen(s, url, NULL, 0); }

int m0__ipc_dial(nng_socket s, const char *url, int flags) { return nng_dial(s, url, NULL, flags); }

void m0__ipc_unwatch(nng_socket s) { (void)s; }

#endif
