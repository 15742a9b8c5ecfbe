#include "host/signals.h"

#include "base/errors.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>


/* The one piece of process-wide state: a signal handler has no argument. */
static int signals_pipe[2] = {-1, -1};

static void signals_on(int sig) {
  int saved = errno;
  unsigned char b = (unsigned char)sig;
  if (write(signals_pipe[1], &b, 1) < 0) { /* full: a signal is already pending */ }
  errno = saved;
}

int m0__signals_install(bool children) {
  if (pipe2(signals_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return M0__ESYSTEM;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = signals_on;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  sigaction(SIGUSR2, &sa, NULL);
  sigaction(SIGUSR1, &sa, NULL);
  if (children) {
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, NULL);
  }
  signal(SIGPIPE, SIG_IGN);
  return signals_pipe[0];
}

int m0__signals_take(void) {
  unsigned char b;
  int bits = 0;
  while (read(signals_pipe[0], &b, 1) == 1)
    bits |= b == SIGCHLD  ? M0__SIG_CHILD
            : b == SIGHUP ? M0__SIG_HUP
            : b == SIGUSR2 ? M0__SIG_USR2
            : b == SIGUSR1 ? M0__SIG_USR1
                           : M0__SIG_STOP;
  return bits;
}

int m0__signals_pass(void) {
  if (signals_pipe[0] < 0 || fcntl(signals_pipe[0], F_SETFD, 0) != 0) return M0__ESYSTEM;
  return signals_pipe[0];
}

void m0__signals_restore(void) {
  signal(SIGTERM, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  signal(SIGCHLD, SIG_DFL);
  signal(SIGHUP, SIG_DFL);
  signal(SIGUSR2, SIG_DFL);
  signal(SIGUSR1, SIG_DFL);
  if (signals_pipe[0] >= 0) close(signals_pipe[0]);
  if (signals_pipe[1] >= 0) close(signals_pipe[1]);
  signals_pipe[0] = signals_pipe[1] = -1;
}

