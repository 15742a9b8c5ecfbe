/* The io_uring transport (http/io.h): not built yet. */
#include <stdio.h>

#include "base/errors.h"
#include "http/io.h"

int m0__io_ring_init(m0__http *h, char *why, size_t why_len) {
  (void)h;
  if (why_len) snprintf(why, why_len, "io_uring: not in this build");
  return M0__ETRANSPORT;
}

void m0__io_ring_fini(m0__http *h) { (void)h; }

const m0__io_ops m0__io_ring_ops = {.name = "uring"};
