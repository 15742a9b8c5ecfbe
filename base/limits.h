/* What a published frame and its channel may be: the limits http/'s
 * streams check (http/response.h: m0__channel_ok, m0__frame_ok) and the
 * runtime sizes its mailboxes by (runtime/bounds.c: a loop takes a FRAME of
 * the largest). Here, below both, so the runtime includes nothing of http/. */
#ifndef M0_BASE_LIMITS_H
#define M0_BASE_LIMITS_H

/* The longest channel name, in bytes. */
#define M0__CHANNEL_MAX 64
/* What a frame may hold: event lines without the id, at most M0__FRAME_MAX. */
#define M0__FRAME_MAX (64u * 1024u)

#endif
