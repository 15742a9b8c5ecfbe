/* What a peer can make a mailbox hold: bytes per message, pipes, and
 * connections that never finish their greeting (issue 36, item 1).
 *
 * Design notes
 * - Bytes. nng allocates a message's whole declared length when its 8-byte
 *   length prefix arrives, before the bytes come, and holds it until the
 *   last byte or the hang-up; it hangs up at once on a length above the
 *   socket's NNG_OPT_RECVMAXSZ. So each mailbox's receive limit is the
 *   largest message its kinds can carry through a socket
 *   (m0__bounds_recv_max): a loop's is a FRAME's (the other kinds it takes
 *   from a socket are small), the coordinator's, a worker's, the
 *   producer's and a pool thread's a control message's; only an
 *   application actor's socket and an instance keep the envelope's 16 MiB
 *   (a REPLY or a REQUEST batch).
 * - Pipes. A host mailbox (not an application actor's socket, whose 64
 *   instance slots bound it: service/service.c) takes at most
 *   M0__MAILBOX_PIPES pipes from outside the process (ipc, tcp, tls+tcp;
 *   inproc ones are this process's own and not counted); one beyond is
 *   closed at nng's ADD_PRE, before any message, counted (reason `pipes`)
 *   and named once per actor and reason per interval. So the memory a
 *   mailbox holds for messages still arriving is at most
 *   M0__MAILBOX_PIPES × its receive limit (nng 1.5 and 1.10 show no figure
 *   for it: this product is the bound, docs/reference.md).
 * - Greetings. nng closes a tcp peer that has not sent its 8-byte SP
 *   header within 10 s, but a tls+tcp peer that never completes its TLS
 *   handshake is held for ever (measured with nng 1.5.2: a connection that
 *   sends nothing is open 300 s later), one descriptor and ~30 kB each.
 *   nng offers no option for it and no hook before a pipe exists, so one
 *   thread per process (the handshake reaper, running while the process
 *   listens on tcp or tls+tcp) looks every M0__HANDSHAKE_TICK_MS at the
 *   connections accepted on those ports (/proc/self/fd: a socket whose
 *   local port is a mailbox's and that is not the listener) and shuts
 *   down — shutdown(2) through a duplicate on the reaper's own spare
 *   descriptor, never close(2): the descriptor stays nng's, which then
 *   sees the end and closes it itself — every one that has no pipe
 *   (its peer's address is no live pipe's) after M0__HANDSHAKE_MS, and at
 *   once the oldest beyond M0__HANDSHAKES_MAX per port, so idle dials
 *   cannot take every descriptor the loops need to accept (nginx drains
 *   its idle keep-alive connections the same way when it runs out).
 *   Each is counted (reason `handshake`) and named as above.
 * - Limits: the host's own processes' pipes count among a mailbox's 64
 *   (nothing tells them apart at ADD_PRE, before a sealed message), so a
 *   peer that holds 64 pipes to a mailbox before a redial of the host's
 *   (a respawned worker's) refuses that redial until it lets go; a
 *   listener at port 0 is not watched by the reaper (topology URLs name
 *   their ports).
 * - The watch of each mailbox and the reaper's registry are process-wide
 *   (nng's pipe callbacks carry only their argument, and the reaper must
 *   see every mailbox of the process), under one mutex.
 * Thread safety: every function may be called from any thread.
 */
#ifndef M0_RUNTIME_BOUNDS_H
#define M0_RUNTIME_BOUNDS_H

#include <nng/nng.h>
#include <stddef.h>
#include <stdint.h>

#define M0__MAILBOX_PIPES 64          /* pipes from outside the process per host mailbox */
#define M0__CONTROL_MAX (64u * 1024u) /* the largest control message's payload (GO ... TRACE) */
#define M0__HANDSHAKE_MS 5000         /* a tcp or tls+tcp peer has this long to become a pipe */
#define M0__HANDSHAKES_MAX 64         /* connections still greeting, per listening port */
#define M0__HANDSHAKE_TICK_MS 250

/* The largest message (header, payload and seal) mailbox `actor` takes
 * through a socket: its NNG_OPT_RECVMAXSZ. */
size_t m0__bounds_recv_max(uint32_t actor);

/* Watches socket s, the mailbox of `actor`, before it listens at url:
 * its pipes are counted (and capped unless `next` is given: an application
 * actor's socket, whose slots cap them), every pipe event is passed on to
 * next(arg) (NULL: none), and a tcp or tls+tcp url's port is watched by
 * the reaper. 0, or M0__ENOMEM. */
int m0__bounds_watch(nng_socket s, uint32_t actor, const char *url, nng_pipe_cb next, void *arg);
/* One more url socket s listens at (m0__actor_listen_also). */
void m0__bounds_listen_also(nng_socket s, const char *url);
/* After s is closed: forgets it (the reaper stops with the last port). */
void m0__bounds_unwatch(nng_socket s);

#endif
