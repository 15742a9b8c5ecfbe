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
 *                any process of the host, by reason (actors/admit.h)
 *   then the bus: the fleet's NATS server and subject (written by the top
 *                process, read by m0pub) and its counters (actors/bus.h)
 *   then M0__PAGE_EDGE_LINES lines: the messages sent on each edge (from,
 *                to) by any process of the host (actors/edges.h)
 *   then the recent trace records: a ring of M0__PAGE_TRACE_LINES that
 *                every process's tracer writes while on (actors/recent.h)
 *   then M0__PAGE_APP_ACTORS words: each application actor's restarts of
 *                its spawned instances, counted by whichever process spawns
 *                them (the supervisor under prefork), read by every one
 *
 * The application's page (page_slots words) is a second file, "app-page".
 */
#ifndef M0_TRANSPORT_PAGE_H
#define M0_TRANSPORT_PAGE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define M0__PAGE_MAGIC 0x6567617030306dull /* "m00page" */
#define M0__PAGE_VERSION 7

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
  uint64_t pad_[6];
} m0__loop_line;

/* One actor's refusals: the line is taken by storing actor id + 1 (0 is a
 * free line); the last line counts every actor beyond the others. */
#define M0__PAGE_REFUSAL_LINES 64
#define M0__PAGE_REFUSAL_REASONS 8
typedef struct m0__refusal_line {
  _Atomic uint64_t actor;
  _Atomic uint64_t n[M0__PAGE_REFUSAL_REASONS];
} m0__refusal_line;

/* The fleet's bus (actors/bus.h): zero when the host has none. */
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
 * kinds the kinds sent on it (bit k: kind k, actors/kinds.h). */
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

/* Application actors an application has at most (host/appspec.h checks
 * its own bound against this). */
#define M0__PAGE_APP_ACTORS 64

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

static inline uint64_t m0__page_next_id(m0__page *pg) {
  return atomic_fetch_add_explicit(&pg->head->event_id, 1, memory_order_relaxed) + 1;
}

#endif
