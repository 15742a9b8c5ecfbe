/* m0_defer's handle (actors/deferred.h). m0_deferred_header and
 * m0_deferred_respond run on any thread: they only build the answer and put
 * it in the loop's inbox. */
#include "actors/deferred.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

#include "runtime/actor.h"
#include "service/wire.h"

#define DEFER_STORE 4096
#define DEFER_HEADERS 32

struct m0_deferred {
  m0__inbox *inbox;
  uint32_t loop_id;
  uint64_t id;
  int64_t until;          /* its bound (base/clock.h): past it, no answer is sent */
  _Atomic uint64_t *late; /* where an answer past it is counted (the page's) */
  m0__tracer *trace;
  m0__header_block hb;              /* over hdrs and store */
  m0_header hdrs[DEFER_HEADERS + 1]; /* and room for the content type */
  char store[DEFER_STORE];
};

m0_deferred *m0__deferred_new(m0__inbox *inbox, uint32_t loop_id, m0__tracer *trace) {
  m0_deferred *d = calloc(1, sizeof *d);
  if (!d) return NULL;
  d->hb = (m0__header_block){d->hdrs, 0, DEFER_HEADERS, d->store, 0, DEFER_STORE};
  d->inbox = inbox;
  d->loop_id = loop_id;
  d->trace = trace;
  return d;
}

void m0__deferred_for(m0_deferred *d, uint64_t id, unsigned timeout_ms, _Atomic uint64_t *late) {
  d->id = id;
  d->until = m0__now_ms() + timeout_ms;
  d->late = late;
}

int m0_deferred_header(m0_deferred *d, const char *name, const char *value) {
  if (!d || !name || !value) return -1;
  return m0__header_block_add(&d->hb, name, strlen(name), value, strlen(value)) ? -1 : 0;
}

int m0_deferred_respond(m0_deferred *d, int status, const char *content_type, const void *body, size_t len) {
  if (!d) return -1;
  if (m0__now_ms() >= d->until) { /* the host answers (answered) 504: this one is dropped, and the caller told */
    if (d->late) atomic_fetch_add(d->late, 1);
    free(d);
    errno = ETIMEDOUT;
    return -1;
  }
  int rv = -1;
  bool bad = status < 200 || status > 599 || (len && !body) ||
             (content_type && !m0__wire_header_ok("Content-Type", 12, content_type, strlen(content_type)));
  if (bad) { /* refused, and answered 500 so the request does not wait for its 504 */
    status = 500;
    content_type = NULL;
    body = NULL;
    len = 0;
    d->hb.n = 0;
  }
  if (content_type) d->hdrs[d->hb.n++] = (m0_header){{"Content-Type", 12}, {content_type, strlen(content_type)}};
  nng_msg *m;
  if (m0__wire_batch_new(&m, len + 256) == 0) {
    if (m0__wire_reply_add(m, d->id, status, d->hdrs, d->hb.n, body, len) == 0) {
      m0__actor self = {.id = M0__ACTOR_ID(M0__ROLE_EXTERNAL, 0), .trace = d->trace};
      m0__peer to;
      m0__peer_direct(&to, d->loop_id, d->inbox);
      rv = m0__send_msg(&self, &to, M0__K_ANSWER, 0, 0, m);
    }
    if (rv != 0) nng_msg_free(m);
  }
  free(d);
  return bad ? -1 : rv == 0 ? 0 : -1;
}
