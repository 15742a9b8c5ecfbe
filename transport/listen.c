#include "transport/listen.h"

#include "base/errors.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

bool m0__parse_host(const char *host, struct sockaddr_storage *ss, socklen_t *len) {
  memset(ss, 0, sizeof *ss);
  char buf[64];
  size_t n = strlen(host);
  if (!strcmp(host, "localhost")) host = "127.0.0.1";
  if (n >= 2 && host[0] == '[' && host[n - 1] == ']' && n - 2 < sizeof buf) {
    memcpy(buf, host + 1, n - 2);
    buf[n - 2] = 0;
    host = buf;
  }
  struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
  if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    *len = sizeof *v4;
    return true;
  }
  if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    *len = sizeof *v6;
    return true;
  }
  return false;
}

int m0__listen(const char *host, int port, int backlog, int *bound_port, char *err, size_t errlen) {
  struct sockaddr_storage ss;
  socklen_t len;
  if (!m0__parse_host(host, &ss, &len)) {
    snprintf(err, errlen, "cannot read the address %s", host);
    return M0__EINVALID;
  }
  if (ss.ss_family == AF_INET) ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
  else ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(err, errlen, "socket: %s", strerror(errno));
    return M0__ESYSTEM;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, backlog) != 0) {
    snprintf(err, errlen, "cannot bind %s port %d: %s", host, port, strerror(errno));
    close(fd);
    return M0__EBIND;
  }
  *bound_port = m0__listen_port(fd);
  return fd;
}

int m0__listen_port(int fd) {
  struct sockaddr_storage got;
  socklen_t glen = sizeof got;
  if (getsockname(fd, (struct sockaddr *)&got, &glen) != 0) return M0__ESYSTEM;
  if (got.ss_family == AF_INET) return ntohs(((struct sockaddr_in *)&got)->sin_port);
  if (got.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&got)->sin6_port);
  return M0__EINVALID; /* a socket without a port (unix) */
}

void m0__listen_host(int fd, const char *fallback, char *out, size_t n) {
  struct sockaddr_storage got = {0}; /* a descriptor with no address leaves AF_UNSPEC */
  socklen_t glen = sizeof got;
  getsockname(fd, (struct sockaddr *)&got, &glen);
  char a[INET6_ADDRSTRLEN];
  if (got.ss_family == AF_INET)
    snprintf(out, n, "%s", inet_ntop(AF_INET, &((struct sockaddr_in *)&got)->sin_addr, a, sizeof a));
  else if (got.ss_family == AF_INET6)
    snprintf(out, n, "[%s]", inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&got)->sin6_addr, a, sizeof a));
  else
    snprintf(out, n, "%s", fallback);
}
