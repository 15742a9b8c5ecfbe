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
/* A worker: takes the descriptor its supervisor handed it (fd_text, the
 * value of M0__CERTS_FD) as cfg's certificates' bytes. false: not a
 * number, or not a sealed memfd (left alone). */
bool m0__certs_inherit(m0_config *cfg, const char *fd_text);

#endif
