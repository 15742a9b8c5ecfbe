#include "runtime/handle.h"

#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/errors.h"

int m0__exits_init(m0__exits *e) {
  e->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  return e->fd < 0 ? M0__ENOMEM : 0;
}

void m0__exits_fini(m0__exits *e) {
  if (e->fd >= 0) close(e->fd);
  e->fd = -1;
}

void m0__exits_take(m0__exits *e) {
  uint64_t v;
  (void)!read(e->fd, &v, sizeof v);
}

void m0__handle_init(m0__handle *h, const m0__actor_kind *kind, m0__exits *exits) {
  h->kind = kind;
  h->exits = exits;
  h->started = h->closed = false;
  atomic_store(&h->exited, true);
  atomic_store(&h->said_stopped, false);
  atomic_store(&h->failed, false);
  atomic_store(&h->in_app, false);
}

int m0__handle_open(m0__handle *h) { return h->kind->open(h); }

/* The thread's end is announced after run returns, whatever way it did. */
static void *handle_main(void *arg) {
  m0__handle *h = arg;
  h->kind->run(h);
  atomic_store(&h->exited, true);
  if (h->exits) {
    uint64_t one = 1;
    (void)!write(h->exits->fd, &one, sizeof one);
  }
  return NULL;
}

int m0__handle_start(m0__handle *h) {
  atomic_store(&h->exited, false);
  if (pthread_create(&h->thread, NULL, handle_main, h) != 0) {
    atomic_store(&h->exited, true);
    return M0__ENOMEM;
  }
  h->started = true;
  return 0;
}

bool m0__handle_exited(m0__handle *h) { return atomic_load(&h->exited); }

int m0__handles_close(m0__handle **hs, int n, void (*cb)(m0__handle *h)) {
  int left = 0;
  for (int i = 0; i < n; i++) {
    m0__handle *h = hs[i];
    if (!h || h->closed) continue;
    if (!m0__handle_exited(h)) {
      left++;
      continue;
    }
    if (h->started) pthread_join(h->thread, NULL);
    h->started = false;
  }
  if (left) return left; /* one is still inside the application: its peers may still be used */
  for (int i = 0; i < n; i++)
    if (hs[i] && !hs[i]->closed && hs[i]->kind->hang_up) hs[i]->kind->hang_up(hs[i]);
  for (int i = 0; i < n; i++)
    if (hs[i] && !hs[i]->closed && hs[i]->kind->release) hs[i]->kind->release(hs[i]);
  for (int i = 0; i < n; i++) {
    if (!hs[i] || hs[i]->closed) continue;
    hs[i]->closed = true;
    if (cb) cb(hs[i]);
  }
  return 0;
}
