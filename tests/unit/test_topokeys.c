/* config/topokeys.c against docs/topology.md: the schema's table and its
 * prose cannot disagree. Every key of the file, of an app_actors entry and
 * of a routes entry is a row of the docs' "| key |" table of its section,
 * with its range (min–max) and default; the keys of "actors", "tls", "bus"
 * and "restart" are the "key": of their parent's row; and the docs have no
 * row, and no such "key":, that the table lacks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/topokeys.h"

#define ROWS_MAX 64

/* A row of a "| key |" table: its section's object and its cells. */
typedef struct doc_row {
  char in[32];
  char key[48];
  char text[1024]; /* the whole row */
  char type[1024]; /* the second cell */
} doc_row;

static char *doc_read(void) {
  char path[1024];
  snprintf(path, sizeof path, "%s", __FILE__);
  char *slash = strrchr(path, '/');
  assert_non_null(slash);
  snprintf(slash, sizeof path - (size_t)(slash - path), "/../../docs/topology.md");
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  static char buf[1 << 18];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  return buf;
}

/* The object a heading's tables describe: "## Keys" the file's, "### `x`"
 * x's entries; NULL for any other. */
static const char *doc_section(const char *line) {
  if (!strncmp(line, "## Keys", 7)) return "";
  if (!strncmp(line, "### `app_actors`", 16)) return "app_actors";
  if (!strncmp(line, "### `routes`", 12)) return "routes";
  if (!strncmp(line, "### `supervisors`", 17)) return "supervisors";
  return NULL;
}

/* Every row of every "| key |" table, each with its section ("?" for a
 * table outside the four). */
static int doc_rows(doc_row *rows) {
  char *text = doc_read(), *save = NULL;
  const char *in = "?";
  bool keyed = false;
  int n = 0;
  for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (line[0] == '#') {
      const char *s = doc_section(line);
      in = s ? s : "?";
    }
    if (line[0] != '|') {
      keyed = false;
      continue;
    }
    if (!strncmp(line, "| key |", 7)) keyed = true;
    if (!keyed || strncmp(line, "| `", 3)) continue;
    assert_true(n < ROWS_MAX);
    doc_row *r = &rows[n++];
    snprintf(r->in, sizeof r->in, "%s", in);
    snprintf(r->text, sizeof r->text, "%s", line);
    const char *k = line + 3, *e = strchr(k, '`');
    assert_non_null(e);
    snprintf(r->key, sizeof r->key, "%.*s", (int)(e - k), k);
    const char *c2 = strchr(e, '|');
    assert_non_null(c2);
    const char *c3 = strchr(c2 + 1, '|');
    snprintf(r->type, sizeof r->type, "%.*s", c3 ? (int)(c3 - c2 - 1) : 0, c2 + 1);
  }
  return n;
}

static const doc_row *doc_find(const doc_row *rows, int n, const char *in, const char *key) {
  for (int i = 0; i < n; i++)
    if (!strcmp(rows[i].in, in) && !strcmp(rows[i].key, key)) return &rows[i];
  return NULL;
}

/* The nested objects whose keys are spelled in their parent's row. */
static const struct {
  const char *in, *parent_in, *parent;
} nested[] = {{"actors", "", "actors"}, {"tls", "", "tls"}, {"bus", "", "bus"}, {"app_actors.restart", "app_actors", "restart"}};

static const char *nested_parent(const char *in, const char **parent_in) {
  for (size_t i = 0; i < sizeof nested / sizeof nested[0]; i++)
    if (!strcmp(nested[i].in, in)) {
      *parent_in = nested[i].parent_in;
      return nested[i].parent;
    }
  return NULL;
}

/* Each key of the table is documented where it belongs, with its range and
 * default. */
static void every_key_documented(void **state) {
  (void)state;
  doc_row rows[ROWS_MAX];
  int n = doc_rows(rows);
  for (size_t i = 0; i < m0__topo_nkeys; i++) {
    const m0__topo_key *k = &m0__topo_keys[i];
    const char *parent_in, *parent = nested_parent(k->in, &parent_in);
    const doc_row *r = doc_find(rows, n, parent ? parent_in : k->in, parent ? parent : k->name);
    if (!r) fail_msg("%s%s%s: no row in docs/topology.md's key table for it", k->in, k->in[0] ? "." : "", k->name);
    char want[96];
    if (parent) {
      snprintf(want, sizeof want, "\"%s\":", k->name);
      if (!strstr(r->type, want)) fail_msg("%s.%s: the row of %s does not name it (%s)", k->in, k->name, parent, want);
    }
    if (k->type != M0__TOPO_INT) continue;
    if (parent) snprintf(want, sizeof want, "\"%s\": %ld\xe2\x80\x93%ld", k->name, k->min, k->max);
    else snprintf(want, sizeof want, "%ld\xe2\x80\x93%ld", k->min, k->max);
    if (!strstr(r->text, want)) fail_msg("%s.%s: docs/topology.md does not say its range %s", k->in, k->name, want);
    if (k->dflt == M0__TOPO_NONE) continue;
    if (parent) snprintf(want, sizeof want, "\"%s\": %ld", k->name, k->dflt);
    else snprintf(want, sizeof want, "| %ld", k->dflt);
    if (!strstr(r->text, want)) fail_msg("%s.%s: docs/topology.md does not say its default (%s)", k->in, k->name, want);
  }
}

/* The docs name no key the table lacks: no row, and no "key": in a nested
 * object's row. */
static void every_documented_key_known(void **state) {
  (void)state;
  doc_row rows[ROWS_MAX];
  int n = doc_rows(rows);
  assert_true(n >= 20);
  for (int i = 0; i < n; i++) {
    if (!m0__topo_key_find(rows[i].in, rows[i].key))
      fail_msg("docs/topology.md documents the key %s%s%s, which config/topokeys.c does not have", rows[i].in,
               rows[i].in[0] ? "." : "", rows[i].key);
  }
  for (size_t j = 0; j < sizeof nested / sizeof nested[0]; j++) {
    const doc_row *r = doc_find(rows, n, nested[j].parent_in, nested[j].parent);
    assert_non_null(r);
    for (const char *q = strchr(r->type, '"'); q; q = strchr(q + 1, '"')) {
      const char *e = strchr(q + 1, '"');
      if (!e) break;
      if (e[1] == ':') {
        char key[48];
        snprintf(key, sizeof key, "%.*s", (int)(e - q - 1), q + 1);
        if (!m0__topo_key_find(nested[j].in, key))
          fail_msg("docs/topology.md's %s row names the key \"%s\", which config/topokeys.c does not have",
                   nested[j].parent, key);
      }
      q = e;
    }
  }
}

/* The table's own form: one row per key, a message for each refusal it
 * says, and an INT's default in its range. */
static void table_well_formed(void **state) {
  (void)state;
  for (size_t i = 0; i < m0__topo_nkeys; i++) {
    const m0__topo_key *k = &m0__topo_keys[i];
    assert_ptr_equal(m0__topo_key_find(k->in, k->name), k);
    if (k->places) assert_non_null(k->only);
    if (k->type == M0__TOPO_INT) {
      assert_non_null(k->bad);
      assert_true(k->min <= k->max);
      assert_true(k->dflt == M0__TOPO_NONE || (k->dflt >= k->min && k->dflt <= k->max));
    }
  }
  char list[200];
  m0__topo_key_list("app_actors.restart", list, sizeof list);
  assert_string_equal(list, "intensity and period_ms");
  m0__topo_key_list("routes", list, sizeof list);
  assert_string_equal(list, "method, pattern, actor, timeout_ms and stream");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_key_documented),
      cmocka_unit_test(every_documented_key_known),
      cmocka_unit_test(table_well_formed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
