"""A worker killed under load hurts only its own connections (docs/behaviour.md,
Prefork and the supervisor).

Setup: host_check --workers 2 (M0_HOSTCHECK_PERIOD_MS=50). 16 keep-alive
connections are opened and each asks /instance once to learn which worker
(index and pid) serves it; accept sharing spreads them, and the test opens more
(up to 64) until both workers hold at least 3. One /events stream is opened
and its `x-worker` header says which worker holds it; the victim is the OTHER
worker. Every connection then runs a client thread doing /pid every ~10 ms
(modest on purpose: ~1,600 requests/s at most over ~3 s, the whole file runs
in ~10 s), and 1 s in, the victim gets SIGKILL.

Proves:
  - every connection on the surviving worker sees no error at all: every
    answer is a whole 200 whose body is that worker's pid (the connection never
    moved), before and after the kill, and each keeps being served after it;
  - every connection on the killed worker fails (EOF or reset, no partial
    answer) at its first request after the kill, and none failed before it;
  - nothing else fails: no error before the kill anywhere;
  - a new worker pid (a child of the supervisor, neither old pid) appears
    within 5 s; after the load, fresh connections (held open so accept
    sharing spreads them) are served by both the survivor and the new pid;
  - the stream on the surviving worker keeps receiving beats across the
    kill, ids strictly consecutive (n, n+1, ...: no gap, no repeat), for at
    least 1 s after the kill, and is not closed.
Finally SIGTERM drains the supervisor with exit 0 and no worker outlives it.
"""
import os
import re
import signal
import socket
import threading
import time

import harness
from harness import Failures, Server, ours, wait_for
from rawhttp import Closed, Conn, request

F = Failures()
SEEN = set()


def children(pid):
    out = harness.children(pid)
    SEEN.update(out)
    return out


def instance(conn):
    conn.send(request("GET", "/instance"))
    st, _, h, body, _ = conn.read_response(timeout=5)
    m = re.search(rb'"worker":(\d+).*"pid":(\d+)', body)
    assert st == 200 and m, body
    return int(m.group(1)), int(m.group(2))


class Client:
    def __init__(self, conn, pid):
        self.conn, self.pid = conn, pid
        self.ok_before = self.ok_after = 0
        self.errors = []  # (time, what)
        self.failed_at = None

    def run(self, stop, kill_at):
        while not stop.is_set():
            try:
                self.conn.send(request("GET", "/pid"))
                st, _, h, body, line = self.conn.read_response(timeout=5)
            except (Closed, OSError, ValueError, IndexError) as e:
                self.failed_at = time.monotonic()
                self.errors.append((self.failed_at, f"{type(e).__name__}: {e}"))
                return
            now = time.monotonic()
            if st != 200 or body != str(self.pid).encode() or h.get("content-length") != str(len(body)):
                self.errors.append((now, f"bad answer {line!r} {body!r} (want pid {self.pid})"))
                return
            if kill_at[0] is not None and now > kill_at[0]:
                self.ok_after += 1
            else:
                self.ok_before += 1
            time.sleep(0.01)


def stream_reader(port, out, stop):
    out.update(ids=[], times=[], err=None, closed=False)
    k = Conn(port, timeout=5)
    k.send(request("GET", "/events"))
    buf = b""
    k.sock.settimeout(0.5)
    while not stop.is_set():
        try:
            chunk = k.sock.recv(65536)
        except (socket.timeout, TimeoutError):
            continue
        except OSError as e:
            out["err"] = repr(e)
            break
        if not chunk:
            out["closed"] = True
            break
        buf += chunk
        if "head" not in out:
            if b"\r\n\r\n" not in buf:
                continue
            head, buf = buf.split(b"\r\n\r\n", 1)
            out["head"] = head.decode("latin-1")
            m = re.search(r"(?im)^x-worker:\s*(\d+)", out["head"])
            out["worker"] = int(m.group(1)) if m else None
            out["ready"].set()
        while b"\n\n" in buf:
            frame, buf = buf.split(b"\n\n", 1)
            for line in frame.decode(errors="replace").split("\n"):
                if line.startswith("id: "):
                    out["ids"].append(int(line[4:]))
                    out["times"].append(time.monotonic())
                elif line.startswith("event: m0.closing"):
                    out["err"] = "m0.closing received"
    k.close()


s = Server("host_check", "--port", "0", "--workers", "2", env={"M0_HOSTCHECK_PERIOD_MS": "50"})
t_start = time.monotonic()
try:
    s.start()
    sup = s.proc.pid
    deadline = time.monotonic() + 5
    while len(children(sup)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    conns = {}  # worker index -> [(conn, pid)]
    pids = {}  # worker index -> pid
    opened = 0
    while opened < 64:
        c = Conn(s.port, timeout=5)
        w, pid = instance(c)
        pids[w] = pid
        conns.setdefault(w, []).append((c, pid))
        opened += 1
        if opened >= 16 and len(conns) == 2 and min(len(v) for v in conns.values()) >= 3:
            break
    counts = {w: len(v) for w, v in conns.items()}
    print(f"{opened} keep-alive connections: per worker {counts}, pids {pids}")
    F.check(len(conns) == 2 and min(counts.values()) >= 3, f"connections spread over both workers (>= 3 each): {counts}")
    F.check(set(pids.values()) == children(sup), f"the /instance pids are the supervisor's children: {pids} vs {children(sup)}")

    stop = threading.Event()
    st = {"ready": threading.Event()}
    sthr = threading.Thread(target=stream_reader, args=(s.port, st, stop), daemon=True)
    sthr.start()
    F.check(st["ready"].wait(5) and st.get("worker") in pids, f"stream opened with an x-worker header: {st.get('head')!r}")
    survivor = st.get("worker", 0)
    victim = 1 - survivor
    vpid, spid = pids[victim], pids[survivor]
    print(f"stream on worker {survivor} (pid {spid}); killing worker {victim} (pid {vpid})")

    kill_at = [None]
    clients = {w: [Client(c, pid) for c, pid in v] for w, v in conns.items()}
    threads = [threading.Thread(target=cl.run, args=(stop, kill_at), daemon=True) for v in clients.values() for cl in v]
    for t in threads:
        t.start()
    # The load runs before the kill: every connection served 5 times (what is checked of it below), bounded.
    wait_for(lambda: all(cl.ok_before >= 5 for v in clients.values() for cl in v) and len(st["ids"]) >= 3, 15)
    kill_at[0] = time.monotonic()
    os.kill(vpid, signal.SIGKILL)

    new = set()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        new = children(sup) - {vpid, spid}
        if new and all(ours(p, "host_check") for p in new):
            break
        time.sleep(0.05)
    respawn_took = time.monotonic() - kill_at[0]
    F.check(len(new) == 1, f"a new worker pid appears within 5 s of the kill: {new} ({respawn_took:.2f}s)")
    # Load and stream run >= 2 s past the kill (the pacing is the behaviour: a worker gone for a while), and
    # until what is checked below has had its chance: 5 answers on each survivor, 5 beats > 1 s after the kill.
    time.sleep(max(0.0, 2.0 - (time.monotonic() - kill_at[0])))
    wait_for(lambda: all(cl.ok_after >= 5 for cl in clients[survivor]) and
             len([t for t in list(st["times"]) if t > kill_at[0] + 1.0]) >= 5 and len(st["ids"]) >= 20, 15)
    stop.set()
    for t in threads:
        t.join(timeout=8)
    sthr.join(timeout=3)
    F.check(not any(t.is_alive() for t in threads), "every client thread finished")

    surv, dead = clients[survivor], clients[victim]
    s_errs = [e for cl in surv for e in cl.errors]
    F.check(not s_errs, f"connections on the surviving worker saw no error: {s_errs[:3]}")
    F.check(all(cl.ok_after >= 5 for cl in surv), f"... and each kept being served after the kill: {[cl.ok_after for cl in surv]}")
    F.check(all(cl.ok_before >= 5 for cl in surv + dead), "every connection was served before the kill")
    early = [e for cl in dead for e in cl.errors if e[0] < kill_at[0]]
    F.check(not early, f"no connection of the victim failed before the kill: {early[:3]}")
    F.check(all(cl.failed_at is not None and cl.failed_at >= kill_at[0] for cl in dead),
            f"every connection of the killed worker failed after the kill: {[cl.errors for cl in dead]}")
    F.check(all(cl.errors and ("Closed" in cl.errors[0][1] and "0 unparsed" in cl.errors[0][1] or "Reset" in cl.errors[0][1]
                               or "Broken" in cl.errors[0][1]) for cl in dead),
            f"... by EOF/reset, never a partial answer: {[cl.errors[:1] for cl in dead]}")
    F.check(all(cl.ok_after <= 1 for cl in dead), f"the killed worker's connections got nothing after it: {[cl.ok_after for cl in dead]}")

    ids, times = st["ids"], st["times"]
    gaps = [(a, b) for a, b in zip(ids, ids[1:]) if b != a + 1]
    after = [i for i, t in zip(ids, times) if t > kill_at[0] + 1.0]
    print(f"stream: {len(ids)} beats, ids {ids[:1]}..{ids[-1:]}, {len(after)} of them > 1 s after the kill")
    F.check(len(ids) >= 20 and not gaps, f"stream ids strictly consecutive across the kill (gaps/repeats: {gaps[:5]})")
    F.check(len(after) >= 5, f"the stream kept receiving beats > 1 s after the kill ({len(after)})")
    F.check(not st["closed"] and st["err"] is None, f"the stream was not closed or ended: closed={st['closed']} err={st['err']}")
    for cl in [cl for v in clients.values() for cl in v]:
        cl.conn.close()

    # fresh connections, held open so accept sharing spreads them: served by
    # the survivor and by the new worker
    fresh, held = set(), []
    try:
        for _ in range(24):
            c = Conn(s.port, timeout=3)
            held.append(c)
            fresh.add(instance(c)[1])
            if ({spid} | new) <= fresh:
                break
    except (Closed, OSError, AssertionError) as e:
        print(f"fresh connection failed: {e!r}")
    F.check(({spid} | new) <= fresh, f"fresh connections are served by the survivor and the new worker: {fresh}")
    for c in held:
        c.close()

    t0 = time.monotonic()
    rc = s.stop(timeout=8)
    F.check(rc == 0, f"SIGTERM drains the supervisor: exit 0 (got {rc}) in {time.monotonic() - t0:.2f}s\n{s.stderr()[-2000:]}")
    left = [p for p in SEEN if ours(p, "host_check")]
    F.check(not left, f"no worker outlives the supervisor: {left}")
finally:
    if s.proc and s.proc.poll() is None:
        os.kill(s.proc.pid, signal.SIGSTOP)
        children(s.proc.pid)
        s.kill()
    for p in SEEN:
        if ours(p, "host_check"):
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
print(f"took {time.monotonic() - t_start:.1f}s")
F.done()
