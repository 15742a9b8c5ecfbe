"""Stream continuity across a worker's respawn (docs/behaviour.md, Streams and
the bus: one shared id counter; Prefork and the supervisor: respawn).

Proves, under `--workers 2` (the producer lives in the supervisor):
- A stream held on each worker (x-worker 0 and 1); the worker processes are
  the supervisor's children, mapped to x-worker by GET /instance.
- SIGKILL of the worker serving stream A: A ends (EOF or reset) within 2 s
  (no other process keeps its connection open); stream B on the OTHER worker
  goes on beating within 2 s with ids higher than any seen before the kill,
  and its ids stay contiguous across the kill (no frame lost for it).
- The supervisor respawns the worker (new pid, `respawned` logged, 5 s).
- A new stream opened after the respawn lands on the respawned worker (same
  x-worker as A), is answered within 5 s, and beats with ids higher than any
  seen before the kill, contiguous, and the same ids (same data) as B over
  the time both are open: the respawned worker numbers from the one shared
  counter. Its first id is not below the last id B had already received
  before it opened (frames published while the worker was down are not
  replayed, late, to a stream opened afterwards).
- SIGTERM then drains both streams (m0.closing, EOF) and exits 0.
- Slow respawn: the replacement is held (SIGSTOP) for 1 s after it is
  spawned while beats go on; afterwards a stream opened on it is answered
  within 5 s and starts no lower than the last id the surviving stream had
  already received (no backlog of frames published while the worker was
  down is delivered, late, to a stream opened afterwards); ids contiguous.
"""
import os
import signal
import time

from harness import Failures, Prefork, wait_for
from test_streams import Stream, children, contiguous, drain_check, hold_each, is_stream_head, map_workers, reap_seen

F = Failures()


def open_on(s, worker, label, tries=8):
    """A new stream that lands on `worker` (others closed); None, with a
    failed check, if a connection goes unanswered for 5 s or none lands."""
    others = []
    C = None
    for i in range(tries):
        try:
            st = Stream(s.port, "/events")
        except (OSError, TimeoutError) as e:
            F.check(False, f"{label}: new stream {i} after the respawn is answered within 5 s ({e!r}, earlier ones "
                           f"on x-worker {[o.worker for o in others]}, children {children(s.proc.pid)}):"
                           f"\n{s.stderr()}")
            break
        if st.worker == worker and is_stream_head(st):
            C = st
            break
        others.append(st)
    for st in others:
        st.close()
    F.check(C is not None, f"{label}: a new stream lands on the respawned worker {worker} "
                           f"(x-worker {[st.worker for st in others]})")
    return C


def respawn_continuity():
    label = "respawn"
    with Prefork("host_check", "--workers", "2", "--port", "0") as s:
        sup = s.proc.pid
        kids = wait_for(lambda: children(sup) if len(children(sup)) == 2 else None, 5)
        F.check(kids, f"{label}: two workers under the supervisor ({children(sup)})")
        if not kids:
            return
        held = hold_each(F, s.port, label)
        if not held:
            return
        pid_of = map_workers(F, s.port, kids, label)
        if not pid_of:
            return
        a_w = "0"
        b_w = "1"
        A, B = held[a_w], held[b_w]
        F.check(A.wait_frames(3, 2) and B.wait_frames(3, 2),
                f"{label}: both streams beat before the kill ({A.ids()} / {B.ids()})")
        victim = pid_of[a_w]
        before = max(A.ids() + B.ids())
        t_kill = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        F.check(wait_for(lambda: A.eof, 2), f"{label}: the stream on the killed worker {a_w} (pid {victim}) ends "
                                            f"within 2 s (eof {A.eof})")
        A.close()
        later = wait_for(lambda: [f for f in B.beats() if f.id > before and f.t > t_kill], 2)
        F.check(later, f"{label}: the stream on worker {b_w} beats within 2 s of the kill with ids above {before} "
                       f"({B.ids()[-5:]})")
        if later:
            print(f"{label}: worker {b_w}'s stream beat {later[0].t - t_kill:.3f}s after the kill "
                  f"(id {later[0].id} > {before})", flush=True)

        def replaced():
            k = children(sup)
            return k if len(k) == 2 and victim not in k and "respawned" in s.stderr() else None

        after = wait_for(replaced, 5)
        F.check(after, f"{label}: the killed worker is respawned within 5 s (children {children(sup)}):\n{s.stderr()}")
        before_new = max(B.ids())
        C = open_on(s, a_w, label)
        if C is None:
            return
        F.check(C.wait_frames(5, 5), f"{label}: the new stream on worker {a_w} beats ({C.ids()}; eof {C.eof}, "
                                     f"error {C.error}, last frames {C.frames[-3:]}, the surviving stream "
                                     f"{B.ids()[-3:]}, children {children(sup)}):\n{s.stderr()[-1500:]}")
        c_ids = C.ids()
        F.check(c_ids and c_ids[0] > before,
                f"{label}: its ids are higher than any seen before the kill ({before}): {c_ids}")
        F.check(c_ids and c_ids[0] >= before_new,
                f"{label}: it starts no lower than the last id the surviving stream had before it opened "
                f"({before_new}): no stale frame queued during the respawn is replayed to it ({c_ids})")
        F.check(contiguous(c_ids), f"{label}: the new stream's ids rise by exactly 1 ({c_ids})")
        # The surviving stream watched past the new one's frames so far (a few beats more, bounded).
        wait_for(lambda: c_ids and B.ids() and B.ids()[-1] >= c_ids[-1] + 3, 5)
        b_ids = B.ids()
        F.check(contiguous(b_ids), f"{label}: the surviving stream's ids stay contiguous across the kill and "
                                   f"the respawn ({b_ids})")
        c_ids = C.ids()
        common = [x for x in b_ids if c_ids and c_ids[0] <= x <= c_ids[-1]]
        cd = {f.id: f.data for f in C.beats() if f.id in set(common)}
        bd = {f.id: f.data for f in B.beats() if f.id in set(common)}
        F.check(len(common) >= 5 and common == c_ids[:len(common)] and cd == bd,
                f"{label}: the new stream and the surviving one carry the same ids and data ({c_ids} / {b_ids})")
        F.check(not B.eof and not C.eof, f"{label}: both streams are still open")
        drain_check(F, s, [B, C], f"{label} drain")
        F.check(s.stderr().count("respawned") == 1, f"{label}: exactly one respawn, none during the drain")


def slow_respawn():
    """The replacement is slow to come back (SIGSTOP for 1 s right after it is
    spawned, as a slow `make` would be): frames are published meanwhile."""
    label = "slow respawn"
    with Prefork("host_check", "--workers", "2", "--port", "0") as s:
        sup = s.proc.pid
        kids = wait_for(lambda: children(sup) if len(children(sup)) == 2 else None, 5)
        F.check(kids, f"{label}: two workers under the supervisor ({children(sup)})")
        if not kids:
            return
        held = hold_each(F, s.port, label, want=("1",))
        pid_of = held and map_workers(F, s.port, kids, label)
        if not pid_of:
            return
        B = held["1"]
        F.check(B.wait_frames(3, 2), f"{label}: the stream on worker 1 beats ({B.ids()})")
        victim = pid_of["0"]
        os.kill(victim, signal.SIGKILL)
        new = wait_for(lambda: children(sup) - kids, 5, step=0.0005)
        F.check(new, f"{label}: a replacement is spawned ({children(sup)})")
        try:
            for p in new:
                os.kill(p, signal.SIGSTOP)
            time.sleep(1.0)
        finally:
            for p in new:
                os.kill(p, signal.SIGCONT)
        F.check(wait_for(lambda: "respawned" in s.stderr(), 5), f"{label}: `respawned` logged:\n{s.stderr()}")
        before_new = max(B.ids())
        C = open_on(s, "0", label)
        if C is None:
            return
        F.check(C.wait_frames(5, 2), f"{label}: the new stream on worker 0 beats ({C.ids()})")
        c_ids = C.ids()
        F.check(c_ids and c_ids[0] >= before_new,
                f"{label}: the new stream starts no lower than the last id the surviving stream had before it "
                f"opened ({before_new}): frames published while the worker was down are not replayed to it "
                f"({c_ids})")
        F.check(contiguous(c_ids), f"{label}: the new stream's ids rise by exactly 1 ({c_ids})")
        F.check(contiguous(B.ids()), f"{label}: the surviving stream's ids stay contiguous ({B.ids()})")
        drain_check(F, s, [B, C], f"{label} drain")


try:
    respawn_continuity()
    slow_respawn()
finally:
    reap_seen()
F.done()
