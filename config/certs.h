/* The HTTPS listener's certificates as configuration (--certfile,
 * --keyfile): the `certificates` check, which serve, the doctor and a
 * reload's next generation run before anything starts, and the TLS context
 * the process's loops share, made from the same files once they passed. */
#ifndef M0_CONFIG_CERTS_H
#define M0_CONFIG_CERTS_H

#include "config/options.h"
#include "http/tls.h"

/* The check itself, m0__certs_check, is declared with the list it is in
 * (config/checks.h). */
/* The loops' TLS context for cfg (NULL with no --certfile; why empty),
 * with ticket keys derived from the host's cookie, so every worker of one
 * generation resumes every other's sessions. NULL with why set when it
 * cannot be made (the check passed, so: memory, or a file changed since). */
m0__tls_ctx *m0__certs_ctx(const m0_config *cfg, char *why, size_t whylen);

#endif
