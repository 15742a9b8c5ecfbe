/* libFuzzer: topology files (config/topofile.c, the schema's table in
 * config/topokeys.c, docs/topology.md). The input is the file. Checked: a
 * refused file leaves one line naming the file (and, past jansson, a line
 * and column) and applies nothing; an accepted one applies only what the
 * table allows (names, placements, instances, queues and timeouts in their
 * ranges). Any crash, leak, undefined behaviour or abort is a finding. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/appspec.h"
#include "config/options.h"
#include "config/topofile.h"
#include "config/topokeys.h"

static void check(bool ok) {
  if (!ok) abort();
}

/* One file per fuzzing process, written again for each input, removed at
 * its exit. */
static char fuzz_file[64];

static void fuzz_unlink(void) { unlink(fuzz_file); }

static const char *fuzz_path(void) {
  if (!fuzz_file[0]) {
    snprintf(fuzz_file, sizeof fuzz_file, "/tmp/m0-fuzz-topology-%d.json", (int)getpid());
    atexit(fuzz_unlink);
  }
  return fuzz_file;
}

static void check_refused(const m0_config *c, const char *path) {
  check(!strncmp(c->topology_error, path, strlen(path)));
  check(!strchr(c->topology_error, '\n'));
  check(c->ntopo_urls == 0 && c->napp_actors == 0 && c->nfile_routes == 0 && c->nplain_tcp == 0);
  check(c->app_actors == NULL && c->file_routes == NULL && c->topo_urls == NULL);
}

static bool in_range(const char *in, const char *key, long v) {
  const m0__topo_key *k = m0__topo_key_find(in, key);
  return k && v >= k->min && v <= k->max;
}

static void check_accepted(const m0_config *c) {
  for (int i = 0; i < c->napp_actors; i++) {
    const m0__actor_spec *s = &c->app_actors[i];
    check(s->name[0] && strlen(s->name) <= M0__ACTOR_NAME_MAX);
    check(s->placement == M0__PLACE_EXTERNAL || s->placement == M0__PLACE_NATS ? s->instances == 0
                                                                            : in_range("app_actors", "instances", s->instances));
    check(in_range("app_actors", "queue", s->queue));
    check(in_range("app_actors.restart", "intensity", s->restart_intensity));
    check(in_range("app_actors.restart", "period_ms", s->restart_period_ms));
    check(s->placement != M0__PLACE_THREAD || (!s->url[0] && !s->secret_file[0] && !s->trusted_network));
    for (int j = 0; j < i; j++) check(strcmp(c->app_actors[j].name, s->name) != 0);
  }
  for (int i = 0; i < c->nfile_routes; i++) {
    const m0__route_spec *r = &c->file_routes[i];
    check(r->method[0] && r->pattern[0] == '/' && r->actor[0]);
    check(in_range("routes", "timeout_ms", r->timeout_ms));
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_path();
  FILE *f = fopen(path, "wb");
  check(f != NULL);
  check(fwrite(data, 1, size, f) == size);
  fclose(f);
  m0_config *c = calloc(1, sizeof *c);
  check(c != NULL);
  char *argv[] = {"fuzz", "--topology", (char *)path, NULL}, why[512];
  check(m0__config_load(c, 3, argv, why, sizeof why) == 0);
  if (c->topology_error[0]) check_refused(c, path);
  else check_accepted(c);
  m0__config_fini(c);
  free(c);
  return 0;
}
