/* The choice of a loop's transport (http/io.h). */
#include <stdio.h>
#include <string.h>

#include "base/errors.h"
#include "http/io.h"

int m0__io_init(m0__http *h, m0__io_mode mode, char *why, size_t why_len) {
  h->io = &m0__io_uv_ops;
  h->io_ctx = NULL;
  if (why_len) why[0] = 0;
  if (mode == M0__IO_EPOLL) return 0;
  int rv = m0__io_ring_init(h, why, why_len);
  if (rv == 0) {
    h->io = &m0__io_ring_ops;
    return 0;
  }
  return mode == M0__IO_AUTO ? 0 : rv; /* auto: libuv, and why says what was refused */
}

void m0__io_fini(m0__http *h) {
  if (h->io_ctx) m0__io_ring_fini(h);
  h->io = &m0__io_uv_ops;
}

int m0__io_mode_parse(const char *s) {
  if (!strcmp(s, "epoll")) return M0__IO_EPOLL;
  if (!strcmp(s, "uring")) return M0__IO_URING;
  if (!strcmp(s, "auto")) return M0__IO_AUTO;
  return M0__EINVALID;
}

bool m0__io_check(const char *v, char *detail, size_t dlen, char *fix, size_t flen) {
  int mode = m0__io_mode_parse(v);
  char why[256] = "";
  if (mode < 0) {
    snprintf(detail, dlen, "--io %.64s is not a transport", v);
    snprintf(fix, flen, "set --io / M0_IO to epoll, uring or auto");
    return false;
  }
  if (mode == M0__IO_EPOLL) snprintf(detail, dlen, "epoll: libuv");
  else if (m0__io_ring_probe(why, sizeof why) == 0) snprintf(detail, dlen, "uring: one io_uring per loop");
  else if (mode == M0__IO_AUTO) snprintf(detail, dlen, "epoll: %s", why);
  else {
    snprintf(detail, dlen, "--io uring: %s", why);
    snprintf(fix, flen, "set --io / M0_IO to epoll or auto, or allow io_uring (kernel.io_uring_disabled, the seccomp "
                        "profile)");
    return false;
  }
  return true;
}

const char *m0__io_path(int mode, char *why, size_t why_len) {
  if (why_len) why[0] = 0;
  if (mode == M0__IO_EPOLL || mode < 0) return "epoll";
  return m0__io_ring_probe(why, why_len) == 0 ? "uring" : "epoll";
}
