/* What an instance outside the host (m0_actor_run: service/remote.c) does
 * for m0_send and m0_call from its own receive or message: the message
 * goes to its host over its own link, named, and the host passes it on
 * (service/post.h); a call waits there for its RETURN, keeping what else
 * comes for after. */
#ifndef M0_SERVICE_REMOTE_H
#define M0_SERVICE_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "m0/m0.h"

/* Whether this thread runs an instance outside the host (inside its
 * receive or message). */
bool m0__remote_here(void);
/* As m0__post_send and m0__post_call (0, or a negative m0__err with
 * errno), over the instance's link. */
int m0__remote_send(const char *actor, uint32_t type, const void *data, size_t len);
int m0__remote_call(const char *actor, uint32_t type, const void *data, size_t len, unsigned timeout_ms,
                    uint32_t *out_type, m0_str *out_data, void **out_mem);

/* m0_ask over the link: the request as a call of type M0__MSG_ASK
 * (service/wire.h), its reply batch read into *out. As m0__remote_call. */
int m0__remote_ask(const char *actor, const m0_request *req, unsigned timeout_ms, m0_answer *out);

#endif
