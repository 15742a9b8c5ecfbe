/* Process titles: what `ps`, `pidof`, `ss -p` and systemd show for each
 * process of a host, as nginx's setproctitle does ("m0: host_check master",
 * "m0: host_check worker 1 gen 3").
 *
 * Design notes
 * - The title is written over the memory the kernel shows as the command
 *   line: argv's strings, so the argv the program goes on using is a copy
 *   (m0__title_init's), never the original, which is overwritten. Not past
 *   them into the environment's, as nginx does: /proc/PID/environ stays what
 *   the process was started with (what an operator, or a test, reads to
 *   tell a worker by its M0__WORKER). So a title is at most as long as the
 *   command line was, cut beyond ("m0: app worker 1 gen 3" needs 22 bytes;
 *   `/usr/local/bin/host_check --workers 2` has 38).
 * - comm (PR_SET_NAME, 15 bytes) is the binary's name, not the role: a
 *   process started from /proc/self/exe (a worker, a generation after a
 *   SIGHUP) was "exe" in ps -e, pidof and ss -p; now every process of the
 *   host answers to `pidof host_check`, and the role is in the command line.
 * - Only the process's own argv is written (its argv[0] is glibc's
 *   program_invocation_name until the first title): an embedder that calls
 *   m0_serve with an array of its own (string literals, perhaps) gets no
 *   title and its strings untouched; a second m0_serve with the titled argv
 *   gets the first copy back.
 * - Process-wide, as argv is: one area per process.
 * - A pointer into argv's strings kept from before m0_serve points into the
 *   area titles overwrite: take a copy.
 */
#ifndef M0_HOST_TITLE_H
#define M0_HOST_TITLE_H

/* First thing in m0_serve: returns a copy of argv (NULL-terminated, never
 * freed: the process uses it to its end), or argv itself when it is not the
 * process's own or memory is short (titles are then left alone). */
char **m0__title_init(int argc, char **argv);
/* "m0: <app> <role>" as the command line, and comm the binary's name. */
void m0__title_set(const char *app, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
