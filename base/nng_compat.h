/* nng across the releases m0 builds with: Debian 12's nng 1.5.2 and Debian
 * 13's nng 1.10.1. nng 1.10 renamed nng_close to nng_socket_close and says
 * nng_close goes away in the next major release; nng 1.5 has only nng_close.
 * m0 closes its sockets with m0__socket_close, whichever nng it is built on. */
#ifndef M0_BASE_NNG_COMPAT_H
#define M0_BASE_NNG_COMPAT_H

#include <nng/nng.h>

#if NNG_MAJOR_VERSION > 1 || (NNG_MAJOR_VERSION == 1 && NNG_MINOR_VERSION >= 10)
#define m0__socket_close(s) nng_socket_close(s)
#else
#define m0__socket_close(s) nng_close(s)
#endif

#endif
