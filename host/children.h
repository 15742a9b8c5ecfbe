/* The processes spawned for actors placed `process`, and the restarts of
 * those and of thread instances: each spawned instance is this
 * program again (fork then exec of /proc/self/exe, as a worker is) with
 * M0__ACTOR, M0__ACTOR_INSTANCE and M0__ACTOR_URL set, which m0_serve turns
 * into m0_actor_run of that kind (host/serve.c); it dials the actor's URL
 * like any external instance.
 *
 * Design notes
 * - One thread watches every child through a pidfd (poll, no timer, and no
 *   SIGCHLD handler that an embedding program or the supervisor would
 *   share): a child that exits is reaped at once and started again, unless
 *   its actor's restarts within restart_period_ms already reached
 *   restart_intensity — then it stays down (said once), and the actor's
 *   routes answer 503 while the rest of the host serves (Erlang/OTP's
 *   restart intensity, per actor).
 * - A thread instance is a child too: when it ends by itself
 *   (m0_actor_exit, a make refused at a restart) its own thread asks,
 *   through its gate (service/instance.h), under the same lock, and is
 *   made again or stays down by the same rules. The gate is cut (again
 *   NULL, under the instance's own mutex) before this object is freed.
 * - An actor a topology's supervisor names (config/appspec.h, m0__sup_spec)
 *   is restarted by its supervisor's strategy and budget instead, up the
 *   tree of supervisors (host/suptree.c): the siblings it takes down are
 *   stopped (SIGTERM, 5 s, SIGKILL; a thread one its STOP) and reaped
 *   here, then everything in its reach is started again in the tree's
 *   order. Past the top's budget it leaves its subtree down (serve_on), or
 *   marks the host failed and writes the process's exit descriptor: the
 *   top's wait turns that into a drain and exit 1 (host/top.c), and
 *   nothing is restarted from then on.
 * - A pidfd's end is taken only for the pid it was polled for: a sibling
 *   stopped and started again may have been given the same number.
 * - Once the host's drain began (m0__children_drain) a child that ends is
 *   reaped and stays down: nothing is restarted under a drain, whether it
 *   ended by itself, by the actor's STOP, or by a signal.
 * - A child is asked to stop by its actor's STOP over the wire, then
 *   SIGTERM, and waited for until the drain's bound; only the clock ends
 *   that wait (a poll() cut short by a signal, a sibling's or a worker's
 *   SIGCHLD, waits again), then SIGKILL, named on stderr. A child whose
 *   host dies gets SIGTERM from the kernel (PR_SET_PDEATHSIG).
 */
#ifndef M0_HOST_CHILDREN_H
#define M0_HOST_CHILDREN_H

#include <stdint.h>

#include "runtime/handle.h"
#include "service/service.h"
#include "config/appspec.h"

typedef struct m0__children m0__children;
struct m0__instance;

/* Spawns every instance of every actor of decl placed `process`
 * (urls[i]: where actor i listens; urls NULL: none is spawned here, as in
 * a worker), and restarts the thread instances inst[ninst] (their gate set
 * here, before their threads start) when they end by themselves. NULL with
 * a line on stderr when a spawn fails; *none set when there is nothing to
 * spawn nor restart. */
m0__children *m0__children_start(const m0__app_decl *decl, m0__service *svcs, char (*urls)[M0__URL_MAX],
                                 struct m0__instance *inst, int ninst, m0__exits *exits, bool *none);
/* The host's drain began: from now on no child is restarted. */
void m0__children_drain(m0__children *ch);
/* Whether a supervisor past its budget (on_fail exit) stops the host: said
 * on stderr, and exits written once to wake the top's wait, which drains
 * and exits 1 (host/top.c). Thread safety: any thread; ch may be NULL. */
bool m0__children_failed(const m0__children *ch);
/* SIGTERM to every child, waits until deadline (CLOCK_MONOTONIC ms), then
 * SIGKILL to what is left, reaps, and frees. */
void m0__children_stop(m0__children *ch, int64_t deadline);
/* In a child spawned here (M0__ACTOR set): the instance of app's kind
 * `name` (m0_actor_run), its exit code. m0_serve and m0_host_start turn
 * into it, so a spawned program runs no code of its main past them. */
int m0__actor_child(const m0_app *app, const char *name);
/* The doctor's `supervision` (host/suptree.c): each top supervisor with
 * its children as a tree, then each actor in none with its own restart
 * budget; [] when the declaration does not resolve. */
struct json_t;
struct json_t *m0__suptree_doctor(const m0_app *app, const struct m0_config *cfg);

#endif
