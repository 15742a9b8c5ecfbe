#include "base/errors.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <sys/resource.h>

const char *m0__strerror(int err) {
  switch (err) {
  case M0__OK: return "ok";
#define M0__ERR_CASE(name, text) case M0__E##name: return text;
    M0__ERRORS(M0__ERR_CASE)
#undef M0__ERR_CASE
  default: return "unknown error";
  }
}

int m0__exit_code(int err) {
  if (err == 0) return 0;
  return err == M0__EMAKE || err == M0__ECONFIG ? 78 : 1;
}

bool m0__fds_spent(char *out, size_t n) {
  struct rlimit rl;
  if (n) out[0] = 0;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return false;
  long open = -1;
  DIR *d = opendir("/proc/self/fd");
  if (d) {
    open = 0;
    for (struct dirent *e; (e = readdir(d));)
      if (e->d_name[0] != '.') open++;
    closedir(d);
    open--; /* the directory's own */
  } else if (errno == EMFILE) {
    open = (long)rl.rlim_cur; /* not even one more */
  }
  /* A few short of the limit is spent too: what failed wanted 1 to 3 more. */
  if (open < 0 || open + 4 < (long)rl.rlim_cur) return false;
  snprintf(out, n, " (out of descriptors: RLIMIT_NOFILE is %ld and %ld are open)", (long)rl.rlim_cur, open);
  return true;
}
