/* Topology files: the doctor's `topology` object, saved as a file and read
 * back with --topology FILE / M0_TOPOLOGY. It fills what neither a flag nor a
 * variable set (flag > variable > topology > default). A file that cannot be
 * read or contradicts itself is kept as an error, with line and column, for
 * the `topology` check (exit 78).
 *
 *   {"mode": "threads", "loops": 2, "handler_threads": 1,
 *    "connections_per_loop": 1024, "accept_sharing": true,
 *    "transport": "inproc", "actors": [{"name": "loop.0", "url": "..."}, ...]}
 *
 * `transport` may be inproc (one process: single, threads), ipc (one
 * machine) or tcp (across machines); prefork crosses processes, so not
 * inproc. `actors` may be left out (m0 builds every URL); when given it lists
 * every actor of the topology in order, each URL in the file's transport,
 * and those URLs are the ones served (<pid> and <run-dir> are filled in).
 *
 * Two more keys declare the application's actors and the routes they serve
 * (config/appspec.h), stored in cfg->app_actors and cfg->file_routes:
 *
 *   "app_actors": [{"name": "echo", "placement": "process", "instances": 2,
 *                   "url": "ipc://<run-dir>/actor.echo.sock",
 *                   "restart": {"intensity": 5, "period_ms": 10000}, "queue": 1024}],
 *   "routes": [{"method": "GET", "pattern": "/echo", "actor": "echo", "timeout_ms": 1000}]
 *
 * Each entry is checked here for its own form (keys, types, ranges, which
 * keys a placement takes, no name or method + pattern twice), at the line
 * and column of the offending key; whether the program has the kinds they
 * name is the `actors` check's (m0__app_decl_make).
 * docs/topology.md is the annotated schema.
 */
#ifndef M0_CONFIG_TOPOFILE_H
#define M0_CONFIG_TOPOFILE_H

#include "config/options.h"

/* Applies the file named by cfg's topology option, if any. */
void m0__topofile_apply(m0_config *cfg);

/* The whole configuration: m0__config_parse (defaults, the environment,
 * argv), then the topology file for what neither set. Returns 0, or 2 with
 * a reason in `why` for a command line that cannot be read; a file that
 * cannot be read is kept for the `topology` check. */
int m0__config_load(m0_config *cfg, int argc, char **argv, char *why, size_t whylen);

#endif
