/* What each mailbox admits: the one list of which kinds an actor takes, from
 * which senders, by where the message came from. m0__recv asks it of every
 * message before anyone else sees the message; a refusal is counted (by
 * actor and reason, on the shared page, so /metrics of any process of the
 * host shows it) and logged at most once per actor and peer per interval. Nothing a
 * peer sends can stop an actor, hand it a descriptor or a pointer, or crash
 * it.
 *
 * Design notes
 * - Where a message came from is one of four origins. SELF: this process —
 *   a direct inbox, an inproc pipe (nng's inproc transport reaches no other
 *   process), or a message whose seal names this pid. FAMILY: another
 *   process of this host (the supervisor, a worker), proved by the seal
 *   (runtime/seal.h: a tag over the message with the host's key, fresh by
 *   its stamp) naming another pid. LOCAL: an unsealed message through an ipc pipe — a program
 *   on this machine that could open the 0700 run directory, so one of the
 *   host's user (m0pub). OUTSIDE: anything else, from the network (tcp,
 *   tls+tcp): an application actor's instance, or any program that reaches
 *   a tcp mailbox.
 * - The seal is written by m0__send_msg on every message a host actor sends
 *   through a socket to another host actor (never to an application actor's
 *   instance, which may be any program: the key is not shown to it), and
 *   checked (tag, then freshness) and stripped by m0__recv. An ipc mailbox
 *   is reachable only by its user (the 0700 run directory); a tls+tcp link
 *   is encrypted; over plain tcp a sealed message can be read, not forged
 *   or replayed.
 * - From LOCAL or OUTSIDE a mailbox takes only a REPLY, RETURN or PUBLISH
 *   at an application actor's socket (a reply only for a request in flight
 *   with the instance on that pipe: actors/asks.c; a return only for a
 *   caller waiting: service/post.h) and a REQUEST, MESSAGE or STOP at an
 *   instance from the host it dialed; and from LOCAL only, a FRAME at a loop
 *   (m0pub's), whose id must already be taken from the shared counter and
 *   not yet written by that loop (actors/loop.c), and a TRACE at a loop or
 *   the coordinator (m0trace's), whose control the tracer checks
 *   (runtime/trace.h). From FAMILY only, a READY at a worker's door for an
 *   application actor: the supervisor's relay introducing a leg. Over
 *   the network a frame never names its id: an instance PUBLISHes and the
 *   host numbers it. Never a descriptor number (HANDOFF), a pointer (JOB,
 *   RESULT, ANSWER), a STOP or GO to the host's own actors, or a barrier
 *   message (READY, FAILED, STOPPED, DIED, LEAVING).
 */
#ifndef M0_RUNTIME_ADMIT_H
#define M0_RUNTIME_ADMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/envelope.h"
#include "runtime/seal.h" /* and enum m0__origin */

/* The one list of reasons a message is refused (the `reason` label of
 * m0_refused_total). A reason's number is its place here. */
#define M0__REFUSALS(X)                                                                                      \
  X(MALFORMED, "malformed") /* not an envelope: short, bad magic, unknown kind, flags, wrong length */       \
  X(SEAL, "seal")           /* sealed, but not by this host's key, or not this message (runtime/seal.h) */   \
  X(REPLAY, "replay")       /* sealed by the family, but seen before or sealed before its mailbox opened */ \
  X(UNEXPECTED, "unexpected") /* a STOP, STOPPED or HANDOFF its actor was not waiting for, or a handed-over \
                               * descriptor that is not a connection like the listener's */                \
  X(KIND, "kind")           /* a kind this mailbox never takes from where it came */                         \
  X(ADDRESS, "address")     /* addressed to another actor, or from one that never sends that kind */         \
  X(FRAME, "frame")         /* a FRAME whose payload does not decode or that the bus would refuse */         \
  X(FRAME_ID, "frame_id")   /* a FRAME id not yet taken from the counter, or one its loop wrote already */    \
  X(REPLY, "reply")         /* a REPLY that is no answer to a request in flight with that instance */      \
  X(BATCH, "batch")         /* a REPLY batch that does not decode: its head, or a record (docs/wire.md) */ \
  X(STATUS, "status")       /* a reply status HTTP does not let the host pass (asks.c): answered 502 */    \
  X(STALE, "stale")         /* m0pub's FRAME numbered at or below the first id its loop serves */          \
  X(CONTROL, "control")     /* a TRACE whose control the tracer refused (runtime/trace.h) */                \
  X(PROOF, "proof")         /* an instance that did not prove itself: a wrong proof, none in time, or a     \
                             * message before it (runtime/proof.h) */                                       \
  X(INSTANCES, "instances") /* an instance past the actor's M0__SLOTS, or past its proofs in progress */  \
  X(PIPES, "pipes")         /* a pipe past a host mailbox's M0__MAILBOX_PIPES (runtime/bounds.h) */         \
  X(HANDSHAKE, "handshake") /* a tcp or tls+tcp connection not through its greeting in time (bounds.h) */ \
  X(MESSAGE, "message")     /* an instance's own MESSAGE that does not decode, or names no actor (service/post.h) */

enum m0__refusal {
#define M0__REFUSAL_ENUM(name, text) M0__REFUSE_##name,
  M0__REFUSALS(M0__REFUSAL_ENUM)
#undef M0__REFUSAL_ENUM
  M0__REFUSE_COUNT_
};

const char *m0__refusal_name(int reason);

/* Whether actor `self` takes message e from `origin`: 0, or the refusal. */
int m0__admit(uint32_t self, const m0__env *e, int origin);

/* Where refusals are counted: the shared page's table (transport/page.h),
 * set by a host before its actors start. Without one (a unit test, an
 * outside program) they are counted in this process only. The tables are
 * the process's (keyed by actor id): of two hosts in one process the first
 * one's page holds them; true when this attach was that first one. Each
 * attach is paired with a release, true when it was the last host: until
 * then the first host's page stays mapped (host/process.c). */
typedef struct m0__refusal_line m0__refusal_line;
bool m0__refusals_attach(m0__refusal_line *lines, int nlines);
bool m0__refusals_release(void);
/* Counts one refusal by actor `self` and, at most once per actor and peer
 * every M0__REFUSAL_LOG_MS, says so on stderr, naming the peer (a refused
 * dial, PROOF or INSTANCES: once per actor and reason, whatever the peer). */
#define M0__REFUSAL_LOG_MS 10000
void m0__refused(uint32_t self, int reason, int kind, const char *peer);
/* Walks the counts: cb(actor id, reason, count) for each that is not 0. */
void m0__refusals_each(void (*cb)(void *arg, uint32_t actor, int reason, uint64_t n), void *arg);

#endif
