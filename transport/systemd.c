#include "transport/systemd.h"

#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int m0__sd_notify(const char *state) {
  const char *path = getenv("NOTIFY_SOCKET");
  if (!path || !path[0]) return -1;
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  size_t n = strlen(path);
  if (n >= sizeof sa.sun_path || (path[0] != '/' && path[0] != '@')) return -1;
  memcpy(sa.sun_path, path, n);
  if (path[0] == '@') sa.sun_path[0] = 0; /* abstract namespace */
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
  ssize_t w = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, len);
  close(fd);
  return w == (ssize_t)strlen(state) ? 0 : -1;
}

int m0__sd_listen_fd(void) {
  const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
  if (!pid || !fds || atol(pid) != (long)getpid() || atoi(fds) < 1) return -1;
  int fd = 3; /* SD_LISTEN_FDS_START */
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0) return -1;
  fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  return fd;
}

int m0__sd_private(const char *e) {
  return !strncmp(e, "LISTEN_PID=", 11) || !strncmp(e, "LISTEN_FDS=", 11) || !strncmp(e, "LISTEN_FDNAMES=", 15) ||
         !strncmp(e, "NOTIFY_SOCKET=", 14);
}
