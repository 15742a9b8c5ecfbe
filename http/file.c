/* Files as answers: m0_respond_file and m0_respond_fd.
 *
 * Design notes
 * - The bytes never pass through the application or a buffer of ours: the
 *   body is a file piece of the output queue (http/outq.h), sent by
 *   sendfile(2) when the writer reaches it (http/conn.c). The queue owns the
 *   descriptor from the call and closes it once the piece is written or
 *   dropped, so a view can return at once.
 * - The validators are nginx's: ETag "<mtime hex>-<size hex>" (strong: it
 *   changes with either) and Last-Modified from the mtime.
 * - Conditions in RFC 9110 section 13.2.2's order, for GET and HEAD:
 *   If-None-Match (weak comparison) else If-Modified-Since -> 304; then a
 *   Range (GET only, one range; a list is served whole, as the RFC allows)
 *   under If-Range (strong comparison, or the exact date) -> 206, or 416
 *   when it starts past the end. A Range the host cannot read is ignored.
 * - The file is read as it was at fstat: one that shrinks while it is sent
 *   ends the connection short (the writer sees sendfile return 0) rather
 *   than pretend the response is whole.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http/date.h"
#include "http/response.h"

/* Whether `tag` is in an If-None-Match list (weak comparison: W/ ignored). */
static bool etag_listed(m0_str list, const char *tag, size_t tn) {
  const char *p = list.p, *end = list.p + list.n;
  while (p < end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == ',')) p++;
    if (p < end && *p == '*') return true;
    if (end - p >= 2 && p[0] == 'W' && p[1] == '/') p += 2;
    if (p >= end || *p != '"') return false; /* not an entity-tag: the list cannot be read */
    const char *q = memchr(p + 1, '"', (size_t)(end - p - 1));
    if (!q) return false;
    if ((size_t)(q + 1 - p) == tn && memcmp(p, tag, tn) == 0) return true;
    p = q + 1;
  }
  return false;
}

static bool trimmed_is(m0_str v, const char *z, size_t zn) {
  while (v.n && (v.p[0] == ' ' || v.p[0] == '\t')) v.p++, v.n--;
  while (v.n && (v.p[v.n - 1] == ' ' || v.p[v.n - 1] == '\t')) v.n--;
  return v.n == zn && memcmp(v.p, z, zn) == 0;
}

static bool read_u64(const char *p, const char *end, uint64_t *out) {
  if (p == end || end - p > 19) return false;
  uint64_t v = 0;
  for (; p < end; p++) {
    if (*p < '0' || *p > '9') return false;
    v = v * 10 + (uint64_t)(*p - '0');
  }
  *out = v;
  return true;
}

/* What a Range header asks of a file: */
enum {
  RANGE_WHOLE,         /* nothing the host reads (not one range): the whole file */
  RANGE_ONE,           /* [*from, *to], inclusive */
  RANGE_UNSATISFIABLE, /* 416 */
};

/* "bytes=a-b", "bytes=a-", "bytes=-n" against a file of `size` bytes. */
static int range_of(m0_str r, uint64_t size, uint64_t *from, uint64_t *to) {
  if (r.n < 7 || strncasecmp(r.p, "bytes=", 6) != 0 || memchr(r.p, ',', r.n)) return RANGE_WHOLE;
  const char *p = r.p + 6, *end = r.p + r.n;
  while (p < end && *p == ' ') p++;
  while (end > p && end[-1] == ' ') end--;
  const char *dash = memchr(p, '-', (size_t)(end - p));
  if (!dash) return RANGE_WHOLE;
  uint64_t a, b;
  if (dash == p) { /* the last n bytes */
    if (!read_u64(dash + 1, end, &b)) return RANGE_WHOLE;
    if (b == 0 || size == 0) return RANGE_UNSATISFIABLE;
    *from = b >= size ? 0 : size - b;
    *to = size - 1;
    return RANGE_ONE;
  }
  if (!read_u64(p, dash, &a)) return RANGE_WHOLE;
  if (dash + 1 == end) b = UINT64_MAX;
  else if (!read_u64(dash + 1, end, &b) || b < a) return RANGE_WHOLE;
  if (a >= size) return RANGE_UNSATISFIABLE;
  *from = a;
  *to = b >= size ? size - 1 : b;
  return RANGE_ONE;
}

int m0_respond_fd(m0_response *res, int status, const char *content_type, int fd, uint64_t offset, uint64_t len) {
  if (fd < 0) return -1;
  m0__body b = {NULL, (size_t)len, M0_BODY_COPY, NULL, fd, offset};
  return m0__respond_body(res, status, content_type, &b) ? -1 : 0;
}

/* The regular file at path, opened into *fd with its status in *st; false
 * with errno set (EISDIR for a directory, EINVAL for another non-file). */
static bool file_open(const char *path, int *fd, struct stat *st) {
  *fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (*fd < 0) return false;
  int e = 0;
  if (fstat(*fd, st) != 0) e = errno;
  else if (!S_ISREG(st->st_mode)) e = S_ISDIR(st->st_mode) ? EISDIR : EINVAL;
  if (!e) return true;
  close(*fd);
  errno = e;
  return false;
}

/* The file's validators, as headers and as text (etag, modified). */
typedef struct file_tags {
  char etag[48], modified[32];
  size_t etag_n;
} file_tags;

/* Whether a GET or HEAD's copy is the file's version (If-None-Match,
 * else If-Modified-Since): a 304. */
static bool file_fresh(const m0_request *req, const struct stat *st, const file_tags *t) {
  m0_str inm = m0_request_header(req, "If-None-Match"), ims = m0_request_header(req, "If-Modified-Since");
  int64_t since;
  bool fresh = inm.p ? etag_listed(inm, t->etag, t->etag_n)
                     : ims.p && m0__imf_parse(ims.p, ims.n, &since) && (int64_t)st->st_mtime <= since;
  return fresh;
}

/* A GET's Range, when its If-Range (if any) names this version. */
static int file_range(const m0_request *req, uint64_t size, const file_tags *t, uint64_t *from, uint64_t *to) {
  m0_str range = m0_request_header(req, "Range"), if_range = m0_request_header(req, "If-Range");
  if (!range.p) return RANGE_WHOLE;
  if (if_range.p && !trimmed_is(if_range, t->etag, t->etag_n) && !trimmed_is(if_range, t->modified, 29))
    return RANGE_WHOLE; /* the client's copy is another version: the whole file */
  return range_of(range, size, from, to);
}

int m0_respond_file(m0_response *res, const char *content_type, const char *path) {
  int fd;
  struct stat st;
  if (!res || res->done || !path) {
    errno = EINVAL;
    return -1;
  }
  if (!file_open(path, &fd, &st)) return -1;
  uint64_t size = (uint64_t)st.st_size, from = 0, to = 0;
  file_tags t;
  t.etag_n = (size_t)snprintf(t.etag, sizeof t.etag, "\"%llx-%llx\"", (unsigned long long)st.st_mtime,
                              (unsigned long long)size);
  *m0__imf_fixdate(t.modified, (int64_t)st.st_mtime) = 0;
  m0__response_header_n(res, "ETag", 4, t.etag, t.etag_n);
  m0__response_header_n(res, "Last-Modified", 13, t.modified, 29);
  const m0_request *req = res->req;
  bool get = req && req->method.n == 3 && memcmp(req->method.p, "GET", 3) == 0;
  bool head = req && req->method.n == 4 && memcmp(req->method.p, "HEAD", 4) == 0;
  if ((get || head) && file_fresh(req, &st, &t)) {
    close(fd);
    return m0_respond(res, 304, NULL, NULL, 0, M0_BODY_STATIC);
  }
  m0__response_header_n(res, "Accept-Ranges", 13, "bytes", 5);
  int r = get ? file_range(req, size, &t, &from, &to) : RANGE_WHOLE;
  char cr[80];
  if (r == RANGE_UNSATISFIABLE) {
    close(fd);
    int n = snprintf(cr, sizeof cr, "bytes */%llu", (unsigned long long)size);
    m0__response_header_n(res, "Content-Range", 13, cr, (size_t)n);
    m0__respond_status(res, 416, NULL);
  } else if (r == RANGE_ONE) {
    int n = snprintf(cr, sizeof cr, "bytes %llu-%llu/%llu", (unsigned long long)from, (unsigned long long)to,
                     (unsigned long long)size);
    m0__response_header_n(res, "Content-Range", 13, cr, (size_t)n);
    m0_respond_fd(res, 206, content_type, fd, from, to - from + 1);
  } else {
    m0_respond_fd(res, 200, content_type, fd, 0, size); /* answered, a 500 for a bad content type included */
  }
  return 0;
}
