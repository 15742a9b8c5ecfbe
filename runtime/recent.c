#include "runtime/recent.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "runtime/kinds.h"
#include "base/errors.h"
#include "base/ids.h"
#include "base/num.h"

_Static_assert(M0__TRACE_RECORD <= sizeof(((m0__trace_line *)0)->w), "a record fits a line's words");

static m0__trace_ring local_ring;
static m0__trace_ring *ring = &local_ring;

void m0__recent_attach(m0__trace_ring *r) {
  if (r) ring = r;
}

void m0__recent_put(const uint8_t rec[M0__TRACE_RECORD]) {
  uint64_t w[9] = {0};
  memcpy(w, rec, M0__TRACE_RECORD);
  uint64_t n = atomic_fetch_add_explicit(&ring->next, 1, memory_order_relaxed);
  m0__trace_line *l = &ring->lines[n % M0__PAGE_TRACE_LINES];
  atomic_store_explicit(&l->stamp, 0, memory_order_relaxed);
  atomic_thread_fence(memory_order_release); /* the 0 is seen before any new word */
  for (int i = 0; i < 9; i++) atomic_store_explicit(&l->w[i], w[i], memory_order_relaxed);
  atomic_store_explicit(&l->stamp, n + 1, memory_order_release);
}

void m0__recent_each(void (*cb)(void *arg, const m0__trace_rec *r), void *arg) {
  uint64_t next = atomic_load_explicit(&ring->next, memory_order_acquire);
  uint64_t from = next > M0__PAGE_TRACE_LINES ? next - M0__PAGE_TRACE_LINES : 0;
  for (uint64_t n = from; n < next; n++) {
    m0__trace_line *l = &ring->lines[n % M0__PAGE_TRACE_LINES];
    uint64_t before = atomic_load_explicit(&l->stamp, memory_order_acquire), w[9];
    if (before != n + 1) continue; /* being written, or already a later one's */
    for (int i = 0; i < 9; i++) w[i] = atomic_load_explicit(&l->w[i], memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire); /* the words are read before the stamp again */
    if (atomic_load_explicit(&l->stamp, memory_order_relaxed) != before) continue;
    uint8_t rec[sizeof w];
    memcpy(rec, w, sizeof w);
    m0__trace_rec r;
    if (m0__trace_decode(rec, &r) == 0) cb(arg, &r);
  }
}

/* ---- the record ---- */

int m0__trace_decode(const uint8_t in[M0__TRACE_RECORD], m0__trace_rec *r) {
  uint32_t dir = m0__le_get32(in + M0__ENV_HEADER + 8);
  uint8_t head[M0__ENV_HEADER];
  memcpy(head, in, sizeof head);
  if (dir == M0__TRACE_SERVE) { /* no message's: kind 0, read as an envelope of a real kind */
    if (m0__le_get16(head + 4) != 0) return M0__EBADMSG;
    m0__le_put16(head + 4, M0__K_READY);
  }
  if (dir > M0__TRACE_SERVE || m0__env_read_header(head, &r->e, &r->bytes) != 0) return M0__EBADMSG;
  if (dir == M0__TRACE_SERVE) r->e.kind = 0;
  r->t_ns = m0__le_get64(in + M0__ENV_HEADER);
  r->recv = dir == M0__TRACE_RECV;
  r->served = dir == M0__TRACE_SERVE;
  r->pid = m0__le_get32(in + M0__ENV_HEADER + 12);
  r->tid = m0__le_get32(in + M0__ENV_HEADER + 16);
  r->process = m0__le_get32(in + M0__ENV_HEADER + 20);
  return 0;
}

/* The line is built by hand, not by snprintf: m0trace formats every record
 * of a busy host (~27,000 a second on the pool lane at 16 connections), and
 * snprintf took ~9,000 instructions a record there (callgrind). */
static char *put_str(char *o, const char *s) {
  while (*s) *o++ = *s++;
  return o;
}
static char *put_hex64(char *o, uint64_t v) {
  for (int i = 15; i >= 0; i--) *o++ = "0123456789abcdef"[(v >> (4 * i)) & 15];
  return o;
}

const char *m0__trace_kind_name(const m0__trace_rec *r) { return r->served ? "http" : m0__kind_name(r->e.kind); }

size_t m0__trace_format(const m0__trace_rec *r, char *out, size_t outlen) {
  char line[400], from[64], to[64]; /* the longest line is ~330 bytes */
  m0__actor_name(r->e.from, from, sizeof from);
  m0__actor_name(r->e.to, to, sizeof to);
  char *o = m0__put_uint(put_str(line, "{\"t\":"), r->t_ns / 1000000000u);
  char *dot = o; /* nanoseconds, zero-padded to nine digits: 1xxxxxxxxx, its 1 made the dot */
  o = m0__put_uint(o, 1000000000u + r->t_ns % 1000000000u);
  *dot = '.';
  o = put_str(put_str(o, ",\"dir\":\""), r->served ? "serve" : r->recv ? "recv" : "send");
  o = put_str(put_str(o, "\",\"from\":\""), from);
  o = put_str(put_str(o, "\",\"to\":\""), to);
  o = put_str(put_str(o, "\",\"kind\":\""), m0__trace_kind_name(r));
  o = m0__put_uint(put_str(o, "\",\"seq\":"), r->e.seq);
  o = m0__put_uint(put_str(o, ",\"bytes\":"), r->bytes);
  o = put_hex64(put_hex64(put_str(o, ",\"trace\":\""), r->e.trace_hi), r->e.trace_lo);
  char proc[32];
  m0__trace_process_name(r->process, proc, sizeof proc);
  o = put_str(put_str(o, "\",\"process\":\""), proc);
  o = m0__put_uint(put_str(o, "\",\"pid\":"), r->pid);
  o = m0__put_uint(put_str(o, ",\"tid\":"), r->tid);
  o = put_str(o, "}\n");
  size_t n = (size_t)(o - line);
  if (outlen == 0) return 0;
  if (n > outlen - 1) n = outlen - 1;
  memcpy(out, line, n);
  out[n] = 0;
  return n;
}

void m0__trace_process_name(uint32_t process, char *out, size_t outlen) {
  if (process == M0__TRACE_HOST) snprintf(out, outlen, "host");
  else if (process == M0__TRACE_SUPERVISOR) snprintf(out, outlen, "supervisor");
  else snprintf(out, outlen, "worker.%u", (unsigned)(process - M0__TRACE_WORKER));
}
