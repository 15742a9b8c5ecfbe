#include "transport/page.h"

#include "base/errors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/errors.h"

_Static_assert(sizeof(m0__page_head) == 64, "page head is one line");
_Static_assert(sizeof(m0__loop_line) == 128, "a loop's line is two cache lines");
_Static_assert(sizeof(m0__host_figures) == 64, "the host's figures are one line");
_Static_assert(sizeof(m0__actor_line) == 256, "an actor's line is four cache lines");

/* 1004 is reserved and never sent; 1015 (TLS) is never sent by m0. */
const int m0__page_ws_codes[M0__PAGE_WS_CODES - 1] = {1000, 1001, 1002, 1003, 1005, 1006,
                                                      1007, 1008, 1009, 1010, 1011};

static int page_check(m0__page *pg, const char *what, char *err, size_t errlen);

/* The head, two banks of loop lines, the refusals, the bus, the edges, the
 * recent trace records, the actors' restarts, the channels' drops, the
 * host's figures, the actors' lines, the loops' figures, the rows' keys,
 * the actors' names, what the observer reads. */
static size_t page_size(size_t loops) {
  return sizeof(m0__page_head) + 2 * loops * sizeof(m0__loop_line) + M0__PAGE_REFUSAL_LINES * sizeof(m0__refusal_line) +
         sizeof(m0__bus_line) + M0__PAGE_EDGE_LINES * sizeof(m0__edge_line) + sizeof(m0__trace_ring) +
         M0__PAGE_APP_ACTORS * sizeof(uint64_t) + M0__PAGE_CHANNEL_LINES * sizeof(m0__channel_line) +
         sizeof(m0__host_figures) + M0__PAGE_APP_ACTORS * sizeof(m0__actor_line) + loops * sizeof(m0__loop_figures) +
         sizeof(m0__page_rows) + sizeof(m0__page_names) + sizeof(m0__page_observed) +
         2 * loops * sizeof(m0__page_instances);
}

/* Where each part is, after the loop lines (create and page_check set them). */
static void page_parts(m0__page *pg, size_t loops) {
  pg->refusals = (m0__refusal_line *)(pg->lines + 2 * loops);
  pg->bus = (m0__bus_line *)(pg->refusals + M0__PAGE_REFUSAL_LINES);
  pg->edges = (m0__edge_line *)(pg->bus + 1);
  pg->traces = (m0__trace_ring *)(pg->edges + M0__PAGE_EDGE_LINES);
  pg->restarts = (_Atomic uint64_t *)(pg->traces + 1);
  pg->channels = (m0__channel_line *)(pg->restarts + M0__PAGE_APP_ACTORS);
  pg->figures = (m0__host_figures *)(pg->channels + M0__PAGE_CHANNEL_LINES);
  pg->actors = (m0__actor_line *)(pg->figures + 1);
  pg->loop_figures = (m0__loop_figures *)(pg->actors + M0__PAGE_APP_ACTORS);
  pg->rows = (m0__page_rows *)(pg->loop_figures + loops);
  pg->names = (m0__page_names *)(pg->rows + 1);
  pg->observed = (m0__page_observed *)(pg->names + 1);
  pg->instances = (m0__page_instances *)(pg->observed + 1);
}

static void *page_map_file(const char *path, size_t size, int *fd_out, bool create, char *err,
                           size_t errlen) {
  int fd = create ? open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600)
                  : open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0 && create && errno == EEXIST) {
    snprintf(err, errlen, "cannot make %s: it exists (another host uses this run directory; if none runs, one "
                          "was killed: remove the file)", path);
    return NULL;
  }
  if (fd < 0) {
    snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
    return NULL;
  }
  if (create && ftruncate(fd, (off_t)size) != 0) {
    snprintf(err, errlen, "cannot size %s: %s", path, strerror(errno));
    close(fd);
    return NULL;
  }
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    snprintf(err, errlen, "cannot map %s: %s", path, strerror(errno));
    close(fd);
    return NULL;
  }
  *fd_out = fd;
  return p;
}

int m0__page_create(m0__page *pg, const char *dir, int loops, size_t app_slots, char *err, size_t errlen) {
  memset(pg, 0, sizeof *pg);
  pg->fd = pg->app_fd = -1;
  char path[PATH_MAX + 16];
  snprintf(path, sizeof path, "%s/page", dir);
  pg->size = page_size(loops);
  pg->head = page_map_file(path, pg->size, &pg->fd, true, err, errlen);
  if (!pg->head) return M0__EPAGE;
  pg->lines = (m0__loop_line *)(pg->head + 1);
  page_parts(pg, (size_t)loops);
  pg->head->version = M0__PAGE_VERSION;
  pg->head->loops = (uint32_t)loops;
  atomic_store(&pg->head->generation, 1);
  pg->head->app_slots = app_slots;
  if (app_slots) {
    snprintf(path, sizeof path, "%s/app-page", dir);
    pg->app_size = app_slots * sizeof(uint64_t);
    pg->app = page_map_file(path, pg->app_size, &pg->app_fd, true, err, errlen);
    if (!pg->app) {
      m0__page_close(pg);
      return M0__EPAGE;
    }
  }
  /* The magic word goes last: a reader that sees it sees a whole page. */
  atomic_thread_fence(memory_order_release);
  pg->head->magic = M0__PAGE_MAGIC;
  return 0;
}

int m0__page_attach(m0__page *pg, const char *dir, char *err, size_t errlen) {
  memset(pg, 0, sizeof *pg);
  pg->fd = pg->app_fd = -1;
  char path[PATH_MAX + 16];
  snprintf(path, sizeof path, "%s/page", dir);
  struct stat st;
  if (stat(path, &st) != 0 || (size_t)st.st_size < sizeof(m0__page_head)) {
    snprintf(err, errlen, "no shared page at %s", path);
    return M0__EPAGE;
  }
  pg->size = (size_t)st.st_size;
  pg->head = page_map_file(path, pg->size, &pg->fd, false, err, errlen);
  if (!pg->head) return M0__EPAGE;
  return page_check(pg, path, err, errlen);
}

static int page_check(m0__page *pg, const char *what, char *err, size_t errlen) {
  if (pg->head->magic != M0__PAGE_MAGIC || pg->head->version != M0__PAGE_VERSION) {
    snprintf(err, errlen, "%s is not an m0 shared page (magic word missing)", what);
    m0__page_close(pg);
    return M0__EPAGE;
  }
  pg->lines = (m0__loop_line *)(pg->head + 1);
  if (pg->size < page_size(pg->head->loops)) {
    snprintf(err, errlen, "%s is shorter than its %u loops need", what, pg->head->loops);
    m0__page_close(pg);
    return M0__EPAGE;
  }
  page_parts(pg, pg->head->loops);
  return 0;
}

int m0__page_attach_fd(m0__page *pg, int fd, int app_fd, char *err, size_t errlen) {
  memset(pg, 0, sizeof *pg);
  pg->fd = pg->app_fd = -1;
  struct stat st;
  if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(m0__page_head)) {
    snprintf(err, errlen, "inherited descriptor %d is not a shared page", fd);
    return M0__EPAGE;
  }
  pg->size = (size_t)st.st_size;
  pg->head = mmap(NULL, pg->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (pg->head == MAP_FAILED) {
    pg->head = NULL;
    snprintf(err, errlen, "cannot map the inherited shared page: %s", strerror(errno));
    return M0__EPAGE;
  }
  pg->fd = fd;
  char what[32];
  snprintf(what, sizeof what, "descriptor %d", fd);
  if (page_check(pg, what, err, errlen) != 0) return M0__EPAGE;
  if (app_fd >= 0 && pg->head->app_slots) {
    pg->app_size = pg->head->app_slots * sizeof(uint64_t);
    pg->app = mmap(NULL, pg->app_size, PROT_READ | PROT_WRITE, MAP_SHARED, app_fd, 0);
    if (pg->app == MAP_FAILED) {
      pg->app = NULL;
      snprintf(err, errlen, "cannot map the inherited app page: %s", strerror(errno));
      m0__page_close(pg);
      return M0__EPAGE;
    }
    pg->app_fd = app_fd;
  }
  return 0;
}

void m0__page_close(m0__page *pg) {
  if (pg->head) munmap(pg->head, pg->size);
  if (pg->app) munmap(pg->app, pg->app_size);
  if (pg->fd >= 0) close(pg->fd);
  if (pg->app_fd >= 0) close(pg->app_fd);
  pg->head = NULL;
  pg->app = NULL;
  pg->fd = pg->app_fd = -1;
}

void m0__page_use_bank(m0__page *pg, uint64_t generation) {
  pg->bank = (int)((generation - 1) % 2);
  pg->lines = (m0__loop_line *)(pg->head + 1) + (size_t)pg->bank * pg->head->loops;
}

/* FNV-1a of n bytes, on from k (PAGE_HASH_START to begin). */
#define PAGE_HASH_START 14695981039346656037ull
static uint64_t page_hash(uint64_t k, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) k = (k ^ (uint8_t)s[i]) * 1099511628211ull;
  return k;
}

_Atomic uint64_t *m0__page_channel_dropped(m0__channel_line *lines, const char *name, size_t n) {
  uint64_t k = page_hash(PAGE_HASH_START, name, n);
  if (!k) k = 1;
  if (n >= sizeof lines->name) n = sizeof lines->name - 1;
  const uint32_t m = M0__PAGE_CHANNEL_LINES - 1; /* the last line is the rest's */
  for (uint32_t i = 0; i < m; i++) {
    m0__channel_line *l = &lines[(k + i) % m];
    uint64_t have = atomic_load_explicit(&l->key, memory_order_acquire);
    if (have == 0 && atomic_compare_exchange_strong(&l->key, &have, k)) {
      memcpy(l->name, name, n);
      l->name[n] = 0;
      atomic_store_explicit(&l->named, 1, memory_order_release);
      return &l->dropped;
    }
    if (have == k) return &l->dropped; /* taken by us, or named by another (the name follows) */
  }
  return &lines[m].dropped;
}

/* Key k's row among keys[n] (transport/page.h, m0__page_rows): found, or
 * taken when take; M0__ENOTFOUND when none. */
static int page_row(_Atomic uint64_t *keys, uint32_t n, uint64_t k, bool take) {
  for (uint32_t i = 0; i < n; i++) {
    _Atomic uint64_t *key = &keys[(k + i) % n];
    uint64_t have = atomic_load_explicit(key, memory_order_acquire);
    if (have == 0 && !take) return M0__ENOTFOUND; /* a row is taken before any after it in the walk */
    if (have == 0 && atomic_compare_exchange_strong(key, &have, k)) return (int)((k + i) % n);
    if (have == k) return (int)((k + i) % n); /* ours, or taken by another for the same key */
  }
  return M0__ENOTFOUND;
}

/* A key with no row: said once (by bit), by whichever process finds so first. */
static void page_row_none(const m0__page *pg, uint64_t bit, const char *what, const char *name, const char *name2,
                          int rows) {
  if (atomic_fetch_or(&pg->rows->said, bit) & bit) return;
  fprintf(stderr, "m0: %s %s%s%s has no row on the shared page, so no series in /metrics: the host's %d rows are "
                  "kept by the %ss it served since it started (reloads add theirs; restart the host to free them)\n",
          what, name, name2 ? " " : "", name2 ? name2 : "", rows, what);
}

int m0__page_route_row(const m0__page *pg, const char *method, const char *pattern, bool take) {
  uint64_t k = page_hash(page_hash(page_hash(PAGE_HASH_START, method, strlen(method)), " ", 1), pattern,
                         strlen(pattern));
  if (!k) k = 1;
  int r = page_row(pg->rows->routes, M0__PAGE_ROW_NONE, k, take);
  if (r < 0 && take) page_row_none(pg, 1, "route", method, pattern, M0__PAGE_ROW_NONE);
  return r;
}

int m0__page_actor_row(const m0__page *pg, const char *name, bool take) {
  uint64_t k = page_hash(PAGE_HASH_START, name, strlen(name));
  if (!k) k = 1;
  int r = page_row(pg->rows->actors, M0__PAGE_APP_ACTORS, k, take);
  if (r < 0 && take) page_row_none(pg, 2, "actor", name, NULL, M0__PAGE_APP_ACTORS);
  return r;
}
