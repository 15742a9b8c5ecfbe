/* Where in a topology file's text a refused key is, for the one line that
 * refuses it ("FILE line L column C: ..."): jansson gives positions for
 * syntax errors only. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/topokeys.h"

/* Where "key" first appears in the text, for an error about its value
 * (jansson gives positions for syntax errors only). */
static void topo_where(const char *text, const char *key, int *line, int *col) {
  char pat[80];
  snprintf(pat, sizeof pat, "\"%s\"", key);
  const char *at = text ? strstr(text, pat) : NULL;
  *line = 1;
  *col = 1;
  for (const char *p = text; at && p < at; p++) {
    if (*p == '\n') {
      (*line)++;
      *col = 1;
    } else (*col)++;
  }
}

void m0__topo_fail(m0_config *cfg, const char *text, const char *key, const char *fmt, ...) {
  int line, col;
  topo_where(text, key, &line, &col);
  snprintf(cfg->topology_error, sizeof cfg->topology_error, "%s line %d column %d: ", M0__CFGS(cfg, topology),
           line, col);
  size_t n = strlen(cfg->topology_error);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cfg->topology_error + n, sizeof cfg->topology_error - n, fmt, ap);
  va_end(ap);
}

/* ---- where a key of an entry is: "app_actors[1].restart.period_ms" ----
 * jansson gives no positions past a syntax error, and the first "placement"
 * in the text is app_actors[0]'s, so the text (which jansson has accepted:
 * it is valid JSON) is walked along the path instead. */

static const char *js_ws(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
  return p;
}

/* p at '"': past the closing quote. */
static const char *js_string_end(const char *p) {
  for (p++; *p && *p != '"'; p++)
    if (*p == '\\' && p[1]) p++;
  return *p ? p + 1 : p;
}

/* p at a value: past it. */
static const char *js_value_end(const char *p) {
  if (*p == '"') return js_string_end(p);
  if (*p == '{' || *p == '[') {
    int depth = 0;
    for (; *p; p++) {
      if (*p == '"') {
        p = js_string_end(p) - 1;
        continue;
      }
      if (*p == '{' || *p == '[') depth++;
      else if ((*p == '}' || *p == ']') && --depth == 0) return p + 1;
    }
    return p;
  }
  while (*p && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') p++;
  return p;
}

/* Whether the string at p (at '"'), its escapes read, spells key (n bytes). */
static bool js_key_is(const char *p, const char *key, size_t n) {
  size_t k = 0;
  for (p++; *p && *p != '"'; p++) {
    char c = *p;
    if (c == '\\') {
      p++;
      switch (*p) {
      case 'b': c = '\b'; break;
      case 'f': c = '\f'; break;
      case 'n': c = '\n'; break;
      case 'r': c = '\r'; break;
      case 't': c = '\t'; break;
      case 'u': {
        unsigned v = 0;
        for (int i = 1; i <= 4; i++) {
          char h = p[i];
          if (!h) return false;
          v = v * 16 + (unsigned)(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
        }
        if (v == 0 || v > 0x7f) return false; /* every key m0 names is ASCII */
        c = (char)v;
        p += 4;
        break;
      }
      default: c = *p; /* \" \\ \/ */
      }
    }
    if (k >= n || key[k++] != c) return false;
  }
  return k == n;
}

/* In the object at p: where key (n bytes) is, or NULL; *val its value. */
static const char *js_member(const char *p, const char *key, size_t n, const char **val) {
  if (*p != '{') return NULL;
  p = js_ws(p + 1);
  while (*p == '"') {
    const char *k = p, *v = js_ws(js_ws(js_string_end(p)) + 1);
    if (js_key_is(k, key, n)) {
      *val = v;
      return k;
    }
    p = js_ws(js_value_end(v));
    if (*p != ',') break;
    p = js_ws(p + 1);
  }
  return NULL;
}

/* In the list at p: where element i is, or NULL. */
static const char *js_element(const char *p, long i) {
  if (*p != '[') return NULL;
  p = js_ws(p + 1);
  for (long k = 0; *p && *p != ']'; k++) {
    if (k == i) return p;
    p = js_ws(js_value_end(p));
    if (*p != ',') break;
    p = js_ws(p + 1);
  }
  return NULL;
}

/* Where the path's last step is in text ("a[1].b": key b of element 1 of
 * a), then `key` in it when given: as far along as it goes. */
static const char *topo_locate(const char *text, const char *path, const char *key) {
  const char *at = js_ws(text), *val = at;
  for (const char *s = path; *s;) {
    if (*s == '[') {
      char *end;
      long i = strtol(s + 1, &end, 10);
      const char *e = js_element(val, i);
      if (!e || *end != ']') return at;
      at = val = e;
      s = end + 1;
    } else {
      if (*s == '.') s++;
      size_t n = strcspn(s, ".[");
      const char *v, *k = js_member(val, s, n, &v);
      if (!k) return at;
      at = k;
      val = v;
      s += n;
    }
  }
  if (key) {
    const char *v, *k = js_member(val, key, strlen(key), &v);
    if (k) at = k;
  }
  return at;
}

void m0__topo_vfail_at(m0_config *cfg, const char *text, const char *path, const char *key, const char *fmt,
                       va_list ap) {
  const char *at = topo_locate(text, path, key);
  int line = 1, col = 1;
  for (const char *p = text; p < at; p++) {
    if (*p == '\n') {
      line++;
      col = 1;
    } else col++;
  }
  snprintf(cfg->topology_error, sizeof cfg->topology_error, "%s line %d column %d: ", M0__CFGS(cfg, topology), line,
           col);
  size_t n = strlen(cfg->topology_error);
  vsnprintf(cfg->topology_error + n, sizeof cfg->topology_error - n, fmt, ap);
}

void m0__topo_fail_at(m0_config *cfg, const char *text, const char *path, const char *key, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  m0__topo_vfail_at(cfg, text, path, key, fmt, ap);
  va_end(ap);
}

