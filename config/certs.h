/* The HTTPS listener's certificates as configuration (--certfile,
 * --keyfile): the `certificates` check, which serve, the doctor and a
 * reload's next generation run before anything starts, and the TLS context
 * the process's loops share, made from the same files once they passed. */
#ifndef M0_CONFIG_CERTS_H
#define M0_CONFIG_CERTS_H

#include "config/options.h"
#include "http/tls.h"

/* The check itself, m0__certs_check, is declared with the list it is in
 * (config/checks.h); the bytes it read and passed stay in cfg->certs_fd. */
/* The loops' TLS context for cfg (NULL with no --certfile; why empty),
 * made from the bytes the check read (never from the paths), with ticket
 * keys derived from the host's cookie, so every worker of one generation
 * resumes every other's sessions. NULL with why set when it cannot be
 * made: no bytes held (a worker not handed them), or memory. */
m0__tls_ctx *m0__certs_ctx(const m0_config *cfg, char *why, size_t whylen);
/* The variable that hands x's ticket secret on, "M0__TICKETS=<64 hex>",
 * into out ("" without x): the supervisor gives it to every worker, a
 * generation to the next one (a reload, an upgrade), so the secret the
 * first generation derived serves the host's whole life and a session
 * resumes across a SIGHUP. m0__certs_ctx takes it from the environment
 * (and wipes it there) before the cookie. */
#define M0__CERTS_TICKETS_ENV (16 + 2 * M0__TLS_SECRET_BYTES)
void m0__certs_tickets_env(const m0__tls_ctx *x, char out[M0__CERTS_TICKETS_ENV]);
/* What a supervisor hands each worker: "M0__CERTS_FD=<fd>" (cfg's bytes)
 * and the ticket secret's variable (m0__certs_tickets_env), each "" when
 * it does not apply. Returns the descriptor the worker inherits, or -1. */
typedef struct m0__certs_pass {
  char fd[32], tickets[M0__CERTS_TICKETS_ENV];
} m0__certs_pass;
int m0__certs_pass_make(const m0_config *cfg, const m0__tls_ctx *x, m0__certs_pass *out);
/* A worker: takes the descriptor its supervisor handed it (fd_text, the
 * value of M0__CERTS_FD) as cfg's certificates' bytes. false: not a
 * number, or not a sealed memfd (left alone). */
bool m0__certs_inherit(m0_config *cfg, const char *fd_text);

#endif
