/* echo_actor URL [INSTANCE] — the `echo` actor (echo.h) as a program of its
 * own: it dials the host's actor URL (what `--doctor` prints under
 * topology.app_actors) and answers until the host says STOP or it gets
 * SIGTERM. Built in the tree, and out of it against the installed libm0
 * (tests/install). */
#include <m0/m0.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "echo.h"

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: %s URL [INSTANCE]\n", argv[0]);
    return 2;
  }
  int instance = argc == 3 ? atoi(argv[2]) : 0;
  fprintf(stderr, "echo_actor: instance %d of echo at %s (pid %d)\n", instance, argv[1], (int)getpid());
  return m0_actor_run(&echo_kind, argv[1], instance);
}
