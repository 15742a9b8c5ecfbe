#include "actors/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "base/errors.h"
#include "http/accesslog.h"
#include "http/proxies.h"
#include "http/response.h"

/* Job record: u64 conn, i32 route, u8 head, u8 close, u8 version_minor, u8 pad,
 * u64 trace_hi, u64 trace_lo, u32 method, u32 target, u32 path_len, u32 body,
 * u16 nheaders, u16 nparams, u32 extra, u16 peer_port, u8 peer, u8 client,
 * then bytes: method, target, each header (u32 name, u32 value, name,
 * value), each param (u32 off into target, u32 len), body, the response
 * header lines before_request added on the loop (extra bytes, "Name:
 * value\r\n" each), the peer's address and the client's (as text, without
 * a NUL). A batch is u32 count and the records. */

typedef struct job_head {
  uint64_t conn;
  int32_t route;
  uint8_t head, close, version_minor, pad;
  uint64_t trace_hi, trace_lo;
  uint32_t method, target, path_len, body;
  uint16_t nheaders, nparams;
  uint32_t extra;
  uint16_t peer_port;
  uint8_t peer, client;
} job_head;

/* The batch is the JOB message itself: each request's record is measured,
 * the message lengthened once, and the fields written into it. */
static uint8_t *put(uint8_t *at, const void *p, size_t n) {
  if (n) memcpy(at, p, n);
  return at + n;
}

int m0__batch_add(m0__batch *b, void *conn, const m0_request *req, int route, const m0_response *res) {
  if (!b->msg) {
    uint32_t zero = 0;
    if (m0__msg_new(&b->msg, 4096) != 0) return M0__ENOMEM;
    if (m0__msg_append(b->msg, &zero, 4) != 0) return M0__ENOMEM;
  }
  size_t pn = req->peer ? strnlen(req->peer, M0__ADDR_TEXT - 1) : 0;
  size_t cn = req->client ? strnlen(req->client, M0__ADDR_TEXT - 1) : 0;
  size_t n = sizeof(job_head) + req->method.n + req->target.n + 8 * req->nparams + req->body.n + res->extra_len + pn + cn;
  for (size_t i = 0; i < req->nheaders; i++) n += 8 + req->headers[i].name.n + req->headers[i].value.n;
  uint8_t *at = m0__msg_extend(b->msg, n);
  if (!at) return M0__ENOMEM;
  job_head h = {(uint64_t)(uintptr_t)conn, route, res->head, res->close, (uint8_t)req->version_minor, 0,
                req->trace_hi, req->trace_lo, (uint32_t)req->method.n, (uint32_t)req->target.n,
                (uint32_t)req->path.n, (uint32_t)req->body.n, (uint16_t)req->nheaders, (uint16_t)req->nparams,
                (uint32_t)res->extra_len, (uint16_t)req->peer_port, (uint8_t)pn, (uint8_t)cn};
  at = put(at, &h, sizeof h);
  at = put(at, req->method.p, req->method.n);
  at = put(at, req->target.p, req->target.n);
  for (size_t i = 0; i < req->nheaders; i++) {
    uint32_t nv[2] = {(uint32_t)req->headers[i].name.n, (uint32_t)req->headers[i].value.n};
    at = put(at, nv, sizeof nv);
    at = put(at, req->headers[i].name.p, nv[0]);
    at = put(at, req->headers[i].value.p, nv[1]);
  }
  for (size_t i = 0; i < req->nparams; i++) {
    uint32_t ol[2] = {(uint32_t)(req->params[i].p - req->target.p), (uint32_t)req->params[i].n};
    at = put(at, ol, sizeof ol);
  }
  at = put(at, req->body.p, req->body.n);
  at = put(at, res->extra, res->extra_len);
  at = put(at, req->peer, pn);
  put(at, req->client, cn);
  b->count++;
  memcpy(m0__msg_payload(b->msg), &b->count, 4);
  if (!b->trace_hi && !b->trace_lo) {
    b->trace_hi = req->trace_hi;
    b->trace_lo = req->trace_lo;
  }
  if (atomic_load_explicit(&m0__trace_live, memory_order_relaxed)) /* not kept when out of memory: a record less */
    (void)m0__trace_ids_add(&b->others, b->trace_hi, b->trace_lo, req->trace_hi, req->trace_lo);
  return 0;
}

void m0__batch_fini(m0__batch *b) {
  if (b->msg) nng_msg_free(b->msg);
  b->msg = NULL;
  m0__trace_ids_free(&b->others);
}

/* A reader over a payload that refuses to run past its end. */
typedef struct rd {
  const uint8_t *p, *end;
  bool bad;
} rd;

static const uint8_t *rd_take(rd *r, size_t n) {
  if (r->bad || (size_t)(r->end - r->p) < n) {
    r->bad = true;
    return NULL;
  }
  const uint8_t *at = r->p;
  r->p += n;
  return at;
}

/* Result record: u64 conn, u32 len, i32 fd (-1: none), u64 off, u64 flen,
 * u64 trace_hi, u64 trace_lo (its request's), then len bytes. A RESULT is u32 count (bit 31: more of this batch's
 * answers follow in another RESULT) and the records; a message holds at
 * most 16 MiB, so a batch whose answers pass half of that goes back in
 * parts, and one answer too large for any is answered 500. */
#define RESULT_HEAD 48
#define RESULT_MORE 0x80000000u
#define RESULT_SPLIT (M0__ENV_MAX_PAYLOAD / 2)
#define RESULT_ANSWER_MAX (M0__ENV_MAX_PAYLOAD - 4096)

int m0__result_each(const uint8_t *p, size_t n, void (*fn)(void *arg, const m0__result *r), void *arg) {
  rd r = {p, p + n, false};
  const uint8_t *c = rd_take(&r, 4);
  if (!c) return M0__EBADMSG;
  uint32_t count;
  memcpy(&count, c, 4);
  count &= ~RESULT_MORE;
  for (uint32_t i = 0; i < count; i++) {
    const uint8_t *h = rd_take(&r, RESULT_HEAD);
    if (!h) return M0__EBADMSG;
    uint64_t conn;
    uint32_t len;
    int32_t fd;
    m0__result a;
    memcpy(&conn, h, 8);
    memcpy(&len, h + 8, 4);
    memcpy(&fd, h + 12, 4);
    memcpy(&a.off, h + 16, 8);
    memcpy(&a.flen, h + 24, 8);
    memcpy(&a.trace_hi, h + 32, 8);
    memcpy(&a.trace_lo, h + 40, 8);
    const uint8_t *resp = rd_take(&r, len);
    if (!resp) return M0__EBADMSG;
    a.conn = (void *)(uintptr_t)conn;
    a.resp = resp;
    a.len = len;
    a.fd = fd;
    fn(arg, &a);
  }
  return (int)count;
}

/* ---- the pool thread ---- */

#define POOL_MAX_HEADERS 100
#define POOL_MAX_PARAMS 8

/* One request of a JOB, decoded: its spans point into the message. */
typedef struct pool_req {
  job_head h;
  m0_request req;
  m0_header hdrs[POOL_MAX_HEADERS];
  m0_str params[POOL_MAX_PARAMS];
  const uint8_t *extra; /* h.extra bytes of headers before_request added, or NULL */
  char peer[M0__ADDR_TEXT], client[M0__ADDR_TEXT];
} pool_req;

/* The request's headers and its route's parameters. 0 or M0__EBADMSG. */
static int pool_decode_lists(rd *r, pool_req *q) {
  for (int i = 0; i < q->h.nheaders; i++) {
    const uint8_t *nv = rd_take(r, 8);
    if (!nv) return M0__EBADMSG;
    uint32_t l[2];
    memcpy(l, nv, 8);
    q->hdrs[i].name = (m0_str){(const char *)rd_take(r, l[0]), l[0]};
    q->hdrs[i].value = (m0_str){(const char *)rd_take(r, l[1]), l[1]};
  }
  for (int i = 0; i < q->h.nparams; i++) {
    const uint8_t *ol = rd_take(r, 8);
    if (!ol) return M0__EBADMSG;
    uint32_t v[2];
    memcpy(v, ol, 8);
    if ((uint64_t)v[0] + v[1] > q->h.target) return M0__EBADMSG;
    q->params[i] = (m0_str){q->req.target.p + v[0], v[1]};
  }
  return 0;
}

/* The next request record of a JOB. 0 or M0__EBADMSG. */
static int pool_decode(rd *r, pool_req *q) {
  const uint8_t *hp = rd_take(r, sizeof(job_head));
  if (!hp) return M0__EBADMSG;
  job_head *h = &q->h;
  memcpy(h, hp, sizeof *h);
  m0_request *req = &q->req;
  memset(req, 0, sizeof *req);
  if (h->nheaders > POOL_MAX_HEADERS || h->nparams > POOL_MAX_PARAMS || h->path_len > h->target) return M0__EBADMSG;
  req->method = (m0_str){(const char *)rd_take(r, h->method), h->method};
  req->target = (m0_str){(const char *)rd_take(r, h->target), h->target};
  if (pool_decode_lists(r, q) != 0) return M0__EBADMSG;
  req->body = (m0_str){(const char *)rd_take(r, h->body), h->body};
  q->extra = h->extra <= M0__EXTRA_HEADERS ? rd_take(r, h->extra) : NULL;
  const uint8_t *pa = rd_take(r, h->peer), *ca = rd_take(r, h->client);
  if (r->bad || (h->extra && !q->extra) || h->peer >= M0__ADDR_TEXT || h->client >= M0__ADDR_TEXT) return M0__EBADMSG;
  if (h->peer) memcpy(q->peer, pa, h->peer);
  q->peer[h->peer] = 0;
  if (h->client) memcpy(q->client, ca, h->client);
  q->client[h->client] = 0;
  req->path = (m0_str){req->target.p, h->path_len};
  req->query = h->path_len < h->target ? (m0_str){req->target.p + h->path_len + 1, h->target - h->path_len - 1}
                                       : (m0_str){NULL, 0};
  req->version_minor = h->version_minor;
  req->headers = q->hdrs;
  req->nheaders = h->nheaders;
  req->params = q->params;
  req->nparams = h->nparams;
  req->trace_hi = h->trace_hi;
  req->trace_lo = h->trace_lo;
  req->peer = q->peer;
  req->peer_port = h->peer_port;
  req->client = q->client;
  return 0;
}

/* Runs the request's view (or the application's handler) into res. */
static void pool_view(m0__pool_thread *t, void *state, const pool_req *q, m0_response *res) {
  const m0_app *app = t->app;
  const job_head *h = &q->h;
  atomic_store(&t->h.in_app, true);
  m0__current_trace = (m0__trace_id){h->trace_hi, h->trace_lo};
  if (h->route >= 0 && (size_t)h->route < app->nroutes) app->routes[h->route].view(state, &q->req, res);
  else if (h->route < 0 && app->handle) app->handle(state, &q->req, res);
  m0__current_trace = (m0__trace_id){0, 0};
  atomic_store(&t->h.in_app, false);
  if (!res->done) {
    fprintf(stderr, "m0: pool.%d.%d: the view for %.*s %.*s returned without answering; sent 500\n", t->loop,
            t->index, (int)q->req.method.n, q->req.method.p, (int)q->req.path.n, q->req.path.p);
    m0__respond_status(res, 500, NULL);
  }
}

/* The bytes in resp up to a file piece: iov[*k], their length returned. */
static size_t pool_iov(m0__outq *resp, uv_buf_t *iov, int *k) {
  *k = m0__outq_iov(resp, 0, iov);
  size_t len = 0;
  for (int i = 0; i < *k; i++) len += iov[i].len;
  return len;
}

/* The answer in resp as one piece of out: references (static and owned
 * bodies) are copied here; a file piece (always the end of its response)
 * travels as its descriptor, which the loop then owns. 0 or M0__ENOMEM. */
static int pool_append(m0__pool_thread *t, const pool_req *q, m0__outq *resp, m0__date *date, nng_msg *out) {
  const job_head *h = &q->h;
  uv_buf_t iov[2 * M0__OUT_REFS + 1];
  int k;
  size_t len = pool_iov(resp, iov, &k);
  if (len > RESULT_ANSWER_MAX) { /* no message could carry it back */
    fprintf(stderr, "m0: pool.%d.%d: the answer to %.*s %.*s is %zu bytes, more than a pool thread hands back "
                    "(16 MiB); answered 500 (answer it from the loop, or as a file: m0_respond_file)\n",
            t->loop, t->index, (int)q->req.method.n, q->req.method.p, (int)q->req.path.n, q->req.path.p, len);
    m0__outq_clear(resp);
    m0_response res;
    m0__response_init(&res, resp, date, h->version_minor, h->head, h->close);
    m0__respond_status(&res, 500, NULL);
    len = pool_iov(resp, iov, &k);
  }
  int fd = -1;
  uint64_t off = 0;
  size_t flen = 0;
  if (m0__outq_file_at(resp, len, &fd, &off, &flen)) {
    for (int j = 0; j < resp->nrefs; j++)
      if (resp->refs[j].fd == fd) resp->refs[j].fd = -1; /* handed on: not closed by the clear */
  }
  uint8_t *at = m0__msg_extend(out, RESULT_HEAD + (size_t)len);
  if (!at) {
    if (fd >= 0) close(fd);
    return M0__ENOMEM;
  }
  int32_t fd32 = fd;
  uint64_t flen64 = flen;
  uint32_t len32 = (uint32_t)len;
  at = put(at, &h->conn, 8);
  at = put(at, &len32, 4);
  at = put(at, &fd32, 4);
  at = put(at, &off, 8);
  at = put(at, &flen64, 8);
  at = put(at, &h->trace_hi, 8);
  at = put(at, &h->trace_lo, 8);
  for (int i = 0; i < k; i++) at = put(at, iov[i].base, iov[i].len);
  m0__outq_clear(resp); /* an owned body is freed now, not at the next job */
  return 0;
}

/* One request of the JOB m: decoded, its view run, its answer appended to
 * out. While tracing, a request whose id is not the JOB's gets its own
 * record as it is taken up, and its id goes into part (the RESULT's). */
static int pool_run_one(m0__pool_thread *t, void *state, const m0__msg *m, rd *r, nng_msg *out, m0__outq *resp,
                        m0__date *date, m0__trace_ids *part) {
  pool_req q;
  if (pool_decode(r, &q) != 0) return M0__EBADMSG;
  const job_head h = q.h;
  if (atomic_load_explicit(&m0__trace_live, memory_order_relaxed) && (h.trace_hi || h.trace_lo) &&
      (h.trace_hi != m->env.trace_hi || h.trace_lo != m->env.trace_lo)) {
    m0__trace_request(t->trace, true, &m->env, m->len, h.trace_hi, h.trace_lo);
    (void)m0__trace_ids_add(part, m->env.trace_hi, m->env.trace_lo, h.trace_hi, h.trace_lo);
  }
  m0__outq_clear(resp);
  m0_response res;
  m0__response_init(&res, resp, date, h.version_minor, h.head, h.close);
  res.req = &q.req; /* m0_respond_file reads its conditions */
  if (h.extra) memcpy(res.extra, q.extra, h.extra); /* before_request's, checked when added */
  res.extra_len = h.extra;
  pool_view(t, state, &q, &res);
  /* Logged here, where the request still is: the loop gets bytes only. */
  if (t->access_log)
    m0__access_log_line(t->loop, q.req.method, q.req.path, res.status, res.head ? 0 : res.body_len, h.trace_hi,
                        h.trace_lo, NULL);
  return pool_append(t, &q, resp, date, out);
}

/* A RESULT (a part of one) for the JOB m: the envelope carries the JOB's
 * trace id, and each other request's id gets its own record (part). */
static int pool_send_result(m0__pool_thread *t, m0__actor *self, m0__peer *loop, const m0__msg *m, nng_msg *out,
                            m0__trace_ids *part) {
  if (part->n) m0__trace_batch((const uint64_t(*)[2])part->ids, part->n);
  int rv = m0__send_msg(self, loop, M0__K_RESULT, m->env.trace_hi, m->env.trace_lo, out);
  m0__trace_batch(NULL, 0);
  part->n = 0;
  return rv;
}

#define POOL_SLOW_VIEW_NS 1000000 /* CPU per view that counts as slow */
#define POOL_SLOW_DEBT_NS 4000000 /* CPU beyond that which makes a thread yield: one tick at HZ=250 */

static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* After each batch until the thread yields: one clock read, which is also
 * the next batch's start (the wait between batches costs microseconds of
 * CPU, against a threshold of a millisecond). Returns that reading.
 * A batch's CPU beyond 1 ms per view adds to the thread's debt and a faster
 * batch pays it back; the thread yields when the debt reaches a scheduler
 * tick, the wait it would otherwise impose on its loop. So one view that
 * spins 4 ms or more moves it at once, while a trivial view's one-off spike
 * (a page fault storm, lazy binding, TSan's shadow memory: 1.2 ms seen) is
 * paid back by the views after it and moves nothing. The first batch is not
 * judged (since_ns 0): it pays the cold start. Design notes in pool.h. */
static uint64_t pool_maybe_yield(m0__pool_thread *t, uint64_t since_ns, uint32_t done) {
  uint64_t now = thread_cpu_ns(), used = now - since_ns, allowed = (uint64_t)done * POOL_SLOW_VIEW_NS;
  if (since_ns == 0 || done == 0) return now;
  if (used < allowed) {
    t->slow_debt_ns = allowed - used >= t->slow_debt_ns ? 0 : t->slow_debt_ns - (allowed - used);
    return now;
  }
  t->slow_debt_ns += used - allowed;
  if (t->slow_debt_ns < POOL_SLOW_DEBT_NS) return now;
  t->yields = true;
  if (setpriority(PRIO_PROCESS, (id_t)gettid(), 19) != 0)
    fprintf(stderr, "m0: pool.%d.%d: cannot lower its priority (%m); its loop may wait for it\n", t->loop, t->index);
  else
    fprintf(stderr, "m0: pool.%d.%d: its views took %.1f ms of CPU each; it now runs at nice 19 and gives way to loop %d\n",
            t->loop, t->index, (double)used / done / 1e6, t->loop);
  return now;
}

/* What a pool thread keeps from one JOB to the next. */
typedef struct pool_work {
  void *state;          /* its application's (make) */
  m0__outq resp;        /* an answer being built */
  m0__trace_ids others; /* while tracing: the ids of the RESULT's other requests */
  m0__date date;
  uint64_t cpu_mark;    /* this thread's CPU when its last batch ended; 0 before the first */
} pool_work;

/* A RESULT being built: its count first, filled in when it goes. 0, or
 * M0__ENOMEM said. */
static int pool_result_new(m0__pool_thread *t, nng_msg **out) {
  uint32_t zero = 0;
  if (m0__msg_new(out, 4096) == 0 && m0__msg_append(*out, &zero, 4) == 0) return 0;
  fprintf(stderr, "m0: pool.%d.%d: out of memory for a result\n", t->loop, t->index);
  if (*out) nng_msg_free(*out);
  return M0__ENOMEM;
}

static void pool_result_send(m0__pool_thread *t, const m0__msg *m, nng_msg *out, m0__trace_ids *part) {
  if (pool_send_result(t, &t->self, &t->loopp, m, out, part) != 0) {
    fprintf(stderr, "m0: pool.%d.%d: cannot return a result to loop %d\n", t->loop, t->index, t->loop);
    nng_msg_free(out);
  }
}

/* A JOB: each request answered into the RESULT that carries them back, in
 * parts when it grows past RESULT_SPLIT. */
static void pool_job(m0__pool_thread *t, pool_work *w, const m0__msg *m) {
  rd r = {m->payload, m->payload + m->len, false};
  const uint8_t *c = rd_take(&r, 4);
  uint32_t count = 0;
  if (c) memcpy(&count, c, 4);
  /* The RESULT is built in the message that carries it back. */
  nng_msg *out;
  uint32_t done = 0, sent = 0; /* answers in this RESULT, and in the parts sent before it */
  if (pool_result_new(t, &out) != 0) return;
  for (uint32_t i = 0; i < count; i++) {
    if (done && m0__msg_payload_len(out) > RESULT_SPLIT) { /* these go back now; the rest follow */
      uint32_t part = done | RESULT_MORE;
      memcpy(m0__msg_payload(out), &part, 4);
      nng_msg *next;
      if (pool_result_new(t, &next) != 0) break;
      pool_result_send(t, m, out, &w->others);
      out = next;
      sent += done;
      done = 0;
    }
    if (pool_run_one(t, w->state, m, &r, out, &w->resp, &w->date, &w->others) != 0) {
      fprintf(stderr, "m0: pool.%d.%d: a malformed job; %u of %u answered\n", t->loop, t->index, sent + done, count);
      break;
    }
    done++;
  }
  memcpy(m0__msg_payload(out), &done, 4);
  if (!t->yields) w->cpu_mark = pool_maybe_yield(t, w->cpu_mark, sent + done);
  pool_result_send(t, m, out, &w->others);
}

/* JOBs until STOP (or the inbox ends). */
static void pool_serve(m0__pool_thread *t, pool_work *w) {
  for (;;) {
    m0__msg m;
    int rv = m0__recv(&t->self, &m, M0__RECV_WAIT);
    if (rv == M0__EBADMSG || rv == M0__ETIMEDOUT) continue;
    if (rv != 0) break;
    bool stop = m.env.kind == M0__K_STOP;
    if (m.env.kind == M0__K_JOB) pool_job(t, w, &m);
    m0__msg_free(&m);
    if (stop) break;
  }
}

static void pool_run(m0__handle *h) {
  m0__pool_thread *t = (m0__pool_thread *)h;
  const m0__actor_desc *lo = m0__topology_find(t->topo, M0__ACTOR_ID(M0__ROLE_LOOP, t->loop));
  m0__actor *self = &t->self;
  m0__peer *coord = &t->coord, *loop = &t->loopp;
  char err[512] = "";
  pool_work w = {0};
  bool made = false;
  if (m0__peer_open(coord, t->coord_id, t->coord_url, 1000) != 0) {
    fprintf(stderr, "m0: pool.%d.%d cannot reach its coordinator at %s\n", t->loop, t->index, t->coord_url);
    goto out;
  }
  self->inbox = &t->inbox; /* the loop's JOB and STOP */
  m0__peer_direct(loop, lo->id, t->loop_inbox);
  if (t->app->make) {
    w.state = t->app->make(&t->ctx, err, sizeof err);
    if (!w.state) {
      if (!err[0]) snprintf(err, sizeof err, "%s: make failed on pool thread %d.%d", t->app->name, t->loop, t->index);
      atomic_store(&t->h.said_stopped, true);
      m0__tell(self, coord, M0__K_FAILED, err, strlen(err));
      goto out;
    }
  }
  made = true;
  long alog = 0;
  t->access_log = t->ctx.config && m0_config_get(t->ctx.config, "access-log", &alog) && alog;
  m0__tell(self, coord, M0__K_READY, NULL, 0);
  pool_serve(t, &w);
  atomic_store(&t->h.said_stopped, true);
out:
  if (made && t->app->free && w.state) t->app->free(w.state);
  m0__outq_free(&w.resp);
  m0__trace_ids_free(&w.others);
}

static void pool_hang_up(m0__handle *h) { /* after the join: runtime/handle.h */
  m0__pool_thread *t = (m0__pool_thread *)h;
  m0__peer_close(&t->loopp);
  m0__peer_close(&t->coord);
}

static void pool_release(m0__handle *h) { m0__actor_close(&((m0__pool_thread *)h)->self); }

/* The mailbox opens before the thread: one that cannot open (a tcp://
 * address another program holds) is the start's failure, named. Opened on
 * the thread, its failure ended the thread without a word, and the
 * coordinator waited at the barrier for its READY for ever. */
static int pool_open(m0__handle *h) {
  m0__pool_thread *t = (m0__pool_thread *)h;
  const m0__actor_desc *me = m0__topology_find(t->topo, M0__ACTOR_ID(M0__ROLE_POOL, M0__POOL_INDEX(t->loop, t->index)));
  if (!me || m0__actor_open(&t->self, me->id, me->url, t->trace) != 0) {
    fprintf(stderr, "m0: pool.%d.%d cannot open its mailbox at %s\n", t->loop, t->index, me ? me->url : "(no address)");
    return M0__ETRANSPORT;
  }
  return 0;
}

const m0__actor_kind m0__pool_kind = {"pool", pool_open, pool_run, pool_hang_up, pool_release};

int m0__pool_init(m0__pool_thread *t, const m0__pool_config *cfg, m0__exits *exits) {
  if (m0__inbox_init(&t->inbox) != 0) return M0__ENOMEM;
  m0__handle_init(&t->h, &m0__pool_kind, exits);
  t->loop = cfg->loop;
  t->index = cfg->index;
  t->topo = cfg->topo;
  t->app = cfg->app;
  t->trace = cfg->trace;
  t->coord_id = cfg->coord_id;
  t->coord_url = cfg->coord_url;
  t->ctx = cfg->ctx;
  t->ctx.worker = cfg->loop;
  t->ctx.thread = cfg->index;
  t->loop_inbox = cfg->loop_inbox;
  return 0;
}
