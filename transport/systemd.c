#include "transport/systemd.h"

#include "base/errors.h"

#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int m0__sd_notify(const char *state) {
  const char *path = getenv("NOTIFY_SOCKET");
  if (!path || !path[0]) return M0__ENOTFOUND; /* not under systemd's notify */
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  size_t n = strlen(path);
  if (n >= sizeof sa.sun_path || (path[0] != '/' && path[0] != '@')) return M0__EINVALID;
  memcpy(sa.sun_path, path, n);
  if (path[0] == '@') sa.sun_path[0] = 0; /* abstract namespace */
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return M0__ESYSTEM;
  socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
  ssize_t w = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, len);
  close(fd);
  return w == (ssize_t)strlen(state) ? 0 : M0__ESYSTEM;
}

/* What descriptor 3 is, when it is not a listening TCP socket; NULL when it is. */
static const char *sd_not_listener(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return "not open";
  if (S_ISREG(st.st_mode)) return "a regular file";
  if (S_ISFIFO(st.st_mode)) return "a pipe";
  if (!S_ISSOCK(st.st_mode)) return "not a socket";
  /* On a socket these cannot fail; if one did, its value stays what refuses. */
  int domain = -1, type = -1, listening = 0;
  socklen_t n = sizeof domain;
  getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &n);
  n = sizeof type;
  getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &n);
  n = sizeof listening;
  getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &n);
  if (domain != AF_INET && domain != AF_INET6) return domain == AF_UNIX ? "a unix socket" : "not an IP socket";
  if (type != SOCK_STREAM) return type == SOCK_DGRAM ? "a datagram (UDP) socket" : "not a stream socket";
  if (!listening) return "a TCP socket that is not listening";
  return NULL;
}

/* Descriptor fd as a listener: it, or M0__ECONFIG with err saying what it is. */
static int sd_listener(int fd, char *err, size_t errlen) {
  const char *what = sd_not_listener(fd);
  if (what) {
    snprintf(err, errlen, "socket activation: descriptor %d is %s, where m0 serves a listening TCP "
                          "socket (give the .socket unit a ListenStream= with a port or address:port)", fd, what);
    return M0__ECONFIG;
  }
  int fl = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  return fd;
}

int m0__sd_listen_fd(int *plain, char *err, size_t errlen) {
  *plain = -1;
  const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
  if (!pid || !fds || atol(pid) != (long)getpid()) return M0__ENOTFOUND; /* not for this process */
  char *end;
  long n = strtol(fds, &end, 10);
  if (!fds[0] || *end || n < 0) {
    snprintf(err, errlen, "socket activation: LISTEN_FDS=%s is not a count of descriptors (systemd sets it; "
                          "unset it, or LISTEN_PID, to bind --host and --port)", fds);
    return M0__ECONFIG;
  }
  if (n == 0) return M0__ENOTFOUND;
  if (n > 2) {
    snprintf(err, errlen, "socket activation hands over %ld descriptors (LISTEN_FDS=%s), but m0 serves at most "
                          "two listeners, descriptors 3 and 4 (give the .socket unit one ListenStream=, or two: "
                          "HTTPS's, then the plain one beside it)", n, fds);
    return M0__ECONFIG;
  }
  int fd = sd_listener(3, err, errlen); /* SD_LISTEN_FDS_START */
  if (fd >= 0 && n == 2 && (*plain = sd_listener(4, err, errlen)) < 0) return M0__ECONFIG;
  return fd;
}

int m0__sd_private(const char *e) {
  return !strncmp(e, "LISTEN_PID=", 11) || !strncmp(e, "LISTEN_FDS=", 11) || !strncmp(e, "LISTEN_FDNAMES=", 15) ||
         !strncmp(e, "NOTIFY_SOCKET=", 14);
}
