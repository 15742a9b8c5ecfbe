/* Dates as HTTP writes them: IMF-fixdate (RFC 9110 section 5.6.7),
 * formatted and read by hand, because strftime's and strptime's day and
 * month names follow the locale an application may have set. */
#include "http/date.h"

#include <string.h>

/* Days since 1970-01-01 to a civil date (H. Hinnant's days_from_civil, inverted). */
static void civil(int64_t days, int64_t *y, unsigned *m, unsigned *d) {
  days += 719468;
  int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  unsigned doe = (unsigned)(days - era * 146097);
  unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

/* The other way: a civil date to days since 1970-01-01. */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  unsigned yoe = (unsigned)(y - era * 400);
  unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (int64_t)doe - 719468;
}

static const char wd[7][4] = {"Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"};
static const char mon[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

static char *put2(char *p, unsigned v) {
  *p++ = (char)('0' + v / 10);
  *p++ = (char)('0' + v % 10);
  return p;
}

char *m0__imf_fixdate(char *p, int64_t t) {
  /* IMF-fixdate spans 1970 (a file touched to 1960) to 9999: clamped, so
   * the division below is a floor and every field two digits. */
  if (t < 0) t = 0;
  if (t > 253402300799) t = 253402300799;
  int64_t days = t / 86400, secs = t % 86400;
  int64_t y;
  unsigned m, d;
  civil(days, &y, &m, &d);
  memcpy(p, wd[days % 7], 3);
  p += 3;
  *p++ = ',';
  *p++ = ' ';
  p = put2(p, d);
  *p++ = ' ';
  memcpy(p, mon[m - 1], 3);
  p += 3;
  *p++ = ' ';
  p = put2(p, (unsigned)(y / 100));
  p = put2(p, (unsigned)(y % 100));
  *p++ = ' ';
  p = put2(p, (unsigned)(secs / 3600));
  *p++ = ':';
  p = put2(p, (unsigned)(secs / 60 % 60));
  *p++ = ':';
  p = put2(p, (unsigned)(secs % 60));
  memcpy(p, " GMT", 4);
  return p + 4;
}

static bool get_num(const char *p, int n, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < n; i++) {
    if (p[i] < '0' || p[i] > '9') return false;
    v = v * 10 + (unsigned)(p[i] - '0');
  }
  *out = v;
  return true;
}

bool m0__imf_parse(const char *p, size_t n, int64_t *t) {
  /* "Sun, 06 Nov 1994 08:49:37 GMT": exactly 29 bytes */
  if (n != 29 || p[3] != ',' || p[4] != ' ' || p[7] != ' ' || p[11] != ' ' || p[16] != ' ' || p[19] != ':' ||
      p[22] != ':' || memcmp(p + 25, " GMT", 4) != 0)
    return false;
  unsigned d, y, hh, mm, ss, m = 0;
  if (!get_num(p + 5, 2, &d) || !get_num(p + 12, 4, &y) || !get_num(p + 17, 2, &hh) || !get_num(p + 20, 2, &mm) ||
      !get_num(p + 23, 2, &ss))
    return false;
  for (unsigned i = 0; i < 12; i++)
    if (memcmp(p + 8, mon[i], 3) == 0) m = i + 1;
  if (!m || d < 1 || d > 31 || hh > 23 || mm > 59 || ss > 60 || y < 1970) return false;
  *t = days_from_civil(y, m, d) * 86400 + hh * 3600 + mm * 60 + ss;
  return true;
}

const char *m0__date_line(m0__date *d, size_t *len) {
  time_t now = time(NULL); /* vDSO: no syscall */
  if (now != d->sec) {
    char *p = d->line;
    memcpy(p, "Date: ", 6);
    p = m0__imf_fixdate(p + 6, (int64_t)now);
    memcpy(p, "\r\n", 2);
    d->len = (size_t)(p + 2 - d->line);
    d->sec = now;
  }
  *len = d->len;
  return d->line;
}
