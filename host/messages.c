/* The public edge of messages, mailboxes and monitors (include/m0/m0.h):
 * each finds the host's post (host/embed.h) and turns the post's m0__err
 * into -1, its errno kept. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "host/embed.h"
#include "service/post.h"
#include "service/remote.h"

/* h NULL on the thread of an instance outside the host (m0_actor_run): its
 * own link to its host carries it (service/remote.h). */
int m0_send(m0_host *h, const char *actor, uint32_t type, const void *data, size_t len) {
  if (!h && m0__remote_here()) return m0__remote_send(actor, type, data, len) == 0 ? 0 : -1;
  return m0__post_send(m0__host_post(h), actor, type, data, len) == 0 ? 0 : -1;
}

int m0_call(m0_host *h, const char *actor, uint32_t type, const void *data, size_t len, unsigned timeout_ms,
            m0_message *out) {
  if (!out) return -1;
  memset(out, 0, sizeof *out);
  if (!h && m0__remote_here())
    return m0__remote_call(actor, type, data, len, timeout_ms, &out->type, &out->data, &out->mem_) == 0 ? 0 : -1;
  return m0__post_call(m0__host_post(h), actor, type, data, len, timeout_ms, &out->type, &out->data, &out->mem_) == 0
             ? 0
             : -1;
}

void m0_message_free(m0_message *m) {
  if (!m) return;
  free(m->mem_);
  memset(m, 0, sizeof *m);
}

/* m0_ask: as m0_call, with an HTTP request (service/post.h); outside the
 * host, over the instance's link (service/remote.h). */
int m0_ask(const char *actor, const m0_request *req, unsigned timeout_ms, m0_answer *out) {
  if (!out) return -1;
  memset(out, 0, sizeof *out);
  if (m0__remote_here()) return m0__remote_ask(actor, req, timeout_ms, out) == 0 ? 0 : -1;
  return m0__post_ask(m0__post_current(), actor, req, timeout_ms, out) == 0 ? 0 : -1;
}

void m0_answer_free(m0_answer *a) {
  if (!a) return;
  free(a->mem_);
  memset(a, 0, sizeof *a);
}

struct m0_mailbox {
  m0__boxes *boxes; /* may outlive its host (service/boxes.h) */
  int box;
};

m0_mailbox *m0_mailbox_open(m0_host *h, const char *name) {
  struct m0__post *p = m0__host_post(h);
  m0_mailbox *mb = malloc(sizeof *mb);
  int box = mb ? m0__post_box_open(p, name) : (errno = ENOMEM, -1);
  if (box < 0) {
    int saved = errno;
    free(mb);
    errno = saved;
    return NULL;
  }
  *mb = (m0_mailbox){p->boxes, box};
  return mb;
}

int m0_mailbox_recv(m0_mailbox *mb, unsigned timeout_ms, m0_message *out) {
  if (!mb || !out) return (errno = EINVAL, -1);
  memset(out, 0, sizeof *out);
  m0__received r;
  if (m0__box_recv(mb->boxes, mb->box, timeout_ms, &r) != 0) return -1;
  *out = (m0_message){r.type, r.data, r.mem, r.call, r.from};
  return 0;
}

int m0_mailbox_reply(m0_mailbox *mb, const m0_message *msg, uint32_t type, const void *data, size_t len) {
  if (!mb || !msg) return (errno = EINVAL, -1);
  m0__received r = {.call = msg->call_, .from = msg->from_};
  return m0__box_reply(mb->boxes, mb->box, &r, type, data, len) == 0 ? 0 : -1;
}

void m0_mailbox_close(m0_mailbox *mb) {
  if (!mb) return;
  m0__box_close(mb->boxes, mb->box);
  free(mb);
}

int m0_monitor(m0_host *h, const char *actor, const char *watcher) {
  if (!actor || !watcher) return (errno = EINVAL, -1);
  return m0__post_watch(m0__host_post(h), actor, watcher) == 0 ? 0 : -1;
}
