/* bench/floor_fanout.c — the kernel's floor under bench/run_streams: N held
 * loopback TCP subscribers, one write per subscriber per frame, nothing else.
 *
 *   m0_floor_fanout sse|ws write|writev|send THREADS
 *
 * Design notes.
 * - Listens on 127.0.0.1, an ephemeral port, and prints `listening PORT` on
 *   stdout. Each connection's request is read up to its blank line (at most
 *   4 KiB, anything in it accepted) and answered with a fixed head: `200`
 *   with `text/event-stream` (sse), or `101` with the accept value of the
 *   RFC 6455 sample key, which is the key bench/sse_client.c sends (ws; no
 *   SHA-1 here: this is a floor, not a server). The connection then belongs
 *   to thread (index % THREADS).
 * - Every line on stdin is one frame's data, published to every connection
 *   held: sse `id: K\ndata: LINE\n\n` (K counts from 1), ws one unmasked
 *   text frame whose payload is LINE. `write`: the frame is built once and
 *   written with one write(2) per socket; `writev`: one writev(2) per socket
 *   of its pieces (the id line, the data, the end; or the frame header and
 *   the payload), as a server that does not copy a frame per subscriber
 *   writes it; `send`: one send(2) per socket of the frame built once
 *   (MSG_DONTWAIT | MSG_NOSIGNAL), which enters the socket layer without
 *   the file layer's write path.
 * - The main thread accepts, reads requests and stdin; a frame is handed to
 *   the THREADS writer threads by a byte on each one's pipe, and the next
 *   line is not taken before every thread has written the frame (the frames
 *   are 100 ms apart: they never wait for each other). Connections are added
 *   to a thread's list only between frames, so the lists need no lock.
 * - A write that would block (the subscriber's socket buffer is full) is not
 *   retried: the frame is lost for that subscriber and counted (`short`),
 *   so the floor never does more work than one write per subscriber.
 * - Ends at stdin's EOF: prints one JSON line (frames, writes, short writes,
 *   connections, user and system CPU seconds) and exits 0.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define FLOOR_MAX_THREADS 16
#define FLOOR_REQ_CAP 4096

typedef struct floor_thread {
  pthread_t tid;
  int go[2], done[2]; /* pipes: a byte per frame each way */
  int *fds;
  size_t n, cap;
  uint64_t writes, shorts;
} floor_thread;

typedef struct floor_conn { /* a connection whose request is not complete yet */
  int fd;
  size_t len;
  char req[FLOOR_REQ_CAP];
} floor_conn;

static int floor_ws, floor_vec, floor_send;
static char floor_frame[70000];
static size_t floor_len;
static struct iovec floor_iov[3];
static int floor_niov;

static void *floor_run(void *arg) {
  floor_thread *t = arg;
  char b;
  while (read(t->go[0], &b, 1) == 1) {
    if (b == 'q')
      break;
    for (size_t i = 0; i < t->n; i++) {
      ssize_t w = floor_vec    ? writev(t->fds[i], floor_iov, floor_niov)
                  : floor_send ? send(t->fds[i], floor_frame, floor_len, MSG_DONTWAIT | MSG_NOSIGNAL)
                               : write(t->fds[i], floor_frame, floor_len);
      t->writes++;
      if (w != (ssize_t)floor_len)
        t->shorts++;
    }
    (void)!write(t->done[1], "d", 1);
  }
  return NULL;
}

/* Builds the frame for LINE (n bytes) in floor_frame and floor_iov. */
static void floor_build(uint64_t k, const char *line, size_t n) {
  static char pre[64], post[2] = {'\n', '\n'};
  static unsigned char wh[10];
  if (floor_ws) {
    size_t hl = 2;
    wh[0] = 0x81;
    if (n < 126) {
      wh[1] = (unsigned char)n;
    } else {
      wh[1] = 126;
      wh[2] = (unsigned char)(n >> 8);
      wh[3] = (unsigned char)n;
      hl = 4;
    }
    floor_iov[0] = (struct iovec){wh, hl};
    floor_iov[1] = (struct iovec){(void *)line, n};
    floor_niov = 2;
  } else {
    int pl = snprintf(pre, sizeof pre, "id: %llu\ndata: ", (unsigned long long)k);
    floor_iov[0] = (struct iovec){pre, (size_t)pl};
    floor_iov[1] = (struct iovec){(void *)line, n};
    floor_iov[2] = (struct iovec){post, 2};
    floor_niov = 3;
  }
  floor_len = 0;
  for (int i = 0; i < floor_niov; i++) {
    memcpy(floor_frame + floor_len, floor_iov[i].iov_base, floor_iov[i].iov_len);
    floor_len += floor_iov[i].iov_len;
  }
}

static const char FLOOR_SSE_HEAD[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n";
static const char FLOOR_WS_HEAD[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                                    "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";

int main(int argc, char **argv) {
  if (argc != 4 || (strcmp(argv[1], "sse") && strcmp(argv[1], "ws")) ||
      (strcmp(argv[2], "write") && strcmp(argv[2], "writev") && strcmp(argv[2], "send")) || atoi(argv[3]) < 1 ||
      atoi(argv[3]) > FLOOR_MAX_THREADS) {
    fprintf(stderr, "usage: m0_floor_fanout sse|ws write|writev|send THREADS (1..%d)\n", FLOOR_MAX_THREADS);
    return 2;
  }
  floor_ws = !strcmp(argv[1], "ws");
  floor_vec = !strcmp(argv[2], "writev");
  floor_send = !strcmp(argv[2], "send");
  int nth = atoi(argv[3]);
  static floor_thread th[FLOOR_MAX_THREADS];
  for (int i = 0; i < nth; i++) {
    if (pipe(th[i].go) < 0 || pipe(th[i].done) < 0 || pthread_create(&th[i].tid, NULL, floor_run, &th[i]) != 0) {
      perror("m0_floor_fanout: thread");
      return 2;
    }
  }
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t sl = sizeof sa;
  if (bind(ls, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(ls, 4096) < 0 ||
      getsockname(ls, (struct sockaddr *)&sa, &sl) < 0) {
    perror("m0_floor_fanout: listen");
    return 2;
  }
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
  epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
  static floor_conn stdin_mark;
  ev.data.ptr = &stdin_mark;
  epoll_ctl(ep, EPOLL_CTL_ADD, 0, &ev);
  printf("listening %d\n", ntohs(sa.sin_port));
  fflush(stdout);

  uint64_t conns = 0, frames = 0;
  static char in[65536];
  size_t inlen = 0;
  int eof = 0;
  const char *head = floor_ws ? FLOOR_WS_HEAD : FLOOR_SSE_HEAD;
  size_t headlen = strlen(head);
  while (!eof) {
    struct epoll_event evs[256];
    int k = epoll_wait(ep, evs, 256, -1);
    for (int j = 0; j < k; j++) {
      floor_conn *c = evs[j].data.ptr;
      if (!c) { /* accept what is there */
        for (;;) {
          int fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (fd < 0)
            break;
          floor_conn *nc = calloc(1, sizeof *nc);
          nc->fd = fd;
          struct epoll_event e2 = {.events = EPOLLIN, .data.ptr = nc};
          epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e2);
        }
      } else if (c == &stdin_mark) { /* frames: one per line */
        ssize_t r = read(0, in + inlen, sizeof in - 1 - inlen);
        if (r <= 0) {
          eof = 1;
          break;
        }
        inlen += (size_t)r;
        char *nl;
        while ((nl = memchr(in, '\n', inlen))) {
          size_t n = (size_t)(nl - in);
          floor_build(++frames, in, n);
          for (int i = 0; i < nth; i++)
            (void)!write(th[i].go[1], "f", 1);
          char b;
          for (int i = 0; i < nth; i++)
            (void)!read(th[i].done[0], &b, 1);
          memmove(in, nl + 1, inlen - n - 1);
          inlen -= n + 1;
        }
        if (inlen == sizeof in - 1)
          inlen = 0;
      } else { /* a request: up to its blank line */
        ssize_t r = read(c->fd, c->req + c->len, sizeof c->req - 1 - c->len);
        if (r <= 0 && errno != EAGAIN) {
          epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
          close(c->fd);
          free(c);
          continue;
        }
        if (r > 0)
          c->len += (size_t)r;
        if (memmem(c->req, c->len, "\r\n\r\n", 4) || c->len == sizeof c->req - 1) {
          epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
          (void)!write(c->fd, head, headlen);
          floor_thread *t = &th[conns++ % (uint64_t)nth];
          if (t->n == t->cap) {
            t->cap = t->cap ? t->cap * 2 : 1024;
            t->fds = realloc(t->fds, t->cap * sizeof *t->fds);
          }
          t->fds[t->n++] = c->fd;
          free(c);
        }
      }
    }
  }
  uint64_t writes = 0, shorts = 0;
  for (int i = 0; i < nth; i++) {
    (void)!write(th[i].go[1], "q", 1);
    pthread_join(th[i].tid, NULL);
    writes += th[i].writes;
    shorts += th[i].shorts;
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("{\"frames\":%llu,\"writes\":%llu,\"short\":%llu,\"connections\":%llu,\"user_s\":%.3f,\"sys_s\":%.3f}\n",
         (unsigned long long)frames, (unsigned long long)writes, (unsigned long long)shorts, (unsigned long long)conns,
         ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6, ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6);
  return 0;
}
