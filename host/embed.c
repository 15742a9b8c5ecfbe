/* Embedding: the host inside a larger program. The coordinator runs on a
 * thread of its own; the program keeps main and its signal handlers (every
 * host thread starts with the asynchronous signals blocked, so the program's
 * threads receive them, and a write to a closed socket is EPIPE, not a
 * SIGPIPE the program never asked for). The stop is a byte on a pipe. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/checks.h"
#include "config/options.h"
#include "config/topofile.h"
#include "base/errors.h"
#include "host/children.h"
#include "host/coordinator.h"
#include "host/embed.h"
#include "service/post.h"

struct m0_host {
  m0_config cfg;
  m0__proc proc;
  pthread_t thread;
  int stop[2];
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool ready, done;
  int rc, port;
  char run_dir[4096];
  m0_publisher *pub;
  m0__post *post; /* its actors' (NULL: it has none) */
};

static void embed_on_ready(void *arg, int port, const char *run_dir, m0_publisher *pub, m0__post *post) {
  m0_host *h = arg;
  pthread_mutex_lock(&h->mu);
  h->ready = true;
  h->port = port;
  h->pub = pub;
  h->post = post;
  snprintf(h->run_dir, sizeof h->run_dir, "%s", run_dir);
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
}

static void *embed_main(void *arg) {
  m0_host *h = arg;
  int rc = m0__exit_code(m0__coord_run(&h->proc));
  pthread_mutex_lock(&h->mu);
  h->done = true;
  h->rc = rc;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
  return NULL;
}

m0_host *m0_host_start(const m0_app *app, const m0_producer *producer, int argc, char **argv, int *code, char *err,
                       size_t errlen) {
  /* A process the host spawned for an instance of an actor placed
   * `process` is this program again: here it becomes that instance and
   * exits, and main's code past this call never runs in it. */
  const char *child = getenv("M0__ACTOR");
  if (child) exit(m0__actor_child(app, child));
  m0_host *h = calloc(1, sizeof *h);
  int rc = 1;
  if (!h) {
    snprintf(err, errlen, "out of memory");
    goto fail;
  }
  char why[1200];
  if (m0__config_load(&h->cfg, argc, argv, why, sizeof why) != 0) {
    snprintf(err, errlen, "%s", why);
    rc = 2;
    goto fail;
  }
  m0__check checks[M0__CHECK_COUNT];
  int first = m0__checks_run(&h->cfg, app, checks);
  if (first >= 0) {
    snprintf(err, errlen, "%s (%s)", checks[first].detail, checks[first].fix);
    rc = 78;
    goto fail;
  }
  if (M0__CFG(&h->cfg, workers) > 1) {
    snprintf(err, errlen, "an embedded host serves loops on threads, not worker processes (use --threads N)");
    rc = 78;
    goto fail;
  }
  if (pipe2(h->stop, O_CLOEXEC) != 0) {
    snprintf(err, errlen, "cannot make the stop pipe");
    goto fail;
  }
  h->proc = (m0__proc){.producer = producer, .on_ready = embed_on_ready, .ready_arg = h};
  m0__process_describe(&h->proc.proc, app, &h->cfg);
  h->proc.proc.stop_fd = h->stop[0];
  h->proc.here = h->proc.proc.loops;
  pthread_mutex_init(&h->mu, NULL);
  pthread_cond_init(&h->cv, NULL);
  /* Every host thread inherits this mask from the coordinator's. */
  sigset_t all, old;
  sigfillset(&all);
  sigdelset(&all, SIGSEGV);
  sigdelset(&all, SIGBUS);
  sigdelset(&all, SIGFPE);
  sigdelset(&all, SIGILL);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  int prc = pthread_create(&h->thread, NULL, embed_main, h);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (prc != 0) {
    snprintf(err, errlen, "cannot start the host's thread");
    goto fail;
  }
  pthread_mutex_lock(&h->mu);
  while (!h->ready && !h->done) pthread_cond_wait(&h->cv, &h->mu);
  bool ok = h->ready && !h->done;
  pthread_mutex_unlock(&h->mu);
  if (!ok) {
    pthread_join(h->thread, NULL);
    rc = h->rc;
    snprintf(err, errlen, "the host did not start (exit %d; its reason is on stderr)", rc);
    goto fail;
  }
  if (code) *code = 0;
  return h;
fail:
  if (h) {
    if (h->stop[0] > 0) close(h->stop[0]);
    if (h->stop[1] > 0) close(h->stop[1]);
    free(h);
  }
  if (code) *code = rc;
  return NULL;
}

int m0_host_port(const m0_host *h) { return h->port; }
const char *m0_host_run_dir(const m0_host *h) { return h->run_dir; }
m0_publisher *m0_host_publisher(m0_host *h) { return h->pub; }

struct m0__post *m0__host_post(m0_host *h) { return h ? h->post : m0__post_current(); }

int m0_host_stop(m0_host *h) {
  if (write(h->stop[1], "s", 1) != 1) return 1;
  pthread_join(h->thread, NULL); /* the coordinator keeps the drain's bound */
  int rc = h->rc;
  m0__config_fini(&h->cfg);
  close(h->stop[0]);
  close(h->stop[1]);
  pthread_mutex_destroy(&h->mu);
  pthread_cond_destroy(&h->cv);
  free(h);
  return rc;
}
