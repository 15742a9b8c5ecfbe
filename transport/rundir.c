#include "transport/rundir.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/errors.h"

int m0__rundir_open(m0__rundir *d, const char *given, char *err, size_t errlen) {
  memset(d, 0, sizeof *d);
  if (given && given[0]) {
    snprintf(d->path, sizeof d->path, "%s", given);
    return 0;
  }
  const char *base = getenv("XDG_RUNTIME_DIR");
  if (!base || access(base, W_OK | X_OK) != 0) base = getenv("TMPDIR");
  if (!base || access(base, W_OK | X_OK) != 0) base = "/tmp";
  snprintf(d->path, sizeof d->path, "%s/m0-XXXXXX", base);
  if (!mkdtemp(d->path)) { /* mkdtemp makes it 0700 */
    snprintf(err, errlen, "cannot make a private run directory in %s: %s", base, strerror(errno));
    return M0__ERUNDIR;
  }
  d->made = true;
  return 0;
}

/* Only m0's own files: the page, the app page, and *.sock. */
static bool rundir_ours(const char *name) {
  size_t n = strlen(name);
  return !strcmp(name, "page") || !strcmp(name, "app-page") ||
         (n > 5 && !strcmp(name + n - 5, ".sock"));
}

void m0__rundir_close(m0__rundir *d) {
  if (!d->path[0] || !(d->made || d->ours)) {
    d->path[0] = 0;
    return;
  }
  DIR *dir = opendir(d->path);
  if (dir) {
    struct dirent *e;
    while ((e = readdir(dir))) {
      if (!rundir_ours(e->d_name)) continue;
      char p[PATH_MAX + 256];
      snprintf(p, sizeof p, "%s/%s", d->path, e->d_name);
      unlink(p);
    }
    closedir(dir);
  }
  if (d->made) rmdir(d->path);
  d->path[0] = 0;
}
