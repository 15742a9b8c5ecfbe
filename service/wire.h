/* The wire of application actors: what a loop sends an instance (REQUEST)
 * and what comes back (REPLY), as explicit little-endian bytes with a
 * version and a length before every variable field — no native struct, no
 * pointer — because an instance may be any program in any language on the
 * other end of an nng pair1 socket. docs/wire.md is the same layout for
 * someone writing an instance from that page alone.
 *
 *   batch:   u16 version (1)  u16 flags (0)  u32 count   then count records
 *   request: u64 id  u64 trace_hi  u64 trace_lo
 *            u32 method  u32 target  u32 path (a prefix of target)  u32 body
 *            u16 nheaders  u8 nparams  u8 version_minor  u32 reserved (0)
 *            method, target, each header (u32 name, u32 value, name, value),
 *            each path parameter (u32 len, bytes), body
 *   reply:   u64 id  u16 status  u16 nheaders  u32 body
 *            each header (u32 name, u32 value, name, value), body
 *
 * and, unbatched, what a caller sends an actor (MESSAGE) and the answer to
 * a call (RETURN), the program's own bytes with its own type tag:
 *
 *   message: u64 call (0: a send, no answer wanted)  u32 type
 *            u16 name (the actor addressed: "echo", "echo.2"; 0 bytes when
 *            the envelope's `to` names it)  name  data (the rest)
 *   return:  u64 call  u32 type  u32 code (M0__RETURN_*)  data (the rest)
 *
 * Design notes
 * - A request is named by its id alone: the loop keeps what the id stands
 *   for (the connection, the deadline), so nothing an instance sends can
 *   point into the host. An unknown or late id is dropped and counted.
 * - Every decoder checks every length against what is left of the payload
 *   and every count against its limit before it reads; a reply whose
 *   record does not decode answers that request 502 when its id could be
 *   read (the rest of that batch is lost and times out: 504).
 * - A reply is also checked for what the host will write: a final status
 *   (200..599), header names that are tokens, values without CR, LF or NUL,
 *   and no framing header (Content-Length, Transfer-Encoding, Connection:
 *   the host frames the response).
 */
#ifndef M0_SERVICE_WIRE_H
#define M0_SERVICE_WIRE_H

#include <nng/nng.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "m0/m0.h"

#define M0__WIRE_VERSION 1
#define M0__WIRE_BATCH_HEAD 8
#define M0__WIRE_MAX_COUNT 65536 /* records in one batch */
#define M0__WIRE_MAX_HEADERS 100 /* headers in one request or reply */
#define M0__WIRE_MAX_PARAMS 8    /* path parameters in one request */

/* Starts a batch: a message (m0__msg_new) with the batch head. 0 or M0__ENOMEM. */
int m0__wire_batch_new(nng_msg **m, size_t reserve);
/* The same in a message received and done with (m keeps its block: no
 * allocation, nothing zeroed when it has the room). 0, or M0__ENOMEM (m is
 * still the caller's, to free). */
int m0__wire_batch_reuse(nng_msg *m, size_t reserve);
/* The largest block kept for a batch to come: a big reply's is let go, not
 * held by a loop or an instance for good. */
#define M0__WIRE_SPARE_MAX 65536
/* Appends one record and counts it in the head. 0, or M0__ENOMEM /
 * M0__ETOOBIG (the message is unchanged). */
int m0__wire_request_add(nng_msg *m, uint64_t id, const m0_request *req);
int m0__wire_reply_add(nng_msg *m, uint64_t id, int status, const m0_header *hdrs, size_t nhdrs, const void *body,
                       size_t blen);
/* Records in a batch being built. */
uint32_t m0__wire_batch_count(nng_msg *m);

/* A reader over one batch's payload. */
typedef struct m0__wire_rd {
  const uint8_t *p, *end;
  uint32_t left; /* records not read yet */
} m0__wire_rd;

/* Reads the head: 0 (r ready, its count in r->left) or M0__EBADMSG (short,
 * another version, flags set, a count over the limit). */
int m0__wire_open(m0__wire_rd *r, const uint8_t *payload, size_t len);

typedef struct m0__wire_request {
  uint64_t id;
  m0_request req; /* its pointers are into the payload, and into hdrs/params */
  m0_header hdrs[M0__WIRE_MAX_HEADERS];
  m0_str params[M0__WIRE_MAX_PARAMS];
} m0__wire_request;

typedef struct m0__wire_reply {
  uint64_t id;
  bool id_read; /* the record did not decode, but its id did */
  int status;
  const m0_header *hdrs;
  size_t nhdrs;
  m0_header hdr_store[M0__WIRE_MAX_HEADERS];
  m0_str body;
} m0__wire_reply;

/* The next record: 1 (out filled), 0 (no more), or M0__EBADMSG (the batch
 * is bad from here; a reply's out->id_read says whether its id is known). */
int m0__wire_next_request(m0__wire_rd *r, m0__wire_request *out);
int m0__wire_next_reply(m0__wire_rd *r, m0__wire_reply *out);

/* A MESSAGE or RETURN (unbatched): the payload is the whole message. */
#define M0__WIRE_MESSAGE_FIXED 14
#define M0__WIRE_RETURN_FIXED 16
#define M0__WIRE_NAME_MAX 64
enum {
  M0__RETURN_ANSWERED = 0, /* data is the actor's answer */
  M0__RETURN_NONE = 1,     /* the actor answered nothing (no message handler, or it sent no answer) */
  M0__RETURN_REFUSED = 2,  /* the host could not pass an instance's call on: data is a u32 errno */
};
typedef struct m0__wire_message {
  uint64_t call;
  uint32_t type;
  uint32_t code; /* a RETURN's */
  m0_str name;   /* a MESSAGE's */
  m0_str data;
} m0__wire_message;
/* An m0_ask from an instance outside the host travels as a call of this
 * type (the host's own range, as M0_MSG_UP's): its data is a one-record
 * request batch, and the RETURN's data the one-record reply batch, so it
 * goes wherever a call goes (the post's book, the relay, the window). */
#define M0__MSG_ASK 0xff000010u
/* A MESSAGE (m0__msg_new, then the payload): 0, or M0__ENOMEM / M0__ETOOBIG
 * (a name over M0__WIRE_NAME_MAX, data over the envelope's limit). */
int m0__wire_message_new(nng_msg **m, uint64_t call, uint32_t type, const char *name, const void *data, size_t len);
int m0__wire_return_new(nng_msg **m, uint64_t call, uint32_t type, uint32_t code, const void *data, size_t len);
/* A reply's status, headers and body copied into one block (out->mem_):
 * 0 or ENOMEM. */
int m0__wire_reply_copy(const m0__wire_reply *r, m0_answer *out);
/* Reads one: 0 (out's strings point into payload) or M0__EBADMSG. */
int m0__wire_message_read(const uint8_t *payload, size_t len, m0__wire_message *out);
int m0__wire_return_read(const uint8_t *payload, size_t len, m0__wire_message *out);

/* A reply in pieces (STREAM, instance -> loop) and its room (CREDIT, loop ->
 * instance), unbatched:
 *
 *   stream:  u32 op  then a reply record (OPEN: u64 id u16 status u16
 *            nheaders u32 body, headers, body: the first bytes), or u64 id
 *            and the bytes (DATA), or u64 id alone (END, ABORT)
 *   credit:  u32 op  u64 id  u32 bytes (MORE: that many more may be sent;
 *            GONE: the client left, 0)
 *
 * An instance may have M0__STREAM_WINDOW bytes (the first bytes and every
 * DATA's) sent and not yet granted back by a MORE; a loop takes no more
 * (the stream is cut, counted). */
#define M0__STREAM_WINDOW (256u << 10)
enum { M0__STREAM_OPEN = 1, M0__STREAM_DATA = 2, M0__STREAM_END = 3, M0__STREAM_ABORT = 4 };
enum { M0__CREDIT_MORE = 1, M0__CREDIT_GONE = 2 };
#define M0__WIRE_CREDIT_LEN 16
typedef struct m0__wire_stream {
  uint32_t op;
  uint64_t id;
  m0__wire_reply open; /* OPEN's */
  m0_str data;         /* DATA's */
} m0__wire_stream;
/* A STREAM (m0__msg_new, then the payload). OPEN: status, headers and
 * first bytes as a reply's; DATA: the bytes; END, ABORT: none. 0, or
 * M0__ENOMEM / M0__ETOOBIG. */
int m0__wire_stream_new(nng_msg **m, uint32_t op, uint64_t id, int status, const m0_header *hdrs, size_t nhdrs,
                        const void *p, size_t n);
/* Reads one: 0 (out's strings point into payload) or M0__EBADMSG (with
 * out->id set when it was read: an OPEN whose record does not decode). */
int m0__wire_stream_read(const uint8_t *payload, size_t len, m0__wire_stream *out);
/* A CREDIT's payload into out[M0__WIRE_CREDIT_LEN]; and read: 0 or M0__EBADMSG. */
void m0__wire_credit_put(uint8_t *out, uint32_t op, uint64_t id, uint32_t bytes);
int m0__wire_credit_read(const uint8_t *payload, size_t len, uint32_t *op, uint64_t *id, uint32_t *bytes);

/* Whether a header an application or an instance adds may go out as it is:
 * http/fields.h's rules (a token name the host does not write itself, a
 * value with no control byte but HTAB). */
bool m0__wire_header_ok(const char *name, size_t nlen, const char *value, size_t vlen);

/* The headers of an answer being written (m0_reply_header,
 * m0_deferred_header): each checked by m0__wire_header_ok and copied into
 * the block's own store. */
typedef struct m0__header_block {
  m0_header *hdrs;
  size_t n, max;
  char *store;
  size_t used, cap;
} m0__header_block;
/* 0, or M0__EINVALID (refused by the check) / M0__ETOOBIG (no room):
 * nothing added. */
int m0__header_block_add(m0__header_block *b, const char *name, size_t nl, const char *value, size_t vl);

#endif
