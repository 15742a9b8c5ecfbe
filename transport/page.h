/* The shared page: a file-backed shared mapping made before any loop or worker
 * exists, so every loop, every (respawned) worker and an external publisher
 * (m0pub) see the same words. Layout:
 *
 *   line 0       magic, version, loops, app_slots, and slot 0: the event-id
 *                counter every publisher numbers from
 *   then two banks of loop lines, per loop i 128 bytes: open and pending
 *                connections, hand-offs, requests, streams, pool queue,
 *                dropped frames (read by accept sharing and m0_stats). A
 *                generation (host/reload.h) uses bank (generation-1) % 2, so
 *                a new one serving beside its draining predecessor never
 *                shares a line with it
 *   then M0__PAGE_REFUSAL_LINES lines: messages refused by each actor of
 *                any process of the host, by reason (runtime/admit.h)
 *   then the bus: the fleet's NATS server and subject (written by the top
 *                process, read by m0pub) and its counters (bus/bus.h)
 *   then M0__PAGE_EDGE_LINES lines: the messages sent on each edge (from,
 *                to) by any process of the host (runtime/edges.h)
 *   then the recent trace records: a ring of M0__PAGE_TRACE_LINES that
 *                every process's tracer writes while on (runtime/recent.h)
 *   then M0__PAGE_APP_ACTORS words: each application actor's restarts of
 *                its spawned instances, counted by whichever process spawns
 *                them (the supervisor under prefork), read by every one
 *   then M0__PAGE_CHANNEL_LINES lines: the frames dropped for slow
 *                subscribers, by channel, by any loop of any process
 *                (http/stream.c)
 *   then the host's figures (one line), M0__PAGE_APP_ACTORS actor lines
 *                (requests by outcome, latency) and per loop its figures
 *                (responses by route and status class, latency, WebSocket
 *                messages and closes, requests with each actor): counters
 *                only ever added to, by every process of the host, never
 *                cleared, so /metrics' sums never go back (see below)
 *   then the rows' keys: which route and which actor each row of the
 *                figures counts (m0__page_rows, below)
 *   then the application actors' names (m0__page_names, below)
 *   then what the observer reads of every process (m0__page_observed,
 *                below): the edges' rates, the spawned instances' pids,
 *                and per bank per loop its worker's thread instances
 *
 * The application's page (page_slots words) is a second file, "app-page".
 */
#ifndef M0_TRANSPORT_PAGE_H
#define M0_TRANSPORT_PAGE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/latency.h"

#define M0__PAGE_MAGIC 0x6567617030306dull /* "m00page" */
#define M0__PAGE_VERSION 11

typedef struct m0__page_head {
  _Atomic uint64_t event_id; /* slot 0 */
  uint64_t magic;
  uint32_t version;
  uint32_t loops;
  uint64_t app_slots;
  _Atomic uint64_t refused;  /* frames a publisher could not deliver to every loop */
  _Atomic uint64_t respawns; /* workers the supervisor respawned */
  _Atomic uint64_t generation;  /* the generation serving now (1 until a reload; host/reload.h) */
  _Atomic uint64_t reloaded_ms; /* unix time (ms) the last reload's generation began serving, 0 none */
} m0__page_head;

typedef struct m0__loop_line {
  _Atomic uint64_t open;     /* connections open now */
  _Atomic uint64_t pending;  /* hand-offs sent to this loop, not yet admitted */
  _Atomic uint64_t handoffs; /* connections this loop handed away */
  _Atomic uint64_t requests;
  _Atomic uint64_t streams;
  _Atomic uint64_t pass_start_ms; /* when the current loop pass began, 0 idle */
  _Atomic uint64_t leaving;       /* draining: siblings hand it nothing */
  _Atomic uint64_t queued;        /* requests with the pool, not yet answered */
  _Atomic uint64_t dropped;       /* stream frames dropped: a stream's queue was full */
  _Atomic uint64_t beat_ms;       /* the loop's last turn (monotonic ms): the supervisor's heartbeat */
  _Atomic uint64_t ended;         /* prefork: the pid of the worker whose drain is over (only its teardown is left) */
  _Atomic uint64_t first_id;      /* the counter's value when the loop began: m0pub's --id must be above it */
  _Atomic uint64_t pid;           /* prefork: worker i's pid now (the supervisor's, at each spawn; the observer) */
  _Atomic uint64_t respawns;      /* prefork: worker i started again after its predecessor ended */
  uint64_t pad_[2];
} m0__loop_line;

/* One actor's refusals: the line is taken by storing actor id + 1 (0 is a
 * free line); the last line counts every actor beyond the others. */
#define M0__PAGE_REFUSAL_LINES 64
#define M0__PAGE_REFUSAL_REASONS 24 /* room for runtime/admit.h's list to grow: at least its length */
typedef struct m0__refusal_line {
  _Atomic uint64_t actor;
  _Atomic uint64_t n[M0__PAGE_REFUSAL_REASONS];
} m0__refusal_line;

/* The fleet's bus (bus/bus.h): zero when the host has none. */
typedef struct m0__bus_line {
  _Atomic uint64_t configured; /* 1 once url and subject are written */
  _Atomic uint64_t connected;  /* the bridge's link to NATS is up now */
  _Atomic uint64_t published;  /* frames sent to the fleet, by any process */
  _Atomic uint64_t received;   /* fleet frames the bridge fanned out */
  _Atomic uint64_t local_only; /* frames published while the link was down: this host's loops only, unnumbered */
  _Atomic uint64_t reconnects; /* the bridge's link came back */
  _Atomic uint64_t refused;    /* fleet messages that did not decode or whose frame was not one */
  _Atomic uint64_t resets;     /* the stream the bridge consumed was replaced (lost its store, deleted) */
  char url[256];
  char subject[128];
} m0__bus_line;

/* One edge's messages: the line is taken by storing its key, from << 32 |
 * to (never 0: every actor id has a role); n sent, taken by the receiver,
 * kinds the kinds sent on it (bit k: kind k, runtime/kinds.h). */
#define M0__PAGE_EDGE_LINES 512
typedef struct m0__edge_line {
  _Atomic uint64_t key;
  _Atomic uint64_t n;
  _Atomic uint64_t taken;
  _Atomic uint64_t kinds;
} m0__edge_line;

/* The recent trace records: a record (M0__TRACE_RECORD bytes, in nine
 * words) under a stamp, its number in the ring's order + 1 (0: being
 * written). */
#define M0__PAGE_TRACE_LINES 1024
typedef struct m0__trace_line {
  _Atomic uint64_t stamp;
  _Atomic uint64_t w[9];
} m0__trace_line;
typedef struct m0__trace_ring {
  _Atomic uint64_t next; /* records ever put */
  uint64_t pad_[7];
  m0__trace_line lines[M0__PAGE_TRACE_LINES];
} m0__trace_ring;

/* Application actors an application has at most (config/appspec.h checks
 * its own bound against this). */
#define M0__PAGE_APP_ACTORS 64

/* Frames dropped for slow subscribers on one channel: the line is taken by
 * storing its name's hash (never 0), then the name, then named = 1 (a
 * reader shows only named lines); the last line counts every channel past
 * the others. */
#define M0__PAGE_CHANNEL_LINES 256
typedef struct m0__channel_line {
  _Atomic uint64_t key;
  _Atomic uint64_t named;
  _Atomic uint64_t dropped;
  char name[72]; /* NUL-terminated (a channel is at most 64 bytes) */
} m0__channel_line;

/* The figures /metrics sums (host/metrics.c).
 *
 * Design notes
 * - One series per host, not per process: a scrape is answered by whichever
 *   worker's loop took the connection, so a figure kept in a process would
 *   alternate between workers' values across scrapes (Prometheus reads a
 *   reset) and a series only one process has would be missing from half of
 *   them. So these counters live here, where every process adds and reads.
 * - Never cleared: a respawned worker and a reload's next generation add to
 *   what their predecessors counted (fetch_add, so two generations serving
 *   with one loop index at once both count), and every counter only rises.
 * - A loop's figures are written by that loop alone (and, during a reload,
 *   its successor with the same index): no cache line is shared between
 *   loops per request. An actor's line is shared by every loop that asks
 *   it, as its requests already cost a message each way.
 * - Gauges are not here but in the banks (the loop lines), except what a
 *   loop has in flight with each actor: by bank, each loop storing its own
 *   count, zeroed when the loop starts. */
typedef struct m0__host_figures {
  _Atomic uint64_t deferred_late; /* deferred answers given after their 504 (dropped) */
  /* Not counters: the producer's hold on the id counter across generations
   * (actors/producer.c): the generation whose producer numbers frames (0:
   * none), and the ids a generation's producer found taken when it took the
   * hold from another (hole_until, written before hole_gen), which its loops
   * tell their streams of (actors/loop.c, loop_hole). */
  _Atomic uint64_t id_lease;
  _Atomic uint64_t hole_gen;
  _Atomic uint64_t hole_until;
  uint64_t pad_[4];
} m0__host_figures;

/* One application actor's requests (asks from any loop of any process). */
typedef struct m0__actor_line {
  _Atomic uint64_t ok;          /* replies written */
  _Atomic uint64_t no_instance; /* 503: none live */
  _Atomic uint64_t queue_full;  /* 503 + Retry-After: every live one at its queue bound */
  _Atomic uint64_t timeout;     /* 504: no reply within the route's timeout */
  _Atomic uint64_t bad_reply;   /* 502: a reply record that does not decode */
  _Atomic uint64_t died;        /* 502: its instance left with it in flight */
  _Atomic uint64_t unknown;     /* replies to an id not in flight (late, or made up): dropped */
  _Atomic uint64_t refused;     /* messages from instances that are not REPLY, or no slot free */
  m0__latency latency;          /* from a request's taking to its answer, whatever the outcome */
  _Atomic uint64_t asking;      /* a gauge: m0_ask's of it from instances now (a process killed mid-ask leaves its) */
} m0__actor_line;

/* WebSocket close codes counted apart (M0__PAGE_WS_CODES - 1 of them; the
 * last index counts every other code: the application's 3000-4999). */
#define M0__PAGE_WS_CODES 12
extern const int m0__page_ws_codes[M0__PAGE_WS_CODES - 1];
static inline int m0__page_ws_code_index(int code) {
  int i = 0;
  while (i < M0__PAGE_WS_CODES - 1 && m0__page_ws_codes[i] != code) i++;
  return i;
}

/* Rows of request figures a loop has: one per route the host has served
 * (m0__page_rows) and the last, M0__PAGE_ROW_NONE, for requests no route
 * answered. */
#define M0__PAGE_ROUTES 128
#define M0__PAGE_ROW_NONE (M0__PAGE_ROUTES - 1)

/* One loop's figures (by loop index, whichever process runs it). */
typedef struct m0__loop_figures {
  _Atomic uint64_t requests; /* requests answered (what the loop line's requests rose by, each pass) */
  _Atomic uint64_t handoffs; /* connections handed to a sibling */
  _Atomic uint64_t dropped;  /* stream frames dropped: a stream's queue was full */
  _Atomic uint64_t ws_opened; /* WebSockets begun (after their 101) */
  _Atomic uint64_t ws_in;     /* messages received whole (after reassembly and inflation) */
  _Atomic uint64_t ws_out;    /* messages the application sent (m0_ws_send) */
  _Atomic uint64_t ws_closes[M0__PAGE_WS_CODES]; /* WebSockets ended, by code (m0__page_ws_code_index) */
  _Atomic uint64_t h2_refused; /* HTTP/2 streams reset and sessions ended for the client's fault (http/h2.c) */
  uint64_t pad_[5];
  /* Requests with each application actor now, by bank (the generation's,
   * as the loop lines): a gauge, stored by the loop. */
  _Atomic uint64_t actor_inflight[2][M0__PAGE_APP_ACTORS];
  m0__latency routes[M0__PAGE_ROUTES]; /* latency and status classes by route row (m0__page_rows) */
} m0__loop_figures;

/* Which route, which actor each row counts.
 *
 * Design notes
 * - A row is keyed by what it counts, not by a position in this generation's
 *   tables: a reload or an upgrade may bring other routes or actors, or the
 *   same in another order, and a series must never carry another's counts
 *   under its label. The key is a 64-bit hash (FNV-1a) of "METHOD pattern"
 *   (a route) or of the name (an actor); 0 is a free row. Routes' rows are
 *   0 .. M0__PAGE_ROW_NONE - 1 of m0__loop_figures.routes (the same row in
 *   every loop); actors' index the actor lines, the restarts and the loops'
 *   actor_inflight.
 * - Find or take, with a compare-and-swap, in any process; a row is never
 *   given up, so a route that comes back after a reload finds its old row
 *   and counts on, and two processes that take one key at once meet in one
 *   row (open addressing: each walks the same sequence and passes a row only
 *   when another key holds it for good). Each loop (and the actors' setup)
 *   looks its rows up once when it starts; a request indexes an array.
 * - When every row is taken, a new key has none: its requests are not
 *   counted and /metrics has no series for it (said once on stderr, the
 *   first time, by whichever process finds so). Two keys whose hashes meet
 *   would share a row (2^-64 a pair). */
typedef struct m0__page_rows {
  _Atomic uint64_t routes[M0__PAGE_ROW_NONE];
  _Atomic uint64_t actors[M0__PAGE_APP_ACTORS];
  _Atomic uint64_t said; /* bit 0: a route found no row, bit 1: an actor (each said once) */
} m0__page_rows;

/* Application actor i's name, i its place in the doctor's app_actors (an
 * instance's id is app.<i>.<slot>): written by each process that opens the
 * actors, read by m0trace, which names records as the host does (echo.0).
 * A reload that brings other actors rewrites them ("" past the last). */
#define M0__PAGE_NAME_MAX 56
typedef struct m0__page_names {
  char actors[M0__PAGE_APP_ACTORS][M0__PAGE_NAME_MAX];
} m0__page_names;

/* What the observer (host/observer.h) shows of every process, whichever
 * answers:
 * - the edges' rates (runtime/edges.h): each edge line's count when the
 *   current window began (mark), and its messages per second over the
 *   window before, in thousandths (rate); window_ms the window's start
 *   (monotonic ms, 0: none yet), rolled by whichever loop's sweep finds it
 *   a second old or more (a compare-and-swap: one process rolls it);
 * - each application actor's (by its row) instances' pids, by slot: an
 *   instance the host spawned, as the process whose service holds its slot
 *   saw its ipc peer (the supervisor under prefork; 0: none, not known);
 * - per bank and loop (m0__page_instances, after it, [2][loops]): the
 *   thread instances of that loop's worker under prefork, written by its
 *   loop at each sweep (at most a second old), under a sequence word odd
 *   while it writes. A line is service index << 56 | slot << 48 | in
 *   flight. */
#define M0__PAGE_SLOTS 64
#define M0__PAGE_INSTANCE_LINES 128
typedef struct m0__page_observed {
  _Atomic uint64_t window_ms;
  _Atomic uint64_t mark[M0__PAGE_EDGE_LINES];
  _Atomic uint64_t rate[M0__PAGE_EDGE_LINES];
  _Atomic uint64_t pids[M0__PAGE_APP_ACTORS][M0__PAGE_SLOTS];
} m0__page_observed;
typedef struct m0__page_instances {
  _Atomic uint64_t seq; /* odd: being written */
  _Atomic uint64_t n;
  _Atomic uint64_t line[M0__PAGE_INSTANCE_LINES];
} m0__page_instances;

typedef struct m0__page {
  int fd, app_fd;
  size_t size, app_size;
  m0__page_head *head;
  m0__loop_line *lines; /* this process's generation's bank */
  m0__refusal_line *refusals; /* M0__PAGE_REFUSAL_LINES, after the lines */
  m0__bus_line *bus;          /* after the refusals */
  m0__edge_line *edges;       /* M0__PAGE_EDGE_LINES, after the bus */
  m0__trace_ring *traces;     /* after the edges */
  _Atomic uint64_t *restarts; /* [M0__PAGE_APP_ACTORS], after the traces */
  m0__channel_line *channels; /* M0__PAGE_CHANNEL_LINES, after the restarts */
  m0__host_figures *figures;  /* after the channels */
  m0__actor_line *actors;     /* [M0__PAGE_APP_ACTORS], after the figures */
  m0__loop_figures *loop_figures; /* [loops], after the actors */
  m0__page_rows *rows;            /* after the loops' figures */
  m0__page_names *names;          /* after the rows */
  m0__page_observed *observed;    /* after the names */
  m0__page_instances *instances;  /* [2 * loops], bank-major, after observed */
  int bank;                   /* the bank lines points into (0 or 1) */
  uint64_t *app; /* NULL when the application wants no words */
} m0__page;

/* Creates (and maps) the page and the app page in dir. Returns 0 or M0__EPAGE. */
int m0__page_create(m0__page *pg, const char *dir, int loops, size_t app_slots, char *err, size_t errlen);
/* Maps an existing page (an external publisher). Checks the magic word. */
int m0__page_attach(m0__page *pg, const char *dir, char *err, size_t errlen);
/* Maps a page and app page inherited by descriptor (a spawned worker);
 * app_fd is -1 when the application wants no words. */
int m0__page_attach_fd(m0__page *pg, int fd, int app_fd, char *err, size_t errlen);
void m0__page_close(m0__page *pg);
/* Points lines at the bank of this generation (>= 1): a process of a later
 * generation calls it after it attached, before it touches a line. */
void m0__page_use_bank(m0__page *pg, uint64_t generation);

/* Channel name's (n bytes) count of dropped frames, its line taken if it
 * has none yet (the last line when every other is taken). Any thread or
 * process. */
_Atomic uint64_t *m0__page_channel_dropped(m0__channel_line *lines, const char *name, size_t n);

/* The row that counts route "method pattern" (0 .. M0__PAGE_ROW_NONE - 1),
 * or that counts actor name (0 .. M0__PAGE_APP_ACTORS - 1): found, or taken
 * when take and none has it yet; M0__ENOTFOUND when it has none (every row taken:
 * said once on stderr; or not take). Any thread or process. */
int m0__page_route_row(const m0__page *pg, const char *method, const char *pattern, bool take);
int m0__page_actor_row(const m0__page *pg, const char *name, bool take);

static inline uint64_t m0__page_next_id(m0__page *pg) {
  return atomic_fetch_add_explicit(&pg->head->event_id, 1, memory_order_relaxed) + 1;
}

#endif
