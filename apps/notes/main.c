/* notes — state kept in the handler, so it serves one loop in one process
 * (max_workers 1, and so max_threads 1): the host refuses --workers 2 and
 * --threads 2 for it.
 *   GET /notes         {"notes":[{"id":1,"text":"..."}, ...]}
 *   POST /notes        the body is the note's text: 201 {"id":N}
 *   GET /notes/{id}    one note, or 404
 */
#include <jansson.h>
#include <m0/m0.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOTES_MAX 10000

typedef struct notes {
  json_t *list; /* array of {"id","text"} */
  long next_id;
} notes;

static void *notes_make(const m0_ctx *ctx, char *err, size_t errlen) {
  notes *n = calloc(1, sizeof *n);
  if (!n) return NULL;
  n->list = json_array();
  n->next_id = 1;
  return n;
}

static void notes_free(void *state) {
  notes *n = state;
  json_decref(n->list);
  free(n);
}

static void respond_json(m0_response *res, int status, json_t *v) {
  char *s = json_dumps(v, JSON_COMPACT);
  m0_respond(res, status, "application/json", s, strlen(s), M0_BODY_COPY);
  free(s);
  json_decref(v);
}

static void view_list(void *state, const m0_request *req, m0_response *res) {
  notes *n = state;
  respond_json(res, 200, json_pack("{s:O}", "notes", n->list));
}

static void view_add(void *state, const m0_request *req, m0_response *res) {
  notes *n = state;
  if (json_array_size(n->list) >= NOTES_MAX) {
    respond_json(res, 507, json_pack("{s:s}", "error", "the notebook is full"));
    return;
  }
  json_t *text = json_stringn(req->body.p ? req->body.p : "", req->body.n);
  if (!text) {
    respond_json(res, 400, json_pack("{s:s}", "error", "a note is UTF-8 text"));
    return;
  }
  long id = n->next_id++;
  json_array_append_new(n->list, json_pack("{s:i, s:o}", "id", (json_int_t)id, "text", text));
  respond_json(res, 201, json_pack("{s:i}", "id", (json_int_t)id));
}

static void view_one(void *state, const m0_request *req, m0_response *res) {
  notes *n = state;
  long id = 0;
  for (size_t k = 0; k < req->params[0].n; k++) {
    char ch = req->params[0].p[k];
    if (ch < '0' || ch > '9' || id > 100000000) {
      respond_json(res, 404, json_pack("{s:s}", "error", "no such note"));
      return;
    }
    id = id * 10 + (ch - '0');
  }
  size_t i;
  json_t *note;
  json_array_foreach(n->list, i, note) {
    if (json_integer_value(json_object_get(note, "id")) == id) {
      respond_json(res, 200, json_incref(note));
      return;
    }
  }
  respond_json(res, 404, json_pack("{s:s}", "error", "no such note"));
}

static const m0_route notes_routes[] = {
    {"GET", "/notes", view_list, 0},
    {"POST", "/notes", view_add, 0},
    {"GET", "/notes/{id}", view_one, 0},
};

static const m0_app notes_app = {
    .name = "notes",
    .make = notes_make,
    .free = notes_free,
    .routes = notes_routes,
    .nroutes = sizeof notes_routes / sizeof notes_routes[0],
    .max_workers = 1,
};

int main(int argc, char **argv) { return m0_serve(&notes_app, NULL, argc, argv); }
