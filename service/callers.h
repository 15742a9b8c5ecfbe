/* A host's callers (service/post.h): the slots a thread takes for one send
 * or call, each an id of role CALLER (caller.<n>) and an inbox its answer
 * comes to. Apart from the post so that a service, which routes answers to
 * them, needs no more of the post than this.
 *
 * Design notes
 * - A caller's inbox is made on its first use and kept until the host
 *   stops; an answer is put there only while the caller waits for a call
 *   (m0__callers_inbox), so an idle caller holds nothing nobody would take.
 * - What is left in a caller's inbox when it is given back (an answer that
 *   came after its call gave up) is dropped and counted.
 * - A caller taken by a thread instance acts as that instance: its sends
 *   are from the instance's id (the graph and the traces show relay.0 ->
 *   echo.0, not a caller), and an answer to that id comes to the caller
 *   while it waits (an instance has one call at a time: it waits in it).
 */
#ifndef M0_SERVICE_CALLERS_H
#define M0_SERVICE_CALLERS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "runtime/actor.h"
#include "runtime/inbox.h"

#define M0__CALLERS 64

typedef struct m0__caller {
  m0__actor self;  /* no mailbox: its id, sequence and tracer, and inbox */
  m0__inbox inbox; /* made on first use */
  bool made, busy; /* under the callers' mu */
  _Atomic uint64_t call; /* the call it waits for (0: none) */
  _Atomic uint32_t as;   /* the thread instance it acts for (its id), or 0 */
} m0__caller;

typedef struct m0__callers {
  pthread_mutex_t mu;
  m0__caller c[M0__CALLERS];
  _Atomic uint64_t dropped; /* answers for no call waiting */
} m0__callers;

void m0__callers_init(m0__callers *cs, m0__tracer *trace);
void m0__callers_fini(m0__callers *cs);
/* A free caller, or NULL (every one busy, or no memory for its inbox),
 * acting for thread instance `as` (its id; 0: for itself). */
m0__caller *m0__caller_take(m0__callers *cs, uint32_t as);
/* Given back, its inbox emptied (what it held counted as dropped). */
void m0__caller_give(m0__callers *cs, m0__caller *c);
/* The inbox of caller `id` (or of the caller acting for instance `id`)
 * while it waits for a call, else NULL. */
m0__inbox *m0__callers_inbox(m0__callers *cs, uint32_t id);

#endif
