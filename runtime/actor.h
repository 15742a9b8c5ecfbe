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
 */
#ifndef M0_RUNTIME_ACTOR_H
#define M0_RUNTIME_ACTOR_H

#include <nng/nng.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/envelope.h"
#include "runtime/inbox.h"
#include "runtime/kinds.h"
#include "runtime/seal.h"
#include "base/nng_compat.h"

typedef struct m0__tracer m0__tracer;

typedef struct m0__actor {
  uint32_t id;
  char url[M0__URL_MAX];
  nng_socket mailbox;
  bool open;
  uint64_t seq;
  m0__tracer *trace; /* NULL: tracing off, one branch per message */
  m0__inbox *inbox;  /* NULL: the mailbox only; set after m0__actor_open */
  int recv_fd;       /* the mailbox's, once asked for (-1 before) */
  /* Where an unsealed message from the mailbox came from (runtime/admit.h),
   * by how far its listeners reach: inproc this process, ipc this machine,
   * tcp the network. Known from the socket, never from the pipe (one that
   * has hung up by the time its message is read cannot be looked up). */
  int unsealed;
  /* The sealed stamps this mailbox took: a replay is refused (runtime/seal.h). */
  m0__fresh fresh;
} m0__actor;

typedef struct m0__peer {
  uint32_t id;
  char url[M0__URL_MAX];
  nng_socket sock;
  bool open;
  m0__inbox *direct; /* m0__peer_direct: sends go there; no socket */
  nng_pipe pipe;     /* m0__peer_pipe: one connection of a shared socket */
} m0__peer;

typedef struct m0__msg {
  m0__env env;
  int origin; /* enum m0__origin (runtime/admit.h): where it came from */
  const uint8_t *payload;
  size_t len;
  nng_msg *nmsg; /* owns payload */
} m0__msg;

/* Opens the actor's mailbox, listening at url. Returns 0 or M0__ETRANSPORT. */
int m0__actor_open(m0__actor *a, uint32_t id, const char *url, m0__tracer *trace);
/* Names socket s "<side>:<actor>" (NNG_OPT_SOCKNAME), so nng's statistics
 * in /metrics say whose socket they count (host/metrics.c): side "mailbox"
 * (actor id's own) or "peer" (a socket dialed to actor id). */
void m0__socket_name(nng_socket s, const char *side, uint32_t id);
/* The name given to nng's socket sock_id, into out; false if none. */
bool m0__socket_name_of(uint64_t sock_id, char *out, size_t outlen);
void m0__actor_close(m0__actor *a);
/* The mailbox of an application actor's instances (service/service.h): a
 * pair1 socket in polyamorous mode listening at url, so any number of
 * instances dial in and each is addressed by its pipe. 0 or M0__ETRANSPORT. */
/* on_pipe (with arg) hears every pipe's ADD_PRE, ADD_POST and REM_POST from
 * the first: it is set before the socket listens, so no pipe comes unheard. */
int m0__actor_open_poly(m0__actor *a, uint32_t id, const char *url, m0__tracer *trace, nng_pipe_cb on_pipe,
                        void *arg);
/* Listens at one more URL; its unsealed messages are then as far-reaching
 * as the farther of the two. */
int m0__actor_listen_also(m0__actor *a, const char *url);
/* The descriptor that is readable when the mailbox holds a message. */
int m0__actor_recv_fd(m0__actor *a, int *fd);

/* Dials a peer, whose mailbox should be open already (see actor.c: a
 * redial against an absent listener costs CPU). One that is not up yet is
 * dialed in the background and the first send waits for it (up to the send
 * timeout).
 * A send timeout of 0 makes sends queue (up to 1024 messages) or fail at
 * once: the bus never blocks its sender, and a refusal is counted. */
int m0__peer_open(m0__peer *p, uint32_t id, const char *url, int send_timeout_ms);
/* A peer that is an inbox in this process, with no socket: sends go there. */
void m0__peer_direct(m0__peer *p, uint32_t id, m0__inbox *to);
/* A peer that is one pipe of another actor's socket (an instance connected
 * to a poly mailbox): sends go to that pipe only. Nothing to close. */
void m0__peer_pipe(m0__peer *p, uint32_t id, nng_socket sock, nng_pipe pipe);
void m0__peer_close(m0__peer *p);

/* A message is built where it is sent: in an nng message whose body begins
 * with room for the envelope header (written by the send), the payload
 * appended after it. So a JOB, a RESULT or a FRAME is written once, never
 * copied into a message afterwards.
 * m0__msg_new: a message with an empty payload and room for `reserve` bytes
 * of it. 0, or M0__ENOMEM. */
int m0__msg_new(nng_msg **m, size_t reserve);
/* Appends to the payload, growing by doubling. 0, or M0__ENOMEM (nothing
 * appended). */
int m0__msg_append(nng_msg *m, const void *p, size_t n);
/* Lengthens the payload by n bytes and returns where they begin, for the
 * caller to write (one call for a whole record: each nng call costs more
 * than the memcpy of a field); NULL when out of memory (nothing added). The
 * pointer is good until the next extend or append. */
uint8_t *m0__msg_extend(nng_msg *m, size_t n);
/* The payload so far (after the header space) and its length. */
uint8_t *m0__msg_payload(nng_msg *m);
size_t m0__msg_payload_len(nng_msg *m);

/* Sends m from `self` to `to`, with nng_sendmsg's ownership: on 0 the
 * message is no longer the caller's (it is queued to the peer, or in the
 * receiver's inbox); on failure (a negative m0__err) it is still the
 * caller's, unchanged but for its header, to free or to send again. */
int m0__send_msg(m0__actor *self, m0__peer *to, int kind, uint64_t trace_hi, uint64_t trace_lo, nng_msg *m);
/* A small message from bytes (control messages, a hand-off's descriptor):
 * built and sent by m0__send_msg; nothing to free either way. */
int m0__send(m0__actor *self, m0__peer *to, int kind, uint64_t trace_hi, uint64_t trace_lo,
             const void *payload, size_t len);
/* A control message whose loss must not pass unseen (READY, FAILED, STOPPED,
 * DIED, LEAVING, GO, STOP): m0__send, and on failure one line on stderr
 * naming sender, receiver, kind and why. Returns m0__send's result. */
int m0__tell(m0__actor *self, m0__peer *to, int kind, const void *payload, size_t len);
/* How m0__recv takes a message: from the inbox first, then the mailbox. */
enum {
  M0__RECV_WAIT = 0,   /* waits for either (up to the mailbox's receive timeout) */
  M0__RECV_NOWAIT = 1, /* M0__ETIMEDOUT at once when both are empty */
  M0__RECV_INBOX = 2,  /* the inbox only, at once: a loop woken by its eventfd */
  M0__RECV_BLOCK = 3,  /* the mailbox only, blocking in nng until a message or its close */
};
/* Receives one message. One the mailbox does not admit (runtime/admit.h: not
 * an envelope, a kind or sender it never takes from where it came) is
 * counted, named on stderr at most once per peer per interval, dropped,
 * and reported as M0__EBADMSG. On 0 the caller owns out and frees it with
 * m0__msg_free; out->origin says where it came from. */
int m0__recv(m0__actor *self, m0__msg *out, int how);
/* The peer a received message came from, named for a line on stderr. */
void m0__msg_peer(const m0__msg *m, char *out, size_t n);
void m0__msg_free(m0__msg *m);

#endif
