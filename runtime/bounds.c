/* Per-mailbox bounds: receive limits, pipe caps, the handshake reaper
 * (runtime/bounds.h has the design notes). */
#include "runtime/bounds.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/admit.h"
#include "runtime/envelope.h"
#include "base/errors.h"
#include "base/ids.h"
#include "base/limits.h"
#include "transport/topology.h"
#include "base/clock.h"

#define BOUNDS_PORTS 4 /* listeners per mailbox (its URL and m0__actor_listen_also's) */

size_t m0__bounds_recv_max(uint32_t actor) {
  size_t frame = 10 + M0__CHANNEL_MAX + M0__FRAME_MAX; /* bus/frame.c */
  switch (M0__ACTOR_ROLE(actor)) {
  case M0__ROLE_LOOP: return M0__ENV_HEADER + (frame > M0__CONTROL_MAX ? frame : M0__CONTROL_MAX) + M0__SEAL_LEN;
  case M0__ROLE_COORD:
  case M0__ROLE_WORKER:
  case M0__ROLE_PRODUCER:
  case M0__ROLE_POOL: return M0__ENV_HEADER + M0__CONTROL_MAX + M0__SEAL_LEN;
  default: return M0__ENV_HEADER + M0__ENV_MAX_PAYLOAD + M0__SEAL_LEN; /* an app actor's socket, an instance */
  }
}

/* One watched mailbox. */
typedef struct bounds_watch {
  struct bounds_watch *link;
  uint32_t sock, actor;
  nng_pipe_cb next;
  void *arg;
  int n;                            /* pipes from outside the process it holds (capped ones) */
  uint32_t held[M0__MAILBOX_PIPES]; /* their ids */
  int nports;
  uint16_t ports[BOUNDS_PORTS]; /* tcp ports it listens on (host order) */
} bounds_watch;

/* A tcp pipe of the process: its peer's address, so the reaper knows the
 * connection got through its greeting. */
typedef struct bounds_live {
  uint32_t pipe;
  int family; /* AF_INET, AF_INET6 */
  uint16_t port; /* network order, as nng and getpeername give it */
  uint8_t addr[16];
} bounds_live;

/* A connection the reaper saw without a pipe: since when. */
typedef struct bounds_seen {
  ino_t ino;
  int64_t since;
} bounds_seen;

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bounds_watch *watches;
  bounds_live *lives;
  size_t nlives, caplives;
  int ports; /* watched tcp ports over all watches: the reaper runs while > 0 */
  bool *stop; /* the running reaper's (NULL: none runs); each has its own, so one told to stop never
               * mistakes a successor's start for its own */
  pthread_t reaper;
} bounds = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* ---- pipes ---- */

static void bounds_live_add(uint32_t pipe, const nng_sockaddr *sa) {
  bounds_live l = {.pipe = pipe};
  if (sa->s_family == NNG_AF_INET) {
    l.family = AF_INET;
    l.port = sa->s_in.sa_port;
    memcpy(l.addr, &sa->s_in.sa_addr, 4);
  } else if (sa->s_family == NNG_AF_INET6) {
    l.family = AF_INET6;
    l.port = sa->s_in6.sa_port;
    memcpy(l.addr, sa->s_in6.sa_addr, 16);
  } else {
    return;
  }
  if (bounds.nlives == bounds.caplives) {
    size_t cap = bounds.caplives ? 2 * bounds.caplives : 64;
    bounds_live *grown = realloc(bounds.lives, cap * sizeof *grown);
    if (!grown) return; /* the reaper may then cut this one: it counts it as a handshake */
    bounds.lives = grown;
    bounds.caplives = cap;
  }
  bounds.lives[bounds.nlives++] = l;
}

static void bounds_live_remove(uint32_t pipe) {
  for (size_t i = 0; i < bounds.nlives; i++)
    if (bounds.lives[i].pipe == pipe) {
      bounds.lives[i] = bounds.lives[--bounds.nlives];
      return;
    }
}

static bool bounds_peer_name(const nng_sockaddr *sa, char *out, size_t n) {
  char host[INET6_ADDRSTRLEN];
  if (sa->s_family == NNG_AF_INET && inet_ntop(AF_INET, &sa->s_in.sa_addr, host, sizeof host))
    return snprintf(out, n, "tcp peer %s:%u", host, (unsigned)ntohs(sa->s_in.sa_port)) > 0;
  if (sa->s_family == NNG_AF_INET6 && inet_ntop(AF_INET6, sa->s_in6.sa_addr, host, sizeof host))
    return snprintf(out, n, "tcp peer [%s]:%u", host, (unsigned)ntohs(sa->s_in6.sa_port)) > 0;
  return snprintf(out, n, "an ipc peer") > 0;
}

/* ADD_PRE: a pipe from outside the process is held if there is room, else
 * closed before any message. Returns whether it goes on. */
static bool bounds_admit_pipe(bounds_watch *w, nng_pipe p) {
  nng_sockaddr sa;
  if (nng_pipe_get_addr(p, NNG_OPT_REMADDR, &sa) != 0) sa.s_family = NNG_AF_UNSPEC;
  if (sa.s_family == NNG_AF_INPROC) return true; /* this process's own */
  pthread_mutex_lock(&bounds.mu);
  bool room = w->next || w->n < M0__MAILBOX_PIPES; /* an app actor's socket: its slots cap it */
  if (room) {
    if (!w->next) w->held[w->n++] = (uint32_t)nng_pipe_id(p);
    bounds_live_add((uint32_t)nng_pipe_id(p), &sa);
  }
  pthread_mutex_unlock(&bounds.mu);
  if (room) return true;
  nng_pipe_close(p);
  char peer[80];
  bounds_peer_name(&sa, peer, sizeof peer);
  m0__refused(w->actor, M0__REFUSE_PIPES, 0, peer);
  return false;
}

static void bounds_on_pipe(nng_pipe p, nng_pipe_ev ev, void *arg) {
  bounds_watch *w = arg;
  if (ev == NNG_PIPE_EV_ADD_PRE && !bounds_admit_pipe(w, p)) return; /* the next hears none of it */
  if (ev == NNG_PIPE_EV_REM_POST) {
    uint32_t id = (uint32_t)nng_pipe_id(p);
    pthread_mutex_lock(&bounds.mu);
    for (int i = 0; i < w->n; i++)
      if (w->held[i] == id) {
        w->held[i] = w->held[--w->n];
        break;
      }
    bounds_live_remove(id);
    pthread_mutex_unlock(&bounds.mu);
  }
  if (w->next) w->next(p, ev, w->arg);
}

/* ---- the handshake reaper ---- */

/* Whether the connection's peer (from getpeername) is a live pipe's. */
static bool bounds_is_pipe(const struct sockaddr_storage *ss) {
  for (size_t i = 0; i < bounds.nlives; i++) {
    const bounds_live *l = &bounds.lives[i];
    if (ss->ss_family == AF_INET && l->family == AF_INET) {
      const struct sockaddr_in *in = (const void *)ss;
      if (in->sin_port == l->port && !memcmp(&in->sin_addr, l->addr, 4)) return true;
    } else if (ss->ss_family == AF_INET6 && l->family == AF_INET6) {
      const struct sockaddr_in6 *in6 = (const void *)ss;
      if (in6->sin6_port == l->port && !memcmp(&in6->sin6_addr, l->addr, 16)) return true;
    }
  }
  return false;
}

/* The watched mailbox listening on local port `port` (host order), or 0. */
static uint32_t bounds_port_actor(uint16_t port) {
  for (bounds_watch *w = bounds.watches; w; w = w->link)
    for (int i = 0; i < w->nports; i++)
      if (w->ports[i] == port) return w->actor;
  return 0;
}

/* One connection still greeting. */
typedef struct bounds_greeting {
  int fd;
  ino_t ino;
  int64_t since;
  uint16_t port;
  uint32_t actor;
  struct sockaddr_storage peer;
} bounds_greeting;

static int bounds_by_since(const void *a, const void *b) {
  const bounds_greeting *x = a, *y = b;
  return (x->since > y->since) - (x->since < y->since);
}

static int bounds_by_ino(const void *a, const void *b) {
  const bounds_seen *x = a, *y = b;
  return (x->ino > y->ino) - (x->ino < y->ino);
}

/* Whether fd is a connection accepted on a watched port that has no pipe:
 * fills g but its since. Called under bounds.mu. */
static bool bounds_greeting_of(int fd, bounds_greeting *g) {
  struct stat st;
  int listening = 0;
  socklen_t ol = sizeof listening;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ol) != 0 || listening) return false;
  struct sockaddr_storage local;
  socklen_t ll = sizeof local, pl = sizeof g->peer;
  if (getsockname(fd, (struct sockaddr *)&local, &ll) != 0) return false;
  uint16_t port;
  if (local.ss_family == AF_INET) port = ntohs(((struct sockaddr_in *)&local)->sin_port);
  else if (local.ss_family == AF_INET6) port = ntohs(((struct sockaddr_in6 *)&local)->sin6_port);
  else return false;
  if (!(g->actor = bounds_port_actor(port))) return false;
  if (getpeername(fd, (struct sockaddr *)&g->peer, &pl) != 0) return false;
  if (bounds_is_pipe(&g->peer)) return false;
  g->fd = fd;
  g->ino = st.st_ino;
  g->port = port;
  return true;
}

/* Shuts g down (the descriptor is still nng's: it sees the end and closes
 * it), counted and named. Through the reaper's own descriptor `spare`: g's
 * number is duplicated onto it (dup3 needs no free descriptor, and replaces
 * the previous one) and its inode checked there, so a number nng closed
 * since the scan, now another connection's, is never shut down. The spare
 * holds the socket, shut down, until the next cut. */
static void bounds_cut(const bounds_greeting *g, int spare) {
  struct stat st;
  if (spare < 0 || dup3(g->fd, spare, O_CLOEXEC) != spare) return;
  if (fstat(spare, &st) != 0 || st.st_ino != g->ino) return;
  shutdown(spare, SHUT_RDWR);
  char host[INET6_ADDRSTRLEN] = "?", peer[80];
  const struct sockaddr_in *in = (const void *)&g->peer;
  const struct sockaddr_in6 *in6 = (const void *)&g->peer;
  if (g->peer.ss_family == AF_INET) inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
  else inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
  snprintf(peer, sizeof peer, "tcp peer %s", host);
  m0__refused(g->actor, M0__REFUSE_HANDSHAKE, 0, peer);
}

/* One look: the connections greeting now, each with since carried from
 * the last look (*seen, sorted by inode, replaced by this look's); those
 * past the bound and the oldest beyond the cap per port are cut. */
static void bounds_scan(DIR *d, int spare, bounds_seen **seen, size_t *nseen) {
  rewinddir(d); /* procfs lists the descriptors as they are now */
  size_t n = 0, cap = 0;
  bounds_greeting *gs = NULL;
  int64_t now = m0__now_ms();
  pthread_mutex_lock(&bounds.mu);
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    bounds_greeting g;
    if (!bounds_greeting_of(atoi(e->d_name), &g)) continue;
    if (n == cap) {
      size_t c = cap ? 2 * cap : 64;
      bounds_greeting *grown = realloc(gs, c * sizeof *grown);
      if (!grown) break;
      gs = grown;
      cap = c;
    }
    bounds_seen key = {.ino = g.ino}, *was = *nseen ? bsearch(&key, *seen, *nseen, sizeof key, bounds_by_ino) : NULL;
    g.since = was ? was->since : now;
    gs[n++] = g;
  }
  pthread_mutex_unlock(&bounds.mu);
  if (n) qsort(gs, n, sizeof *gs, bounds_by_since); /* NULL when none: qsort's pointer must not be */
  bounds_seen *next = n ? malloc(n * sizeof *next) : NULL;
  size_t kept = 0;
  for (size_t i = 0; i < n; i++) {
    /* the newest M0__HANDSHAKES_MAX of its port are let be until the bound */
    size_t younger = 0;
    for (size_t j = i + 1; j < n && younger < M0__HANDSHAKES_MAX; j++) younger += gs[j].port == gs[i].port;
    if (now - gs[i].since >= M0__HANDSHAKE_MS || younger >= M0__HANDSHAKES_MAX) bounds_cut(&gs[i], spare);
    else if (next) next[kept++] = (bounds_seen){gs[i].ino, gs[i].since};
  }
  if (kept) qsort(next, kept, sizeof *next, bounds_by_ino);
  free(*seen);
  *seen = next;
  *nseen = kept;
  free(gs);
}

static void *bounds_reap(void *arg) {
  const bool *stop = arg;
  bounds_seen *seen = NULL;
  size_t nseen = 0;
  /* Opened once: when idle dials have taken every descriptor, the reaper
   * must still be able to look. */
  DIR *d = opendir("/proc/self/fd");
  int spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
  pthread_mutex_lock(&bounds.mu);
  while (!*stop) {
    pthread_mutex_unlock(&bounds.mu);
    if (d) bounds_scan(d, spare, &seen, &nseen);
    pthread_mutex_lock(&bounds.mu);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += M0__HANDSHAKE_TICK_MS * 1000000l;
    until.tv_sec += until.tv_nsec / 1000000000l;
    until.tv_nsec %= 1000000000l;
    if (!*stop) pthread_cond_timedwait(&bounds.cv, &bounds.mu, &until);
  }
  pthread_mutex_unlock(&bounds.mu);
  if (d) closedir(d);
  if (spare >= 0) close(spare);
  free(seen);
  return NULL;
}

/* ---- watching ---- */

/* A tcp or tls+tcp url's port (host order), or 0. */
static uint16_t bounds_url_port(const char *url) {
  m0__url_kind k = m0__url_kind_of(url);
  if (k != M0__URL_TCP && k != M0__URL_TLS_TCP) return 0;
  const char *colon = strrchr(url, ':');
  long v = colon ? strtol(colon + 1, NULL, 10) : 0;
  return v > 0 && v < 65536 ? (uint16_t)v : 0;
}

/* Adds url's port to w; the reaper starts with the process's first. Under
 * bounds.mu. */
static void bounds_add_port(bounds_watch *w, const char *url) {
  uint16_t port = bounds_url_port(url);
  if (!port || w->nports == BOUNDS_PORTS) return;
  w->ports[w->nports++] = port;
  if (bounds.ports++ == 0 && !bounds.stop && (bounds.stop = calloc(1, sizeof *bounds.stop)) &&
      pthread_create(&bounds.reaper, NULL, bounds_reap, bounds.stop) != 0) {
    free(bounds.stop);
    bounds.stop = NULL;
  }
}

int m0__bounds_watch(nng_socket s, uint32_t actor, const char *url, nng_pipe_cb next, void *arg) {
  bounds_watch *w = calloc(1, sizeof *w);
  if (!w) return M0__ENOMEM;
  w->sock = (uint32_t)nng_socket_id(s);
  w->actor = actor;
  w->next = next;
  w->arg = arg;
  for (int ev = NNG_PIPE_EV_ADD_PRE; ev <= NNG_PIPE_EV_REM_POST; ev++)
    nng_pipe_notify(s, (nng_pipe_ev)ev, bounds_on_pipe, w);
  pthread_mutex_lock(&bounds.mu);
  w->link = bounds.watches;
  bounds.watches = w;
  bounds_add_port(w, url);
  pthread_mutex_unlock(&bounds.mu);
  return 0;
}

void m0__bounds_listen_also(nng_socket s, const char *url) {
  pthread_mutex_lock(&bounds.mu);
  for (bounds_watch *w = bounds.watches; w; w = w->link)
    if (w->sock == (uint32_t)nng_socket_id(s)) bounds_add_port(w, url);
  pthread_mutex_unlock(&bounds.mu);
}

void m0__bounds_unwatch(nng_socket s) {
  bool *stop = NULL;
  bounds_watch *gone = NULL;
  pthread_mutex_lock(&bounds.mu);
  for (bounds_watch **at = &bounds.watches; *at; at = &(*at)->link)
    if ((*at)->sock == (uint32_t)nng_socket_id(s)) {
      gone = *at;
      *at = gone->link;
      break;
    }
  if (gone && gone->nports && (bounds.ports -= gone->nports) == 0 && bounds.stop) {
    stop = bounds.stop;
    *stop = true;
    bounds.stop = NULL;
    pthread_cond_broadcast(&bounds.cv);
  }
  pthread_t t = bounds.reaper;
  pthread_mutex_unlock(&bounds.mu);
  if (stop) {
    pthread_join(t, NULL);
    free(stop);
  }
  free(gone); /* its socket is closed: nng runs none of its callbacks now */
}
