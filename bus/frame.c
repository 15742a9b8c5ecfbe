/* The FRAME payload and what a frame may hold (bus/publisher.h). */
#include <string.h>

#include "bus/publisher.h"
#include "base/errors.h"

int m0__frame_encode(nng_msg *m, uint64_t id, const char *channel, size_t chlen, const void *frame, size_t flen) {
  uint8_t *at = m0__msg_extend(m, 10 + chlen + flen);
  if (!at) return M0__ENOMEM;
  m0__le_put64(at, id);
  m0__le_put16(at + 8, (uint16_t)chlen);
  memcpy(at + 10, channel, chlen);
  if (flen) memcpy(at + 10 + chlen, frame, flen);
  return 0;
}

int m0__frame_decode(const uint8_t *p, size_t n, uint64_t *id, const char **channel, size_t *chlen,
                     const uint8_t **frame, size_t *flen) {
  if (n < 10) return M0__EBADMSG;
  uint64_t v = m0__le_get64(p);
  uint16_t cl = m0__le_get16(p + 8);
  if (cl == 0 || cl > M0__CHANNEL_MAX || (size_t)cl + 10 > n) return M0__EBADMSG;
  *id = v;
  *channel = (const char *)p + 10;
  *chlen = cl;
  *frame = p + 10 + cl;
  *flen = n - 10 - cl;
  return 0;
}
