#include "actors/loop.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/errors.h"
#include "host/metrics.h"
#include "actors/publisher.h"
#include "transport/handoff.h"

#define LOOP_ACCEPT_BATCH 64
#define LOOP_STUCK_MS 2

static void loop_finish(m0__loop *l);
static void loop_on_frame(m0__loop *l, const m0__msg *m);
static void loop_on_listen(uv_poll_t *p, int status, int events);

static m0__loop_line *loop_line(m0__loop *l, int i) { return &l->page->lines[i]; }

/* One hand-off arrived. Never below zero: a wrapped count would make this
 * loop look infinitely loaded, and no sibling would hand it anything again. */
static void loop_pending_done(m0__loop *l) {
  _Atomic uint64_t *p = &loop_line(l, l->index)->pending;
  uint64_t v = atomic_load(p);
  while (v > 0 && !atomic_compare_exchange_weak(p, &v, v - 1)) {}
}

static void loop_poll_listener(m0__loop *l, bool on) {
  if (!l->listening || on == l->polling || (on && l->recycling)) return;
  l->polling = on;
  if (on) uv_poll_start(&l->listener, UV_READABLE, loop_on_listen);
  else uv_poll_stop(&l->listener);
}

/* Takes a connection: ours from now on. */
static void loop_adopt(m0__loop *l, int fd) {
  if (l->finished) {
    close(fd); /* cannot happen while siblings skip a leaving loop */
    return;
  }
  if (m0__http_adopt(&l->http, fd) == 0) atomic_fetch_add(&loop_line(l, l->index)->open, 1);
  if (l->http.nconns >= l->ctx.capacity) loop_poll_listener(l, false);
}

/* The least-loaded sibling, or ourselves: ties stay here. */
static int loop_pick(m0__loop *l, uint64_t now_ms) {
  int best = l->index;
  m0__loop_line *me = loop_line(l, l->index);
  uint64_t best_load = atomic_load(&me->open) + atomic_load(&me->pending);
  int n = l->nloops;
  unsigned start = l->rotate++;
  for (int k = 0; k < n; k++) {
    int i = (int)((start + (unsigned)k) % (unsigned)n);
    if (i == l->index) continue;
    m0__loop_line *ln = loop_line(l, i);
    if (atomic_load(&ln->leaving)) continue;
    uint64_t pass = atomic_load(&ln->pass_start_ms);
    if (pass && now_ms > pass + LOOP_STUCK_MS) continue;
    uint64_t load = atomic_load(&ln->open) + atomic_load(&ln->pending);
    if (load < best_load) {
      best = i;
      best_load = load;
    }
  }
  return best;
}

/* Hands fd to sibling i. Returns 0 when it is theirs; else it is still ours. */
static int loop_hand(m0__loop *l, int i, int fd) {
  m0__loop_line *ln = loop_line(l, i);
  atomic_fetch_add(&ln->pending, 1);
  if (l->handoff) { /* another process: the kernel carries the descriptor */
    if (m0__handoff_send(l->handoff[2 * i + 1], fd) == 0) {
      close(fd);
      return 0;
    }
  } else {
    int32_t v = fd;
    if (m0__send(&l->self, &l->siblings[i], M0__K_HANDOFF, 0, 0, &v, sizeof v) == 0) return 0;
  }
  atomic_fetch_sub(&ln->pending, 1);
  return -1;
}

static void loop_on_listen(uv_poll_t *p, int status, int events) {
  m0__loop *l = p->data;
  if (status < 0 || l->stopping) return;
  /* The time now, not the pass's cached start: a sibling's pass start is
   * compared against it. */
  uint64_t now = uv_hrtime() / 1000000;
  for (int k = 0; k < LOOP_ACCEPT_BATCH; k++) {
    if (l->http.nconns >= l->ctx.capacity) {
      loop_poll_listener(l, false); /* the rest wait in the backlog */
      return;
    }
    int fd = accept4(l->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      /* Out of descriptors the listener stays readable: polled on, the loop
       * spun and wrote this line a million times a second. It waits instead
       * for one of its connections to close or its next sweep, and says so
       * once until an accept succeeds again. */
      if (errno == EMFILE || errno == ENFILE) {
        if (!l->fd_starved)
          fprintf(stderr, "m0: loop.%d: out of descriptors; connections wait in the backlog\n", l->index);
        l->fd_starved = true;
        loop_poll_listener(l, false);
      }
      return; /* EAGAIN: another loop won it, or the backlog is empty */
    }
    l->fd_starved = false;
    if (l->share) {
      int to = loop_pick(l, now);
      if (to != l->index && loop_hand(l, to, fd) == 0) {
        l->handed++;
        atomic_fetch_add(&loop_line(l, l->index)->handoffs, 1);
        continue;
      }
    }
    loop_adopt(l, fd);
  }
}

/* Prefork: connections a sibling process handed us. */
static void loop_on_handin(uv_poll_t *p, int status, int events) {
  m0__loop *l = p->data;
  int fd;
  while ((fd = m0__handoff_recv(l->handoff[2 * l->index])) >= 0) {
    loop_pending_done(l);
    l->adopted++;
    loop_adopt(l, fd);
  }
}

static void loop_on_closed(m0__http *h) {
  m0__loop *l = h->owner;
  atomic_fetch_sub(&loop_line(l, l->index)->open, 1);
  if (!l->stopping && h->nconns < l->ctx.capacity) loop_poll_listener(l, true);
  if (l->stopping && h->nconns == 0) loop_finish(l);
}

static void loop_on_metrics(m0__http *h, m0_response *res) {
  m0__loop *l = h->owner;
  m0__metrics_respond(l->page, res);
}

static void loop_on_sweep(uv_timer_t *t) {
  m0__loop *l = t->data;
  m0__http_sweep(&l->http);
  if (l->fd_starved && !l->stopping && l->http.nconns < l->ctx.capacity) loop_poll_listener(l, true); /* try again */
}

/* ---- the pool lane ---- */

/* Takes a request for the pool: into the batch of the pool thread with the
 * least waiting, preferring one with no batch in flight. */
static int loop_defer(m0__http *h, m0__conn *c, const m0_request *req, int route, bool head, bool close) {
  m0__loop *l = h->owner;
  int best = 0;
  for (int j = 1; j < l->npool; j++) {
    m0__batch *a = &l->batches[j], *b = &l->batches[best];
    if ((a->inflight < b->inflight) || (a->inflight == b->inflight && a->count < b->count)) best = j;
  }
  if (m0__batch_add(&l->batches[best], c, req, route, head, close) != 0) return -1;
  l->queued++;
  return 0;
}

/* One JOB per pool thread per loop pass, at most one in flight each. */
static void loop_flush_batches(m0__loop *l) {
  for (int j = 0; j < l->npool; j++) {
    m0__batch *b = &l->batches[j];
    if (b->inflight || b->count == 0) continue;
    if (m0__send_msg(&l->self, &l->pool[j], M0__K_JOB, b->trace_hi, b->trace_lo, b->msg) != 0)
      continue; /* still ours: next pass */
    b->msg = NULL; /* the pool thread's now */
    b->inflight = true;
    b->count = 0;
    b->trace_hi = b->trace_lo = 0;
  }
  atomic_store_explicit(&loop_line(l, l->index)->queued, l->queued - l->answered, memory_order_relaxed);
}

static void loop_on_answer(void *arg, void *conn, const uint8_t *resp, size_t len) {
  m0__loop *l = arg;
  l->answered++;
  m0__http_complete(&l->http, conn, resp, len);
}

static void loop_on_result(m0__loop *l, const m0__msg *m) {
  int j = M0__ACTOR_INDEX(m->env.from) & 0xfff;
  if (M0__ACTOR_ROLE(m->env.from) != M0__ROLE_POOL || j >= l->npool) return;
  l->batches[j].inflight = false;
  if (m0__result_each(m->payload, m->len, loop_on_answer, l) < 0)
    fprintf(stderr, "m0: loop.%d: a malformed result from pool.%d.%d\n", l->index, l->index, j);
}

/* After each pass's I/O: publish the loop's counters, mark the pass unless
 * a read already did (siblings skip a loop stuck in one pass: a read marks
 * it before any view runs, http/conn.h) and send what the pass gave the
 * pool. The mark is cleared when the loop is about to wait again. */
static void loop_on_pass_begin(uv_check_t *c) {
  m0__loop *l = c->data;
  /* The page line others read (m0_stats, the dashboard): once per pass. */
  m0__loop_line *ln = loop_line(l, l->index);
  atomic_store_explicit(&ln->requests, l->http.stats.requests, memory_order_relaxed);
  atomic_store_explicit(&ln->streams, (uint64_t)l->http.nstreams, memory_order_relaxed);
  atomic_store_explicit(&ln->beat_ms, uv_now(&l->uv), memory_order_relaxed);
  /* Recycling (--max-requests): at its count the loop takes no more
   * connections (siblings skip it, the backlog is theirs), says LEAVING and
   * answers what it has until its coordinator drains it. */
  if (l->recycle_at && !l->recycling && l->http.stats.requests >= l->recycle_at) {
    l->recycling = true;
    atomic_store(&ln->leaving, 1);
    loop_poll_listener(l, false);
    m0__send(&l->self, &l->coord, M0__K_LEAVING, 0, 0, NULL, 0);
  }
  if (l->share && !atomic_load_explicit(&ln->pass_start_ms, memory_order_relaxed))
    atomic_store_explicit(&ln->pass_start_ms, uv_now(&l->uv) | 1, memory_order_relaxed);
  if (l->npool) loop_flush_batches(l);
}
static void loop_on_pass_end(uv_prepare_t *p) {
  m0__loop *l = p->data;
  atomic_store_explicit(&loop_line(l, l->index)->pass_start_ms, 0, memory_order_relaxed);
}

static void loop_go(m0__loop *l) {
  if (l->listening || l->stopping) return; /* GO is idempotent: a repeated one changes nothing */
  l->first_id = atomic_load(&l->page->head->event_id);
  int rv = uv_poll_init(&l->uv, &l->listener, l->listen_fd);
  if (rv != 0) {
    char why[160];
    snprintf(why, sizeof why, "loop.%d cannot listen: %s", l->index, uv_strerror(rv));
    m0__send(&l->self, &l->coord, M0__K_DIED, 0, 0, why, strlen(why));
    return;
  }
  l->listener.data = l;
  l->listening = true;
  loop_poll_listener(l, true);
  if (l->handoff && uv_poll_init(&l->uv, &l->handin, l->handoff[2 * l->index]) == 0) {
    l->handin.data = l;
    uv_poll_start(&l->handin, UV_READABLE, loop_on_handin);
  }
}

/* The descriptor goes only once the poll handle is closed. */
static void loop_on_listener_closed(uv_handle_t *h) {
  m0__loop *l = h->data;
  close(l->listen_fd);
  l->listen_fd = -1;
}

static void loop_stop(m0__loop *l) {
  if (l->stopping) return;
  l->stopping = true;
  atomic_store(&loop_line(l, l->index)->leaving, 1);
  if (l->listening) uv_close((uv_handle_t *)&l->listener, loop_on_listener_closed);
  l->listening = false;
  m0__http_drain(&l->http);
  /* A fresh connection's grace (drain_fresh_ms) ends at a sweep: the next
   * one runs then, not up to a sweep period later. */
  if (l->http.drain_fresh_ms)
    uv_timer_start(&l->sweep, loop_on_sweep, l->http.drain_fresh_ms + 1, uv_timer_get_repeat(&l->sweep));
  if (l->http.nconns == 0) loop_finish(l);
}

/* Everything is answered and closed: report and let uv_run return. */
static void loop_finish(m0__loop *l) {
  if (l->finished) return;
  l->finished = true;
  m0__loop_stats st = {l->http.stats.requests, l->http.stats.accepted, l->http.stats.errors_4xx,
                       l->http.stats.timeouts, l->frames, l->handed, l->adopted};
  atomic_store(&l->h.said_stopped, true);
  m0__send(&l->self, &l->coord, M0__K_STOPPED, 0, 0, &st, sizeof st);
  uv_poll_stop(&l->mail);
  uv_close((uv_handle_t *)&l->mail, NULL);
  if (l->inbox.ready) uv_close((uv_handle_t *)&l->lane, NULL);
  uv_timer_stop(&l->sweep);
  uv_close((uv_handle_t *)&l->sweep, NULL);
  uv_close((uv_handle_t *)&l->pass_begin, NULL);
  uv_close((uv_handle_t *)&l->pass_end, NULL);
  if (l->handoff && uv_is_active((uv_handle_t *)&l->handin)) uv_close((uv_handle_t *)&l->handin, NULL);
}

/* Both the mailbox's descriptor and the direct lane's eventfd land here;
 * the lane's wake reads the lane only. */
static void loop_on_mail(uv_poll_t *p, int status, int events) {
  m0__loop *l = p->data;
  int how = p == &l->lane ? M0__RECV_INBOX : M0__RECV_NOWAIT;
  m0__msg m;
  int rv;
  while (!l->finished && (rv = m0__recv(&l->self, &m, how)) != M0__ETIMEDOUT) {
    if (rv == M0__EBADMSG) {
      fprintf(stderr, "m0: loop.%d: dropped a malformed message\n", l->index);
      continue;
    }
    if (rv != 0) break;
    switch (m.env.kind) {
    case M0__K_GO: loop_go(l); break;
    case M0__K_STOP: loop_stop(l); break;
    case M0__K_FRAME: loop_on_frame(l, &m); break;
    case M0__K_RESULT: loop_on_result(l, &m); break;
    case M0__K_HANDOFF:
      if (m.len == sizeof(int32_t)) {
        int32_t fd;
        memcpy(&fd, m.payload, sizeof fd);
        loop_pending_done(l);
        l->adopted++;
        loop_adopt(l, fd);
      }
      break;
    default:
      fprintf(stderr, "m0: loop.%d: unexpected %s message\n", l->index, m0__kind_name(m.env.kind));
      break;
    }
    m0__msg_free(&m);
  }
}

/* A frame from the bus (the producer, a handler, m0pub): to this loop's
 * streams on its channel. */
static void loop_on_frame(m0__loop *l, const m0__msg *m) {
  uint64_t id;
  const char *channel;
  size_t chlen, flen;
  const uint8_t *frame;
  if (m0__frame_decode(m->payload, m->len, &id, &channel, &chlen, &frame, &flen) != 0) {
    fprintf(stderr, "m0: loop.%d: dropped a malformed frame message\n", l->index);
    return;
  }
  /* A frame numbered before this loop began was queued for a predecessor
   * (a worker that died): old news, and a new stream must never see ids go
   * backwards. */
  if (id <= l->first_id) return;
  l->frames++;
  uint64_t dropped = m0__http_publish(&l->http, channel, chlen, id, frame, flen);
  if (dropped) atomic_fetch_add_explicit(&loop_line(l, l->index)->dropped, dropped, memory_order_relaxed);
}

static int loop_open_siblings(m0__loop *l) {
  l->siblings = calloc((size_t)l->nloops, sizeof *l->siblings);
  if (!l->siblings) return M0__ENOMEM;
  for (int i = 0; i < l->nloops; i++) {
    if (i == l->index) continue;
    const m0__actor_desc *d = m0__topology_find(l->topo, M0__ACTOR_ID(M0__ROLE_LOOP, i));
    /* No wait: two loops handing to each other at once must never block on
     * each other's mailbox. A hand-off that cannot be queued is kept. */
    int rv = m0__peer_open(&l->siblings[i], d->id, d->url, 0);
    if (rv) return rv;
  }
  return 0;
}

static int loop_open_pool(m0__loop *l) {
  l->pool = calloc((size_t)l->npool, sizeof *l->pool);
  l->batches = calloc((size_t)l->npool, sizeof *l->batches);
  if (!l->pool || !l->batches) return M0__ENOMEM;
  for (int j = 0; j < l->npool; j++) {
    const m0__actor_desc *d = m0__topology_find(l->topo, M0__ACTOR_ID(M0__ROLE_POOL, M0__POOL_INDEX(l->index, j)));
    m0__peer_direct(&l->pool[j], d->id, &l->pool_threads[j].inbox);
  }
  l->http.defer = loop_defer;
  return 0;
}

static void loop_close_pool(m0__loop *l) {
  for (int j = 0; l->pool && j < l->npool; j++) m0__peer_close(&l->pool[j]);
  for (int j = 0; l->batches && j < l->npool; j++) m0__batch_fini(&l->batches[j]);
  free(l->pool);
  free(l->batches);
  l->pool = NULL;
  l->batches = NULL;
}

static void loop_close_siblings(m0__loop *l) {
  if (!l->siblings) return;
  for (int i = 0; i < l->nloops; i++) m0__peer_close(&l->siblings[i]);
  free(l->siblings);
  l->siblings = NULL;
}

/* An inproc mailbox is reachable only from this process (and a tcp one may
 * be bound to another machine's interface): outside publishers on this
 * machine dial loop.i.sock in the run directory. */
static int loop_listen_ipc(m0__loop *l) {
  char url[M0__URL_MAX];
  if (m0__topology_outside_url(url, sizeof url, l->run_dir, l->index) != 0) return -1;
  return m0__actor_listen_also(&l->self, url);
}

static void loop_run(m0__handle *h) {
  m0__loop *l = (m0__loop *)h;
  char err[512] = "";
  bool uv_ready = false;
  if (m0__peer_open(&l->coord, l->coord_id, l->coord_url, 1000) != 0) {
    fprintf(stderr, "m0: loop.%d cannot reach its coordinator at %s\n", l->index, l->coord_url);
    goto out;
  }
  if (l->app->make) {
    l->state = l->app->make(&l->ctx, err, sizeof err);
    if (!l->state) {
      if (!err[0]) snprintf(err, sizeof err, "%s: make failed on loop %d", l->app->name, l->index);
      atomic_store(&l->h.failed, true);
      atomic_store(&l->h.said_stopped, true);
      m0__send(&l->self, &l->coord, M0__K_FAILED, 0, 0, err, strlen(err));
      goto out;
    }
  }
  uv_loop_init(&l->uv);
  uv_ready = true;
  l->http.uv = &l->uv;
  l->http.app = l->app;
  l->http.state = l->state;
  l->http.worker = l->index;
  l->http.owner = l;
  l->http.on_closed = loop_on_closed;
  if (l->http.metrics_path) l->http.metrics = loop_on_metrics;
  l->nloops = l->topo->loops;
  if (l->share) l->http.busy_since = &loop_line(l, l->index)->pass_start_ms;
  int fd;
  if (m0__http_init(&l->http) != 0 || m0__actor_recv_fd(&l->self, &fd) != 0 ||
      uv_poll_init(&l->uv, &l->mail, fd) != 0 || (l->inbox.ready && uv_poll_init(&l->uv, &l->lane, l->inbox.efd) != 0) ||
      (l->share && !l->handoff && loop_open_siblings(l) != 0) ||
      (l->npool && loop_open_pool(l) != 0)) {
    snprintf(err, sizeof err, "loop.%d cannot start", l->index);
    m0__send(&l->self, &l->coord, M0__K_DIED, 0, 0, err, strlen(err));
    goto out;
  }
  l->mail.data = l;
  uv_poll_start(&l->mail, UV_READABLE, loop_on_mail);
  if (l->inbox.ready) { /* the pool's RESULTs: the same handler, reading the inbox only */
    l->self.inbox = &l->inbox;
    l->lane.data = l;
    uv_poll_start(&l->lane, UV_READABLE, loop_on_mail);
  }
  uv_timer_init(&l->uv, &l->sweep);
  l->sweep.data = l;
  uv_timer_start(&l->sweep, loop_on_sweep, l->sweep_ms, l->sweep_ms);
  uv_check_init(&l->uv, &l->pass_begin);
  uv_prepare_init(&l->uv, &l->pass_end);
  l->pass_begin.data = l->pass_end.data = l;
  uv_check_start(&l->pass_begin, loop_on_pass_begin);
  if (l->share) uv_prepare_start(&l->pass_end, loop_on_pass_end);
  m0__send(&l->self, &l->coord, M0__K_READY, 0, 0, NULL, 0);
  uv_run(&l->uv, UV_RUN_DEFAULT);
  if (!l->finished) {
    snprintf(err, sizeof err, "loop.%d left its event loop unexpectedly", l->index);
    m0__send(&l->self, &l->coord, M0__K_DIED, 0, 0, err, strlen(err));
  }
out:
  if (uv_ready) {
    if (l->listening) uv_close((uv_handle_t *)&l->listener, loop_on_listener_closed);
    uv_run(&l->uv, UV_RUN_NOWAIT);
    uv_loop_close(&l->uv);
    m0__http_fini(&l->http);
  }
  if (l->app->free && l->state) l->app->free(l->state);
  /* STOP to the pool threads: their queue is empty by now. */
  for (int j = 0; l->pool && j < l->npool; j++) m0__send(&l->self, &l->pool[j], M0__K_STOP, 0, 0, NULL, 0);
  if (l->listen_fd >= 0) close(l->listen_fd);
}

/* After the join (actors/handle.h on why not before). */
static void loop_hang_up(m0__handle *h) {
  m0__loop *l = (m0__loop *)h;
  loop_close_siblings(l);
  loop_close_pool(l);
  m0__peer_close(&l->coord);
}

static void loop_release(m0__handle *h) { m0__actor_close(&((m0__loop *)h)->self); }

static int loop_open(m0__handle *h) {
  m0__loop *l = (m0__loop *)h;
  const m0__actor_desc *me = m0__topology_find(l->topo, M0__ACTOR_ID(M0__ROLE_LOOP, l->index));
  if (m0__actor_open(&l->self, me->id, me->url, l->trace) != 0 ||
      (l->topo->scheme != M0__SCHEME_IPC && loop_listen_ipc(l) != 0)) {
    fprintf(stderr, "m0: loop.%d cannot open its mailbox at %s\n", l->index, me->url);
    return M0__ETRANSPORT;
  }
  return 0;
}

const m0__actor_kind m0__loop_kind = {"loop", loop_open, loop_run, loop_hang_up, loop_release};
