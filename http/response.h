/* The response writer. Responses are appended to an output queue: the head
 * and small bodies are copied into one buffer (one write for many pipelined
 * responses); a large body the application promises is static is referenced,
 * not copied, and written from where it lies (writev). */
#ifndef M0_HTTP_RESPONSE_H
#define M0_HTTP_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "http/date.h"
#include "m0/m0.h"

#define M0__OUT_REFS 8
#define M0__REF_MIN 1024 /* smaller static bodies are cheaper to copy */
#define M0__EXTRA_HEADERS 2048

typedef struct m0__outq {
  char *buf;
  size_t len, cap;
  struct {
    size_t at; /* the referenced bytes go after buf[0, at) */
    const void *p;
    size_t n;
  } refs[M0__OUT_REFS];
  int nrefs;
  size_t ref_bytes;
} m0__outq;

int m0__outq_append(m0__outq *q, const void *p, size_t n);
/* References n bytes that outlive the write; copies when out of slots. */
int m0__outq_ref(m0__outq *q, const void *p, size_t n);
size_t m0__outq_bytes(const m0__outq *q);
/* Fills iov (at most 2*M0__OUT_REFS+1 entries) skipping the first `skip`
 * bytes. Returns the entry count. */
int m0__outq_iov(const m0__outq *q, size_t skip, uv_buf_t *iov);
/* Appends what src holds past its first `skip` bytes (references stay
 * references). Returns 0 or -1. */
int m0__outq_move_tail(m0__outq *dst, const m0__outq *src, size_t skip);
void m0__outq_clear(m0__outq *q);
void m0__outq_free(m0__outq *q);

struct m0_response {
  m0__outq *out;
  m0__date *date;
  int version_minor;
  bool head;  /* HEAD: headers and length, no body */
  bool close; /* the connection closes after this response */
  bool done;
  int status;
  size_t body_len;
  /* Set on the loop only: turns the connection into a stream. */
  int (*stream_begin)(void *ctx, const char *channel);
  void *stream_ctx;
  size_t extra_len;
  char extra[M0__EXTRA_HEADERS];
};

void m0__response_init(m0_response *r, m0__outq *out, m0__date *date, int version_minor, bool head,
                       bool close);
/* The trace id (from traceparent) of the request a view on this thread is
 * answering, so what the view causes (a published frame) carries it. */
typedef struct m0__trace_id {
  uint64_t hi, lo;
} m0__trace_id;
extern _Thread_local m0__trace_id m0__current_trace;

/* A response the host itself makes (errors, 404/405, OPTIONS). */
void m0__respond_status(m0_response *r, int status, const char *allow);
const char *m0__status_reason(int status);
#define M0__CHANNEL_MAX 64
/* A channel name a stream or a publisher may use. */
bool m0__channel_ok(const char *channel);

#endif
