#include "actors/loop.h"
#include "runtime/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/errors.h"
#include "actors/accept.h"
#include "runtime/admit.h"
#include "actors/asks.h"
#include "actors/lane.h"
#include "actors/loop_end.h"
#include "actors/loop_http.h"
#include "bus/publisher.h"
#include "actors/writer.h"
#include "actors/streamed.h"
#include "http/order.h"
#include "http/stream.h"
#include "transport/handoff.h"

static void loop_on_frame(m0__loop *l, const m0__msg *m);
static void loop_order(m0__loop *l, bool all);

static void loop_on_sweep(uv_timer_t *t) {
  m0__loop *l = t->data;
  m0__http_sweep(&l->http);
  if (l->host_swept) l->host_swept(l);
  if (l->stopping) { /* a sweep of the drain runs when the fresh grace ends (loop_stop) */
    uint64_t now = uv_now(&l->uv), every = uv_timer_get_repeat(&l->sweep);
    if (now >= l->grace_at) l->grace_over = true;
    else if (l->grace_at - now < every) uv_timer_start(&l->sweep, loop_on_sweep, l->grace_at - now + 1, every);
    m0__loop_maybe_finish(l);
  }
  if (l->fd_starved && !l->stopping && l->http.nconns < l->ctx.capacity) m0__accept_poll(l, true); /* try again */
}

/* After each pass's I/O: publish the loop's counters, mark the pass unless
 * a read already did (siblings skip a loop stuck in one pass: a read marks
 * it before any view runs, http/conn.h) and send what the pass gave the
 * pool. The mark is cleared when the loop is about to wait again. */
static void loop_on_pass_begin(uv_check_t *c) {
  m0__loop *l = c->data;
  /* The page line others read (m0_stats, the dashboard): once per pass. */
  m0__loop_line *ln = m0__loop_line_at(l, l->index);
  /* The line's count is this loop's (cleared when its worker is respawned):
   * what it rose by goes to the figures /metrics shows, which never go back. */
  uint64_t was = atomic_load_explicit(&ln->requests, memory_order_relaxed);
  if (l->http.stats.requests > was)
    atomic_fetch_add_explicit(&l->http.figures->requests, l->http.stats.requests - was, memory_order_relaxed);
  atomic_store_explicit(&ln->requests, l->http.stats.requests, memory_order_relaxed);
  atomic_store_explicit(&ln->streams, (uint64_t)l->http.nstreams, memory_order_relaxed);
  atomic_store_explicit(&ln->beat_ms, uv_now(&l->uv), memory_order_relaxed);
  /* Recycling (--max-requests): at its count the loop takes no more
   * connections (siblings skip it, the backlog is theirs), says LEAVING and
   * answers what it has until its coordinator drains it. */
  if (l->recycle_at && !l->recycling && l->http.stats.requests >= l->recycle_at) {
    l->recycling = true;
    atomic_store(&ln->leaving, 1);
    m0__accept_poll(l, false);
    m0__tell(&l->self, &l->coord, M0__K_LEAVING, NULL, 0);
  }
  m0__accept_pass_begin(l);
  if (l->npool) m0__lane_flush(l);
  if (l->nservices) m0__asks_flush(l);
  loop_order(l, false);
}

static void loop_go(m0__loop *l) {
  if (l->listening || l->stopping) return; /* GO is idempotent: a repeated one changes nothing */
  l->first_id = atomic_load(&l->page->head->event_id);
  atomic_store(&m0__loop_line_at(l, l->index)->first_id, l->first_id); /* m0pub checks --id against it */
  l->http.history_from = l->first_id + 1;
  l->http.ids = &l->page->head->event_id;
  int rv = uv_poll_init(&l->uv, &l->listener, l->listen_fd);
  if (rv == 0 && l->plain_fd >= 0) rv = uv_poll_init(&l->uv, &l->plain_listener, l->plain_fd);
  if (rv != 0) {
    char why[160];
    snprintf(why, sizeof why, "loop.%d cannot listen: %s", l->index, uv_strerror(rv));
    m0__tell(&l->self, &l->coord, M0__K_DIED, why, strlen(why));
    return;
  }
  l->listener.data = l->plain_listener.data = l;
  /* A sibling's hand-off may come after this loop's drain closed the
   * listener (it chose this loop just before): still checked, and taken. */
  l->listen_family = m0__handoff_family(l->listen_fd);
  l->listening = true;
  m0__accept_poll(l, true);
  if (l->handoff && uv_poll_init(&l->uv, &l->handin, l->handoff[2 * l->index]) == 0) {
    l->handin.data = l;
    uv_poll_start(&l->handin, UV_READABLE, m0__accept_on_handin);
  }
}

/* The descriptor goes only once the poll handle is closed. */
static void loop_on_listener_closed(uv_handle_t *h) {
  m0__loop *l = h->data;
  int *fd = h == (uv_handle_t *)&l->plain_listener ? &l->plain_fd : &l->listen_fd;
  close(*fd);
  *fd = -1;
}

static void loop_close_listeners(m0__loop *l) {
  if (!l->listening) return;
  uv_close((uv_handle_t *)&l->listener, loop_on_listener_closed);
  if (l->plain_fd >= 0) uv_close((uv_handle_t *)&l->plain_listener, loop_on_listener_closed);
  l->listening = false;
}

static void loop_stop(m0__loop *l) {
  if (l->stopping) return;
  l->stopping = true;
  atomic_store(&m0__loop_line_at(l, l->index)->leaving, 1);
  loop_close_listeners(l);
  loop_order(l, true); /* every frame that came goes before the goodbye */
  /* A drain because the next generation serves (its number is on the page
   * now) answers the requests pipelined behind one being answered too
   * (idle keep-alive connections close at once either way: http/conn.h). */
  m0__http_drain(&l->http, atomic_load(&l->page->head->generation) > l->generation);
  /* A fresh connection's grace (drain_fresh_ms) ends at a sweep: one runs
   * then, not up to a sweep period later; the others keep their period (an
   * HTTP/2 connection's drain has a bound of its own, http/h2_drain.c). */
  uint64_t every = uv_timer_get_repeat(&l->sweep), fresh = l->http.drain_fresh_ms;
  l->grace_at = uv_now(&l->uv) + fresh;
  if (fresh) uv_timer_start(&l->sweep, loop_on_sweep, fresh < every ? fresh + 1 : every, every);
  else l->grace_over = true;
  m0__loop_maybe_finish(l);
}

/* The mailbox's descriptor, the outside mailbox's and the direct lane's
 * eventfd all land here; the lane's wake reads the lane only. */
static void loop_on_mail(uv_poll_t *p, int status, int events) {
  m0__loop *l = p->data;
  int how = p == &l->lane ? M0__RECV_INBOX : M0__RECV_NOWAIT;
  m0__actor *box = p == &l->outside_mail ? &l->outside : &l->self;
  m0__msg m;
  int rv;
  while (!l->finished && (rv = m0__recv(box, &m, how)) != M0__ETIMEDOUT) {
    if (rv == M0__EBADMSG) continue; /* refused, counted and named (runtime/admit.h) */
    if (rv != 0) break;
    switch (m.env.kind) {
    case M0__K_GO: loop_go(l); break;
    case M0__K_STOP: /* only after its coordinator said the drain begins (host/coordinator.c) */
      if (atomic_load(&l->told_stop)) {
        loop_stop(l);
      } else {
        char peer[96];
        m0__msg_peer(&m, peer, sizeof peer);
        m0__refused(l->self.id, M0__REFUSE_UNEXPECTED, M0__K_STOP, peer);
      }
      break;
    case M0__K_FRAME: loop_on_frame(l, &m); break;
    case M0__K_RESULT: m0__lane_on_result(l, &m); break;
    case M0__K_REPLY:
    case M0__K_ANSWER: m0__asks_on_answer(l, &m); break;
    case M0__K_CHUNK: m0__writer_on_chunk(l, &m); break;
    case M0__K_STREAM: m0__streamed_on(l, &m); break; /* an actor's reply in pieces: actors/streamed.c */
    case M0__K_HANDOFF: m0__accept_on_handoff(l, &m); break;
    case M0__K_TRACE: m0__trace_on_control(l->trace, l->self.id, &m); break; /* every loop shares it */
    default: { /* admitted (runtime/admit.c) yet no kind a loop takes: the table and this switch disagree */
      char peer[96];
      m0__msg_peer(&m, peer, sizeof peer);
      m0__refused(l->self.id, M0__REFUSE_KIND, m.env.kind, peer);
      break;
    }
    }
    m0__msg_free(&m);
  }
}

/* The window of written ids, a bit per id (id % M0__WRITTEN_WINDOW): an id
 * in (last_id - window, last_id] is written when its bit is set. */
static bool written_has(const m0__loop *l, uint64_t id) {
  return id <= l->last_id && (l->written[(id % M0__WRITTEN_WINDOW) / 64] >> (id % 64) & 1);
}

static void written_mark(m0__loop *l, uint64_t id) {
  if (id > l->last_id) { /* the window moves up: the ids it takes in are unwritten */
    if (id - l->last_id >= M0__WRITTEN_WINDOW) memset(l->written, 0, sizeof l->written);
    else
      for (uint64_t k = l->last_id + 1; k < id; k++) l->written[(k % M0__WRITTEN_WINDOW) / 64] &= ~(1ull << (k % 64));
    l->last_id = id;
  }
  l->written[(id % M0__WRITTEN_WINDOW) / 64] |= 1ull << (id % 64);
}

/* Frames dropped for this loop's streams: on its line (m0_stats) and in its
 * figures (/metrics: never cleared). */
static void loop_dropped(m0__loop *l, uint64_t n) {
  atomic_fetch_add_explicit(&m0__loop_line_at(l, l->index)->dropped, n, memory_order_relaxed);
  atomic_fetch_add_explicit(&l->page->loop_figures[l->index].dropped, n, memory_order_relaxed);
}

static void loop_on_order_due(uv_timer_t *t) { loop_order(t->data, false); }

/* The held frames whose turn came, to the streams (all: the drain); the
 * timer set for the first one still held. */
static void loop_order(m0__loop *l, bool all) {
  if (!l->order) return;
  uint64_t dropped = m0__order_release(l->order, &l->http, all);
  if (dropped) loop_dropped(l, dropped);
  int64_t due = m0__order_due(l->order, &l->http);
  if (due >= 0 && !l->finished) uv_timer_start(&l->order_due, loop_on_order_due, (uint64_t)due, 0);
}

/* This generation's producer took the ids from its predecessor's
 * (actors/producer.c): those up to hole_until went to the old generation's
 * loops alone, so this loop's streams are told (before the frame that
 * brought the news, which its producer numbered after it wrote them). */
static void loop_hole(m0__loop *l) {
  m0__host_figures *hf = l->page->figures;
  if (atomic_load_explicit(&hf->hole_gen, memory_order_acquire) != l->generation) return;
  uint64_t until = atomic_load(&hf->hole_until);
  if (until <= l->hole_seen || until <= l->first_id) return;
  l->hole_seen = until;
  m0__stream_hole(&l->http, l->first_id, until);
}

/* A frame from the bus (the producer, a handler, m0pub): to this loop's
 * streams on its channel. */
static void loop_on_frame(m0__loop *l, const m0__msg *m) {
  uint64_t id;
  const char *channel;
  size_t chlen, flen;
  const uint8_t *frame;
  char peer[96];
  if (m0__frame_decode(m->payload, m->len, &id, &channel, &chlen, &frame, &flen) != 0 ||
      !m0__frame_ok(frame, flen) || !m0__channel_ok_n(channel, chlen)) {
    m0__msg_peer(m, peer, sizeof peer);
    m0__refused(l->self.id, M0__REFUSE_FRAME, M0__K_FRAME, peer);
    return;
  }
  /* A frame numbered before this loop began was queued for a predecessor
   * (a worker that died): old news, and a new stream must never see ids go
   * backwards. */
  /* Id 0 is a frame the fleet's bridge delivers unnumbered while its link
   * is down (bus/bus.c): written without an id and kept out of the
   * histories, so ids stay the fleet's. Only the host's own processes and
   * publishers on this machine (m0pub, which may number frames too) may
   * send one; from the network it is refused. */
  if (id == 0) {
    if (m->origin == M0__ORIGIN_OUTSIDE) {
      m0__msg_peer(m, peer, sizeof peer);
      m0__refused(l->self.id, M0__REFUSE_FRAME_ID, M0__K_FRAME, peer);
      return;
    }
    l->frames++;
    uint64_t dropped = m0__http_publish(&l->http, channel, chlen, 0, frame, flen);
    if (dropped) loop_dropped(l, dropped);
    return;
  }
  if (id <= l->born_id) {
    /* From the host's own processes, old news (above); from a publisher on
     * this machine (m0pub --id), a refusal it is told of. Not first_id: the
     * producer numbers from the barrier's GO on, so a frame numbered before
     * this loop's own GO may reach it after (a reload's next generation
     * under --workers: dropped here, untold). */
    if (m->origin == M0__ORIGIN_LOCAL) {
      m0__msg_peer(m, peer, sizeof peer);
      m0__refused(l->self.id, M0__REFUSE_STALE, M0__K_FRAME, peer);
    }
    return;
  }
  /* Every id was taken from the shared counter before its frame was sent:
   * one beyond it was made up. No id is written twice (a replay, or a
   * publisher on this machine that named an id the host's own had taken);
   * from outside the host, an id too old for the window to tell is refused
   * too. Publishers cross in flight: frames are held until the ids
   * below them came (http/order.c), and one later than that is dropped by
   * its channel, counted and told (http/stream.c, chan_late), never written
   * backwards. */
  bool old = l->last_id >= M0__WRITTEN_WINDOW && id <= l->last_id - M0__WRITTEN_WINDOW;
  if (id > atomic_load_explicit(&l->page->head->event_id, memory_order_acquire) ||
      (old ? m->origin == M0__ORIGIN_LOCAL : written_has(l, id))) {
    m0__msg_peer(m, peer, sizeof peer);
    m0__refused(l->self.id, M0__REFUSE_FRAME_ID, M0__K_FRAME, peer);
    return;
  }
  if (!old) written_mark(l, id);
  l->frames++;
  loop_hole(l);
  uint64_t dropped = m0__order_frame(&l->order, &l->http, channel, chlen, id, frame, flen);
  if (dropped) loop_dropped(l, dropped);
}

/* An inproc mailbox is reachable only from this process (and a tcp one may
 * be bound to another machine's interface): outside publishers on this
 * machine dial loop.i.sock in the run directory, the loop's outside
 * mailbox. */
static int loop_listen_ipc(m0__loop *l) {
  char url[M0__URL_MAX];
  int rv = m0__topology_outside_url(url, sizeof url, l->run_dir, l->index);
  if (rv != 0) return rv;
  return m0__actor_open(&l->outside, l->self.id, url, l->trace);
}

/* Why a loop could not start: the step, its error and, when the process is
 * at its descriptor limit (the usual reason, and nng says little more than
 * "cannot"), the limit, what is open and what the topology needs. */
static void loop_why(m0__loop *l, char *err, size_t n, const char *step, const char *reason) {
  char spent[160];
  if (m0__fds_spent(spent, sizeof spent))
    snprintf(err, n, "loop.%d cannot start: %s: %s%.*s; this topology needs about %ld to start: raise the limit "
             "(ulimit -n) or serve fewer loops or handler threads)", l->index, step, reason,
             (int)strlen(spent) - 1, spent, l->fds_needed);
  else snprintf(err, n, "loop.%d cannot start: %s: %s", l->index, step, reason);
}

/* Everything the loop's thread opens before it says READY; err says which
 * step failed and why. */
static int loop_open_handles(m0__loop *l, char *err, size_t n) {
  int fd, ofd, rv;
  if ((rv = m0__http_init(&l->http, &l->uv, &l->http_cfg, &m0__loop_http_ops, l)) != 0)
    return loop_why(l, err, n, "its buffers", m0__strerror(rv)), -1;
  if ((rv = m0__actor_recv_fd(&l->self, &fd)) != 0)
    return loop_why(l, err, n, "its mailbox's descriptor", m0__strerror(rv)), -1;
  if ((rv = uv_poll_init(&l->uv, &l->mail, fd)) != 0) return loop_why(l, err, n, "its mailbox's poll", uv_strerror(rv)), -1;
  if (l->outside.open && (rv = m0__actor_recv_fd(&l->outside, &ofd)) != 0)
    return loop_why(l, err, n, "its outside mailbox's descriptor", m0__strerror(rv)), -1;
  if (l->outside.open && (rv = uv_poll_init(&l->uv, &l->outside_mail, ofd)) != 0)
    return loop_why(l, err, n, "its outside mailbox's poll", uv_strerror(rv)), -1;
  if (l->inbox.ready && (rv = uv_poll_init(&l->uv, &l->lane, l->inbox.efd)) != 0)
    return loop_why(l, err, n, "its inbox's poll", uv_strerror(rv)), -1;
  if (l->share && !l->handoff && (rv = m0__accept_open(l)) != 0)
    return loop_why(l, err, n, "its siblings' mailboxes", m0__strerror(rv)), -1;
  if (l->npool && (rv = m0__lane_open(l)) != 0) return loop_why(l, err, n, "its pool lane", m0__strerror(rv)), -1;
  if ((rv = m0__asks_open(l)) != 0) return loop_why(l, err, n, "its actors' table", m0__strerror(rv)), -1;
  return 0;
}

/* A handle the start opened and nobody closed (a start that failed half way):
 * closed, so that uv_loop_close finds the loop empty. */
static void loop_close_left(uv_handle_t *h, void *arg) {
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

/* The loop's rows of request figures on the shared page, by route: each
 * route's own row (transport/page.h, m0__page_rows), looked up once here, so
 * a request indexes an array and a reload that reorders or replaces routes
 * never counts one route under another's label. NULL (no histograms) when
 * out of memory. */
static m0__latency **loop_route_rows(m0__loop *l) {
  const m0_app *app = l->app;
  m0__latency **rows = calloc(app->nroutes + 1, sizeof *rows);
  if (!rows) return NULL;
  m0__latency *mine = l->page->loop_figures[l->index].routes;
  for (size_t r = 0; r < app->nroutes; r++) {
    int row = m0__page_route_row(l->page, app->routes[r].method, app->routes[r].pattern, true);
    rows[r] = row >= 0 ? &mine[row] : NULL;
  }
  rows[app->nroutes] = &mine[M0__PAGE_ROW_NONE];
  return rows;
}

static void loop_run(m0__handle *h) {
  m0__loop *l = (m0__loop *)h;
  char err[768] = "";
  bool uv_ready = false;
  if (m0__peer_open(&l->coord, l->coord_id, l->coord_url, 1000) != 0) {
    char reach[64];
    snprintf(reach, sizeof reach, "its coordinator at %.40s", l->coord_url);
    loop_why(l, l->why, sizeof l->why, reach, "cannot dial it");
    fprintf(stderr, "m0: %s\n", l->why);
    l->why[0] = 0; /* said */
    goto out;
  }
  if (l->app->make) {
    l->state = l->app->make(&l->ctx, err, sizeof err);
    if (!l->state) {
      if (!err[0]) snprintf(err, sizeof err, "%s: make failed on loop %d", l->app->name, l->index);
      atomic_store(&l->h.failed, true);
      atomic_store(&l->h.said_stopped, true);
      m0__tell(&l->self, &l->coord, M0__K_FAILED, err, strlen(err));
      goto out;
    }
  }
  /* uv_loop_init fails when the process is out of descriptors (its epoll
   * and its wake), and a loop it did not make must not be closed: that was a
   * SIGSEGV in uv_loop_close. */
  int rv = uv_loop_init(&l->uv);
  if (rv != 0) {
    loop_why(l, err, sizeof err, "its event loop", uv_strerror(rv));
    snprintf(l->why, sizeof l->why, "%s", err);
    m0__tell(&l->self, &l->coord, M0__K_DIED, err, strlen(err));
    goto out;
  }
  uv_ready = true;
  /* The server's own: the state made here, and its figures on the shared
   * page, whatever process runs it (transport/page.h). */
  l->http_cfg.state = l->state;
  l->http_cfg.figures = &l->page->loop_figures[l->index];
  l->http_cfg.latency = loop_route_rows(l);
  if (l->share) l->http_cfg.busy_since = &m0__loop_line_at(l, l->index)->pass_start_ms;
  l->http_cfg.chan_lines = l->page->channels;
  l->nloops = l->topo->loops;
  if (loop_open_handles(l, err, sizeof err) != 0) {
    snprintf(l->why, sizeof l->why, "%s", err);
    m0__tell(&l->self, &l->coord, M0__K_DIED, err, strlen(err));
    goto out;
  }
  l->mail.data = l;
  uv_poll_start(&l->mail, UV_READABLE, loop_on_mail);
  if (l->outside.open) { /* its descriptor was polled for above, with the mailbox's */
    l->outside_mail.data = l;
    uv_poll_start(&l->outside_mail, UV_READABLE, loop_on_mail);
  }
  if (l->inbox.ready) { /* the pool's RESULTs: the same handler, reading the inbox only */
    l->self.inbox = &l->inbox;
    l->lane.data = l;
    uv_poll_start(&l->lane, UV_READABLE, loop_on_mail);
  }
  uv_timer_init(&l->uv, &l->sweep);
  l->sweep.data = l;
  uv_timer_start(&l->sweep, loop_on_sweep, l->sweep_ms, l->sweep_ms);
  uv_timer_init(&l->uv, &l->order_due);
  l->order_due.data = l;
  uv_check_init(&l->uv, &l->pass_begin);
  uv_prepare_init(&l->uv, &l->pass_end);
  l->pass_begin.data = l->pass_end.data = l;
  uv_check_start(&l->pass_begin, loop_on_pass_begin);
  if (l->share) uv_prepare_start(&l->pass_end, m0__accept_on_pass_end);
  l->born_id = atomic_load(&l->page->head->event_id);
  m0__tell(&l->self, &l->coord, M0__K_READY, NULL, 0);
  uv_run(&l->uv, UV_RUN_DEFAULT);
  if (!l->finished) {
    snprintf(err, sizeof err, "loop.%d left its event loop unexpectedly", l->index);
    m0__tell(&l->self, &l->coord, M0__K_DIED, err, strlen(err));
  }
out:
  if (uv_ready) {
    loop_close_listeners(l);
    m0__asks_close(l);
    uv_walk(&l->uv, loop_close_left, NULL);
    uv_run(&l->uv, UV_RUN_NOWAIT);
    uv_loop_close(&l->uv);
    free(l->http_cfg.latency);
    m0__http_fini(&l->http);
    m0__order_free(l->order);
    l->order = NULL;
  }
  if (l->app->free && l->state) l->app->free(l->state);
  /* STOP to the pool threads: their queue is empty by now. */
  for (int j = 0; l->pool && j < l->npool; j++) m0__send(&l->self, &l->pool[j], M0__K_STOP, 0, 0, NULL, 0);
  if (l->listen_fd >= 0) close(l->listen_fd);
  if (l->plain_fd >= 0) close(l->plain_fd);
}

/* After the join (runtime/handle.h on why not before). */
static void loop_hang_up(m0__handle *h) {
  m0__loop *l = (m0__loop *)h;
  m0__accept_close(l);
  m0__lane_close(l);
  m0__asks_free(l);
  m0__peer_close(&l->coord);
}

static void loop_release(m0__handle *h) {
  m0__actor_close(&((m0__loop *)h)->outside);
  m0__actor_close(&((m0__loop *)h)->self);
}

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

/* The sweep runs often enough to honour the shortest timeout to ~25 %,
 * and under a supervisor's heartbeat (beat_ms) an idle loop must turn, and
 * so beat, well within its timeout: at 1000 ms a quiet loop's
 * once-a-second sweep let the supervisor kill idle workers. */
static uint64_t loop_sweep_ms(const m0__http_config *h, uint64_t beat_ms) {
  uint64_t shortest = h->header_timeout_ms;
  if (h->heartbeat_ms && h->heartbeat_ms < shortest) shortest = h->heartbeat_ms;
  if (h->body_timeout_ms < shortest) shortest = h->body_timeout_ms;
  if (h->keepalive_timeout_ms < shortest) shortest = h->keepalive_timeout_ms;
  uint64_t every = shortest / 4 < 10 ? 10 : shortest / 4 > 1000 ? 1000 : shortest / 4;
  if (beat_ms && beat_ms < every) every = beat_ms;
  return every;
}

int m0__loop_init(m0__loop *l, const m0__loop_config *cfg, m0__exits *exits) {
  if (m0__inbox_init(&l->inbox) != 0) return M0__ENOMEM;
  m0__handle_init(&l->h, &m0__loop_kind, exits);
  l->index = cfg->index;
  l->topo = cfg->topo;
  l->app = cfg->app;
  l->trace = cfg->trace;
  l->page = cfg->page;
  l->generation = cfg->generation;
  l->listen_fd = cfg->listen_fd;
  l->plain_fd = cfg->plain_fd;
  l->coord_id = cfg->coord_id;
  l->coord_url = cfg->coord_url;
  l->handoff = cfg->handoff;
  l->run_dir = cfg->run_dir;
  l->ctx = cfg->ctx;
  l->recycle_at = cfg->recycle_at;
  l->share = cfg->share;
  l->fds_needed = cfg->fds_needed;
  l->npool = cfg->npool;
  l->pool_threads = cfg->pool_threads;
  l->host_metrics = cfg->metrics;
  l->host_graph = cfg->graph;
  l->host_swept = cfg->swept;
  l->host = cfg->host;
  l->http_cfg = cfg->http;
  l->http_cfg.app = cfg->app;
  l->http_cfg.worker = cfg->index;
  l->http_cfg.pool = cfg->npool > 0;
  if (!cfg->metrics) l->http_cfg.metrics_path = NULL;
  l->sweep_ms = loop_sweep_ms(&cfg->http, cfg->beat_ms);
  return 0;
}

void m0__loop_actors(m0__loop *l, struct m0__service **services, int n) {
  l->services = services;
  l->nservices = n;
}

const m0__actor_kind m0__loop_kind = {"loop", loop_open, loop_run, loop_hang_up, loop_release};
