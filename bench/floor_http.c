/* bench/floor_http.c — the floor under one loop: what answering GET /x/now
 * costs a server that does nothing else, with readiness (epoll) or with
 * completions (io_uring). Not a server: it parses no more than the blank line
 * that ends each request, answers every request with ramp's exact bytes (a
 * fixed Date), and has no timeouts, limits or drain. bench/run_loop runs it as
 * the diagnostic arms floor-epoll and floor-uring beside m0 and nginx, so the
 * question "what would io_uring buy the loop here" has a measured answer in
 * the same run, under the same pinning and CPU accounting.
 *
 *   m0_floor_http epoll|uring PORT     (0 = an ephemeral port, printed)
 *   m0_floor_http epoll|uring PORT LOOPS [CPU,CPU,...]
 *
 * epoll: level-triggered, one recv and one send per readable connection, as
 * nginx and libuv do per request. uring: recv and send as io_uring requests,
 * every send and the next recv queued per completion and submitted with the
 * wait, one io_uring_enter per batch (multishot accept).
 *
 * LOOPS (bench/run_scale's floor arm, the floor under N loops): LOOPS
 * processes, each its own SO_REUSEPORT listener on the same port (the
 * kernel's hash spreads the connections) and the loop above, loop i pinned to
 * the i-th CPU of the list (round robin; none: wherever the caller's taskset
 * lets it run), under a parent that only waits: SIGTERM or SIGINT to it stops
 * them all (exit 0), a loop that dies stops the rest (exit 1). Processes, not
 * threads, because that is nginx's shape (`worker_processes N`, `listen ...
 * reuseport`, worker_cpu_affinity: the comparator it stands under) and m0's
 * --workers: nothing shared, no lock, no address space in common, so the
 * floor has nothing to lose as loops are added but what the kernel itself
 * costs (the hash, the caches, the scheduler); m0 --threads' loops sharing one
 * process can only cost more. LOOPS = 1 is the same shape with one loop, the
 * base of the floor's N-over-1 efficiency. Without LOOPS the program is the
 * one-process responder above, unchanged. */
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static const char RESP[] = "HTTP/1.1 200 OK\r\nServer: floor\r\nDate: Mon, 30 Nov 2026 00:00:00 GMT\r\n"
                           "Content-Length: 15\r\nContent-Type: application/json\r\n\r\n{\"route\":\"now\"}";
#define RLEN (sizeof RESP - 1)
#define MAXFD 8192
#define DEPTH_MAX 64 /* requests answered per read; pipelining deeper is refused */
#define LOOPS_MAX 256

static char out[DEPTH_MAX * RLEN]; /* DEPTH_MAX copies of RESP */
static struct {
  char buf[4096];
  int tail; /* how much of "\r\n\r\n" the last read ended with */
} conn[MAXFD];

/* Counts the requests a read completed: each ends with an empty line. */
static int requests(int fd, const char *p, long n) {
  static const char end[] = "\r\n\r\n";
  int k = conn[fd].tail, count = 0;
  for (long i = 0; i < n; i++) {
    k = p[i] == end[k] ? k + 1 : (p[i] == '\r' ? 1 : 0);
    if (k == 4) count++, k = 0;
  }
  conn[fd].tail = k;
  return count;
}

static void stop(int sig) {
  (void)sig;
  _exit(0);
}

/* A listening socket on 127.0.0.1:*port (0: an ephemeral one, written back);
 * reuseport: one of several on that port (SO_REUSEPORT). */
static int floor_listen(int *port, int reuseport) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)*port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (reuseport) setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 4096) || getsockname(fd, (struct sockaddr *)&a, &len)) {
    perror("m0_floor_http: listen");
    exit(1);
  }
  *port = ntohs(a.sin_port);
  return fd;
}

static int listener(int port) {
  int fd = floor_listen(&port, 0);
  fprintf(stderr, "m0_floor_http: listening on http://127.0.0.1:%d (pid %d)\n", port, (int)getpid());
  return fd;
}

static void admit(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  conn[fd].tail = 0;
}

static _Noreturn void run_epoll(int lfd) {
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd}, evs[512];
  epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
  for (;;) {
    int n = epoll_wait(ep, evs, 512, -1);
    for (int i = 0; i < n; i++) {
      int fd = evs[i].data.fd, c;
      if (fd == lfd) {
        while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
          if (c >= MAXFD) { close(c); continue; }
          admit(c);
          struct epoll_event e = {.events = EPOLLIN, .data.fd = c};
          epoll_ctl(ep, EPOLL_CTL_ADD, c, &e);
        }
        continue;
      }
      ssize_t r = recv(fd, conn[fd].buf, sizeof conn[fd].buf, 0);
      if (r < 0 && errno == EAGAIN) continue;
      int k = r > 0 ? requests(fd, conn[fd].buf, r) : -1;
      if (k < 0 || k > DEPTH_MAX || (k > 0 && send(fd, out, (size_t)k * RLEN, MSG_NOSIGNAL) != (ssize_t)(k * RLEN)))
        close(fd); /* the peer left, pipelined too deep, or a short send: this floor does not queue */
    }
  }
}

enum { OP_ACCEPT = 1, OP_RECV, OP_SEND };
static struct io_uring ring;

static void queue(int op, int fd, void *p, size_t n) {
  struct io_uring_sqe *s = io_uring_get_sqe(&ring);
  if (!s) { /* the ring is full: hand what is queued to the kernel */
    io_uring_submit(&ring);
    s = io_uring_get_sqe(&ring);
  }
  if (op == OP_ACCEPT) io_uring_prep_multishot_accept(s, fd, NULL, NULL, SOCK_CLOEXEC);
  if (op == OP_RECV) io_uring_prep_recv(s, fd, p, n, 0);
  if (op == OP_SEND) {
    io_uring_prep_send(s, fd, p, n, MSG_NOSIGNAL);
    s->flags |= IOSQE_CQE_SKIP_SUCCESS; /* a failed send still completes, and is counted below */
  }
  io_uring_sqe_set_data64(s, (uint64_t)op << 32 | (uint32_t)fd);
}

static int run_uring(int lfd) {
  struct io_uring_params p = {.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN};
  int rc = io_uring_queue_init_params(4096, &ring, &p);
  if (rc < 0) {
    fprintf(stderr, "m0_floor_http: io_uring_queue_init: %s\n", strerror(-rc));
    return 1;
  }
  queue(OP_ACCEPT, lfd, NULL, 0);
  for (;;) {
    io_uring_submit_and_wait(&ring, 1);
    struct io_uring_cqe *cqe;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&ring, head, cqe) {
      uint64_t d = io_uring_cqe_get_data64(cqe);
      int op = (int)(d >> 32), fd = (int)(uint32_t)d, res = cqe->res;
      seen++;
      if (op == OP_ACCEPT) {
        if (res >= MAXFD) close(res);
        else if (res >= 0) admit(res), queue(OP_RECV, res, conn[res].buf, sizeof conn[res].buf);
        if (!(cqe->flags & IORING_CQE_F_MORE)) queue(OP_ACCEPT, lfd, NULL, 0);
      } else if (op == OP_RECV) {
        int k = res > 0 ? requests(fd, conn[fd].buf, res) : -1;
        if (k < 0 || k > DEPTH_MAX) {
          close(fd);
          continue;
        }
        if (k > 0) queue(OP_SEND, fd, out, (size_t)k * RLEN); /* sends run in order, before the next recv */
        queue(OP_RECV, fd, conn[fd].buf, sizeof conn[fd].buf);
      } else if (op == OP_SEND) {
        shutdown(fd, SHUT_RDWR); /* a failed send: its pending recv ends, and closes */
      }
    }
    io_uring_cq_advance(&ring, seen);
  }
}

/* "0,1,3" into cpu[]: how many, or -1 when it is not such a list. */
static int floor_cpus(const char *text, int *cpu) {
  int n = 0;
  for (const char *p = text; *p && n < LOOPS_MAX; n++) {
    char *end;
    long c = strtol(p, &end, 10);
    if (end == p || c < 0 || c >= CPU_SETSIZE || (*end && *end != ',')) return -1;
    cpu[n] = (int)c;
    p = *end ? end + 1 : end;
  }
  return n;
}

/* One loop of several, in its own process: its listener only, on its CPU. */
static _Noreturn void floor_child(const char *mode, const int *lfd, int i, int loops, int cpu) {
  sigset_t all;
  prctl(PR_SET_PDEATHSIG, SIGTERM); /* a parent killed outright takes its loops with it */
  for (int j = 0; j < loops; j++)
    if (j != i) close(lfd[j]);
  if (cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set)) {
      fprintf(stderr, "m0_floor_http: loop %d on CPU %d: %s\n", i, cpu, strerror(errno));
      _exit(1);
    }
  }
  signal(SIGTERM, stop);
  signal(SIGINT, stop);
  sigfillset(&all);
  sigprocmask(SIG_UNBLOCK, &all, NULL);
  if (!strcmp(mode, "epoll")) run_epoll(lfd[i]);
  _exit(run_uring(lfd[i]));
}

/* LOOPS processes on one port, SO_REUSEPORT each; the parent waits for a
 * signal (SIGCHLD included: a loop that died) and then stops them all. */
static int run_loops(const char *mode, int port, int loops, const int *cpu, int ncpu) {
  int lfd[LOOPS_MAX], sig = 0, failed = 0;
  pid_t pid[LOOPS_MAX];
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGCHLD);
  sigprocmask(SIG_BLOCK, &set, NULL); /* before the fork: no signal is lost between the two */
  for (int i = 0; i < loops; i++) lfd[i] = floor_listen(&port, 1);
  for (int i = 0; i < loops; i++) {
    pid[i] = fork();
    if (pid[i] < 0) {
      perror("m0_floor_http: fork");
      loops = i, failed = 1;
      break;
    }
    if (pid[i] == 0) floor_child(mode, lfd, i, loops, ncpu ? cpu[i % ncpu] : -1);
  }
  for (int i = 0; i < loops; i++) close(lfd[i]);
  if (!failed) {
    fprintf(stderr, "m0_floor_http: listening on http://127.0.0.1:%d (pid %d, %d loops, SO_REUSEPORT)\n", port,
            (int)getpid(), loops);
    sigwait(&set, &sig);
  }
  for (int i = 0; i < loops; i++) kill(pid[i], SIGTERM);
  for (int i = 0; i < loops; i++) waitpid(pid[i], NULL, 0);
  return failed || sig == SIGCHLD;
}

int main(int argc, char **argv) {
  int cpu[LOOPS_MAX], ncpu = 0, loops = argc > 3 ? atoi(argv[3]) : 0;
  if (argc > 4) ncpu = floor_cpus(argv[4], cpu);
  if (argc < 3 || argc > 5 || (strcmp(argv[1], "epoll") && strcmp(argv[1], "uring")) ||
      (argc > 3 && (loops < 1 || loops > LOOPS_MAX)) || ncpu < 0) {
    fprintf(stderr, "usage: m0_floor_http epoll|uring PORT [LOOPS [CPU,CPU,...]]\n");
    return 2;
  }
  for (int i = 0; i < DEPTH_MAX; i++) memcpy(out + (size_t)i * RLEN, RESP, RLEN);
  if (loops) return run_loops(argv[1], atoi(argv[2]), loops, cpu, ncpu);
  signal(SIGTERM, stop);
  signal(SIGINT, stop);
  int lfd = listener(atoi(argv[2]));
  if (!strcmp(argv[1], "epoll")) run_epoll(lfd);
  return run_uring(lfd);
}
