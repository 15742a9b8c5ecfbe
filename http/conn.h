/* The per-loop HTTP/1.1 server, as the loop actor (actors/loop.c) drives it:
 * connections are adopted, swept, drained and, for a request sent to the
 * pool, completed; frames from the bus are published to its streams.
 * Thread safety: an m0__http and its connections belong to one loop; every
 * function here is called on that loop's thread.
 * Its state and seams are in http/server.h; the design notes in
 * http/conn.c (connections) and http/stream.c (server-sent-event streams). */
#ifndef M0_HTTP_CONN_H
#define M0_HTTP_CONN_H

#include "http/server.h"
#include "http/stream.h" /* m0__http_publish, the frames to its streams */

/* Sets up h on uv with cfg (copied) and ops (kept: a const table, or NULL
 * for none); owner is the ops' (m0__http.owner). 0 or M0__ENOMEM. */
int m0__http_init(m0__http *h, uv_loop_t *uv, const m0__http_config *cfg, const m0__http_ops *ops, void *owner);
void m0__http_fini(m0__http *h);
/* Takes an accepted socket and starts reading it: plain, one from the
 * plain listener beside HTTPS (libuv's transport, no TLS; see
 * m0__http_plain_answer). Returns 0, or M0__ENOMEM / M0__ETRANSPORT after
 * which the descriptor is closed. */
int m0__http_adopt(m0__http *h, int fd, bool plain);
/* The answer to a deferred request: whole response bytes (copied). The
 * connection may have closed meanwhile; its memory waited for this call. */
/* fd >= 0: then flen bytes of that file from off (m0_respond_file on a pool
 * thread), whose descriptor is closed here whatever becomes of it. */
void m0__http_complete(m0__http *h, m0__conn *c, const void *resp, size_t n, int fd, uint64_t off, uint64_t flen);
/* The answer to a request that waits (an actor's reply, a deferred view, or
 * the host's own 502/503/504 for it), written as a response here, on the
 * loop: its head and close from the request, the rest from the answer. */
typedef struct m0__answer {
  int version_minor;
  bool head, close;
  int status;
  const m0_header *hdrs;
  size_t nhdrs;
  const void *body;
  size_t blen;
  const char *extra; /* header lines the loop added before the request left (before_request) */
  size_t extra_len;
} m0__answer;
/* The answer written into res (made by m0__response_init): its extra lines,
 * headers and body; 502 when its headers cannot be written as they are.
 * HTTP/1.1's and an HTTP/2 stream's late answers alike. */
void m0__answer_write(m0_response *res, const m0__answer *a);
/* A waiting connection's answer is in its queue (a writer's END): it goes
 * on with what came meanwhile. */
void m0__http_resume(m0__http *h, m0__conn *c);
/* Closes a connection whose response cannot be finished. */
void m0__http_abort(m0__http *h, m0__conn *c);
/* Returns the body bytes written (0 for HEAD) and sets *status to the
 * status written (502 when the answer's headers cannot be written as they
 * are); M0__ECLOSED when the connection had closed meanwhile (its memory
 * is released now). */
long m0__http_answer(m0__http *h, m0__conn *c, const m0__answer *a, int *status);
/* Closes connections whose deadline passed (408 where a request was begun). */
void m0__http_sweep(m0__http *h);
/* Starts the drain: idle keep-alive connections close now, at a reload too
 * (handover: the next generation serves, host/reload.h), unless their next
 * request already waits in the kernel or they were answered within the last
 * 100 ms (a client sending back to back); a connection inside a request
 * closes once that response is written. Those kept, and those accepted but
 * not read yet, have drain_fresh_ms to send a request: it is answered with
 * Connection: close. handover also lets requests pipelined behind one being
 * answered be answered too. */
void m0__http_drain(m0__http *h, bool handover);

#endif
