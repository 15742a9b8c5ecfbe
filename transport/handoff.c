#include "transport/handoff.h"

#include "base/errors.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

int m0__handoff_make(int *fds, int loops) {
  for (int i = 0; i < loops; i++)
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, &fds[2 * i]) != 0) {
      for (int k = 0; k < 2 * i; k++) close(fds[k]);
      return M0__ESYSTEM;
    }
  return 0;
}

int m0__handoff_send(int sock, int fd) {
  char byte = 'h';
  struct iovec iov = {&byte, 1};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } u;
  memset(&u, 0, sizeof u);
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
  struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(cm), &fd, sizeof fd);
  ssize_t n;
  do n = sendmsg(sock, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n == 1 ? 0 : M0__ESYSTEM;
}

int m0__handoff_recv(int sock) {
  char byte;
  struct iovec iov = {&byte, 1};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } u;
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
  ssize_t n;
  do n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n < 0) return M0__ESYSTEM; /* EAGAIN: none waiting */
  if (n == 0) return M0__EINVALID;
  struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
  if (!cm || cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) return M0__EINVALID;
  /* One descriptor is a hand-off; more are refused, and closed, not kept
   * open unseen (the control buffer has room for two). */
  int fds[2];
  size_t nfds = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
  memcpy(fds, CMSG_DATA(cm), nfds * sizeof(int));
  if (nfds == 1) return fds[0];
  for (size_t i = 0; i < nfds; i++) close(fds[i]);
  return M0__EINVALID;
}

static int handoff_sockopt(int fd, int opt) {
  int v = -1;
  socklen_t n = sizeof v;
  return getsockopt(fd, SOL_SOCKET, opt, &v, &n) == 0 && n == sizeof v ? v : -1;
}

int m0__handoff_family(int listener) { return handoff_sockopt(listener, SO_DOMAIN); }

int m0__handoff_check(int fd, int family) {
  struct stat st;
  if (fd < 0 || family < 0 || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return M0__EINVALID;
  if (handoff_sockopt(fd, SO_DOMAIN) != family) return M0__EINVALID;
  return handoff_sockopt(fd, SO_TYPE) == SOCK_STREAM && handoff_sockopt(fd, SO_ACCEPTCONN) == 0 ? 0 : M0__EINVALID;
}
