/* A topology file's supervisors as one tree (docs/topology.md,
 * Supervisors): a child that names no actor names a supervisor, which then
 * has that one parent; no supervisor is its own ancestor, and none nests
 * deeper than M0__SUP_DEPTH_MAX. Each refusal is one line at the key. */
#include <stdio.h>
#include <string.h>

#include "base/errors.h"
#include "config/topoapps.h"
#include "config/topokeys.h"

static int tree_actor(const m0__actor_spec *aa, int naa, const char *nm) {
  for (int a = 0; a < naa; a++)
    if (!strcmp(aa[a].name, nm)) return a;
  return M0__ENOTFOUND;
}

static int tree_sup(const m0__sup_spec *sups, int n, const char *nm) {
  for (int s = 0; s < n; s++)
    if (!strcmp(sups[s].name, nm)) return s;
  return M0__ENOTFOUND;
}

/* parent[t] of every supervisor named as a child; false: a name is
 * neither an actor nor a supervisor, or a supervisor names itself. */
static bool tree_parents(m0_config *cfg, const char *text, const m0__actor_spec *aa, int naa, const m0__sup_spec *sups,
                         int n, int *parent) {
  char p[40];
  for (int s = 0; s < n; s++) {
    snprintf(p, sizeof p, "supervisors[%d]", s);
    if (tree_actor(aa, naa, sups[s].name) >= 0) {
      m0__topo_fail_at(cfg, text, p, "name",
                       "%s.name \"%s\" is an actor's name too (a child names one or the other: give it its own)", p,
                       sups[s].name);
      return false;
    }
    for (int m = 0; m < sups[s].nchildren; m++) {
      const char *nm = sups[s].children[m];
      if (tree_actor(aa, naa, nm) >= 0) continue;
      int t = tree_sup(sups, n, nm);
      if (t < 0 || t == s) {
        m0__topo_fail_at(cfg, text, p, "children",
                         t < 0 ? "%s.children[%d] \"%s\" is no actor of app_actors and no supervisor (name an entry "
                                 "placed \"process\" or \"thread\", or a supervisor)"
                               : "%s.children[%d] \"%s\" is this supervisor itself (a tree has no cycle)",
                         p, m, nm);
        return false;
      }
      parent[t] = s;
    }
  }
  return true;
}

/* From each supervisor up to its top: a cycle, or deeper than the bound. */
static bool tree_depths(m0_config *cfg, const char *text, const m0__sup_spec *sups, int n, const int *parent) {
  char p[40];
  for (int s = 0; s < n; s++) {
    int depth = 1, x = parent[s];
    for (; x >= 0 && x != s && depth <= n; x = parent[x]) depth++;
    snprintf(p, sizeof p, "supervisors[%d]", s);
    if (x == s) {
      m0__topo_fail_at(cfg, text, p, "children",
                       "%s \"%s\" is a child of its own child (supervisors %s -> %s -> ... -> %s: a tree has no "
                       "cycle; take one out of the other's children)",
                       p, sups[s].name, sups[s].name, sups[parent[s]].name, sups[s].name);
      return false;
    }
    if (depth > M0__SUP_DEPTH_MAX) {
      m0__topo_fail_at(cfg, text, p, "name",
                       "%s \"%s\" nests %d supervisors deep, past the bound of %d (flatten the tree)", p, sups[s].name,
                       depth, M0__SUP_DEPTH_MAX);
      return false;
    }
  }
  return true;
}

bool m0__topo_sup_tree(m0_config *cfg, const char *text, const m0__actor_spec *aa, int naa, const m0__sup_spec *sups,
                       int n) {
  int parent[64];
  if (n > (int)(sizeof parent / sizeof *parent)) return false; /* the table's bound (config/topokeys.c) */
  for (int s = 0; s < n; s++) parent[s] = -1;
  return tree_parents(cfg, text, aa, naa, sups, n, parent) && tree_depths(cfg, text, sups, n, parent);
}
