/* The listener: an address read without DNS, bound once by the coordinator
 * before any loop exists, close-on-exec and non-blocking. */
#ifndef M0_TRANSPORT_LISTEN_H
#define M0_TRANSPORT_LISTEN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* Reads "127.0.0.1", "localhost", "::", "[::1]"... into ss. No DNS. */
bool m0__parse_host(const char *host, struct sockaddr_storage *ss, socklen_t *len);
/* Binds and listens. Returns the descriptor, or with the reason in err
 * M0__EINVALID (not an address), M0__ESYSTEM (no socket) or M0__EBIND.
 * *bound_port gets the real port (useful with port 0). */
int m0__listen(const char *host, int port, int backlog, int *bound_port, char *err, size_t errlen);

/* The port a listening descriptor is bound to; M0__ESYSTEM when fd is no
 * socket, M0__EINVALID when its address has no port. */
int m0__listen_port(int fd);
/* The address it is bound to as a URL writes it ("127.0.0.1", "[::1]"), for
 * the listening line: the socket's own, so one handed over by socket
 * activation is named as it is, not as --host says; fallback if it has none. */
void m0__listen_host(int fd, const char *fallback, char *out, size_t n);

#endif
