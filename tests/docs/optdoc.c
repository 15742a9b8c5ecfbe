/* m0_optdoc: prints docs/reference.md's generated blocks from the lists
 * `--help` prints, config/options.h's M0__OPTIONS and M0__EXIT_CODES, so the
 * page and `--help` cannot differ (tests/integration/test_docs.py compares
 * the page with this output; `test_docs.py --write` rewrites the page).
 *
 *   m0_optdoc flags   the table of flags and variables
 *   m0_optdoc exits   the table of exit codes
 *
 * "accepted" is m0__config_accepts, the words a refusal uses. */
#include "config/options.h"

#include <stdio.h>
#include <string.h>

/* A table cell: '|' would end it. */
static void optdoc_cell(const char *s) {
  for (; *s; s++) {
    if (*s == '|') fputs("\\|", stdout);
    else putchar(*s);
  }
}

static void optdoc_flag(const char *flag, const char *kind) {
  if (!flag) {
    fputs("—", stdout);
    return;
  }
  printf("`--%s%s`", flag, !strcmp(kind, "BOOL") ? "" : !strcmp(kind, "INT") ? " N" : " VALUE");
}

static void optdoc_flags(void) {
  puts("| flag | variable | default | accepted | what it does |");
  puts("|---|---|---|---|---|");
  int i = 0;
  char accepts[256];
#define OPTDOC_ROW(id, flag, var, kind, def, min, max, help)                                      \
  m0__config_accepts(i++, accepts, sizeof accepts);                                                \
  fputs("| ", stdout);                                                                             \
  optdoc_flag(flag, #kind);                                                                        \
  printf(" | `%s` | %s%s%s | ", var, *(def) ? "`" : "", *(def) ? (def) : "none", *(def) ? "`" : ""); \
  optdoc_cell(accepts);                                                                            \
  fputs(" | ", stdout);                                                                            \
  optdoc_cell(help);                                                                               \
  puts(" |");
  M0__OPTIONS(OPTDOC_ROW)
#undef OPTDOC_ROW
  puts("| `--doctor` | — | — | — | print the resolved configuration as JSON, bind nothing |");
  puts("| `-h`, `--help`, `--version` | — | — | — | print and exit 0 |");
}

static void optdoc_exits(void) {
  puts("| exit | meaning |");
  puts("|---|---|");
#define OPTDOC_EXIT(code, meaning)                                                                 \
  printf("| %d | ", code);                                                                         \
  optdoc_cell(meaning);                                                                            \
  puts(" |");
  M0__EXIT_CODES(OPTDOC_EXIT)
#undef OPTDOC_EXIT
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "flags")) optdoc_flags();
  else if (argc == 2 && !strcmp(argv[1], "exits")) optdoc_exits();
  else {
    fprintf(stderr, "usage: %s flags|exits\n", argv[0]);
    return 2;
  }
  return fflush(stdout) ? 1 : 0;
}
