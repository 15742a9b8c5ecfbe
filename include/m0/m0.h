/* m0 — an HTTP application host whose internals are actors exchanging nng
 * messages. This is the whole public API an application needs:
 *
 *   static const m0_route routes[] = {
 *     { "GET", "/x/now", now_view, M0_ON_LOOP },
 *     { "GET", "/notes/{id}", note_view, 0 },
 *   };
 *   static const m0_app app = { .name = "mine", .make = make, .routes = routes,
 *                               .nroutes = 2, .max_workers = 0 };
 *   int main(int argc, char **argv) { return m0_serve(&app, NULL, argc, argv); }
 *
 * Thread safety: every function taking an m0_request or m0_response must be
 * called on the thread that received it (the loop, or the pool thread that
 * runs the view), before the view returns. m0_publish and m0_next_id are safe
 * from any thread of the process.
 *
 * Failure, one convention for the whole API (each function below says only
 * when it fails, and what happened anyway):
 * - a function that acts returns int: 0, or -1 when it was refused, and
 *   then nothing was done unless its comment says so (a 500 answered, a
 *   body freed); the few that reach the system (m0_respond_file, the
 *   m0_writer_ functions) also set errno;
 * - a question returns bool: false is "no", "absent" or "refused"
 *   (m0_request_query, m0_publish, m0_config_get);
 * - a function that writes into a buffer returns the length written, or -1
 *   (m0_decode, m0_cookie_format); one that counts returns the count;
 * - a function that makes something returns it, or NULL (with the reason in
 *   err when it takes one);
 * - the host's edges return a process exit code, 0, 1, 2, 73 or 78
 *   (m0_serve, m0_host_start's *code, m0_host_stop, m0_actor_run;
 *   docs/reference.md).
 */
#ifndef M0_M0_H
#define M0_M0_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define M0_VERSION_STRING "0.1.0"

/* A byte string that is not NUL-terminated. Valid until the view returns. */
typedef struct m0_str {
  const char *p;
  size_t n;
} m0_str;

typedef struct m0_header {
  m0_str name;
  m0_str value;
} m0_header;

typedef struct m0_publisher m0_publisher;
typedef struct m0_config m0_config;
typedef struct m0_host m0_host; /* a running host (m0_host_start) */

/* What every make() receives. */
typedef struct m0_ctx {
  int worker;        /* 0-based loop (threads) or worker (prefork) index */
  int workers;       /* how many loops or workers serve */
  int thread;        /* -1 for a loop's own instance, 0.. for a pool thread */
  bool threaded;     /* loops share one process */
  int capacity;      /* connections per loop */
  uint64_t *page;    /* the application's shared words, or NULL */
  size_t page_slots; /* how many words page holds */
  const m0_config *config; /* the resolved configuration (m0_config_get) */
  m0_publisher *publisher;
} m0_ctx;

/* A parsed request. Every pointer is valid until the view returns. */
typedef struct m0_request {
  m0_str method;
  m0_str target;  /* as sent: path and query */
  m0_str path;    /* target before '?' */
  m0_str query;   /* after '?', without it; empty when none */
  int version_minor; /* HTTP/1.x */
  const m0_header *headers;
  size_t nheaders;
  m0_str body;       /* whole body, de-chunked */
  const m0_str *params; /* path parameters of the matched route, in order */
  size_t nparams;
  uint64_t trace_hi, trace_lo; /* from a traceparent header, 0 when none */
  /* The socket's other end ("192.0.2.1", "2001:db8::1"; "" when not known:
   * a request an actor instance receives) and its port. */
  const char *peer;
  int peer_port;
  /* The client as the host believes it: peer, unless peer is one of the
   * --trusted-proxies; then the address the trusted chain names in
   * Forwarded (for=) or X-Forwarded-For, read right to left up to the first
   * address that is not a trusted proxy. Never NULL on a view's request. */
  const char *client;
} m0_request;

/* The value of a header (case-insensitive name), or {NULL,0}. */
m0_str m0_request_header(const m0_request *req, const char *name);
/* The raw value of query parameter `key` (first occurrence); false if absent. */
bool m0_request_query(const m0_request *req, const char *key, m0_str *out);
/* A query parameter as an integer in [min,max]; false if absent or not one. */
bool m0_request_query_int(const m0_request *req, const char *key, long min, long max, long *out);

/* ---- percent-decoding, query parameters, the path, cookies ------------
 * Nothing here allocates: a decoded string is written into the caller's
 * buffer (no NUL is written), a raw one is an m0_str into the request.
 * Decoded bytes never hold a NUL (%00 is refused: C code that later treats
 * the result as a string would be cut short by it) and are never longer
 * than the raw ones, so a buffer of in.n bytes always suffices.
 * docs/http.md has the rules and examples. */
enum {
  M0_DECODE_FORM = 1u, /* '+' is a space: query strings and form bodies (x-www-form-urlencoded) */
  M0_DECODE_PATH = 2u, /* %2F is refused: a decoded '/' would be a segment boundary the router never saw */
};
/* Percent-decodes `in` into out (cap bytes). Returns the decoded length, or
 * -1: a '%' without two hex digits after it, a %00 or a raw NUL, a %2F
 * under M0_DECODE_PATH, or more than cap bytes (out's content is then
 * unspecified). */
long m0_decode(m0_str in, char *out, size_t cap, unsigned flags);

/* Walks a query string (or an x-www-form-urlencoded body) pair by pair,
 * repeated keys included, in order:
 *   m0_query_iter it; m0_str k, v;
 *   m0_query_init(&it, req->query);
 *   while (m0_query_next(&it, &k, &v)) ...
 * Pairs are split on '&', key from value on the first '='; empty pairs
 * ("a&&b", a trailing '&') are skipped; "k" and "k=" both give an empty
 * value, "=v" an empty key. Key and value are raw (m0_decode with
 * M0_DECODE_FORM decodes them) and point into the string walked. */
typedef struct m0_query_iter {
  const char *p, *end;
} m0_query_iter;
void m0_query_init(m0_query_iter *it, m0_str query);
bool m0_query_next(m0_query_iter *it, m0_str *key, m0_str *value);
/* The value of the first parameter whose decoded key is `key`, decoded
 * (M0_DECODE_FORM) into out (cap bytes), its length in *len. false when
 * there is none, or when that value does not decode into cap (a bad escape,
 * %00, too long): m0_request_query tells absent from malformed. */
bool m0_request_query_decoded(const m0_request *req, const char *key, char *out, size_t cap, size_t *len);
/* req->path decoded (M0_DECODE_PATH: '+' stays '+') into out, its length in
 * *len. false for a bad escape, %00, %2F, a dot-segment ("." or "..", their
 * %2E spellings too) or more than cap bytes: a decoded path that is returned
 * has as many '/' as the raw one and no "." or ".." segment, so it can be
 * joined to a directory, whatever the router was given. */
bool m0_request_path_decoded(const m0_request *req, char *out, size_t cap, size_t *len);

/* The value of cookie `name` (case-sensitive; the first one, over every
 * Cookie header), without its DQUOTEs, as sent (cookie values are opaque:
 * one the application percent-encoded is for m0_decode). false when absent
 * or name is not an RFC 6265 token. */
bool m0_request_cookie(const m0_request *req, const char *name, m0_str *out);

/* A cookie's attributes (RFC 6265 section 4.1). Zeroed = none of them. */
typedef enum m0_same_site {
  M0_SAME_SITE_UNSET = 0, /* no SameSite attribute (browsers then mostly act as Lax) */
  M0_SAME_SITE_NONE,      /* sent cross-site too: needs secure */
  M0_SAME_SITE_LAX,
  M0_SAME_SITE_STRICT,
} m0_same_site;
typedef struct m0_cookie_attrs {
  const char *path;   /* NULL = none; else 1+ bytes, no control byte or ';' */
  const char *domain; /* NULL = none; else letters, digits, '-' and '.' */
  bool has_max_age;   /* false = no Max-Age (a session cookie, unless expires) */
  long max_age;       /* seconds, 0 deletes the cookie; negative is refused */
  int64_t expires;    /* Unix seconds written as an IMF-fixdate; 0 = none */
  bool secure;
  bool http_only;
  m0_same_site same_site;
} m0_cookie_attrs;
/* Formats a Set-Cookie value ("name=value; Path=/; ...", NUL-terminated)
 * into out. Returns its length, or -1: name not a token, value not
 * cookie-octets (optionally inside DQUOTEs), a bad path or domain, a
 * negative max_age, expires not in 1..9999-12-31, SameSite=None without
 * secure, a __Secure- name without secure or a __Host- one without secure,
 * path "/" and no domain, or cap too small. For m0_reply_header and
 * m0_deferred_header; m0_response_cookie is the short way. */
long m0_cookie_format(char *out, size_t cap, const char *name, const char *value, const m0_cookie_attrs *attrs);
/* Adds a Set-Cookie header (one per call; several are allowed). attrs may
 * be NULL. 0, or -1 when m0_cookie_format refuses (up to 4096 bytes) or the
 * header block is full (nothing is added). */
struct m0_response; /* m0_response, declared below */
int m0_response_cookie(struct m0_response *res, const char *name, const char *value, const m0_cookie_attrs *attrs);

typedef struct m0_response m0_response;

/* Adds a response header (another of the same name too: Set-Cookie). Name
 * and value are copied; the value's leading and trailing spaces and tabs are
 * dropped. Returns 0, or -1 and nothing is added when: the name is not an
 * RFC 9110 token of 1..256 bytes; the value holds a control byte other than
 * a tab (a CR or LF would split the head) or passes 8192 bytes; the name is
 * one the host writes itself (Content-Length, Transfer-Encoding, Connection,
 * Keep-Alive, Proxy-Connection, Upgrade, TE, Trailer, Date, Server) or
 * Content-Type (m0_respond's argument); the response is answered; or the
 * headers added to this response would pass 8 KiB. */
int m0_response_header(m0_response *res, const char *name, const char *value);
/* Replaces every header `name` added so far with one (adds it when none).
 * 0, or -1 as m0_response_header, and then nothing changes. */
int m0_response_header_set(m0_response *res, const char *name, const char *value);
/* Removes every header `name` (case-insensitive) added so far; returns how
 * many went. */
int m0_response_header_remove(m0_response *res, const char *name);

/* How m0_respond treats the body it is given. */
enum {
  M0_BODY_COPY = 0,   /* copied; the caller's buffer is free on return */
  M0_BODY_STATIC = 1, /* lives for the whole process: written without a copy */
};

/* Answers the request. Exactly one call per request; a second returns -1.
 * content_type may be NULL (no Content-Type header). A HEAD request gets the
 * headers and Content-Length without the body. RFC 9110's body rules: 204
 * and 304 go without a body or a Content-Length, 205 with Content-Length: 0;
 * a body given with them is not sent. Returns 0; -1, and the request is
 * answered 500 (said on stderr), when status is not a final status
 * (200..599) or content_type is 128 bytes or more or holds a CR or LF. */
int m0_respond(m0_response *res, int status, const char *content_type, const void *body,
               size_t len, unsigned body_mode);
/* m0_respond with a body the host owns from this call, whatever it returns:
 * written from where it lies (no copy) and freed with free_fn(body) once
 * written, or when the connection goes, or at once when it is not sent (a
 * HEAD, a 204, a refusal). free_fn NULL means free(3): a json_dumps result
 * is handed over as it is. A view on a pool thread: the body is copied into
 * the answer's message and freed then. */
int m0_respond_owned(m0_response *res, int status, const char *content_type, void *body, size_t len,
                     void (*free_fn)(void *body));
/* Answers with a file. Its bytes go by sendfile(2) from the page cache,
 * never through the application. The host answers the request's
 * conditions itself: ETag ("mtime-size" in hex) and Last-Modified are sent;
 * If-None-Match, else If-Modified-Since, gives 304; on a GET, Range:
 * bytes=... (one range; a list is served whole) gives 206 with
 * Content-Range, or 416 when it starts past the end, under If-Range;
 * Accept-Ranges: bytes. A HEAD gets the headers. Returns 0 when the request
 * is answered (a content_type m0_respond refuses is its 500); -1 with errno
 * and nothing answered when path cannot be opened or is no regular file
 * (ENOENT, EACCES, EISDIR...): the view answers, 404 say. Serving paths from
 * a request: m0_request_path_decoded refuses what would climb out. */
int m0_respond_file(m0_response *res, const char *content_type, const char *path);
/* Answers status with len bytes of fd from offset, by sendfile(2) (fd: a
 * file, or anything sendfile reads). The host owns fd from the call: it is
 * closed once written, or when not sent (HEAD, 204, 304, a refusal). 0, or
 * -1 as m0_respond. */
int m0_respond_fd(m0_response *res, int status, const char *content_type, int fd, uint64_t offset, uint64_t len);
/* ---- responses written in pieces --------------------------------------
 * m0_respond_writer sends the head now (Transfer-Encoding: chunked; to an
 * HTTP/1.0 client no framing, and the connection closes at the end) and
 * the body follows in pieces from any thread, until m0_writer_end. The
 * view may return at once; the connection parses nothing more until the
 * end, so pipelined answers keep their order. On the loop only, as streams
 * (on a pool thread: NULL, and the request is answered 409); NULL too, with
 * a 500, for a status without a body (204, 205, 304) or a bad content type.
 * on_gone(arg), when not NULL, is called once on the loop's thread if the
 * client goes away before the end; writes then fail. (At the drain a
 * response still being written is waited for within the bound, as any
 * answer; once the host has stopped, writes fail with EPIPE.)
 * It is not called once m0_writer_end has begun, and m0_writer_end waits
 * for one already running: after it returns, arg may be freed. (on_gone
 * may call m0_writer_end itself.)
 * Every writer is ended exactly once, gone or not: m0_writer_end frees it.
 * A HEAD gets the head, and the pieces are dropped. */
typedef struct m0_writer m0_writer;
m0_writer *m0_respond_writer(m0_response *res, int status, const char *content_type, void (*on_gone)(void *arg),
                             void *arg);
/* Queues n bytes (copied; 0 bytes is nothing). 0, or -1 with errno: EPIPE
 * the client is gone, EAGAIN more than 8 MiB (an actor's reply writer:
 * m0_reply_writer's 256 KiB) would wait to be written (wait,
 * then write again; a larger piece is taken when nothing waits), ENOMEM.
 * Thread safety: one thread at a time per writer. */
int m0_writer_write(m0_writer *w, const void *p, size_t n);
/* Backpressure: waits until at most 64 KiB of what was written is still to
 * be sent, up to timeout_ms. 0, or -1 with errno EPIPE (gone) or ETIMEDOUT.
 * On the loop's own thread it does not wait (nothing could make room). */
int m0_writer_wait(m0_writer *w, unsigned timeout_ms);
/* The last piece: the response ends, the connection goes on (or closes for
 * HTTP/1.0), and w is freed. 0, or -1 when the client was gone. */
int m0_writer_end(m0_writer *w);
/* Gives up: the connection closes without the last chunk, so the client
 * sees a body cut short (never one that looks whole), and w is freed.
 * 0, or -1 when the client was gone. */
int m0_writer_abort(m0_writer *w);
/* printf into the body (copied). Returns what m0_respond returns; -1 and a
 * 500 when the body cannot be formatted. */
int m0_respondf(m0_response *res, int status, const char *content_type, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Turns the answer into a server-sent-event stream (text/event-stream) on
 * `channel` (1..64 bytes; names starting "m0." are the host's). Every frame
 * published on that channel, in any loop of any worker, is written to it as
 * "id: N" then the frame's lines; a comment line beats while it is idle
 * (--sse-heartbeat-ms); frames it is too slow for (64 KiB behind) are dropped
 * for it alone and told by an "m0.gap" event with their ids; at the drain it
 * gets a final "m0.closing" event with a retry hint and is closed by the
 * server. A HEAD gets the headers only, and keeps its connection. Headers
 * added with m0_response_header go out with it. A stream must be opened on
 * the loop: on a pool thread this answers 409 and returns -1. Returns 0. */
int m0_respond_stream(m0_response *res, const char *channel);

/* Answers with the host's actors as a graph, as JSON: every actor of the
 * topology and of the application (each instance live now), where each
 * lives (process, thread, machine), its figures (a loop's requests, open
 * connections and pool queue; an actor's instances, in flight, restarts;
 * refusals), and the edges between them with the kinds of message each
 * carries (docs/reference.md, The observer). Asked with Accept:
 * text/event-stream it is the host's own stream instead: a "graph" event
 * now and about once a second after. With ?records=NAME in the query it is
 * that actor's recent trace records (while tracing is on: m0trace). The
 * dashboard's page draws it. On the loop only: on a pool thread it answers
 * 409 and returns -1. Returns 0. */
int m0_respond_graph(m0_response *res);

/* Writes a frame to this stream alone (a welcome, a snapshot), before any
 * other: a resume's held frames (Last-Event-ID) and those published on its
 * channel follow it. After m0_respond_stream, in the same view. Its lines
 * are checked as m0_publish checks them and it goes without an id (the
 * client's Last-Event-ID stays the shared order's).
 * 0, or -1 (refused, no stream, or the stream's queue is full). */
int m0_stream_write(m0_response *res, const void *frame, size_t len);

/* ---- WebSocket (RFC 6455) ------------------------------------------------
 * A view on the loop upgrades its request: the host answers 101 with
 * Sec-WebSocket-Accept (permessage-deflate when the client offers it),
 * and from then on the socket is a subscriber like a stream: every frame
 * published on a channel it subscribes to is sent to it as one text
 * message carrying the frame's data (the "data:" lines' values joined by
 * "\n", what an EventSource's event.data would be); a frame without data
 * is not sent. Its messages (whole: fragments joined, inflated, text
 * checked as UTF-8, at most --ws-max-message bytes) come to on_message on
 * the loop. The host answers pings, pings an idle socket
 * (--sse-heartbeat-ms), enforces the client's masking, closes a socket
 * that breaks the protocol with the RFC's code (1002, 1007 for text that
 * is not UTF-8, 1009 for a message too large), closes with 1013 a socket
 * too slow for its channels' frames (64 KiB behind: the reason names the
 * first frame lost), and at the drain closes every socket with 1001.
 * A client that offers the subprotocol "m0.events" (and a view that set no
 * Sec-WebSocket-Protocol of its own) gets each frame as its SSE event
 * instead ("id: N" and its lines, without the blank line), a loss told in
 * band (an m0.gap event), and may resume: with ?last_event_id=N on the
 * upgrade (or Last-Event-ID: N), the channels the view subscribes replay
 * their held frames after N once the view returned, as a stream's.
 * docs/http.md, WebSocket. */
typedef struct m0_ws m0_ws;
enum { M0_WS_TEXT = 1, M0_WS_BINARY = 2 };
typedef struct m0_ws_handlers {
  /* A whole message from the client, on the loop (data valid during the call). */
  void (*on_message)(m0_ws *ws, int type, const void *data, size_t len, void *arg);
  /* Once, on the loop, when the socket is gone: code is the client's close
   * code, 1005 for a close without one, 1006 when the connection went
   * without a close frame, or the code the host closed with. ws is not
   * valid after it. May be NULL. */
  void (*on_close)(m0_ws *ws, int code, void *arg);
  void *arg;
} m0_ws_handlers;
/* Upgrades the request. NULL, and the request is answered, when it is not a
 * WebSocket handshake (400; 426 with Sec-WebSocket-Version: 13 for another
 * version), on a pool thread (409), or out of memory (500); NULL too when
 * the client went before the 101 could be written. Headers added
 * with m0_response_header go out with the 101. handlers is copied. */
m0_ws *m0_respond_websocket(m0_response *res, const m0_ws_handlers *handlers);
/* Subscribes the socket to a channel (as m0_respond_stream names them); in
 * the view, a client's last_event_id resumes it there. 0, or -1 (a bad
 * name, no memory, the loop's channel table is full, or the socket is
 * closing: after its close frame nothing is sent). On the loop. */
int m0_ws_subscribe(m0_ws *ws, const char *channel);
/* Sends one message (copied) to this socket alone, on the loop. 0, or -1:
 * the socket is closing, type is not M0_WS_TEXT or M0_WS_BINARY, text
 * that is not UTF-8, or more than 8 MiB already waits to be written. */
int m0_ws_send(m0_ws *ws, int type, const void *data, size_t len);
/* Starts the close handshake with code (1000, 1001, 1003, 1007-1014,
 * 3000-4999; another is sent as 1000) and a reason of at most 123 bytes;
 * on_close follows when the client answers, or after 5 s. 0, or -1 when
 * already closing. On the loop. */
int m0_ws_close(m0_ws *ws, int code, const char *reason);

/* A view: answers one request with the handler state made by app->make. */
typedef void (*m0_view_fn)(void *state, const m0_request *req, m0_response *res);

#define M0_ON_LOOP 1u /* answered on the loop, never queued to a pool */
/* The view blocks (sleeps, waits on I/O, spins): it must never run on the
 * loop. Serving without a pool (--blocking-threads 0) is refused (exit 78,
 * check `pool-routes`) instead of blocking every connection of the loop;
 * with M0_ON_LOOP too, refused as well. */
#define M0_NEEDS_POOL 2u

/* One route: method + pattern. A pattern segment written {name} matches one
 * non-empty path segment and is passed in req->params in order.
 * A route served by an application actor names it in `actor` (view NULL):
 * the loop sends the request to one of the actor's instances and answers
 * the connection with its reply, without waiting for it (docs/actors.md).
 * timeout_ms bounds the wait (0 = 1000 ms): past it the host answers 504.
 * A route that is a channel names it in `stream` (view and actor NULL; GET):
 * the host answers as m0_respond_stream on it, or, to a WebSocket upgrade,
 * as m0_respond_websocket subscribed to it (m0_ws_subscribe), on the loop.
 * A {name} of the pattern in it is that segment as sent ("room.{room}");
 * a name that is then no channel's (1..64 visible bytes, not "m0.") is 404.
 * docs/topology.md, Stream routes. */
typedef struct m0_route {
  const char *method;
  const char *pattern;
  m0_view_fn view;
  unsigned flags;
  const char *actor;
  unsigned timeout_ms;
  const char *stream;
} m0_route;

/* ---- deferred answers -------------------------------------------------
 * A view on the loop may answer later: m0_defer takes the request's answer
 * out of the view, the loop goes on serving, and m0_deferred_respond
 * answers it from any thread. Past timeout_ms (0 = 30000) the host answers
 * 504 itself, and an answer given after that is dropped (and counted). Each
 * handle is answered exactly once: m0_deferred_respond frees it. NULL (and
 * the view must answer itself) on a pool thread, or when already answered. */
typedef struct m0_deferred m0_deferred;
m0_deferred *m0_defer(m0_response *res, unsigned timeout_ms);
/* Adds a header to the deferred answer (copied). 0, or -1 when the header
 * block is full. Thread safety: the thread that holds the handle. */
int m0_deferred_header(m0_deferred *d, const char *name, const char *value);
/* Answers and frees the handle: the answer is handed to the request's loop.
 * 0; -1 when status is not 200..599, the content type holds a CR or LF, or
 * out of memory (the request is then answered 500, or 504 at its bound);
 * -1 with errno ETIMEDOUT when the bound passed (the host answers 504; this
 * answer is dropped and counted). Thread safety: any thread. */
int m0_deferred_respond(m0_deferred *d, int status, const char *content_type, const void *body, size_t len);

/* ---- application actors -----------------------------------------------
 * An actor kind: instances placed by the topology (docs/actors.md) — on a
 * thread of the host, in a process the host spawns and supervises, or in
 * any program that dials the actor's URL (external). Each instance makes
 * its state on its own thread, then receives requests one at a time. */
typedef struct m0_actor_ctx {
  const char *actor;       /* the kind's name */
  int instance;            /* 0.. : which instance this is */
  int instances;           /* how many the topology places (external: 0) */
  const m0_config *config; /* the host's configuration; NULL outside the host */
  /* Publishes into the host's streams (m0_publish), from any thread of the
   * instance. Outside the host (process, external) a frame travels to the
   * host over the instance's link and the host numbers it: m0_next_id
   * gives 0 there, and the id given to m0_publish is not used. */
  m0_publisher *publisher;
} m0_actor_ctx;

typedef struct m0_reply m0_reply;

typedef struct m0_actor_kind {
  const char *name; /* 1..48 bytes of [a-z0-9_-] */
  /* Builds one instance's state on its own thread. NULL with a message in
   * err refuses (exit 78 in the host; a restart under its budget in a
   * spawned process). A NULL make means state is NULL. */
  void *(*make)(const m0_actor_ctx *ctx, char *err, size_t errlen);
  /* One request: answer it with m0_reply_send before returning. One it does
   * not answer gets no reply, and the host answers 504 at the route's
   * timeout. req->trace_hi/lo carry the request's trace id. */
  void (*receive)(void *state, const m0_request *req, m0_reply *rep);
  void (*free)(void *state);
  /* Optional: a message sent to this actor (m0_send: rep is NULL) or a
   * call (m0_call: answer with m0_reply_message before returning; a call
   * not answered gets ENODATA at once). data is valid during the call. An
   * actor without it takes messages and answers none. */
  void (*message)(void *state, uint32_t type, m0_str data, m0_reply *rep);
} m0_actor_kind;

/* Adds a header to the reply (copied). Framing headers (Content-Length,
 * Transfer-Encoding, Connection) are the host's. 0, or -1 (refused: a bad
 * name or value, a framing header, the header block full). */
int m0_reply_header(m0_reply *rep, const char *name, const char *value);
/* The reply: status 200..599, content_type may be NULL. 0, or -1 (already
 * sent, a bad status, or no room). Thread safety: receive's thread, before
 * receive returns. */
int m0_reply_send(m0_reply *rep, int status, const char *content_type, const void *body, size_t len);
/* The reply in pieces (Mongrel2's handler sending a connection many
 * chunks, or server-sent events: content_type "text/event-stream"): the
 * head (status 200..599 but 204, 205, 304; the headers m0_reply_header
 * added) is sent now, and the body follows with m0_writer_write from any
 * thread of the instance, after receive has returned too, until
 * m0_writer_end or m0_writer_abort (each called exactly once; it frees
 * the writer). Counted backpressure: at most 256 KiB may be written and not
 * yet taken by the client; a write past it fails EAGAIN (m0_writer_wait
 * sleeps until at most 64 KiB is left; a piece over 256 KiB fails
 * EMSGSIZE), and once the client has gone writes fail EPIPE. The room comes
 * back through the instance's own thread: wait from another thread (on the
 * thread that runs receive, m0_writer_wait does not wait). The route's
 * timeout bounds the time to this call only. NULL (nothing sent: answer
 * with m0_reply_send) when already answered, a bad status or content type,
 * or where no stream can be sent (a request m0_ask made, which has no
 * connection; an instance placed nats).
 * Thread safety: receive's thread, before receive returns. */
m0_writer *m0_reply_writer(m0_reply *rep, int status, const char *content_type);

/* The answer to a call (m0_call): type and data (copied). 0, or -1 (rep
 * answers a request, not a call; already answered; no memory). Thread
 * safety: message's thread, before it returns. */
int m0_reply_message(m0_reply *rep, uint32_t type, const void *data, size_t len);

/* Ends the calling instance once the receive or message it is in returns
 * (Erlang's exit(Reason), CAF's quit): the requests it still holds get
 * 502 at once (a reply it sent in the same batch may too, when its loop
 * takes it after the instance left), its state is given to the kind's
 * free, and monitors get "down" with the reason. Its
 * restart budget or supervisor (docs/topology.md) decides whether a fresh
 * make serves in its place; a spawned process's m0_actor_run returns 1.
 * reason is copied (at most 159 bytes; '"', '\\' and bytes outside
 * printable ASCII become '_'); NULL says "exit". 0, or -1 when not called
 * from a receive or message. Thread safety: that call's own thread. */
int m0_actor_exit(const char *reason);

/* ---- messages: send to an actor, or call it, from any thread -----------
 * Any thread of a program that runs or embeds a host (main, a view, a pool
 * thread, a deferred answer's thread, an instance's receive or message)
 * can send an application actor a message, or call it and wait for its
 * answer (Erlang's ! and gen_server:call): the program's own bytes with a
 * type tag of its own, for the kind's `message` function, in any
 * placement. `actor` names the actor ("echo": one live instance, picked as
 * a route picks; "echo.2": that instance) of host h; h NULL is the calling
 * instance's host, or the process's only one. data is copied.
 * Both return 0, or -1 with errno: ENOENT no such actor or instance (or h
 * NULL with several hosts, or none); EHOSTDOWN none live; EAGAIN its
 * instance is at its queue bound (a send counts until a thread instance
 * took it), its socket did not take the message in time, or 64 calls of
 * this host wait already; EMSGSIZE data over 16 MiB; ENOMEM. m0_call also:
 * ETIMEDOUT past timeout_ms (0 = 1000), ENODATA the actor answered nothing.
 * docs/actors.md, Messages. Thread safety: any thread, while h serves. */
int m0_send(m0_host *h, const char *actor, uint32_t type, const void *data, size_t len);
typedef struct m0_message {
  uint32_t type;
  m0_str data;
  void *mem_; /* the host's */
  uint64_t call_; /* a mailbox's: the call it answers */
  uint32_t from_;
} m0_message;
int m0_call(m0_host *h, const char *actor, uint32_t type, const void *data, size_t len, unsigned timeout_ms,
            m0_message *out);
void m0_message_free(m0_message *m);

/* ---- receiving without being an actor: mailboxes; and monitors --------
 * A thread of the program receives as an actor does through a mailbox it
 * opens in host h (NULL as m0_send's): m0_send and m0_call reach it by its
 * name as they reach an actor (so no actor may have it), and the thread
 * takes what comes with m0_mailbox_recv and answers a call with
 * m0_mailbox_reply. At most 32 mailboxes per host, 4096 messages waiting in
 * each (a send past it: EAGAIN). One thread receives from a mailbox at a
 * time. Closing it drops what waits. */
typedef struct m0_mailbox m0_mailbox;
/* NULL with errno: EINVAL (name not 1..48 bytes of [a-z0-9_-]), EEXIST (an
 * actor's or an open mailbox's name), ENOSPC, ENOENT (no host), ENOMEM. */
m0_mailbox *m0_mailbox_open(m0_host *h, const char *name);
/* The next message (free it with m0_message_free), waiting up to timeout_ms:
 * 0, or -1 with errno ETIMEDOUT, ENOMEM, or ECANCELED once its host has
 * stopped (a mailbox may be closed after its host, never used otherwise). */
int m0_mailbox_recv(m0_mailbox *mb, unsigned timeout_ms, m0_message *out);
/* Answers msg, a call m0_mailbox_recv gave: 0, or -1 with errno EINVAL (a
 * send: nobody waits), EPIPE (its caller gave up, or the host stopped),
 * EMSGSIZE, ENOMEM. */
int m0_mailbox_reply(m0_mailbox *mb, const m0_message *msg, uint32_t type, const void *data, size_t len);
void m0_mailbox_close(m0_mailbox *mb);

/* Monitors (Erlang's monitor): `watcher`, an actor's or a mailbox's name,
 * is sent a message (m0_send's, type below, data one JSON object with
 * "actor", "instance" ("echo.1", or null) and "event") each time an
 * instance of `actor` comes, leaves, or — a spawned process — exits. 0, or
 * -1 with errno ENOENT (no such actor), EINVAL (a bad watcher name),
 * ENOSPC (64 monitors per host). A note the watcher cannot take (its
 * mailbox full, no instance live) is dropped and counted. */
int m0_monitor(m0_host *h, const char *actor, const char *watcher);
#define M0_MSG_UP 0xff000001u     /* "event":"up": an instance took its slot */
#define M0_MSG_DOWN 0xff000002u   /* "event":"down","reason":...: it left (connection closed, m0_actor_exit...) */
#define M0_MSG_EXITED 0xff000003u /* "event":"exited","pid":P,"status":...|"reason":...,"restarted":bool */

/* What m0_ask brings back: the other actor's reply. Valid until
 * m0_answer_free. */
typedef struct m0_answer {
  int status;
  const m0_header *headers;
  size_t nheaders;
  m0_str body;
  void *mem_; /* the host's */
} m0_answer;
/* Asks actor `actor` (named as m0_call names it, of the host m0_call's h
 * NULL finds) with an HTTP request and waits for its reply: `req` is sent
 * as its request (method, target, path, headers, body, trace id; no path
 * parameters) to its receive. Up to timeout_ms (0 = 1000). Returns 0 and
 * fills *out (free it with m0_answer_free), or -1 with errno as m0_call.
 * From any thread; an instance that asks itself waits out its bound (its
 * requests wait for it meanwhile). */
int m0_ask(const char *actor, const m0_request *req, unsigned timeout_ms, m0_answer *out);
void m0_answer_free(m0_answer *a);

/* Runs one instance of `kind` outside the host: dials url (the actor's URL
 * as the host's doctor prints it), makes the state, answers requests until
 * the host says STOP (returns 0) or SIGTERM/SIGINT (returns 0); the STOP of
 * a reload is no end: it closes its connection and redials the same URL
 * (docs/actors.md, Across a reload). Returns 78
 * when make refuses, a tls+tcp:// url has no identity in M0_TLS_*, or the
 * key file M0_ACTOR_SECRET_FILE names is no key; 1 when url cannot be
 * dialed (with the reason on stderr). Over plain tcp:// it answers the
 * host's challenge with that file's secret (docs/wire.md, Proving who you
 * are). This is what an external C actor's main calls. */
int m0_actor_run(const m0_actor_kind *kind, const char *url, int instance);

/* The application. Either `handle` or `routes` answers requests; with routes
 * the host answers 404, 405 (with Allow) and OPTIONS (204) itself. */
typedef struct m0_app {
  const char *name;
  /* Builds one loop's (or pool thread's) state on the thread that will use
   * it. Return NULL and write a message into err to refuse (exit 78). A NULL
   * make means state is NULL. */
  void *(*make)(const m0_ctx *ctx, char *err, size_t errlen);
  m0_view_fn handle;
  const m0_route *routes;
  size_t nroutes;
  /* Optional. Runs on the loop before anything is queued to a pool; returns
   * true when it answered the request. */
  bool (*before_request)(void *state, const m0_request *req, m0_response *res);
  void (*free)(void *state);
  int max_workers; /* 0 = any number; state that lives in one process says 1 */
  int max_threads; /* 0 = same as max_workers; -1 = any number */
  size_t (*page_slots)(int loops); /* shared 64-bit words wanted; NULL = none */
  /* Application actor kinds (routes name them in m0_route.actor). Each is
   * placed on a thread of the host, one instance, unless a topology file's
   * "app_actors" says otherwise. */
  const m0_actor_kind *actors;
  size_t nactors;
} m0_app;

/* A producer: work on a cadence that publishes frames to streams. Exactly one
 * runs in the whole topology. */
typedef struct m0_producer {
  void *(*make)(const m0_ctx *ctx, char *err, size_t errlen); /* NULL = refuse, exit 78 */
  bool (*wanted)(const m0_ctx *ctx);                          /* NULL = yes */
  /* Returns the nanoseconds until the next step (fixed rate, never catching
   * up), or a negative number for a failure, which stops the producer. */
  int64_t (*step)(void *state, m0_publisher *pub);
  void (*free)(void *state);
} m0_producer;

/* The next event id from the one shared counter. Thread safety: any thread. */
uint64_t m0_next_id(m0_publisher *pub);
/* Publishes a frame to every stream on `channel` in every loop of every
 * worker. The frame is the event's lines without its id (e.g. "event: beat\n
 * data: {...}"); the host writes "id: <id>" first. Returns false (and counts
 * it) when the frame is refused (larger than 64 KiB, a blank line, a CR, an
 * id line of its own; a channel name that is empty, longer than 64 bytes or
 * starts "m0.") or when a loop's mailbox is full.
 *
 * With a "bus" in the topology (a fleet of hosts sharing one NATS subject,
 * docs/topology.md) the frame goes to the fleet and `id` is not used: every
 * host writes it with the id the fleet's stream gives it, in the stream's
 * order, and m0_next_id gives 0 (the shared counter follows the fleet's
 * ids). While the link to NATS is down the frame goes to this host's
 * streams only, at once and without an id, and never to the fleet later.
 * Thread safety: any thread. */
bool m0_publish(m0_publisher *pub, const char *channel, uint64_t id, const void *frame, size_t len);

/* A publisher for a program outside the host (m0pub, a child process the
 * application starts): it attaches to a running host through its run
 * directory (M0_RUN_DIR is set for the host's children), numbers from the
 * same shared counter, and reaches every loop. NULL with a reason in err when
 * the directory holds no running host. */
m0_publisher *m0_publisher_attach(const char *run_dir, char *err, size_t errlen);
void m0_publisher_detach(m0_publisher *pub);

/* What the host is doing, per loop, read from the shared page: the same
 * figures in every process. Fills at most max entries; returns the loop
 * count. Thread safety: any thread. */
typedef struct m0_loop_stats {
  uint64_t requests; /* answered since start */
  uint64_t open;     /* connections open now (streams included) */
  uint64_t streams;  /* streams open now */
  uint64_t handoffs; /* connections handed to a sibling since start */
  uint64_t queued;   /* requests waiting for or inside the pool */
  uint64_t dropped;  /* stream frames dropped (a queue full, a frame late: docs/reference.md, Metrics) */
} m0_loop_stats;
int m0_stats(m0_publisher *pub, m0_loop_stats *out, int max);

/* Serves the application until SIGTERM/SIGINT, then drains. Returns the exit
 * code (0, 1, 2, 73 or 78; see docs/reference.md). Reads argv and the M0_
 * environment. The memory of argv's strings, when argv is main's own, becomes
 * the process title ("m0: APP gen 1"): keep no pointer into them from before
 * this call (another array is left alone). */
int m0_serve(const m0_app *app, const m0_producer *producer, int argc, char **argv);

/* Embedding: the host inside a larger program, which keeps main and its
 * signal handlers. argv is read like a command line (flags over M0_
 * variables), the same checks run, and --workers above 1 is refused (a host
 * inside a program spawns no workers). In a process it spawned for an actor
 * placed `process` it does not return: it runs that instance and exits (the
 * program's code before it runs there too). Returns once every loop serves;
 * on refusal NULL, *code the exit code serving would have returned (2 or 78,
 * or 1) and the reason in err. Thread safety: call from any one thread.
 * Several hosts may serve side by side in one process, each with its own
 * listener, run directory and addresses. What stays one per process: the
 * signals and the master (m0_serve's, never an embedded host's), a
 * topology file's TLS identity (a host naming another once a link used the
 * first is refused), the process title, and the refusal, edge and
 * recent-trace counters (/metrics, the observer): on the page of the host
 * that started first, until the last one stops. */
m0_host *m0_host_start(const m0_app *app, const m0_producer *producer, int argc, char **argv, int *code, char *err,
                       size_t errlen);
int m0_host_port(const m0_host *h);        /* the bound port (useful with --port 0) */
const char *m0_host_run_dir(const m0_host *h); /* loop.i.sock and the shared page live here */
m0_publisher *m0_host_publisher(m0_host *h);   /* publish into the host's streams */
/* Drains within --drain-timeout-ms and frees the host. Returns 0, or 1 when
 * the drain missed its bound (a thread still inside the application is left
 * behind, named on stderr). Thread safety: any thread but the host's own. */
int m0_host_stop(m0_host *h);

/* Reads a resolved configuration value by its flag name without dashes
 * ("port", "workers", ...). Returns false for an unknown name. */
bool m0_config_get(const m0_config *cfg, const char *name, long *out);

#ifdef __cplusplus
}
#endif
#endif
