/* systemd's two protocols, spoken directly (each is a few lines, and a host
 * run without systemd must not need libsystemd):
 * - readiness: a datagram "READY=1" / "STOPPING=1" to $NOTIFY_SOCKET;
 * - socket activation: $LISTEN_PID is us and $LISTEN_FDS >= 1 means the
 *   listener is descriptor 3, already bound. */
#ifndef M0_TRANSPORT_SYSTEMD_H
#define M0_TRANSPORT_SYSTEMD_H

/* Sends state to $NOTIFY_SOCKET if set. Returns 0, or -1 (not set, or lost). */
int m0__sd_notify(const char *state);
/* The activated listener (made non-blocking and close-on-exec), or -1. */
int m0__sd_listen_fd(void);
/* True for the variables a spawned child must not inherit ("NAME=..."). */
int m0__sd_private(const char *env_entry);

#endif
