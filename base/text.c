#include "base/text.h"

#include <stdio.h>
#include <string.h>

static bool text_control(unsigned char c) { return c < 0x20 || c == 0x7f; }

bool m0__has_control(const char *s) {
  for (; s && *s; s++)
    if (text_control((unsigned char)*s)) return true;
  return false;
}

char *m0__escape(char *out, size_t n, const char *s) {
  size_t o = 0;
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    char e[5];
    size_t k;
    if (c == '\n') k = (size_t)snprintf(e, sizeof e, "\\n");
    else if (c == '\r') k = (size_t)snprintf(e, sizeof e, "\\r");
    else if (c == '\t') k = (size_t)snprintf(e, sizeof e, "\\t");
    else if (c == '\\') k = (size_t)snprintf(e, sizeof e, "\\\\");
    else if (text_control(c)) k = (size_t)snprintf(e, sizeof e, "\\x%02x", c);
    else e[0] = (char)c, k = 1;
    if (o + k >= n) break; /* a whole escape or nothing: never half of one */
    memcpy(out + o, e, k);
    o += k;
  }
  out[o] = 0;
  return out;
}
