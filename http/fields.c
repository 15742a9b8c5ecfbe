#include "http/fields.h"

#include "http/bytes.h"

#include <string.h>
#include <strings.h>

/* RFC 9110 section 5.6.2's tchar, as a table: every header name an
 * application adds is read through it. */
static const bool tchar[256] = {
    ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1, ['*'] = 1, ['+'] = 1, ['-'] = 1, ['.'] = 1,
    ['^'] = 1, ['_'] = 1, ['`'] = 1, ['|'] = 1, ['~'] = 1,
    M0__ALNUM_ONES,
};

/* What the host writes on every response and must be the only one to: the
 * framing (a second Content-Length or a Transfer-Encoding beside the host's
 * splits the response for a client or a proxy: RFC 9112 section 6.3), the
 * connection's own fields (RFC 9110 section 7.6.1), and Date and Server,
 * which the host writes once each. By length, so a name is compared with
 * at most two. */
bool m0__field_is_hosts(const char *name, size_t nn) {
  static const char *const by_len[18][2] = {
      [2] = {"te"},          [4] = {"date"},           [6] = {"server"},
      [7] = {"upgrade", "trailer"}, [10] = {"connection", "keep-alive"},
      [14] = {"content-length"}, [16] = {"proxy-connection"}, [17] = {"transfer-encoding"},
  };
  if (nn >= 18) return false;
  for (int i = 0; i < 2; i++)
    if (by_len[nn][i] && strncasecmp(name, by_len[nn][i], nn) == 0) return true;
  return false;
}

bool m0__field_value_ok(const char *value, size_t vn) {
  if ((!value && vn) || vn > M0__FIELD_VALUE_MAX) return false;
  /* RFC 9110 section 5.5: field-content is VCHAR, SP, HTAB and obs-text.
   * Every response's Content-Type comes through here: a word with no byte
   * below SP and no DEL passes whole (http/bytes.h), the rest byte by byte. */
  size_t i = 0;
  for (; vn - i >= 8; i += 8) {
    uint64_t x = m0__bytes_load(value + i);
    if (m0__bytes_below(x, 0x20) | m0__bytes_eq(x, 0x7f)) break;
  }
  for (; i < vn; i++) {
    unsigned char c = (unsigned char)value[i];
    if ((c < 0x20 && c != '\t') || c == 0x7f) return false;
  }
  return true;
}

m0__field_verdict m0__field_check(const char *name, size_t nn, const char *value, size_t vn) {
  if (!name || nn == 0 || nn > M0__FIELD_NAME_MAX) return M0__FIELD_BAD_NAME;
  for (size_t i = 0; i < nn; i++)
    if (!tchar[(unsigned char)name[i]]) return M0__FIELD_BAD_NAME;
  if (!m0__field_value_ok(value, vn)) return M0__FIELD_BAD_VALUE;
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

bool m0__field_has(const char *v, size_t vn, const char *token) {
  size_t tl = strlen(token), i = 0;
  while (i < vn) {
    while (i < vn && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) i++;
    size_t s = i;
    while (i < vn && v[i] != ',') i++;
    size_t e = s;
    while (e < i && v[e] != ';') e++; /* the element without its parameters */
    while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t')) e--;
    if (e - s == tl && strncasecmp(v + s, token, tl) == 0) return true;
  }
  return false;
}
