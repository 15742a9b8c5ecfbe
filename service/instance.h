/* An application actor's instance: the application's kind (make, receive,
 * free) answering REQUEST batches with REPLY batches. The same core answers
 * a batch wherever the instance runs: on a thread of the host (the kind
 * here, m0__instance_kind), in a process the host spawned, or in any program
 * that calls m0_actor_run (service/remote.c).
 *
 * Design notes
 * - A thread instance is a handle (runtime/handle.h) like a pool thread: its
 *   make runs on its own thread and it says READY or FAILED to its
 *   coordinator; it takes REQUEST and STOP from its direct inbox (loops put
 *   them there) and puts each REPLY in the inbox of the loop that asked.
 * - One REPLY per REQUEST, even when receive answered none of the batch
 *   (count 0): the loop sends that instance its next batch only then.
 * - STOP comes from the coordinator once every loop has drained, so no
 *   request is with an instance when it leaves.
 * - A MESSAGE (a send or a call: service/post.h) is given to the kind's
 *   message function; a call's answer (or, when it gave none, a RETURN
 *   saying so) goes to the caller's inbox. A send is counted in flight at
 *   its slot until the instance has taken it: the actor's queue bounds it.
 * - m0_ask, m0_call and m0_send from receive take a caller of the post:
 *   the instance's own requests wait in its mailbox meanwhile.
 */
#ifndef M0_SERVICE_INSTANCE_H
#define M0_SERVICE_INSTANCE_H

#include <pthread.h>
#include <stdatomic.h>

#include "runtime/actor.h"
#include "runtime/handle.h"
#include "service/service.h"
#include "runtime/trace.h"
#include "m0/m0.h"

/* m0_actor_exit's reason, as kept: printable ASCII with '"' and '\\' as '_',
 * cut to fit (it goes into monitors' JSON notes and stderr lines as it is). */
#define M0__EXIT_WHY_MAX 160

typedef struct m0__instance {
  m0__handle h; /* first: driven through it */
  const m0_actor_kind *kind;
  m0__service *svc;
  struct m0__post *post; /* its host's (service/post.h): m0_call from its receive */
  int slot;
  m0_actor_ctx ctx;
  m0__tracer *trace;
  uint32_t coord_id;
  const char *coord_url;
  char url[M0__URL_MAX]; /* its mailbox (inproc): what an embedding program could reach */
  m0__actor self;
  m0__peer coord;
  m0__inbox inbox; /* REQUEST and STOP from the loops and the coordinator */
  void *state;
  /* Its restarts (host/children.c sets them before the thread starts):
   * once its serving ended, again (under gate, which the supervisor's stop
   * takes to set again NULL) says whether it is made again. why: what ended
   * it (m0_actor_exit's reason, its make refused at a restart), or NULL (a
   * STOP: taken says whether its supervisor sent it, taking it down with a
   * sibling, or the drain did). */
  bool gated;
  pthread_mutex_t gate;
  bool (*again)(void *arg, struct m0__instance *in, const char *why, bool taken);
  void *again_arg;
  atomic_bool taken_down; /* its supervisor's STOP is on its way */
  char why[M0__EXIT_WHY_MAX];
} m0__instance;

/* On an instance's thread (any placement): the reason m0_actor_exit gave
 * in the receive or message just run, or NULL; clear takes it back. */
const char *m0__instance_exiting(void);
void m0__instance_exit_clear(void);

extern const m0__actor_kind m0__instance_kind;

/* Answers one REQUEST payload into out (a batch begun by
 * m0__wire_batch_new): each record decoded, given to receive, its reply (if
 * any) appended. in_app (may be NULL) is set while inside receive. Returns
 * the records answered, or M0__EBADMSG when the batch does not decode (what
 * was answered before stays in out). While tracing (trace, with m the
 * REQUEST), a request whose id is not the envelope's gets its own record as
 * it is taken up and its id goes into others, for the REPLY
 * (runtime/trace.h); trace NULL: an instance outside the host, untraced. */
/* Answers one MESSAGE: the kind's message function (when it has one) is
 * given it; for a call, *ret is its RETURN (the answer, or M0__RETURN_NONE),
 * the caller's to send; for a send, NULL — or, with ack (an instance on a
 * connection: docs/wire.md), an empty RETURN of call 0 that frees the
 * host's window. 0, or M0__EBADMSG (it does not decode) or M0__ENOMEM. */
int m0__instance_message(const m0_actor_kind *kind, void *state, const m0__msg *m, atomic_bool *in_app, bool ack,
                         nng_msg **ret);

int m0__instance_answer(const m0_actor_kind *kind, void *state, const m0__msg *m, nng_msg *out, atomic_bool *in_app,
                        m0__tracer *trace, m0__trace_ids *others);
/* The same, where receive may answer in pieces (m0_reply_writer): sx is
 * the instance's streams (service/stream.h); NULL, m0_reply_writer gives NULL. */
struct m0__streams;
int m0__instance_answer_sx(const m0_actor_kind *kind, void *state, const m0__msg *m, nng_msg *out,
                           atomic_bool *in_app, m0__tracer *trace, m0__trace_ids *others, struct m0__streams *sx);

/* A REPLY batch made with the room its replies will take, judged from the
 * last batch's bytes of reply per byte of request (an instance's replies
 * are much alike): a batch that grows while receive writes it is copied
 * into a new block nng zeroes (~600 instructions a request for echo at 16
 * connections, bench/run_actors part 3). req_len: the REQUEST's payload.
 * 0, or M0__ENOMEM. */
typedef struct m0__reply_room {
  size_t req, rep; /* the last batch's payloads: its REQUEST's, its REPLY's */
  nng_msg *spare;  /* a REQUEST answered, its block kept for the next REPLY */
} m0__reply_room;
int m0__instance_reply_new(m0__reply_room *r, size_t req_len, nng_msg **out);
/* What the batch out, answering a REQUEST of req_len, took: the next one's room. */
void m0__instance_reply_took(m0__reply_room *r, size_t req_len, nng_msg *out);
/* The REQUEST *req, answered, kept as the next REPLY's block (*req set
 * NULL) when none is kept yet; fini frees the one kept. */
void m0__instance_reply_keep(m0__reply_room *r, nng_msg **req);
void m0__instance_reply_fini(m0__reply_room *r);

#endif
