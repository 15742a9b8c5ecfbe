#include "transport/links.h"

#include <string.h>

#include "base/errors.h"

int m0__link_listen(nng_socket s, const char *url) { return nng_listen(s, url, NULL, 0); }

int m0__link_dial(nng_socket s, const char *url, int flags) { return nng_dial(s, url, NULL, flags); }

int m0__links_tls(const char *cert, const char *key, const char *ca, char *err, size_t errlen) {
  (void)cert, (void)key, (void)ca, (void)err, (void)errlen;
  return M0__ECONFIG;
}

bool m0__link_encrypted(const char *url) { return strncmp(url, "tls+tcp://", 10) == 0; }
