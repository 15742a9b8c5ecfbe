/* Process titles: what `ps`, `pidof`, `ss -p` and systemd show for each
 * process of a host, as nginx's setproctitle does ("m0: host_check master",
 * "m0: host_check worker 1 gen 3").
 *
 * Design notes
 * - The title is written over the memory the kernel shows as the command
 *   line: argv's strings and, past them, the environment's, which are moved
 *   to the heap first (environ is repointed; getenv and setenv go on as
 *   before). So the argv the program goes on using is a copy
 *   (m0__title_init's), never the original, which is overwritten.
 * - comm (PR_SET_NAME, 15 bytes) is the binary's name, not the role: a
 *   process started from /proc/self/exe (a worker, a generation after a
 *   SIGHUP) was "exe" in ps -e, pidof and ss -p; now every process of the
 *   host answers to `pidof host_check`, and the role is in the command line.
 * - Process-wide, as argv is: one area per process.
 * - A pointer into the environment taken before m0_serve (a getenv result
 *   an application kept) points into the area titles overwrite: take a
 *   copy, or call getenv again after m0_serve started.
 */
#ifndef M0_HOST_TITLE_H
#define M0_HOST_TITLE_H

/* Once, first thing in m0_serve: returns a copy of argv (NULL-terminated,
 * never freed: the process uses it to its end), or argv itself when memory
 * is short (titles are then left alone). */
char **m0__title_init(int argc, char **argv);
/* "m0: <app> <role>" as the command line, and comm the binary's name. */
void m0__title_set(const char *app, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
