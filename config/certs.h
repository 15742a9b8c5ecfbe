/* The HTTPS listener's certificates as configuration (--certfile,
 * --keyfile): the `certificates` check, which serve, the doctor and a
 * reload's next generation run before anything starts, and the TLS context
 * the process's loops share, made from the same files once they passed. */
#ifndef M0_CONFIG_CERTS_H
#define M0_CONFIG_CERTS_H

#include "config/checks.h"
#include "http/tls.h"

/* Passes with no --certfile (plain HTTP); else each certificate file is
 * readable, a PEM chain in order (leaf first, each followed by its
 * issuer), valid now (not expired, not before its start), names a host
 * (subjectAltName DNS or IP) and its key (--keyfile, else the same file)
 * matches it. Passing with a warning (fix set) when one expires within 14
 * days. */
void m0__certs_check(const m0_config *cfg, m0__check *c);
/* The loops' TLS context for cfg (NULL with no --certfile; why empty),
 * with ticket keys derived from the host's cookie, so every worker of one
 * generation resumes every other's sessions. NULL with why set when it
 * cannot be made (the check passed, so: memory, or a file changed since). */
m0__tls_ctx *m0__certs_ctx(const m0_config *cfg, char *why, size_t whylen);

#endif
