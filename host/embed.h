/* Embedding (m0_host_start): what the rest of host/ asks of an embedded
 * host. */
#ifndef M0_HOST_EMBED_H
#define M0_HOST_EMBED_H

#include "m0/m0.h"

struct m0__post;
/* h's post (its actors' names, callers and mailboxes: service/post.h), or,
 * h NULL, the calling thread's host's or the process's only one; NULL when
 * there is none (h has no actors, or no host is found). */
struct m0__post *m0__host_post(m0_host *h);

#endif
