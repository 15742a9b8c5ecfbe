#include "bus/natsopt.h"

#include <stdio.h>
#include <string.h>

natsStatus m0__nats_options(natsOptions **out, const char *url, natsConnectionHandler down, natsConnectionHandler up,
                            natsConnectionHandler again, void *arg) {
  natsOptions *o = NULL;
  natsStatus s = natsOptions_Create(&o);
  if (s == NATS_OK) s = natsOptions_SetURL(o, url);
  /* For ever, every 250 ms: a host outlives its NATS server's restarts. */
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(o, -1);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(o, 250);
  if (s == NATS_OK) s = natsOptions_SetTimeout(o, 1000);
  /* A server that stops answering (stopped, or a network that drops) is
   * lost within ~4 s, not libnats's 4 minutes: until then what is sent
   * goes nowhere. */
  if (s == NATS_OK) s = natsOptions_SetPingInterval(o, 1000);
  if (s == NATS_OK) s = natsOptions_SetMaxPingsOut(o, 3);
  if (s == NATS_OK && down) s = natsOptions_SetDisconnectedCB(o, down, arg);
  if (s == NATS_OK && again) s = natsOptions_SetReconnectedCB(o, again, arg);
  if (s == NATS_OK) s = natsOptions_SetRetryOnFailedConnect(o, true, up, arg);
  if (s != NATS_OK && o) natsOptions_Destroy(o);
  else *out = o;
  return s;
}

bool m0__nats_subject_ok(const char *s) {
  size_t n = s ? strlen(s) : 0, tok = 0;
  if (n == 0 || n > 127) return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '.') {
      if (tok == 0) return false;
      tok = 0;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-') {
      tok++;
    } else {
      return false;
    }
  }
  return tok > 0;
}

bool m0__nats_url_ok(const char *url) {
  if (!url) return false;
  const char *h = !strncmp(url, "nats://", 7) ? url + 7 : !strncmp(url, "tls://", 6) ? url + 6 : NULL;
  if (!h || !h[0] || strlen(url) > 255) return false;
  for (const char *c = h; *c; c++)
    if (*c == '/' || *c == ' ' || (unsigned char)*c < 0x21) return false;
  return true;
}

const char *m0__nats_url_shown(const char *url, char *buf, size_t len) {
  const char *h = url ? strstr(url, "://") : NULL, *at = NULL;
  if (h) {
    h += 3;
    for (const char *c = h; *c && *c != '/'; c++)
      if (*c == '@') at = c; /* the last one: a password may hold '@' */
  }
  if (!at) {
    snprintf(buf, len, "%s", url ? url : "");
    return buf;
  }
  const char *colon = memchr(h, ':', (size_t)(at - h));
  int user = colon ? (int)(colon - h) + 1 : 0; /* a token alone (nats://TOKEN@host) is all secret */
  snprintf(buf, len, "%.*s%.*s***%s", (int)(h - url), url, user, h, at);
  return buf;
}
