#include "service/boxes.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "base/errors.h"

void m0__boxes_init(m0__boxes *b) {
  memset(b, 0, sizeof *b);
  pthread_mutex_init(&b->mu, NULL);
}

void m0__boxes_fini(m0__boxes *b) {
  for (int i = 0; i < M0__BOXES; i++)
    if (b->box[i].made) m0__inbox_fini(&b->box[i].inbox);
  pthread_mutex_destroy(&b->mu);
}

/* The open box of that name (under mu), or M0__ENOTFOUND. */
static int box_find(const m0__boxes *b, const char *name, size_t n) {
  for (int i = 0; i < M0__BOXES; i++)
    if (b->box[i].name[0] && strlen(b->box[i].name) == n && !memcmp(b->box[i].name, name, n)) return i;
  return M0__ENOTFOUND;
}

int m0__box_open(m0__boxes *b, const char *name) {
  int rv = -ENOSPC;
  pthread_mutex_lock(&b->mu);
  if (box_find(b, name, strlen(name)) >= 0) rv = -EEXIST;
  for (int i = 0; rv == -ENOSPC && i < M0__BOXES; i++) {
    m0__box *x = &b->box[i];
    if (x->name[0]) continue;
    if (!x->made && m0__inbox_init(&x->inbox) != 0) {
      rv = -ENOMEM;
      break;
    }
    x->made = true;
    atomic_store(&x->queued, 0);
    snprintf(x->name, sizeof x->name, "%s", name);
    rv = i;
  }
  pthread_mutex_unlock(&b->mu);
  return rv;
}

void m0__box_close(m0__boxes *b, int i) {
  m0__box *x = &b->box[i];
  pthread_mutex_lock(&b->mu);
  x->name[0] = 0; /* no send finds it from now */
  pthread_mutex_unlock(&b->mu);
  while (atomic_load(&x->users) > 0) sched_yield(); /* a send that found it before: one inbox put */
  for (nng_msg *m; (m = m0__inbox_take(&x->inbox));) nng_msg_free(m);
}

int m0__box_hold(m0__boxes *b, const char *name, size_t n) {
  pthread_mutex_lock(&b->mu);
  int i = box_find(b, name, n);
  if (i >= 0) atomic_fetch_add(&b->box[i].users, 1);
  pthread_mutex_unlock(&b->mu);
  return i;
}

void m0__box_release(m0__boxes *b, int i) { atomic_fetch_sub(&b->box[i].users, 1); }

int m0__boxes_watch(m0__boxes *b, int actor, const char *watcher) {
  int rv = -ENOSPC;
  pthread_mutex_lock(&b->mu);
  for (int i = 0; i < b->nwatch; i++)
    if (b->watch[i].actor == actor && !strcmp(b->watch[i].watcher, watcher)) rv = -EEXIST;
  if (rv == -ENOSPC && b->nwatch < M0__WATCHES) {
    m0__watch *w = &b->watch[b->nwatch++];
    w->actor = actor;
    snprintf(w->watcher, sizeof w->watcher, "%s", watcher);
    rv = 0;
  }
  pthread_mutex_unlock(&b->mu);
  return rv;
}
