#include "actors/producer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/errors.h"

#define PRODUCER_SLICE_MS 50

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

uint64_t m0_next_id(m0_publisher *pub) { return m0__page_next_id(pub->page); }

m0_publisher *m0_publisher_attach(const char *run_dir, char *err, size_t errlen) {
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
  for (int i = 0; pub->loops && i < n; i++) {
    char url[M0__URL_MAX];
    snprintf(url, sizeof url, "ipc://%s/loop.%d.sock", run_dir, i);
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

void m0_publisher_detach(m0_publisher *pub) {
  if (!pub) return;
  m0__page *page = pub->page;
  m0__publisher_close(pub);
  m0__page_close(page);
  free(page);
  free(pub);
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

int m0__frame_decode(const uint8_t *p, size_t n, uint64_t *id, const char **channel, size_t *chlen,
                     const uint8_t **frame, size_t *flen) {
  if (n < 10) return M0__EBADMSG;
  uint64_t v;
  memcpy(&v, p, 8);
  uint16_t cl;
  memcpy(&cl, p + 8, 2);
  if (cl == 0 || cl > M0__CHANNEL_MAX || (size_t)cl + 10 > n) return M0__EBADMSG;
  *id = v;
  *channel = (const char *)p + 10;
  *chlen = cl;
  *frame = p + 10 + cl;
  *flen = n - 10 - cl;
  return 0;
}

/* A frame is event lines without the id (the host writes "id: N" first):
 * refused when larger than a stream's whole queue, when it would end its
 * event early (a blank line) or smuggle a CR, or when a line is an id field
 * of its own (it would overrule the shared counter's number). */
bool m0__frame_ok(const void *frame, size_t len) {
  const char *f = frame;
  if (len > M0__FRAME_MAX || (len && !f)) return false;
  if (len && (memchr(f, '\r', len) || f[len - 1] == '\n')) return false;
  for (size_t i = 0; i < len; i++) {
    if (i > 0 && f[i] == '\n' && f[i - 1] == '\n') return false;
    bool line_start = i == 0 || f[i - 1] == '\n';
    if (line_start && len - i >= 2 && f[i] == 'i' && f[i + 1] == 'd' &&
        (len - i == 2 || f[i + 2] == ':' || f[i + 2] == '\n'))
      return false;
  }
  return true;
}

bool m0_publish(m0_publisher *pub, const char *channel, uint64_t id, const void *frame, size_t len) {
  if (!m0__channel_ok(channel) || !m0__frame_ok(frame, len)) {
    atomic_fetch_add(&pub->refused, 1);
    atomic_fetch_add(&pub->page->head->refused, 1);
    return false;
  }
  size_t cl = strlen(channel), n = 10 + cl + len;
  uint8_t *buf = malloc(n);
  if (!buf) {
    atomic_fetch_add(&pub->refused, 1);
    return false;
  }
  uint16_t cl16 = (uint16_t)cl;
  memcpy(buf, &id, 8);
  memcpy(buf + 8, &cl16, 2);
  memcpy(buf + 10, channel, cl);
  if (len) memcpy(buf + 10 + cl, frame, len);
  bool ok = true;
  pthread_mutex_lock(&pub->mu);
  for (int i = 0; i < pub->nloops; i++) /* a loop not dialed (yet, or any more) is a refusal too */
    if (!pub->loops[i].open ||
        m0__send(&pub->self, &pub->loops[i], M0__K_FRAME, m0__current_trace.hi, m0__current_trace.lo, buf, n) != 0)
      ok = false;
  pthread_mutex_unlock(&pub->mu);
  free(buf);
  atomic_fetch_add(ok ? &pub->published : &pub->refused, 1);
  if (!ok) atomic_fetch_add(&pub->page->head->refused, 1);
  return ok;
}

static int64_t producer_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Waits for a message up to ms; returns its kind, or 0 when none came. */
static int producer_wait(m0__actor *mbox, int64_t ms) {
  if (ms < 0) ms = 0;
  nng_socket_set_ms(mbox->mailbox, NNG_OPT_RECVTIMEO, (nng_duration)ms);
  m0__msg m;
  if (m0__recv(mbox, &m, ms == 0 ? M0__RECV_NOWAIT : M0__RECV_WAIT) != 0) return 0;
  int kind = m.env.kind;
  m0__msg_free(&m);
  return kind;
}

static void *producer_main(void *arg) {
  m0__producer_run *r = arg;
  m0_publisher *pub = r->pub;
  m0__peer *coord = &r->coord;
  m0__actor *self = &r->self;
  char err[512] = "";
  if (m0__peer_open(coord, r->coord_id, r->coord_url, 1000) != 0) {
    fprintf(stderr, "m0: the producer cannot reach its coordinator at %s\n", r->coord_url);
    atomic_store(&r->exited, true);
    return NULL;
  }
  void *state = r->def->make ? r->def->make(&r->ctx, err, sizeof err) : NULL;
  if (r->def->make && !state) {
    if (!err[0]) snprintf(err, sizeof err, "the producer's make failed");
    atomic_store(&r->failed, true);
    m0__send(self, coord, M0__K_FAILED, 0, 0, err, strlen(err));
    goto out;
  }
  m0__send(self, coord, M0__K_READY, 0, 0, NULL, 0);
  int kind;
  while ((kind = producer_wait(self, 1000)) != M0__K_GO)
    if (kind == M0__K_STOP) goto done;
  int64_t next = producer_now_ns();
  for (;;) {
    int64_t now = producer_now_ns();
    if (now < next) {
      int64_t ms = (next - now + 999999) / 1000000;
      kind = producer_wait(self, ms < PRODUCER_SLICE_MS ? ms : PRODUCER_SLICE_MS);
      if (kind == M0__K_STOP) break;
      continue;
    }
    atomic_store(&r->in_step, true);
    int64_t wait = r->def->step(state, pub);
    atomic_store(&r->in_step, false);
    if (wait < 0) {
      fprintf(stderr, "m0: producer: step failed (returned %lld); the producer stops, serving goes on\n",
              (long long)wait);
      while (producer_wait(self, PRODUCER_SLICE_MS) != M0__K_STOP) {}
      break;
    }
    /* Fixed rate from the schedule; a late step moves the schedule to now. */
    next += wait;
    now = producer_now_ns();
    if (next < now) next = now;
    if (producer_wait(self, 0) == M0__K_STOP) break;
  }
done:
  if (r->def->free) r->def->free(state);
  m0__send(self, coord, M0__K_STOPPED, 0, 0, NULL, 0);
out:
  atomic_store(&r->exited, true);
  return NULL;
}

void m0__producer_hang_up(m0__producer_run *r) { /* after the join: see m0__loop_release */
  m0__peer_close(&r->coord);
}

void m0__producer_release(m0__producer_run *r) { m0__actor_close(&r->self); }

int m0__producer_start(m0__producer_run *r) {
  atomic_store(&r->exited, true); /* until its thread runs */
  /* The mailbox is opened here, so the coordinator dials it once this
   * returns (actors/actor.c, m0__peer_open). */
  if (m0__actor_open(&r->self, M0__ACTOR_ID(M0__ROLE_PRODUCER, 0), r->url, r->pub->self.trace) != 0) {
    fprintf(stderr, "m0: the producer cannot open its mailbox at %s\n", r->url);
    return M0__ETRANSPORT;
  }
  atomic_store(&r->exited, false);
  if (pthread_create(&r->thread, NULL, producer_main, r) != 0) {
    atomic_store(&r->exited, true);
    m0__actor_close(&r->self);
    return M0__ENOMEM;
  }
  r->started = true;
  return 0;
}
