/* Actors: an address (an nng URL), a mailbox listening there, and peers to
 * send to. Every actor message goes through m0__send and m0__recv, and the
 * trace hook lives in those two functions and nowhere else.
 *
 * Design notes
 * - A mailbox is a pull0 socket listening at the actor's URL; a peer is a
 *   push0 socket dialed to another actor's URL. push/pull never drops: a send
 *   that cannot be delivered within the send timeout fails, and the sender
 *   learns it. (pub/sub drops when a subscriber is slow, so it is not used.)
 * - A loop actor wakes on its mailbox through libuv (the receive descriptor
 *   under uv_poll) and drains it with non-blocking receives; a thread actor
 *   may block in m0__recv.
 * - Thread safety: an actor and its peers belong to one thread.
 * - A direct inbox (m0__inbox) carries messages between two actors of one
 *   process, both on inproc:// URLs, without nng's sockets: the same
 *   envelope in the same nng message, traced the same way, handed over under
 *   a mutex with one eventfd wake when the queue goes from empty to not
 *   empty. An nng inproc message passes through nng's task threads: on the
 *   pool lane that was ~8 context switches per JOB/RESULT round trip and
 *   half of its CPU (bench/run_pool); the inbox makes it two. The receiver
 *   reads its inbox and its mailbox alike, so anything else (an embedding
 *   program, m0pub, the coordinator) still reaches it through nng.
 */
#ifndef M0_ACTORS_ACTOR_H
#define M0_ACTORS_ACTOR_H

#include <nng/nng.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "actors/envelope.h"
#include "actors/kinds.h"
#include "base/nng_compat.h"

typedef struct m0__tracer m0__tracer;

typedef struct m0__inbox {
  pthread_mutex_t mu;
  nng_msg **q; /* a ring of cap, n from head */
  size_t head, n, cap;
  uint64_t unwoken; /* wakes written (or about to be) and not read back */
  int efd;          /* an eventfd, readable while the ring holds a message */
  bool ready;
} m0__inbox;

typedef struct m0__actor {
  uint32_t id;
  char url[M0__URL_MAX];
  nng_socket mailbox;
  bool open;
  uint64_t seq;
  m0__tracer *trace; /* NULL: tracing off, one branch per message */
  m0__inbox *inbox;  /* NULL: the mailbox only; set after m0__actor_open */
  int recv_fd;       /* the mailbox's, once asked for (-1 before) */
} m0__actor;

typedef struct m0__peer {
  uint32_t id;
  char url[M0__URL_MAX];
  nng_socket sock;
  bool open;
  m0__inbox *direct; /* m0__peer_direct: sends go there; no socket */
} m0__peer;

typedef struct m0__msg {
  m0__env env;
  const uint8_t *payload;
  size_t len;
  nng_msg *nmsg; /* owns payload */
} m0__msg;

/* Opens the actor's mailbox, listening at url. Returns 0 or M0__ETRANSPORT. */
int m0__actor_open(m0__actor *a, uint32_t id, const char *url, m0__tracer *trace);
void m0__actor_close(m0__actor *a);
/* Listens at one more URL (an inproc actor reachable from outside). */
int m0__actor_listen_also(m0__actor *a, const char *url);
/* The descriptor that is readable when the mailbox holds a message. */
int m0__actor_recv_fd(m0__actor *a, int *fd);

/* A direct inbox, made and freed by whoever outlives both ends (the
 * coordinator); fini frees the messages nobody received. */
int m0__inbox_init(m0__inbox *b);
void m0__inbox_fini(m0__inbox *b);

/* Dials a peer, whose mailbox should be open already (see actor.c: a
 * redial against an absent listener costs CPU). One that is not up yet is
 * dialed in the background and the first send waits for it (up to the send
 * timeout).
 * A send timeout of 0 makes sends queue (up to 1024 messages) or fail at
 * once: the bus never blocks its sender, and a refusal is counted. */
int m0__peer_open(m0__peer *p, uint32_t id, const char *url, int send_timeout_ms);
/* A peer that is an inbox in this process, with no socket: sends go there. */
void m0__peer_direct(m0__peer *p, uint32_t id, m0__inbox *to);
void m0__peer_close(m0__peer *p);

/* Sends one message from `self` to `to`. Returns 0 (the message is queued to
 * the peer) or a negative m0__err; on failure nothing was sent. */
int m0__send(m0__actor *self, m0__peer *to, int kind, uint64_t trace_hi, uint64_t trace_lo,
             const void *payload, size_t len);
/* How m0__recv takes a message: from the inbox first, then the mailbox. */
enum {
  M0__RECV_WAIT = 0,   /* waits for either (up to the mailbox's receive timeout) */
  M0__RECV_NOWAIT = 1, /* M0__ETIMEDOUT at once when both are empty */
  M0__RECV_INBOX = 2,  /* the inbox only, at once: a loop woken by its eventfd */
};
/* Receives one message. A malformed envelope is dropped and reported as
 * M0__EBADMSG. On 0 the caller owns out and frees it with m0__msg_free. */
int m0__recv(m0__actor *self, m0__msg *out, int how);
void m0__msg_free(m0__msg *m);

#endif
