/* The supervisor: prefork's top process and the topology's coordinator. */
#ifndef M0_HOST_SUPERVISOR_H
#define M0_HOST_SUPERVISOR_H

#include "config/options.h"

/* Spawns --workers processes and keeps them alive until SIGTERM/SIGINT.
 * listen_fd, plain_fd: systemd's listeners (the HTTPS or only one, the
 * plain one beside it), or -1 to bind. Returns 0 or a negative m0__err
 * (m0__exit_code makes it the exit code). */
int m0__supervise(const m0_app *app, const m0_producer *producer, const m0_config *cfg, char **argv,
                  int listen_fd, int plain_fd);

#endif
