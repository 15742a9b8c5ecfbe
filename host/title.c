/* Process titles (host/title.h). */
#include "host/title.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>


/* The area the kernel shows as /proc/PID/cmdline: argv's strings,
 * contiguous as execve laid them out; NULL: titles off. One per process,
 * as the cmdline is (include/m0/m0.h says which state is). */
static char *title_area;
static size_t title_len;
/* The copy, reachable for the process's life (LeakSanitizer). */
static char **volatile title_argv;

char **m0__title_init(int argc, char **argv) {
  if (argc < 1 || !argv || !argv[0]) return argv;
  /* The process's own argv, titled by an earlier m0_serve: its strings
   * are the title now, the copy is what they were. */
  if (title_area && argv[0] == title_area) return title_argv;
  /* Only the process's own argv (glibc keeps its argv[0] here until the
   * first title) is the kernel's cmdline area: an embedder's array of its
   * own (string literals, perhaps) is never written, and titles stay off. */
  if (argv[0] != program_invocation_name) return argv;
  char **copy = calloc((size_t)argc + 1, sizeof *copy);
  if (!copy) return argv;
  for (int i = 0; i < argc; i++)
    if (!(copy[i] = strdup(argv[i]))) return argv;
  char *end = argv[0];
  for (int i = 0; i < argc; i++)
    if (argv[i] == end) end = argv[i] + strlen(argv[i]) + 1;
  title_argv = copy;
  /* glibc's error() and getopt name the program from here. */
  program_invocation_name = copy[0];
  const char *slash = strrchr(copy[0], '/');
  program_invocation_short_name = slash ? (char *)slash + 1 : copy[0];
  title_area = argv[0];
  title_len = (size_t)(end - argv[0]);
  return copy;
}

void m0__title_set(const char *app, const char *fmt, ...) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = 0;
    char *d = strstr(exe, " (deleted)"); /* a binary renamed over since */
    if (d) *d = 0;
    const char *base = strrchr(exe, '/');
    base = base ? base + 1 : exe;
    if (!strncmp(base, "memfd:", 6)) base += 6; /* a rollback's copy (host/rollback.h), named as the binary */
    prctl(PR_SET_NAME, base, 0, 0, 0);
  }
  if (!title_area || title_len < 2) return;
  char role[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(role, sizeof role, fmt, ap);
  va_end(ap);
  memset(title_area, 0, title_len);
  snprintf(title_area, title_len, "m0: %s %s", app ? app : "m0", role);
}
