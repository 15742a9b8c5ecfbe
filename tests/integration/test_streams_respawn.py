"""Stream continuity across a worker's respawn (SPEC §2 one shared id
counter, §3 prefork respawn and the bus, §9 streams).

Proves, under `--workers 2` (the producer lives in the supervisor):
- A stream held on each worker (x-worker 0 and 1); the worker processes are
  the supervisor's children, mapped to x-worker by GET /instance.
- SIGKILL of the worker serving stream A: A ends (EOF or reset) within 2 s
  (no other process keeps its connection open); stream B on the OTHER worker
  goes on beating within 2 s with ids higher than any seen before the kill,
  and its ids stay contiguous across the kill (no frame lost for it).
- The supervisor respawns the worker (new pid, `respawned` logged, 5 s).
- A new stream opened after the respawn that lands on the respawned worker
  (same x-worker as A) beats with ids higher than any seen before the kill,
  contiguous, and the same ids (same data) as B over the time both are open:
  the respawned worker numbers from the one shared counter.
- SIGTERM then drains both streams (m0.closing, EOF) and exits 0.
"""
import http.client
import json
import os
import signal
import time

from harness import Failures
from test_streams import (Prefork, Stream, children, contiguous, drain_check, is_stream_head, reap_seen,
                          wait_for)

F = Failures()


def instance(port, timeout=3.0):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", "/instance", headers={"Connection": "close"})
        r = c.getresponse()
        return json.loads(r.read())
    finally:
        c.close()


def respawn_continuity():
    label = "respawn"
    with Prefork("host_check", "--workers", "2", "--port", "0") as s:
        sup = s.proc.pid
        kids = wait_for(lambda: children(sup) if len(children(sup)) == 2 else None, 5)
        F.check(kids, f"{label}: two workers under the supervisor ({children(sup)})")
        if not kids:
            return
        # One stream on each worker (opened one after another; accept sharing spreads them).
        held = {}
        extra = []
        for _ in range(8):
            st = Stream(s.port, "/events")
            if st.worker in held or not is_stream_head(st):
                extra.append(st)
            else:
                held[st.worker] = st
            if set(held) == {"0", "1"}:
                break
        F.check(set(held) == {"0", "1"}, f"{label}: a stream held on each worker (x-worker {sorted(held)})")
        for st in extra:
            st.close()
        if set(held) != {"0", "1"}:
            return
        # x-worker -> pid.
        pid_of = {}
        for _ in range(100):
            try:
                j = instance(s.port)
                pid_of[str(j["worker"])] = j["pid"]
            except Exception:
                pass
            if len(pid_of) == 2:
                break
        if len(pid_of) == 1:  # the other worker is the other child
            (w, p), = pid_of.items()
            rest = kids - {p}
            if len(rest) == 1:
                pid_of[{"0": "1", "1": "0"}[w]] = rest.pop()
        F.check(set(pid_of) == {"0", "1"} and set(pid_of.values()) == kids,
                f"{label}: x-worker mapped to the worker pids ({pid_of}, children {kids})")
        if set(pid_of) != {"0", "1"}:
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
        C = None
        others = []
        for i in range(8):
            try:
                st = Stream(s.port, "/events")
            except (OSError, TimeoutError) as e:
                F.check(False, f"{label}: new stream {i} after the respawn is answered within 5 s ({e!r}, "
                               f"earlier ones on x-worker {[o.worker for o in others]}, children {children(sup)}):"
                               f"\n{s.stderr()}")
                continue
            if st.worker == a_w and is_stream_head(st):
                C = st
                break
            others.append(st)
        for st in others:
            st.close()
        F.check(C is not None, f"{label}: a new stream lands on the respawned worker {a_w} "
                               f"(x-worker {[st.worker for st in others]})")
        if C is None:
            return
        F.check(C.wait_frames(5, 2), f"{label}: the new stream on worker {a_w} beats ({C.ids()})")
        c_ids = C.ids()
        F.check(c_ids and c_ids[0] > before and c_ids[0] >= before_new,
                f"{label}: its ids are higher than any seen before the kill ({before}) and not below B's last "
                f"before it opened ({before_new}): {c_ids}")
        F.check(contiguous(c_ids), f"{label}: the new stream's ids rise by exactly 1 ({c_ids})")
        time.sleep(0.5)
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


try:
    respawn_continuity()
finally:
    reap_seen()
F.done()
