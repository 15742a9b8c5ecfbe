/* The ipc endpoints' watch: nng 1.5.2 (Debian 12) stops an ipc listener,
 * or a dialer, for good when the peer closes before the SP greeting is
 * done. This finds such an endpoint and makes it again.
 *
 * Design notes
 * - The fault: the listener writes its greeting first; to a peer already
 *   gone that write fails EPIPE, which nng maps to NNG_ECLOSED and hands to
 *   the listener's pending accept, and on NNG_ECLOSED the listener stops
 *   accepting (as if it were being closed). One `connect` and `close` on
 *   the socket's path, by any program, or one of m0's own dialers closed
 *   while it greets (a worker killed as it dials, a relay's leg cut), left
 *   that socket deaf: its instances, workers or legs never got in again.
 *   nng 1.10 (Debian 13) takes the error as the peer's (NNG_ECONNSHUT) and
 *   goes on accepting: there this is compiled out and an ipc listen is
 *   nng_listen.
 * - Such a listener still accepts connections and greets them, but keeps
 *   them from its socket: its peers look connected and are never read.
 *   What tells it: a greeting failed (nng counts it among the listener's
 *   "other" errors) and the connections held at its path (/proc/net/unix
 *   lists a listener's accepted ends under its path) outnumber the pipes
 *   nng counts for it (its "pipes" statistic). A live listener's extra ones
 *   are there for the moment of a greeting or a close; for
 *   M0__IPC_STUCK_MS at every look, it has stopped: it is closed (nng
 *   closes the pipes it made: their peers redial) and made again at the
 *   same URL, in one line on stderr. The connections the stopped one took
 *   stay open (nng 1.5.2 shuts them but never frees them); the listener
 *   made again has no failed greeting yet, so they are not taken for its
 *   stop.
 * - A dialer meets the same fault from the other side (its peer's process
 *   killed as the dialer greets it: a relay's leg to a worker respawned,
 *   one time in 40 under ThreadSanitizer): it stops redialing. A live
 *   dialer with no pipe tries again within its reconnect time (at most
 *   200 ms in m0), each try counted in its statistics; one with no pipe
 *   and no try for M0__IPC_STUCK_MS has stopped: nothing of it is in
 *   flight, so it is closed and dialed again, in one line on stderr.
 * - One thread per process looks at every ipc endpoint of it each
 *   M0__IPC_LOOK_MS (one read of /proc/net/unix and one snapshot of nng's
 *   statistics, tens of microseconds). Its list is the process's, as nng's
 *   sockets are: made at the first watched listen or dial; the thread ends
 *   with the last unwatch once no dialer is left (a dialer is let go once
 *   its socket is closed).
 */
#ifndef M0_TRANSPORT_IPC_WATCH_H
#define M0_TRANSPORT_IPC_WATCH_H

#include <nng/nng.h>
#include <stdbool.h>

#define M0__IPC_LOOK_MS 1000
#define M0__IPC_STUCK_MS 2000

/* nng_listen at an ipc:// URL, the listener watched where nng needs it:
 * 0 or nng's error. */
int m0__ipc_listen(nng_socket s, const char *url);
/* nng_dial to an ipc:// URL (flags: nng_dial's), the dialer watched where
 * nng needs it: 0 or nng's error. */
int m0__ipc_dial(nng_socket s, const char *url, int flags);
/* Before s is closed: its listeners are no longer watched (its dialers
 * are let go at the next look that finds them gone). */
void m0__ipc_unwatch(nng_socket s);
/* Whether a unix socket listens at path (/proc/net/unix; true when that
 * cannot be read: a caller waiting for the path to be let go waits). Not
 * by connecting to it: that connection, closed before its greeting, is the
 * fault above. */
bool m0__unix_listening(const char *path);

#endif
