/* m0pub — publish into a running host's streams from the shell or from a
 * child process the application starts.
 *
 *   m0pub [--run-dir DIR] [--channel NAME] [--event TYPE] [--id N] [DATA...]
 *
 * DATA (the arguments joined by spaces, or each line of standard input when
 * there are none) becomes one frame each: "event: TYPE" (when given) and
 * "data: DATA". Ids come from the host's shared counter, so they continue
 * the producer's. The run directory is --run-dir, else $M0_RUN_DIR (the host
 * sets it for its children). Prints each id used. Exit: 0 published;
 * 1 a frame was refused (a line longer than a frame holds, or one a loop
 * refuses, below); 2 usage; 78 no running host at the directory.
 *
 * A line of standard input is read whole, of any length up to what a frame
 * holds (M0__FRAME_MAX with its "data: " and event lines); a longer one is
 * refused with one line on stderr, none of it published, and the next line
 * read: a line is never split into frames.
 *
 * --id N (for tests and operators, not for applications) publishes the one
 * frame of DATA with the id N, a decimal 1..2^64-1, and takes nothing from
 * the shared counter: a way to send a frame numbered in the past (each loop
 * drops a frame numbered at or below the counter's value when it began
 * serving, so a respawned worker's streams never see ids go backwards). It
 * needs DATA (not standard input); anything else is usage, exit 2. What the
 * page shows is checked before it goes: an id the counter has not reached
 * (every loop refuses it) or one at or below where a loop began serving
 * (that loop refuses it) is sent, counted there in m0_refused_total, and
 * exits 1 unprinted. A replayed id (one a loop wrote already) is refused by
 * the loops too, but m0pub cannot see that: only m0_refused_total says it.
 */
#include <ctype.h>
#include <errno.h>
#include <m0/m0.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus/publisher.h"
#include "base/text.h"
#include "http/response.h"
#include "transport/page.h"

static int usage(const char *why) {
  fprintf(stderr, "usage: m0pub [--run-dir DIR] [--channel NAME] [--event TYPE] [--id N] [DATA...]\n"
                  "  --id N  (tests, operators) one frame of DATA with the id N (1..2^64-1), not from the counter\n");
  if (why) fprintf(stderr, "m0pub: %s\n", why);
  return 2;
}

/* The frame's id: --id N when given, else the next from the shared counter. */
static uint64_t frame_id(m0_publisher *pub, uint64_t chosen) {
  if (chosen) return chosen;
  uint64_t id = m0_next_id(pub);
  return id;
}

/* --id's value: decimal digits only (no sign, no space), 1..UINT64_MAX; 0 when it is not. */
static uint64_t parse_id(const char *s) {
  if (!s[0]) return 0;
  for (const char *p = s; *p; p++)
    if (!isdigit((unsigned char)*p)) return 0;
  errno = 0;
  unsigned long long v = strtoull(s, NULL, 10);
  if (errno == ERANGE) return 0;
  return (uint64_t)v;
}

/* Why a loop will refuse the chosen id, from what the page shows now: the
 * counter's value and where each loop began (actors/loop.c). NULL when none
 * will, as far as m0pub can see. */
static const char *id_refused(const m0_publisher *pub, uint64_t id, char *why, size_t n) {
  const m0__page *pg = pub->page;
  uint64_t taken = atomic_load(&pg->head->event_id);
  if (id > taken) {
    snprintf(why, n, "the counter has reached %llu: no loop takes an id not yet taken from it", (unsigned long long)taken);
    return why;
  }
  for (uint32_t i = 0; i < pg->head->loops; i++) {
    uint64_t first = atomic_load(&pg->lines[i].first_id);
    if (id <= first) {
      snprintf(why, n, "loop %u began serving after id %llu: it takes only later ids", i, (unsigned long long)first);
      return why;
    }
  }
  return NULL;
}

static int publish(m0_publisher *pub, const char *channel, const char *event, const char *data, uint64_t chosen) {
  if (strchr(data, '\n') || strchr(data, '\r')) {
    fprintf(stderr, "m0pub: one line of data per frame\n");
    return 1;
  }
  char why[160];
  const char *refused = chosen && pub->page ? id_refused(pub, chosen, why, sizeof why) : NULL;
  size_t n = strlen(data) + (event ? strlen(event) : 0) + 32;
  char *frame = malloc(n);
  if (!frame) return 1;
  int len = event ? snprintf(frame, n, "event: %s\ndata: %s", event, data) : snprintf(frame, n, "data: %s", data);
  uint64_t id = frame_id(pub, chosen);
  bool ok = m0_publish(pub, channel, id, frame, (size_t)len);
  free(frame);
  if (!ok || refused) {
    fprintf(stderr, "m0pub: frame %llu was refused by at least one loop%s%s%s\n", (unsigned long long)id,
            refused ? " (" : "", refused ? refused : "", refused ? ")" : "");
    return 1;
  }
  printf("%llu\n", (unsigned long long)id);
  return 0;
}

/* Each line of standard input, whole, one frame each: 0, or 1 when one was
 * refused. A line longer than a frame holds is read to its end and
 * dropped, said once; its tail is never a frame of its own. */
static int publish_lines(m0_publisher *pub, const char *channel, const char *event) {
  size_t room = M0__FRAME_MAX - strlen("data: ") - (event ? strlen("event: \n") + strlen(event) : 0);
  char *line = malloc(room + 2);
  if (!line) return 1;
  int rc = 0;
  unsigned long long lineno = 0;
  for (;;) {
    size_t len = 0, over = 0;
    int c;
    while ((c = getchar()) != EOF && c != '\n') {
      if (len <= room) line[len++] = (char)c;
      else over++;
    }
    if (c == EOF && len == 0 && over == 0) break;
    lineno++;
    if (len && line[len - 1] == '\r') len--; /* a CRLF line's CR */
    if (len + over > room) {
      fprintf(stderr, "m0pub: line %llu is %zu bytes, more than a frame holds (%zu here); not published\n", lineno,
              len + over, room);
      rc = 1;
    } else {
      line[len] = 0;
      if (publish(pub, channel, event, line, 0) != 0) rc = 1;
    }
    if (c == EOF) break;
  }
  free(line);
  return rc;
}

int main(int argc, char **argv) {
  const char *dir = getenv("M0_RUN_DIR"), *channel = "beats", *event = NULL, *id_arg = NULL;
  int a = 1;
  for (; a < argc && strncmp(argv[a], "--", 2) == 0; a++) {
    const char **slot = !strcmp(argv[a], "--run-dir") ? &dir : !strcmp(argv[a], "--channel") ? &channel
                      : !strcmp(argv[a], "--event")   ? &event
                      : !strcmp(argv[a], "--id")      ? &id_arg : NULL;
    if (!strcmp(argv[a], "--")) {
      a++;
      break;
    }
    if (!slot) return usage("unknown flag");
    if (a + 1 >= argc) return usage("a flag needs a value");
    *slot = argv[++a];
  }
  if (event && (!event[0] || strpbrk(event, "\r\n"))) return usage("--event is one word on one line");
  uint64_t chosen = 0;
  if (id_arg) {
    chosen = parse_id(id_arg);
    if (!chosen) return usage("--id is a decimal number from 1 to 18446744073709551615");
    if (a >= argc) return usage("--id numbers one frame: give DATA, not standard input");
  }
  if (!dir || !dir[0]) {
    fprintf(stderr, "m0pub: no run directory: give --run-dir DIR or set M0_RUN_DIR\n");
    return 78;
  }
  char err[512];
  if (m0__has_control(dir)) { /* no host runs there (it refuses such a path), and it is said in one line */
    fprintf(stderr, "m0pub: the run directory '%s' holds a control byte: no host runs there\n",
            m0__escape(err, sizeof err, dir));
    return 78;
  }
  m0_publisher *pub = m0_publisher_attach(dir, err, sizeof err);
  if (!pub) {
    fprintf(stderr, "m0pub: %s (is a host running with --run-dir %s?)\n", err, dir);
    return 78;
  }
  int rc = 0;
  if (a < argc) {
    size_t n = 1;
    for (int i = a; i < argc; i++) n += strlen(argv[i]) + 1;
    char *data = calloc(1, n);
    for (int i = a; data && i < argc; i++) {
      if (i > a) strcat(data, " ");
      strcat(data, argv[i]);
    }
    rc = data ? publish(pub, channel, event, data, chosen) : 1;
    free(data);
  } else {
    rc = publish_lines(pub, channel, event);
  }
  fflush(stdout);
  m0_publisher_detach(pub);
  return rc;
}
