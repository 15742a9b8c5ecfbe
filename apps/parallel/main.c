/* parallel — one CPU job spread with OpenMP (/par) beside the same job run
 * serially (/ser). It serves under --workers because workers are spawned
 * (fork then exec): a bare fork would leave OpenMP's thread pool behind in
 * the parent. And under --threads, where each loop's request gets its own
 * OpenMP team.
 *   GET /par     {"mode":"par","items":64,"sum":S,"threads":T,"us":U}
 *   GET /ser     {"mode":"ser","items":64,"sum":S,"threads":1,"us":U}
 *   GET /health  on the loop: {"status":"ok"}
 */
#include <m0/m0.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <time.h>

#define ITEMS 64
#define WORK 100000

static double item(int i) {
  double s = 0;
  for (int k = 1; k <= WORK; k++) s += sqrt((double)k * (i + 1));
  return s;
}

static long long now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void view_par(void *state, const m0_request *req, m0_response *res) {
  long long t0 = now_us();
  double sum = 0;
  int threads = 1;
#pragma omp parallel reduction(+ : sum)
  {
#pragma omp single
    threads = omp_get_num_threads();
#pragma omp for schedule(static)
    for (int i = 0; i < ITEMS; i++) sum += item(i);
  }
  m0_respondf(res, 200, "application/json", "{\"mode\":\"par\",\"items\":%d,\"sum\":%.3f,\"threads\":%d,\"us\":%lld}",
              ITEMS, sum, threads, now_us() - t0);
}

static void view_ser(void *state, const m0_request *req, m0_response *res) {
  long long t0 = now_us();
  double sum = 0;
  for (int i = 0; i < ITEMS; i++) sum += item(i);
  m0_respondf(res, 200, "application/json", "{\"mode\":\"ser\",\"items\":%d,\"sum\":%.3f,\"threads\":1,\"us\":%lld}",
              ITEMS, sum, now_us() - t0);
}

static void view_health(void *state, const m0_request *req, m0_response *res) {
  static const char body[] = "{\"status\":\"ok\"}";
  m0_respond(res, 200, "application/json", body, sizeof body - 1, M0_BODY_STATIC);
}

static const m0_route routes[] = {
    {"GET", "/par", view_par, 0},
    {"GET", "/ser", view_ser, 0},
    {"GET", "/health", view_health, M0_ON_LOOP},
};

static const m0_app app = {.name = "parallel", .routes = routes, .nroutes = 3};

int main(int argc, char **argv) { return m0_serve(&app, NULL, argc, argv); }
