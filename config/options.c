#include "config/options.h"

#include <sys/socket.h>

#include "base/errors.h"
#include "base/text.h"
#include "transport/listen.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

enum opt_kind { OPT_INT, OPT_STR, OPT_BOOL };

typedef struct opt_spec {
  const char *flag;
  const char *var;
  enum opt_kind kind;
  const char *def;
  long min, max;
  const char *help;
} opt_spec;

static const opt_spec config_specs[M0__O_COUNT_] = {
#define M0__OPT_SPEC(id, flag, var, kind, def, min, max, help) {flag, var, OPT_##kind, def, min, max, help},
    M0__OPTIONS(M0__OPT_SPEC)
#undef M0__OPT_SPEC
};

const char *m0__source_name(enum m0__source s) {
  switch (s) {
  case M0__SRC_ENV: return "env";
  case M0__SRC_TOPOLOGY: return "topology";
  case M0__SRC_FLAG: return "flag";
  default: return "default";
  }
}

/* Parses a whole decimal integer in [min,max]; false otherwise. */
static bool config_parse_long(const char *s, long min, long max, long *out) {
  if (!*s) return false;
  errno = 0;
  char *end;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < min || v > max) return false;
  *out = v;
  return true;
}

static bool config_parse_bool(const char *s, long *out) {
  if (!strcmp(s, "1") || !strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on")) *out = 1;
  else if (!strcmp(s, "0") || !strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "off")) *out = 0;
  else return false;
  return true;
}

/* Stores text as option i's value. Returns false when it cannot be read. */
static bool config_set(m0_config *cfg, int i, const char *text, enum m0__source src) {
  const opt_spec *s = &config_specs[i];
  m0__value *v = &cfg->v[i];
  long num = 0;
  if (s->kind == OPT_INT && !config_parse_long(text, s->min, s->max, &num)) return false;
  if (s->kind == OPT_BOOL && !config_parse_bool(text, &num)) return false;
  if (strlen(text) >= sizeof v->str) return false;
  if (m0__has_control(text)) return false; /* one line: it may be said in one (base/text.h) */
  if (i == M0__O_host) {
    struct sockaddr_storage ss;
    socklen_t len;
    if (!m0__parse_host(text, &ss, &len)) return false;
  }
  v->num = num;
  snprintf(v->str, sizeof v->str, "%s", text);
  v->source = src;
  return true;
}

static int config_find_flag(const char *name, size_t n) {
  for (int i = 0; i < M0__O_COUNT_; i++)
    if (config_specs[i].flag && strlen(config_specs[i].flag) == n &&
        !strncmp(config_specs[i].flag, name, n))
      return i;
  return M0__ENOTFOUND;
}

int m0__config_parse(m0_config *cfg, int argc, char **argv, char *why, size_t whylen) {
  memset(cfg, 0, sizeof *cfg);
  cfg->env_error_opt = -1;
  for (int i = 0; i < M0__O_COUNT_; i++) config_set(cfg, i, config_specs[i].def, M0__SRC_DEFAULT);
  for (int i = 0; i < M0__O_COUNT_; i++) {
    const char *text = getenv(config_specs[i].var);
    if (!text) continue;
    if (!config_set(cfg, i, text, M0__SRC_ENV) && !cfg->env_error[0]) {
      char shown[sizeof cfg->env_error];
      snprintf(cfg->env_error, sizeof cfg->env_error, "%s=%s", config_specs[i].var,
               m0__escape(shown, sizeof shown, text));
      cfg->env_error_opt = i;
    }
  }
  for (int a = 1; a < argc; a++) {
    const char *arg = argv[a];
    if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) { cfg->help = true; continue; }
    if (!strcmp(arg, "--version")) { cfg->version = true; continue; }
    if (!strcmp(arg, "--doctor")) { cfg->doctor = true; continue; }
    char shown[M0__STR_MAX + 64];
    if (strncmp(arg, "--", 2) != 0 || !arg[2]) {
      snprintf(why, whylen, "unexpected argument '%s'", m0__escape(shown, sizeof shown, arg));
      return 2;
    }
    const char *name = arg + 2, *eq = strchr(name, '=');
    size_t n = eq ? (size_t)(eq - name) : strlen(name);
    int i = config_find_flag(name, n);
    if (i < 0) {
      char flag[M0__STR_MAX];
      snprintf(flag, sizeof flag, "%.*s", (int)n, name);
      snprintf(why, whylen, "unknown flag '--%s'", m0__escape(shown, sizeof shown, flag));
      return 2;
    }
    const opt_spec *s = &config_specs[i];
    const char *text;
    if (s->kind == OPT_BOOL && !eq) {
      text = "1";
    } else if (eq) {
      text = eq + 1;
    } else if (a + 1 < argc) {
      text = argv[++a];
    } else {
      snprintf(why, whylen, "--%s needs a value", s->flag);
      return 2;
    }
    if (!config_set(cfg, i, text, M0__SRC_FLAG)) {
      char accepts[128];
      m0__config_accepts(i, accepts, sizeof accepts);
      m0__escape(shown, sizeof shown, text);
      if (s->kind == OPT_INT)
        snprintf(why, whylen, "--%s wants %s, not '%s'", s->flag, accepts, shown);
      else if (strlen(text) >= sizeof cfg->v[i].str)
        snprintf(why, whylen, "--%s takes at most %zu bytes, not %zu", s->flag, sizeof cfg->v[i].str - 1,
                 strlen(text));
      else if (m0__has_control(text))
        snprintf(why, whylen, "--%s cannot take '%s' (a control byte: a value is one line)", s->flag, shown);
      else
        snprintf(why, whylen, "--%s cannot take '%s'%s", s->flag, shown,
                 i == M0__O_host ? " (an IPv4 or IPv6 address, localhost, or [::1]; no DNS)"
                                 : " (1, true, yes, on or 0, false, no, off)");
      return 2;
    }
  }
  return 0;
}

void m0__config_fini(m0_config *cfg) {
  free(cfg->topo_urls);
  cfg->topo_urls = NULL;
  cfg->ntopo_urls = 0;
  free(cfg->app_actors);
  cfg->app_actors = NULL;
  cfg->napp_actors = 0;
  free(cfg->file_routes);
  cfg->file_routes = NULL;
  cfg->nfile_routes = 0;
  free(cfg->supervisors);
  cfg->supervisors = NULL;
  cfg->nsupervisors = 0;
  free(cfg->plain_tcp);
  cfg->plain_tcp = NULL;
  cfg->nplain_tcp = 0;
  if (cfg->certs_held) close(cfg->certs_fd);
  cfg->certs_held = false;
}

void m0__config_usage(FILE *out, const char *prog) {
  fprintf(out, "usage: %s [flags]\n\nflags (each overrides its variable, which overrides the default):\n",
          prog);
  for (int i = 0; i < M0__O_COUNT_; i++) {
    const opt_spec *s = &config_specs[i];
    char left[64];
    if (s->flag)
      snprintf(left, sizeof left, "--%s%s", s->flag, s->kind == OPT_BOOL ? "" : " V");
    else
      snprintf(left, sizeof left, "(variable only)");
    fprintf(out, "  %-30s %-28s default %-10s %s\n", left, s->var, *s->def ? s->def : "none",
            s->help);
  }
  fprintf(out, "  %-30s %-28s %-18s %s\n", "--doctor", "", "",
          "print the resolved configuration as JSON, bind nothing");
  fprintf(out, "  %-30s %-28s %-18s %s\n", "-h, --help / --version", "", "", "");
  fprintf(out, "\nexit codes:\n");
#define M0__EXIT_USAGE(code, meaning) fprintf(out, "  %d %s\n", code, meaning);
  M0__EXIT_CODES(M0__EXIT_USAGE)
#undef M0__EXIT_USAGE
}

bool m0_config_get(const m0_config *cfg, const char *name, long *out) {
  for (int i = 0; i < M0__O_COUNT_; i++) {
    if (!strcmp(m0__config_name(i), name)) {
      *out = cfg->v[i].num;
      return true;
    }
  }
  return false;
}

void m0__config_accepts(int i, char *out, size_t n) {
  const opt_spec *s = &config_specs[i];
  /* The counts read a wide range so that 0 reaches its check (and is
   * refused with a reason): what serves is the check's range. */
  if (i == M0__O_workers || i == M0__O_threads) snprintf(out, n, "a whole number from 1 to %d", M0__TOPO_MAX);
  else if (i == M0__O_blocking_threads) snprintf(out, n, "a whole number from 0 to %d", M0__TOPO_MAX);
  else if (s->kind == OPT_INT) snprintf(out, n, "a whole number from %ld to %ld", s->min, s->max);
  else if (s->kind == OPT_BOOL) snprintf(out, n, "a boolean (1, true, yes, on or 0, false, no, off)");
  else if (i == M0__O_host) snprintf(out, n, "an IPv4 or IPv6 address, localhost, or [::1]; no DNS");
  else snprintf(out, n, "text of at most %d bytes on one line (no control byte)", M0__STR_MAX - 1);
}

/* Variables the host sets for the programs it starts, or that an outside
 * instance reads (docs/reference.md, Variables the host sets or reserves):
 * never an operator's typo. M0__ (two underscores) is all the host's. */
static const char *const config_reserved[] = {"M0_TLS_CERT", "M0_TLS_KEY", "M0_TLS_CA", "M0_ACTOR_SECRET_FILE"};

static bool config_known_var(const char *name, size_t n, const char *app_prefix, size_t plen) {
  if (n >= 4 && !strncmp(name, "M0__", 4)) return true;
  if (plen && n > plen && !strncmp(name, app_prefix, plen)) return true;
  for (int i = 0; i < M0__O_COUNT_; i++)
    if (strlen(config_specs[i].var) == n && !strncmp(config_specs[i].var, name, n)) return true;
  for (size_t i = 0; i < sizeof config_reserved / sizeof *config_reserved; i++)
    if (strlen(config_reserved[i]) == n && !strncmp(config_reserved[i], name, n)) return true;
  return false;
}

int m0__config_unknown_vars(const char *app_name, char (*names)[64], int max) {
  char prefix[64] = "";
  size_t plen = 0;
  if (app_name && *app_name) { /* M0_<APP>_: host_check -> M0_HOSTCHECK_ */
    plen = (size_t)snprintf(prefix, sizeof prefix, "M0_");
    for (const char *c = app_name; *c && plen < sizeof prefix - 2; c++)
      if (isalnum((unsigned char)*c)) prefix[plen++] = (char)toupper((unsigned char)*c);
    prefix[plen++] = '_';
    prefix[plen] = 0;
    if (plen == 4) plen = 0; /* a name of no letters or digits claims nothing */
  }
  int count = 0;
  for (char **e = environ; e && *e; e++) {
    const char *eq = strchr(*e, '=');
    size_t n = eq ? (size_t)(eq - *e) : strlen(*e);
    if (n < 4 || strncmp(*e, "M0_", 3) != 0 || config_known_var(*e, n, prefix, plen)) continue;
    if (count < max) { /* a name is said in a line: escaped (base/text.h) */
      char name[64];
      snprintf(name, sizeof name, "%.*s", (int)(n < 63 ? n : 63), *e);
      m0__escape(names[count], sizeof names[count], name);
    }
    count++;
  }
  return count;
}

/* Levenshtein distance, capped: enough to tell a typo from another name. */
static int config_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 63 || lb > 63) return 99;
  int row[64];
  for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
  for (size_t i = 1; i <= la; i++) {
    int diag = row[0];
    row[0] = (int)i;
    for (size_t j = 1; j <= lb; j++) {
      int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      diag = up;
      row[j] = best;
    }
  }
  return row[lb];
}

const char *m0__config_near_var(const char *name) {
  const char *best = NULL;
  int bd = 3;
  for (int i = 0; i < M0__O_COUNT_; i++) {
    int d = config_distance(name, config_specs[i].var);
    if (d < bd) {
      bd = d;
      best = config_specs[i].var;
    }
  }
  return best;
}

const char *m0__config_name(int i) { return config_specs[i].flag ? config_specs[i].flag : config_specs[i].var; }
bool m0__config_is_str(int i) { return config_specs[i].kind == OPT_STR; }
