/* The one clock of deadlines and bounds: CLOCK_MONOTONIC, in milliseconds
 * (never the wall clock, which an operator or NTP may move). */
#ifndef M0_BASE_CLOCK_H
#define M0_BASE_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

int64_t m0__now_ms(void);
/* The CLOCK_MONOTONIC instant ms from now, for pthread_cond_timedwait on a
 * condition variable made with that clock (pthread_condattr_setclock). */
struct timespec m0__timespec_in(int64_t ms);
/* A condition variable whose timed waits take that clock's instants. */
void m0__cond_init_monotonic(pthread_cond_t *cv);

#endif
