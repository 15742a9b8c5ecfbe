/* Frames in id order on one loop (http/order.h).
 *
 * Design notes
 * - Every publisher takes its id from the one counter, then sends its frame
 *   to every loop, each its own way in (the producer's and a service's
 *   inproc pipes, m0pub's ipc pipe to the outside mailbox, another worker's):
 *   frames taken in one order reach a loop in another. Every numbered frame
 *   goes to every loop whatever its channel, so a loop knows the next id it
 *   should see: `next`, one above the last it wrote.
 * - A frame whose id is `next` (or lower: late already, left to its
 *   channel's check, http/stream.c chan_late) is written at once, with no
 *   copy: one publisher at a time costs nothing here. One above it is held,
 *   sorted by id, until the ids between have come, or for
 *   M0__ORDER_WAIT_MS (an id taken and never published, a refused frame,
 *   a publisher that died: the hole is given up, and a frame of it that
 *   comes later is late). A full hold writes its lowest first.
 * - The loop releases at the end of each pass (after its mailboxes were
 *   read) and at a timer set for the first frame's deadline; at the drain,
 *   everything before the goodbye.
 */
#include "http/order.h"
#include "base/errors.h"
#include "http/stream.h"

#include <stdlib.h>
#include <string.h>

#define ORDER_MAX 4096 /* frames held at once; beyond, the lowest is written */

typedef struct order_frame {
  uint64_t id;
  uint64_t due;  /* uv_now when its wait is over */
  char *bytes;   /* the channel's name, then the frame */
  uint32_t flen;
  uint8_t chlen;
} order_frame;

struct m0__order {
  uint64_t next; /* the id this loop should see next; 0 before its first */
  uint32_t n;
  order_frame f[ORDER_MAX]; /* sorted by id, the lowest first */
};

static uint64_t order_write(m0__order *o, m0__http *h, const order_frame *f) {
  if (f->id >= o->next) o->next = f->id + 1;
  return m0__http_publish(h, f->bytes, f->chlen, f->id, f->bytes + f->chlen, f->flen);
}

/* Writes the first k held frames and closes up. */
static uint64_t order_pop(m0__order *o, m0__http *h, uint32_t k) {
  uint64_t dropped = 0;
  for (uint32_t i = 0; i < k; i++) {
    dropped += order_write(o, h, &o->f[i]);
    free(o->f[i].bytes);
  }
  memmove(o->f, o->f + k, (o->n - k) * sizeof *o->f);
  o->n -= k;
  return dropped;
}

uint64_t m0__order_frame(m0__order **op, m0__http *h, const char *channel, size_t chlen, uint64_t id,
                         const void *frame, size_t flen) {
  m0__order *o = *op;
  if (!o && !(o = *op = calloc(1, sizeof *o))) return m0__http_publish(h, channel, chlen, id, frame, flen);
  if (!o->next || id <= o->next) {
    if (id >= o->next) o->next = id + 1;
    uint64_t dropped = m0__http_publish(h, channel, chlen, id, frame, flen);
    return dropped + (o->n ? m0__order_release(o, h, false) : 0);
  }
  uint64_t dropped = o->n == ORDER_MAX ? order_pop(o, h, 1) : 0;
  char *bytes = malloc(chlen + flen + 1);
  if (!bytes) return dropped + m0__http_publish(h, channel, chlen, id, frame, flen);
  memcpy(bytes, channel, chlen);
  memcpy(bytes + chlen, frame, flen);
  uint32_t at = o->n; /* mostly the end: frames come nearly in order */
  while (at && o->f[at - 1].id > id) at--;
  memmove(o->f + at + 1, o->f + at, (o->n - at) * sizeof *o->f);
  o->f[at] = (order_frame){id, uv_now(h->uv) + M0__ORDER_WAIT_MS, bytes, (uint32_t)flen, (uint8_t)chlen};
  o->n++;
  return dropped + m0__order_release(o, h, false);
}

uint64_t m0__order_release(m0__order *o, m0__http *h, bool all) {
  if (!o || !o->n) return 0;
  uint64_t now = uv_now(h->uv), next = o->next;
  uint32_t k = 0;
  /* The run that is due: the next id, or the first frame waited enough;
   * each written one makes the one after it next. The wait is the first's:
   * those behind it came later and their holes are the same or above. */
  while (k < o->n && (all || o->f[k].id <= next || o->f[k].due <= now)) {
    if (o->f[k].id >= next) next = o->f[k].id + 1;
    k++;
  }
  return k ? order_pop(o, h, k) : 0;
}

int64_t m0__order_due(const m0__order *o, const m0__http *h) {
  if (!o || !o->n) return M0__ENOTFOUND;
  uint64_t now = uv_now(h->uv);
  return o->f[0].due > now ? (int64_t)(o->f[0].due - now) : 0;
}

void m0__order_free(m0__order *o) {
  if (!o) return;
  for (uint32_t i = 0; i < o->n; i++) free(o->f[i].bytes);
  free(o);
}
