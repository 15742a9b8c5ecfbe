"""Prefork supervision (docs/behaviour.md, Prefork and the supervisor, Drain;
docs/reference.md, Exit codes).

Proves:
- Respawn: under `--workers 2`, with a client doing requests continuously (a
  new connection each, failures counted), SIGKILL of one worker: within 5 s
  the supervisor has a new child pid in place of the dead one and logs
  `worker I respawned (pid P), ...` naming that very pid; afterwards requests
  succeed again (at least 20 in a row), the replacement itself answers, and
  SIGTERM drains the supervisor with exit 0.
- Crash loop: `--workers 2 --respawn-budget 2 --respawn-window-ms 20000`,
  SIGKILL of the current worker three times (waiting, bounded, for each
  replacement to serve): the supervisor exits 1 within 10 s, says the respawn
  budget is spent, and no worker outlives it.
- A stopped worker is not a dead one: SIGSTOP of a worker for 1 s then
  SIGCONT: no `respawned` line, both pids unchanged, both serve afterwards.
- Drain under prefork: a /slow?ms=1500 in flight when the supervisor gets
  SIGTERM is answered whole, and the supervisor exits 0.
"""
import http.client
import json
import os
import re
import signal
import threading
import time

import harness
from harness import Failures, Prefork, alive, reap, wait_for
from rawhttp import Closed, Conn, request

F = Failures()
SEEN_PIDS = set()  # every worker pid observed: killed by pid at the end if still running


def children(pid):
    out = harness.children(pid)
    SEEN_PIDS.update(out)
    return out


def get(port, path, timeout=3.0):
    """One request on a fresh connection: (status, body) or raises."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


class Client(threading.Thread):
    """Requests /pid continuously, a new connection each: [(t, ok, pid)], t the
    request's start; `ends` holds each request's end time."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port = port
        self.log = []
        self.ends = []
        self.errors = []
        self.halt = threading.Event()

    def run(self):
        while not self.halt.is_set():
            t = time.monotonic()
            try:
                st, body = get(self.port, "/pid")
                ok = st == 200
                pid = int(body) if ok else None
            except Exception as e:
                ok, pid = False, None
                self.errors.append(repr(e))
            self.log.append((t, ok, pid))
            self.ends.append(time.monotonic())
            if not ok:
                time.sleep(0.005)

    def stop(self):
        self.halt.set()
        self.join(timeout=10)


def respawn():
    label = "respawn"
    with Prefork("host_check", "--workers", "2", "--port", "0") as s:
        sup = s.proc.pid
        before = wait_for(lambda: children(sup) if len(children(sup)) == 2 else None, 5)
        F.check(before and len(before) == 2, f"{label}: two workers under the supervisor ({before})")
        if not before:
            return
        cl = Client(s.port)
        cl.start()
        wait_for(lambda: sum(ok for _, ok, _ in cl.log) >= 10, 5)
        victim = min(before)
        t_kill = time.monotonic()
        os.kill(victim, signal.SIGKILL)

        def replaced():
            k = children(sup)
            return k if len(k) == 2 and victim not in k and "respawned" in s.stderr() else None

        after = wait_for(replaced, 5)
        took = time.monotonic() - t_kill
        F.check(after is not None, f"{label}: within 5 s a new worker replaces pid {victim} and `respawned` is "
                                   f"logged ({took:.2f}s, children {children(sup)}):\n{s.stderr()}")
        new = (after or set()) - before
        m = re.search(r"m0: worker (\d+) respawned \(pid (\d+)\), serving (\d+) ms after its predecessor died", s.stderr())
        F.check(m is not None and new == {int(m.group(2))},
                f"{label}: the `respawned` line names the new child {sorted(new)} ({m and m.group(0)})")
        t_resp = time.monotonic()

        def twenty_in_a_row():
            run = 0
            for t, ok, _ in cl.log:
                if t < t_resp:
                    continue
                run = run + 1 if ok else 0
                if run >= 20:
                    return True
            return False

        F.check(wait_for(twenty_in_a_row, 10), f"{label}: at least 20 requests in a row succeed after the respawn")
        cl.stop()
        during = [ok for t, ok, _ in cl.log if t_kill <= t < t_resp]
        print(f"{label}: {len(cl.log)} requests, {sum(not ok for _, ok, _ in cl.log)} failed "
              f"({sum(not ok for ok in during)} of {len(during)} between the kill and the respawn line)", flush=True)
        fails = [f"{t - t_kill:+.3f}s..{end - t_kill:+.3f}s" for (t, ok, _), end in zip(cl.log, cl.ends) if not ok]
        print(f"{label}: failures (start..end, relative to the kill; respawn seen at +{t_resp - t_kill:.3f}s): "
              f"{fails[:10]} {cl.errors[:3]}", flush=True)
        F.check(all(ok for (_, ok, _), end in zip(cl.log, cl.ends) if end < t_kill),
                f"{label}: no failure among requests finished before the kill ({cl.errors[:3]})")
        # The replacement itself serves: fresh connections until it answers (bounded).
        if new:
            nw = next(iter(new))
            seen = set()
            deadline = time.monotonic() + 10
            # Accept sharing sends a connection to the least-loaded worker and
            # keeps ties where they land, so an idle newcomer may lose every
            # race to an idle survivor. Hold connections open (load) so the
            # next one is handed to the replacement, as under real traffic.
            held = []
            while nw not in seen and time.monotonic() < deadline:
                try:
                    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=2)
                    c.request("GET", "/pid")
                    seen.add(int(c.getresponse().read()))
                    held.append(c)
                except Exception:
                    pass
            for c in held:
                c.close()
            F.check(nw in seen, f"{label}: the replacement pid {nw} answers requests (saw {sorted(seen)})")
        rc = s.stop()
        F.check(rc == 0, f"{label}: SIGTERM -> exit 0 (rc {rc}):\n{s.stderr()}")
        F.check(s.stderr().count("respawned") == 1, f"{label}: exactly one respawn, none during the drain")


def crash_loop():
    label = "crash loop"
    with Prefork("host_check", "--workers", "2", "--respawn-budget", "2", "--respawn-window-ms", "20000",
                "--port", "0") as s:
        sup = s.proc.pid
        seen = set()
        wait_for(lambda: len(children(sup)) == 2, 5)
        t_kill = time.monotonic()
        for i in range(3):
            kids = children(sup)
            seen |= kids
            if s.proc.poll() is not None or not kids:
                F.check(False, f"{label}: kill {i + 1}: the supervisor still runs with workers (rc {s.proc.poll()})")
                break
            victim = min(kids)
            n0 = s.stderr().count("respawned")
            t_kill = time.monotonic()
            os.kill(victim, signal.SIGKILL)
            if i < 2:
                ok = wait_for(lambda: s.stderr().count("respawned") > n0 and victim not in children(sup)
                              and len(children(sup)) == 2, 5)
                F.check(ok, f"{label}: kill {i + 1} (pid {victim}) is within the budget: replaced within 5 s:\n{s.stderr()}")
                seen |= children(sup)
                F.check(s.proc.poll() is None, f"{label}: kill {i + 1}: the supervisor goes on")
        try:
            rc = s.wait(timeout=10)
        except AssertionError as e:
            rc = None
            F.check(False, f"{label}: {e}")
        took = time.monotonic() - t_kill
        err = s.stderr()
        F.check(rc == 1, f"{label}: the third death spends the budget: exit 1 within 10 s (rc {rc}, {took:.2f}s):\n{err}")
        F.check(re.search(r"budget", err) is not None, f"{label}: the supervisor says the respawn budget is spent:\n{err}")
        F.check(err.count("respawned") == 2, f"{label}: two respawns, not a third ({err.count('respawned')})")
        mine = set(seen) | {int(p) for p in re.findall(r"\(pid (\d+)\)", err)}
        mine.discard(sup)
        F.check(wait_for(lambda: not [p for p in mine if alive(p)], 5),
                f"{label}: no worker outlives the supervisor (alive: {[p for p in mine if alive(p)]} of {sorted(mine)})")


def stop_cont():
    label = "SIGSTOP/SIGCONT"
    with Prefork("host_check", "--workers", "2", "--port", "0") as s:
        sup = s.proc.pid
        before = wait_for(lambda: children(sup) if len(children(sup)) == 2 else None, 5)
        F.check(before and len(before) == 2, f"{label}: two workers ({before})")
        if not before:
            return
        victim = min(before)
        try:
            os.kill(victim, signal.SIGSTOP)
            time.sleep(1.0)  # the pacing is the behaviour: a worker stopped for a second
        finally:
            try:
                os.kill(victim, signal.SIGCONT)
            except OSError:
                pass
        seen = set()
        deadline = time.monotonic() + 10
        while seen != before and time.monotonic() < deadline:
            try:
                seen.add(int(get(s.port, "/pid")[1]))
            except Exception:
                pass
        F.check(seen == before, f"{label}: both workers serve afterwards (saw {sorted(seen)} of {sorted(before)})")
        # Looked at once the continued worker has served again (not after a pause).
        F.check("respawned" not in s.stderr() and "died" not in s.stderr(),
                f"{label}: a stopped worker is not replaced:\n{s.stderr()}")
        F.check(children(sup) == before, f"{label}: both pids unchanged ({before} -> {children(sup)})")
        rc = s.stop()
        F.check(rc == 0, f"{label}: SIGTERM -> exit 0 (rc {rc}):\n{s.stderr()}")


def drain():
    label = "prefork drain"
    with Prefork("host_check", "--workers", "2", "--port", "0", env={"M0_HOSTCHECK_SLOW_SAYS": "1"}) as s:
        wait_for(lambda: len(children(s.proc.pid)) == 2, 5)
        with Conn(s.port, timeout=10) as c:
            t0 = time.monotonic()  # before the send: the view's 1500 ms all come after it
            c.send(request("GET", "/slow?ms=1500"))
            F.check(wait_for(lambda: "/slow 1500 ms begins" in s.stderr(), 10),
                    f"{label}: the view began before the signal\n{s.stderr()}")  # in flight in a worker now
            s.signal(signal.SIGTERM)
            try:
                st, _, h, body, line = c.read_response(timeout=10)
                took = time.monotonic() - t0
                F.check(st == 200 and body == b'{"ms":1500}' and int(h.get("content-length", -1)) == len(body),
                        f"{label}: the in-flight /slow?ms=1500 is answered whole ({line!r} {body!r})")
                F.check(took >= 1.45, f"{label}: after its full 1500 ms ({took:.2f}s)")
            except (Closed, TimeoutError) as e:
                F.check(False, f"{label}: the in-flight request was answered ({e}):\n{s.stderr()}")
        rc = s.wait(timeout=10)
        F.check(rc == 0, f"{label}: the supervisor exits 0 (rc {rc}):\n{s.stderr()}")
        F.check("respawned" not in s.stderr(), f"{label}: nothing respawned during the drain")


try:
    respawn()
    crash_loop()
    stop_cont()
    drain()
finally:
    reap(SEEN_PIDS)  # a failed run leaves no worker behind
F.done()
