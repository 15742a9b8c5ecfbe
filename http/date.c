#include "http/date.h"

#include <string.h>

const char *m0__date_line(m0__date *d, size_t *len) {
  time_t now = time(NULL); /* vDSO: no syscall */
  if (now != d->sec) {
    struct tm tm;
    gmtime_r(&now, &tm);
    d->len = strftime(d->line, sizeof d->line, "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
    d->sec = now;
  }
  *len = d->len;
  return d->line;
}
