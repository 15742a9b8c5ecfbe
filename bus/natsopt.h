/* How every NATS client of the host connects (the fleet's bus, bus/bus.c,
 * and actors placed "nats", service/nats.c): one set of options, so a host
 * and its instances ride out a NATS server's restarts the same way.
 *
 * Thread safety: any thread; the handlers run on libnats's threads. */
#ifndef M0_BUS_NATSOPT_H
#define M0_BUS_NATSOPT_H

#include <nats/nats.h>
#include <stdbool.h>
#include <stddef.h>

/* New options for url: reconnect for ever every 250 ms, a server lost
 * within ~4 s (pings every second, three unanswered), a server not up yet
 * retried in the background (up runs when it is). down, up (connected)
 * and again (reconnected): down and again may be NULL, up may not (with none
 * libnats would block the connect until a server answers). NATS_OK, or the failing step's
 * status (nothing to free then). */
natsStatus m0__nats_options(natsOptions **out, const char *url, natsConnectionHandler down, natsConnectionHandler up,
                            natsConnectionHandler again, void *arg);

/* Whether s is a NATS subject a host publishes to: 1 to 127 bytes of
 * tokens of A-Z a-z 0-9 _ - separated by single dots (no wildcard). */
bool m0__nats_subject_ok(const char *s);
/* Whether url names a NATS server (nats://HOST:PORT or tls://HOST:PORT). */
bool m0__nats_url_ok(const char *url);
/* url as printed and shown (stderr, the doctor, the observer): its
 * userinfo's password (all of a token) as "***", so nats://u:p@h:4222 is
 * nats://u:***@h:4222. Into buf (len bytes, cut short if need be); buf. */
const char *m0__nats_url_shown(const char *url, char *buf, size_t len);

#endif
