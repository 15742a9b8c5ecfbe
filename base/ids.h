/* Actor ids and names, and the limits every layer shares. An id is a role in
 * its top byte and an index below; the topology (transport/) gives each id a
 * URL, the runtime (actors/) stamps ids on envelopes, m0trace prints names. */
#ifndef M0_BASE_IDS_H
#define M0_BASE_IDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define M0__URL_MAX 256 /* an actor's URL, NUL included */

enum m0__role { M0__ROLE_COORD = 1, M0__ROLE_LOOP = 2, M0__ROLE_POOL = 3, M0__ROLE_PRODUCER = 4,
                M0__ROLE_EXTERNAL = 5, M0__ROLE_WORKER = 6, M0__ROLE_APP = 7,
                /* any thread of a host sending or calling an application
                 * actor (service/post.h): "caller.<n>" */
                M0__ROLE_CALLER = 8,
                /* an asker in a worker (a thread instance, a caller), as the
                 * supervisor's relay names it to an instance: "relayed.<n>",
                 * n its row in the relay's book (service/relay.h) */
                M0__ROLE_RELAYED = 9,
                /* a mailbox a thread of the program receives on
                 * (service/boxes.h): "mailbox.<n>" */
                M0__ROLE_MAILBOX = 10,
                M0__ROLE_LAST_ = M0__ROLE_MAILBOX };
#define M0__ACTOR_ID(role, index) (((uint32_t)(role) << 24) | ((uint32_t)(index) & 0xffffffu))
#define M0__ACTOR_ROLE(id) ((int)((id) >> 24))
#define M0__ACTOR_INDEX(id) ((int)((id) & 0xffffffu))
/* A pool thread's index: its loop in the upper bits, its own below. */
#define M0__POOL_INDEX(loop, j) (((loop) << 12) | (j))
/* An application actor's instance: the actor's place in the process's list
 * of actor kinds in the upper bits, the instance's slot below. */
#define M0__APP_INDEX(actor, slot) (((actor) << 12) | (slot))
/* "coordinator", "loop.3", "pool.1.2", "producer", "external.7", "worker.1",
 * and an application actor's instance by its name, "echo.0", its socket
 * (slot 0xfff) "echo" (once named by
 * m0__app_actor_named; "app.<actor>.<slot>" before, or in another process). */
void m0__actor_name(uint32_t id, char *out, size_t outlen);
/* A role's word ("loop", "pool", "coordinator"...), "?" for none. */
const char *m0__role_name(int role);
/* Whether name is an actor's name as m0__actor_name spells it, or a prefix
 * of whole parts of one ("pool", "pool.1", "echo"): a role's word or an
 * application actor's name (as named in this process), then at most two
 * decimal numbers, each after a dot. */
bool m0__actor_name_known(const char *name);
/* Names application actor `actor` for m0__actor_name. Called before any
 * thread that names actors starts; the name is copied (at most 48 bytes). */
void m0__app_actor_named(int actor, const char *name);

#endif
