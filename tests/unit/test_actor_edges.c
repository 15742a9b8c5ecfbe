/* The runtime's refusals, as a caller of runtime/actor.c and
 * actors/producer.c sees them: a mailbox or peer on an address nng cannot
 * use (or one already taken), a payload over the envelope's bound, a send to
 * a mailbox nobody listens on (bounded, ETIMEDOUT) or on a closed peer, a
 * wait that times out, bytes that are no envelope and a JOB/RESULT forged
 * over a pipe (each EBADMSG, the mailbox still serving after), a closed
 * mailbox; the frame's wire form and its refusals; m0_publish's refusals
 * counted in the publisher and on the shared page; m0_publisher_attach on a
 * directory without a page and on loops it cannot address; m0_stats's
 * figures; the producer thread when it cannot reach its coordinator or open
 * its mailbox. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/pipeline0/push.h>

#include "runtime/actor.h"
#include "runtime/admit.h"
#include "base/errors.h"
#include "actors/producer.h"
#include "bus/publisher.h"
#include "transport/page.h"
#include "transport/rundir.h"

#define LOOP0 M0__ACTOR_ID(M0__ROLE_LOOP, 0)
#define COORD M0__ACTOR_ID(M0__ROLE_COORD, 0)

static void test_open_refusals(void **st) {
  m0__actor a, b;
  m0__peer p;
  assert_int_equal(m0__actor_open(&a, LOOP0, "bogus://nowhere", NULL), M0__ETRANSPORT);
  assert_false(a.open);
  assert_int_equal(m0__actor_open(&a, LOOP0, "inproc://edges-taken", NULL), 0);
  assert_int_equal(m0__actor_open(&b, LOOP0, "inproc://edges-taken", NULL), M0__ETRANSPORT); /* in use */
  assert_false(b.open);
  assert_int_equal(m0__actor_listen_also(&a, "bogus://also"), M0__ETRANSPORT);
  assert_int_equal(m0__actor_listen_also(&a, "inproc://edges-also"), 0);
  /* the second address reaches the same mailbox */
  assert_int_equal(m0__actor_open(&b, COORD, "inproc://edges-b", NULL), 0);
  assert_int_equal(m0__peer_open(&p, a.id, "inproc://edges-also", 1000), 0);
  assert_int_equal(m0__send(&b, &p, M0__K_GO, 0, 0, "ab", 2), 0);
  nng_socket_set_ms(a.mailbox, NNG_OPT_RECVTIMEO, 2000);
  m0__msg m;
  assert_int_equal(m0__recv(&a, &m, M0__RECV_WAIT), 0);
  assert_int_equal(m.env.kind, M0__K_GO);
  assert_memory_equal(m.payload, "ab", 2);
  m0__msg_free(&m);
  m0__peer_close(&p);
  /* a peer on an address no dial can use */
  assert_int_equal(m0__peer_open(&p, a.id, "bogus://peer", 100), M0__ETRANSPORT);
  assert_false(p.open);
  m0__actor_close(&a);
  m0__actor_close(&b);
}

static void test_send_refusals(void **st) {
  m0__rundir d;
  char err[256], url[M0__URL_MAX];
  assert_int_equal(m0__rundir_open(&d, "", err, sizeof err), 0);
  snprintf(url, sizeof url, "ipc://%s/nobody.sock", d.path);
  m0__actor self;
  assert_int_equal(m0__actor_open(&self, COORD, "inproc://edges-sender", NULL), 0);
  m0__peer p;
  /* nobody listens there: the peer opens (it redials in the background),
   * and a send waits its bound, then says so */
  assert_int_equal(m0__peer_open(&p, LOOP0, url, 50), 0);
  assert_true(p.open);
  static char one;
  assert_int_equal(m0__send(&self, &p, M0__K_GO, 0, 0, &one, M0__ENV_MAX_PAYLOAD + 1), M0__ETOOBIG);
  assert_int_equal(self.seq, 0); /* refused before it was numbered */
  assert_int_equal(m0__send(&self, &p, M0__K_GO, 0, 0, NULL, 0), M0__ETIMEDOUT);
  m0__peer_close(&p);
  assert_false(p.open);
  assert_int_equal(m0__send(&self, &p, M0__K_GO, 0, 0, NULL, 0), M0__ECLOSED);
  m0__actor_close(&self);
  m0__rundir_close(&d);
}

/* Raw bytes into a mailbox, from a socket that is no m0 actor (kept open
 * until the mailbox has them: a close may drop what is still queued). */
static void raw_send(nng_socket s, const void *b, size_t n) { assert_int_equal(nng_send(s, (void *)b, n, 0), 0); }

static int recv_wait(m0__actor *a, m0__msg *m) {
  nng_socket_set_ms(a->mailbox, NNG_OPT_RECVTIMEO, 2000);
  return m0__recv(a, m, M0__RECV_WAIT);
}

static void count_refusal(void *arg, uint32_t actor, int reason, uint64_t n) {
  assert_int_equal(actor, LOOP0);
  ((uint64_t *)arg)[reason] += n;
}

static void test_recv_refusals(void **st) {
  m0__rundir d;
  char err[256], url[M0__URL_MAX];
  assert_int_equal(m0__rundir_open(&d, "", err, sizeof err), 0);
  snprintf(url, sizeof url, "ipc://%s/loop.0.sock", d.path);
  m0__actor loop, peer;
  assert_int_equal(m0__actor_open(&loop, LOOP0, url, NULL), 0);
  assert_int_equal(m0__actor_open(&peer, COORD, "inproc://edges-peer", NULL), 0);
  m0__msg m;
  /* no direct inbox: INBOX finds nothing; a WAIT ends at its bound */
  assert_int_equal(m0__recv(&loop, &m, M0__RECV_INBOX), M0__ETIMEDOUT);
  nng_socket_set_ms(loop.mailbox, NNG_OPT_RECVTIMEO, 30);
  assert_int_equal(m0__recv(&loop, &m, M0__RECV_WAIT), M0__ETIMEDOUT);
  /* bytes that are no envelope */
  nng_socket raw;
  assert_int_equal(nng_push0_open(&raw), 0);
  assert_int_equal(nng_dial(raw, url, NULL, 0), 0);
  nng_socket_set_ms(raw, NNG_OPT_SENDTIMEO, 2000);
  raw_send(raw, "hello", 5);
  assert_int_equal(recv_wait(&loop, &m), M0__EBADMSG);
  /* a header with a length that is not the message's */
  uint8_t buf[M0__ENV_HEADER + 4];
  m0__env e = {.kind = M0__K_GO, .from = COORD, .to = LOOP0, .seq = 1};
  m0__env_write(buf, &e, 8);
  raw_send(raw, buf, sizeof buf);
  assert_int_equal(recv_wait(&loop, &m), M0__EBADMSG);
  /* without the family's cookie, a message through an ipc pipe is from
   * outside: a STOP from there is never taken */
  m0__peer to;
  assert_int_equal(m0__peer_open(&to, LOOP0, url, 1000), 0);
  assert_false(m0__family_known());
  assert_int_equal(m0__send(&peer, &to, M0__K_STOP, 0, 0, NULL, 0), 0);
  assert_int_equal(recv_wait(&loop, &m), M0__EBADMSG);
  /* with it, the host's own actors seal what they send through sockets */
  assert_int_equal(m0__family_make(), 0);
  /* JOB and RESULT carry pointers of this process: over a pipe, forged,
   * sealed or not */
  assert_int_equal(m0__send(&peer, &to, M0__K_JOB, 0, 0, "12345678", 8), 0);
  assert_int_equal(recv_wait(&loop, &m), M0__EBADMSG);
  peer.id = M0__ACTOR_ID(M0__ROLE_POOL, 0); /* a RESULT's own sender, still through a pipe */
  assert_int_equal(m0__send(&peer, &to, M0__K_RESULT, 0, 0, "12345678", 8), 0);
  assert_int_equal(recv_wait(&loop, &m), M0__EBADMSG);
  peer.id = COORD;
  /* a seal that is not the cookie */
  uint8_t forged[M0__ENV_HEADER + M0__SEAL_LEN];
  m0__env fe = {.kind = M0__K_STOP, .flags = M0__ENV_SEALED, .from = COORD, .to = LOOP0, .seq = 9};
  m0__env_write(forged, &fe, 0);
  memset(forged + M0__ENV_HEADER, 0x5a, M0__SEAL_LEN);
  raw_send(raw, forged, sizeof forged);
  assert_int_equal(recv_wait(&loop, &m), M0__EBADMSG);
  /* addressed to another actor */
  m0__peer wrong;
  assert_int_equal(m0__peer_open(&wrong, M0__ACTOR_ID(M0__ROLE_LOOP, 1), url, 1000), 0);
  assert_int_equal(m0__send(&peer, &wrong, M0__K_STOP, 0, 0, NULL, 0), 0);
  assert_int_equal(recv_wait(&loop, &m), M0__EBADMSG);
  m0__peer_close(&wrong);
  /* each was counted by reason */
  uint64_t counts[M0__REFUSE_COUNT_] = {0};
  m0__refusals_each(count_refusal, counts);
  assert_int_equal(counts[M0__REFUSE_MALFORMED], 2);
  assert_int_equal(counts[M0__REFUSE_KIND], 3);
  assert_int_equal(counts[M0__REFUSE_SEAL], 1);
  assert_int_equal(counts[M0__REFUSE_ADDRESS], 1);
  /* the mailbox still serves: a well-formed, sealed message after them arrives */
  assert_int_equal(m0__send(&peer, &to, M0__K_STOP, 0, 0, "ok", 2), 0);
  assert_int_equal(recv_wait(&loop, &m), 0);
  assert_int_equal(m.env.kind, M0__K_STOP);
  assert_int_equal(m.origin, M0__ORIGIN_SELF);
  assert_int_equal(m.env.seq, 5);
  assert_memory_equal(m.payload, "ok", 2);
  m0__msg_free(&m);
  assert_null(m.nmsg);
  m0__msg_free(&m); /* twice is harmless */
  m0__peer_close(&to);
  m0__socket_close(raw);
  /* a closed mailbox: an error, not a wait */
  m0__actor_close(&loop);
  m0__actor_close(&loop); /* twice is harmless */
  assert_int_equal(m0__recv(&loop, &m, M0__RECV_NOWAIT), M0__ECLOSED);
  m0__actor closed;
  assert_int_equal(m0__actor_open(&closed, LOOP0, "inproc://edges-closed", NULL), 0);
  m0__actor_close(&closed);
  int fd = 12345;
  assert_int_equal(m0__actor_recv_fd(&closed, &fd), M0__ETRANSPORT);
  assert_int_equal(fd, 12345);
  assert_int_equal(m0__recv(&closed, &m, M0__RECV_WAIT), M0__ETRANSPORT);
  m0__actor_close(&peer);
  m0__rundir_close(&d);
}

/* The inbox's ring grows while it has wrapped: order is kept. */
static void test_inbox_wrap(void **st) {
  m0__inbox box;
  m0__actor a, b;
  m0__peer to;
  assert_int_equal(m0__inbox_init(&box), 0);
  assert_int_equal(m0__actor_open(&a, COORD, "inproc://edges-wrap-a", NULL), 0);
  assert_int_equal(m0__actor_open(&b, LOOP0, "inproc://edges-wrap-b", NULL), 0);
  b.inbox = &box;
  m0__peer_direct(&to, b.id, &box);
  int next_in = 0, next_out = 0;
  m0__msg m;
  for (; next_in < 5; next_in++) assert_int_equal(m0__send(&a, &to, M0__K_FRAME, 0, 0, &next_in, sizeof next_in), 0);
  for (; next_out < 4; next_out++) {
    assert_int_equal(m0__recv(&b, &m, M0__RECV_INBOX), 0);
    assert_memory_equal(m.payload, &next_out, sizeof next_out);
    m0__msg_free(&m);
  }
  /* head is 4: fill past the ring of 8 so it grows from a wrapped state */
  for (; next_in < 30; next_in++) assert_int_equal(m0__send(&a, &to, M0__K_FRAME, 0, 0, &next_in, sizeof next_in), 0);
  for (; next_out < 30; next_out++) {
    assert_int_equal(m0__recv(&b, &m, M0__RECV_NOWAIT), 0); /* NOWAIT takes the inbox first */
    assert_memory_equal(m.payload, &next_out, sizeof next_out);
    m0__msg_free(&m);
  }
  assert_int_equal(m0__recv(&b, &m, M0__RECV_NOWAIT), M0__ETIMEDOUT);
  m0__inbox_fini(&box);
  m0__inbox_fini(&box); /* twice is harmless */
  m0__actor_close(&a);
  m0__actor_close(&b);
}

static void test_frame_decode(void **st) {
  uint8_t b[10 + 5 + 3];
  uint64_t id = 77;
  uint16_t cl = 5;
  memcpy(b, &id, 8);
  memcpy(b + 8, &cl, 2);
  memcpy(b + 10, "beatsxyz", 8);
  uint64_t got;
  const char *ch;
  size_t chlen, flen;
  const uint8_t *f;
  assert_int_equal(m0__frame_decode(b, sizeof b, &got, &ch, &chlen, &f, &flen), 0);
  assert_true(got == 77 && chlen == 5 && flen == 3);
  assert_memory_equal(ch, "beats", 5);
  assert_memory_equal(f, "xyz", 3);
  assert_int_equal(m0__frame_decode(b, 9, &got, &ch, &chlen, &f, &flen), M0__EBADMSG); /* shorter than its head */
  assert_int_equal(m0__frame_decode(b, 14, &got, &ch, &chlen, &f, &flen), M0__EBADMSG); /* channel past the end */
  cl = 0;
  memcpy(b + 8, &cl, 2);
  assert_int_equal(m0__frame_decode(b, sizeof b, &got, &ch, &chlen, &f, &flen), M0__EBADMSG);
  cl = M0__CHANNEL_MAX + 1;
  uint8_t big[10 + M0__CHANNEL_MAX + 1];
  memset(big, 'c', sizeof big);
  memcpy(big + 8, &cl, 2);
  assert_int_equal(m0__frame_decode(big, sizeof big, &got, &ch, &chlen, &f, &flen), M0__EBADMSG);
  /* a frame with no lines is a frame; one whose last line is a bare id, or
   * a length without bytes, is not */
  assert_true(m0__frame_ok(NULL, 0));
  assert_false(m0__frame_ok("data: x\nid", 10));
  assert_false(m0__frame_ok("id", 2));
  assert_false(m0__frame_ok(NULL, 3));
  assert_true(m0__frame_ok("i", 1));
  assert_true(m0__frame_ok("idx", 3));
}

/* m0_publish's refusals: counted by the publisher and on the shared page
 * (what /metrics reads), nothing sent; an accepted frame arrives whole. */
static void test_publish_refusals(void **st) {
  m0__rundir d;
  m0__page pg;
  char err[256];
  assert_int_equal(m0__rundir_open(&d, "", err, sizeof err), 0);
  assert_int_equal(m0__page_create(&pg, d.path, 1, 0, err, sizeof err), 0);
  m0__topology t;
  assert_int_equal(m0__topology_build(&t, M0__MODE_SINGLE, 1, 0, M0__SCHEME_IPC, d.path), 0);
  const m0__actor_desc *ld = m0__topology_find(&t, LOOP0);
  m0__actor loop;
  assert_int_equal(m0__actor_open(&loop, ld->id, ld->url, NULL), 0);
  m0_publisher pub;
  assert_int_equal(m0__publisher_open(&pub, &t, &pg, NULL, M0__ACTOR_ID(M0__ROLE_PRODUCER, 0)), 0);
  assert_int_equal(m0__publisher_connect(&pub, 0), 0);
  char chan[M0__CHANNEL_MAX + 2];
  memset(chan, 'c', sizeof chan - 1);
  chan[sizeof chan - 1] = 0; /* 65 bytes */
  static char frame[M0__FRAME_MAX + 1];
  memset(frame, 'x', sizeof frame);
  assert_false(m0_publish(&pub, chan, 1, "data: x", 7));
  assert_false(m0_publish(&pub, "", 2, "data: x", 7));
  assert_false(m0_publish(&pub, "m0.closing", 3, "data: x", 7));
  assert_false(m0_publish(&pub, "beats", 4, frame, sizeof frame));
  assert_false(m0_publish(&pub, "beats", 5, "id: 9", 5));
  assert_int_equal(atomic_load(&pub.refused), 5);
  assert_int_equal(atomic_load(&pub.published), 0);
  assert_int_equal(atomic_load(&pg.head->refused), 5);
  m0__msg m;
  nng_socket_set_ms(loop.mailbox, NNG_OPT_RECVTIMEO, 50);
  assert_int_equal(m0__recv(&loop, &m, M0__RECV_WAIT), M0__ETIMEDOUT); /* none of them was sent */
  chan[M0__CHANNEL_MAX] = 0; /* 64 bytes: the longest channel */
  frame[M0__FRAME_MAX - 1] = 'y'; /* the largest frame, 64 KiB */
  assert_true(m0_publish(&pub, chan, 6, frame, M0__FRAME_MAX));
  assert_int_equal(atomic_load(&pub.published), 1);
  nng_socket_set_ms(loop.mailbox, NNG_OPT_RECVTIMEO, 2000);
  assert_int_equal(m0__recv(&loop, &m, M0__RECV_WAIT), 0);
  uint64_t id;
  const char *ch;
  size_t chlen, flen;
  const uint8_t *f;
  assert_int_equal(m.env.kind, M0__K_FRAME);
  assert_int_equal(m0__frame_decode(m.payload, m.len, &id, &ch, &chlen, &f, &flen), 0);
  assert_true(id == 6 && chlen == M0__CHANNEL_MAX && flen == M0__FRAME_MAX);
  assert_memory_equal(f, frame, M0__FRAME_MAX);
  m0__msg_free(&m);
  m0__publisher_close(&pub);
  m0__actor_close(&loop);
  m0__topology_free(&t);
  m0__page_close(&pg);
  m0__rundir_close(&d);
}

/* m0_publisher_attach (what m0pub uses): refused with a reason where there
 * is no page, or where the loops' sockets cannot be addressed; a host whose
 * loop is gone refuses each frame (bounded) and counts it. m0_stats reads
 * the page's figures, at most max of them. */
static void test_attach(void **st) {
  char err[512] = "";
  m0__rundir d;
  assert_int_equal(m0__rundir_open(&d, "", err, sizeof err), 0);
  assert_null(m0_publisher_attach(d.path, err, sizeof err));
  assert_non_null(strstr(err, "no shared page"));
  assert_non_null(strstr(err, d.path));
  m0_publisher_detach(NULL); /* harmless */
  m0__page pg;
  assert_int_equal(m0__page_create(&pg, d.path, 2, 0, err, sizeof err), 0);
  atomic_store(&pg.lines[0].requests, 11);
  atomic_store(&pg.lines[0].open, 3);
  atomic_store(&pg.lines[0].streams, 2);
  atomic_store(&pg.lines[0].handoffs, 4);
  atomic_store(&pg.lines[0].queued, 1);
  atomic_store(&pg.lines[0].dropped, 6);
  atomic_store(&pg.lines[1].requests, 22);
  /* no loop listens there: attached all the same (it redials), and every
   * frame is refused within the send's bound, and counted */
  err[0] = 0;
  m0_publisher *pub = m0_publisher_attach(d.path, err, sizeof err);
  assert_non_null(pub);
  assert_int_equal(pub->nloops, 2);
  m0_loop_stats s[3];
  memset(s, 0xee, sizeof s);
  assert_int_equal(m0_stats(pub, s, 1), 2); /* the loop count, one filled */
  assert_true(s[0].requests == 11 && s[0].open == 3 && s[0].streams == 2 && s[0].handoffs == 4 &&
              s[0].queued == 1 && s[0].dropped == 6);
  assert_true(s[1].requests == 0xeeeeeeeeeeeeeeeeull); /* untouched */
  assert_int_equal(m0_stats(pub, s, 3), 2);
  assert_true(s[1].requests == 22 && s[1].open == 0);
  uint64_t id = m0_next_id(pub);
  assert_int_equal(m0__page_next_id(&pg), id + 1); /* the one shared counter */
  assert_false(m0_publish(pub, "beats", id, "data: x", 7));
  assert_int_equal(atomic_load(&pub->refused), 1);
  assert_int_equal(atomic_load(&pg.head->refused), 1);
  m0_publisher_detach(pub);
  m0__page_close(&pg);
  m0__rundir_close(&d);
  /* a run directory whose loop sockets are past the length a socket's path
   * may have: refused, naming the loop */
  char base[128], deep[512];
  snprintf(base, sizeof base, "/tmp/m0-edges-%d", (int)getpid());
  assert_int_equal(mkdir(base, 0700), 0);
  snprintf(deep, sizeof deep, "%s/%0120d", base, 0);
  assert_int_equal(mkdir(deep, 0700), 0);
  assert_int_equal(m0__page_create(&pg, deep, 1, 0, err, sizeof err), 0);
  err[0] = 0;
  assert_null(m0_publisher_attach(deep, err, sizeof err));
  assert_non_null(strstr(err, "cannot reach loop 0 at ipc://"));
  m0__page_close(&pg);
  char page[600];
  snprintf(page, sizeof page, "%s/page", deep);
  unlink(page);
  rmdir(deep);
  rmdir(base);
}

/* The producer thread: a coordinator it cannot reach ends it at once
 * (named on stderr, no make run); a mailbox it cannot open is refused
 * before any thread starts. */
static int makes;
static void *count_make(const m0_ctx *ctx, char *err, size_t n) {
  makes++;
  return NULL;
}
static int64_t never_step(void *s, m0_publisher *p) { return -1; }

/* Waits (bounded) on the exit descriptor until h's thread has ended. */
static void wait_exit(m0__exits *e, m0__handle *h) {
  for (int k = 0; k < 100 && !m0__handle_exited(h); k++) {
    struct pollfd pf = {e->fd, POLLIN, 0};
    assert_true(poll(&pf, 1, 10000) == 1);
    m0__exits_take(e);
  }
  assert_true(m0__handle_exited(h));
}

static int closed;
static void on_closed(m0__handle *h) { closed++; }

static void test_producer_unreachable(void **st) {
  m0_producer def = {.make = count_make, .step = never_step};
  m0_publisher pub = {0};
  m0__exits ex;
  assert_int_equal(m0__exits_init(&ex), 0);
  m0__producer_run r = {.cfg = {.def = &def, .pub = &pub, .url = "inproc://edges-producer", .coord_id = COORD,
                                .coord_url = "bogus://coordinator"}};
  m0__handle_init(&r.h, &m0__producer_kind, &ex);
  assert_true(m0__handle_exited(&r.h)); /* not started: nothing to wait for */
  assert_int_equal(m0__handle_open(&r.h), 0);
  assert_int_equal(m0__handle_start(&r.h), 0);
  assert_true(r.h.started);
  wait_exit(&ex, &r.h); /* its end wrote the exit descriptor */
  assert_false(atomic_load(&r.h.failed));
  assert_int_equal(makes, 0);
  m0__handle *hs[] = {&r.h};
  assert_int_equal(m0__handles_close(hs, 1, on_closed), 0);
  assert_int_equal(closed, 1);
  assert_false(r.self.open); /* released: its mailbox is closed */
  assert_int_equal(m0__handles_close(hs, 1, on_closed), 0); /* closed once */
  assert_int_equal(closed, 1);
  m0__producer_run bad = {.cfg = {.def = &def, .pub = &pub, .url = "bogus://mailbox", .coord_id = COORD,
                                  .coord_url = "inproc://x"}};
  m0__handle_init(&bad.h, &m0__producer_kind, &ex);
  assert_int_equal(m0__handle_open(&bad.h), M0__ETRANSPORT);
  assert_false(bad.h.started);
  assert_true(m0__handle_exited(&bad.h));
  m0__exits_fini(&ex);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_open_refusals),    cmocka_unit_test(test_send_refusals),
      cmocka_unit_test(test_recv_refusals),    cmocka_unit_test(test_inbox_wrap),
      cmocka_unit_test(test_frame_decode),     cmocka_unit_test(test_publish_refusals),
      cmocka_unit_test(test_attach),           cmocka_unit_test(test_producer_unreachable)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
