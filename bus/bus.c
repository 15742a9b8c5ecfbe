/* The fleet's bus over NATS (bus/bus.h).
 *
 * Design notes
 * - One order for the fleet: a fleet frame's id comes from the JetStream
 *   stream, never from a host's counter: id = base + sequence, with base
 *   the stream's creation time (UTC ms, from the server's stream info) times
 *   M0__BUS_IDS_PER_MS (1024). Every host reads the same creation time, so
 *   every host gives a frame the same id whatever it saw of an older stream;
 *   and a stream made after another one (the server lost its store, or the
 *   stream was deleted) numbers above every id of it as long as the fleet
 *   published fewer than 1024 frames per ms on average over the old one's
 *   life and the server's clock did not go back. Ids are ~1.9e15 in 2026,
 *   below 2^53 (exact as a JavaScript number) until the year 2242.
 * - Before the fan-out the page's counter is raised to at least the id (a
 *   loop refuses an id above the counter), and with a bus m0_next_id takes
 *   nothing from it, so the counter is the highest fleet id this host has
 *   seen and a loop that begins later (a respawned worker) drops only what
 *   was before it.
 * - The message is the channel's length (u16, little-endian), the channel,
 *   the frame's bytes: no id, since the stream numbers it.
 * - A frame goes to the fleet only while this process's link is CONNECTED
 *   and the bridge consumes the stream (m0_bus_connected, on the page):
 *   libnats would otherwise buffer it through a reconnect and send it
 *   later, out of the order the other hosts saw meanwhile, and a server
 *   back without its store keeps nothing on the subject until a bridge has
 *   made the stream again. Until then it is local only.
 * - Consuming: an ephemeral push consumer with no acks bound to the stream,
 *   from the new messages at first, from the sequence after the last one
 *   taken after a reconnect, made again by the bridge's thread, so frames
 *   flow within ~1 s. Not libnats's "ordered" consumer: that one replaces
 *   itself on libnats's own threads, and unsubscribing it while it did read
 *   the consumer name they had just freed (ASan, test_fleet). Order holds
 *   anyway: one consumer delivers in stream order, a sequence at or below
 *   the last one taken is a redelivery, dropped, and a replaced consumer's
 *   messages are not heard (each consumer has a generation; the cursor and
 *   the generation change under fan_mu, which every delivery takes).
 * - The stream seen for what it is: at each (re)connection and every
 *   M0__BUS_CHECK_MS the bridge reads the stream's info. Another creation
 *   time is a reset: the base is the new stream's, the consumer starts at
 *   its first sequence (frames other hosts published into it already are
 *   the fleet's), the m0.gap is announced, one line logged, counted
 *   (m0_bus_resets_total). A consumer the server no longer has is made
 *   again from the cursor.
 * - A hole: a consumer's next sequence past the cursor + 1. A consumer made
 *   to start right after the cursor skips only what the stream let go (its
 *   limits, a purge) before this host took it: the m0.gap is announced
 *   before that frame, its ids taken from the hole's, and logged (once every
 *   10 s at most). Any other hole (messages pushed to a link that died, a
 *   consumer that outlived the server's restart going on past them, libnats
 *   dropping them for a slow consumer) may still be in the stream: that
 *   consumer is replaced by one from the cursor, which gets them or shows
 *   the loss as above. Found on the delivery path, not from the stream's
 *   info, since only the delivery knows what was taken. A message refused
 *   still moves the cursor (a refusal is no hole).
 * - The gap: what the old stream held past this host's cursor is lost, and
 *   which channels it was on is not known, so every channel this host has
 *   fanned out to gets `event: m0.gap` with `{"after": the last id it
 *   wrote}`. Each takes an id of its own just below the new stream's first
 *   (ids are global across channels and a loop writes each once), so it is
 *   in the histories and a client resuming with Last-Event-ID from before
 *   the reset is told too. Those ids are this host's: another host's gaps
 *   may differ (it saw another part of the old stream).
 * - Failures are said once: a link lost, a stream that does not answer (a
 *   slow or JetStream-less server: requests wait 1 s at most), each logged
 *   when it begins and when consuming resumes, not at every retry; a server
 *   that stops answering is lost after 3 unanswered pings 1 s apart.
 */
#include "bus/bus.h"
#include "bus/natsopt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bus/publisher.h"
#include "base/errors.h"
#include "http/response.h"
#include "base/clock.h"

_Static_assert(sizeof(((m0__bus_chan *)0)->name) == M0__CHANNEL_MAX, "a channel name fits a slot");

static void bus_wake(m0__bus *b, bool setup) {
  if (!atomic_load(&b->started)) return; /* m0__bus_start asks */
  pthread_mutex_lock(&b->mu);
  if (setup) b->want_setup = true;
  else b->want_check = true;
  pthread_cond_signal(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

static void bus_on_connected(natsConnection *nc, void *closure) {
  (void)nc;
  m0__bus *b = closure;
  if (!b->bridge) return;
  fprintf(stderr, "m0: bus: connected %s\n", b->url);
  bus_wake(b, true);
}

static void bus_on_disconnected(natsConnection *nc, void *closure) {
  m0__bus *b = closure;
  if (!b->bridge || atomic_load(&b->closing)) return;
  pthread_mutex_lock(&b->mu); /* after a round that saw the link up, never before (bus_round) */
  atomic_store(&b->line->connected, 0);
  pthread_mutex_unlock(&b->mu);
  /* The status's static text, not the connection's last error string: that
   * belongs to libnats's threads and may be freed while we print it (ASan
   * saw exactly that in test_fleet). */
  const char *unused = NULL;
  natsStatus st = natsConnection_GetLastError(nc, &unused);
  fprintf(stderr, "m0: bus: lost %s: %s; serving local streams only\n", b->url,
          st != NATS_OK ? natsStatus_GetText(st) : "disconnected");
}

static void bus_on_reconnected(natsConnection *nc, void *closure) {
  (void)nc;
  m0__bus *b = closure;
  if (!b->bridge || atomic_load(&b->closing)) return;
  atomic_fetch_add(&b->line->reconnects, 1);
  fprintf(stderr, "m0: bus: reconnected %s\n", b->url);
  bus_wake(b, true);
}

/* A fleet message refused: counted, and named at most once every 10 s. */
static void bus_refuse(m0__bus *b, uint64_t seq, const char *why) {
  atomic_fetch_add(&b->line->refused, 1);
  int64_t now = m0__now_ms(), last = atomic_load(&b->said_refused_ms);
  if (now - last >= 10000 && atomic_compare_exchange_strong(&b->said_refused_ms, &last, now))
    fprintf(stderr, "m0: bus: refused fleet message %llu on %s: %s\n", (unsigned long long)seq, b->subject, why);
}

/* Raises the page's counter to at least id (other publishers move it too). */
static void bus_raise_counter(m0__bus *b, uint64_t id) {
  _Atomic uint64_t *c = &b->pub->page->head->event_id;
  uint64_t cur = atomic_load(c);
  while (cur < id && !atomic_compare_exchange_weak(c, &cur, id)) {
  }
}

/* Remembers a channel fanned out to (under fan_mu), for the gaps. */
static void bus_chan_seen(m0__bus *b, const char *p, size_t n) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 16777619u;
  for (uint32_t k = 0; k < M0__BUS_CHAN_SLOTS; k++) {
    m0__bus_chan *c = &b->chans[(h + k) % M0__BUS_CHAN_SLOTS];
    if (c->len == n && memcmp(c->name, p, n) == 0) return;
    if (c->len == 0) {
      if (b->nchans >= M0__BUS_CHAN_SLOTS / 2) return; /* a loop has at most 1024 channels too */
      memcpy(c->name, p, n);
      c->len = (uint8_t)n;
      b->nchans++;
      return;
    }
  }
}

/* Frames after this host's last id may be lost and the next one is `next`
 * (under fan_mu): every channel it has fanned out to gets an m0.gap event
 * saying after which id. The gaps take the ids just below `next`, one per
 * channel, while there are ids between (a reset leaves millions, an
 * eviction at least one); a channel past those gets its gap unnumbered.
 * Returns how many were announced. */
static int bus_gap(m0__bus *b, uint64_t next) {
  uint64_t after = b->last_id, room = next > after + 1 ? next - after - 1 : 0;
  uint64_t k = room < (uint64_t)b->nchans ? room : (uint64_t)b->nchans, id = next - k;
  if (k) bus_raise_counter(b, next - 1);
  char ev[96];
  int n = snprintf(ev, sizeof ev, "event: m0.gap\ndata: {\"after\":%llu}", (unsigned long long)after);
  int said = 0;
  for (uint32_t i = 0; i < M0__BUS_CHAN_SLOTS; i++) {
    const m0__bus_chan *c = &b->chans[i];
    if (!c->len) continue;
    m0__publisher_fanout(b->pub, c->name, c->len, k ? id++ : 0, ev, (size_t)n);
    if (k) k--;
    said++;
  }
  return said;
}

/* The consumer skipped sequences (under fan_mu). One made to start right
 * after the cursor skipped them because the stream let them go (its limits,
 * a purge) before this host took them: announced before the next one, said
 * at most once every 10 s. Any other (delivered to a link that died, one
 * that outlived the server's restart, libnats's drops for a slow consumer)
 * is replaced by one from the cursor, which gets them if the stream still
 * holds them. Returns whether seq is to be taken now. */
static bool bus_hole(m0__bus *b, m0__bus_sub *bs, uint64_t seq) {
  if (bs->took || bs->start != b->last_seq + 1) { /* bs->start is 0 only while there is no cursor */
    b->gen++; /* this consumer is not heard any more */
    bus_wake(b, true);
    return false;
  }
  uint64_t after = b->last_id, next = b->base + seq;
  int said = bus_gap(b, next);
  int64_t now = m0__now_ms(), last = atomic_load(&b->said_gap_ms);
  if (now - last >= 10000 && atomic_compare_exchange_strong(&b->said_gap_ms, &last, now))
    fprintf(stderr, "m0: bus: the stream %s let fleet frames %llu to %llu go before this host took them (an m0.gap on "
            "each of the %d channels written)\n",
            b->stream, (unsigned long long)after + 1, (unsigned long long)next - 1, said);
  return true;
}

/* A fleet message, on libnats's delivery thread of its consumer. */
static void bus_on_msg(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure) {
  (void)nc;
  (void)sub;
  m0__bus_sub *bs = closure;
  m0__bus *b = bs->b;
  if (atomic_load(&b->stopping)) {
    natsMsg_Destroy(msg);
    return;
  }
  jsMsgMetaData *meta = NULL;
  uint64_t seq = 0;
  if (natsMsg_GetMetaData(&meta, msg) == NATS_OK) {
    seq = meta->Sequence.Stream;
    jsMsgMetaData_Destroy(meta);
  }
  const uint8_t *p = (const uint8_t *)natsMsg_GetData(msg);
  int n = natsMsg_GetDataLength(msg);
  size_t cl = n >= 2 ? (size_t)p[0] | (size_t)p[1] << 8 : 0;
  pthread_mutex_lock(&b->fan_mu);
  if (bs->gen != b->gen) {
    /* A consumer the bridge has replaced: its successor delivers this. */
  } else if (seq == 0) bus_refuse(b, seq, "it carries no stream sequence");
  else if (seq <= b->last_seq) {
    /* A redelivery, written once. One consumer delivers in order: below the
     * cursor, the stream may be another (the bridge looks). */
    if (seq < b->last_seq) bus_wake(b, false);
  } else if (!b->cursor || seq == b->last_seq + 1 || bus_hole(b, bs, seq)) {
    bs->took = b->cursor = true;
    b->last_seq = seq; /* taken, even when refused: a refusal is no hole */
    if (n < 2 || cl > (size_t)n - 2) bus_refuse(b, seq, "it does not decode (channel length, channel, frame)");
    else if (!m0__channel_ok_n((const char *)p + 2, cl)) bus_refuse(b, seq, "its channel is not one");
    else if (!m0__frame_ok(p + 2 + cl, (size_t)n - 2 - cl)) bus_refuse(b, seq, "its frame is not one");
    else {
      uint64_t id = b->base + seq;
      b->last_id = id;
      bus_chan_seen(b, (const char *)p + 2, cl);
      bus_raise_counter(b, id);
      m0__publisher_fanout(b->pub, (const char *)p + 2, cl, id, p + 2 + cl, (size_t)n - 2 - cl);
      atomic_fetch_add(&b->line->received, 1);
    }
  }
  pthread_mutex_unlock(&b->fan_mu);
  natsMsg_Destroy(msg);
}

static bool bus_not_found(natsStatus s, jsErrCode je) { return s == NATS_NOT_FOUND || je == JSStreamNotFoundErr; }

/* The stream's info: found, or made (by another host, or before). NULL when
 * JetStream does not answer; the reason in why. */
static jsStreamInfo *bus_stream(m0__bus *b, char *why, size_t n) {
  jsStreamInfo *si = NULL;
  jsErrCode je = 0;
  natsStatus s = js_GetStreamInfo(&si, b->js, b->stream, NULL, &je);
  if (s == NATS_OK) return si;
  if (!bus_not_found(s, je)) {
    snprintf(why, n, "cannot read the stream %s: %s (JetStream error %d)", b->stream, natsStatus_GetText(s), (int)je);
    return NULL;
  }
  jsStreamConfig sc;
  jsStreamConfig_Init(&sc);
  const char *subjects[] = {b->subject};
  sc.Name = b->stream;
  sc.Subjects = subjects;
  sc.SubjectsLen = 1;
  sc.Storage = js_FileStorage;
  sc.MaxMsgs = M0__BUS_MAX_MSGS;
  sc.MaxAge = M0__BUS_MAX_AGE_NS;
  s = js_AddStream(&si, b->js, &sc, NULL, &je);
  if (s == NATS_OK) return si;
  /* Two hosts starting together: the other one made it first. */
  if (js_GetStreamInfo(&si, b->js, b->stream, NULL, &je) == NATS_OK) return si;
  snprintf(why, n, "cannot make the stream %s for %s: %s (JetStream error %d; is the server started with -js?)",
           b->stream, b->subject, natsStatus_GetText(s), (int)je);
  return NULL;
}

/* Is the consumer still there? (A server that restarted, or expired it.) */
static bool bus_consumer_gone(m0__bus *b) {
  if (!b->sub) return true;
  jsConsumerInfo *ci = NULL;
  jsErrCode je = 0;
  natsStatus s = natsSubscription_GetConsumerInfo(&ci, b->sub, NULL, &je);
  if (ci) jsConsumerInfo_Destroy(ci);
  return s == NATS_NOT_FOUND || je == JSConsumerNotFoundErr;
}

/* Consumes the stream after the cursor (from its new messages while there
 * is none, unless by_seq), as a new generation: the replaced
 * consumer's late messages count no more. */
static bool bus_consume(m0__bus *b, bool by_seq, char *why, size_t n) {
  m0__bus_sub *bs = calloc(1, sizeof *bs);
  if (!bs) {
    snprintf(why, n, "no memory");
    return false;
  }
  bs->b = b;
  bs->next = b->subs;
  b->subs = bs;
  pthread_mutex_lock(&b->fan_mu);
  bs->gen = ++b->gen;
  uint64_t start = by_seq || b->cursor ? b->last_seq + 1 : 0;
  bs->start = start;
  pthread_mutex_unlock(&b->fan_mu);
  if (b->sub) {
    natsSubscription_Unsubscribe(b->sub); /* the server may have lost it already */
    natsSubscription_Destroy(b->sub);
    b->sub = NULL;
  }
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = b->stream;
  so.Config.AckPolicy = js_AckNone;
  if (start) {
    so.Config.DeliverPolicy = js_DeliverByStartSequence;
    so.Config.OptStartSeq = start;
  } else so.Config.DeliverPolicy = js_DeliverNew;
  jsErrCode je = 0;
  natsStatus s = js_Subscribe(&b->sub, b->js, b->subject, bus_on_msg, bs, NULL, &so, &je);
  if (s != NATS_OK) {
    b->sub = NULL;
    snprintf(why, n, "cannot consume the stream %s: %s (JetStream error %d)", b->stream, natsStatus_GetText(s),
             (int)je);
    return false;
  }
  return true;
}

/* The ids of a stream: after every id of any stream created before it
 * (bus/bus.c's notes). */
static uint64_t bus_base(const jsStreamInfo *si) {
  return si->Created > 0 ? (uint64_t)(si->Created / 1000000) * M0__BUS_IDS_PER_MS : 0;
}

/* The stream the bridge finds is not the one it consumed (created at
 * another time: the server lost its store, or it was deleted): ids go on
 * from the new stream's, above every id of the old one, and what the old
 * one held past this host's cursor is announced lost. */
static void bus_reset(m0__bus *b, const jsStreamInfo *si) {
  pthread_mutex_lock(&b->fan_mu);
  b->gen++; /* the old stream's consumer, if it still speaks, is not heard */
  uint64_t after = b->last_id, first = si->State.FirstSeq ? si->State.FirstSeq : 1;
  b->base = bus_base(si);
  b->last_seq = first - 1;
  b->cursor = true;
  uint64_t next = b->base + first;
  int said = bus_gap(b, next);
  pthread_mutex_unlock(&b->fan_mu);
  atomic_fetch_add(&b->line->resets, 1);
  fprintf(stderr, "m0: bus: the stream %s on %s is a new one (the server lost its store, or it was deleted): "
          "fleet frames after id %llu may be lost (an m0.gap on each of the %d channels written); ids go on from "
          "%llu%s\n",
          b->stream, b->url, (unsigned long long)after, said, (unsigned long long)next,
          next > after ? "" : ", BELOW this host's: its streams take none until they pass it (the server's clock?)");
}

/* Brings the bridge's consumer in line with the stream: on (re)connection
 * (force), and at each check. False when it must be tried again. */
static bool bus_sync(m0__bus *b, bool force, char *why, size_t n) {
  if (natsConnection_Status(b->nc) != NATS_CONN_STATUS_CONNECTED) {
    snprintf(why, n, "not connected");
    return false;
  }
  jsStreamInfo *si = bus_stream(b, why, n);
  if (!si) return false;
  bool ok = true;
  if (b->created && si->Created != b->created) {
    bus_reset(b, si);
    b->created = si->Created; /* a consumer that cannot be made yet is made by the next round, from the cursor */
    ok = bus_consume(b, true, why, n);
  } else if (!b->created) { /* the first time: the base, and the new messages on */
    pthread_mutex_lock(&b->fan_mu);
    b->base = bus_base(si);
    pthread_mutex_unlock(&b->fan_mu);
    ok = bus_consume(b, false, why, n);
  } else if (force || bus_consumer_gone(b)) /* what the stream let go meanwhile is a hole (bus_hole) */
    ok = bus_consume(b, false, why, n);
  if (ok) b->created = si->Created;
  jsStreamInfo_Destroy(si);
  return ok;
}

/* One round of the setup thread, unlocked: says a failure once, and the
 * recovery. */
static bool bus_round(m0__bus *b, bool force) {
  if (atomic_load(&b->stopping)) return true;
  char why[512];
  bool ok = bus_sync(b, force, why, sizeof why);
  if (!ok) {
    atomic_store(&b->line->connected, 0);
    if (!b->failing && natsConnection_Status(b->nc) == NATS_CONN_STATUS_CONNECTED)
      fprintf(stderr, "m0: bus: %s; serving local streams only until it does\n", why);
    b->failing = natsConnection_Status(b->nc) == NATS_CONN_STATUS_CONNECTED;
    return false;
  }
  if (b->failing) fprintf(stderr, "m0: bus: consuming the stream %s again\n", b->stream);
  b->failing = false;
  /* Under mu with the link's state: a disconnect that came during the round
   * stores 0 after this, not before. */
  pthread_mutex_lock(&b->mu);
  if (natsConnection_Status(b->nc) == NATS_CONN_STATUS_CONNECTED) atomic_store(&b->line->connected, 1);
  pthread_mutex_unlock(&b->mu);
  return true;
}

static void bus_deadline(struct timespec *ts, int ms) {
  clock_gettime(CLOCK_REALTIME, ts);
  ts->tv_sec += ms / 1000;
  ts->tv_nsec += (ms % 1000) * 1000000l;
  if (ts->tv_nsec >= 1000000000l) ts->tv_sec++, ts->tv_nsec -= 1000000000l;
}

static void *bus_setup_main(void *arg) {
  m0__bus *b = arg;
  bool retry = false;
  pthread_mutex_lock(&b->mu);
  while (!b->quit) {
    if (!b->want_setup && !b->want_check) {
      /* Retry shortly after a failure while the link is up; else check. */
      struct timespec ts;
      bus_deadline(&ts, retry ? 250 : M0__BUS_CHECK_MS);
      int rc = pthread_cond_timedwait(&b->cv, &b->mu, &ts);
      if (rc == 0 || b->quit || !atomic_load(&b->started)) continue;
      if (natsConnection_Status(b->nc) != NATS_CONN_STATUS_CONNECTED) continue;
      if (retry) b->want_setup = true;
      else b->want_check = true;
    }
    bool force = b->want_setup;
    b->want_setup = b->want_check = false;
    pthread_mutex_unlock(&b->mu);
    retry = !bus_round(b, force || retry);
    pthread_mutex_lock(&b->mu);
  }
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

int m0__bus_open(m0__bus *b, const char *url, const char *subject, m0__page *page, m0_publisher *fanout, bool bridge,
                 char *err, size_t errlen) {
  memset(b, 0, sizeof *b);
  pthread_mutex_init(&b->mu, NULL);
  pthread_mutex_init(&b->fan_mu, NULL);
  pthread_cond_init(&b->cv, NULL);
  b->line = page->bus;
  b->pub = fanout;
  b->bridge = bridge;
  m0__nats_url_shown(url, b->url, sizeof b->url); /* only printed: its password as "***" */
  snprintf(b->subject, sizeof b->subject, "%s", subject);
  /* The stream's name is the subject's with '_' for '.' (a name has no dot). */
  snprintf(b->stream, sizeof b->stream, "%s", subject);
  for (char *c = b->stream; *c; c++)
    if (*c == '.') *c = '_';
  if (bridge) {
    atomic_store(&b->line->connected, 0); /* until the bridge consumes */
    b->chans = calloc(M0__BUS_CHAN_SLOTS, sizeof *b->chans);
    if (!b->chans) {
      snprintf(err, errlen, "bus: no memory for the bridge");
      m0__bus_close(b);
      return M0__ENOMEM;
    }
    snprintf(b->line->url, sizeof b->line->url, "%s", url);
    snprintf(b->line->subject, sizeof b->line->subject, "%s", subject);
    atomic_store(&b->line->configured, 1);
  }
  /* A server not up yet is retried in the background (bus_on_connected). */
  natsStatus s = m0__nats_options(&b->opts, url, bus_on_disconnected, bus_on_connected, bus_on_reconnected, b);
  if (s != NATS_OK) {
    snprintf(err, errlen, "bus: cannot set up the NATS options for %s: %s", b->url, natsStatus_GetText(s));
    m0__bus_close(b);
    return M0__EINVALID;
  }
  s = natsConnection_Connect(&b->nc, b->opts);
  if (s != NATS_OK && s != NATS_NOT_YET_CONNECTED) {
    snprintf(err, errlen, "bus: cannot connect to %s: %s", b->url, natsStatus_GetText(s));
    m0__bus_close(b);
    return M0__ETRANSPORT;
  }
  if (s == NATS_NOT_YET_CONNECTED && bridge)
    fprintf(stderr, "m0: bus: %s cannot be reached yet; serving local streams only until it can\n", b->url);
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = 1000; /* a slow JetStream keeps the bridge's thread 1 s at most per request */
  if (bridge && (s = natsConnection_JetStream(&b->js, b->nc, &jo)) != NATS_OK) {
    snprintf(err, errlen, "bus: no JetStream context on %s: %s", b->url, natsStatus_GetText(s));
    m0__bus_close(b);
    return M0__ETRANSPORT;
  }
  if (bridge) {
    if (pthread_create(&b->setup, NULL, bus_setup_main, b) != 0) {
      snprintf(err, errlen, "bus: cannot start the bridge's thread");
      m0__bus_close(b);
      return M0__ENOMEM;
    }
    b->setup_started = true;
  }
  return 0;
}

void m0__bus_start(m0__bus *b) {
  if (!b->bridge) return;
  atomic_store(&b->started, true);
  if (natsConnection_Status(b->nc) == NATS_CONN_STATUS_CONNECTED) bus_wake(b, true);
}

void m0__bus_stop(m0__bus *b) { atomic_store(&b->stopping, true); }

void m0__bus_close(m0__bus *b) {
  atomic_store(&b->stopping, true);
  atomic_store(&b->closing, true);
  if (b->setup_started) {
    pthread_mutex_lock(&b->mu);
    b->quit = true;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
    pthread_join(b->setup, NULL);
    b->setup_started = false;
  }
  if (b->sub) natsSubscription_Destroy(b->sub); /* no Unsubscribe: the ephemeral consumer ends by itself */
  b->sub = NULL;
  /* What this process published is on its way before the link closes
   * (m0pub exits right after its publish). */
  if (b->nc && natsConnection_Status(b->nc) == NATS_CONN_STATUS_CONNECTED) natsConnection_FlushTimeout(b->nc, 500);
  if (b->js) jsCtx_Destroy(b->js);
  if (b->nc) natsConnection_Destroy(b->nc);
  if (b->opts) natsOptions_Destroy(b->opts);
  b->js = NULL;
  b->nc = NULL;
  b->opts = NULL;
  if (b->bridge && b->line) atomic_store(&b->line->connected, 0);
  /* libnats's own threads and memory: one bus per process, closed at its
   * end. Waiting joins its delivery threads, so no callback is still inside
   * the fan-out when the publisher closes after this, nor using a
   * consumer's closure. */
  if (nats_CloseAndWait(5000) != NATS_OK) {
    /* Its threads still run (a loaded machine): a consumer's closure may
     * still be read by one, so it is left to the process's exit. */
    fprintf(stderr, "m0: bus: libnats's threads did not end within 5 s; the bus's memory is left to the exit\n");
    b->subs = NULL;
  }
  while (b->subs) {
    m0__bus_sub *next = b->subs->next;
    free(b->subs);
    b->subs = next;
  }
  free(b->chans);
  b->chans = NULL;
  pthread_cond_destroy(&b->cv);
  pthread_mutex_destroy(&b->fan_mu);
  pthread_mutex_destroy(&b->mu);
}

bool m0__bus_publish(m0__bus *b, m0_publisher *pub, const char *channel, size_t chlen, const void *frame, size_t len) {
  /* To the fleet while this link is up and the bridge consumes the stream
   * (the page says): before the bridge has (re)made the stream after a
   * server's restart, the subject stores nothing. */
  if (b->nc && natsConnection_Status(b->nc) == NATS_CONN_STATUS_CONNECTED && atomic_load(&b->line->connected)) {
    size_t n = 2 + chlen + len;
    uint8_t *m = malloc(n);
    if (m) {
      m[0] = (uint8_t)(chlen & 0xff);
      m[1] = (uint8_t)(chlen >> 8);
      memcpy(m + 2, channel, chlen);
      memcpy(m + 2 + chlen, frame, len);
      natsStatus s = natsConnection_Publish(b->nc, b->subject, m, (int)n);
      free(m);
      if (s == NATS_OK) {
        atomic_fetch_add(&b->line->published, 1);
        return true;
      }
    }
  }
  /* The link or the stream is down: this host's streams only, unnumbered. */
  atomic_fetch_add(&b->line->local_only, 1);
  return m0__publisher_fanout(pub, channel, chlen, 0, frame, len);
}
