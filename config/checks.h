/* The one ordered list of checks, read by m0_serve and by the doctor, so the
 * doctor can never report as served what the server refuses. The first
 * failure is the refusal: `m0: <detail> (<fix>)` and exit 78. */
#ifndef M0_CONFIG_CHECKS_H
#define M0_CONFIG_CHECKS_H

#include <stdbool.h>

#include "config/options.h"
#include "m0/m0.h"

#define M0__CHECKS(X)                                  \
  X(workers_count, "workers-count")                   \
  X(workers_vs_application, "workers-vs-application") \
  X(threads_count, "threads-count")                   \
  X(workers_vs_threads, "workers-vs-threads")         \
  X(threads_vs_application, "threads-vs-application") \
  X(blocking_threads_count, "blocking-threads-count") \
  X(environment, "environment")                       \
  X(topology, "topology")                             \
  X(actors, "actors")                                 \
  X(run_dir, "run-dir")                               \
  X(application, "application")                       \
  X(trace, "trace")                                   \
  X(supervision, "supervision")                       \
  X(pool_routes, "pool-routes")                       \
  X(trusted_proxies, "trusted-proxies")               \
  X(certificates, "certificates")                     \
  X(plain_port, "plain-port")                         \
  X(io, "io")                                         \
  X(descriptors, "descriptors")

enum {
#define M0__CHECK_ENUM(id, name) M0__C_##id,
  M0__CHECKS(M0__CHECK_ENUM)
#undef M0__CHECK_ENUM
  M0__CHECK_COUNT
};

typedef struct m0__check {
  const char *name;
  bool ok;
  char detail[M0__STR_MAX + 512];
  char fix[1200]; /* when ok too: a warning, which serve prints and starts (the detail says it) */
} m0__check;

/* Runs every check in order into out[M0__CHECK_COUNT]. Returns the index of
 * the first failure, or -1 when all pass. */
int m0__checks_run(const m0_config *cfg, const m0_app *app, m0__check out[M0__CHECK_COUNT]);
/* The most loops and pool threads a topology holds in all (every worker's
 * under prefork). */
#define M0__TOPO_THREADS_MAX 4096

/* The descriptors the busiest process of cfg's topology opens at start, with
 * the application's actors as resolved (config/appspec.h); connections and what
 * the application opens itself come on top. */
struct m0__app_decl;
long m0__fds_needed(const m0_config *cfg, const struct m0__app_decl *decl);
/* The loops an app allows (max_threads resolved against max_workers); 0 = any. */
int m0__app_max_threads(const m0_app *app);
/* The check certificates (config/certs.c): passes with no --certfile
 * (plain HTTP); else each certificate file is readable, a PEM chain in
 * order (leaf first, each followed by its issuer), valid now, names a host
 * (subjectAltName DNS or IP) and its key (--keyfile, else the same file)
 * matches it; passing with a warning (fix set) when one expires within 14
 * days. Each file is read once, here: what passed is kept in cfg->certs_fd
 * (config/certs.h) for the loops and the workers. */
void m0__certs_check(const m0_config *cfg, m0__check *c);
/* The check plain-port (config/certs.c): passes with no --plain-port; else
 * it needs --certfile and a port other than --port's. */
void m0__plain_port_check(const m0_config *cfg, m0__check *c);

#endif
