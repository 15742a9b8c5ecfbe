/* The run directory: ipc sockets and the shared page live here. Unless the
 * user names one, it is a private 0700 directory made at start and removed at
 * exit. */
#ifndef M0_TRANSPORT_RUNDIR_H
#define M0_TRANSPORT_RUNDIR_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct m0__rundir {
  char path[PATH_MAX];
  bool made; /* we made it, so we remove it */
  bool ours; /* this host made the page in it: what m0 put there is removed at close */
} m0__rundir;

/* given: the user's directory, or "" for a private one. Returns 0 or M0__ERUNDIR
 * with the reason in err. */
int m0__rundir_open(m0__rundir *d, const char *given, char *err, size_t errlen);
/* Removes what m0 put there (and the directory, if m0 made it). In a
 * directory the user gave, only once the caller has set `ours` (its page was
 * made): a host refused there (another host's page is in it) removes nothing. */
void m0__rundir_close(m0__rundir *d);

#endif
