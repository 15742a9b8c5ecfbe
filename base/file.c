#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* "a FIFO", "a directory", "a character device", ... for st_mode. */
static const char *file_kind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return S_ISREG(mode) ? "a regular file" : "not a file";
}

/* path opened read-only in *fd (close-on-exec, blocking again once opened)
 * when it is a regular file; st filled. Else false with why: "cannot be
 * read: <errno>" or "is not a regular file (a FIFO)". */
static bool file_open(const char *path, int *fd_out, struct stat *st, char *why, size_t whylen) {
  /* O_NONBLOCK: open(2) of a FIFO without a writer returns at once. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    snprintf(why, whylen, "cannot be read: %s", strerror(errno));
    return false;
  }
  if (fstat(fd, st) != 0) {
    snprintf(why, whylen, "cannot be read: %s", strerror(errno));
    close(fd);
    return false;
  }
  if (!S_ISREG(st->st_mode)) {
    snprintf(why, whylen, "is not a regular file (%s)", file_kind(st->st_mode));
    close(fd);
    return false;
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  *fd_out = fd;
  return true;
}

char *m0__file_read(const char *path, size_t max, size_t *len, char *why, size_t whylen) {
  struct stat st;
  *len = 0;
  int fd;
  if (!file_open(path, &fd, &st, why, whylen)) return NULL;
  /* Read to its end, not to st_size: a file that grows while read is read
   * whole, or refused past max (never cut short without a word). */
  char *buf = (size_t)st.st_size <= max ? malloc(max + 1) : NULL;
  int err = buf || (size_t)st.st_size > max ? 0 : ENOMEM;
  while (buf && !err && *len <= max) {
    ssize_t n = read(fd, buf + *len, max + 1 - *len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : 0;
      break;
    }
    *len += (size_t)n;
  }
  close(fd);
  if (err) snprintf(why, whylen, "cannot be read: %s", strerror(err));
  else if (!buf || *len > max) snprintf(why, whylen, "holds more than %zu bytes", max);
  if (err || !buf || *len > max) {
    free(buf);
    *len = 0;
    return NULL;
  }
  buf[*len] = 0;
  return buf;
}
