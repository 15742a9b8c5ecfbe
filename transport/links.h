/* Every listen and dial of an actor's socket goes through here, so the
 * URL's transport, and for tls+tcp:// this process's certificates, are
 * decided in one place (URLs stay in transport/).
 *
 * Design notes
 * - tls+tcp:// links are mutual: both ends present a certificate signed by
 *   the CA the topology file names, and a peer without one is refused at the
 *   handshake (mbed TLS, through nng's TLS transport).
 * - The identity is loaded once, before any actor opens a socket, and never
 *   changes while the process runs.
 */
#ifndef M0_TRANSPORT_LINKS_H
#define M0_TRANSPORT_LINKS_H

#include <nng/nng.h>
#include <stdbool.h>
#include <stddef.h>

/* nng_listen / nng_dial with the link's options: 0 or nng's error. */
int m0__link_listen(nng_socket s, const char *url);
int m0__link_dial(nng_socket s, const char *url, int flags);

/* This process's TLS identity: its certificate and key (PEM files) and the
 * CA that signs every peer's. 0, or M0__ECONFIG with err naming the file
 * and what is wrong with it. */
int m0__links_tls(const char *cert, const char *key, const char *ca, char *err, size_t errlen);
/* Whether a URL's link is encrypted (tls+tcp://). */
bool m0__link_encrypted(const char *url);

#endif
