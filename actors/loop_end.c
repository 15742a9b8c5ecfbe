/* The loop's end (actors/loop_end.h). */
#include "actors/loop_end.h"

#include "actors/asks.h"

/* Everything is answered and closed: report and let uv_run return. */
static void loop_finish(m0__loop *l) {
  if (l->finished) return;
  l->finished = true;
  m0__loop_stats st = {l->http.stats.requests, l->http.stats.accepted, l->http.stats.errors_4xx,
                       l->http.stats.timeouts, l->frames, l->handed, l->adopted};
  atomic_store(&l->h.said_stopped, true);
  m0__tell(&l->self, &l->coord, M0__K_STOPPED, &st, sizeof st);
  uv_poll_stop(&l->mail);
  uv_close((uv_handle_t *)&l->mail, NULL);
  if (l->outside.open) uv_close((uv_handle_t *)&l->outside_mail, NULL);
  if (l->inbox.ready) uv_close((uv_handle_t *)&l->lane, NULL);
  m0__asks_close(l);
  uv_timer_stop(&l->sweep);
  uv_close((uv_handle_t *)&l->sweep, NULL);
  uv_close((uv_handle_t *)&l->order_due, NULL);
  uv_close((uv_handle_t *)&l->pass_begin, NULL);
  uv_close((uv_handle_t *)&l->pass_end, NULL);
  if (l->handoff && uv_is_active((uv_handle_t *)&l->handin)) uv_close((uv_handle_t *)&l->handin, NULL);
}

void m0__loop_maybe_finish(m0__loop *l) {
  if (!l->stopping || l->http.nconns) return;
  if (atomic_load(&m0__loop_line_at(l, l->index)->pending) && !l->grace_over) return;
  loop_finish(l);
}
