/* The master: the host's top process once it has handed over to a next
 * generation, so the pid a supervisor knows (PID 1 of a container, the
 * --pid-file, systemd's main pid) stays the serving host's for its whole
 * life (docs/behaviour.md, "One pid for the host's whole life").
 *
 * Generation 1 is the top process and serves, as before any reload. At its
 * first hand-over it drains as every generation does, and then, instead of
 * exiting, execs itself as the master (host/reload.h, m0__reload_exit):
 * the same pid, nothing of generation 1 left (no thread, no nng, no page
 * mapped). The master
 * - forwards SIGHUP, SIGUSR2 and SIGUSR1 (a rollback: host/rollback.h) to
 *   the serving generation, and SIGTERM and SIGINT (and sends systemd
 *   STOPPING=1);
 * - learns which generation serves from the master channel: a datagram
 *   socket whose other end every generation after the first holds; a
 *   generation that serves says "MAINPID=<its pid>\nREADY=1" there before
 *   it tells its predecessor, so the predecessor's exit is never seen
 *   before its successor is known;
 * - speaks for them to systemd ($NOTIFY_SOCKET): READY=1, RELOADING=1 from
 *   its own pid, so Type=notify works without NotifyAccess=all;
 * - is a subreaper (PR_SET_CHILD_SUBREAPER; as PID 1 it is the namespace's
 *   reaper anyway): a generation whose predecessor exited becomes its
 *   child, and whatever else is re-parented to it is reaped;
 * - exits when the serving generation does, with its exit code (a signal
 *   that killed it: 128 + the signal), once every other child has exited
 *   or the drain's bound (and 5 s) has passed, and removes the --pid-file.
 * It runs no loop, no nng and no thread: one poll on a signalfd and the
 * channel. */
#ifndef M0_HOST_MASTER_H
#define M0_HOST_MASTER_H

#include "config/options.h"

/* m0_serve's entry when M0__MASTER is set (m0__reload_exit writes it):
 * returns the exit code. */
int m0__master_run(const m0_app *app);
/* PID 1 (a container's init): the master from the start, so whatever is
 * re-parented to it is reaped before any reload too; generation 1 is its
 * child (m0__reload_spawn_first) and the --pid-file names the master.
 * Returns the exit code. */
int m0__master_first(const m0_app *app, const m0_config *cfg);

#endif
