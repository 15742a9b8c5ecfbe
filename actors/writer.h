/* Responses written in pieces (m0_respond_writer): the loop's side.
 *
 * Design notes
 * - A writer is shared by the application (any thread) and its loop, each
 *   holding a reference; the last to let go frees it. The application lets
 *   go at m0_writer_end, the loop when it takes the END that call sends (or
 *   when the loop itself ends): a piece still in the inbox always finds its
 *   writer.
 * - Pieces travel as CHUNK messages through the loop's direct inbox (they
 *   carry the writer's address, so no pipe may bring one: runtime/admit.h)
 *   and are framed on the loop (chunked, or as they are to an HTTP/1.0
 *   client, which the end then closes). Order is the inbox's: one thread
 *   writes at a time.
 * - Backpressure is counted, never guessed: queued = bytes sent to the loop
 *   and not yet taken + what the connection holds unwritten. A write past
 *   M0__WRITER_HIGH is refused (EAGAIN); m0_writer_wait sleeps until queued
 *   falls to M0__WRITER_LOW, woken by the loop as the socket takes bytes.
 * - The client going away (the connection closes) marks the writer gone
 *   under its lock, on the loop, and calls on_gone there once: after it no
 *   write is sent, so no piece can outlive the loop's inbox. on_gone is
 *   never called once m0_writer_end has begun, and m0_writer_end waits for
 *   one already running: after it returns, on_gone's arg is the
 *   application's to free.
 * - The connection waits (parses nothing more) from the head to the END,
 *   as for a deferred answer: pipelined requests keep their order.
 */
#ifndef M0_ACTORS_WRITER_H
#define M0_ACTORS_WRITER_H

#include "actors/loop_state.h"

#define M0__WRITER_HIGH (8u << 20)
#define M0__WRITER_LOW (64u << 10)

/* The loop's ops (actors/loop_http.c, http/conn.h): a writer's head is
 * written and the writer returned; its connection closed before its end;
 * its socket took bytes. */
m0_writer *m0__writer_begin(m0__http *h, m0__conn *c, m0_response *res, int status, const char *content_type,
                            void (*on_gone)(void *arg), void *arg);
void m0__writer_gone(m0__http *h, m0__conn *c);
void m0__writer_progress(m0__http *h, m0__conn *c);
/* A CHUNK: a piece, or the end, of a writer's response. */
void m0__writer_on_chunk(m0__loop *l, const m0__msg *m);
/* A writer the loop writes itself (a streamed reply: actors/streamed.c),
 * all on the loop: a piece framed into the connection; on_room (its arg
 * the begin's) called each time the socket took bytes; the bytes its
 * connection holds unwritten; and the end (abort: the connection closes
 * without the last chunk), after which w is freed. */
void m0__writer_put(m0__loop *l, m0_writer *w, const void *p, size_t n);
void m0__writer_on_room(m0_writer *w, void (*on_room)(void *arg));
size_t m0__writer_held(m0_writer *w);
void m0__writer_close(m0__loop *l, m0_writer *w, bool abort);
/* After the loop's thread is joined: the loop lets go of every writer left. */
void m0__writers_free(m0__loop *l);

#endif
