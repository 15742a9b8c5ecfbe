/* Replies that stream (m0_reply_writer): an instance's side, wherever it
 * runs, and the one m0_writer type both kinds of writer share.
 *
 * Design notes
 * - m0_writer is a table of operations first: a view's writer on the loop
 *   (actors/writer.c) and an instance's reply writer (here) answer the same
 *   m0_writer_write / wait / end / abort, which only pass the call on.
 * - An instance's writer sends STREAM messages (service/wire.h) to the loop
 *   that asked: OPEN (status and headers) at m0_reply_writer, a DATA per
 *   write, END or ABORT at the end. They go the way its REPLY goes (a thread
 *   instance's into the loop's inbox; a spawned or outside one's over its
 *   link, through its actor's socket and, under --workers, the relay).
 * - Backpressure is counted: the writer may have M0__STREAM_WINDOW bytes
 *   sent and not granted back; the loop grants them back (CREDIT MORE) as
 *   its connection's socket takes them, so what the host holds for one
 *   stream is bounded by the window whatever the client reads. A write past
 *   the window is refused (EAGAIN) and m0_writer_wait sleeps for a MORE.
 * - CREDIT is taken by the instance's own serving thread (its inbox, or its
 *   link), so a writer is written from another thread: on the serving
 *   thread itself m0_writer_wait cannot be woken and does not wait.
 * - One lock per instance (the streams') guards every writer's counts and
 *   the send: once the instance ends (m0__streams_close) nothing more is
 *   sent and every writer is gone; the streams are freed with the last of
 *   their writers.
 */
#ifndef M0_SERVICE_STREAM_H
#define M0_SERVICE_STREAM_H

#include <nng/nng.h>
#include <stddef.h>
#include <stdint.h>

#include "m0/m0.h"

/* Each 0, or non-zero with errno set (the public calls say -1). */
typedef struct m0__writer_ops {
  int (*write)(m0_writer *w, const void *p, size_t n);
  int (*wait)(m0_writer *w, unsigned timeout_ms);
  int (*finish)(m0_writer *w, int how); /* how: 1 the end, 2 an abort; w is freed */
} m0__writer_ops;

struct m0_writer {
  const m0__writer_ops *ops; /* first in every writer */
};

/* Sends a STREAM (m0__msg_new, its payload written) from the instance
 * (`from`, as the request named it) to `to`, the loop that asked: 0 (m is
 * sent) or < 0 (m still the caller's). */
typedef int (*m0__streams_send)(void *ctx, uint32_t from, uint32_t to, nng_msg *m);

typedef struct m0__streams m0__streams;

/* An instance's streams, served from the calling thread (the one that takes
 * its CREDITs). NULL when out of memory. */
m0__streams *m0__streams_new(m0__streams_send send, void *ctx);
/* The instance ends: nothing more is sent, every writer is gone (EPIPE). */
void m0__streams_close(m0__streams *sx);
/* A CREDIT from loop `from`: a writer's room, or its client gone. An
 * unknown id (a stream ended meanwhile) is nothing. M0__EBADMSG when it
 * does not decode. */
int m0__streams_credit(m0__streams *sx, uint32_t from, const uint8_t *payload, size_t len);
/* m0_reply_writer's work: the OPEN of request id (asked by `to`) sent with
 * status and headers (checked, a Content-Type among them), the writer
 * returned; NULL when it cannot be sent. */
m0_writer *m0__streams_open(m0__streams *sx, uint32_t from, uint32_t to, uint64_t id, int status,
                            const m0_header *hdrs, size_t n);

#endif
