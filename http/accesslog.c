/* The access log.
 *
 * Design notes
 * - The method and path are the client's bytes: every byte that could end
 *   the JSON string or the line (a quote, a backslash, a control byte) and
 *   everything outside ASCII is written \uXXXX, so whatever the client sent
 *   cannot end the string or the line early.
 * - m0_serve makes stdout line-buffered when the log is on (host/serve.c),
 *   so each line leaves at its end, not when a buffer fills or at exit.
 */
#include "http/accesslog.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static void alog_str(m0_str s) {
  for (size_t i = 0; i < s.n; i++) {
    unsigned char ch = (unsigned char)s.p[i];
    if (ch == '"' || ch == '\\' || ch < 0x20 || ch >= 0x7f) printf("\\u%04x", ch);
    else putchar(ch);
  }
}

void m0__access_log_line(int worker, m0_str method, m0_str path, int status, size_t bytes, uint64_t trace_hi,
                         uint64_t trace_lo, const char *error) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  printf("{\"time\":%lld.%03ld,\"worker\":%d,\"method\":\"", (long long)ts.tv_sec, ts.tv_nsec / 1000000, worker);
  alog_str(method);
  printf("\",\"path\":\"");
  alog_str(path);
  printf("\",\"status\":%d,\"bytes\":%zu", status, bytes);
  if (trace_hi || trace_lo) printf(",\"trace\":\"%016llx%016llx\"", (unsigned long long)trace_hi, (unsigned long long)trace_lo);
  if (error) {
    printf(",\"error\":\"");
    alog_str((m0_str){error, strlen(error)});
    putchar('"');
  }
  printf("}\n");
}
