/* The Date header, formatted once per second per loop, and IMF-fixdates
 * (Last-Modified, Expires, If-Modified-Since). Thread safety: one m0__date
 * per thread; the rest is pure. */
#ifndef M0_HTTP_DATE_H
#define M0_HTTP_DATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef struct m0__date {
  time_t sec;
  size_t len;
  char line[48]; /* "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n" */
} m0__date;

/* The current "Date: ...\r\n" line; *len gets its length. */
const char *m0__date_line(m0__date *d, size_t *len);
/* Writes t (Unix seconds, 1970..9999) as "Sun, 06 Nov 1994 08:49:37 GMT"
 * (29 bytes, no NUL); returns the end. */
char *m0__imf_fixdate(char *out, int64_t t);
/* Reads an IMF-fixdate; false for anything else (the obsolete RFC 850 and
 * asctime forms included: a condition with a date it cannot read is
 * ignored, as RFC 9110 section 13.1.3 allows). */
bool m0__imf_parse(const char *p, size_t n, int64_t *t);

#endif
