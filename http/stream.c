/* Channels on one loop: their subscribers (server-sent-event streams and
 * WebSockets), the frames the bus brings, each channel's history, the
 * heartbeat, and the goodbye at the drain.
 *
 * Design notes
 * - A stream is a connection from which nothing more is parsed (http/conn.c
 *   stops at its answer and reads are discarded); a WebSocket's reads go to
 *   http/websocket.c. Neither has a deadline, so the sweep never times them
 *   out: the heartbeat (an SSE comment, a WebSocket ping) and TCP keepalive
 *   find a peer that vanished.
 * - One copy per frame per loop: a frame from the bus is encoded once into
 *   an m0__sframe ("id: N\n" + lines + "\n\n"; the WebSocket message and its
 *   compressed form are made at the first subscriber that needs them), and
 *   written from those bytes with one write per subscriber, no queue, when
 *   nothing waits before it (stream_write_now); what a socket does not take
 *   waits in its queue as a reference to the bytes (m0__outq_hold). The
 *   history holds one reference too; the last one released frees the frame.
 *   The fan-out prefetches the next subscriber's lines (sub_prefetch).
 * - The cap counts only what waits behind the socket (q[0] + q[1]). Every
 *   frame or beat is flushed as soon as it is queued, so the shared scratch
 *   never holds a subscriber's bytes past the call. A frame that would pass
 *   the cap is dropped for that subscriber alone and counted (frames_dropped,
 *   and by channel on the shared page): one slow reader neither holds memory
 *   without bound nor slows the others.
 * - A loss is never silent. Ids are global across channels, so a client
 *   cannot see one in its ids: it is told in band. A stream's subscription
 *   remembers what it lost (how many, the first and last ids) and, before
 *   the next frame it has room for, or when its queue is written out
 *   (m0__stream_caught_up), gets an m0.gap event saying so: the frames after
 *   the gap follow it, never precede it. A WebSocket that agreed to the
 *   subprotocol m0.events gets the very same events, each as a text message
 *   (the SSE bytes without the blank line: an sframe's wse), and is told the
 *   same way (sub_ids). A plain WebSocket message carries data alone, so no
 *   in-band event could be told from the application's: the socket is
 *   closed with 1013 (M0__STREAM_WS_LOST) and the first id lost, after what
 *   it already has queued.
 * - A subscription is freed when its connection closes, which any write may
 *   do (m0__conn_flush): after a push, c->closing is checked before the
 *   subscription is touched again.
 * - History: each channel keeps its last history_max frames, at most
 *   history_bytes_max bytes of them, and the highest id it let go
 *   (evicted). A stream opened with Last-Event-ID: N (or a WebSocket with
 *   ?last_event_id=N, m0__last_event_id) gets the held frames after N once
 *   its view returned (m0__stream_replay: the view's own frames come first;
 *   a WebSocket's channels merged in id order); when frames after N may be
 *   missing (N below evicted, or
 *   below history_from: the loop began after N, a respawned worker), an
 *   m0.gap event says so before them. A frame at or below N that reaches
 *   this loop only after the resume (another worker or generation gave it
 *   to the client first) is not sent again. Ids are global across
 *   channels, so a hole in one channel's ids is no loss; only those marks
 *   are.
 * - Ids only go up on a channel: a numbered frame at or below the highest
 *   its channel wrote on this loop came late (publishers cross in flight)
 *   and is dropped there, counted and told as a loss (chan_late). So what
 *   a stream, a WebSocket and the history see is in id order, whoever
 *   published it.
 * - Frames are checked before the bus (m0__frame_ok: no larger than the
 *   cap, no blank line, no CR, no id line of their own) and trusted here.
 * - A beat that does not fit is not retried at every sweep: the stream
 *   counts as written and is tried again a period later.
 * - The drain's goodbye ignores the cap (it is the last thing a client gets,
 *   and says why: an m0.closing event with a retry hint, or a close frame
 *   with 1001); the connection leaves the list first so no frame follows
 *   it, and closes once that is written, or within M0__STREAM_GOODBYE_MS
 *   when it waits behind bytes the client has not read.
 */
#include "http/stream.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "http/conn_state.h"
#include "http/ws.h"
#include "transport/page.h"

#define CHAN_BUCKETS 256

struct m0__chan {
  m0__chan *next; /* in its bucket */
  m0__sub *subs;
  int nsubs;
  m0__sframe **hist; /* a ring of hcap, the oldest at hhead */
  uint32_t hcap, hhead, hcount;
  size_t hbytes;
  uint64_t evicted; /* the highest id dropped from the history */
  uint64_t last;    /* the highest id written here: a frame at or below it came late */
  _Atomic uint64_t *dropped; /* its line on the shared page, found at its first drop */
  uint8_t nlen;
  char name[M0__CHANNEL_MAX + 1];
};

static uint32_t chan_hash(const char *p, size_t n) {
  uint32_t x = 2166136261u; /* FNV-1a */
  for (size_t i = 0; i < n; i++) x = (x ^ (uint8_t)p[i]) * 16777619u;
  return x % CHAN_BUCKETS;
}

static m0__chan *chan_find(m0__http *h, const char *p, size_t n, bool make) {
  if (!h->chans) {
    if (!make) return NULL;
    h->chans = calloc(CHAN_BUCKETS, sizeof *h->chans);
    if (!h->chans) return NULL;
  }
  uint32_t b = chan_hash(p, n);
  for (m0__chan *ch = h->chans[b]; ch; ch = ch->next)
    if (ch->nlen == n && memcmp(ch->name, p, n) == 0) return ch;
  if (!make || h->nchans >= M0__CHANNELS_MAX) return NULL;
  m0__chan *ch = calloc(1, sizeof *ch);
  if (!ch) return NULL;
  memcpy(ch->name, p, n);
  ch->nlen = (uint8_t)n;
  ch->next = h->chans[b];
  h->chans[b] = ch;
  h->nchans++;
  return ch;
}

/* ---- subscribers ------------------------------------------------------ */

void m0__stream_enlist(m0__conn *c) {
  m0__http *h = c->h;
  if (c->stream) return;
  c->stream = true;
  c->snext = h->streams;
  c->sprev = NULL;
  if (h->streams) h->streams->sprev = c;
  h->streams = c;
  h->nstreams++;
  c->last_write = uv_now(h->uv);
  m0__conn_keepalive(c); /* a peer that vanished is found */
}

/* Where a subscription starts: after the client's last id, the held
 * frames after it to come (m0__stream_replay), or now. */
static void sub_start(m0__sub *s, bool has_last, uint64_t last) {
  s->after = s->resumed = has_last ? last : 0;
  s->replay = has_last;
}

int m0__stream_subscribe_from(m0__conn *c, const char *channel, size_t n, bool has_last, uint64_t last) {
  int rv = m0__stream_subscribe(c, channel, n);
  if (rv == 0) sub_start(c->subs, has_last, last);
  return rv;
}

/* How c takes frames: fixed once it is a stream or a WebSocket. */
static uint8_t sub_form(const m0__conn *c) {
  const m0__stream_ws_ops *o = c->h->ws_ops;
  if (!c->ws) return M0__SUB_SSE;
  if (o->events(c->ws)) return M0__SUB_WSE;
  return o->deflating(c->ws) ? M0__SUB_WSZ : M0__SUB_WS;
}

int m0__stream_subscribe(m0__conn *c, const char *channel, size_t n) {
  for (m0__sub *s = c->subs; s; s = s->cnext)
    if (s->ch->nlen == n && memcmp(s->ch->name, channel, n) == 0) return 1;
  m0__chan *ch = chan_find(c->h, channel, n, true);
  if (!ch) return M0__ETOOBIG; /* or out of memory: chan_find does not tell */
  m0__sub *s = calloc(1, sizeof *s);
  if (!s) return M0__ENOMEM;
  s->ch = ch;
  s->c = c;
  s->form = sub_form(c);
  s->next = ch->subs;
  if (ch->subs) ch->subs->prev = s;
  ch->subs = s;
  ch->nsubs++;
  s->cnext = c->subs;
  c->subs = s;
  return 0;
}

void m0__stream_forget(m0__conn *c) {
  m0__http *h = c->h;
  while (c->subs) {
    m0__sub *s = c->subs;
    c->subs = s->cnext;
    if (s->prev) s->prev->next = s->next;
    else s->ch->subs = s->next;
    if (s->next) s->next->prev = s->prev;
    s->ch->nsubs--;
    free(s);
  }
  if (!c->stream) return;
  if (c->sprev) c->sprev->snext = c->snext;
  else h->streams = c->snext;
  if (c->snext) c->snext->sprev = c->sprev;
  h->nstreams--;
  c->stream = false;
}

/* Writes bytes to c's socket at once when nothing waits before them: no
 * write in flight, nothing in the scratch (a head a view has not flushed
 * yet goes first). 0 with *took the bytes the socket took (0 when it was
 * not tried: p[*took, n) is the caller's to queue, in order), or
 * M0__ECLOSED when the socket failed (c is closed). */
static int stream_write_now(m0__conn *c, const void *p, size_t n, size_t *took) {
  const m0__io_ops *io = c->io_ops;
  *took = 0;
  if (c->writing || !io->try_write || m0__outq_bytes(&c->h->scratch)) return 0;
  uv_buf_t b = {.base = (char *)p, .len = n};
  int w = io->try_write(c, &b, 1);
  if (w >= 0) {
    *took = (size_t)w;
    return 0;
  }
  m0__conn_close(c);
  return M0__ECLOSED;
}

/* Queues bytes to one subscriber, unless its queue is full: copied (owner
 * NULL) or held (a frame's). Most frames to most subscribers go straight
 * to the socket (stream_write_now): one write, no queue, no reference. A
 * connection that is closing takes nothing and drops nothing. */
static bool stream_push(m0__conn *c, const void *p, size_t n, m0__sframe *owner) {
  if (c->closing || c->close_after) return true;
  if ((c->writing ? m0__conn_queued(c) : 0) + n > M0__STREAM_QUEUE) return false; /* queued only behind a write */
  c->last_write = uv_now(c->h->uv);
  size_t w;
  if (stream_write_now(c, p, n, &w) != 0 || w == n) return true;
  p = (const char *)p + w, n -= w; /* the rest behind a write of its own */
  m0__outq *q = m0__conn_target(c);
  int rv;
  if (owner) {
    owner->refs++;
    rv = m0__outq_hold(q, p, n, m0__sframe_release, owner);
  } else {
    rv = m0__outq_append(q, p, n);
  }
  if (rv != 0) return w == 0 ? false : (m0__conn_close(c), true); /* part written: the rest or a broken frame */
  m0__conn_flush(c);
  return true;
}

/* ---- frames (their WebSocket forms: http/sframe.c) ------------------------ */

/* Whether the subscriber sees ids and is told of losses in band: a stream,
 * or a WebSocket that agreed to m0.events. */
static bool sub_ids(const m0__sub *s) { return s->form == M0__SUB_SSE || s->form == M0__SUB_WSE; }

/* One event of the host's own (ev: its lines, n bytes, no blank line) to c
 * alone, in its framing. */
static bool event_push(m0__conn *c, const char *ev, size_t n) {
  char out[M0__WS_HEADER_MAX + 192];
  if (n + 2 > sizeof out - M0__WS_HEADER_MAX) return false;
  size_t hl = 0;
  if (c->ws) hl = m0__ws_frame_header((uint8_t *)out, M0__WS_TEXT, true, false, n);
  memcpy(out + hl, ev, n);
  if (!c->ws) memcpy(out + n, "\n\n", 2);
  return stream_push(c, out, hl + n + (c->ws ? 0 : 2), NULL);
}

/* A stream that lost frames is told which (an m0.gap event), when it has
 * room for that and `more` bytes behind it. false: no room yet. */
static bool sub_tell(m0__sub *s, size_t more) {
  char ev[192];
  int n = snprintf(ev, sizeof ev, "event: m0.gap\ndata: {\"after\":%llu,\"first\":%llu,\"last\":%llu,\"lost\":%u}",
                   (unsigned long long)s->after, (unsigned long long)s->lost_first,
                   (unsigned long long)s->lost_last, s->lost);
  if (m0__conn_queued(s->c) + (size_t)n + M0__WS_HEADER_MAX + more > M0__STREAM_QUEUE) return false;
  m0__sub told = *s;
  s->lost = 0;
  s->lost_first = s->lost_last = 0;
  if (event_push(s->c, ev, (size_t)n)) return true; /* s may be gone now (closed by the write) */
  s->lost = told.lost, s->lost_first = told.lost_first, s->lost_last = told.lost_last;
  return false;
}

/* One frame to one subscriber, in its connection's framing; a stream told
 * of its losses first. false: it did not fit (c is open, s untouched). */
static bool sub_push(m0__http *h, m0__sub *s, m0__sframe *f) {
  m0__conn *c = s->c;
  if (f->id && f->id <= s->resumed) return true; /* the client had it before it resumed here */
  if (!sub_ids(s)) {
    bool z = s->form == M0__SUB_WSZ;
    if (!(z ? f->wsz : f->ws) && !m0__sframe_ws(h, f, z)) return true; /* nothing a WebSocket would carry */
    return z ? stream_push(c, f->wsz, f->wsz_len, f) : stream_push(c, f->ws, f->ws_len, f);
  }
  if (s->lost && !sub_tell(s, f->sse_len)) return false;
  if (c->closing) return true;
  if (s->form == M0__SUB_WSE ? !m0__sframe_wse(f) || !stream_push(c, f->wse, f->wse_len, f) : !stream_push(c, f->sse, f->sse_len, f))
    return false;
  if (!c->closing && f->id) s->after = f->id;
  return true;
}

/* Asks for the memory the next subscriber's frame reads while this one's
 * write runs in the kernel. A fan-out touches each subscriber once a
 * frame, long after the last, so each of its lines is a cache miss, and
 * those were most of the user time per subscriber: its subscription, the
 * one after it (the next call reads s->next's c), the transport's state
 * at the head of the connection (libuv's handle: its type, flags, write
 * queue and descriptor are in its first 192 bytes) and the connection's
 * own flags. */
static void sub_prefetch(const m0__sub *s) {
  const char *c = (const char *)s->c;
  __builtin_prefetch(s->next);
  __builtin_prefetch(c);
  __builtin_prefetch(c + 64);
  __builtin_prefetch(c + 128);
  __builtin_prefetch(c + 191); /* a connection is 16-aligned: its first 192 bytes may span four lines */
  __builtin_prefetch(&s->c->h);
  __builtin_prefetch(&s->c->closing);
}

/* n frames dropped on ch, on its line of the shared page. */
static void chan_dropped(m0__http *h, m0__chan *ch, uint64_t n) {
  if (!ch->dropped && h->chan_lines) ch->dropped = m0__page_channel_dropped(h->chan_lines, ch->name, ch->nlen);
  if (ch->dropped && n) atomic_fetch_add_explicit(ch->dropped, n, memory_order_relaxed);
}

/* A frame s lost, to tell it: the lowest and highest ids among them (a late
 * frame's is below what it was given since). */
static void sub_mark(m0__sub *s, uint64_t id) {
  s->lost++;
  if (id && (!s->lost_first || id < s->lost_first)) s->lost_first = id;
  if (id > s->lost_last) s->lost_last = id;
}

/* f did not fit in s's queue: counted by channel, and remembered to tell
 * (a stream), or the socket closed (a WebSocket: s may be gone after). */
static void sub_lost(m0__http *h, m0__sub *s, const m0__sframe *f) {
  m0__chan *ch = s->ch;
  chan_dropped(h, ch, 1);
  if (!sub_ids(s)) {
    char why[124];
    snprintf(why, sizeof why, "frames lost from id %llu on channel %.*s", (unsigned long long)f->id, (int)ch->nlen,
             ch->name);
    h->ws_ops->goodbye(s->c->ws, M0__STREAM_WS_LOST, why);
    return;
  }
  sub_mark(s, f->id);
}

/* A numbered frame at or below the highest id its channel wrote on this
 * loop reached it late: its publisher and another took their ids in one
 * order and their frames crossed on the way (two threads, two processes,
 * two pipes into one mailbox). Written now it would take every stream's
 * ids backwards (and the history's order, which a resume replays), so it
 * is dropped here and counted for each subscriber that did not have it; a
 * stream (or an m0.events WebSocket) is told (m0.gap, at once when it has
 * room), a plain WebSocket, which carries no ids and lost nothing by being
 * slow, stays open. */
static uint64_t chan_late(m0__http *h, m0__chan *ch, uint64_t id) {
  uint64_t n = 0;
  m0__sub *next;
  for (m0__sub *s = ch->subs; s; s = next) {
    next = s->next; /* a write may close s->c, which takes s off the list */
    if (s->c->closing || id <= s->resumed) continue;
    n++;
    if (!sub_ids(s)) continue;
    sub_mark(s, id);
    sub_tell(s, 0);
  }
  chan_dropped(h, ch, n);
  h->stats.frames_dropped += n;
  return n;
}

/* The history takes f (its reference) and lets the oldest go past its bounds. */
static void history_add(m0__http *h, m0__chan *ch, m0__sframe *f) {
  if (!ch->hist) {
    ch->hist = calloc(h->history_max, sizeof *ch->hist);
    if (!ch->hist) return;
    ch->hcap = h->history_max;
  }
  while (ch->hcount && (ch->hcount == ch->hcap || ch->hbytes + f->sse_len > h->history_bytes_max)) {
    m0__sframe *old = ch->hist[ch->hhead];
    ch->hhead = (ch->hhead + 1) % ch->hcap;
    ch->hcount--;
    ch->hbytes -= old->sse_len;
    if (old->id > ch->evicted) ch->evicted = old->id;
    m0__sframe_release(old);
  }
  if (f->sse_len > h->history_bytes_max) { /* alone it passes the bound: not kept */
    if (f->id > ch->evicted) ch->evicted = f->id;
    return;
  }
  f->refs++;
  ch->hist[(ch->hhead + ch->hcount) % ch->hcap] = f;
  ch->hcount++;
  ch->hbytes += f->sse_len;
}

uint64_t m0__http_publish(m0__http *h, const char *channel, size_t chlen, uint64_t id, const void *frame,
                          size_t flen) {
  bool keep = id && h->history_max && h->history_bytes_max;
  m0__chan *ch = chan_find(h, channel, chlen, keep);
  if (!ch || (!ch->subs && !keep)) return 0;
  if (id && id <= ch->last) return chan_late(h, ch, id);
  m0__sframe *f = malloc(sizeof *f + flen + 32);
  if (!f) return (uint64_t)ch->nsubs;
  memset(f, 0, sizeof *f);
  f->refs = 1; /* this call's */
  f->id = id;
  if (id) ch->last = id;
  int n = id ? snprintf(f->sse, 32, "id: %llu\n", (unsigned long long)id) : 0;
  memcpy(f->sse + n, frame, flen);
  memcpy(f->sse + n + flen, "\n\n", 2);
  f->sse_len = (uint32_t)((size_t)n + flen + 2);
  uint64_t dropped = 0;
  m0__sub *next;
  for (m0__sub *s = ch->subs; s; s = next) {
    next = s->next; /* a failed write closes s->c, which takes s off the list */
    if (next) sub_prefetch(next);
    if (!sub_push(h, s, f)) {
      dropped++;
      sub_lost(h, s, f);
    }
  }
  if (keep) history_add(h, ch, f);
  m0__sframe_release(f);
  h->stats.frames_dropped += dropped;
  return dropped;
}

/* ---- streams ----------------------------------------------------------- */

/* The held frame of s's channel with the lowest id above at, or NULL. */
static m0__sframe *sub_held_after(const m0__sub *s, uint64_t at) {
  const m0__chan *ch = s->ch;
  for (uint32_t i = 0; i < ch->hcount; i++) {
    m0__sframe *f = ch->hist[(ch->hhead + i) % ch->hcap];
    if (f->id > at) return f; /* a channel's ids only go up (chan_late) */
  }
  return NULL;
}

void m0__stream_replay(m0__conn *c) {
  m0__http *h = c->h;
  uint64_t last = 0, from = 0;
  bool any = false, gap = false;
  /* An id past every id given is not one of this host's: the client heard
   * it from an earlier run (ids begin at 1 again after a restart). Kept,
   * it would hold back every frame until the counter reached it. */
  uint64_t given = h->ids ? atomic_load_explicit(h->ids, memory_order_relaxed) : UINT64_MAX;
  for (m0__sub *s = c->subs; s; s = s->cnext) {
    if (!s->replay) continue;
    s->replay = false;
    any = true;
    last = s->after; /* one client, one Last-Event-ID for all its channels */
    if (s->after > given) s->after = s->resumed = 0;
    from = s->after;
    gap = gap || last > given || s->after < s->ch->evicted || s->after + 1 < h->history_from;
  }
  if (!any || c->closing) return;
  if (gap && c->ws && !h->ws_ops->events(c->ws)) { /* told in band it could not be: closed, as a slow one is */
    char why[96];
    snprintf(why, sizeof why, "frames may be missing after id %llu", (unsigned long long)last);
    h->ws_ops->goodbye(c->ws, M0__STREAM_WS_LOST, why);
    return;
  }
  if (gap) {
    char ev[96];
    int n = snprintf(ev, sizeof ev, "event: m0.gap\ndata: {\"after\":%llu}", (unsigned long long)last);
    event_push(c, ev, (size_t)n);
  }
  /* The held frames after last, every channel's merged in id order (ids
   * are global): a client that leaves halfway resumes from what it had. */
  for (uint64_t at = from; !c->closing;) {
    m0__sub *best = NULL;
    m0__sframe *f = NULL;
    for (m0__sub *s = c->subs; s; s = s->cnext) {
      m0__sframe *g = sub_held_after(s, at);
      if (g && (!f || g->id < f->id)) f = g, best = s;
    }
    if (!f) break;
    at = f->id;
    if (!sub_push(h, best, f)) {
      h->stats.frames_dropped++;
      sub_lost(h, best, f);
    }
  }
}

void m0__stream_hole(m0__http *h, uint64_t from, uint64_t until) {
  if (h->history_from < until + 1) h->history_from = until + 1;
  for (uint32_t b = 0; h->chans && b < CHAN_BUCKETS; b++)
    for (m0__chan *ch = h->chans[b]; ch; ch = ch->next)
      for (m0__sub *s = ch->subs; s; s = s->next) {
        /* A plain WebSocket carries no ids: nothing it could be told. */
        if (s->c->closing || !sub_ids(s) || s->after >= until) continue;
        uint64_t lo = (s->after > from ? s->after : from) + 1;
        s->lost += (uint32_t)(until - lo + 1);
        if (!s->lost_first || lo < s->lost_first) s->lost_first = lo;
        if (until > s->lost_last) s->lost_last = until;
      }
}

void m0__stream_caught_up(m0__conn *c) {
  for (m0__sub *s = c->subs; s && !c->closing; s = s->cnext) /* a write may close c, freeing its subs */
    if (s->lost && sub_ids(s) && !sub_tell(s, 0)) return;
}

void m0__stream_goodbye(m0__conn *c) {
  static const char bye[] = "event: m0.closing\ndata: {\"reason\":\"the server is going away\"}\nretry: 1000\n\n";
  m0__outq_append(m0__conn_target(c), bye, sizeof bye - 1);
  c->close_after = true;
  m0__conn_flush(c);
  if (c->closing) return;
  m0__stream_forget(c);
  /* A client that reads nothing leaves it queued behind what it did not
   * take: closed by the sweep within a second, or it would hold the drain
   * to its bound (as a stream over HTTP/2 waits for the PING's ACK). */
  uint64_t by = uv_now(c->h->uv) + M0__STREAM_GOODBYE_MS;
  if (m0__conn_queued(c) && c->deadline > by) c->deadline = by;
}

int m0__stream_begin(void *ctx, const char *channel, bool has_last, uint64_t last) {
  m0__conn *c = ctx;
  int rv = m0__stream_subscribe(c, channel, strlen(channel));
  if (rv < 0) return rv;
  m0__stream_enlist(c);
  sub_start(c->subs, has_last, last); /* the held frames once the view returned: m0__stream_replay */
  /* The head is in the scratch: write it first, so every frame follows it. */
  m0__conn_flush(c);
  return 0;
}

int m0__stream_write(void *ctx, const void *frame, size_t len) {
  m0__conn *c = ctx;
  char small[1024];
  char *ev = len + 2 <= sizeof small ? small : malloc(len + 2);
  if (!ev) return M0__ENOMEM;
  memcpy(ev, frame, len);
  memcpy(ev + len, "\n\n", 2);
  bool ok = stream_push(c, ev, len + 2, NULL);
  if (ev != small) free(ev);
  return ok ? 0 : M0__ETOOBIG;
}

void m0__stream_graph(m0__http *h, uint64_t now) {
  if (!h->ops->graph || now < h->graph_next_ms) return;
  m0__chan *ch = chan_find(h, M0__GRAPH_CHANNEL, sizeof M0__GRAPH_CHANNEL - 1, false);
  if (!ch || !ch->subs) return;
  h->graph_next_ms = now + 900; /* the sweep runs at least once a second: this is the next one at most */
  char *json = h->ops->graph(h, NULL);
  size_t n;
  char *ev = json ? m0__graph_event(json, &n) : NULL;
  if (ev) m0__http_publish(h, M0__GRAPH_CHANNEL, sizeof M0__GRAPH_CHANNEL - 1, 0, ev, n); /* unnumbered: no history */
  free(ev);
  free(json);
}

void m0__stream_beat(m0__http *h, uint64_t now) {
  static const char beat[] = ": beat\n\n";
  static const uint8_t ping[] = {0x80 | M0__WS_PING, 0};
  m0__conn *next;
  for (m0__conn *c = h->streams; c; c = next) {
    next = c->snext;
    if (now - c->last_write < h->heartbeat_ms) continue;
    bool ok = c->ws ? stream_push(c, ping, sizeof ping, NULL) : stream_push(c, beat, sizeof beat - 1, NULL);
    if (!ok) c->last_write = now;
  }
}

void m0__stream_close_all(m0__http *h) {
  m0__conn *next;
  for (m0__conn *c = h->streams; c; c = next) {
    next = c->snext;
    if (c->closing) continue;
    if (c->ws) {
      h->ws_ops->goodbye(c->ws, M0__WS_GOING_AWAY, "the server is going away");
      if (!c->closing) m0__stream_forget(c);
    } else m0__stream_goodbye(c);
  }
}

void m0__stream_fini(m0__http *h) {
  if (h->wsz) m0__ws_deflater_free(h->wsz); /* made by m0_ws_send too, with no channel ever made */
  h->wsz = NULL;
  if (!h->chans) return;
  for (int b = 0; b < CHAN_BUCKETS; b++) {
    while (h->chans[b]) {
      m0__chan *ch = h->chans[b];
      h->chans[b] = ch->next;
      for (uint32_t i = 0; i < ch->hcount; i++) m0__sframe_release(ch->hist[(ch->hhead + i) % ch->hcap]);
      free(ch->hist);
      free(ch);
    }
  }
  free(h->chans);
  h->chans = NULL;
  h->nchans = 0;
}
