/* The topology file's schema (docs/topology.md is its prose): every key of
 * every object the file may hold, with its type, range, default, the
 * placements that take it and the line that refuses it, as one const table
 * the reader walks (config/topofile.c, config/topoapps.c), as h2o's configurator
 * walks its directives. tests/unit/test_topokeys.c checks that each key of
 * the table is documented in docs/topology.md with its range and default,
 * and that the docs name no key the table lacks.
 *
 * Design notes
 * - The table says what is generic: unknown keys (the "its keys are ..."
 *   list is the table's order), whole numbers in a range, booleans, a key
 *   a placement does not take. What needs the rest of the file (a mode's
 *   loops, a URL's transport, the actors' order) is a handler's, named
 *   beside the key it judges.
 * - Nothing of a refused file is applied: handlers fill a scratch value and
 *   m0__topofile_apply copies it into the configuration at the end.
 * - Every refusal is one line, "FILE line L column C: <what> (<fix>)", at
 *   the offending key (config/topowhere.c finds it in the text).
 */
#ifndef M0_CONFIG_TOPOKEYS_H
#define M0_CONFIG_TOPOKEYS_H

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "config/options.h"

typedef enum m0__topo_type { M0__TOPO_STRING, M0__TOPO_INT, M0__TOPO_BOOL, M0__TOPO_OBJECT, M0__TOPO_LIST } m0__topo_type;

#define M0__TOPO_NONE (-1L) /* a key with no default */

typedef struct m0__topo_key {
  const char *in;   /* the object that holds it: "" the file, "app_actors", "app_actors.restart", "routes", "tls", "bus", "actors" */
  const char *name; /* the key */
  m0__topo_type type;
  long min, max;    /* M0__TOPO_INT: the range */
  long dflt;        /* M0__TOPO_INT: the value when absent, or M0__TOPO_NONE */
  unsigned places;  /* in app_actors: the placements that take it, 1 << m0__placement (config/appspec.h); 0: every one */
  const char *bad;  /* the wrong type or range: printf(path, min, max); NULL: its handler says */
  const char *only; /* a placement that does not take it: printf(path) */
} m0__topo_key;

extern const m0__topo_key m0__topo_keys[];
extern const size_t m0__topo_nkeys;

/* The key `name` of object `in`, or NULL. */
const m0__topo_key *m0__topo_key_find(const char *in, const char *name);
/* The default of an M0__TOPO_INT key (the table must have it). */
long m0__topo_default(const char *in, const char *name);
/* The first key of JSON object o that `in` does not have, or NULL. */
const char *m0__topo_unknown(json_t *o, const char *in);
/* "a, b and c": the keys of `in`, in the table's order. */
void m0__topo_key_list(const char *in, char *out, size_t n);

/* Checks each key of `in` present in o (at `path`), in the table's order:
 * taken by `placement` (a bit of places; 0 skips the test), of its type,
 * in its range. false: refused, the line in cfg->topology_error. */
bool m0__topo_check_keys(m0_config *cfg, const char *text, json_t *o, const char *in, const char *path,
                         unsigned placement);
/* A whole number in [min, max]. */
bool m0__topo_int_in(json_t *v, long min, long max);

/* The file is refused at the first place key (a name or value, as quoted
 * text) appears: "FILE line L column C: ...". */
void m0__topo_fail(m0_config *cfg, const char *text, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The file is refused at path ("app_actors[1].restart") and key in it (NULL:
 * the path's own place). */
void m0__topo_fail_at(m0_config *cfg, const char *text, const char *path, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void m0__topo_vfail_at(m0_config *cfg, const char *text, const char *path, const char *key, const char *fmt,
                       va_list ap);

/* A path the file names: as written when absolute, else joined to the
 * directory of the file (its real path). false: longer than n - 1. */
bool m0__topo_path(const char *file, const char *path, char *out, size_t n);

#endif
