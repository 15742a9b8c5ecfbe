#include "actors/streamed.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "actors/asks_state.h"
#include "actors/writer.h"
#include "base/errors.h"
#include "http/conn_state.h"
#include "http/response.h"
#include "runtime/admit.h"
#include "service/wire.h"

#define STREAMED_GONE_MS 10000 /* an instance told GONE that never ends: let go after this */
#define STREAMED_GRANT (32u << 10) /* room granted back in pieces of at least this */

struct m0__streamed {
  m0_writer *w;  /* NULL: its head could not be begun (a 500 written instead) */
  m0__conn *conn;
  m0__loop *l;
  int ask;       /* its entry */
  int si, k;
  uint32_t gen;  /* its instance's */
  uint64_t id;
  uint64_t taken, granted; /* bytes come in (the first bytes and DATA); bytes allowed (window + MOREs) */
  bool gone;
  int status; /* its head's */
  unsigned quiet; /* ticks since its last DATA */
};

/* A CREDIT to the stream's instance, if it is still the one. */
static int streamed_credit(m0__streamed *st, uint32_t op, uint32_t bytes) {
  m0__loop *l = st->l;
  m0__service *s = l->services[st->si];
  m0__slot *sl = &s->slots[st->k];
  if (atomic_load(&sl->gen) != st->gen || !atomic_load_explicit(&sl->live, memory_order_acquire)) return M0__ECLOSED;
  uint8_t p[M0__WIRE_CREDIT_LEN];
  m0__wire_credit_put(p, op, st->id, bytes);
  m0__peer to;
  if (s->connected) m0__peer_pipe(&to, m0__service_slot_id(s, st->k), s->self.mailbox, m0__slot_pipe(sl));
  else m0__peer_direct(&to, m0__service_slot_id(s, st->k), sl->inbox);
  return m0__send(&l->self, &to, M0__K_CREDIT, 0, 0, p, sizeof p);
}

/* The room taken is granted back once the connection has written all but
 * its low mark (the socket's progress calls this too). A MORE says the
 * room granted in all (mod 2^32), so one said again is no more room. */
static void streamed_grant(void *arg) {
  m0__streamed *st = arg;
  uint64_t owed = st->taken + M0__STREAM_WINDOW - st->granted;
  if (st->gone || !st->w || owed < STREAMED_GRANT || m0__writer_held(st->w) > M0__WRITER_LOW) return;
  if (streamed_credit(st, M0__CREDIT_MORE, (uint32_t)(st->granted + owed)) == 0) st->granted += owed;
}

/* A CREDIT into an actor's socket may be lost on the way (nng's pair1 to
 * one of its pipes drops what that pipe's queue cannot take), and an
 * instance that waits for it would send nothing more: a quiet stream is
 * told its room again at its 1st, 2nd, 4th and 8th quiet tick. */
void m0__streamed_tick(m0__streamed *st) {
  unsigned q = ++st->quiet;
  streamed_grant(st); /* one whose send failed */
  if (!st->gone && st->w && st->granted > M0__STREAM_WINDOW && q <= 8 && (q & (q - 1)) == 0)
    (void)streamed_credit(st, M0__CREDIT_MORE, (uint32_t)st->granted);
}

/* The client left (the writer's on_gone, on the loop): the instance is told. */
static void streamed_gone(void *arg) {
  m0__streamed *st = arg;
  st->gone = true;
  (void)streamed_credit(st, M0__CREDIT_GONE, 0);
  ask *e = &st->l->asks->tab[st->ask];
  e->deadline = uv_now(&st->l->uv) + STREAMED_GONE_MS;
}

/* A stream the host refuses or lets go while instance k of si may still
 * write it (a late OPEN, a DATA for an id it let go, an OPEN it answered
 * 502): its writer is told GONE, as when the client leaves. */
static void streamed_refuse(m0__loop *l, int si, int k, uint64_t id) {
  m0__service *s = l->services[si];
  m0__streamed no = {.l = l, .si = si, .k = k, .gen = atomic_load(&s->slots[k].gen), .id = id};
  (void)streamed_credit(&no, M0__CREDIT_GONE, 0);
}

/* OPEN: the head, as an answer's, begun as a writer's. */
static void streamed_begin(m0__loop *l, ask *e, int i, m0__streamed *st, const m0__wire_reply *r) {
  m0__conn *c = e->conn;
  m0_response res;
  m0__response_init(&res, m0__conn_target(c), &l->http.date, e->version_minor, e->head, e->close);
  if (e->extra_len && e->extra_len <= sizeof res.extra) {
    memcpy(res.extra, e->extra, e->extra_len);
    res.extra_len = e->extra_len;
  }
  char ctype[128] = "";
  bool ok = true;
  for (size_t h = 0; ok && h < r->nhdrs; h++) {
    const m0_header *x = &r->hdrs[h];
    if (x->name.n != 12 || strncasecmp(x->name.p, "content-type", 12) != 0)
      ok = m0__response_header_n(&res, x->name.p, x->name.n, x->value.p, x->value.n) == 0;
    else if (x->value.n < sizeof ctype)
      snprintf(ctype, sizeof ctype, "%.*s", (int)x->value.n, x->value.p);
    else
      ok = false;
  }
  m0_writer *w = ok ? m0__writer_begin(&l->http, c, &res, r->status, ctype[0] ? ctype : NULL, streamed_gone, st) : NULL;
  if (!w && !res.done) { /* headers it cannot write, or no memory: answered as a reply would be */
    free(st);
    m0__asks_finish(l, i, 502);
    return;
  }
  e->st = st;
  e->deadline = UINT64_MAX; /* the route's timeout was for the OPEN */
  st->w = w;
  st->status = w ? r->status : res.status;
  if (!w) { /* refused with a 500 by the begin: the connection goes on from it */
    m0__asks_finish(l, i, 1);
    return;
  }
  if (res.close) c->close_on_complete = true; /* HTTP/1.0: the end of the body is the close */
  m0__writer_on_room(w, streamed_grant);
  m0__conn_flush(c);
  st->taken = r->body.n;
  if (r->body.n) m0__writer_put(l, w, r->body.p, r->body.n);
  streamed_grant(st);
}

/* Where a STREAM came from: instance k of actor si, still the one its
 * request went to; the entry (looked up when `look`), or NULL (refused). */
static ask *streamed_entry(m0__loop *l, const m0__msg *m, const m0__wire_stream *ws, bool look, int *i,
                           m0__service **sp) {
  int idx = M0__ACTOR_INDEX(m->env.from), si = idx >> 12, k = idx & 0xfff;
  *sp = NULL;
  if (M0__ACTOR_ROLE(m->env.from) != M0__ROLE_APP || si >= l->nservices || k >= l->services[si]->nslots) {
    m0__asks_refused(NULL, l->self.id, M0__REFUSE_ADDRESS, m);
    return NULL;
  }
  m0__service *s = *sp = l->services[si];
  ask *e = look ? ask_find(l->asks, ws->id, i) : NULL;
  if (e && (e->svc != si || e->slot != k || e->slot_gen != atomic_load(&s->slots[k].gen))) e = NULL;
  return e;
}

static void streamed_data(m0__loop *l, ask *e, int i, m0__service *s, const m0_str *d) {
  m0__streamed *st = e->st;
  if (st->gone || !st->w) return; /* sent before it learnt the client left */
  st->taken += d->n;
  st->quiet = 0;
  if (st->taken > st->granted) { /* past its room: a stream the host cannot bound */
    atomic_fetch_add(&s->st->bad_reply, 1);
    m0__asks_finish(l, i, 502);
    return;
  }
  m0__writer_put(l, st->w, d->p, d->n);
  if (l->asks->tab[i].used && l->asks->tab[i].st == st) streamed_grant(st); /* a put may have closed it */
}

/* The checks a STREAM meets before it is taken: true when it was refused
 * (counted, and what it meant done: its request answered 502 or its stream
 * cut, its instance told GONE where its writer may be open). */
static bool streamed_refused(m0__loop *l, const m0__msg *m, m0__service *s, ask *e, int i,
                             const m0__wire_stream *ws, bool bad) {
  if (m->len < 12) { /* no op and id: counted as a reply record with no id is */
    atomic_fetch_add(&s->st->refused, 1);
    m0__asks_refused(s, l->self.id, M0__REFUSE_BATCH, m);
    return true;
  }
  bool opening = ws->op == M0__STREAM_OPEN;
  if (!e || (opening == (e->st != NULL))) { /* no such request; DATA or an end never OPENed; OPEN twice */
    atomic_fetch_add(&s->st->unknown, 1);
    m0__asks_refused(s, l->self.id, M0__REFUSE_REPLY, m);
    /* One let go (its route's 504, a cut) may still be written: the writer is told. */
    if (!e && (opening || ws->op == M0__STREAM_DATA))
      streamed_refuse(l, M0__ACTOR_INDEX(m->env.from) >> 12, M0__ACTOR_INDEX(m->env.from) & 0xfff, ws->id);
    return true;
  }
  /* An OPEN's first bytes count against the window as a DATA's do. */
  bool over = opening && !bad && ws->open.body.n > M0__STREAM_WINDOW;
  if (bad || over || (opening && !m0__asks_status_passes(ws->open.status))) {
    atomic_fetch_add(&s->st->bad_reply, 1);
    m0__asks_refused(s, l->self.id, bad || over ? M0__REFUSE_BATCH : M0__REFUSE_STATUS, m);
    if (opening) streamed_refuse(l, e->svc, e->slot, ws->id); /* its writer may be open */
    m0__asks_finish(l, i, 502); /* a stream cut (its instance told, at the close), or a request answered 502 */
    return true;
  }
  return false;
}

void m0__streamed_on(m0__loop *l, const m0__msg *m) {
  static _Thread_local m0__wire_stream ws;
  if (!l->asks) return;
  memset(&ws, 0, sizeof ws); /* a short one reads nothing: no id or op of the one before */
  bool bad = m0__wire_stream_read(m->payload, m->len, &ws) != 0;
  int i;
  m0__service *s;
  ask *e = streamed_entry(l, m, &ws, m->len >= 12, &i, &s); /* a short one has no entry to look up */
  if (!s || streamed_refused(l, m, s, e, i, &ws, bad)) return;
  bool opening = ws.op == M0__STREAM_OPEN;
  if (opening && (e->conn->zombie || e->conn->closing)) { /* the client left before the OPEN */
    streamed_refuse(l, e->svc, e->slot, ws.id);
    m0__asks_finish(l, i, 502); /* as any answer to a connection gone: its memory let go */
  } else if (opening) {
    m0__streamed *st = calloc(1, sizeof *st);
    if (!st) {
      m0__asks_finish(l, i, 502);
      return;
    }
    *st = (m0__streamed){NULL, e->conn, l, i, e->svc, e->slot, e->slot_gen, ws.id, 0, M0__STREAM_WINDOW, false};
    streamed_begin(l, e, i, st, &ws.open);
  } else if (ws.op == M0__STREAM_DATA) {
    streamed_data(l, e, i, s, &ws.data);
  } else {
    atomic_fetch_add(&s->st->ok, 1);
    e->st->gone = true; /* its writer is ended: nothing to tell it at the close */
    m0__asks_finish(l, i, ws.op == M0__STREAM_END ? 0 : 1);
  }
}

int m0__streamed_close(m0__loop *l, m0__streamed *st, bool cut, size_t *bytes) {
  int status = st->status;
  /* Cut by the host (a DATA past its room, a REPLY record for its id, a
   * head it could not begin) while its instance may still write: told
   * GONE. Not at the loop's end (its asks' tick closed), nor to an
   * instance gone (streamed_credit checks its generation). */
  if (cut && !st->gone && l->asks && l->asks->tick_open) (void)streamed_credit(st, M0__CREDIT_GONE, 0);
  *bytes = st->w ? (size_t)st->taken : 0;
  m0_writer *w = st->w;
  m0__conn *c = st->conn;
  free(st); /* first: the close may take the next pipelined request, which may open a stream */
  if (w) m0__writer_close(l, w, cut);
  else if (c && l->asks) m0__http_resume(&l->http, c); /* the begin's 500 is in its queue */
  return status;
}
