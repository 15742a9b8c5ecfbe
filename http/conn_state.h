/* One connection's state, private to the files that make up the per-loop
 * server: the state machine (http/conn.c) and streams (http/stream.c).
 * Nothing outside http/ sees inside an m0__conn (actors hold only the
 * pointer, http/conn.h). Everything here runs on the connection's loop. */
#ifndef M0_HTTP_CONN_STATE_H
#define M0_HTTP_CONN_STATE_H

#include "http/server.h"
#include "http/io.h"
#include "http/proxies.h"

typedef enum conn_phase {
  PHASE_FRESH,  /* accepted, nothing read */
  PHASE_IDLE,   /* between requests */
  PHASE_HEAD,   /* inside a request's line and headers */
  PHASE_BODY,   /* inside a request's body */
  PHASE_LINGER, /* answered an error; discarding input until EOF */
  PHASE_WAIT,   /* a request is with the pool */
} conn_phase;

/* A poll on a duplicate of a connection's socket, for sendfile (http/conn.c). */
typedef struct m0__wpoll {
  uv_poll_t poll; /* first */
  int fd;
} m0__wpoll;

struct m0__conn {
  m0__io_slot io; /* first: the transport's state (http/io.h); libuv's handle address is the connection's */
  m0__http *h;
  const struct m0__io_ops *io_ops; /* its transport: h->io, or libuv's for one on the plain listener */
  bool plain; /* came on the plain listener beside HTTPS: only the metrics path is served (http/plain.c) */
  m0__conn *next, *prev;
  m0__parser p;
  char *in; /* only what a partial request needs; NULL most of the time */
  size_t in_len, in_cap, parse_off, req_start;
  m0__outq q[2]; /* q[qi] is being written; q[1-qi] collects meanwhile */
  int qi;
  size_t qskip;          /* of q[qi]: bytes written so far */
  struct m0__wpoll *wp;  /* a file piece waiting for the socket to take more, or NULL */
  m0_writer *writer;     /* its response is written in pieces (actors/writer.h), or NULL */
  uint64_t deadline;
  conn_phase phase;
  uint32_t nreq;
  int route;      /* the request's route (its latency row: base/latency.h); app->nroutes: none */
  uint64_t t0_ns; /* when it was parsed */
  bool writing, close_after, closing, paused, linger, continued;
  bool waiting;           /* a request is with the pool: parse nothing more */
  bool close_on_complete; /* that request's answer is the last */
  bool zombie;            /* closed while waiting: freed by m0__http_complete */
  bool stream;            /* a stream or a WebSocket (in h->streams): nothing more is parsed as HTTP */
  bool more_in;           /* bytes of another request follow the one being answered, in the same read */
  bool eof;               /* the client's end came while answers were on their way: close once written */
  uint64_t last_write;    /* its last frame or beat, for the heartbeat */
  m0__conn *snext, *sprev; /* in h->streams */
  struct m0__sub *subs;   /* its channels (http/stream.h) */
  struct m0_ws *ws;       /* a WebSocket (http/websocket.h), or NULL */
  struct m0__h2 *h2;      /* an HTTP/2 session (http/h2.h), or NULL */
  bool h2_proxy;          /* an HTTP/2 stream's stand-in while its request is away (http/h2.c): no socket */
  bool h2_sse;            /* an HTTP/2 SSE stream's stand-in (http/h2_stream.c): no socket, flushed there */
  uint16_t peer_port;
  char peer[M0__ADDR_TEXT]; /* the socket's other end, as text: set once, at the adopt */
};

/* Where a response goes now: the shared scratch when nothing is in flight
 * (written at the end of this callback), else behind the write in flight. */
static inline m0__outq *m0__conn_target(m0__conn *c) { return c->writing ? &c->q[1 - c->qi] : &c->h->scratch; }

/* Output queued behind the socket: non-zero only while a write is in flight. */
static inline size_t m0__conn_queued(const m0__conn *c) {
  return m0__outq_bytes(&c->q[0]) + m0__outq_bytes(&c->q[1]);
}

/* The connection's request just parsed (its spans into buf): answered into
 * the target queue, or sent away (http/dispatch.c). */
void m0__conn_dispatch(m0__conn *c, const char *buf);
/* The response's table for a server with these ops (http/dispatch.c). */
const m0__response_ops *m0__conn_res_ops(const m0__http_ops *ops);
/* The request's answer is begun: its latency and status class (status < 0:
 * counted already, a writer's at its head), by its route. */
void m0__conn_latency(m0__conn *c, int status);
/* A waiting connection's answer came: whether it can still take it (a
 * zombie's memory is released here: nobody else holds it now). */
bool m0__conn_unwait(m0__conn *c, int status);
/* The connection's answer is in its target queue (ok), or could not be
 * (closed): it goes on with what came while it waited. */
void m0__conn_answered(m0__conn *c, bool ok);

/* Closes the connection (its memory goes in the close callback, or, when
 * its request is away, with the answer). */
void m0__conn_close(m0__conn *c);
/* The last response is written: close now, or linger after an error. */
void m0__conn_finish(m0__conn *c);
/* A paused connection's client caught up: what it sent meanwhile is parsed,
 * and reading goes on. */
void m0__conn_unpause(m0__conn *c);
/* Closes the poll a file piece waits on (http/write.c), if any. */
void m0__conn_write_close(m0__conn *c);
/* Turns on TCP keep-alive probes (60 s idle) on the connection's socket:
 * a stream's peer that vanished is found. */
void m0__conn_keepalive(m0__conn *c);

/* Writes what is in the scratch queue now (see http/conn.c). Call it before
 * the callback that filled the scratch returns: the next connection reuses it. */
void m0__conn_flush(m0__conn *c);
/* Writes q's bytes to c after what is queued already (a WebSocket's
 * message, sent from any callback of the loop), and empties q. */
void m0__conn_send(m0__conn *c, m0__outq *q);

#endif
