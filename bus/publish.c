/* m0_publish and m0_publisher_attach (include/m0/m0.h): a frame goes over
 * an instance's link to its host, to the fleet's bus (bus/bus.h), or
 * straight to every loop (bus/publisher.h). Here, above both the bus and
 * the publisher it fans out through, so neither includes the other. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus/bus.h"
#include "bus/publisher.h"
#include "base/errors.h"

/* To the host as PUBLISH: the FRAME payload with id 0 (the host numbers
 * it). pair1 hands it to the link's queue or refuses it at once. */
static bool publish_link(m0_publisher *pub, const char *channel, const void *frame, size_t len) {
  size_t cl = strlen(channel);
  nng_msg *m;
  if (m0__msg_new(&m, 10 + cl + len) != 0) return false;
  bool ok = m0__frame_encode(m, 0, channel, cl, frame, len) == 0;
  if (ok) {
    m0__env e = {.kind = M0__K_PUBLISH, .from = pub->self.id, .to = M0__ACTOR_ID(M0__ROLE_APP, 0xfff)};
    pthread_mutex_lock(&pub->mu);
    e.seq = ++pub->self.seq;
    m0__env_write(nng_msg_body(m), &e, (uint32_t)m0__msg_payload_len(m));
    ok = nng_sendmsg(pub->link, m, 0) == 0;
    pthread_mutex_unlock(&pub->mu);
  }
  if (!ok) nng_msg_free(m);
  return ok;
}

m0_publisher *m0_publisher_attach(const char *run_dir, char *err, size_t errlen) {
  m0_publisher *pub = m0__publisher_attach_loops(run_dir, err, errlen);
  if (!pub) return NULL;
  m0__page *page = pub->page;
  /* The host's bus, as its bridge wrote it on the page: m0pub's frames go
   * to the fleet too. */
  if (atomic_load(&page->bus->configured)) {
    m0__bus *bus = calloc(1, sizeof *bus);
    if (!bus || m0__bus_open(bus, page->bus->url, page->bus->subject, page, pub, false, err, errlen) != 0) {
      free(bus);
      m0_publisher_detach(pub);
      return NULL;
    }
    pub->bus = bus;
  }
  return pub;
}

void m0_publisher_detach(m0_publisher *pub) {
  if (!pub) return;
  m0__page *page = pub->page;
  if (pub->bus) {
    m0__bus_close(pub->bus);
    free(pub->bus);
  }
  m0__publisher_close(pub);
  m0__page_close(page);
  free(page);
  free(pub);
}

bool m0_publish(m0_publisher *pub, const char *channel, uint64_t id, const void *frame, size_t len) {
  if (!m0__channel_ok(channel) || !m0__frame_ok(frame, len)) {
    atomic_fetch_add(&pub->refused, 1);
    if (pub->page) atomic_fetch_add(&pub->page->head->refused, 1);
    return false;
  }
  if (pub->linked) {
    bool ok = publish_link(pub, channel, frame, len);
    atomic_fetch_add(ok ? &pub->published : &pub->refused, 1);
    return ok;
  }
  /* The id is the fleet stream's, not the caller's (bus/bus.h). */
  if (pub->bus) {
    bool ok = m0__bus_publish(pub->bus, pub, channel, strlen(channel), frame, len);
    if (ok) atomic_fetch_add(&pub->published, 1);
    return ok;
  }
  bool ok = m0__publisher_fanout(pub, channel, strlen(channel), id, frame, len);
  if (ok) atomic_fetch_add(&pub->published, 1);
  return ok;
}
