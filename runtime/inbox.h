/* The direct inbox: a mailbox without a socket, for two actors of one
 * process (a loop and its pool threads).
 *
 * Design notes
 * - A direct inbox carries messages between two actors of one
 *   process, both on inproc:// URLs, without nng's sockets: the same
 *   envelope in the same nng message, traced the same way, handed over under
 *   a mutex with one eventfd wake when the queue goes from empty to not
 *   empty. An nng inproc message passes through nng's task threads: on the
 *   pool lane that was ~8 context switches per JOB/RESULT round trip and
 *   half of its CPU (bench/run_pool); the inbox makes it two. The receiver
 *   reads its inbox and its mailbox alike, so anything else (an embedding
 *   program, m0pub, the coordinator) still reaches it through nng.
 * - A mutex-guarded ring of nng messages plus an eventfd that is readable
 *   exactly while the ring is not empty (the wake rule is in inbox.c).
 */
#ifndef M0_RUNTIME_INBOX_H
#define M0_RUNTIME_INBOX_H

#include <nng/nng.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct m0__inbox {
  pthread_mutex_t mu;
  nng_msg **q; /* a ring of cap, n from head */
  size_t head, n, cap;
  uint64_t unwoken; /* wakes written (or about to be) and not read back */
  int efd;          /* an eventfd, readable while the ring holds a message */
  bool ready;
} m0__inbox;

/* Made and freed by whoever outlives both ends (the process that runs
 * them); fini frees the messages nobody received. */
int m0__inbox_init(m0__inbox *b);
void m0__inbox_fini(m0__inbox *b);

/* Hands m over: on 0 it is the inbox's (the receiver's), on M0__ENOMEM
 * still the caller's. Thread safety: any thread. */
int m0__inbox_put(m0__inbox *b, nng_msg *m);
/* The oldest message, or NULL when the ring is empty. */
nng_msg *m0__inbox_take(m0__inbox *b);

#endif
