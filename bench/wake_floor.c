/* bench/wake_floor.c — how long this machine takes to wake a thread on CPU 0
 * from CPU 1, with CPU 0 idle or shared with two spinning threads of lower
 * priority. It is the floor under run_pool's "pinned" case: the loop there is
 * woken across CPUs while both pool threads spin beside it at nice 19.
 *
 *   m0_wake_floor none|nice19|idle [N]
 *
 * none: CPU 0 has nothing else to run (its vCPU halts between wakes);
 * nice19: two threads spin on CPU 0 at nice 19 (what a yielded pool thread
 * does); idle: the same at SCHED_IDLE. N wakes (default 2000), 2 ms apart:
 * the waker writes a timestamp to a pipe, the sleeper on CPU 0 reads it and
 * sends back how long after the write it ran. Prints p50, p99, the largest,
 * and how many waited more than 1 ms.
 *
 *   m0_wake_floor switch [N]
 *
 * The CPU one wake costs where every process of a benchmark shares CPU 0
 * (bench/run_actors): two threads on CPU 0 hand a byte back and forth
 * through pipes N times (default 20000); prints the process's CPU time
 * (user + system) per switch, 2N switches in all. */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static int to_sleeper[2], from_sleeper[2];
static const char *mode;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  if (sched_setaffinity(0, sizeof s, &s) != 0) {
    perror("m0_wake_floor: sched_setaffinity (needs CPUs 0 and 1)");
    exit(1);
  }
}

static void *spinner(void *arg) {
  (void)arg;
  pin(0);
  struct sched_param sp = {0};
  if (!strcmp(mode, "idle")) sched_setscheduler(0, SCHED_IDLE, &sp);
  else setpriority(PRIO_PROCESS, (id_t)gettid(), 19);
  for (volatile unsigned long x = 0;; x++) {
  }
  return NULL;
}

static void *sleeper(void *arg) {
  (void)arg;
  pin(0);
  double sent;
  while (read(to_sleeper[0], &sent, sizeof sent) == sizeof sent) {
    double waited = now_ms() - sent;
    if (write(from_sleeper[1], &waited, sizeof waited) != sizeof waited) break;
  }
  return NULL;
}

static void *echoer(void *arg) {
  (void)arg;
  pin(0);
  char c;
  while (read(to_sleeper[0], &c, 1) == 1)
    if (write(from_sleeper[1], &c, 1) != 1) break;
  return NULL;
}

static double cpu_us(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* switch: the CPU per same-CPU switch, two threads ping-ponging on CPU 0. */
static int switch_floor(int n) {
  pthread_t t;
  pthread_create(&t, NULL, echoer, NULL);
  pin(0);
  char c = 'x';
  double t0 = cpu_us();
  for (int i = 0; i < n; i++)
    if (write(to_sleeper[1], &c, 1) != 1 || read(from_sleeper[0], &c, 1) != 1) return 1;
  double per = (cpu_us() - t0) / (2.0 * n);
  printf("switch: %.2f us of CPU per switch (%d round trips on CPU 0)\n", per, n);
  return 0;
}

static int by_value(const void *a, const void *b) {
  double d = *(const double *)a - *(const double *)b;
  return d < 0 ? -1 : d > 0;
}

int main(int argc, char **argv) {
  mode = argc > 1 ? argv[1] : "";
  bool sw = !strcmp(mode, "switch");
  int n = argc > 2 ? atoi(argv[2]) : sw ? 20000 : 2000;
  if ((strcmp(mode, "none") && strcmp(mode, "nice19") && strcmp(mode, "idle") && !sw) || n < 100 || argc > 3) {
    fprintf(stderr, "usage: m0_wake_floor none|nice19|idle|switch [N >= 100]\n");
    return 2;
  }
  if (pipe(to_sleeper) || pipe(from_sleeper)) return 1;
  if (sw) return switch_floor(n);
  pthread_t t;
  for (int i = 0; strcmp(mode, "none") && i < 2; i++) pthread_create(&t, NULL, spinner, NULL);
  pthread_create(&t, NULL, sleeper, NULL);
  pin(1);
  usleep(100000);
  double *waits = malloc((size_t)n * sizeof *waits);
  int over = 0;
  for (int i = 0; i < n; i++) {
    double sent = now_ms();
    if (write(to_sleeper[1], &sent, sizeof sent) != sizeof sent ||
        read(from_sleeper[0], &waits[i], sizeof waits[i]) != sizeof waits[i])
      return 1;
    over += waits[i] > 1.0;
    usleep(2000);
  }
  qsort(waits, (size_t)n, sizeof *waits, by_value);
  printf("%s: p50 %.3f ms, p99 %.3f ms, max %.3f ms; %d of %d wakes waited over 1 ms\n", mode, waits[n / 2],
         waits[n * 99 / 100], waits[n - 1], over, n);
  return 0;
}
