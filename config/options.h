/* The configuration: one table of options, each with its flag, variable,
 * default and range. A flag overrides its M0_ variable, which overrides the
 * default. A command line that cannot be read is a usage error (exit 2); a
 * variable that cannot be read is kept as an error for the `environment`
 * check (exit 78) and never silently replaced by the default. */
#ifndef M0_CONFIG_OPTIONS_H
#define M0_CONFIG_OPTIONS_H

#include <stdbool.h>
#include <stdio.h>

#include "m0/m0.h"

/* X(id, flag, variable, kind, default, min, max, help) ; kind: INT, STR, BOOL */
#define M0__OPTIONS(X)                                                                            \
  X(host, "host", "M0_HOST", STR, "127.0.0.1", 0, 0, "listen address (localhost, ::, [::1])")    \
  X(port, "port", "M0_PORT", INT, "8080", 0, 65535, "listen port, 0 = ephemeral (printed)")      \
  X(certfile, "certfile", "M0_CERTFILE", STR, "", 0, 0,                                          \
    "PEM certificate chain, leaf first: the listener speaks HTTPS (several: commas, chosen by SNI)") \
  X(keyfile, "keyfile", "M0_KEYFILE", STR, "", 0, 0,                                              \
    "PEM private key of each --certfile, in the same order")                                     \
  X(ocsp_response, "ocsp-response", "M0_OCSP_RESPONSE", STR, "", 0, 0,                            \
    "DER OCSP response of each --certfile, in the same order (\"\": none), stapled when asked")     \
  X(plain_port, "plain-port", "M0_PLAIN_PORT", INT, "-1", -1, 65535,                              \
    "with --certfile, a plain HTTP listener too: the metrics path, and 308 to HTTPS (-1 = none)") \
  X(http2, "http2", "M0_HTTP2", BOOL, "0", 0, 1,                                                  \
    "HTTP/2: ALPN h2 over HTTPS and the cleartext preface (prior knowledge); no WebSocket over it") \
  X(workers, "workers", "M0_WORKERS", INT, "1", -1000000, 1000000, "worker processes")           \
  X(threads, "threads", "M0_THREADS", INT, "1", -1000000, 1000000, "loops on threads")           \
  X(blocking_threads, "blocking-threads", "M0_BLOCKING_THREADS", INT, "0", -1000000, 1000000,    \
    "handler threads behind each loop")                                                          \
  X(access_log, "access-log", "M0_ACCESS_LOG", BOOL, "0", 0, 1, "one JSON line per response")    \
  X(sse_heartbeat_ms, "sse-heartbeat-ms", "M0_SSE_HEARTBEAT_MS", INT, "15000", 0, 86400000,      \
    "idle-stream heartbeat (an SSE comment, a WebSocket ping), 0 = off")                          \
  X(stream_history, "stream-history", "M0_STREAM_HISTORY", INT, "64", 0, 100000,                 \
    "frames each channel keeps per loop for reconnecting clients (Last-Event-ID), 0 = none")     \
  X(stream_history_bytes, "stream-history-bytes", "M0_STREAM_HISTORY_BYTES", INT, "262144", 0,   \
    1073741824, "bytes of frames each channel keeps per loop at most")                           \
  X(ws_max_message, "ws-max-message", "M0_WS_MAX_MESSAGE", INT, "1048576", 125, 67108864,         \
    "largest WebSocket message a client may send (larger: closed with 1009)")                    \
  X(max_keepalive_requests, "max-keepalive-requests", "M0_MAX_KEEPALIVE_REQUESTS", INT, "1000",  \
    0, 1000000000, "requests per connection, 0 = no cap")                                        \
  X(drain_timeout_ms, "drain-timeout-ms", "M0_DRAIN_TIMEOUT_MS", INT, "5000", 1, 3600000,        \
    "the one bound of drain, pool join and producer join")                                       \
  X(reload_timeout_ms, "reload-timeout-ms", "M0_RELOAD_TIMEOUT_MS", INT, "30000", 1, 3600000,     \
    "a next generation not serving within this is stopped; the old one serves on")                \
  X(reload_keep_ms, "reload-keep-ms", "M0_RELOAD_KEEP_MS", INT, "0", 0, 86400000,                 \
    "after a reload the old binary and configuration are kept this long; SIGUSR1 brings them back (0 = off)") \
  X(max_connections, "max-connections", "M0_MAX_CONNECTIONS", INT, "1024", 1, 1000000,           \
    "connections per loop; beyond, new ones wait in the backlog")                                \
  X(io, "io", "M0_IO", STR, "epoll", 0, 0,                                                       \
    "the loops' sockets: epoll (libuv), uring (io_uring, experimental), auto (uring where allowed, else epoll)") \
  X(header_timeout_ms, "header-timeout-ms", "M0_HEADER_TIMEOUT_MS", INT, "10000", 1, 3600000,    \
    "request line + headers must arrive within (408)")                                           \
  X(body_timeout_ms, "body-timeout-ms", "M0_BODY_TIMEOUT_MS", INT, "30000", 1, 3600000,          \
    "request body must arrive within (408)")                                                     \
  X(keepalive_timeout_ms, "keepalive-timeout-ms", "M0_KEEPALIVE_TIMEOUT_MS", INT, "60000", 1,    \
    3600000, "idle keep-alive connection closes after")                                          \
  X(max_header_bytes, "max-header-bytes", "M0_MAX_HEADER_BYTES", INT, "32768", 1024, 1048576,    \
    "request line + headers (431)")                                                              \
  X(max_uri_bytes, "max-uri-bytes", "M0_MAX_URI_BYTES", INT, "8192", 256, 1048576,               \
    "request target (414)")                                                                      \
  X(max_body_bytes, "max-body-bytes", "M0_MAX_BODY_BYTES", INT, "4194304", 0, 1073741824,        \
    "request body (413)")                                                                        \
  X(respawn_budget, "respawn-budget", "M0_RESPAWN_BUDGET", INT, "5", 0, 1000000,                 \
    "worker deaths allowed per window before the supervisor gives up (exit 1)")                  \
  X(respawn_window_ms, "respawn-window-ms", "M0_RESPAWN_WINDOW_MS", INT, "10000", 1, 86400000,   \
    "the window the respawn budget is counted over")                                             \
  X(metrics_path, "metrics-path", "M0_METRICS_PATH", STR, "", 0, 0,                               \
    "answer Prometheus text at this path, on the loop (off when empty)")                         \
  X(max_requests, "max-requests", "M0_MAX_REQUESTS", INT, "0", 0, 2000000000,                     \
    "prefork: a worker is recycled after this many requests (0 = never)")                        \
  X(max_requests_jitter, "max-requests-jitter", "M0_MAX_REQUESTS_JITTER", INT, "0", 0, 2000000000, \
    "prefork: up to this many more, drawn per worker, so they do not recycle at once")            \
  X(worker_timeout_ms, "worker-timeout-ms", "M0_WORKER_TIMEOUT_MS", INT, "0", 0, 86400000,        \
    "prefork: a worker whose loop has not turned for this long is replaced (0 = off)")           \
  X(accept_share, NULL, "M0_ACCEPT_SHARE", BOOL, "1", 0, 1, "0 = the bare accept race")          \
  X(topology, "topology", "M0_TOPOLOGY", STR, "", 0, 0, "a declarative topology file")           \
  X(trace, "trace", "M0_TRACE", STR, "", 0, 0, "where trace records go (- = stderr)")            \
  X(run_dir, "run-dir", "M0_RUN_DIR", STR, "", 0, 0, "ipc sockets and the shared page")          \
  X(pid_file, "pid-file", "M0_PID_FILE", STR, "", 0, 0,                                           \
    "the host's pid, the same across reloads (written atomically, removed at exit)")             \
  X(trusted_proxies, "trusted-proxies", "M0_TRUSTED_PROXIES", STR, "", 0, 0,                     \
    "proxies whose Forwarded / X-Forwarded-For names the client (addr or addr/bits, commas)")

/* X(code, meaning): the exit codes of every binary built on m0_serve, as
 * --help prints them and docs/reference.md lists them (generated from here by
 * tests/docs/optdoc.c; base/errors.h's m0__exit_code makes 1 and 78). */
#define M0__EXIT_CODES(X)                                                                         \
  X(0, "served, then drained (or --help, --version, a doctor whose checks pass)")                \
  X(1, "failed while starting or serving")                                                       \
  X(2, "a command line that cannot be read")                                                     \
  X(73, "the pid file cannot be written (--pid-file)")                                           \
  X(78, "a configuration that was read and will not be served")

enum m0__opt {
#define M0__OPT_ENUM(id, ...) M0__O_##id,
  M0__OPTIONS(M0__OPT_ENUM)
#undef M0__OPT_ENUM
  M0__O_COUNT_
};

enum m0__source { M0__SRC_DEFAULT, M0__SRC_ENV, M0__SRC_TOPOLOGY, M0__SRC_FLAG };

#define M0__STR_MAX 1024
/* The most loops, worker processes or pool threads per loop a topology holds:
 * a pool thread's actor id keeps its loop in 12 bits and its index in 12
 * (transport/topology.c), so beyond 4096 two actors would share an id. */
#define M0__TOPO_MAX 4096

typedef struct m0__value {
  long num;
  char str[M0__STR_MAX];
  enum m0__source source;
} m0__value;

struct m0_config {
  m0__value v[M0__O_COUNT_];
  bool doctor, help, version;
  /* The first variable that could not be read, for the environment check,
   * and its option (-1: none), whose accepted range the fix states. */
  char env_error[M0__STR_MAX];
  int env_error_opt;
  /* Why the topology file cannot be served, with line and column. */
  char topology_error[M0__STR_MAX + 256];
  /* A topology file's transport ("" = the mode's own) and its actors' URLs,
   * in the topology's actor order (placeholders <pid> and <run-dir> kept). */
  char topo_transport[8];
  char (*topo_urls)[256];
  int ntopo_urls;
  /* A topology file that says "transport": "tls+tcp" (topo_transport is
   * then "tcp", the scheme the topology is built with: its URLs are the
   * file's, tls+tcp:// ones). */
  bool topo_tls_transport;
  /* A topology file's "tls": this process's certificate, key and CA (PEM
   * files; a relative path resolved against the file's directory), "" when
   * it has none; and its "plain_tcp", the tcp:// URLs off loopback it
   * allows without TLS. */
  char tls_cert[M0__STR_MAX], tls_key[M0__STR_MAX], tls_ca[M0__STR_MAX];
  char (*plain_tcp)[256];
  int nplain_tcp;
  /* A topology file's "bus": the NATS server and the subject every host of
   * the fleet publishes into (bus/bus.h); "" when it has none. */
  char bus_url[256], bus_subject[128];
  /* A topology file's "app_actors" and "routes" (config/appspec.h). */
  struct m0__actor_spec *app_actors;
  int napp_actors;
  struct m0__route_spec *file_routes;
  int nfile_routes;
  /* Its "supervisors" (config/appspec.h, m0__sup_spec). */
  struct m0__sup_spec *supervisors;
  int nsupervisors;
  /* The --certfile / --keyfile bytes as the check `certificates` read them
   * (a sealed memfd, config/certs.h), or a worker's from its supervisor:
   * the loops' TLS context is made from these, never from the paths. The
   * one field a check writes. */
  bool certs_held;
  int certs_fd;
};

#define M0__CFG(cfg, id) ((cfg)->v[M0__O_##id].num)
#define M0__CFGS(cfg, id) ((cfg)->v[M0__O_##id].str)

/* Resolves defaults, then the environment, then argv (the topology file
 * comes after: m0__config_load in config/topofile.h). Returns 0, or 2 with a
 * reason in `why` for a command line that cannot be read. */
int m0__config_parse(m0_config *cfg, int argc, char **argv, char *why, size_t whylen);
void m0__config_fini(m0_config *cfg);
void m0__config_usage(FILE *out, const char *prog);
const char *m0__source_name(enum m0__source s);
/* What option i accepts, for a refusal's fix: "a whole number from 0 to
 * 65535", "a boolean (1, true, yes, on or 0, false, no, off)", ... */
void m0__config_accepts(int i, char *out, size_t n);

/* The M0_ variables of the environment that m0 does not read: not an
 * option's, not one the host sets or reserves (M0__*, M0_TLS_CERT,
 * M0_TLS_KEY, M0_TLS_CA), and not the application's own (M0_<APP>_*, APP
 * its name upper-cased without what is not a letter or digit: host_check's
 * are M0_HOSTCHECK_*). Up to max names (only the name: a value may be a
 * secret) into names; returns how many there are in all. */
#define M0__UNKNOWN_MAX 16
int m0__config_unknown_vars(const char *app_name, char (*names)[64], int max);
/* The option variable nearest to name (a typo: at most 2 edits), or NULL. */
const char *m0__config_near_var(const char *name);

/* Option i's name (its flag without dashes, or its variable) and kind. */
const char *m0__config_name(int i);
bool m0__config_is_str(int i);

#endif
