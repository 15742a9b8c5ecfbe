/* Handing an accepted connection to a loop in another process: the
 * descriptor travels by SCM_RIGHTS over a datagram socketpair made by the
 * supervisor before any worker exists and inherited by every worker (nng
 * cannot carry a descriptor). Within one process a loop hands the plain
 * integer in a HANDOFF message instead (actors/loop.c). */
#ifndef M0_TRANSPORT_HANDOFF_H
#define M0_TRANSPORT_HANDOFF_H

/* Makes loops socketpairs: fds[2i] is loop i's receiving end, fds[2i+1] the
 * end others send on. Close-on-exec is cleared at spawn, not here. Returns 0
 * or M0__ESYSTEM (errno set). */
int m0__handoff_make(int *fds, int loops);
/* Sends fd (the caller still closes its copy after success). 0 or
 * M0__ESYSTEM (errno set). */
int m0__handoff_send(int sock, int fd);
/* Receives one descriptor; M0__ESYSTEM when none (errno EAGAIN: nothing
 * waiting), M0__EINVALID when what came was not one descriptor. */
int m0__handoff_recv(int sock);
/* The listener's family (SO_DOMAIN), or -1: taken once it listens, so
 * that a hand-off that comes after the listener closed (in the drain) is
 * still checked against it. */
int m0__handoff_family(int listener);
/* Whether fd, handed over, is a connection a listener of `family` could
 * have accepted: a socket (fstat) of that family (SO_DOMAIN), a stream
 * (SO_TYPE), not listening itself (SO_ACCEPTCONN: so not the listener).
 * 0, or M0__EINVALID: never adopted (a number from a message may name any
 * descriptor of the process: the page file, a mailbox, the listener). */
int m0__handoff_check(int fd, int family);

#endif
