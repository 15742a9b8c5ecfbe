/* bench/sse_client.c — the client side of bench/run_sse and bench/run_streams:
 * N server-sent-event (or WebSocket) streams held open and read, one record per
 * frame.
 *
 *   m0_sse_client [--ws] [--key NAME] PORT STREAMS OPEN_RATE PATH HOLD_S OUT [OPEN_TIMEOUT_S] [LINGER_S]
 *
 * --key NAME: a frame's record number is the decimal after `"NAME":` in it
 *   (its data), not its `id:` line; frames without it are not recorded. This
 *   is how bench/run_streams numbers frames on servers whose ids are not
 *   integers (nchan's `id: TIME:TAG`) and WebSocket messages (no id at all).
 * --ws: WebSocket subscribers (RFC 6455). The request is `GET PATH` with
 *   `Upgrade: websocket`, `Connection: Upgrade`, `Sec-WebSocket-Version: 13`
 *   and the RFC's sample key `dGhlIHNhbXBsZSBub25jZQ==`; the answer must be
 *   `HTTP/1.1 101` carrying its accept value `s3pPLMBiTxaQ9kYGzzhZRbK+xOo=`
 *   (so no SHA-1 here). Then server frames, which must be unmasked: each text
 *   (or binary) message is one frame for the record (fragmented messages are
 *   refused: the stream is closed and the summary says so), a ping gets its
 *   pong (masked, as a client must), a close ends the stream. Needs --key.
 *
 * Design notes.
 * - Why C: the Python client this replaces had to do one recvmsg per frame
 *   (10,000 streams x 10 Hz = 100k/s) on the 2 vCPUs the server runs on; it
 *   could not keep up, and its backlog and its CPU inflated the latency it
 *   measured. This does the same reads with a fraction of the CPU.
 * - Opening: stream i is opened (blocking connect, bounded by SO_SNDTIMEO,
 *   then the request, then non-blocking) once i / OPEN_RATE seconds have
 *   passed; between opens, what has come is read. Every response head must be
 *   `HTTP/1.1 200` with `text/event-stream`, within OPEN_TIMEOUT_S of the last
 *   connect.
 * - When every head is in, one line `heads N T_ALL_NS` goes to stdout
 *   (CLOCK_REALTIME): the orchestrator's window starts there. Reading goes on
 *   until HOLD_S after it (CLOCK_MONOTONIC deadline), then the records are
 *   written to OUT and one JSON line of summary goes to stdout.
 * - The streams stay open after that (nothing read) until stdin reaches EOF
 *   or LINGER_S passes, so the orchestrator can read /metrics and stop the
 *   server with every stream still connected, as before. Every wait is
 *   bounded: the program ends on its own.
 * - Reads: level-triggered epoll, one recvmsg (64 KiB) per ready socket per
 *   wait, SO_TIMESTAMPNS on every socket. A frame ends with a blank line and
 *   may span reads; its record takes the timestamps of the read that completed
 *   it (kernel receive time of those bytes, and the time this read returned).
 *   A frame that starts with `id: N` is recorded; others (comments) are not.
 * - Records (OUT, little-endian, 24 bytes): u32 stream index (open order),
 *   u32 id, i64 kernel receive time ns, i64 user read time ns, both
 *   CLOCK_REALTIME, in read order. Kept in memory, written once at the end,
 *   so no file I/O competes with the measurement.
 * - On stream 0 the `"beat":K` of each frame is checked against its id (the
 *   orchestrator matches ids to the host's publication times by that rule).
 * - Exit: 0 when every stream opened and stayed open; 1 when one failed or
 *   closed (the summary says which and why); 2 on a usage or setup error, a
 *   connect failure or heads not answered in time (the summary has "error").
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RECV_CAP 65536
#define HEAD_CAP 16384
#define FAIL_KEEP 20

typedef struct sse_rec {
  uint32_t stream, id;
  int64_t t_kernel_ns, t_user_ns;
} sse_rec;

enum { ST_WAIT_HEAD, ST_OPEN, ST_CLOSED };

typedef struct sse_stream {
  int fd;
  int state;
  int64_t t_conn_ns, t_head_ns;
  char *carry; /* bytes of an unfinished head or frame */
  size_t len, cap;
} sse_stream;

typedef struct sse_fail {
  uint32_t stream;
  int after_heads;
  char reason[160];
} sse_fail;

typedef struct sse_client {
  sse_stream *s;
  uint32_t n, opened, heads;
  int ep;
  int all_heads;
  sse_rec *recs;
  size_t nrecs, caprecs;
  uint64_t beat_checked, beat_mismatch;
  uint32_t mismatch_id, mismatch_beat;
  uint32_t closed_open, closed_hold;
  sse_fail fails[FAIL_KEEP];
  uint32_t nfails;
  uint64_t waits, wakes, reads; /* epoll_waits, those that returned events, recvmsgs */
  int ws;          /* --ws */
  const char *key; /* --key: `"NAME":` */
  size_t keylen;
  uint64_t pings, nokey;
} sse_client;

#define WS_ACCEPT "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
#define WS_KEY "dGhlIHNhbXBsZSBub25jZQ=="

static int64_t sse_now(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sse_close(sse_client *c, uint32_t i, const char *reason) {
  sse_stream *st = &c->s[i];
  if (st->state == ST_CLOSED)
    return;
  epoll_ctl(c->ep, EPOLL_CTL_DEL, st->fd, NULL);
  close(st->fd);
  st->fd = -1;
  if (c->all_heads)
    c->closed_hold++;
  else
    c->closed_open++;
  if (c->nfails < FAIL_KEEP) {
    sse_fail *f = &c->fails[c->nfails++];
    f->stream = i;
    f->after_heads = c->all_heads;
    snprintf(f->reason, sizeof f->reason, "%s", reason);
  }
  st->state = ST_CLOSED;
  free(st->carry);
  st->carry = NULL;
  st->len = st->cap = 0;
}

static int sse_keep(sse_stream *st, const char *p, size_t n) {
  if (st->len + n > st->cap) {
    size_t cap = st->cap ? st->cap : 256;
    while (cap < st->len + n)
      cap *= 2;
    char *q = realloc(st->carry, cap);
    if (!q)
      return -1;
    st->carry = q;
    st->cap = cap;
  }
  memcpy(st->carry + st->len, p, n);
  st->len += n;
  return 0;
}

static void sse_record(sse_client *c, uint32_t i, uint32_t id, int64_t tk, int64_t tu) {
  if (c->nrecs == c->caprecs) {
    size_t cap = c->caprecs ? c->caprecs * 2 : 1 << 16;
    sse_rec *q = realloc(c->recs, cap * sizeof *q);
    if (!q) {
      fprintf(stderr, "m0_sse_client: out of memory for records\n");
      exit(2);
    }
    c->recs = q;
    c->caprecs = cap;
  }
  c->recs[c->nrecs++] = (sse_rec){i, id, tk, tu};
}

static uint64_t sse_digits(const char *p, const char *end, int *ok) {
  uint64_t v = 0;
  *ok = 0;
  while (p < end && *p >= '0' && *p <= '9') {
    v = v * 10 + (uint64_t)(*p++ - '0');
    *ok = 1;
  }
  return v;
}

/* --key: the number after `"NAME":` in f[0..n), recorded; 0 when absent. */
static int sse_keyed(sse_client *c, uint32_t i, const char *f, size_t n, int64_t tk, int64_t tu) {
  const char *k = memmem(f, n, c->key, c->keylen);
  if (!k) {
    c->nokey++;
    return 0;
  }
  int ok;
  uint32_t v = (uint32_t)sse_digits(k + c->keylen, f + n, &ok);
  if (ok)
    sse_record(c, i, v, tk, tu);
  return ok;
}

static void sse_close(sse_client *c, uint32_t i, const char *reason);

/* --ws: parses every complete server frame of buf[0..n); returns the bytes
 * consumed (the stream may be closed on return). */
static size_t ws_frames(sse_client *c, uint32_t i, const char *buf, size_t n, int64_t tk, int64_t tu) {
  size_t start = 0;
  while (n - start >= 2) {
    const unsigned char *b = (const unsigned char *)buf + start;
    int fin = b[0] & 0x80, op = b[0] & 0x0f;
    if (b[1] & 0x80) {
      sse_close(c, i, "websocket: a masked server frame");
      return n;
    }
    uint64_t len = b[1] & 0x7f;
    size_t hl = 2;
    if (len == 126) {
      if (n - start < 4)
        break;
      len = ((uint64_t)b[2] << 8) | b[3];
      hl = 4;
    } else if (len == 127) {
      if (n - start < 10)
        break;
      len = 0;
      for (int j = 0; j < 8; j++)
        len = (len << 8) | b[2 + j];
      hl = 10;
    }
    if (len > (1u << 24)) {
      sse_close(c, i, "websocket: a frame over 16 MiB");
      return n;
    }
    if (n - start < hl + len)
      break;
    const char *pl = buf + start + hl;
    if (op == 1 || op == 2 || op == 0) {
      if (!fin || op == 0) {
        sse_close(c, i, "websocket: a fragmented message (not supported by this client)");
        return n;
      }
      sse_keyed(c, i, pl, (size_t)len, tk, tu);
    } else if (op == 8) {
      sse_close(c, i, "websocket: close from the server");
      return n;
    } else if (op == 9) { /* pong with the same payload, masked with a zero key */
      unsigned char pong[2 + 4 + 125];
      size_t pn = len <= 125 ? (size_t)len : 125;
      pong[0] = 0x8a;
      pong[1] = (unsigned char)(0x80 | pn);
      memset(pong + 2, 0, 4);
      memcpy(pong + 6, pl, pn);
      (void)!send(c->s[i].fd, pong, 6 + pn, MSG_NOSIGNAL | MSG_DONTWAIT);
      c->pings++;
    }
    start += hl + (size_t)len;
  }
  return start;
}

/* Parses every complete frame of buf[0..n); returns the bytes consumed. */
static size_t sse_frames(sse_client *c, uint32_t i, const char *buf, size_t n, int64_t tk, int64_t tu) {
  size_t start = 0;
  for (;;) {
    const char *e = memmem(buf + start, n - start, "\n\n", 2);
    if (!e)
      break;
    const char *f = buf + start;
    if (c->key) {
      sse_keyed(c, i, f, (size_t)(e - f), tk, tu);
    } else if (e - f >= 4 && memcmp(f, "id: ", 4) == 0) {
      int ok;
      uint32_t id = (uint32_t)sse_digits(f + 4, e, &ok);
      if (ok) {
        sse_record(c, i, id, tk, tu);
        if (i == 0) {
          c->beat_checked++;
          const char *b = memmem(f, (size_t)(e - f), "\"beat\":", 7);
          int bok = 0;
          uint32_t beat = b ? (uint32_t)sse_digits(b + 7, e, &bok) : 0;
          if (bok && beat != id) {
            if (!c->beat_mismatch) {
              c->mismatch_id = id;
              c->mismatch_beat = beat;
            }
            c->beat_mismatch++;
          }
        }
      }
    }
    start = (size_t)(e - buf) + 2;
  }
  return start;
}

static void sse_head(sse_client *c, uint32_t i, const char *buf, size_t n, int64_t tu,
                     size_t *used) {
  sse_stream *st = &c->s[i];
  const char *h = memmem(buf, n, "\r\n\r\n", 4);
  *used = 0;
  if (!h) {
    if (n > HEAD_CAP)
      sse_close(c, i, "response head over 16 KiB");
    return;
  }
  size_t hl = (size_t)(h - buf);
  int good = c->ws ? hl >= 12 && memcmp(buf, "HTTP/1.1 101", 12) == 0 && memmem(buf, hl, WS_ACCEPT, strlen(WS_ACCEPT))
                   : hl >= 12 && memcmp(buf, "HTTP/1.1 200", 12) == 0 && memmem(buf, hl, "text/event-stream", 17);
  if (!good) {
    char reason[160];
    size_t show = hl < 100 ? hl : 100;
    snprintf(reason, sizeof reason, "bad head: %.*s", (int)show, buf);
    for (char *p = reason; *p; p++)
      if (*p == '\r' || *p == '\n' || *p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
        *p = ' ';
    sse_close(c, i, reason);
    return;
  }
  st->state = ST_OPEN;
  st->t_head_ns = tu;
  c->heads++;
  *used = hl + 4;
}

/* One recvmsg on stream i: the head, then frames. */
static void sse_read(sse_client *c, uint32_t i) {
  static char rbuf[RECV_CAP];
  char ctl[CMSG_SPACE(sizeof(struct timespec))];
  sse_stream *st = &c->s[i];
  struct iovec iov = {rbuf, sizeof rbuf};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
  ssize_t r = recvmsg(st->fd, &mh, 0);
  c->reads++;
  int64_t tu = sse_now(CLOCK_REALTIME);
  if (r < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
      return;
    char reason[160];
    snprintf(reason, sizeof reason, "recv: %s", strerror(errno));
    sse_close(c, i, reason);
    return;
  }
  if (r == 0) {
    sse_close(c, i, "closed by the server");
    return;
  }
  int64_t tk = tu;
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS) {
      struct timespec ts;
      memcpy(&ts, CMSG_DATA(cm), sizeof ts);
      tk = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    }
  const char *buf = rbuf;
  size_t n = (size_t)r;
  if (st->len) { /* an unfinished head or frame: parse it with the new bytes */
    if (sse_keep(st, rbuf, n) < 0) {
      sse_close(c, i, "out of memory");
      return;
    }
    buf = st->carry;
    n = st->len;
  }
  size_t off = 0;
  if (st->state == ST_WAIT_HEAD) {
    sse_head(c, i, buf, n, tu, &off);
    if (st->state == ST_CLOSED)
      return;
    if (st->state == ST_WAIT_HEAD) {
      if (buf == rbuf && sse_keep(st, rbuf, n) < 0)
        sse_close(c, i, "out of memory");
      return;
    }
  }
  off += c->ws ? ws_frames(c, i, buf + off, n - off, tk, tu) : sse_frames(c, i, buf + off, n - off, tk, tu);
  if (st->state == ST_CLOSED)
    return;
  size_t rest = n - off;
  if (buf == rbuf) {
    if (rest && sse_keep(st, rbuf + off, rest) < 0)
      sse_close(c, i, "out of memory");
  } else {
    memmove(st->carry, st->carry + off, rest);
    st->len = rest;
  }
}

/* One epoll wait (timeout_ms) and the reads it allows. */
static int sse_pump(sse_client *c, int timeout_ms) {
  struct epoll_event evs[4096];
  int k = epoll_wait(c->ep, evs, 4096, timeout_ms);
  c->waits++;
  c->wakes += k > 0;
  for (int j = 0; j < k; j++)
    sse_read(c, evs[j].data.u32);
  return k < 0 ? 0 : k;
}

static int sse_open(sse_client *c, uint32_t i, const struct sockaddr_in *sa, const char *req, size_t reqlen,
                    char *err, size_t errlen) {
  sse_stream *st = &c->s[i];
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(err, errlen, "socket: %s", strerror(errno));
    return -1;
  }
  int one = 1;
  struct timeval tv = {30, 0};
  setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) < 0) {
    snprintf(err, errlen, "connect: %s", strerror(errno));
    close(fd);
    return -1;
  }
  st->t_conn_ns = sse_now(CLOCK_REALTIME);
  for (size_t off = 0; off < reqlen;) {
    ssize_t w = send(fd, req + off, reqlen - off, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      snprintf(err, errlen, "send: %s", strerror(errno));
      close(fd);
      return -1;
    }
    off += (size_t)w;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  struct epoll_event ev = {.events = EPOLLIN, .data.u32 = i};
  if (epoll_ctl(c->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
    snprintf(err, errlen, "epoll_ctl: %s", strerror(errno));
    close(fd);
    return -1;
  }
  st->fd = fd;
  st->state = ST_WAIT_HEAD;
  c->opened++;
  return 0;
}

static void sse_json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++)
    if (*s == '"' || *s == '\\')
      fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 0x20)
      fputc(' ', f);
    else
      fputc(*s, f);
  fputc('"', f);
}

static double sse_tv_s(struct timeval tv) { return (double)tv.tv_sec + tv.tv_usec * 1e-6; }

/* The summary: one JSON line on stdout. */
static void sse_summary(sse_client *c, const char *error, double open_s, int64_t t_all_ns, int64_t t_end_ns,
                        int wrote) {
  FILE *f = stdout;
  fprintf(f, "{\"streams\":%u,\"streams_opened\":%u,\"heads_ok\":%u,\"frames\":%zu,\"records_written\":%s,"
             "\"closed_while_opening\":%u,\"closed_after_heads\":%u,\"open_s\":%.6f,\"t_all_ns\":%lld,"
             "\"t_end_ns\":%lld,\"id_beat_checked\":%llu,\"id_beat_mismatches\":%llu,",
          c->n, c->opened, c->heads, c->nrecs, wrote ? "true" : "false", c->closed_open, c->closed_hold, open_s,
          (long long)t_all_ns, (long long)t_end_ns, (unsigned long long)c->beat_checked,
          (unsigned long long)c->beat_mismatch);
  if (c->beat_mismatch)
    fprintf(f, "\"id_beat_mismatch_example\":[%u,%u],", c->mismatch_id, c->mismatch_beat);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  fprintf(f, "\"user_s\":%.3f,\"sys_s\":%.3f,\"epoll_waits\":%llu,\"epoll_wakes\":%llu,\"recvmsgs\":%llu,"
             "\"ws\":%s,\"ws_pings\":%llu,\"frames_without_key\":%llu,\"error\":",
          sse_tv_s(ru.ru_utime), sse_tv_s(ru.ru_stime), (unsigned long long)c->waits, (unsigned long long)c->wakes,
          (unsigned long long)c->reads, c->ws ? "true" : "false", (unsigned long long)c->pings,
          (unsigned long long)c->nokey);
  if (error)
    sse_json_str(f, error);
  else
    fputs("null", f);
  fputs(",\"failures\":[", f);
  for (uint32_t j = 0; j < c->nfails; j++) {
    fprintf(f, "%s{\"stream\":%u,\"after_heads\":%s,\"reason\":", j ? "," : "", c->fails[j].stream,
            c->fails[j].after_heads ? "true" : "false");
    sse_json_str(f, c->fails[j].reason);
    fputc('}', f);
  }
  /* Response head after connect, per stream (us; -1: none). */
  fputs("],\"head_us\":[", f);
  for (uint32_t i = 0; i < c->opened; i++) {
    const sse_stream *st = &c->s[i];
    long long us = st->t_head_ns ? (long long)((st->t_head_ns - st->t_conn_ns) / 1000) : -1;
    fprintf(f, "%s%lld", i ? "," : "", us);
  }
  fputs("]}\n", f);
  fflush(f);
}

static int sse_write(const sse_client *c, const char *path) {
  FILE *f = fopen(path, "wb");
  if (!f)
    return -1;
  size_t w = c->nrecs ? fwrite(c->recs, sizeof *c->recs, c->nrecs, f) : 0;
  return (fclose(f) == 0 && w == c->nrecs) ? 0 : -1;
}

static int sse_usage(void) {
  fprintf(stderr, "usage: m0_sse_client [--ws] [--key NAME] PORT STREAMS OPEN_RATE PATH HOLD_S OUT [OPEN_TIMEOUT_S] "
                  "[LINGER_S]\n"
                  "  OPEN_RATE: new streams per second (0: as fast as possible)\n"
                  "  --key NAME: number frames by the decimal after \"NAME\": in them (not their id: line)\n"
                  "  --ws: WebSocket subscribers (needs --key)\n");
  return 2;
}

int main(int argc, char **argv) {
  static sse_client cl;
  sse_client *c = &cl;
  static char keybuf[128];
  while (argc > 1 && strncmp(argv[1], "--", 2) == 0) {
    if (!strcmp(argv[1], "--ws")) {
      c->ws = 1;
      argv++, argc--;
    } else if (!strcmp(argv[1], "--key") && argc > 2 && strlen(argv[2]) < 100 && argv[2][0]) {
      snprintf(keybuf, sizeof keybuf, "\"%s\":", argv[2]);
      c->key = keybuf;
      c->keylen = strlen(keybuf);
      argv += 2, argc -= 2;
    } else {
      return sse_usage();
    }
  }
  if (argc < 7 || argc > 9 || (c->ws && !c->key))
    return sse_usage();
  int port = atoi(argv[1]);
  long nstreams = atol(argv[2]);
  double rate = atof(argv[3]);
  const char *path = argv[4];
  double hold_s = atof(argv[5]);
  const char *out = argv[6];
  double open_timeout = argc > 7 ? atof(argv[7]) : 120.0;
  double linger_s = argc > 8 ? atof(argv[8]) : 60.0;
  if (port <= 0 || port > 65535 || nstreams <= 0 || nstreams > 1000000 || rate < 0 || hold_s < 0 || path[0] != '/')
    return sse_usage();
  _Static_assert(sizeof(sse_rec) == 24, "a record is 24 bytes");

  c->n = (uint32_t)nstreams;
  c->s = calloc(c->n, sizeof *c->s);
  c->ep = epoll_create1(EPOLL_CLOEXEC);
  if (!c->s || c->ep < 0) {
    sse_summary(c, "setup: out of memory or epoll_create1 failed", 0, 0, 0, 0);
    return 2;
  }
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  char req[512];
  int reqlen = c->ws ? snprintf(req, sizeof req,
                                "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                                "Sec-WebSocket-Key: " WS_KEY "\r\nSec-WebSocket-Version: 13\r\n\r\n",
                                path, port)
                     : snprintf(req, sizeof req,
                                "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept: text/event-stream\r\n\r\n", path, port);
  if (reqlen <= 0 || (size_t)reqlen >= sizeof req)
    return sse_usage();

  /* Opening, paced: stream i is due at i / rate s. */
  int64_t m0 = sse_now(CLOCK_MONOTONIC);
  char err[256], msg[512];
  for (uint32_t i = 0; i < c->n; i++) {
    if (rate > 0) {
      int64_t due = m0 + (int64_t)(i / rate * 1e9);
      for (int64_t now = sse_now(CLOCK_MONOTONIC); now < due; now = sse_now(CLOCK_MONOTONIC)) {
        int64_t wait = due - now;
        sse_pump(c, wait > 500000 ? (int)((wait + 999999) / 1000000) : 0);
        if (wait <= 500000)
          break;
      }
    } else {
      sse_pump(c, 0);
    }
    if (sse_open(c, i, &sa, req, (size_t)reqlen, err, sizeof err) < 0) {
      snprintf(msg, sizeof msg, "stream %u: %s after %.1f s; %u heads so far", i, err,
               (sse_now(CLOCK_MONOTONIC) - m0) * 1e-9, c->heads);
      sse_summary(c, msg, (sse_now(CLOCK_MONOTONIC) - m0) * 1e-9, 0, 0, 0);
      return 2;
    }
    if (i && i % 1000 == 0)
      fprintf(stderr, "m0_sse_client:   %u streams connected, %u answered, %.1f s\n", i, c->heads,
              (sse_now(CLOCK_MONOTONIC) - m0) * 1e-9);
  }
  int64_t head_deadline = sse_now(CLOCK_MONOTONIC) + (int64_t)(open_timeout * 1e9);
  while (c->heads + c->closed_open < c->n) {
    if (sse_now(CLOCK_MONOTONIC) > head_deadline) {
      snprintf(msg, sizeof msg, "streams not answered within %g s of the last connect: %u of %u", open_timeout,
               c->n - c->heads - c->closed_open, c->n);
      sse_summary(c, msg, (sse_now(CLOCK_MONOTONIC) - m0) * 1e-9, 0, 0, 0);
      return 2;
    }
    sse_pump(c, 50);
  }
  int64_t t_all = sse_now(CLOCK_REALTIME);
  int64_t m_all = sse_now(CLOCK_MONOTONIC);
  double open_s = (m_all - m0) * 1e-9;
  c->all_heads = 1;
  if (c->closed_open) {
    sse_summary(c, NULL, open_s, t_all, t_all, 0);
    return 1;
  }
  printf("heads %u %lld %.6f\n", c->heads, (long long)t_all, open_s);
  fflush(stdout);

  /* Holding: read everything until HOLD_S after the last head. */
  int64_t end = m_all + (int64_t)(hold_s * 1e9);
  for (int64_t now = m_all; now < end; now = sse_now(CLOCK_MONOTONIC)) {
    int64_t left = (end - now + 999999) / 1000000;
    sse_pump(c, left < 50 ? (int)left : 50);
  }
  int64_t t_end = sse_now(CLOCK_REALTIME);
  int wrote = sse_write(c, out) == 0;
  sse_summary(c, wrote ? NULL : "could not write the records", open_s, t_all, t_end, wrote);

  /* Linger with every stream open until stdin closes (bounded). */
  struct pollfd pfd = {.fd = 0, .events = POLLIN};
  int64_t linger_end = sse_now(CLOCK_MONOTONIC) + (int64_t)(linger_s * 1e9);
  for (int64_t now = sse_now(CLOCK_MONOTONIC); now < linger_end; now = sse_now(CLOCK_MONOTONIC)) {
    int left = (int)((linger_end - now) / 1000000) + 1;
    int k = poll(&pfd, 1, left);
    if (k > 0) {
      char b[256];
      ssize_t r = read(0, b, sizeof b);
      if (r <= 0)
        break;
    } else if (k < 0 && errno != EINTR) {
      break;
    }
  }
  return !wrote ? 2 : (c->closed_hold ? 1 : 0);
}
