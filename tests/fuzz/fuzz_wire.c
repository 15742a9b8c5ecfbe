/* libFuzzer: the wire of application actors (service/wire.c) and the envelope
 * (runtime/envelope.c), which read what any program on the other end of an
 * actor's socket sends. The input is read as a whole message (m0__env_read),
 * then as a REQUEST batch and as a REPLY batch; when it is a message, its
 * payload is read as both batches too. Every record read must lie inside the
 * input and within the limits, and a reply must be one the host may write.
 * Then the round trip: the records read are written again
 * (m0__wire_request_add, m0__wire_reply_add) into a new batch, which must
 * hold the same bytes as the input's records and read back to the same
 * fields. A message is also put to every mailbox's accept list from every
 * origin (runtime/admit.h) and its payload read as a frame. Any crash, leak,
 * undefined behaviour or abort is a finding. */
#include <nng/nng.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/actor.h"
#include "runtime/admit.h"
#include "bus/publisher.h"
#include "http/response.h"
#include "runtime/envelope.h"
#include "service/wire.h"
#include "base/errors.h"

static const uint8_t *lo, *hi; /* the bytes being read */

static void inside(m0_str s) {
  if (s.n && ((const uint8_t *)s.p < lo || (const uint8_t *)s.p > hi || s.n > (size_t)(hi - (const uint8_t *)s.p)))
    abort();
}

static bool same(m0_str a, m0_str b) { return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0); }

static bool same_request(const m0__wire_request *a, const m0__wire_request *b) {
  const m0_request *x = &a->req, *y = &b->req;
  if (a->id != b->id || x->trace_hi != y->trace_hi || x->trace_lo != y->trace_lo ||
      x->version_minor != y->version_minor || x->nheaders != y->nheaders || x->nparams != y->nparams ||
      !same(x->method, y->method) || !same(x->target, y->target) || !same(x->path, y->path) ||
      !same(x->query, y->query) || !same(x->body, y->body))
    return false;
  for (size_t i = 0; i < x->nheaders; i++)
    if (!same(x->headers[i].name, y->headers[i].name) || !same(x->headers[i].value, y->headers[i].value))
      return false;
  for (size_t i = 0; i < x->nparams; i++)
    if (!same(x->params[i], y->params[i])) return false;
  return true;
}

static bool same_reply(const m0__wire_reply *a, const m0__wire_reply *b) {
  if (a->id != b->id || a->status != b->status || a->nhdrs != b->nhdrs || !same(a->body, b->body)) return false;
  for (size_t i = 0; i < a->nhdrs; i++)
    if (!same(a->hdrs[i].name, b->hdrs[i].name) || !same(a->hdrs[i].value, b->hdrs[i].value)) return false;
  return true;
}

static void check_request(const m0__wire_request *w) {
  const m0_request *q = &w->req;
  if (q->nheaders > M0__WIRE_MAX_HEADERS || q->nparams > M0__WIRE_MAX_PARAMS || q->version_minor > 1) abort();
  inside(q->method);
  inside(q->target);
  inside(q->body);
  /* the path is the target's first bytes; the query is after it and its '?' */
  if (q->path.n > q->target.n || (q->path.n && q->path.p != q->target.p)) abort();
  inside(q->query);
  if (q->query.n && (q->query.p != q->target.p + q->path.n + 1 || q->target.p[q->path.n] != '?' ||
                     q->path.n + 1 + q->query.n != q->target.n))
    abort();
  for (size_t i = 0; i < q->nheaders; i++) {
    inside(q->headers[i].name);
    inside(q->headers[i].value);
  }
  for (size_t i = 0; i < q->nparams; i++) inside(q->params[i]);
}

static void check_reply(const m0__wire_reply *y) {
  if (y->status < 200 || y->status > 599 || y->nhdrs > M0__WIRE_MAX_HEADERS) abort();
  inside(y->body);
  for (size_t i = 0; i < y->nhdrs; i++) {
    inside(y->hdrs[i].name);
    inside(y->hdrs[i].value);
    if (!m0__wire_header_ok(y->hdrs[i].name.p, y->hdrs[i].name.n, y->hdrs[i].value.p, y->hdrs[i].value.n)) abort();
  }
}

/* The re-encoded batch holds exactly the bytes the input's records took. */
static void same_bytes(nng_msg *m, const uint8_t *records, const uint8_t *end, uint32_t count) {
  size_t n = (size_t)(end - records);
  if (m0__wire_batch_count(m) != count || m0__msg_payload_len(m) != M0__WIRE_BATCH_HEAD + n ||
      (n && memcmp(m0__msg_payload(m) + M0__WIRE_BATCH_HEAD, records, n) != 0))
    abort();
}

/* The records read, in a ring: the next one is read into the slot after the
 * last, so the RING - 1 before it are compared when it is refused. */
#define RING 64
static m0__wire_request reqs[RING], back_req;
static m0__wire_reply reps[RING], back_rep;

static void requests(const uint8_t *p, size_t n) {
  m0__wire_rd r;
  if (m0__wire_open(&r, p, n) != 0) return;
  nng_msg *m;
  if (m0__wire_batch_new(&m, n) != 0) abort();
  const uint8_t *records = r.p;
  uint32_t count = 0;
  int rv;
  m0__wire_request *w = &reqs[0];
  while ((rv = m0__wire_next_request(&r, w)) == 1) {
    check_request(w);
    if (m0__wire_request_add(m, w->id, &w->req) != 0) abort();
    count++;
    w = &reqs[count % RING];
  }
  if (rv != 0 && rv != M0__EBADMSG) abort();
  if (rv == 0) same_bytes(m, records, r.p, count);
  /* read back: the same records, field by field (the last RING - 1) */
  lo = m0__msg_payload(m);
  hi = lo + m0__msg_payload_len(m);
  m0__wire_rd b;
  if (m0__wire_open(&b, lo, (size_t)(hi - lo)) != 0 || b.left != count) abort();
  for (uint32_t i = 0; i < count; i++) {
    if (m0__wire_next_request(&b, &back_req) != 1) abort();
    check_request(&back_req);
    if (count - i < RING && !same_request(&back_req, &reqs[i % RING])) abort();
  }
  if (m0__wire_next_request(&b, &back_req) != 0) abort();
  nng_msg_free(m);
}

static void replies(const uint8_t *p, size_t n) {
  m0__wire_rd r;
  if (m0__wire_open(&r, p, n) != 0) return;
  nng_msg *m;
  if (m0__wire_batch_new(&m, n) != 0) abort();
  const uint8_t *records = r.p;
  uint32_t count = 0;
  int rv;
  m0__wire_reply *y = &reps[0];
  const uint8_t *start = r.p;
  while ((rv = m0__wire_next_reply(&r, y)) == 1) {
    if (!y->id_read) abort();
    check_reply(y);
    if (m0__wire_reply_add(m, y->id, y->status, y->hdrs, y->nhdrs, y->body.p, y->body.n) != 0) abort();
    count++;
    y = &reps[count % RING];
    start = r.p;
  }
  if (rv != 0 && rv != M0__EBADMSG) abort();
  if (rv == 0) {
    if (y->id_read) abort(); /* the end of a batch names no record */
    same_bytes(m, records, r.p, count);
  }
  /* a refused record's id, when said read, is its first 8 bytes */
  if (rv != 0 && y->id_read && ((size_t)(hi - start) < 8 || y->id != m0__le_get64(start))) abort();
  lo = m0__msg_payload(m);
  hi = lo + m0__msg_payload_len(m);
  m0__wire_rd b;
  if (m0__wire_open(&b, lo, (size_t)(hi - lo)) != 0 || b.left != count) abort();
  for (uint32_t i = 0; i < count; i++) {
    if (m0__wire_next_reply(&b, &back_rep) != 1) abort();
    check_reply(&back_rep);
    if (count - i < RING && !same_reply(&back_rep, &reps[i % RING])) abort();
  }
  if (m0__wire_next_reply(&b, &back_rep) != 0) abort();
  nng_msg_free(m);
}

/* The payload as a MESSAGE and as a RETURN (unbatched): what decodes lies
 * inside the payload, and built again from its fields it is the same bytes. */
static void messages(const uint8_t *p, size_t n) {
  m0__wire_message w;
  nng_msg *m;
  if (m0__wire_message_read(p, n, &w) == 0) {
    inside(w.name);
    inside(w.data);
    if (w.name.n > M0__WIRE_NAME_MAX || w.name.n + w.data.n + M0__WIRE_MESSAGE_FIXED != n) abort();
    char name[M0__WIRE_NAME_MAX + 1];
    memcpy(name, w.name.p, w.name.n);
    name[w.name.n] = 0;
    if (!memchr(name, 0, w.name.n) && m0__wire_message_new(&m, w.call, w.type, name, w.data.p, w.data.n) == 0) {
      if (m0__msg_payload_len(m) != n || memcmp(m0__msg_payload(m), p, n) != 0) abort();
      nng_msg_free(m);
    }
  }
  if (m0__wire_return_read(p, n, &w) == 0) {
    inside(w.data);
    if (w.code > M0__RETURN_REFUSED || w.data.n + M0__WIRE_RETURN_FIXED != n) abort();
    if (m0__wire_return_new(&m, w.call, w.type, w.code, w.data.p, w.data.n) == 0) {
      if (m0__msg_payload_len(m) != n || memcmp(m0__msg_payload(m), p, n) != 0) abort();
      nng_msg_free(m);
    }
  }
}

static void batches(const uint8_t *p, size_t n) {
  lo = p;
  hi = p + n;
  requests(p, n);
  lo = p;
  hi = p + n;
  replies(p, n);
  lo = p;
  hi = p + n;
  messages(p, n);
}

/* Every mailbox's accept list, for every origin: an answer, and a refusal
 * is one of the list's reasons; nothing from outside may ever be taken
 * that carries a descriptor, a pointer or a stop. Then the payload as a
 * frame, as a loop and an actor's socket read it. */
static void admission(const m0__env *e, const uint8_t *payload, size_t len) {
  for (int role = 0; role <= M0__ROLE_LAST_ + 1; role++)
    for (int origin = M0__ORIGIN_SELF; origin <= M0__ORIGIN_OUTSIDE; origin++) {
      int r = m0__admit(M0__ACTOR_ID(role, 0), e, origin);
      if (r < 0 || r >= M0__REFUSE_COUNT_) abort();
      int k = e->kind;
      if (r == 0 && origin >= M0__ORIGIN_LOCAL && role != M0__ROLE_APP &&
          (k == M0__K_HANDOFF || k == M0__K_JOB || k == M0__K_RESULT || k == M0__K_ANSWER || k == M0__K_STOP ||
           k == M0__K_GO))
        abort();
      if (r == 0 && origin == M0__ORIGIN_OUTSIDE && k == M0__K_FRAME) abort(); /* the network names no id */
    }
  uint64_t id;
  const char *channel;
  size_t chlen, flen;
  const uint8_t *frame;
  if (m0__frame_decode(payload, len, &id, &channel, &chlen, &frame, &flen) == 0) {
    lo = payload;
    hi = payload + len;
    inside((m0_str){channel, chlen});
    inside((m0_str){(const char *)frame, flen});
    if ((const uint8_t *)channel + chlen != frame || frame + flen != payload + len) abort();
    (void)m0__channel_ok_n(channel, chlen);
    (void)m0__frame_ok(frame, flen);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!m0__family_known() && m0__family_make() != 0) abort();
  m0__env e;
  const uint8_t *payload;
  size_t len;
  if (m0__env_read(data, size, &e, &payload, &len) == 0) {
    size_t seal = (e.flags & M0__ENV_SEALED) ? M0__SEAL_LEN : 0;
    if (payload != data + M0__ENV_HEADER || len + seal != size - M0__ENV_HEADER || len > M0__ENV_MAX_PAYLOAD) abort();
    if (e.kind == 0 || e.kind >= M0__KIND_COUNT_ || (e.flags & ~M0__ENV_SEALED)) abort();
    /* a seal made up by the input is never the family's (this process has
     * a cookie the input cannot know) */
    if (seal && m0__family_check(data, M0__ENV_HEADER + len, payload + len) >= 0) abort();
    admission(&e, payload, len);
    /* the header written again is the input's */
    uint8_t hdr[M0__ENV_HEADER];
    m0__env_write(hdr, &e, (uint32_t)len); /* flags included */
    if (memcmp(hdr, data, M0__ENV_HEADER) != 0) abort();
    batches(payload, len);
  }
  batches(data, size);
  return 0;
}
