#include "service/wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "runtime/actor.h"
#include "base/errors.h"
#include "base/num.h"
#include "http/fields.h"

#define REQ_FIXED 48 /* id, trace, four lengths, nheaders, nparams, version_minor */
#define REPLY_FIXED 16

static int batch_head(nng_msg *m) {
  uint8_t *at = m0__msg_extend(m, M0__WIRE_BATCH_HEAD);
  if (!at) return M0__ENOMEM;
  m0__le_put16(at, M0__WIRE_VERSION);
  m0__le_put16(at + 2, 0);
  m0__le_put32(at + 4, 0);
  return 0;
}

int m0__wire_batch_new(nng_msg **m, size_t reserve) {
  if (m0__msg_new(m, reserve + M0__WIRE_BATCH_HEAD) != 0) return M0__ENOMEM;
  if (batch_head(*m) != 0) {
    nng_msg_free(*m);
    *m = NULL;
    return M0__ENOMEM;
  }
  return 0;
}

int m0__wire_batch_reuse(nng_msg *m, size_t reserve) {
  if (reserve > M0__ENV_MAX_PAYLOAD) reserve = M0__ENV_MAX_PAYLOAD;
  size_t want = M0__ENV_HEADER + M0__WIRE_BATCH_HEAD + reserve + M0__SEAL_LEN;
  nng_msg_header_clear(m);
  nng_msg_clear(m);
  nng_msg_set_pipe(m, (nng_pipe)NNG_PIPE_INITIALIZER); /* a received one's: a send names its own */
  if ((nng_msg_capacity(m) < want && nng_msg_reserve(m, want) != 0) || nng_msg_realloc(m, M0__ENV_HEADER) != 0)
    return M0__ENOMEM;
  return batch_head(m);
}

uint32_t m0__wire_batch_count(nng_msg *m) { return m0__le_get32(m0__msg_payload(m) + 4); }

static bool count_one_more(nng_msg *m) {
  uint32_t n = m0__wire_batch_count(m);
  if (n >= M0__WIRE_MAX_COUNT) return false;
  m0__le_put32(m0__msg_payload(m) + 4, n + 1);
  return true;
}

static uint8_t *put_str(uint8_t *at, const void *p, size_t n) {
  if (n) memcpy(at, p, n);
  return at + n;
}

static uint8_t *put_header(uint8_t *at, const m0_header *h) {
  m0__le_put32(at, (uint32_t)h->name.n);
  m0__le_put32(at + 4, (uint32_t)h->value.n);
  at = put_str(at + 8, h->name.p, h->name.n);
  return put_str(at, h->value.p, h->value.n);
}

int m0__wire_request_add(nng_msg *m, uint64_t id, const m0_request *req) {
  if (req->nheaders > M0__WIRE_MAX_HEADERS || req->nparams > M0__WIRE_MAX_PARAMS ||
      m0__wire_batch_count(m) >= M0__WIRE_MAX_COUNT)
    return M0__ETOOBIG;
  /* Measured first, so the message grows once per request. */
  size_t n = REQ_FIXED + req->method.n + req->target.n + req->body.n;
  for (size_t i = 0; i < req->nheaders; i++) n += 8 + req->headers[i].name.n + req->headers[i].value.n;
  for (size_t i = 0; i < req->nparams; i++) n += 4 + req->params[i].n;
  if (m0__msg_payload_len(m) + n > M0__ENV_MAX_PAYLOAD) return M0__ETOOBIG;
  uint8_t *at = m0__msg_extend(m, n);
  if (!at) return M0__ENOMEM;
  m0__le_put64(at, id);
  m0__le_put64(at + 8, req->trace_hi);
  m0__le_put64(at + 16, req->trace_lo);
  m0__le_put32(at + 24, (uint32_t)req->method.n);
  m0__le_put32(at + 28, (uint32_t)req->target.n);
  m0__le_put32(at + 32, (uint32_t)req->path.n);
  m0__le_put32(at + 36, (uint32_t)req->body.n);
  m0__le_put16(at + 40, (uint16_t)req->nheaders);
  at[42] = (uint8_t)req->nparams;
  at[43] = (uint8_t)req->version_minor;
  m0__le_put32(at + 44, 0); /* reserved: keeps the strings 8-aligned after the fixed part */
  at = put_str(at + REQ_FIXED, req->method.p, req->method.n);
  at = put_str(at, req->target.p, req->target.n);
  for (size_t i = 0; i < req->nheaders; i++) at = put_header(at, &req->headers[i]);
  for (size_t i = 0; i < req->nparams; i++) {
    m0__le_put32(at, (uint32_t)req->params[i].n);
    at = put_str(at + 4, req->params[i].p, req->params[i].n);
  }
  put_str(at, req->body.p, req->body.n);
  count_one_more(m);
  return 0;
}

int m0__wire_reply_add(nng_msg *m, uint64_t id, int status, const m0_header *hdrs, size_t nhdrs, const void *body,
                       size_t blen) {
  if (nhdrs > M0__WIRE_MAX_HEADERS || status < 0 || status > 0xffff || m0__wire_batch_count(m) >= M0__WIRE_MAX_COUNT)
    return M0__ETOOBIG;
  size_t n = REPLY_FIXED + blen;
  for (size_t i = 0; i < nhdrs; i++) n += 8 + hdrs[i].name.n + hdrs[i].value.n;
  if (m0__msg_payload_len(m) + n > M0__ENV_MAX_PAYLOAD) return M0__ETOOBIG;
  uint8_t *at = m0__msg_extend(m, n);
  if (!at) return M0__ENOMEM;
  m0__le_put64(at, id);
  m0__le_put16(at + 8, (uint16_t)status);
  m0__le_put16(at + 10, (uint16_t)nhdrs);
  m0__le_put32(at + 12, (uint32_t)blen);
  at += REPLY_FIXED;
  for (size_t i = 0; i < nhdrs; i++) at = put_header(at, &hdrs[i]);
  put_str(at, body, blen);
  count_one_more(m);
  return 0;
}

/* ---- reading ---------------------------------------------------------- */

int m0__wire_open(m0__wire_rd *r, const uint8_t *payload, size_t len) {
  if (len < M0__WIRE_BATCH_HEAD || m0__le_get16(payload) != M0__WIRE_VERSION || m0__le_get16(payload + 2) != 0)
    return M0__EBADMSG;
  uint32_t count = m0__le_get32(payload + 4);
  if (count > M0__WIRE_MAX_COUNT) return M0__EBADMSG;
  r->p = payload + M0__WIRE_BATCH_HEAD;
  r->end = payload + len;
  r->left = count;
  return 0;
}

/* n bytes, or NULL (and nothing consumed) when fewer are left. */
static const uint8_t *take(m0__wire_rd *r, size_t n) {
  if ((size_t)(r->end - r->p) < n) return NULL;
  const uint8_t *at = r->p;
  r->p += n;
  return at;
}

static bool take_str(m0__wire_rd *r, uint32_t n, m0_str *out) {
  const uint8_t *at = take(r, n);
  if (!at) return false;
  *out = (m0_str){(const char *)at, n};
  return true;
}

static bool take_header(m0__wire_rd *r, m0_header *h) {
  const uint8_t *nv = take(r, 8);
  return nv && take_str(r, m0__le_get32(nv), &h->name) && take_str(r, m0__le_get32(nv + 4), &h->value);
}

/* A batch is over when its count is read; bytes after the last record are
 * a malformed batch, not padding. */
static int batch_end(m0__wire_rd *r) { return r->p == r->end ? 0 : M0__EBADMSG; }

int m0__wire_next_request(m0__wire_rd *r, m0__wire_request *out) {
  if (r->left == 0) return batch_end(r);
  r->left--;
  const uint8_t *f = take(r, REQ_FIXED);
  if (!f) return M0__EBADMSG;
  memset(&out->req, 0, sizeof out->req);
  out->id = m0__le_get64(f);
  m0_request *q = &out->req;
  q->trace_hi = m0__le_get64(f + 8);
  q->trace_lo = m0__le_get64(f + 16);
  uint32_t path = m0__le_get32(f + 32);
  q->nheaders = m0__le_get16(f + 40);
  q->nparams = f[42];
  q->version_minor = f[43];
  if (q->nheaders > M0__WIRE_MAX_HEADERS || q->nparams > M0__WIRE_MAX_PARAMS || q->version_minor > 1 ||
      m0__le_get32(f + 44) != 0)
    return M0__EBADMSG;
  if (!take_str(r, m0__le_get32(f + 24), &q->method) || !take_str(r, m0__le_get32(f + 28), &q->target) ||
      path > q->target.n)
    return M0__EBADMSG;
  for (size_t i = 0; i < q->nheaders; i++)
    if (!take_header(r, &out->hdrs[i])) return M0__EBADMSG;
  for (size_t i = 0; i < q->nparams; i++) {
    const uint8_t *l = take(r, 4);
    if (!l || !take_str(r, m0__le_get32(l), &out->params[i])) return M0__EBADMSG;
  }
  if (!take_str(r, m0__le_get32(f + 36), &q->body)) return M0__EBADMSG;
  q->path = (m0_str){q->target.p, path};
  q->query = path < q->target.n && q->target.p[path] == '?'
                 ? (m0_str){q->target.p + path + 1, q->target.n - path - 1}
                 : (m0_str){q->target.p + path, 0};
  q->headers = out->hdrs;
  q->peer = q->client = ""; /* the wire does not carry them (docs/wire.md) */
  q->peer_port = 0;
  q->params = out->params;
  return 1;
}

/* The host's one list of field rules (http/fields.h); Content-Type travels
 * as a header here and is taken out by the loop. */
bool m0__wire_header_ok(const char *name, size_t nlen, const char *value, size_t vlen) {
  return m0__field_check(name, nlen, value, vlen) == M0__FIELD_OK;
}

int m0__header_block_add(m0__header_block *b, const char *name, size_t nl, const char *value, size_t vl) {
  if (!m0__wire_header_ok(name, nl, value, vl)) return M0__EINVALID;
  if (b->n >= b->max || b->used + nl + vl > b->cap) return M0__ETOOBIG;
  char *at = b->store + b->used;
  memcpy(at, name, nl);
  memcpy(at + nl, value, vl);
  b->hdrs[b->n++] = (m0_header){{at, nl}, {at + nl, vl}};
  b->used += nl + vl;
  return 0;
}

int m0__wire_next_reply(m0__wire_rd *r, m0__wire_reply *out) {
  out->id_read = false;
  if (r->left == 0) return batch_end(r);
  r->left--;
  const uint8_t *f = take(r, REPLY_FIXED);
  if (!f) {
    if ((size_t)(r->end - r->p) >= 8) {
      out->id = m0__le_get64(r->p);
      out->id_read = true;
    }
    return M0__EBADMSG;
  }
  out->id = m0__le_get64(f);
  out->id_read = true;
  out->status = m0__le_get16(f + 8);
  out->nhdrs = m0__le_get16(f + 10);
  out->hdrs = out->hdr_store;
  if (out->nhdrs > M0__WIRE_MAX_HEADERS || out->status < 200 || out->status > 599) return M0__EBADMSG;
  for (size_t i = 0; i < out->nhdrs; i++) {
    m0_header *h = &out->hdr_store[i];
    if (!take_header(r, h) || !m0__wire_header_ok(h->name.p, h->name.n, h->value.p, h->value.n)) return M0__EBADMSG;
  }
  if (!take_str(r, m0__le_get32(f + 12), &out->body)) return M0__EBADMSG;
  return 1;
}

/* ---- messages and returns (unbatched) ---- */

static int wire_fixed_new(nng_msg **m, const uint8_t *head, size_t hn, const void *name, size_t nn, const void *data,
                          size_t len) {
  if (hn + nn + len > M0__ENV_MAX_PAYLOAD) return M0__ETOOBIG;
  if (m0__msg_new(m, hn + nn + len) != 0) return M0__ENOMEM;
  uint8_t *at = m0__msg_extend(*m, hn + nn + len);
  if (!at) {
    nng_msg_free(*m);
    *m = NULL;
    return M0__ENOMEM;
  }
  at = put_str(at, head, hn);
  put_str(put_str(at, name, nn), data, len);
  return 0;
}

int m0__wire_message_new(nng_msg **m, uint64_t call, uint32_t type, const char *name, const void *data, size_t len) {
  size_t nn = name ? strlen(name) : 0;
  if (nn > M0__WIRE_NAME_MAX) return M0__ETOOBIG;
  uint8_t head[M0__WIRE_MESSAGE_FIXED];
  m0__le_put64(head, call);
  m0__le_put32(head + 8, type);
  m0__le_put16(head + 12, (uint16_t)nn);
  return wire_fixed_new(m, head, sizeof head, name, nn, data, len);
}

int m0__wire_return_new(nng_msg **m, uint64_t call, uint32_t type, uint32_t code, const void *data, size_t len) {
  uint8_t head[M0__WIRE_RETURN_FIXED];
  m0__le_put64(head, call);
  m0__le_put32(head + 8, type);
  m0__le_put32(head + 12, code);
  return wire_fixed_new(m, head, sizeof head, NULL, 0, data, len);
}

int m0__wire_message_read(const uint8_t *payload, size_t len, m0__wire_message *out) {
  if (len < M0__WIRE_MESSAGE_FIXED) return M0__EBADMSG;
  size_t nn = m0__le_get16(payload + 12);
  if (nn > M0__WIRE_NAME_MAX || len - M0__WIRE_MESSAGE_FIXED < nn) return M0__EBADMSG;
  const uint8_t *at = payload + M0__WIRE_MESSAGE_FIXED;
  *out = (m0__wire_message){.call = m0__le_get64(payload), .type = m0__le_get32(payload + 8),
                            .name = {(const char *)at, nn},
                            .data = {(const char *)at + nn, len - M0__WIRE_MESSAGE_FIXED - nn}};
  return 0;
}

int m0__wire_return_read(const uint8_t *payload, size_t len, m0__wire_message *out) {
  if (len < M0__WIRE_RETURN_FIXED) return M0__EBADMSG;
  uint32_t code = m0__le_get32(payload + 12);
  if (code > M0__RETURN_REFUSED) return M0__EBADMSG;
  *out = (m0__wire_message){.call = m0__le_get64(payload), .type = m0__le_get32(payload + 8), .code = code,
                            .data = {(const char *)payload + M0__WIRE_RETURN_FIXED, len - M0__WIRE_RETURN_FIXED}};
  return 0;
}

int m0__wire_reply_copy(const m0__wire_reply *r, m0_answer *out) {
  size_t bytes = r->nhdrs * sizeof(m0_header) + r->body.n;
  for (size_t i = 0; i < r->nhdrs; i++) bytes += r->hdrs[i].name.n + r->hdrs[i].value.n;
  char *mem = malloc(bytes ? bytes : 1);
  if (!mem) return ENOMEM;
  m0_header *h = (m0_header *)mem;
  char *at = mem + r->nhdrs * sizeof(m0_header);
  for (size_t i = 0; i < r->nhdrs; i++) {
    memcpy(at, r->hdrs[i].name.p, r->hdrs[i].name.n);
    h[i].name = (m0_str){at, r->hdrs[i].name.n};
    at += r->hdrs[i].name.n;
    memcpy(at, r->hdrs[i].value.p, r->hdrs[i].value.n);
    h[i].value = (m0_str){at, r->hdrs[i].value.n};
    at += r->hdrs[i].value.n;
  }
  if (r->body.n) memcpy(at, r->body.p, r->body.n);
  *out = (m0_answer){r->status, h, r->nhdrs, {at, r->body.n}, mem};
  return 0;
}

/* ---- a reply in pieces (STREAM) and its room (CREDIT) ---- */

int m0__wire_stream_new(nng_msg **m, uint32_t op, uint64_t id, int status, const m0_header *hdrs, size_t nhdrs,
                        const void *p, size_t n) {
  if (op == M0__STREAM_OPEN) { /* a reply record after the op: a batch of one, its head the op's room */
    int rv = m0__wire_batch_new(m, 64 + n);
    if (rv == 0) rv = m0__wire_reply_add(*m, id, status, hdrs, nhdrs, p, n);
    if (rv != 0 && *m) nng_msg_free(*m);
    if (rv != 0) return rv;
    uint8_t *pl = m0__msg_payload(*m);
    memmove(pl + 4, pl + M0__WIRE_BATCH_HEAD, m0__msg_payload_len(*m) - M0__WIRE_BATCH_HEAD);
    m0__le_put32(pl, op);
    nng_msg_chop(*m, M0__WIRE_BATCH_HEAD - 4);
    return 0;
  }
  if (n > M0__ENV_MAX_PAYLOAD - 12) return M0__ETOOBIG;
  if (m0__msg_new(m, 12 + n) != 0) return M0__ENOMEM;
  uint8_t *at = m0__msg_extend(*m, 12 + n);
  if (!at) {
    nng_msg_free(*m);
    return M0__ENOMEM;
  }
  m0__le_put32(at, op);
  m0__le_put64(at + 4, id);
  if (n) memcpy(at + 12, p, n);
  return 0;
}

int m0__wire_stream_read(const uint8_t *payload, size_t len, m0__wire_stream *out) {
  out->open.id_read = false;
  if (len < 12) return M0__EBADMSG;
  out->op = m0__le_get32(payload);
  out->id = m0__le_get64(payload + 4);
  out->data = (m0_str){(const char *)payload + 12, len - 12};
  if (out->op == M0__STREAM_OPEN) {
    m0__wire_rd r = {payload + 4, payload + len, 1};
    int rv = m0__wire_next_reply(&r, &out->open);
    out->open.id_read = true;
    return rv == 1 && r.p == r.end ? 0 : M0__EBADMSG;
  }
  if (out->op == M0__STREAM_DATA) return len > 12 ? 0 : M0__EBADMSG;
  return (out->op == M0__STREAM_END || out->op == M0__STREAM_ABORT) && len == 12 ? 0 : M0__EBADMSG;
}

void m0__wire_credit_put(uint8_t *out, uint32_t op, uint64_t id, uint32_t bytes) {
  m0__le_put32(out, op);
  m0__le_put64(out + 4, id);
  m0__le_put32(out + 12, bytes);
}

int m0__wire_credit_read(const uint8_t *payload, size_t len, uint32_t *op, uint64_t *id, uint32_t *bytes) {
  if (len != M0__WIRE_CREDIT_LEN) return M0__EBADMSG;
  *op = m0__le_get32(payload);
  *id = m0__le_get64(payload + 4);
  *bytes = m0__le_get32(payload + 12);
  return *op == M0__CREDIT_MORE || (*op == M0__CREDIT_GONE && *bytes == 0) ? 0 : M0__EBADMSG;
}
