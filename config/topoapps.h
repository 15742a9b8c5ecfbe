/* A topology file's "app_actors" and "routes" read into the application's
 * declaration (config/appspec.h), for config/topofile.c. */
#ifndef M0_CONFIG_TOPOAPPS_H
#define M0_CONFIG_TOPOAPPS_H

#include <jansson.h>
#include <stdbool.h>

#include "config/appspec.h"
#include "config/options.h"

/* Each into *out (*n entries, the caller frees *out). false: refused, the
 * line in cfg->topology_error. tls: the file has "tls". */
bool m0__topo_app_actors(m0_config *cfg, const char *text, json_t *list, bool tls, m0__actor_spec **out, int *n);
bool m0__topo_routes(m0_config *cfg, const char *text, json_t *list, m0__route_spec **out, int *n);
/* "supervisors", whose children are among aa (the file's app_actors, naa). */
bool m0__topo_supervisors(m0_config *cfg, const char *text, json_t *list, const m0__actor_spec *aa, int naa,
                          m0__sup_spec **out, int *n);

/* The supervisors read as one tree (config/topotree.c): a child names an
 * actor of aa or another supervisor, no cycle, at most M0__SUP_DEPTH_MAX
 * deep. false: refused, the line in cfg->topology_error. */
bool m0__topo_sup_tree(m0_config *cfg, const char *text, const m0__actor_spec *aa, int naa, const m0__sup_spec *sups,
                       int n);

#endif
