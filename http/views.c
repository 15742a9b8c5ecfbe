#include "http/views.h"

#include <stdio.h>
#include <string.h>

/* Every request compares its method with a route's or two: a short loop,
 * no strlen. */
static bool views_eq(m0_str s, const char *z) {
  size_t i = 0;
  while (i < s.n && z[i] && z[i] == s.p[i]) i++;
  return i == s.n && z[i] == 0;
}

/* Does path match pattern? Fills params for {name} segments. */
static bool views_path_match(const char *pat, m0_str path, m0_str *params, size_t *nparams) {
  const char *p = path.p, *end = path.p + path.n;
  size_t np = 0;
  while (*pat) {
    if (*pat == '{') {
      const char *close = strchr(pat, '}');
      if (!close) return false;
      const char *seg = p;
      while (p < end && *p != '/') p++;
      if (p == seg || np == M0__MAX_PARAMS) return false; /* a parameter is never empty */
      params[np++] = (m0_str){seg, (size_t)(p - seg)};
      pat = close + 1;
    } else {
      if (p == end || *p != *pat) return false;
      p++;
      pat++;
    }
  }
  if (p != end) return false;
  *nparams = np;
  return true;
}

static void views_allow_add(char *allow, size_t cap, const char *method) {
  size_t n = strlen(method), len = strlen(allow);
  /* skip duplicates: ", GET," style search on the list so far */
  for (const char *a = allow; (a = strstr(a, method)); a += n)
    if ((a == allow || a[-1] == ' ') && (a[n] == ',' || a[n] == 0)) return;
  snprintf(allow + len, cap - len, "%s%s", len ? ", " : "", method);
}

void m0__views_match(const m0_route *routes, size_t n, m0_str method, m0_str path, m0__match *out) {
  out->kind = M0__VIEW_NOT_FOUND;
  out->route = NULL;
  out->nparams = 0;
  out->allow[0] = 0;
  bool path_known = false;
  m0_str params[M0__MAX_PARAMS];
  size_t np;
  for (size_t i = 0; i < n; i++) {
    const m0_route *r = &routes[i];
    if (!views_path_match(r->pattern, path, params, &np)) continue;
    if (views_eq(method, r->method) || (views_eq(method, "HEAD") && strcmp(r->method, "GET") == 0)) {
      out->kind = M0__VIEW_FOUND;
      out->route = r;
      if (np) memcpy(out->params, params, np * sizeof *params);
      out->nparams = np;
      return;
    }
    path_known = true;
    views_allow_add(out->allow, sizeof out->allow, r->method);
    if (strcmp(r->method, "GET") == 0) views_allow_add(out->allow, sizeof out->allow, "HEAD");
  }
  if (!path_known) return;
  views_allow_add(out->allow, sizeof out->allow, "OPTIONS");
  out->kind = views_eq(method, "OPTIONS") ? M0__VIEW_OPTIONS : M0__VIEW_NOT_ALLOWED;
}
