#include "base/ids.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "base/num.h"

#define APP_NAMES 64
static char app_names[APP_NAMES][49];

void m0__app_actor_named(int actor, const char *name) {
  if (actor >= 0 && actor < APP_NAMES) snprintf(app_names[actor], sizeof app_names[actor], "%s", name);
}

/* By hand, not by snprintf: m0trace names two actors per record it prints
 * (~1,700 instructions each by snprintf). */
const char *m0__role_name(int role) {
  static const char *const roles[] = {[M0__ROLE_COORD] = "coordinator", [M0__ROLE_LOOP] = "loop",
                                      [M0__ROLE_POOL] = "pool", [M0__ROLE_PRODUCER] = "producer",
                                      [M0__ROLE_EXTERNAL] = "external", [M0__ROLE_WORKER] = "worker",
                                      [M0__ROLE_APP] = "app", [M0__ROLE_CALLER] = "caller",
                                      [M0__ROLE_RELAYED] = "relayed", [M0__ROLE_MAILBOX] = "mailbox"};
  return role >= M0__ROLE_COORD && role <= M0__ROLE_LAST_ ? roles[role] : "?";
}

void m0__actor_name(uint32_t id, char *out, size_t outlen) {
  int role = M0__ACTOR_ROLE(id);
  unsigned idx = (unsigned)M0__ACTOR_INDEX(id);
  if (role < M0__ROLE_COORD || role > M0__ROLE_LAST_) {
    snprintf(out, outlen, "actor.%08x", (unsigned)id);
    return;
  }
  char b[80], *p = b;
  const char *named = role == M0__ROLE_APP && (idx >> 12) < APP_NAMES ? app_names[idx >> 12] : "";
  for (const char *r = named[0] ? named : m0__role_name(role); *r;) *p++ = *r++;
  if (role == M0__ROLE_APP && named[0] && (idx & 0xfff) == 0xfff) { /* echo: the actor's own socket */
  } else if (role == M0__ROLE_APP && named[0]) { /* echo.<slot> */
    *p++ = '.';
    p = m0__put_uint(p, idx & 0xfff);
  } else if (role == M0__ROLE_POOL || role == M0__ROLE_APP) { /* pool.<loop>.<thread>, app.<actor>.<slot> */
    *p++ = '.';
    p = m0__put_uint(p, idx >> 12);
    *p++ = '.';
    p = m0__put_uint(p, idx & 0xfff);
  } else if (role != M0__ROLE_COORD && role != M0__ROLE_PRODUCER) {
    *p++ = '.';
    p = m0__put_uint(p, idx);
  }
  size_t n = (size_t)(p - b);
  if (outlen == 0) return;
  if (n >= outlen) n = outlen - 1;
  memcpy(out, b, n);
  out[n] = 0;
}

bool m0__actor_name_known(const char *name) {
  size_t w = strcspn(name, ".");
  bool known = false;
  for (int r = M0__ROLE_COORD; r <= M0__ROLE_LAST_ && !known; r++)
    known = strlen(m0__role_name(r)) == w && !strncmp(m0__role_name(r), name, w);
  for (int i = 0; i < APP_NAMES && !known; i++) known = app_names[i][0] && strlen(app_names[i]) == w && !strncmp(app_names[i], name, w);
  if (!known) return false;
  int parts = 0;
  for (const char *p = name + w; *p; parts++) {
    if (*p++ != '.' || !isdigit((unsigned char)*p) || parts == 2) return false;
    while (isdigit((unsigned char)*p)) p++;
  }
  return true;
}
