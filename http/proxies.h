/* Who the client is: the socket's peer, or, behind proxies the operator
 * trusts (--trusted-proxies), the address those proxies name in
 * X-Forwarded-For or Forwarded (RFC 7239). A header from anyone else is the
 * client's own words and is not believed.
 *
 * Design notes
 * - The walk goes right to left (nginx's real_ip_recursive): each proxy
 *   appends the address it received from, so the rightmost entries are the
 *   trusted chain's and the first untrusted one is the client. An entry that
 *   is no address ends the walk there: the client is the last trusted hop.
 * - X-Forwarded-For is read when it is present, Forwarded only when it is
 *   not: a proxy that appends X-Forwarded-For and passes the client's other
 *   headers would otherwise let a client's own Forwarded name anyone. A
 *   proxy that writes Forwarded must strip the client's X-Forwarded-For.
 *   Only Forwarded's for= parameters are read.
 * - Nothing is allocated: addresses are parsed into 16 bytes and the
 *   answer is written into the caller's buffer (INET6_ADDRSTRLEN).
 */
#ifndef M0_HTTP_PROXIES_H
#define M0_HTTP_PROXIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "m0/m0.h"

#define M0__PROXIES_MAX 32
#define M0__ADDR_TEXT 46 /* INET6_ADDRSTRLEN */

typedef struct m0__cidr {
  uint8_t addr[16]; /* IPv4 as ::ffff:a.b.c.d */
  int bits;         /* of the 128 */
} m0__cidr;

typedef struct m0__proxies {
  m0__cidr nets[M0__PROXIES_MAX];
  int n;
} m0__proxies;

/* Parses "10.0.0.0/8,::1,192.0.2.7" (an address alone is /32 or /128).
 * 0, or M0__EINVALID with the entry at fault named in err. An empty list is
 * none. */
int m0__proxies_parse(const char *list, m0__proxies *out, char *err, size_t errlen);
/* An address as text (IPv4 or IPv6, an IPv6 one optionally in brackets)
 * into 16 bytes; false when it is none. */
bool m0__addr_parse(const char *p, size_t n, uint8_t out[16]);
bool m0__proxies_trust(const m0__proxies *px, const uint8_t addr[16]);
/* The client of a request whose socket peer is `peer` (text): peer itself
 * unless it is trusted, else what the trusted chain names (design notes).
 * Writes NUL-terminated text into out[M0__ADDR_TEXT]. */
void m0__client_addr(const m0__proxies *px, const char *peer, const m0_request *req, char *out);

#endif
