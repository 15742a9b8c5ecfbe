/* The views table: method + pattern routes with {name} parameters. The host
 * answers 404, 405 (with Allow) and OPTIONS (204 with Allow) itself; a GET
 * route also answers HEAD. */
#ifndef M0_HTTP_VIEWS_H
#define M0_HTTP_VIEWS_H

#include <stddef.h>

#include "m0/m0.h"

#define M0__MAX_PARAMS 8

typedef enum m0__view_kind {
  M0__VIEW_FOUND,
  M0__VIEW_NOT_FOUND,   /* 404 */
  M0__VIEW_NOT_ALLOWED, /* 405, allow set */
  M0__VIEW_OPTIONS,     /* 204, allow set */
} m0__view_kind;

typedef struct m0__match {
  m0__view_kind kind;
  const m0_route *route;
  m0_str params[M0__MAX_PARAMS];
  size_t nparams;
  char allow[256];
} m0__match;

void m0__views_match(const m0_route *routes, size_t n, m0_str method, m0_str path, m0__match *out);

#endif
