#include "runtime/inbox.h"

#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/errors.h"

int m0__inbox_init(m0__inbox *b) {
  memset(b, 0, sizeof *b);
  b->cap = 8;
  b->q = malloc(b->cap * sizeof *b->q);
  b->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (!b->q || b->efd < 0) {
    free(b->q);
    if (b->efd >= 0) close(b->efd);
    return M0__ENOMEM;
  }
  pthread_mutex_init(&b->mu, NULL);
  b->ready = true;
  return 0;
}

void m0__inbox_fini(m0__inbox *b) {
  if (!b->ready) return;
  for (size_t i = 0; i < b->n; i++) nng_msg_free(b->q[(b->head + i) % b->cap]);
  free(b->q);
  close(b->efd);
  pthread_mutex_destroy(&b->mu);
  b->ready = false;
}

/* The eventfd is written when the ring goes from empty to not empty and
 * read back when a take leaves it empty, so it is readable while there is
 * something to take: one wake per batch of messages, however many the
 * sender adds before the receiver runs, and no system call for a look into
 * an empty ring.
 * The write comes after the unlock. Written under the mutex, it woke the
 * receiver (the loop) while the sender still held the lock: the loop, which
 * preempts a pool thread at once, then blocked on that lock until the
 * preempted sender got the CPU back, which on a busy CPU is the next tick
 * (~4 ms at HZ=250: bench/run_pool, "pinned").
 * So a write can land after the receiver has emptied the ring. `unwoken`
 * counts the writes decided and not yet read back (eventfd adds them up): a
 * take that finds the ring empty while some are outstanding reads again,
 * and a wake that finds nothing clears itself. No wake is lost: every put
 * that makes the ring not empty writes after the read that emptied it. */
int m0__inbox_put(m0__inbox *b, nng_msg *m) {
  pthread_mutex_lock(&b->mu);
  if (b->n == b->cap) {
    nng_msg **q = malloc(2 * b->cap * sizeof *q);
    if (!q) {
      pthread_mutex_unlock(&b->mu);
      return M0__ENOMEM;
    }
    for (size_t i = 0; i < b->n; i++) q[i] = b->q[(b->head + i) % b->cap];
    free(b->q);
    b->q = q;
    b->head = 0;
    b->cap *= 2;
  }
  b->q[(b->head + b->n++) % b->cap] = m;
  bool wake = b->n == 1;
  b->unwoken += wake;
  pthread_mutex_unlock(&b->mu);
  if (wake) {
    uint64_t one = 1;
    (void)!write(b->efd, &one, sizeof one);
  }
  return 0;
}

nng_msg *m0__inbox_take(m0__inbox *b) {
  nng_msg *m = NULL;
  pthread_mutex_lock(&b->mu);
  if (b->n) {
    m = b->q[b->head];
    b->head = (b->head + 1) % b->cap;
    b->n--;
  }
  uint64_t v;
  if (b->n == 0 && b->unwoken && read(b->efd, &v, sizeof v) == sizeof v) b->unwoken -= v;
  pthread_mutex_unlock(&b->mu);
  return m;
}
