/* libFuzzer: the parser glue. The input is fed in two reads split at a point
 * its first byte chooses, requests are taken one after another (pipelining),
 * with small limits so 413/414/431 paths are reached. Any crash, leak or
 * undefined behaviour is a finding; so is a span outside the buffer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/parse.h"

static void check_span(m0__span s, size_t len) {
  if (s.len && (size_t)s.off + s.len > len) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  size_t split = data[0] % (size ? size : 1);
  data++;
  size--;
  if (split > size) split = size;
  char *buf = malloc(size ? size : 1);
  memcpy(buf, data, size);
  m0__parse_limits lim = {2048, 512, 4096};
  m0__parser p;
  m0__parser_init(&p, &lim, NULL);
  size_t off = 0, have = split;
  for (int guard = 0; guard < 1000; guard++) {
    m0__parse_result r = m0__parser_feed(&p, buf, have, &off);
    if (r == M0__PARSE_ERROR) {
      if (p.status < 400 || p.status > 505) abort();
      break;
    }
    if (r == M0__PARSE_MORE) {
      if (have == size) break;
      have = size; /* the second read */
      continue;
    }
    check_span(p.method, have);
    check_span(p.url, have);
    for (int i = 0; i < p.nheaders; i++) {
      check_span(p.hs->name[i], have);
      check_span(p.hs->value[i], have);
    }
    if (p.body.len > lim.max_body_bytes) abort();
    m0__parser_next(&p);
  }
  m0__parser_fini(&p);
  free(buf);
  return 0;
}
