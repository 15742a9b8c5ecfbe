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
 * `actors` is checked (the names the topology has, URLs in its transport) and
 * may be left out; the URLs m0 uses are still the ones it builds.
 */
#ifndef M0_ACTORS_TOPOFILE_H
#define M0_ACTORS_TOPOFILE_H

#include "actors/config.h"

/* Applies the file named by cfg's topology option, if any. */
void m0__topofile_apply(m0_config *cfg);

#endif
