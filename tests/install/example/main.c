/* An application built outside the tree against an installed m0. */
#include <m0/m0.h>

static void hello(void *state, const m0_request *req, m0_response *res) {
  m0_respond(res, 200, "text/plain", "hello from outside\n", 19, M0_BODY_STATIC);
}
static const m0_route routes[] = {{"GET", "/hello", hello, M0_ON_LOOP}};
static const m0_app app = {.name = "outside", .routes = routes, .nroutes = 1};
int main(int argc, char **argv) { return m0_serve(&app, NULL, argc, argv); }
