/* Frames in id order on one loop: the numbered frames its mailboxes bring
 * are held until the ids below them have come (or could not), then written
 * in order (http/order.c). */
#ifndef M0_HTTP_ORDER_H
#define M0_HTTP_ORDER_H

#include <stdint.h>

#include "http/server.h"

/* How long a frame waits for the ids below it that were taken before it
 * and are still on their way (another publisher's path into the loop). */
#define M0__ORDER_WAIT_MS 250

typedef struct m0__order m0__order;

/* A numbered frame (id > 0) from the loop's mailbox: written at once when
 * it is the next id (or no lower one can still come), else held (copied)
 * until m0__order_release writes it. Returns how many subscribers dropped
 * frames written now. *o is made at the first hold (NULL: written at once).
 * Thread safety: the loop's thread. */
uint64_t m0__order_frame(m0__order **o, m0__http *h, const char *channel, size_t chlen, uint64_t id,
                         const void *frame, size_t flen);
/* Writes the held frames whose turn came: the next id, or one that waited
 * M0__ORDER_WAIT_MS (all of them when `all`: the drain's goodbye comes
 * next). Returns how many subscribers dropped frames written now. */
uint64_t m0__order_release(m0__order *o, m0__http *h, bool all);
/* Milliseconds until the first held frame's wait is over, or M0__ENOTFOUND
 * when none is held: the loop wakes then to release it. */
int64_t m0__order_due(const m0__order *o, const m0__http *h);
void m0__order_free(m0__order *o);

#endif
