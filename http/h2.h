/* HTTP/2 on a connection of the per-loop server (http/h2.c): cleartext
 * prior knowledge, or ALPN h2 over TLS (both start with the preface).
 * Thread safety: a session belongs to its connection's loop. */
#ifndef M0_HTTP_H2_H
#define M0_HTTP_H2_H

#include <stdbool.h>
#include <stddef.h>

#include "http/server.h"

typedef struct m0__h2 m0__h2;

/* The client connection preface, RFC 9113 3.4. */
#define M0__H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define M0__H2_PREFACE_LEN 24

/* A fresh connection's bytes under --http2 (those it kept, then buf):
 * the preface begun (kept until the rest comes: a client may send it byte
 * by byte) or whole (c->h2 made, the bytes read, the answers flushed).
 * false: not the preface, nothing taken (HTTP/1.1's). true may have
 * closed the connection (no memory). */
bool m0__h2_preface(m0__conn *c, char *buf, size_t n);
/* A fresh connection's first bytes under --http2: HTTP/2 or not (false:
 * nothing taken, HTTP/1.1's). Cleartext: the preface (m0__h2_preface).
 * Over TLS what ALPN chose, whatever the bytes (RFC 9113 3.3): h2 is
 * HTTP/2 (not the preface: GOAWAY PROTOCOL_ERROR and the close),
 * http/1.1 or none HTTP/1.1 (the preface: 505, as without --http2). */
bool m0__h2_begin(m0__conn *c, char *buf, size_t n);
/* The connection's bytes: frames read, streams answered, and what the
 * session has to say appended to the connection's target queue (the
 * caller flushes). When the session is over, the connection closes after
 * its last bytes. */
void m0__h2_read(m0__conn *c, const char *buf, size_t n);
/* The drain (http/h2_drain.c): GOAWAY 2^31-1 and a PING, then at its ACK
 * GOAWAY with the last stream id; the connection closes once its streams
 * are sent (it reads on: their WINDOW_UPDATEs). Again: what is left goes. */
void m0__h2_drain(m0__conn *c);
/* What the session has to send, written (the end of a write, http/write.c;
 * the sweep's turn; after a read or a late answer): streams held back while
 * the client did not read (its queue past the mark) go on. true when bytes
 * went (a write is in flight again) or the connection closed. */
bool m0__h2_sweep(m0__conn *c);
/* The sweep's turn (now: the loop's ms): what the session has to send,
 * and an idle connection past its deadline told GOAWAY, as at the drain,
 * and closed once that is written (or a second later). true: nothing more
 * for the sweep to do with it. */
bool m0__h2_tick(m0__conn *c, uint64_t now);
void m0__h2_free(m0__h2 *s);
/* An SSE stream's stand-in was given bytes (m0__conn_flush, c->h2_sse),
 * or a writer's (c->h2_proxy with c->writer): its stream's DATA goes on a
 * turn later (http/h2_stream.c). */
void m0__h2_sse_flush(m0__conn *c);
/* A writer begins on a stand-in (actors/writer.c; its head, alone, in its
 * target queue): its stream answers HEADERS, then each piece as DATA. 0,
 * M0__ECLOSED (the stream closed meanwhile) or M0__ENOMEM. */
int m0__h2_pieces_begin(m0__conn *c);
/* The writer ended (m0__http_resume; c->close_on_complete: cut): the
 * stream ends once its pieces are sent (a cut one is reset). false: c is
 * no writer's stand-in. */
bool m0__h2_pieces_end(m0__conn *c);
/* The answers of a stream whose request went away (the handler threads,
 * m0_defer), to its stand-in (c->h2_proxy), as m0__http_complete's and
 * m0__http_answer's (http/conn.h): the stand-in's memory goes here. The
 * stream may have closed meanwhile (then M0__ECLOSED, nothing sent). n 0
 * and fd < 0: no answer (the stream is reset). */
struct m0__answer;
void m0__h2_complete(m0__conn *px, const void *resp, size_t n, int fd, uint64_t off, uint64_t flen);
long m0__h2_answer(m0__conn *px, const struct m0__answer *a, int *status);

#endif
