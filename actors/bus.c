/* The fleet's bus over NATS (actors/bus.h).
 *
 * Design notes
 * - One order for the fleet: a fleet frame's id is its JetStream stream
 *   sequence, never a host's counter. Before the fan-out the page's counter
 *   is raised to at least that id (a loop refuses an id above the counter),
 *   and with a bus m0_next_id takes nothing from it, so the counter is the
 *   highest fleet id this host has seen and a loop that begins later (a
 *   respawned worker) drops only what was before it.
 * - The message is the channel's length (u16, little-endian), the channel,
 *   the frame's bytes: no id, since the stream numbers it.
 * - A frame goes to the fleet only while the link is CONNECTED: libnats
 *   would otherwise buffer it through a reconnect and send it later, out of
 *   the order the other hosts saw meanwhile. Until then it is local only.
 * - Consuming: an ephemeral push consumer with no acks bound to the
 *   stream, from the new messages at first, from the sequence after the
 *   last one taken after a reconnect (the server may have restarted and
 *   lost it), made again by the bridge's thread, so frames flow within
 *   ~1 s. Not libnats's "ordered" consumer: that one replaces itself on
 *   libnats's own threads, and unsubscribing it while it did read the
 *   consumer name they had just freed (ASan, test_fleet). Order holds
 *   anyway: one consumer delivers in stream order, and a sequence at or
 *   below the last one taken is a redelivery, dropped.
 */
#include "actors/bus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "actors/publisher.h"
#include "base/errors.h"
#include "http/response.h"

static int64_t bus_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void bus_want_setup(m0__bus *b) {
  if (!atomic_load(&b->started)) return; /* m0__bus_start asks */
  pthread_mutex_lock(&b->mu);
  b->want_setup = true;
  pthread_cond_signal(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

static void bus_on_connected(natsConnection *nc, void *closure) {
  (void)nc;
  m0__bus *b = closure;
  if (!b->bridge) return;
  atomic_store(&b->line->connected, 1);
  fprintf(stderr, "m0: bus: connected %s\n", b->url);
  bus_want_setup(b);
}

static void bus_on_disconnected(natsConnection *nc, void *closure) {
  m0__bus *b = closure;
  if (!b->bridge || atomic_load(&b->closing)) return;
  atomic_store(&b->line->connected, 0);
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
  atomic_store(&b->line->connected, 1);
  atomic_fetch_add(&b->line->reconnects, 1);
  fprintf(stderr, "m0: bus: reconnected %s\n", b->url);
  bus_want_setup(b);
}

/* A fleet message refused: counted, and named at most once every 10 s. */
static void bus_refuse(m0__bus *b, uint64_t seq, const char *why) {
  atomic_fetch_add(&b->line->refused, 1);
  int64_t now = bus_now_ms(), last = atomic_load(&b->said_refused_ms);
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

/* A fleet message, on libnats's delivery thread. */
static void bus_on_msg(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure) {
  (void)nc;
  (void)sub;
  m0__bus *b = closure;
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
  if (seq == 0) bus_refuse(b, seq, "it carries no stream sequence");
  else if (n < 2 || cl > (size_t)n - 2) bus_refuse(b, seq, "it does not decode (channel length, channel, frame)");
  else if (!m0__channel_ok_n((const char *)p + 2, cl)) bus_refuse(b, seq, "its channel is not one");
  else if (!m0__frame_ok(p + 2 + cl, (size_t)n - 2 - cl)) bus_refuse(b, seq, "its frame is not one");
  else if (seq > atomic_load(&b->last_seq)) { /* a sequence seen already is a redelivery: written once */
    atomic_store(&b->last_seq, seq);
    bus_raise_counter(b, seq);
    m0__publisher_fanout(b->pub, (const char *)p + 2, cl, seq, p + 2 + cl, (size_t)n - 2 - cl);
    atomic_fetch_add(&b->line->received, 1);
  }
  natsMsg_Destroy(msg);
}

/* Makes the stream, or finds it made (by another host, or before). */
static bool bus_stream(m0__bus *b) {
  jsStreamInfo *si = NULL;
  jsErrCode je = 0;
  if (js_GetStreamInfo(&si, b->js, b->stream, NULL, &je) == NATS_OK) {
    jsStreamInfo_Destroy(si);
    return true;
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
  natsStatus s = js_AddStream(&si, b->js, &sc, NULL, &je);
  if (s == NATS_OK) {
    jsStreamInfo_Destroy(si);
    return true;
  }
  /* Two hosts starting together: the other one made it first. */
  if (js_GetStreamInfo(&si, b->js, b->stream, NULL, &je) == NATS_OK) {
    jsStreamInfo_Destroy(si);
    return true;
  }
  fprintf(stderr, "m0: bus: cannot make the stream %s for %s: %s (JetStream error %d; is the server started with -js?)\n",
          b->stream, b->subject, natsStatus_GetText(s), (int)je);
  return false;
}

/* (Re)subscribes the bridge: from the new messages, or after the last taken. */
static bool bus_subscribe(m0__bus *b) {
  if (natsConnection_Status(b->nc) != NATS_CONN_STATUS_CONNECTED || !bus_stream(b)) return false;
  if (b->sub) {
    natsSubscription_Unsubscribe(b->sub); /* the server may have lost it already */
    natsSubscription_Destroy(b->sub);
    b->sub = NULL;
  }
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = b->stream;
  so.Config.AckPolicy = js_AckNone;
  uint64_t last = atomic_load(&b->last_seq);
  if (last) {
    so.Config.DeliverPolicy = js_DeliverByStartSequence;
    so.Config.OptStartSeq = last + 1;
  } else so.Config.DeliverPolicy = js_DeliverNew;
  jsErrCode je = 0;
  natsStatus s = js_Subscribe(&b->sub, b->js, b->subject, bus_on_msg, b, NULL, &so, &je);
  if (s != NATS_OK) {
    b->sub = NULL;
    fprintf(stderr, "m0: bus: cannot consume the stream %s: %s (JetStream error %d)\n", b->stream,
            natsStatus_GetText(s), (int)je);
    return false;
  }
  return true;
}

static void *bus_setup_main(void *arg) {
  m0__bus *b = arg;
  pthread_mutex_lock(&b->mu);
  while (!b->quit) {
    if (!b->want_setup) {
      pthread_cond_wait(&b->cv, &b->mu);
      continue;
    }
    b->want_setup = false;
    pthread_mutex_unlock(&b->mu);
    bool ok = atomic_load(&b->stopping) || bus_subscribe(b);
    pthread_mutex_lock(&b->mu);
    if (!ok && !b->quit && !b->want_setup) { /* try again shortly, while the link is up */
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += 250 * 1000000l;
      if (ts.tv_nsec >= 1000000000l) ts.tv_sec++, ts.tv_nsec -= 1000000000l;
      pthread_cond_timedwait(&b->cv, &b->mu, &ts);
      if (natsConnection_Status(b->nc) == NATS_CONN_STATUS_CONNECTED) b->want_setup = true;
    }
  }
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

int m0__bus_open(m0__bus *b, const char *url, const char *subject, m0__page *page, m0_publisher *fanout, bool bridge,
                 char *err, size_t errlen) {
  memset(b, 0, sizeof *b);
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->cv, NULL);
  b->line = page->bus;
  b->pub = fanout;
  b->bridge = bridge;
  snprintf(b->url, sizeof b->url, "%s", url);
  snprintf(b->subject, sizeof b->subject, "%s", subject);
  /* The stream's name is the subject's with '_' for '.' (a name has no dot). */
  snprintf(b->stream, sizeof b->stream, "%s", subject);
  for (char *c = b->stream; *c; c++)
    if (*c == '.') *c = '_';
  if (bridge) {
    snprintf(b->line->url, sizeof b->line->url, "%s", url);
    snprintf(b->line->subject, sizeof b->line->subject, "%s", subject);
    atomic_store(&b->line->configured, 1);
  }
  natsStatus s = natsOptions_Create(&b->opts);
  if (s == NATS_OK) s = natsOptions_SetURL(b->opts, url);
  /* For ever, every 250 ms: a host outlives its NATS server's restarts. */
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(b->opts, -1);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(b->opts, 250);
  if (s == NATS_OK) s = natsOptions_SetTimeout(b->opts, 1000);
  if (s == NATS_OK) s = natsOptions_SetDisconnectedCB(b->opts, bus_on_disconnected, b);
  if (s == NATS_OK) s = natsOptions_SetReconnectedCB(b->opts, bus_on_reconnected, b);
  /* A server not up yet is retried in the background (bus_on_connected). */
  if (s == NATS_OK) s = natsOptions_SetRetryOnFailedConnect(b->opts, true, bus_on_connected, b);
  if (s != NATS_OK) {
    snprintf(err, errlen, "bus: cannot set up the NATS options for %s: %s", url, natsStatus_GetText(s));
    m0__bus_close(b);
    return M0__EINVALID;
  }
  s = natsConnection_Connect(&b->nc, b->opts);
  if (s != NATS_OK && s != NATS_NOT_YET_CONNECTED) {
    snprintf(err, errlen, "bus: cannot connect to %s: %s", url, natsStatus_GetText(s));
    m0__bus_close(b);
    return M0__ETRANSPORT;
  }
  if (s == NATS_NOT_YET_CONNECTED && bridge)
    fprintf(stderr, "m0: bus: %s cannot be reached yet; serving local streams only until it can\n", url);
  if (bridge && (s = natsConnection_JetStream(&b->js, b->nc, NULL)) != NATS_OK) {
    snprintf(err, errlen, "bus: no JetStream context on %s: %s", url, natsStatus_GetText(s));
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
    if (natsConnection_Status(b->nc) == NATS_CONN_STATUS_CONNECTED) atomic_store(&b->line->connected, 1);
  }
  return 0;
}

void m0__bus_start(m0__bus *b) {
  if (!b->bridge) return;
  atomic_store(&b->started, true);
  if (natsConnection_Status(b->nc) == NATS_CONN_STATUS_CONNECTED) bus_want_setup(b);
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
  pthread_cond_destroy(&b->cv);
  pthread_mutex_destroy(&b->mu);
  /* libnats's own threads and memory: one bus per process, closed at its
   * end. Waiting joins its delivery threads, so no callback is still inside
   * the fan-out when the publisher closes after this. */
  nats_CloseAndWait(1000);
}

bool m0__bus_publish(m0__bus *b, m0_publisher *pub, const char *channel, size_t chlen, const void *frame, size_t len) {
  if (b->nc && natsConnection_Status(b->nc) == NATS_CONN_STATUS_CONNECTED) {
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
  /* The link is down: this host's streams only, unnumbered. */
  atomic_fetch_add(&b->line->local_only, 1);
  return m0__publisher_fanout(pub, channel, chlen, 0, frame, len);
}
