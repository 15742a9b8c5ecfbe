/* A next generation's listen (m0__service_listen_later, service/service.h):
 * the actor's one stable URL is bound once the generation before lets go
 * of it; until then the socket listens at an inproc address of its own and
 * asks wait for an instance (expect_until). */
#include "service/service.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/errors.h"
#include "transport/ipc_watch.h"
#include "transport/topology.h"

#define SERVICE_STALE_MS 500

/* An ipc path the old generation's listener has let go of: gone, or there
 * with no listener for SERVICE_STALE_MS (one that died without its
 * unlink). Between the old listener's shutdown and its unlink a bind over
 * the path would lose it to that unlink. */
static bool service_path_free(const char *path, int64_t *stale_since) {
  struct stat st;
  if (lstat(path, &st) != 0) return errno == ENOENT;
  bool stale = !m0__unix_listening(path);
  int64_t now = m0__now_ms();
  if (!stale) *stale_since = 0;
  else if (!*stale_since) *stale_since = now;
  return stale && now - *stale_since >= SERVICE_STALE_MS;
}

/* Binds the URL once free, then starts the threads that need a peer (the
 * reply thread, the gate): created here, after the listen, so what the
 * listen sets on the mailbox is theirs to read. */
static void *service_binder(void *arg) {
  m0__service *s = arg;
  const char *ipc = m0__url_prefix(M0__URL_IPC);
  const char *path = m0__url_kind_of(s->url) == M0__URL_IPC ? s->url + strlen(ipc) : NULL;
  int64_t end = m0__now_ms() + M0__REBIND_MS, stale = 0;
  bool bound = false;
  while (!bound && !atomic_load(&s->binder_stop) && m0__now_ms() < end) {
    if (!path || service_path_free(path, &stale)) bound = m0__actor_listen_also(&s->self, s->url) == 0;
    if (!bound) nanosleep(&(struct timespec){.tv_nsec = 10 * 1000000L}, NULL);
  }
  if (!bound) {
    atomic_store(&s->expect_until, 0);
    if (!atomic_load(&s->binder_stop))
      fprintf(stderr, "m0: actor %s: %s was not released by the previous generation within %d s; its instances "
                      "cannot reach this one\n", s->name, s->url, M0__REBIND_MS / 1000);
    return NULL;
  }
  atomic_store(&s->expect_until, m0__now_ms() + M0__REJOIN_MS);
  if (pthread_create(&s->rx, NULL, m0__service_rx, s) == 0) s->rx_started = true;
  if (s->secret && pthread_create(&s->gate, NULL, m0__service_gate, s) == 0) s->gate_started = true;
  return NULL;
}

int m0__service_listen_later(m0__service *s, const char *url, m0__tracer *trace, m0_publisher *pub) {
  s->connected = true;
  s->pub = pub;
  s->nslots = M0__SLOTS;
  snprintf(s->url, sizeof s->url, "%s", url);
  char wait[96]; /* the socket's first URL, this service's own, until the real one binds */
  snprintf(wait, sizeof wait, "%sm0.actor.%d.%llx.later", m0__url_prefix(M0__URL_INPROC), s->index,
           (unsigned long long)(uintptr_t)s);
  if (m0__actor_open_poly(&s->self, M0__ACTOR_ID(M0__ROLE_APP, M0__APP_INDEX(s->index, 0xfff)), wait, trace,
                          m0__service_on_pipe, s) != 0) {
    fprintf(stderr, "m0: actor %s cannot open its socket\n", s->name);
    return M0__ETRANSPORT;
  }
  atomic_store(&s->expect_until, INT64_MAX);
  if (pthread_create(&s->binder, NULL, service_binder, s) != 0) return M0__ENOMEM; /* closed by m0__service_close */
  s->binder_started = true;
  return 0;
}
