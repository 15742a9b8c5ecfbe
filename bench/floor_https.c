/* bench/floor_https.c — the floor under one HTTPS loop: what a keep-alive
 * request, a full TLS handshake and a resumed one cost a server that does
 * nothing else. Not a server: one process, one thread, level-triggered
 * epoll, non-blocking sockets; it parses no more than the blank line that
 * ends each request and answers every one with ramp's 15-byte JSON (the same
 * bytes as bench/floor_http.c, a fixed Date), with no timeouts, limits,
 * drain or close_notify. bench/run_https runs it as the diagnostic arms
 * floor and floor-mem beside m0 and nginx, under the same pinning, clients
 * and CPU accounting, so a miss against nginx has a floor measured in the
 * same run.
 *
 *   m0_floor_https socket|mem PORT CERTFILE KEYFILE   (PORT 0: an ephemeral port, printed)
 *
 * socket: OpenSSL reads and writes the socket itself (SSL_set_fd), as nginx
 *   does: the cheapest way OpenSSL has. Read-ahead is on, so one recv takes
 *   what the socket holds (without it OpenSSL reads a record's 5-byte header
 *   and its body with two); SSL_has_pending says when to stop reading.
 * mem: m0's way (http/tls.c, http/tls_io.c): two memory BIOs per
 *   connection; the loop recv()s the ciphertext into its own buffer and
 *   copies it into the read BIO, and copies what the write BIO holds into
 *   its buffer and send()s it. floor-mem against floor is what that copy
 *   costs; m0 against floor-mem is what m0 costs beyond it.
 *
 * The TLS settings are those of m0's context where a client can see them
 * (TLS 1.2 and 1.3, one TLS 1.3 ticket per handshake, tickets as the only
 * resumption: the server's session cache off), with OpenSSL's own ticket
 * keys (SSL_CTX default) and cipher lists; no SNI or ALPN callback (the
 * bench's clients send neither). A response the socket does not take at once
 * closes the connection: this floor does not queue (15 bytes never wait). */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static const char RESP[] = "HTTP/1.1 200 OK\r\nServer: floor\r\nDate: Mon, 30 Nov 2026 00:00:00 GMT\r\n"
                           "Content-Length: 15\r\nContent-Type: application/json\r\n\r\n{\"route\":\"now\"}";
#define RLEN (sizeof RESP - 1)
#define MAXFD 8192
#define DEPTH_MAX 64 /* requests answered per read; pipelining deeper is refused */

typedef struct floor_conn {
  SSL *ssl;
  BIO *rbio, *wbio; /* mem mode: owned by ssl */
  int tail;         /* how much of "\r\n\r\n" the last read ended with */
} floor_conn;

typedef struct floor_loop {
  SSL_CTX *ctx;
  int mem; /* 1: memory BIOs, copied to and from the socket here */
  char plain[16384];
  char cipher[65536];        /* mem mode: what recv got, what send gives */
  char out[DEPTH_MAX * RLEN]; /* DEPTH_MAX copies of RESP */
  floor_conn conn[MAXFD];
} floor_loop;

static void floor_stop(int sig) {
  (void)sig;
  _exit(0);
}

/* Counts the requests a read completed: each ends with an empty line. */
static int floor_requests(floor_conn *c, const char *p, int n) {
  static const char end[] = "\r\n\r\n";
  int k = c->tail, count = 0;
  for (int i = 0; i < n; i++) {
    k = p[i] == end[k] ? k + 1 : (p[i] == '\r' ? 1 : 0);
    if (k == 4) count++, k = 0;
  }
  c->tail = k;
  return count;
}

static SSL_CTX *floor_ctx(const char *cert, const char *key) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
  if (!ctx) return NULL;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_num_tickets(ctx, 1);
  SSL_CTX_set_read_ahead(ctx, 1);
  if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 || SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(ctx) != 1) {
    ERR_print_errors_fp(stderr);
    SSL_CTX_free(ctx);
    return NULL;
  }
  return ctx;
}

static int floor_listen(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 4096) || getsockname(fd, (struct sockaddr *)&a, &len)) {
    perror("m0_floor_https: listen");
    exit(1);
  }
  fprintf(stderr, "m0_floor_https: listening on https://127.0.0.1:%d (pid %d)\n", ntohs(a.sin_port), (int)getpid());
  return fd;
}

static void floor_drop(floor_loop *f, int fd) {
  SSL_free(f->conn[fd].ssl);
  f->conn[fd].ssl = NULL;
  ERR_clear_error(); /* a failed connection's reasons: not the next one's */
  close(fd);
}

/* A new connection's TLS state: 0, or -1 (dropped). */
static int floor_admit(floor_loop *f, int fd) {
  floor_conn *c = &f->conn[fd];
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  c->tail = 0;
  c->ssl = SSL_new(f->ctx);
  if (!c->ssl) return floor_drop(f, fd), -1;
  if (f->mem) {
    c->rbio = BIO_new(BIO_s_mem());
    c->wbio = BIO_new(BIO_s_mem());
    if (!c->rbio || !c->wbio) {
      BIO_free(c->rbio);
      BIO_free(c->wbio);
      return floor_drop(f, fd), -1;
    }
    BIO_set_mem_eof_return(c->rbio, -1); /* empty: "read again", not EOF */
    SSL_set_bio(c->ssl, c->rbio, c->wbio);
  } else if (SSL_set_fd(c->ssl, fd) != 1) {
    return floor_drop(f, fd), -1;
  }
  SSL_set_accept_state(c->ssl);
  return 0;
}

/* SSL_read until OpenSSL wants more from the socket (the handshake runs
 * inside it), each request answered by one SSL_write: 0, or -1 to close. */
static int floor_serve(floor_loop *f, floor_conn *c) {
  for (;;) {
    int r = SSL_read(c->ssl, f->plain, sizeof f->plain);
    if (r <= 0) return SSL_get_error(c->ssl, r) == SSL_ERROR_WANT_READ ? 0 : -1;
    int k = floor_requests(c, f->plain, r);
    if (k > DEPTH_MAX || (k > 0 && SSL_write(c->ssl, f->out, (int)(k * RLEN)) != (int)(k * RLEN))) return -1;
    if (!f->mem && !SSL_has_pending(c->ssl)) return 0; /* the socket is read again when epoll says so */
  }
}

/* mem mode: everything the write BIO holds, sent: 0, or -1 (a short send). */
static int floor_flush(floor_loop *f, floor_conn *c, int fd) {
  int n;
  while ((n = BIO_read(c->wbio, f->cipher, sizeof f->cipher)) > 0)
    if (send(fd, f->cipher, (size_t)n, MSG_NOSIGNAL) != n) return -1;
  return 0;
}

/* A readable connection: 0, or -1 to close. */
static int floor_readable(floor_loop *f, int fd) {
  floor_conn *c = &f->conn[fd];
  if (!f->mem) return floor_serve(f, c);
  ssize_t n = recv(fd, f->cipher, sizeof f->cipher, 0);
  if (n < 0 && errno == EAGAIN) return 0;
  if (n <= 0 || BIO_write(c->rbio, f->cipher, (int)n) != n) return -1;
  int rv = floor_serve(f, c);
  return floor_flush(f, c, fd) || rv;
}

static void floor_accept(floor_loop *f, int ep, int lfd) {
  int c;
  while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
    if (c >= MAXFD) {
      close(c);
      continue;
    }
    struct epoll_event e = {.events = EPOLLIN, .data.fd = c};
    if (floor_admit(f, c) == 0) epoll_ctl(ep, EPOLL_CTL_ADD, c, &e);
  }
}

static _Noreturn void floor_run(floor_loop *f, int lfd) {
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd}, evs[512];
  epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
  for (;;) {
    int n = epoll_wait(ep, evs, 512, -1);
    for (int i = 0; i < n; i++) {
      int fd = evs[i].data.fd;
      if (fd == lfd) floor_accept(f, ep, lfd);
      else if (floor_readable(f, fd) != 0) floor_drop(f, fd); /* the peer left, or broke TLS */
    }
  }
}

int main(int argc, char **argv) {
  if (argc != 5 || (strcmp(argv[1], "socket") && strcmp(argv[1], "mem"))) {
    fprintf(stderr, "usage: m0_floor_https socket|mem PORT CERTFILE KEYFILE\n");
    return 2;
  }
  floor_loop *f = calloc(1, sizeof *f);
  if (!f || !(f->ctx = floor_ctx(argv[3], argv[4]))) {
    fprintf(stderr, "m0_floor_https: cannot use %s and %s\n", argv[3], argv[4]);
    return 1;
  }
  f->mem = !strcmp(argv[1], "mem");
  for (int i = 0; i < DEPTH_MAX; i++) memcpy(f->out + (size_t)i * RLEN, RESP, RLEN);
  signal(SIGTERM, floor_stop);
  signal(SIGINT, floor_stop);
  signal(SIGPIPE, SIG_IGN); /* the socket BIO write()s: a peer gone is an error, not a signal */
  floor_run(f, floor_listen(atoi(argv[2])));
}
