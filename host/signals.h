/* SIGTERM, SIGINT, SIGHUP, SIGUSR2 and SIGUSR1 become a readable pipe: the handler writes one byte, and
 * the coordinator (or supervisor) polls the read end beside its mailbox. So
 * nothing but that one thread reacts to a signal, and the process behaves the
 * same as PID 1 (a handler is installed, so the signal is delivered). */
#ifndef M0_HOST_SIGNALS_H
#define M0_HOST_SIGNALS_H

#include <stdbool.h>

/* Installs the handlers (and one for SIGCHLD when children is true: the
 * supervisor wakes at once on a death); returns the pipe's read end, or
 * M0__ESYSTEM.
 * SIGHUP, SIGUSR2 and SIGUSR1 are caught in every process (a worker ignores them: only
 * the top process reloads), so a hangup of the terminal kills none of them.
 * SIGPIPE is ignored (a write to a closed socket is an error, not a death). */
int m0__signals_install(bool children);
#define M0__SIG_STOP 1   /* SIGTERM or SIGINT came */
#define M0__SIG_CHILD 2  /* SIGCHLD came */
#define M0__SIG_HUP 4    /* SIGHUP came: reload (host/reload.h) */
#define M0__SIG_USR2 8   /* SIGUSR2 came: upgrade the binary (host/reload.h) */
#define M0__SIG_USR1 16  /* SIGUSR1 came: bring back the kept generation (host/rollback.h) */
/* Reads what is pending; returns M0__SIG_ bits. */
int m0__signals_take(void);
void m0__signals_restore(void);
/* The read end, kept open across an exec (its close-on-exec cleared), for
 * the program exec'd to read what a handler writes until then; M0__ESYSTEM
 * if none.
 * Thread safety: any thread (the handlers stay). */
int m0__signals_pass(void);

#endif
