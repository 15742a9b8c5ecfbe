/* Accept sharing (actors/accept.h).
 *
 * Design notes
 * - A descriptor has exactly one owner at every step: loop_hand's failure
 *   leaves it with the acceptor, which adopts it; a sent SCM_RIGHTS copy is
 *   closed here because the kernel gave the sibling its own.
 * - pending (hand-offs sent, not yet admitted) is raised before the send and
 *   taken back on failure, so a sibling's load never misses a connection on
 *   its way; it never goes below zero (accept_pending_done). A draining loop
 *   waits for its pending hand-offs (until the drain's fresh grace ends)
 *   before it finishes: one chosen just before it was leaving is answered,
 *   not closed (m0__loop_maybe_finish).
 * - The time a sibling's pass mark is compared against is read fresh, not
 *   the pass's cached uv_now: a long pass would make every sibling look
 *   fresh.
 */
#include "actors/accept.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/admit.h"
#include "actors/loop_end.h"
#include "base/errors.h"
#include "transport/handoff.h"

#define ACCEPT_BATCH 64
#define ACCEPT_STUCK_MS 2

static void accept_on_listen(uv_poll_t *p, int status, int events);
static void accept_on_plain(uv_poll_t *p, int status, int events);

/* One hand-off arrived. Never below zero: a wrapped count would make this
 * loop look infinitely loaded, and no sibling would hand it anything again. */
static void accept_pending_done(m0__loop *l) {
  _Atomic uint64_t *p = &m0__loop_line_at(l, l->index)->pending;
  uint64_t v = atomic_load(p);
  while (v > 0 && !atomic_compare_exchange_weak(p, &v, v - 1)) {}
}

void m0__accept_poll(m0__loop *l, bool on) {
  if (!l->listening || on == l->polling || (on && l->recycling)) return;
  l->polling = on;
  if (on) uv_poll_start(&l->listener, UV_READABLE, accept_on_listen);
  else uv_poll_stop(&l->listener);
  if (l->plain_fd < 0) return;
  if (on) uv_poll_start(&l->plain_listener, UV_READABLE, accept_on_plain);
  else uv_poll_stop(&l->plain_listener);
}

/* Takes a connection: ours from now on (plain: the plain listener's). */
static void accept_adopt(m0__loop *l, int fd, bool plain) {
  if (l->finished) {
    close(fd); /* came after the drain's grace, which the loop waited for it (m0__loop_maybe_finish) */
    return;
  }
  if (m0__http_adopt(&l->http, fd, plain) == 0) atomic_fetch_add(&m0__loop_line_at(l, l->index)->open, 1);
  if (l->http.nconns >= l->ctx.capacity) m0__accept_poll(l, false);
  m0__loop_maybe_finish(l); /* draining: that was the hand-off it waited for (or it could not be taken) */
}

/* The least-loaded sibling, or ourselves: ties stay here. */
static int accept_pick(m0__loop *l, uint64_t now_ms) {
  int best = l->index;
  m0__loop_line *me = m0__loop_line_at(l, l->index);
  uint64_t best_load = atomic_load(&me->open) + atomic_load(&me->pending);
  int n = l->nloops;
  unsigned start = l->rotate++;
  for (int k = 0; k < n; k++) {
    int i = (int)((start + (unsigned)k) % (unsigned)n);
    if (i == l->index) continue;
    m0__loop_line *ln = m0__loop_line_at(l, i);
    if (atomic_load(&ln->leaving)) continue;
    uint64_t pass = atomic_load(&ln->pass_start_ms);
    if (pass && now_ms > pass + ACCEPT_STUCK_MS) continue;
    uint64_t load = atomic_load(&ln->open) + atomic_load(&ln->pending);
    if (load < best_load) {
      best = i;
      best_load = load;
    }
  }
  return best;
}

/* Hands fd to sibling i. Returns 0 when it is theirs; else it is still ours. */
static int accept_hand(m0__loop *l, int i, int fd) {
  m0__loop_line *ln = m0__loop_line_at(l, i);
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
  return M0__ETRANSPORT;
}

/* A batch of lfd's connections. The plain listener's (plain) are never
 * handed to a sibling: a redirect or a scrape is not worth a hop, and a
 * hand-off carries no word of which listener it came from. */
static void accept_batch(m0__loop *l, int lfd, bool plain) {
  if (l->stopping) return;
  /* Told by its coordinator, before STOP was sent, that the drain begins: a
   * connection that came after that is not taken, even when the listener's
   * wake is handled in this pass before the mailbox's (it stays in the
   * backlog until the listener closes). */
  if (atomic_load(&l->told_stop)) {
    m0__accept_poll(l, false);
    return;
  }
  /* The time now, not the pass's cached start: a sibling's pass start is
   * compared against it. */
  uint64_t now = uv_hrtime() / 1000000;
  for (int k = 0; k < ACCEPT_BATCH; k++) {
    if (l->http.nconns >= l->ctx.capacity) {
      m0__accept_poll(l, false); /* the rest wait in the backlog */
      return;
    }
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      /* Out of descriptors the listener stays readable: polled on, the loop
       * spun and wrote this line a million times a second. It waits instead
       * for one of its connections to close or its next sweep, and says so
       * once until an accept succeeds again. */
      if (errno == EMFILE || errno == ENFILE) {
        if (!l->fd_starved)
          fprintf(stderr, "m0: loop.%d: out of descriptors; connections wait in the backlog\n", l->index);
        l->fd_starved = true;
        m0__accept_poll(l, false);
      }
      return; /* EAGAIN: another loop won it, or the backlog is empty */
    }
    l->fd_starved = false;
    if (l->share && !plain) {
      int to = accept_pick(l, now);
      if (to != l->index && accept_hand(l, to, fd) == 0) {
        l->handed++;
        atomic_fetch_add(&m0__loop_line_at(l, l->index)->handoffs, 1);
        atomic_fetch_add(&l->page->loop_figures[l->index].handoffs, 1); /* /metrics': never cleared */
        continue;
      }
    }
    accept_adopt(l, fd, plain);
  }
}

static void accept_on_listen(uv_poll_t *p, int status, int events) {
  (void)events;
  if (status == 0) accept_batch(p->data, ((m0__loop *)p->data)->listen_fd, false);
}

static void accept_on_plain(uv_poll_t *p, int status, int events) {
  (void)events;
  if (status == 0) accept_batch(p->data, ((m0__loop *)p->data)->plain_fd, true);
}

/* A hand-off this loop cannot have been sent: named and counted
 * (runtime/admit.h), its descriptor never adopted. */
static void accept_refuse(m0__loop *l, const char *from) {
  m0__refused(l->self.id, M0__REFUSE_UNEXPECTED, M0__K_HANDOFF, from);
}

void m0__accept_on_handoff(m0__loop *l, const m0__msg *m) {
  char peer[96];
  int32_t fd = -1;
  if (m->len == sizeof fd) memcpy(&fd, m->payload, sizeof fd);
  /* Not closed when refused: a number in a message is not ours to close. */
  if (!l->share || l->handoff || m->len != sizeof fd || m0__handoff_check(fd, l->listen_family) != 0) {
    m0__msg_peer(m, peer, sizeof peer);
    accept_refuse(l, peer);
    return;
  }
  accept_pending_done(l);
  l->adopted++;
  accept_adopt(l, fd, false);
}

/* Prefork: connections a sibling process handed us. */
void m0__accept_on_handin(uv_poll_t *p, int status, int events) {
  m0__loop *l = p->data;
  int fd;
  while ((fd = m0__handoff_recv(l->handoff[2 * l->index])) >= 0) {
    if (m0__handoff_check(fd, l->listen_family) != 0) { /* the kernel's copy: ours to close */
      close(fd);
      accept_refuse(l, "a sibling process's hand-off socket");
      continue;
    }
    accept_pending_done(l);
    l->adopted++;
    accept_adopt(l, fd, false);
  }
}

void m0__accept_pass_begin(m0__loop *l) {
  m0__loop_line *ln = m0__loop_line_at(l, l->index);
  if (l->share && !atomic_load_explicit(&ln->pass_start_ms, memory_order_relaxed))
    atomic_store_explicit(&ln->pass_start_ms, uv_now(&l->uv) | 1, memory_order_relaxed);
}

void m0__accept_on_pass_end(uv_prepare_t *p) {
  m0__loop *l = p->data;
  atomic_store_explicit(&m0__loop_line_at(l, l->index)->pass_start_ms, 0, memory_order_relaxed);
}

int m0__accept_open(m0__loop *l) {
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

void m0__accept_close(m0__loop *l) {
  if (!l->siblings) return;
  for (int i = 0; i < l->nloops; i++) m0__peer_close(&l->siblings[i]);
  free(l->siblings);
  l->siblings = NULL;
}
