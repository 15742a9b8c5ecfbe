/* Replies that stream (m0_reply_writer), the loop's side: an instance's
 * STREAM messages (service/wire.h) written to the client as a response in
 * pieces, with the instance's room granted back (CREDIT) as the client
 * reads.
 *
 * Design notes
 * - The request keeps its entry in the asks table (actors/asks_state.h)
 *   from its REQUEST to the stream's END, so an OPEN, DATA or END is
 *   checked as a REPLY is: an id this loop waits on, from the instance (and
 *   generation) it went to. Anything else (an id never opened, one ended,
 *   a second OPEN) is dropped and counted (the actor's `unknown`, and a
 *   refusal named on stderr once). The instance dying mid-stream is seen
 *   as for any request (asks_left): counted `died`, and as the head is out
 *   the connection is closed without the last chunk (a client sees the
 *   body cut short, never a 502 after a 200).
 * - The route's timeout bounds the wait for the OPEN only. After it there
 *   is no idle bound: a stream (server-sent events) may be quiet for hours
 *   by design; it ends with its END or ABORT, the instance's death, or the
 *   client leaving. A client that stops reading is the connection's own
 *   bound (a stuck writer is closed by the connection sweep).
 * - The response itself is a loop writer (actors/writer.c) the loop writes
 *   on its own thread: the framing (chunked, or until the close for
 *   HTTP/1.0) is written once, there.
 * - Backpressure is counted: the instance may have M0__STREAM_WINDOW bytes
 *   unanswered; the loop grants back what it took (CREDIT MORE) only while
 *   the connection holds at most M0__WRITER_LOW unwritten. So one stream
 *   holds at most the window in messages plus the low mark plus one window
 *   in the connection, whatever the client does; an instance that sends
 *   past its room is cut (counted bad_reply).
 * - The client leaving (the writer's on_gone, on the loop), or the host
 *   cutting the stream (a bad piece, a late OPEN, a client that stopped
 *   reading: the connection sweep, a relay leg that could not pass a piece
 *   on) sends the instance GONE; its writes then fail EPIPE and its END
 *   lets the entry go. One that never ends is let go 10 s later (counted
 *   timeout). A cut stream ends without its last chunk: never a hole.
 */
#ifndef M0_ACTORS_STREAMED_H
#define M0_ACTORS_STREAMED_H

#include <stdbool.h>

#include "actors/loop_state.h"

typedef struct m0__streamed m0__streamed;

/* A STREAM message in the loop's inbox. */
void m0__streamed_on(m0__loop *l, const m0__msg *m);
/* Its end, m0__streamed_close, is declared in actors/asks_state.h, where
 * the requests table that calls it is. */

#endif
