/* The one list of message kinds actors exchange. The payload of each is
 * described beside it; ARCHITECTURE.md draws who sends which to whom. A
 * kind's number is its place in this list (READY = 1 … CREDIT = 22): the
 * numbers are on the wire (docs/wire.md), so a kind is only ever appended. */
#ifndef M0_RUNTIME_KINDS_H
#define M0_RUNTIME_KINDS_H

#define M0__KINDS(X)                                                               \
  X(READY, "ready")     /* loop -> coordinator: handler built. payload: none */    \
  X(FAILED, "failed")   /* loop -> coordinator: make refused. payload: message */  \
  X(GO, "go")           /* coordinator -> loop: barrier open, start accepting */   \
  X(STOP, "stop")       /* coordinator -> loop, producer: start the drain */       \
  X(STOPPED, "stopped") /* loop -> coordinator: drained. payload: m0__stats */     \
  X(DIED, "died")       /* any -> coordinator: an actor ended badly. payload: why */ \
  X(LEAVING, "leaving") /* loop -> coordinator: reached --max-requests, drain it */ \
  X(FRAME, "frame")     /* producer/publisher -> loop: a stream frame (bus) */     \
  X(HANDOFF, "handoff") /* loop -> loop: an accepted connection */                 \
  X(JOB, "job")         /* loop -> pool: a batch of requests */                    \
  X(RESULT, "result")   /* pool -> loop: a batch of responses */                  \
  X(REQUEST, "request") /* loop -> app actor instance: a batch (service/wire.h) */  \
  X(REPLY, "reply")     /* app actor instance -> loop: a batch (service/wire.h) */  \
  X(ANSWER, "answer")   /* any thread -> loop: a deferred view's answer */       \
  X(PUBLISH, "publish") /* app actor instance -> its actor: a frame for the bus */ \
  X(CHUNK, "chunk")     /* any thread -> loop: a piece of a writer's response (actors/writer.h) */ \
  X(TRACE, "trace")     /* m0trace (this machine) -> loop: switch this process's tracing. payload: JSON (runtime/trace.h) */ \
  X(HELLO, "hello")     /* app actor socket -> instance: a challenge (nonce, context); back: the proof (runtime/proof.h) */ \
  X(MESSAGE, "message") /* a caller or an instance -> app actor instance: a send or a call (service/wire.h) */ \
  X(RETURN, "return")   /* app actor instance -> its caller: a call's answer (service/wire.h) */ \
  X(STREAM, "stream")   /* app actor instance -> loop: a reply in pieces, OPEN/DATA/END/ABORT (service/wire.h) */ \
  X(CREDIT, "credit")   /* loop -> app actor instance: room for a stream's bytes (MORE), or the client left (GONE) */

enum m0__kind {
  M0__KIND_NONE_ = 0,
#define M0__KIND_ENUM(name, text) M0__K_##name,
  M0__KINDS(M0__KIND_ENUM)
#undef M0__KIND_ENUM
  M0__KIND_COUNT_
};

const char *m0__kind_name(int kind);

#endif
