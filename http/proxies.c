#include "http/proxies.h"

#include "base/errors.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

bool m0__addr_parse(const char *p, size_t n, uint8_t out[16]) {
  if (n >= 2 && p[0] == '[' && p[n - 1] == ']') p++, n -= 2;
  char z[M0__ADDR_TEXT];
  if (n == 0 || n >= sizeof z) return false;
  memcpy(z, p, n);
  z[n] = 0;
  struct in_addr v4;
  if (inet_pton(AF_INET, z, &v4) == 1) {
    memset(out, 0, 10);
    out[10] = out[11] = 0xff;
    memcpy(out + 12, &v4, 4);
    return true;
  }
  return inet_pton(AF_INET6, z, out) == 1;
}

static bool is_v4(const uint8_t a[16]) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(a, prefix, 12) == 0;
}

int m0__proxies_parse(const char *list, m0__proxies *out, char *err, size_t errlen) {
  out->n = 0;
  for (const char *p = list ? list : ""; *p;) {
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    while (n && (*p == ' ')) p++, n--;
    while (n && p[n - 1] == ' ') n--;
    const char *slash = memchr(p, '/', n);
    size_t an = slash ? (size_t)(slash - p) : n;
    m0__cidr c;
    bool ok = n > 0 && out->n < M0__PROXIES_MAX && m0__addr_parse(p, an, c.addr);
    if (ok) {
      int max = is_v4(c.addr) ? 32 : 128;
      c.bits = max;
      if (slash) {
        char *e;
        long b = strtol(slash + 1, &e, 10);
        ok = e == p + n && e > slash + 1 && b >= 0 && b <= max;
        c.bits = (int)b;
      }
      if (is_v4(c.addr)) c.bits += 96;
    }
    if (!ok) {
      if (out->n >= M0__PROXIES_MAX) snprintf(err, errlen, "more than %d entries", M0__PROXIES_MAX);
      else snprintf(err, errlen, "\"%.*s\" is not an address or address/bits", (int)n, p);
      return M0__EINVALID;
    }
    out->nets[out->n++] = c;
    if (!end) break;
    p = end + 1;
  }
  return 0;
}

bool m0__proxies_trust(const m0__proxies *px, const uint8_t a[16]) {
  for (int i = 0; i < px->n; i++) {
    const m0__cidr *c = &px->nets[i];
    int full = c->bits / 8, rest = c->bits % 8;
    if (memcmp(a, c->addr, (size_t)full) != 0) continue;
    if (rest && ((a[full] ^ c->addr[full]) & (0xff << (8 - rest)) & 0xff)) continue;
    return true;
  }
  return false;
}

static void addr_text(const uint8_t a[16], char *out) {
  if (is_v4(a)) inet_ntop(AF_INET, a + 12, out, M0__ADDR_TEXT);
  else inet_ntop(AF_INET6, a, out, M0__ADDR_TEXT);
}

/* A Forwarded element's for= value (RFC 7239 section 4): quoted or not, an
 * IPv6 one in brackets, maybe with a port. false when it has none. */
static bool forwarded_for(const char *p, size_t n, const char **v, size_t *vn) {
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && p[j] != ';') j++;
    const char *s = p + i;
    size_t k = j - i;
    while (k && (*s == ' ' || *s == '\t')) s++, k--;
    if (k > 4 && strncasecmp(s, "for=", 4) == 0) {
      s += 4, k -= 4;
      while (k && (s[k - 1] == ' ' || s[k - 1] == '\t')) k--;
      if (k >= 2 && s[0] == '"' && s[k - 1] == '"') s++, k -= 2;
      if (k && s[0] == '[') { /* [v6]:port */
        const char *rb = memchr(s, ']', k);
        if (!rb) return false;
        k = (size_t)(rb - s) + 1;
      } else {
        const char *colon = memchr(s, ':', k);
        if (colon && !memchr(colon + 1, ':', k - (size_t)(colon + 1 - s))) k = (size_t)(colon - s); /* v4:port */
      }
      *v = s;
      *vn = k;
      return true;
    }
    i = j + 1;
  }
  return false;
}

/* One step of the walk: an entry of the chain, right to left. 1 and the
 * address in `a` when it is one; 0 when the chain is over; -1 when the entry
 * is no address (the walk stops). */
typedef struct walk {
  const m0_request *req;
  const char *name; /* the header walked: Forwarded or X-Forwarded-For */
  bool standard;
  long h;            /* the header being read, from the last */
  const char *start, *end; /* what is left of it */
} walk;

static bool walk_header(walk *w) {
  for (w->h--; w->h >= 0; w->h--) {
    const m0_header *x = &w->req->headers[w->h];
    if (x->name.n == strlen(w->name) && strncasecmp(x->name.p, w->name, x->name.n) == 0) {
      w->start = x->value.p;
      w->end = x->value.p + x->value.n;
      return true;
    }
  }
  return false;
}

static int walk_next(walk *w, uint8_t a[16]) {
  while (w->end == NULL || w->end < w->start) {
    if (!walk_header(w)) return 0;
  }
  const char *p = w->end;
  while (p > w->start && p[-1] != ',') p--;
  const char *s = p, *e = w->end;
  w->end = p > w->start ? p - 1 : w->start - 1; /* past the comma, or this header is done */
  while (s < e && (*s == ' ' || *s == '\t')) s++;
  while (e > s && (e[-1] == ' ' || e[-1] == '\t')) e--;
  const char *v = s;
  size_t vn = (size_t)(e - s);
  if (w->standard && !forwarded_for(s, vn, &v, &vn)) return M0__EINVALID;
  return m0__addr_parse(v, vn, a) ? 1 : M0__EINVALID;
}

void m0__client_addr(const m0__proxies *px, const char *peer, const m0_request *req, char *out) {
  snprintf(out, M0__ADDR_TEXT, "%s", peer);
  uint8_t a[16];
  if (!px || px->n == 0 || !m0__addr_parse(peer, strlen(peer), a) || !m0__proxies_trust(px, a)) return;
  /* X-Forwarded-For when it is sent: what nginx, HAProxy and most balancers
   * append to; a client's own Forwarded beside it is not believed. */
  bool standard = !m0_request_header(req, "X-Forwarded-For").p && m0_request_header(req, "Forwarded").p;
  walk w = {req, standard ? "Forwarded" : "X-Forwarded-For", standard, (long)req->nheaders, NULL, NULL};
  /* Each hop the peer vouches for: the first it does not trust is the client. */
  while (walk_next(&w, a) == 1) {
    addr_text(a, out);
    if (!m0__proxies_trust(px, a)) return;
  }
}
