#include "http/fields.h"

#include <string.h>
#include <strings.h>

static bool is_tchar(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* What the host writes on every response and must be the only one to: the
 * framing (a second Content-Length or a Transfer-Encoding beside the host's
 * splits the response for a client or a proxy: RFC 9112 section 6.3), the
 * connection's own fields (RFC 9110 section 7.6.1), and Date and Server,
 * which the host writes once each. */
static const char *const hosts[] = {"content-length", "transfer-encoding", "connection", "keep-alive",
                                    "proxy-connection", "upgrade", "te", "trailer", "date", "server"};

bool m0__field_is_hosts(const char *name, size_t nn) {
  for (size_t i = 0; i < sizeof hosts / sizeof *hosts; i++)
    if (nn == strlen(hosts[i]) && strncasecmp(name, hosts[i], nn) == 0) return true;
  return false;
}

m0__field_verdict m0__field_check(const char *name, size_t nn, const char *value, size_t vn) {
  if (!name || nn == 0 || nn > M0__FIELD_NAME_MAX) return M0__FIELD_BAD_NAME;
  for (size_t i = 0; i < nn; i++)
    if (!is_tchar((unsigned char)name[i])) return M0__FIELD_BAD_NAME;
  if ((!value && vn) || vn > M0__FIELD_VALUE_MAX) return M0__FIELD_BAD_VALUE;
  /* RFC 9110 section 5.5: field-content is VCHAR, SP, HTAB and obs-text. */
  for (size_t i = 0; i < vn; i++) {
    unsigned char c = (unsigned char)value[i];
    if ((c < 0x20 && c != '\t') || c == 0x7f) return M0__FIELD_BAD_VALUE;
  }
  if (m0__field_is_hosts(name, nn)) return M0__FIELD_HOSTS;
  return M0__FIELD_OK;
}

void m0__field_trim(const char **value, size_t *vn) {
  const char *p = *value;
  size_t n = *vn;
  while (n && (p[0] == ' ' || p[0] == '\t')) p++, n--;
  while (n && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
  *value = p;
  *vn = n;
}
