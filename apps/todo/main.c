/* todo — a JSON todo API, the reference application of m0's request and
 * response API (docs/apps.md, todo, says which route shows what).
 *   GET    /health          on the loop: {"status":"ok","content_length_header":-1}
 *                           (the host refused the view's Content-Length); no X-Request-Id
 *   GET    /todos           ?tag=a&tag=b (every tag) &q=text (in the title):
 *                           {"todos":[...],"filter":{"tags":[...],"q":"..."}}
 *   POST   /todos           {"title":"...","tags":["..."]}: 201 the todo; 400 bad JSON
 *   GET    /todos/export    on the loop: every todo, one JSON line each (NDJSON),
 *                           written in pieces from a thread of its own
 *   GET    /todos/{id}      the todo, or 404
 *   DELETE /todos/{id}      204, or 404
 *   POST   /login           form body user=NAME: a session cookie "sid", {"user":NAME}
 *   GET    /me              {"user":NAME} from the cookie, 401 without a live one
 *   POST   /logout          204, the cookie deleted (Max-Age=0)
 *   GET    /whoami          on the loop: {"peer":A,"port":P,"client":C}
 *   GET    /static/{name}   a file of the directory M0_TODO_STATIC (404 when unset),
 *                           Cache-Control: public, max-age=60
 *   GET    /report          blocks 200 ms (M0_NEEDS_POOL: served only with
 *                           --blocking-threads 1 or more, else exit 78):
 *                           {"todos":N,"done":D,"exports_abandoned":E}
 * Every answer but /health's carries X-Request-Id (one counter for the
 * process) and Cache-Control: no-store, added by before_request.
 *
 * Design notes
 * - The todos and the sessions live in ONE store for the whole process,
 *   made in main before m0_serve, and every handler state (each loop's and
 *   each pool thread's, made by make) points to it. A store in the handler
 *   state would be one per loop and one per pool thread (README, "shared
 *   state across loops"): under --threads 2 or --blocking-threads N a POST
 *   answered by one of them would be missing from a GET answered by
 *   another. Those threads run views at the same time, so one mutex guards
 *   the store, and every touch of its jansson values — an incref by a
 *   response that holds an item too — is made under it (jansson values are
 *   not for sharing across threads unlocked). Sections are short: nothing
 *   blocks while holding it.
 * - One process, so max_workers is 1 (--workers 2 would be two stores) and
 *   max_threads -1 (any number of loops share this one).
 * - make has no argument of the application's, so main hands the store over
 *   through todo_shared, written once before any thread starts and only read
 *   after.
 * - The export's on_gone may run on the loop after the export thread let go
 *   of the writer (the client leaves before the loop took the end), so its
 *   argument is the store, which outlives every loop, never the export's
 *   own memory.
 */
#include <errno.h>
#include <jansson.h>
#include <m0/m0.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define TODO_MAX 100000
#define TODO_TITLE_MAX 4096
#define TODO_TAGS_MAX 16
#define TODO_TAG_MAX 64
#define TODO_USER_MAX 64
#define TODO_SESSIONS_MAX 10000
#define TODO_SESSION_SECONDS 3600

typedef struct todo_store {
  pthread_mutex_t mu;
  json_t *todos;    /* array of {"id","title","tags","done"}, under mu */
  json_t *sessions; /* object: session token -> user name, under mu */
  long next_id;     /* under mu */
  atomic_ulong requests;          /* X-Request-Id */
  atomic_ulong exports_abandoned; /* exports whose client left before the end */
  const char *static_dir;         /* M0_TODO_STATIC, or NULL */
} todo_store;

static todo_store *todo_shared;

typedef struct todo_state {
  todo_store *st;
} todo_state;

static void *todo_make(const m0_ctx *ctx, char *err, size_t errlen) {
  todo_state *s = calloc(1, sizeof *s);
  if (!s) {
    snprintf(err, errlen, "todo: out of memory");
    return NULL;
  }
  s->st = todo_shared;
  return s;
}

static void todo_free(void *state) { free(state); }

/* ---- answers ---- */

/* Every JSON answer: the json_dumps string is handed to the host as it is
 * (m0_respond_owned frees it with free(3) once written). Takes v. */
static void respond_json(m0_response *res, int status, json_t *v) {
  char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
  json_decref(v);
  if (!s) {
    static const char oom[] = "{\"error\":\"out of memory\"}";
    m0_respond(res, 500, "application/json", oom, sizeof oom - 1, M0_BODY_STATIC);
    return;
  }
  m0_respond_owned(res, status, "application/json", s, strlen(s), NULL);
}

static void respond_error(m0_response *res, int status, const char *why) {
  respond_json(res, status, json_pack("{s:s}", "error", why));
}

/* A value that holds items of the store: dumped under the lock (the dump
 * reads them, the decref drops the references it took), answered outside. */
static void respond_json_locked(todo_store *st, m0_response *res, int status, json_t *v) {
  char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
  json_decref(v);
  pthread_mutex_unlock(&st->mu);
  if (!s) {
    respond_error(res, 500, "out of memory");
    return;
  }
  m0_respond_owned(res, status, "application/json", s, strlen(s), NULL);
}

/* ---- headers on every answer ---- */

/* On the loop, before routing: the request's id and no caching. A route
 * changes them with m0_response_header_set / _remove. */
static bool todo_before(void *state, const m0_request *req, m0_response *res) {
  todo_state *s = state;
  char id[24];
  snprintf(id, sizeof id, "%lu", atomic_fetch_add(&s->st->requests, 1) + 1);
  m0_response_header(res, "X-Request-Id", id);
  m0_response_header(res, "Cache-Control", "no-store");
  return false;
}

/* A load balancer's probe: not a request anyone traces, so no id. The view
 * also tries to frame its own answer, which the host refuses (-1): the
 * number is in the answer so it can be seen. */
static void view_health(void *state, const m0_request *req, m0_response *res) {
  m0_response_header_remove(res, "X-Request-Id");
  int framing = m0_response_header(res, "Content-Length", "2");
  respond_json(res, 200, json_pack("{s:s,s:i}", "status", "ok", "content_length_header", framing));
}

/* ---- todos ---- */

/* The todo whose id is the path parameter, or NULL (under st->mu). */
static json_t *todo_find(todo_store *st, m0_str param, size_t *index) {
  long id = 0;
  for (size_t k = 0; k < param.n; k++) {
    char ch = param.p[k];
    if (ch < '0' || ch > '9' || id > 100000000) return NULL;
    id = id * 10 + (ch - '0');
  }
  size_t i;
  json_t *t;
  json_array_foreach(st->todos, i, t) {
    if (json_integer_value(json_object_get(t, "id")) == id) {
      if (index) *index = i;
      return t;
    }
  }
  return NULL;
}

static bool todo_has_tag(json_t *todo, const char *tag) {
  size_t i;
  json_t *t;
  json_array_foreach(json_object_get(todo, "tags"), i, t) if (!strcmp(json_string_value(t), tag)) return true;
  return false;
}

static bool todo_matches(json_t *todo, json_t *tags, const char *q, size_t qn) {
  size_t i;
  json_t *tag;
  json_array_foreach(tags, i, tag) if (!todo_has_tag(todo, json_string_value(tag))) return false;
  json_t *title = json_object_get(todo, "title");
  return !q || memmem(json_string_value(title), json_string_length(title), q, qn);
}

/* The filter of GET /todos: every `tag` (repeated keys, in order) and `q`,
 * both form-decoded ('+' is a space). NULL, with why, for a bad escape. */
static json_t *filter_read(const m0_request *req, char *q, size_t qcap, size_t *qn, bool *has_q, const char **why) {
  json_t *tags = json_array();
  m0_query_iter it;
  m0_str k, v;
  m0_query_init(&it, req->query);
  while (m0_query_next(&it, &k, &v)) {
    char key[16], val[TODO_TAG_MAX];
    long kn = m0_decode(k, key, sizeof key, M0_DECODE_FORM);
    if (kn != 3 || memcmp(key, "tag", 3)) continue;
    long vn = m0_decode(v, val, sizeof val, M0_DECODE_FORM);
    json_t *t = vn > 0 ? json_stringn(val, (size_t)vn) : NULL;
    if (!t || json_array_size(tags) >= TODO_TAGS_MAX) {
      *why = "a tag is 1..64 bytes of UTF-8, percent-encoded, 16 at most";
      json_decref(t);
      json_decref(tags);
      return NULL;
    }
    json_array_append_new(tags, t);
  }
  m0_str raw;
  *has_q = m0_request_query(req, "q", &raw);
  if (*has_q && !m0_request_query_decoded(req, "q", q, qcap, qn)) {
    *why = "q does not decode (a bad escape, %00, or longer than 4096 bytes)";
    json_decref(tags);
    return NULL;
  }
  return tags;
}

static void view_list(void *state, const m0_request *req, m0_response *res) {
  todo_store *st = ((todo_state *)state)->st;
  char q[TODO_TITLE_MAX];
  size_t qn = 0;
  bool has_q;
  const char *why = NULL;
  json_t *tags = filter_read(req, q, sizeof q, &qn, &has_q, &why);
  if (!tags) {
    respond_error(res, 400, why);
    return;
  }
  json_t *qs = has_q ? json_stringn(q, qn) : json_null();
  if (!qs) {
    json_decref(tags);
    respond_error(res, 400, "q is not UTF-8");
    return;
  }
  json_t *found = json_array();
  pthread_mutex_lock(&st->mu);
  size_t i;
  json_t *t;
  json_array_foreach(st->todos, i, t) if (todo_matches(t, tags, has_q ? q : NULL, qn)) json_array_append(found, t);
  respond_json_locked(st, res, 200,
                      json_pack("{s:o,s:{s:o,s:o}}", "todos", found, "filter", "tags", tags, "q", qs));
}

/* POST /todos: {"title":"...","tags":["..."]}, title 1..4096 bytes. */
static const char *todo_check(json_t *in) {
  json_t *title = json_object_get(in, "title"), *tags = json_object_get(in, "tags");
  if (!json_is_object(in)) return "the body is a JSON object: {\"title\":\"...\",\"tags\":[...]}";
  if (!json_is_string(title) || json_string_length(title) == 0 || json_string_length(title) > TODO_TITLE_MAX)
    return "title is a string of 1..4096 bytes";
  if (tags && (!json_is_array(tags) || json_array_size(tags) > TODO_TAGS_MAX))
    return "tags is an array of at most 16 strings";
  size_t i;
  json_t *t;
  json_array_foreach(tags, i, t) if (!json_is_string(t) || json_string_length(t) == 0 ||
                                     json_string_length(t) > TODO_TAG_MAX) return "a tag is a string of 1..64 bytes";
  return NULL;
}

static void view_add(void *state, const m0_request *req, m0_response *res) {
  todo_store *st = ((todo_state *)state)->st;
  json_error_t jerr;
  json_t *in = json_loadb(req->body.p ? req->body.p : "", req->body.n, JSON_REJECT_DUPLICATES, &jerr);
  if (!in) {
    char why[256];
    snprintf(why, sizeof why, "the body is not JSON: %s (line %d, column %d)", jerr.text, jerr.line, jerr.column);
    respond_error(res, 400, why);
    return;
  }
  const char *why = todo_check(in);
  if (why) {
    json_decref(in);
    respond_error(res, 400, why);
    return;
  }
  json_t *tags = json_object_get(in, "tags");
  /* The todo is built from copies: nothing of the request's value is shared. */
  json_t *todo = json_pack("{s:i,s:O,s:o,s:b}", "id", (json_int_t)0, "title", json_object_get(in, "title"), "tags",
                           tags ? json_deep_copy(tags) : json_array(), "done", 0);
  json_decref(in);
  if (!todo) {
    respond_error(res, 500, "out of memory");
    return;
  }
  pthread_mutex_lock(&st->mu);
  if (json_array_size(st->todos) >= TODO_MAX) {
    pthread_mutex_unlock(&st->mu);
    json_decref(todo);
    respond_error(res, 507, "the list is full");
    return;
  }
  json_object_set_new(todo, "id", json_integer(st->next_id++));
  json_array_append(st->todos, todo);
  respond_json_locked(st, res, 201, todo);
}

static void view_one(void *state, const m0_request *req, m0_response *res) {
  todo_store *st = ((todo_state *)state)->st;
  pthread_mutex_lock(&st->mu);
  json_t *t = todo_find(st, req->params[0], NULL);
  if (!t) {
    pthread_mutex_unlock(&st->mu);
    respond_error(res, 404, "no such todo");
    return;
  }
  respond_json_locked(st, res, 200, json_incref(t));
}

static void view_delete(void *state, const m0_request *req, m0_response *res) {
  todo_store *st = ((todo_state *)state)->st;
  size_t i;
  pthread_mutex_lock(&st->mu);
  bool found = todo_find(st, req->params[0], &i) != NULL;
  if (found) json_array_remove(st->todos, i);
  pthread_mutex_unlock(&st->mu);
  if (found) m0_respond(res, 204, NULL, NULL, 0, M0_BODY_STATIC);
  else respond_error(res, 404, "no such todo");
}

/* ---- the export: NDJSON in pieces from a thread ---- */

typedef struct todo_export {
  m0_writer *w;
  json_t *todos; /* the export's own copy, taken under the lock */
} todo_export;

/* The client left before the end (on the loop's thread). The export thread
 * learns it from its next write (EPIPE); this counts it. */
static void export_gone(void *arg) {
  todo_store *st = arg;
  atomic_fetch_add(&st->exports_abandoned, 1);
}

/* One line per todo; after each, wait for the client to take all but 64 KiB,
 * so a slow reader holds this thread, not the process's memory. */
static void *export_run(void *arg) {
  todo_export *x = arg;
  size_t i;
  json_t *t;
  json_array_foreach(x->todos, i, t) {
    char *line = json_dumps(t, JSON_COMPACT);
    size_t n = line ? strlen(line) : 0;
    if (line) line[n++] = '\n'; /* over its NUL: the line is written by length */
    int rc = line ? m0_writer_write(x->w, line, n) : -1;
    free(line);
    if (rc != 0 || m0_writer_wait(x->w, 10000) != 0) break; /* gone, or not reading for 10 s */
  }
  m0_writer_end(x->w);
  json_decref(x->todos);
  free(x);
  return NULL;
}

/* On the loop (a writer is begun there): takes a copy of the list, sends the
 * head, and leaves the body to a thread of its own. */
static void view_export(void *state, const m0_request *req, m0_response *res) {
  todo_store *st = ((todo_state *)state)->st;
  todo_export *x = calloc(1, sizeof *x);
  if (!x) {
    respond_error(res, 500, "out of memory");
    return;
  }
  pthread_mutex_lock(&st->mu);
  x->todos = json_deep_copy(st->todos);
  pthread_mutex_unlock(&st->mu);
  if (!x->todos) {
    free(x);
    respond_error(res, 500, "out of memory");
    return;
  }
  if (!(x->w = m0_respond_writer(res, 200, "application/x-ndjson", export_gone, st))) {
    json_decref(x->todos);
    free(x);
    return; /* a writer refused is answered by the host */
  }
  pthread_t th;
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&th, &at, export_run, x) != 0) {
    /* The head is gone already: the body says why it is short. */
    static const char line[] = "{\"error\":\"no thread for the export\"}\n";
    m0_writer_write(x->w, line, sizeof line - 1);
    m0_writer_end(x->w);
    json_decref(x->todos);
    free(x);
  }
  pthread_attr_destroy(&at);
}

/* ---- sessions ---- */

static const m0_cookie_attrs session_cookie = {
    .path = "/",
    .has_max_age = true,
    .max_age = TODO_SESSION_SECONDS,
    /* No Secure: the app is served over plain HTTP here (tests, behind a
     * TLS proxy in production, where Secure belongs). */
    .http_only = true,
    .same_site = M0_SAME_SITE_LAX,
};

/* The form body's `user`, decoded (form rules: '+' is a space). */
static long login_user(const m0_request *req, char *user, size_t cap) {
  m0_query_iter it;
  m0_str k, v;
  m0_query_init(&it, req->body);
  while (m0_query_next(&it, &k, &v)) {
    char key[16];
    long kn = m0_decode(k, key, sizeof key, M0_DECODE_FORM);
    if (kn == 4 && !memcmp(key, "user", 4)) return m0_decode(v, user, cap, M0_DECODE_FORM);
  }
  return -1;
}

static void view_login(void *state, const m0_request *req, m0_response *res) {
  todo_store *st = ((todo_state *)state)->st;
  char user[TODO_USER_MAX];
  long un = login_user(req, user, sizeof user);
  json_t *name = un > 0 ? json_stringn(user, (size_t)un) : NULL;
  if (!name) {
    respond_error(res, 400, "the form wants user=NAME: 1..64 bytes of UTF-8");
    return;
  }
  unsigned char raw[16];
  char token[2 * sizeof raw + 1];
  if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
    json_decref(name);
    respond_error(res, 503, "no randomness for a session");
    return;
  }
  for (size_t i = 0; i < sizeof raw; i++) snprintf(token + 2 * i, 3, "%02x", raw[i]);
  pthread_mutex_lock(&st->mu);
  bool full = json_object_size(st->sessions) >= TODO_SESSIONS_MAX;
  /* The store keeps its own copy: name goes on into the answer, unlocked. */
  if (!full) full = json_object_set_new(st->sessions, token, json_copy(name)) != 0;
  pthread_mutex_unlock(&st->mu);
  if (full || m0_response_cookie(res, "sid", token, &session_cookie) != 0) {
    json_decref(name);
    respond_error(res, 503, "no room for a session");
    return;
  }
  respond_json(res, 200, json_pack("{s:o}", "user", name));
}

/* The session's token from the cookie, NUL-terminated into tok; false when
 * there is none a login could have made. */
static bool session_token(const m0_request *req, char *tok, size_t cap) {
  m0_str sid;
  if (!m0_request_cookie(req, "sid", &sid) || sid.n == 0 || sid.n >= cap) return false;
  memcpy(tok, sid.p, sid.n);
  tok[sid.n] = 0;
  return true;
}

static void view_me(void *state, const m0_request *req, m0_response *res) {
  todo_store *st = ((todo_state *)state)->st;
  char tok[64];
  json_t *user = NULL;
  pthread_mutex_lock(&st->mu);
  if (session_token(req, tok, sizeof tok)) user = json_deep_copy(json_object_get(st->sessions, tok));
  pthread_mutex_unlock(&st->mu);
  if (!user) respond_error(res, 401, "not logged in");
  else respond_json(res, 200, json_pack("{s:o}", "user", user));
}

static void view_logout(void *state, const m0_request *req, m0_response *res) {
  todo_store *st = ((todo_state *)state)->st;
  char tok[64];
  if (session_token(req, tok, sizeof tok)) {
    pthread_mutex_lock(&st->mu);
    json_object_del(st->sessions, tok);
    pthread_mutex_unlock(&st->mu);
  }
  /* Deleting is setting it again, same path, Max-Age=0. */
  m0_cookie_attrs gone = session_cookie;
  gone.max_age = 0;
  m0_response_cookie(res, "sid", "", &gone);
  m0_respond(res, 204, NULL, NULL, 0, M0_BODY_STATIC);
}

/* ---- the peer ---- */

static void view_whoami(void *state, const m0_request *req, m0_response *res) {
  respond_json(res, 200,
               json_pack("{s:s,s:i,s:s}", "peer", req->peer, "port", req->peer_port, "client", req->client));
}

/* ---- files ---- */

static const char *static_type(const char *name) {
  static const struct {
    const char *ext, *type;
  } types[] = {{".html", "text/html; charset=utf-8"}, {".css", "text/css"},
               {".js", "text/javascript"},            {".json", "application/json"},
               {".txt", "text/plain; charset=utf-8"}, {".png", "image/png"}};
  const char *dot = strrchr(name, '.');
  for (size_t i = 0; dot && i < sizeof types / sizeof types[0]; i++)
    if (!strcmp(dot, types[i].ext)) return types[i].type;
  return "application/octet-stream";
}

/* One file of M0_TODO_STATIC, by its name alone: no '/', nothing hidden
 * (".env", "..": a name starting '.' is refused whatever follows). */
static void view_static(void *state, const m0_request *req, m0_response *res) {
  todo_store *st = ((todo_state *)state)->st;
  if (!st->static_dir) {
    respond_error(res, 404, "no static files (M0_TODO_STATIC is not set)");
    return;
  }
  char name[256];
  long n = m0_decode(req->params[0], name, sizeof name - 1, M0_DECODE_PATH);
  if (n <= 0 || memchr(name, '/', (size_t)n) || name[0] == '.') {
    respond_error(res, 404, "no such file");
    return;
  }
  name[n] = 0;
  char path[4096];
  if (snprintf(path, sizeof path, "%s/%s", st->static_dir, name) >= (int)sizeof path) {
    respond_error(res, 404, "no such file");
    return;
  }
  /* A file may be cached; everything else of this app may not. */
  m0_response_header_set(res, "Cache-Control", "public, max-age=60");
  if (m0_respond_file(res, static_type(name), path) != 0) {
    m0_response_header_set(res, "Cache-Control", "no-store");
    respond_error(res, 404, "no such file");
  }
}

/* ---- a blocking view ---- */

/* Stands for a view that waits on something slow (a database, a disk): it
 * sleeps 200 ms, so it is flagged M0_NEEDS_POOL and never runs on a loop. */
static void view_report(void *state, const m0_request *req, m0_response *res) {
  todo_store *st = ((todo_state *)state)->st;
  struct timespec ts = {0, 200 * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  size_t i, done = 0, total;
  json_t *t;
  pthread_mutex_lock(&st->mu);
  total = json_array_size(st->todos);
  json_array_foreach(st->todos, i, t) done += json_is_true(json_object_get(t, "done"));
  pthread_mutex_unlock(&st->mu);
  respond_json(res, 200,
               json_pack("{s:I,s:I,s:I}", "todos", (json_int_t)total, "done", (json_int_t)done, "exports_abandoned",
                         (json_int_t)atomic_load(&st->exports_abandoned)));
}

/* /todos/export before /todos/{id}: the first route that matches answers. */
static const m0_route todo_routes[] = {
    {"GET", "/health", view_health, M0_ON_LOOP},
    {"GET", "/todos", view_list, 0},
    {"POST", "/todos", view_add, 0},
    {"GET", "/todos/export", view_export, M0_ON_LOOP},
    {"GET", "/todos/{id}", view_one, 0},
    {"DELETE", "/todos/{id}", view_delete, 0},
    {"POST", "/login", view_login, 0},
    {"GET", "/me", view_me, 0},
    {"POST", "/logout", view_logout, 0},
    {"GET", "/whoami", view_whoami, M0_ON_LOOP},
    {"GET", "/static/{name}", view_static, 0},
    {"GET", "/report", view_report, M0_NEEDS_POOL},
};

static const m0_app todo_app = {
    .name = "todo",
    .make = todo_make,
    .free = todo_free,
    .before_request = todo_before,
    .routes = todo_routes,
    .nroutes = sizeof todo_routes / sizeof todo_routes[0],
    .max_workers = 1,  /* the store is one process's memory */
    .max_threads = -1, /* which every loop of it shares */
};

int main(int argc, char **argv) {
  static todo_store st = {.mu = PTHREAD_MUTEX_INITIALIZER, .next_id = 1};
  const char *dir = getenv("M0_TODO_STATIC");
  st.static_dir = dir && *dir ? dir : NULL;
  st.todos = json_array();
  st.sessions = json_object();
  if (!st.todos || !st.sessions) {
    fprintf(stderr, "todo: out of memory\n");
    return 1;
  }
  todo_shared = &st;
  int rc = m0_serve(&todo_app, NULL, argc, argv);
  json_decref(st.todos);
  json_decref(st.sessions);
  return rc;
}
