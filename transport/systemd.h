/* systemd's two protocols, spoken directly (each is a few lines, and a host
 * run without systemd must not need libsystemd):
 * - readiness: a datagram "READY=1" / "STOPPING=1" to $NOTIFY_SOCKET;
 * - socket activation: $LISTEN_PID is us and $LISTEN_FDS = 1 means the
 *   listener is descriptor 3, already bound; 2, that descriptor 4 is the
 *   plain listener beside HTTPS (--plain-port's). */
#ifndef M0_TRANSPORT_SYSTEMD_H
#define M0_TRANSPORT_SYSTEMD_H

#include <stddef.h>

/* Sends state to $NOTIFY_SOCKET if set. Returns 0, M0__ENOTFOUND (not set),
 * M0__EINVALID (not a path) or M0__ESYSTEM (lost). */
int m0__sd_notify(const char *state);

/* The activated listener (made non-blocking and close-on-exec), and in
 * *plain the second one or -1; M0__ENOTFOUND when this process is not
 * socket-activated (no LISTEN_PID and LISTEN_FDS, LISTEN_PID another
 * process's, or LISTEN_FDS=0); M0__ECONFIG with the reason in err when it
 * is but cannot be served: LISTEN_FDS not a count or above 2, descriptor 3
 * or 4 not a listening TCP socket. */
int m0__sd_listen_fd(int *plain, char *err, size_t errlen);
/* True for the variables a spawned child must not inherit ("NAME=..."). */
int m0__sd_private(const char *env_entry);

#endif
