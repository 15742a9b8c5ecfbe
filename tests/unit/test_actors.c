/* The envelope (round trip, every refusal), URL building from one topology
 * description, one real message between two actors over inproc and ipc, the
 * direct inbox, and the publisher dialing a loop only when told. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/pipeline0/pull.h>
#include <poll.h>
#include <pthread.h>

#include "runtime/actor.h"
#include "runtime/admit.h"
#include "runtime/edges.h"
#include "runtime/recent.h"
#include "runtime/trace.h"
#include "actors/producer.h"
#include "bus/publisher.h"
#include "transport/page.h"
#include "base/errors.h"
#include "transport/rundir.h"
#include "transport/topology.h"

static void test_envelope_round_trip(void **st) {
  uint8_t buf[M0__ENV_HEADER + 5];
  m0__env e = {.kind = M0__K_FRAME, .from = M0__ACTOR_ID(M0__ROLE_PRODUCER, 0),
               .to = M0__ACTOR_ID(M0__ROLE_LOOP, 3), .seq = 77, .trace_hi = 0x0123456789abcdefull, .trace_lo = 9};
  m0__env_write(buf, &e, 5);
  memcpy(buf + M0__ENV_HEADER, "hello", 5);
  m0__env got;
  const uint8_t *p;
  size_t n;
  assert_int_equal(m0__env_read(buf, sizeof buf, &got, &p, &n), 0);
  assert_int_equal(got.kind, M0__K_FRAME);
  assert_int_equal(got.from, e.from);
  assert_int_equal(got.to, e.to);
  assert_int_equal(got.seq, 77);
  assert_true(got.trace_hi == e.trace_hi && got.trace_lo == 9);
  assert_int_equal(n, 5);
  assert_memory_equal(p, "hello", 5);
  /* refusals: short, wrong length, bad magic, unknown kind */
  assert_int_equal(m0__env_read(buf, 10, &got, &p, &n), M0__EBADMSG);
  assert_int_equal(m0__env_read(buf, sizeof buf - 1, &got, &p, &n), M0__EBADMSG);
  buf[0] ^= 1;
  assert_int_equal(m0__env_read(buf, sizeof buf, &got, &p, &n), M0__EBADMSG);
  buf[0] ^= 1;
  buf[4] = 0xee;
  assert_int_equal(m0__env_read(buf, sizeof buf, &got, &p, &n), M0__EBADMSG);
}

static void test_names(void **st) {
  char b[32];
  m0__actor_name(M0__ACTOR_ID(M0__ROLE_POOL, (2 << 12) | 5), b, sizeof b);
  assert_string_equal(b, "pool.2.5");
  assert_string_equal(m0__kind_name(M0__K_STOP), "stop");
  assert_string_equal(m0__strerror(M0__EBADMSG), "malformed message envelope");
}

/* A tracer on an nng address sends binary records, batched; decoded and
 * formatted they are the JSON lines "-" writes. Anything else is refused. */
static void test_trace_records(void **st) {
  nng_socket pull;
  assert_int_equal(nng_pull0_open(&pull), 0);
  assert_int_equal(nng_listen(pull, "inproc://test-trace", NULL, 0), 0);
  nng_socket_set_ms(pull, NNG_OPT_RECVTIMEO, 2000);
  m0__tracer *t = m0__tracer_new("inproc://test-trace", M0__TRACE_WORKER + 1);
  assert_non_null(t);
  m0__env e = {.kind = M0__K_JOB, .from = M0__ACTOR_ID(M0__ROLE_LOOP, 1),
               .to = M0__ACTOR_ID(M0__ROLE_POOL, (1 << 12) | 2), .seq = 42, .trace_hi = 0xabcull, .trace_lo = 7};
  m0__trace_record(t, false, &e, 100);
  e.seq = 43;
  m0__trace_record(t, true, &e, 5);
  uint8_t *buf;
  size_t n;
  assert_int_equal(nng_recv(pull, &buf, &n, NNG_FLAG_ALLOC), 0); /* within the 50 ms flush, in one batch */
  assert_int_equal(n, 2 * M0__TRACE_RECORD);
  m0__trace_rec r;
  assert_int_equal(m0__trace_decode(buf, &r), 0);
  assert_false(r.recv);
  assert_int_equal(r.bytes, 100);
  assert_true(r.e.kind == M0__K_JOB && r.e.from == e.from && r.e.to == e.to && r.e.seq == 42);
  assert_true(r.e.trace_hi == 0xabcull && r.e.trace_lo == 7);
  assert_true(r.t_ns > 1700000000ull * 1000000000ull);
  assert_true(r.pid == (uint32_t)getpid() && r.tid == (uint32_t)syscall(SYS_gettid) && r.process == M0__TRACE_WORKER + 1);
  r.t_ns = 1234567890000000123ull;
  r.pid = 99;
  r.tid = 100;
  char line[512];
  size_t len = m0__trace_format(&r, line, sizeof line);
  assert_string_equal(line, "{\"t\":1234567890.000000123,\"dir\":\"send\",\"from\":\"loop.1\",\"to\":\"pool.1.2\","
                            "\"kind\":\"job\",\"seq\":42,\"bytes\":100,\"trace\":\"0000000000000abc0000000000000007\","
                            "\"process\":\"worker.1\",\"pid\":99,\"tid\":100}\n");
  assert_int_equal(len, strlen(line));
  assert_int_equal(m0__trace_decode(buf + M0__TRACE_RECORD, &r), 0);
  assert_true(r.recv && r.e.seq == 43 && r.bytes == 5);
  buf[M0__TRACE_RECORD + M0__ENV_HEADER + 8] = 2; /* neither send nor recv */
  assert_int_equal(m0__trace_decode(buf + M0__TRACE_RECORD, &r), M0__EBADMSG);
  buf[0] ^= 1; /* not an envelope header */
  assert_int_equal(m0__trace_decode(buf, &r), M0__EBADMSG);
  nng_free(buf, n);
  m0__tracer_free(t);
  m0__socket_close(pull);
}

/* The same topology under three transports differs only in the URLs. */
static void test_topology_urls(void **st) {
  m0__topology a, b, c;
  assert_int_equal(m0__topology_build(&a, M0__MODE_THREADS, 2, 1, M0__SCHEME_INPROC, "m0-1"), 0);
  assert_int_equal(m0__topology_build(&b, M0__MODE_THREADS, 2, 1, M0__SCHEME_IPC, "/run/x"), 0);
  assert_int_equal(m0__topology_build(&c, M0__MODE_THREADS, 2, 1, M0__SCHEME_TCP, "10.0.0.1:7000"), 0);
  assert_int_equal(a.nactors, 2 + 2 * 2);
  assert_int_equal(b.nactors, a.nactors);
  for (int k = 0; k < a.nactors; k++) {
    assert_string_equal(a.actors[k].name, b.actors[k].name);
    assert_int_equal(a.actors[k].id, c.actors[k].id);
  }
  const m0__actor_desc *l1 = m0__topology_find(&a, M0__ACTOR_ID(M0__ROLE_LOOP, 1));
  assert_string_equal(l1->url, "inproc://m0-1/loop.1");
  l1 = m0__topology_find(&b, M0__ACTOR_ID(M0__ROLE_LOOP, 1));
  assert_string_equal(l1->url, "ipc:///run/x/loop.1.sock");
  assert_string_equal(c.actors[0].url, "tcp://10.0.0.1:7000");
  assert_string_equal(c.actors[5].url, "tcp://10.0.0.1:7005");
  assert_string_equal(m0__topology_find(&a, M0__ACTOR_ID(M0__ROLE_POOL, (1 << 12) | 0))->name, "pool.1.0");
  m0__topology_free(&a);
  m0__topology_free(&b);
  m0__topology_free(&c);
}

static void send_and_receive(const char *url) {
  m0__actor a, b;
  m0__peer to_b;
  assert_int_equal(m0__actor_open(&b, M0__ACTOR_ID(M0__ROLE_LOOP, 0), url, NULL), 0);
  assert_int_equal(m0__actor_open(&a, M0__ACTOR_ID(M0__ROLE_COORD, 0), "inproc://test-a", NULL), 0);
  assert_int_equal(m0__peer_open(&to_b, b.id, url, 1000), 0);
  assert_int_equal(m0__send(&a, &to_b, M0__K_GO, 1, 2, "xyz", 3), 0);
  nng_socket_set_ms(b.mailbox, NNG_OPT_RECVTIMEO, 2000);
  m0__msg m;
  assert_int_equal(m0__recv(&b, &m, M0__RECV_WAIT), 0);
  assert_int_equal(m.env.kind, M0__K_GO);
  assert_int_equal(m.env.from, a.id);
  assert_int_equal(m.env.seq, 1);
  assert_int_equal(m.len, 3);
  assert_memory_equal(m.payload, "xyz", 3);
  m0__msg_free(&m);
  assert_int_equal(m0__recv(&b, &m, M0__RECV_NOWAIT), M0__ETIMEDOUT);
  m0__peer_close(&to_b);
  m0__actor_close(&a);
  m0__actor_close(&b);
}

static void test_inproc(void **st) { send_and_receive("inproc://test-b"); }

/* A direct inbox: FIFO past its first ring size, its eventfd readable
 * exactly while it holds something (a late wake is cleared by the take
 * that finds nothing), a blocked WAIT woken by a direct send,
 * the mailbox still read beside it, INBOX reading the inbox only, and what
 * nobody took freed by fini (ASan's leak check). */
typedef struct inbox_waiter {
  m0__actor *self;
  int kind;
} inbox_waiter;

static void *inbox_wait(void *arg) {
  inbox_waiter *w = arg;
  m0__msg m;
  if (m0__recv(w->self, &m, M0__RECV_WAIT) == 0) {
    w->kind = m.env.kind;
    m0__msg_free(&m);
  }
  return NULL;
}

static bool fd_readable(int fd) {
  struct pollfd pf = {.fd = fd, .events = POLLIN};
  return poll(&pf, 1, 0) == 1;
}

static void test_inbox(void **st) {
  m0__actor a, b;
  m0__peer to_b, to_b_nng;
  m0__inbox box;
  assert_int_equal(m0__inbox_init(&box), 0);
  assert_int_equal(m0__actor_open(&b, M0__ACTOR_ID(M0__ROLE_POOL, 0), "inproc://test-inbox-b", NULL), 0);
  assert_int_equal(m0__actor_open(&a, M0__ACTOR_ID(M0__ROLE_LOOP, 0), "inproc://test-inbox-a", NULL), 0);
  m0__peer_direct(&to_b, b.id, &box);
  assert_int_equal(m0__peer_open(&to_b_nng, b.id, b.url, 1000), 0);
  b.inbox = &box;
  assert_false(fd_readable(box.efd));
  for (int i = 0; i < 20; i++) assert_int_equal(m0__send(&a, &to_b, M0__K_JOB, 0, (uint64_t)i, &i, sizeof i), 0);
  assert_true(fd_readable(box.efd));
  m0__msg m;
  for (int i = 0; i < 20; i++) {
    assert_int_equal(m0__recv(&b, &m, M0__RECV_INBOX), 0);
    int got;
    memcpy(&got, m.payload, sizeof got);
    assert_int_equal(got, i);
    assert_int_equal(m.env.seq, (uint64_t)i + 1);
    assert_true(fd_readable(box.efd) == (i < 19));
    m0__msg_free(&m);
  }
  assert_int_equal(m0__recv(&b, &m, M0__RECV_INBOX), M0__ETIMEDOUT);
  /* a wake that lands after the ring was emptied (a sender writes it after
   * its unlock): the take that finds nothing clears it, or a level-triggered
   * poll on the eventfd would spin */
  box.unwoken = 1;
  uint64_t one = 1;
  assert_int_equal(write(box.efd, &one, sizeof one), (ssize_t)sizeof one);
  assert_true(fd_readable(box.efd));
  assert_int_equal(m0__recv(&b, &m, M0__RECV_INBOX), M0__ETIMEDOUT);
  assert_false(fd_readable(box.efd));
  assert_int_equal(box.unwoken, 0);
  /* the mailbox beside it: INBOX does not look there, NOWAIT does */
  assert_int_equal(m0__send(&a, &to_b_nng, M0__K_STOP, 0, 0, NULL, 0), 0);
  usleep(50000);
  assert_int_equal(m0__recv(&b, &m, M0__RECV_INBOX), M0__ETIMEDOUT);
  assert_int_equal(m0__recv(&b, &m, M0__RECV_NOWAIT), 0);
  assert_int_equal(m.env.kind, M0__K_STOP);
  m0__msg_free(&m);
  assert_int_equal(m0__recv(&b, &m, M0__RECV_NOWAIT), M0__ETIMEDOUT);
  /* a blocked WAIT is woken by a direct send */
  inbox_waiter w = {&b, 0};
  nng_socket_set_ms(b.mailbox, NNG_OPT_RECVTIMEO, 2000); /* the wait's bound */
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, inbox_wait, &w), 0);
  usleep(50000);
  assert_int_equal(m0__send(&a, &to_b, M0__K_STOP, 0, 0, NULL, 0), 0);
  pthread_join(th, NULL);
  assert_int_equal(w.kind, M0__K_STOP);
  /* left behind: freed by fini */
  assert_int_equal(m0__send(&a, &to_b, M0__K_JOB, 0, 0, "x", 1), 0);
  m0__peer_close(&to_b);
  m0__peer_close(&to_b_nng);
  m0__actor_close(&a);
  m0__actor_close(&b);
  m0__inbox_fini(&box);
}

static void test_ipc(void **st) {
  m0__rundir d;
  char err[256], url[M0__URL_MAX];
  assert_int_equal(m0__rundir_open(&d, "", err, sizeof err), 0);
  snprintf(url, sizeof url, "ipc://%s/loop.0.sock", d.path);
  send_and_receive(url);
  m0__rundir_close(&d);
  assert_int_not_equal(access(d.path, F_OK), 0);
}

/* A frame is event lines without an id: the host writes "id: N" first. */
static void test_frame_ok(void **st) {
  const char *good[] = {"data: x", "event: beat\ndata: {}", "idle: x", "data: id: 7", ": comment"};
  const char *bad[] = {"id: 7\ndata: x", "data: x\nid: 7", "data: x\nid", "data: a\n\ndata: b", "data: x\r",
                       "data: x\n"};
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) assert_true(m0__frame_ok(good[i], strlen(good[i])));
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) assert_false(m0__frame_ok(bad[i], strlen(bad[i])));
  static char big[M0__FRAME_MAX + 1];
  memset(big, 'a', sizeof big);
  assert_false(m0__frame_ok(big, sizeof big));
}

/* Two threads taking ids from one page never see the same id. */
typedef struct ids_run {
  m0__page *pg;
  uint64_t *out;
  int n;
  pthread_barrier_t *go;
} ids_run;

static void *ids_take(void *arg) {
  ids_run *r = arg;
  pthread_barrier_wait(r->go); /* both at once, or there is no race to lose */
  for (int i = 0; i < r->n; i++) r->out[i] = m0__page_next_id(r->pg);
  return NULL;
}

static int ids_cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* A fresh run directory with a shared page of two loops in it. */
static void page_open(m0__rundir *d, m0__page *pg) {
  char err[256];
  assert_int_equal(m0__rundir_open(d, "", err, sizeof err), 0);
  assert_int_equal(m0__page_create(pg, d->path, 2, 0, err, sizeof err), 0);
}

static void page_done(m0__rundir *d, m0__page *pg) {
  m0__page_close(pg);
  m0__rundir_close(d);
}

static void test_counter_shared(void **st) {
  m0__rundir d;
  m0__page pg;
  char err[256];
  page_open(&d, &pg);
  enum { N = 2000000 };
  uint64_t *all = malloc(sizeof(uint64_t) * 2 * N);
  pthread_barrier_t go;
  pthread_barrier_init(&go, NULL, 2);
  ids_run a = {&pg, all, N, &go}, b = {&pg, all + N, N, &go};
  pthread_t ta, tb;
  pthread_create(&ta, NULL, ids_take, &a);
  pthread_create(&tb, NULL, ids_take, &b);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  pthread_barrier_destroy(&go);
  qsort(all, 2 * N, sizeof *all, ids_cmp);
  for (int i = 0; i < 2 * N; i++) assert_int_equal(all[i], (uint64_t)i + 1); /* 1..2N, each once */
  /* A second mapping (another process's view) continues the same counter. */
  m0__page other;
  assert_int_equal(m0__page_attach(&other, d.path, err, sizeof err), 0);
  assert_int_equal(m0__page_next_id(&other), (uint64_t)2 * N + 1);
  m0__page_close(&other);
  free(all);
  page_done(&d, &pg);
}

/* The publisher dials a loop only when told its mailbox is open
 * (m0__publisher_connect): until then, and after a hang-up, a frame for that
 * loop is a refusal the caller sees, and the other loops still get it. */
static bool frame_arrives(m0__actor *loop, uint64_t id) {
  m0__msg m;
  nng_socket_set_ms(loop->mailbox, NNG_OPT_RECVTIMEO, 2000);
  if (m0__recv(loop, &m, M0__RECV_WAIT) != 0) return false;
  uint64_t got;
  const char *ch;
  const uint8_t *f;
  size_t chlen, flen;
  bool ok = m.env.kind == M0__K_FRAME && m0__frame_decode(m.payload, m.len, &got, &ch, &chlen, &f, &flen) == 0 &&
            got == id && chlen == 5 && memcmp(ch, "beats", 5) == 0;
  m0__msg_free(&m);
  return ok;
}

static bool mailbox_empty(m0__actor *loop) {
  m0__msg m;
  usleep(20000);
  if (m0__recv(loop, &m, M0__RECV_NOWAIT) != 0) return true;
  m0__msg_free(&m);
  return false;
}

static void test_publisher_connect(void **st) {
  m0__rundir d;
  m0__page pg;
  page_open(&d, &pg);
  m0__topology t;
  assert_int_equal(m0__topology_build(&t, M0__MODE_PREFORK, 2, 0, M0__SCHEME_IPC, d.path), 0);
  m0_publisher pub;
  assert_int_equal(m0__publisher_open(&pub, &t, &pg, NULL, M0__ACTOR_ID(M0__ROLE_PRODUCER, 0)), 0);
  m0__actor loop[2];
  for (int i = 0; i < 2; i++) {
    const m0__actor_desc *l = m0__topology_find(&t, M0__ACTOR_ID(M0__ROLE_LOOP, i));
    assert_int_equal(m0__actor_open(&loop[i], l->id, l->url, NULL), 0);
  }
  /* nothing dialed yet */
  assert_false(m0_publish(&pub, "beats", 1, "data: x", 7));
  assert_true(mailbox_empty(&loop[0]));
  assert_int_equal(m0__publisher_connect(&pub, 0), 0);
  assert_false(m0_publish(&pub, "beats", 2, "data: x", 7)); /* loop 1 not dialed: refused */
  assert_true(frame_arrives(&loop[0], 2));                  /* loop 0 got it all the same */
  assert_true(mailbox_empty(&loop[1]));
  assert_int_equal(m0__publisher_connect(&pub, 1), 0);
  assert_true(m0_publish(&pub, "beats", 3, "data: x", 7));
  assert_true(frame_arrives(&loop[0], 3));
  assert_true(frame_arrives(&loop[1], 3));
  m0__publisher_disconnect(&pub, 1); /* its worker died */
  assert_false(m0_publish(&pub, "beats", 4, "data: x", 7));
  assert_true(frame_arrives(&loop[0], 4));
  assert_true(mailbox_empty(&loop[1]));
  assert_int_equal(m0__publisher_connect(&pub, 1), 0); /* its successor said READY */
  assert_true(m0_publish(&pub, "beats", 5, "data: x", 7));
  assert_true(frame_arrives(&loop[1], 5));
  assert_true(frame_arrives(&loop[0], 5));
  m0__publisher_close(&pub);
  for (int i = 0; i < 2; i++) m0__actor_close(&loop[i]);
  m0__topology_free(&t);
  page_done(&d, &pg);
}

/* The recent records (runtime/recent.h): a tracer's kept records, in order;
 * past the ring's size the oldest go; a line being written is skipped. */
typedef struct seen_recs {
  uint64_t seq[M0__PAGE_TRACE_LINES + 8];
  int n;
} seen_recs;

static void seen_one(void *arg, const m0__trace_rec *r) {
  seen_recs *s = arg;
  if (s->n < (int)(sizeof s->seq / sizeof s->seq[0])) s->seq[s->n++] = r->e.seq;
}

static void test_recent_ring(void **st) {
  m0__trace_ring *ring = calloc(1, sizeof *ring);
  assert_non_null(ring);
  m0__recent_attach(ring);
  nng_socket pull;
  assert_int_equal(nng_pull0_open(&pull), 0);
  assert_int_equal(nng_listen(pull, "inproc://test-recent", NULL, 0), 0);
  m0__tracer *t = m0__tracer_new("inproc://test-recent", M0__TRACE_HOST);
  assert_non_null(t);
  char why[128];
  static const char off[] = "{\"on\":false}", on[] = "{\"on\":true,\"to\":\"inproc://test-recent\"}";
  assert_int_equal(m0__tracer_control(t, off, sizeof off - 1, why, sizeof why), 0);
  m0__env e = {.kind = M0__K_JOB, .from = M0__ACTOR_ID(M0__ROLE_LOOP, 0), .to = M0__ACTOR_ID(M0__ROLE_POOL, 0)};
  e.seq = 1;
  m0__trace_record(t, false, &e, 10); /* off: nothing kept */
  seen_recs *s = calloc(1, sizeof *s);
  m0__recent_each(seen_one, s);
  assert_int_equal(s->n, 0);
  assert_int_equal(m0__tracer_control(t, on, sizeof on - 1, why, sizeof why), 0);
  for (uint64_t i = 1; i <= 3; i++) {
    e.seq = i;
    m0__trace_record(t, false, &e, 10);
  }
  m0__recent_each(seen_one, s);
  assert_int_equal(s->n, 3);
  assert_true(s->seq[0] == 1 && s->seq[1] == 2 && s->seq[2] == 3);
  for (uint64_t i = 4; i <= M0__PAGE_TRACE_LINES + 9; i++) {
    e.seq = i;
    m0__trace_record(t, true, &e, 10);
  }
  s->n = 0;
  m0__recent_each(seen_one, s);
  assert_int_equal(s->n, M0__PAGE_TRACE_LINES); /* the last ones, oldest first */
  assert_true(s->seq[0] == 10 && s->seq[s->n - 1] == M0__PAGE_TRACE_LINES + 9);
  atomic_store(&ring->lines[(M0__PAGE_TRACE_LINES + 8) % M0__PAGE_TRACE_LINES].stamp, 0); /* being written */
  s->n = 0;
  m0__recent_each(seen_one, s);
  assert_int_equal(s->n, M0__PAGE_TRACE_LINES - 1);
  assert_int_equal(s->seq[s->n - 1], M0__PAGE_TRACE_LINES + 8);
  m0__tracer_free(t);
  nng_close(pull);
  static m0__trace_ring mine; /* the ring is the process's: not left pointing at freed memory */
  m0__recent_attach(&mine);
  free(ring);
  free(s);
}

/* Messages per edge (runtime/edges.h): sent and taken, whichever counts
 * first; a dead receiver's untaken ones settled. */
typedef struct edge_seen {
  uint64_t n, taken, kinds;
  int lines;
} edge_seen;

static void edge_one(void *arg, uint32_t from, uint32_t to, const m0__edge_counts *c) {
  edge_seen *e = arg;
  if (from != M0__ACTOR_ID(M0__ROLE_PRODUCER, 0)) return;
  e->lines++;
  e->n += c->n;
  e->taken += c->taken;
  e->kinds |= c->kinds;
}

static bool to_loop1(void *arg, uint32_t to) { return to == M0__ACTOR_ID(M0__ROLE_LOOP, 1); }

static void test_edges_waiting(void **st) {
  static m0__edge_line lines[64];
  m0__edges_attach(lines, 64);
  uint32_t p = M0__ACTOR_ID(M0__ROLE_PRODUCER, 0), l0 = M0__ACTOR_ID(M0__ROLE_LOOP, 0),
           l1 = M0__ACTOR_ID(M0__ROLE_LOOP, 1);
  m0__edge_taken(p, l1); /* the receiver counted first: its line is made */
  for (int i = 0; i < 3; i++) m0__edge_sent(p, l0, M0__K_FRAME);
  m0__edge_taken(p, l0);
  for (int i = 0; i < 4; i++) m0__edge_sent(p, l1, i ? M0__K_FRAME : M0__K_STOP);
  edge_seen e = {0};
  m0__edges_each(edge_one, &e);
  assert_true(e.lines == 2 && e.n == 7 && e.taken == 2); /* 2 wait for loop.0, 3 for loop.1 */
  assert_true(e.kinds == (1ull << M0__K_FRAME | 1ull << M0__K_STOP));
  m0__edges_settle(to_loop1, NULL);
  e = (edge_seen){0};
  m0__edges_each(edge_one, &e);
  assert_true(e.lines == 2 && e.n == 7 && e.taken == 5); /* loop.1's forgotten: 2 wait, for loop.0 */
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_envelope_round_trip), cmocka_unit_test(test_names), cmocka_unit_test(test_trace_records),
                                     cmocka_unit_test(test_topology_urls), cmocka_unit_test(test_inproc),
                                     cmocka_unit_test(test_ipc), cmocka_unit_test(test_inbox), cmocka_unit_test(test_frame_ok),
                                     cmocka_unit_test(test_counter_shared),
                                     cmocka_unit_test(test_publisher_connect), cmocka_unit_test(test_recent_ring),
                                     cmocka_unit_test(test_edges_waiting)};
  /* As in a host: its own actors seal what they send through sockets
   * (runtime/admit.h), so an ipc pipe between two of them is this process. */
  if (m0__family_make() != 0) return 1;
  return cmocka_run_group_tests(tests, NULL, NULL);
}
