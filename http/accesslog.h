/* The access log: one JSON line on stdout per response a loop writes.
 * Thread safety: called on a loop's thread; it only writes to stdout. */
#ifndef M0_HTTP_ACCESSLOG_H
#define M0_HTTP_ACCESSLOG_H

#include <stddef.h>

#include "m0/m0.h"

/* error is NULL for a request that was answered, else why it was refused:
 * a refused request logs what was read of it (method and path may be
 * empty). */
/* trace_hi/lo: the request's trace id (from its traceparent), written as
 * "trace" when not 0. */
void m0__access_log_line(int worker, m0_str method, m0_str path, int status, size_t bytes, uint64_t trace_hi,
                         uint64_t trace_lo, const char *error);

#endif
