#include "actors/loop.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "actors/errors.h"
#include "actors/publisher.h"

static void loop_finish(m0__loop *l);

static void loop_on_connection(uv_stream_t *server, int status) {
  m0__loop *l = server->data;
  if (status < 0 || l->stopping) return;
  if (l->http.nconns >= l->ctx.capacity) {
    /* Not accepting leaves it in the backlog: libuv stops polling the
     * listener until uv_accept is called (in loop_on_closed). */
    l->accept_waiting = true;
    return;
  }
  if (m0__http_accept(&l->http, server) == 0) atomic_fetch_add(&l->page->lines[l->index].open, 1);
}

static void loop_on_closed(m0__http *h) {
  m0__loop *l = h->owner;
  atomic_fetch_sub(&l->page->lines[l->index].open, 1);
  if (l->accept_waiting && !l->stopping && h->nconns < l->ctx.capacity) {
    l->accept_waiting = false;
    if (m0__http_accept(h, (uv_stream_t *)&l->listener) == 0)
      atomic_fetch_add(&l->page->lines[l->index].open, 1);
  }
  if (l->stopping && h->nconns == 0) loop_finish(l);
}

static void loop_on_sweep(uv_timer_t *t) {
  m0__loop *l = t->data;
  m0__http_sweep(&l->http);
  atomic_store(&l->page->lines[l->index].requests, l->http.stats.requests);
}

static void loop_go(m0__loop *l) {
  int rv = uv_tcp_init(&l->uv, &l->listener);
  if (rv == 0) rv = uv_tcp_open(&l->listener, l->listen_fd);
  l->listener.data = l;
  if (rv == 0) rv = uv_listen((uv_stream_t *)&l->listener, 4096, loop_on_connection);
  if (rv != 0) {
    char why[160];
    snprintf(why, sizeof why, "loop %d cannot listen: %s", l->index, uv_strerror(rv));
    m0__send(&l->self, &l->coord, M0__K_DIED, 0, 0, why, strlen(why));
    return;
  }
  l->listening = true;
}

static void loop_stop(m0__loop *l) {
  if (l->stopping) return;
  l->stopping = true;
  if (l->listening) uv_close((uv_handle_t *)&l->listener, NULL);
  l->listening = false;
  m0__http_drain(&l->http);
  if (l->http.nconns == 0) loop_finish(l);
}

/* Everything is answered and closed: report and let uv_run return. */
static void loop_finish(m0__loop *l) {
  if (l->finished) return;
  l->finished = true;
  m0__loop_stats st = {l->http.stats.requests, l->http.stats.accepted, l->http.stats.errors_4xx,
                       l->http.stats.timeouts, l->frames};
  atomic_store(&l->said_stopped, true);
  m0__send(&l->self, &l->coord, M0__K_STOPPED, 0, 0, &st, sizeof st);
  uv_poll_stop(&l->mail);
  uv_close((uv_handle_t *)&l->mail, NULL);
  uv_timer_stop(&l->sweep);
  uv_close((uv_handle_t *)&l->sweep, NULL);
}

static void loop_on_mail(uv_poll_t *p, int status, int events) {
  m0__loop *l = p->data;
  m0__msg m;
  int rv;
  while (!l->finished && (rv = m0__recv(&l->self, &m, true)) != M0__ETIMEDOUT) {
    if (rv == M0__EBADMSG) {
      fprintf(stderr, "m0: loop %d: dropped a malformed message\n", l->index);
      continue;
    }
    if (rv != 0) break;
    switch (m.env.kind) {
    case M0__K_GO: loop_go(l); break;
    case M0__K_STOP: loop_stop(l); break;
    case M0__K_FRAME: l->frames++; break; /* streams carry them (streams issue) */
    default:
      fprintf(stderr, "m0: loop %d: unexpected %s message\n", l->index, m0__kind_name(m.env.kind));
      break;
    }
    m0__msg_free(&m);
  }
}

static void *loop_main(void *arg) {
  m0__loop *l = arg;
  const m0__actor_desc *me = m0__topology_find(l->topo, M0__ACTOR_ID(M0__ROLE_LOOP, l->index));
  const m0__actor_desc *co = m0__topology_find(l->topo, M0__ACTOR_ID(M0__ROLE_COORD, 0));
  char err[512] = "";
  if (m0__actor_open(&l->self, me->id, me->url, l->trace) != 0 ||
      m0__peer_open(&l->coord, co->id, co->url, 1000) != 0) {
    fprintf(stderr, "m0: loop %d cannot open its mailbox at %s\n", l->index, me->url);
    goto out;
  }
  if (l->app->make) {
    l->state = l->app->make(&l->ctx, err, sizeof err);
    if (!l->state) {
      if (!err[0]) snprintf(err, sizeof err, "%s: make failed on loop %d", l->app->name, l->index);
      atomic_store(&l->said_stopped, true);
      m0__send(&l->self, &l->coord, M0__K_FAILED, 0, 0, err, strlen(err));
      goto out;
    }
  }
  uv_loop_init(&l->uv);
  l->http.uv = &l->uv;
  l->http.app = l->app;
  l->http.state = l->state;
  l->http.worker = l->index;
  l->http.owner = l;
  l->http.on_closed = loop_on_closed;
  const m0_config *c = l->cfg;
  l->http.lim = (m0__parse_limits){(size_t)M0__CFG(c, max_header_bytes), (size_t)M0__CFG(c, max_uri_bytes),
                                   (size_t)M0__CFG(c, max_body_bytes)};
  l->http.header_timeout_ms = (uint64_t)M0__CFG(c, header_timeout_ms);
  l->http.body_timeout_ms = (uint64_t)M0__CFG(c, body_timeout_ms);
  l->http.keepalive_timeout_ms = (uint64_t)M0__CFG(c, keepalive_timeout_ms);
  l->http.max_keepalive_requests = M0__CFG(c, max_keepalive_requests);
  l->http.access_log = M0__CFG(c, access_log) != 0;
  int fd;
  if (m0__http_init(&l->http) != 0 || m0__actor_recv_fd(&l->self, &fd) != 0 ||
      uv_poll_init(&l->uv, &l->mail, fd) != 0) {
    snprintf(err, sizeof err, "loop %d cannot start", l->index);
    m0__send(&l->self, &l->coord, M0__K_DIED, 0, 0, err, strlen(err));
    goto out_loop;
  }
  l->mail.data = l;
  uv_poll_start(&l->mail, UV_READABLE, loop_on_mail);
  /* The sweep runs often enough to honour the shortest timeout to ~25 %. */
  uint64_t shortest = l->http.header_timeout_ms;
  if (l->http.body_timeout_ms < shortest) shortest = l->http.body_timeout_ms;
  if (l->http.keepalive_timeout_ms < shortest) shortest = l->http.keepalive_timeout_ms;
  uint64_t every = shortest / 4 < 10 ? 10 : shortest / 4 > 1000 ? 1000 : shortest / 4;
  uv_timer_init(&l->uv, &l->sweep);
  l->sweep.data = l;
  uv_timer_start(&l->sweep, loop_on_sweep, every, every);
  m0__send(&l->self, &l->coord, M0__K_READY, 0, 0, NULL, 0);
  uv_run(&l->uv, UV_RUN_DEFAULT);
  if (!l->finished) {
    snprintf(err, sizeof err, "loop %d left its event loop unexpectedly", l->index);
    m0__send(&l->self, &l->coord, M0__K_DIED, 0, 0, err, strlen(err));
  }
out_loop:
  if (l->listening) uv_close((uv_handle_t *)&l->listener, NULL);
  uv_run(&l->uv, UV_RUN_NOWAIT);
  uv_loop_close(&l->uv);
  m0__http_fini(&l->http);
  if (l->app->free && l->state) l->app->free(l->state);
out:
  m0__peer_close(&l->coord);
  m0__actor_close(&l->self);
  atomic_store(&l->exited, true);
  return NULL;
}

int m0__loop_start(m0__loop *l) {
  atomic_store(&l->exited, false);
  if (pthread_create(&l->thread, NULL, loop_main, l) != 0) return M0__ENOMEM;
  l->started = true;
  return 0;
}
