/* The publisher: frames to every loop on the bus (bus/publisher.h), the
 * shared counter their ids come from, and the same publisher attached from
 * another program (m0pub) through the run directory. m0_publish and
 * m0_publisher_attach, which choose between it and the fleet's bus, are in
 * bus/publish.c: the bus fans out through this publisher, so this file
 * does not know the bus. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bus/publisher.h"
#include "base/errors.h"

int m0__publisher_open(m0_publisher *pub, const m0__topology *t, m0__page *page, m0__tracer *trace,
                       uint32_t sender) {
  memset(pub, 0, sizeof *pub);
  pthread_mutex_init(&pub->mu, NULL);
  pub->page = page;
  pub->topo = t;
  /* A sender only: frames are addressed from this actor, which has no
   * mailbox of its own here. */
  pub->self.id = sender;
  pub->self.trace = trace;
  pub->loops = calloc((size_t)t->loops, sizeof *pub->loops);
  if (!pub->loops) return M0__ENOMEM;
  pub->nloops = t->loops; /* each dialed by m0__publisher_connect */
  return 0;
}

int m0__publisher_connect(m0_publisher *pub, int i) {
  const m0__actor_desc *l = m0__topology_find(pub->topo, M0__ACTOR_ID(M0__ROLE_LOOP, i));
  pthread_mutex_lock(&pub->mu);
  m0__peer_close(&pub->loops[i]);
  int rv = m0__peer_open(&pub->loops[i], l->id, l->url, 0);
  pthread_mutex_unlock(&pub->mu);
  return rv;
}

void m0__publisher_disconnect(m0_publisher *pub, int i) {
  pthread_mutex_lock(&pub->mu);
  m0__peer_close(&pub->loops[i]);
  pthread_mutex_unlock(&pub->mu);
}

void m0__publisher_close(m0_publisher *pub) {
  for (int i = 0; i < pub->nloops; i++) m0__peer_close(&pub->loops[i]);
  free(pub->loops);
  pub->loops = NULL;
  pub->nloops = 0;
  pthread_mutex_destroy(&pub->mu);
}

/* With a bus the stream numbers every frame, and the counter follows the
 * fleet's ids (bus/bus.c): nothing is taken from it here. */
uint64_t m0_next_id(m0_publisher *pub) { return pub->linked || pub->bus ? 0 : m0__page_next_id(pub->page); }

void m0__publisher_link(m0_publisher *pub, nng_socket link, uint32_t sender) {
  memset(pub, 0, sizeof *pub);
  pthread_mutex_init(&pub->mu, NULL);
  pub->linked = true;
  pub->link = link;
  pub->self.id = sender;
}

/* The directory of the generation serving now (host/reload.h): after a
 * reload, <run-dir>/gN. */
static void generation_dir(const m0__page *page, const char *run_dir, char *dir, size_t n) {
  uint64_t gen = atomic_load(&page->head->generation);
  if (gen > 1) snprintf(dir, n, "%s/g%llu", run_dir, (unsigned long long)gen);
  else snprintf(dir, n, "%s", run_dir);
}

m0_publisher *m0__publisher_attach_loops(const char *run_dir, char *err, size_t errlen) {
  m0_publisher *pub = calloc(1, sizeof *pub);
  m0__page *page = calloc(1, sizeof *page);
  if (!pub || !page || m0__page_attach(page, run_dir, err, errlen) != 0) {
    free(pub);
    free(page);
    return NULL;
  }
  pthread_mutex_init(&pub->mu, NULL);
  pub->page = page;
  pub->self.id = M0__ACTOR_ID(M0__ROLE_EXTERNAL, getpid());
  int n = (int)page->head->loops;
  pub->loops = calloc((size_t)n, sizeof *pub->loops);
  char dir[PATH_MAX + 32];
  generation_dir(page, run_dir, dir, sizeof dir);
  for (int i = 0; pub->loops && i < n; i++) {
    char url[M0__URL_MAX];
    if (m0__topology_outside_url(url, sizeof url, dir, i) != 0) {
      snprintf(err, errlen, "the run directory's path is too long: %s", run_dir);
      m0_publisher_detach(pub);
      return NULL;
    }
    /* A blocking send with a bound: the frame is handed to the connection
     * before this short-lived program closes its socket. */
    if (m0__peer_open(&pub->loops[i], M0__ACTOR_ID(M0__ROLE_LOOP, i), url, 1000) != 0) {
      snprintf(err, errlen, "cannot reach loop %d at %s", i, url);
      m0_publisher_detach(pub);
      return NULL;
    }
    pub->nloops++;
  }
  return pub;
}

bool m0__publisher_coordinator(m0_publisher *pub, const char *run_dir, m0__peer *p) {
  char dir[PATH_MAX + 32], path[PATH_MAX + 64], url[M0__URL_MAX];
  generation_dir(pub->page, run_dir, dir, sizeof dir);
  snprintf(path, sizeof path, "%s/coordinator.sock", dir);
  struct stat sb;
  if (stat(path, &sb) != 0 || !S_ISSOCK(sb.st_mode)) return false;
  if ((size_t)snprintf(url, sizeof url, "%s%s", m0__url_prefix(M0__URL_IPC), path) >= sizeof url) return false;
  return m0__peer_open(p, M0__ACTOR_ID(M0__ROLE_COORD, 0), url, 1000) == 0;
}

int m0__publisher_tell(m0_publisher *pub, int kind, const void *payload, size_t len) {
  int told = 0;
  pthread_mutex_lock(&pub->mu);
  for (int i = 0; i < pub->nloops; i++) told += pub->loops[i].open && m0__send(&pub->self, &pub->loops[i], kind, 0, 0, payload, len) == 0;
  pthread_mutex_unlock(&pub->mu);
  return told;
}

int m0_stats(m0_publisher *pub, m0_loop_stats *out, int max) {
  int n = (int)pub->page->head->loops;
  for (int i = 0; i < n && i < max; i++) {
    m0__loop_line *ln = &pub->page->lines[i];
    out[i] = (m0_loop_stats){atomic_load(&ln->requests), atomic_load(&ln->open), atomic_load(&ln->streams),
                             atomic_load(&ln->handoffs), atomic_load(&ln->queued), atomic_load(&ln->dropped)};
  }
  return n;
}

bool m0__publisher_fanout(m0_publisher *pub, const char *channel, size_t cl, uint64_t id, const void *frame,
                          size_t len) {
  /* The frame is written once, into the message for the first loop; each
   * other loop gets a copy of that message (nng sends a message once), and
   * the last loop the original. */
  nng_msg *m;
  if (m0__msg_new(&m, 10 + cl + len) != 0 || m0__frame_encode(m, id, channel, cl, frame, len) != 0) {
    if (m) nng_msg_free(m);
    atomic_fetch_add(&pub->refused, 1);
    atomic_fetch_add(&pub->page->head->refused, 1);
    return false;
  }
  bool ok = true;
  pthread_mutex_lock(&pub->mu);
  int last = -1;
  for (int i = 0; i < pub->nloops; i++)
    if (pub->loops[i].open) last = i;
  for (int i = 0; i < pub->nloops; i++) {
    if (!pub->loops[i].open) { /* a loop not dialed (yet, or any more) is a refusal too */
      ok = false;
      continue;
    }
    nng_msg *mi = m;
    if (i != last && nng_msg_dup(&mi, m) != 0) {
      ok = false;
      continue;
    }
    if (m0__send_msg(&pub->self, &pub->loops[i], M0__K_FRAME, m0__current_trace.hi, m0__current_trace.lo, mi) != 0) {
      ok = false;
      nng_msg_free(mi);
    }
    if (i == last) m = NULL; /* sent or freed */
  }
  pthread_mutex_unlock(&pub->mu);
  if (m) nng_msg_free(m);
  if (!ok) {
    atomic_fetch_add(&pub->refused, 1);
    atomic_fetch_add(&pub->page->head->refused, 1);
  }
  return ok;
}

