/* m0 --topology FILE — a front end whose every route is served by actors
 * (Mongrel2's shape): the file's "routes" name actors, its "app_actors"
 * place them (external: any program that dials the actor's URL, in any
 * language — docs/wire.md), and this program has no view of its own; a
 * route may instead be a channel ("stream"), which those actors publish on,
 * answered as SSE or a WebSocket (docs/topology.md, Stream routes). A
 * request no route matches is answered 404 (405 with Allow for another
 * method); with no file, or a file without routes, it refuses to start. */
#include <m0/m0.h>

int main(int argc, char **argv) {
  static const m0_app app = {.name = "m0"};
  return m0_serve(&app, NULL, argc, argv);
}
