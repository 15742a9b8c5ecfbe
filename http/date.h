/* The Date header, formatted once per second per loop. Thread safety: one
 * m0__date per thread. */
#ifndef M0_HTTP_DATE_H
#define M0_HTTP_DATE_H

#include <stddef.h>
#include <time.h>

typedef struct m0__date {
  time_t sec;
  size_t len;
  char line[48]; /* "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n" */
} m0__date;

/* The current "Date: ...\r\n" line; *len gets its length. */
const char *m0__date_line(m0__date *d, size_t *len);

#endif
