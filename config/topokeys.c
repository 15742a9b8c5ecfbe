/* The topology file's schema as one table (config/topokeys.h says how it is
 * read; docs/topology.md is its prose, checked against it by
 * tests/unit/test_topokeys.c). */
#include "config/topokeys.h"

#include <stdio.h>
#include <string.h>

#define ANY 0u
/* 1 << m0__placement; config/appspec.h is above this table (it takes its
 * defaults from it), so config/topoapps.c asserts these and the bounds. */
#define THREAD 1u
#define PROCESS 2u
#define EXTERNAL 4u
#define NATS 8u
#define NONE M0__TOPO_NONE

#define WHOLE "%s must be a whole number from %ld to %ld"
#define TRUE_FALSE "%s must be true or false"
#define NOT_THREAD "%s is for process and external placement: a thread actor's instances are the host's own (drop the key)"

/* One row per key; an object's rows in the order its keys are listed. */
const m0__topo_key m0__topo_keys[] = {
    /* the file */
    {"", "mode", M0__TOPO_STRING, 0, 0, NONE, ANY, "mode must be \"single\", \"threads\" or \"prefork\"", NULL},
    {"", "loops", M0__TOPO_INT, 1, 4096, 1, ANY, WHOLE, NULL},
    {"", "handler_threads", M0__TOPO_INT, 0, 4096, NONE, ANY, WHOLE, NULL},
    {"", "connections_per_loop", M0__TOPO_INT, 1, 1000000, NONE, ANY, "%s must be from %ld to %ld", NULL},
    {"", "accept_sharing", M0__TOPO_BOOL, 0, 0, NONE, ANY, TRUE_FALSE, NULL},
    {"", "transport", M0__TOPO_STRING, 0, 0, NONE, ANY,
     "transport must be \"inproc\", \"ipc\" or \"tcp\" (or \"tls+tcp\", with \"tls\")", NULL},
    {"", "actors", M0__TOPO_LIST, 0, 0, NONE, ANY, "actors must be a list of {\"name\", \"url\"}", NULL},
    {"", "app_actors", M0__TOPO_LIST, 0, 64, NONE, ANY,
     "app_actors must be a list of {\"name\": ..., \"placement\": \"thread\" | \"process\" | \"external\" | \"nats\"}", NULL},
    {"", "routes", M0__TOPO_LIST, 0, 65536, NONE, ANY,
     "routes must be a list of {\"method\": ..., \"pattern\": ..., \"actor\": ...}", NULL},
    {"", "tls", M0__TOPO_OBJECT, 0, 0, NONE, ANY,
     "tls must be an object {\"cert\": PATH, \"key\": PATH, \"ca\": PATH} (PEM files)", NULL},
    {"", "plain_tcp", M0__TOPO_LIST, 0, 65536, NONE, ANY, NULL, NULL},
    {"", "bus", M0__TOPO_OBJECT, 0, 0, NONE, ANY,
     "bus must be an object (\"bus\": {\"nats\": \"nats://HOST:PORT\", \"subject\": \"m0.fleet\"})", NULL},
    {"", "supervisors", M0__TOPO_LIST, 0, 64, NONE, ANY,
     "supervisors must be a list of {\"name\": ..., \"strategy\": ..., \"children\": [ACTOR, ...]}", NULL},
    /* an entry of "actors": the topology's actors in its order */
    {"actors", "name", M0__TOPO_STRING, 0, 0, NONE, ANY, NULL, NULL},
    {"actors", "url", M0__TOPO_STRING, 0, 0, NONE, ANY, NULL, NULL},
    /* an entry of "app_actors" (config/appspec.h) */
    {"app_actors", "name", M0__TOPO_STRING, 1, 48, NONE, ANY, "%s must be a string of 1 to 48 bytes of a-z, 0-9, _ and -", NULL},
    {"app_actors", "placement", M0__TOPO_STRING, 0, 0, NONE, ANY,
     "%s must be \"thread\", \"process\", \"external\" or \"nats\"", NULL},
    {"app_actors", "instances", M0__TOPO_INT, 1, 64, 1, THREAD | PROCESS, WHOLE,
     "%s is for thread and process placement: an external actor's instances are the programs that dial it (drop "
     "the key)"},
    {"app_actors", "url", M0__TOPO_STRING, 0, 255, NONE, PROCESS | EXTERNAL | NATS, NULL,
     "%s is for process, external and nats placement: a thread actor has no URL (drop the key)"},
    {"app_actors", "subject", M0__TOPO_STRING, 1, 127, NONE, NATS,
     "%s must be a NATS subject: 1 to 127 bytes of tokens of A-Z a-z 0-9 _ - separated by dots, no wildcard",
     "%s is for nats placement: the subject its instances serve (drop the key)"},
    {"app_actors", "lanes", M0__TOPO_INT, 1, 64, 2, NATS, WHOLE,
     "%s is for nats placement: the batches each loop has out to its NATS subject at once (drop the key)"},
    {"app_actors", "restart", M0__TOPO_OBJECT, 0, 0, NONE, PROCESS | THREAD,
     "%s must be an object {\"intensity\": 0..1000, \"period_ms\": 1..86400000}",
     "%s is for process and thread placement: only an instance the host runs is restarted (drop the key)"},
    {"app_actors", "queue", M0__TOPO_INT, 1, 65536, 1024, ANY, WHOLE, NULL},
    {"app_actors", "secret", M0__TOPO_STRING, 0, 0, NONE, PROCESS | EXTERNAL,
     "%s must be a key file's path (a file of 16 to 4096 secret bytes, mode 600)", NOT_THREAD},
    {"app_actors", "trusted_network", M0__TOPO_BOOL, 0, 0, NONE, PROCESS | EXTERNAL, TRUE_FALSE, NOT_THREAD},
    {"app_actors.restart", "intensity", M0__TOPO_INT, 0, 1000, 5, ANY, WHOLE, NULL},
    {"app_actors.restart", "period_ms", M0__TOPO_INT, 1, 86400000, 10000, ANY, WHOLE, NULL},
    /* an entry of "routes": a route served by an actor */
    {"routes", "method", M0__TOPO_STRING, 1, 31, NONE, ANY,
     "%s must be a string of 1 to 31 capital letters A-Z (\"GET\", ...)", NULL},
    {"routes", "pattern", M0__TOPO_STRING, 1, 255, NONE, ANY,
     "%s must be a string that starts with / and is shorter than %ld bytes", NULL},
    {"routes", "actor", M0__TOPO_STRING, 1, 48, NONE, ANY,
     "%s must be an actor's name: a string of 1 to 48 bytes of a-z, 0-9, _ and -", NULL},
    {"routes", "timeout_ms", M0__TOPO_INT, 1, 3600000, 1000, ANY, WHOLE, NULL},
    {"routes", "stream", M0__TOPO_STRING, 1, 255, NONE, ANY, NULL, NULL},
    /* an entry of "supervisors": process actors restarted together (config/appspec.h, m0__sup_spec) */
    {"supervisors", "name", M0__TOPO_STRING, 1, 48, NONE, ANY, "%s must be a string of 1 to 48 bytes of a-z, 0-9, _ and -",
     NULL},
    {"supervisors", "strategy", M0__TOPO_STRING, 0, 0, NONE, ANY,
     "%s must be \"one_for_one\", \"one_for_all\" or \"rest_for_one\"", NULL},
    {"supervisors", "intensity", M0__TOPO_INT, 0, 1000, 5, ANY, WHOLE, NULL},
    {"supervisors", "period_ms", M0__TOPO_INT, 1, 86400000, 10000, ANY, WHOLE, NULL},
    {"supervisors", "children", M0__TOPO_LIST, 1, 64, NONE, ANY,
     "%s must be a list of 1 to 64 names of app_actors placed \"process\", in the order they start", NULL},
    {"supervisors", "on_fail", M0__TOPO_STRING, 0, 0, NONE, ANY, "%s must be \"exit\" or \"serve_on\"", NULL},
    /* "tls": this process's identity, PEM files */
    {"tls", "cert", M0__TOPO_STRING, 0, 0, NONE, ANY, NULL, NULL},
    {"tls", "key", M0__TOPO_STRING, 0, 0, NONE, ANY, NULL, NULL},
    {"tls", "ca", M0__TOPO_STRING, 0, 0, NONE, ANY, NULL, NULL},
    /* "bus": the fleet's NATS server and subject (bus/bus.h) */
    {"bus", "nats", M0__TOPO_STRING, 0, 255, NONE, ANY, NULL, NULL},
    {"bus", "subject", M0__TOPO_STRING, 1, 127, NONE, ANY, NULL, NULL},
};
const size_t m0__topo_nkeys = sizeof m0__topo_keys / sizeof m0__topo_keys[0];

const m0__topo_key *m0__topo_key_find(const char *in, const char *name) {
  for (size_t i = 0; i < m0__topo_nkeys; i++)
    if (!strcmp(m0__topo_keys[i].in, in) && !strcmp(m0__topo_keys[i].name, name)) return &m0__topo_keys[i];
  return NULL;
}

long m0__topo_default(const char *in, const char *name) {
  const m0__topo_key *k = m0__topo_key_find(in, name);
  return k ? k->dflt : M0__TOPO_NONE;
}

const char *m0__topo_unknown(json_t *o, const char *in) {
  const char *key;
  json_t *v;
  json_object_foreach(o, key, v) if (!m0__topo_key_find(in, key)) return key;
  return NULL;
}

void m0__topo_key_list(const char *in, char *out, size_t n) {
  size_t len = 0, count = 0, k = 0;
  out[0] = 0;
  for (size_t i = 0; i < m0__topo_nkeys; i++) count += !strcmp(m0__topo_keys[i].in, in);
  for (size_t i = 0; i < m0__topo_nkeys && len < n; i++) {
    if (strcmp(m0__topo_keys[i].in, in)) continue;
    const char *sep = k == 0 ? "" : k + 1 == count ? " and " : ", ";
    len += (size_t)snprintf(out + len, n - len, "%s%s", sep, m0__topo_keys[i].name);
    k++;
  }
}

bool m0__topo_int_in(json_t *v, long min, long max) {
  return json_is_integer(v) && json_integer_value(v) >= min && json_integer_value(v) <= max;
}

/* Whether v has k's type (and is in its range). */
static bool topokeys_fits(const m0__topo_key *k, json_t *v) {
  switch (k->type) {
  case M0__TOPO_INT: return m0__topo_int_in(v, k->min, k->max);
  case M0__TOPO_BOOL: return json_is_boolean(v);
  case M0__TOPO_OBJECT: return json_is_object(v);
  case M0__TOPO_LIST: return json_is_array(v);
  default: return true; /* a string's handler judges it (what it names, not only its type) */
  }
}

bool m0__topo_check_keys(m0_config *cfg, const char *text, json_t *o, const char *in, const char *path,
                         unsigned placement) {
  for (size_t i = 0; i < m0__topo_nkeys; i++) {
    const m0__topo_key *k = &m0__topo_keys[i];
    json_t *v = strcmp(k->in, in) ? NULL : json_object_get(o, k->name);
    if (!v) continue;
    char full[160];
    snprintf(full, sizeof full, "%s%s%s", path, path[0] ? "." : "", k->name);
    if (placement && k->places && !(k->places & placement)) {
      m0__topo_fail_at(cfg, text, path, k->name, k->only, full);
      return false;
    }
    if (k->bad && !topokeys_fits(k, v)) {
      m0__topo_fail_at(cfg, text, path, k->name, k->bad, full, k->min, k->max);
      return false;
    }
  }
  return true;
}
