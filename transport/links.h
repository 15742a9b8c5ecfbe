/* Every listen and dial of an actor's socket goes through here, so the
 * URL's transport, and for tls+tcp:// this process's certificates, are
 * decided in one place (URLs stay in transport/).
 *
 * Design notes
 * - tls+tcp:// links are mutual: both ends present a certificate signed by
 *   the CA the topology file names (an outside instance: the one M0_TLS_CA
 *   names), and a peer without one is refused at the handshake (mbed TLS,
 *   through nng's TLS transport, auth mode required on both sides).
 * - The identity is loaded once, before any actor opens a socket, and never
 *   changes while the process runs: the three files are read and parsed
 *   when it is loaded (a file that cannot be read or parsed is refused
 *   then, named), and their text is kept. Every listener shares one server
 *   configuration; each dialer gets a client configuration of its own made
 *   from that text, because the dialer sets its server name on it.
 * - A dialer's server name is the URL's host, so the certificate the peer
 *   presents must name it. Debian 12's mbed TLS (2.28) matches the name as
 *   text against the certificate's DNS names only: a certificate for an
 *   address lists it as an IP and as a DNS name (IP:10.0.0.5,DNS:10.0.0.5).
 * - A tls+tcp:// URL with no identity loaded is refused (NNG_EINVAL) before
 *   a listener or dialer is made; one that fails later is closed: nothing
 *   is left half-open.
 */
#ifndef M0_TRANSPORT_LINKS_H
#define M0_TRANSPORT_LINKS_H

#include <nng/nng.h>
#include <stdbool.h>
#include <stddef.h>

/* nng_listen / nng_dial with the link's options: 0 or nng's error. The
 * dial's flags are nng_dial's: 0 waits for the first connection,
 * NNG_FLAG_NONBLOCK dials in the background. */
int m0__link_listen(nng_socket s, const char *url);
/* Before a socket that listened is closed (its ipc listeners are watched:
 * transport/ipc_watch.h). */
void m0__link_unwatch(nng_socket s);
int m0__link_dial(nng_socket s, const char *url, int flags);

/* This process's TLS identity: its certificate and key (PEM files) and the
 * CA that signs every peer's. 0, or M0__ECONFIG with err naming the file
 * and what is wrong with it. Loading the same three files again is 0 and
 * changes nothing; other files once a link has used the identity are
 * refused. */
int m0__links_tls(const char *cert, const char *key, const char *ca, char *err, size_t errlen);
/* The same from M0_TLS_CERT, M0_TLS_KEY and M0_TLS_CA (an outside
 * instance's): all three, or M0__ECONFIG naming the ones missing. */
int m0__links_tls_env(char *err, size_t errlen);
/* The loaded identity's three paths (false: none loaded). */
bool m0__links_tls_files(const char **cert, const char **key, const char **ca);
/* How far a URL's listener reaches: 0 this process (inproc), 1 this
 * machine (ipc: a path, the run directory's permissions), 2 the network. */
int m0__link_reach(const char *url);
/* Whether a URL's link is encrypted (tls+tcp://). */
bool m0__link_encrypted(const char *url);

#endif
