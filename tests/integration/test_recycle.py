"""Recycling under prefork, `--max-requests N --max-requests-jitter J`
(docs/behaviour.md, "Recycling"): a worker counts its loop's requests and,
past N plus a number drawn per worker from 0 to J, drains itself and exits 0;
the supervisor starts a fresh one without counting a death.

host_check --workers 2 --max-requests 40 --max-requests-jitter 30
--respawn-budget 0 (a single counted death would end the host), and C = 4
client threads, each asking GET /pid on a new connection per request
(Connection: close), without pause, until the workers have recycled 8 times.
Proves:
- no request is lost or refused: every request gets a whole 200 whose body
  is the pid of a worker of this supervisor;
- each recycle is said (`worker i recycles after D requests`, then the
  supervisor's `worker i (pid P) recycled; starting a fresh one` and
  `worker i respawned (pid Q)`), with N <= D <= N + J, and the draws are not
  all the same (the jitter is drawn per worker);
- a recycled worker served at least D requests and at most D + 2C (what its
  clients had already sent, or a sibling had handed it, when it reached D and
  stopped accepting): counted by the clients from the /pid bodies;
- the replacement serves: every worker that recycled after the first was a
  replacement that answered requests itself, and every pid that answered is a
  worker the supervisor started;
- nothing was counted as a death (the budget of 0 is intact, no `died`, no
  `exited`, m0_respawns_total 0), and SIGTERM then drains: exit 0.
- `--max-requests` and `--max-requests-jitter` without workers are refused
  (exit 78, one `m0: <detail> (<fix>)` line).
"""
import collections
import http.client
import re
import threading

import harness
from harness import Failures, Prefork, alive, reap, run, wait_for
from rawhttp import Conn, request

F = Failures()
SEEN = set()
N, J, C, RECYCLES = 40, 30, 4, 8


class Clients:
    """C threads; each: a new connection, GET /pid, Connection: close, again."""

    def __init__(self, port):
        self.port = port
        self.by_pid = collections.Counter()
        self.bad = []
        self.lock = threading.Lock()
        self.halt = threading.Event()
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(C)]

    def run(self):
        while not self.halt.is_set():
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=15)
            try:
                c.request("GET", "/pid", headers={"Connection": "close"})
                r = c.getresponse()
                body = r.read()
                ok = r.status == 200 and body.isdigit() and int(r.getheader("content-length", "-1")) == len(body)
                with self.lock:
                    if ok:
                        self.by_pid[int(body)] += 1
                    else:
                        self.bad.append(f"{r.status} {body[:60]!r}")
            except Exception as e:  # a refused connect, a reset, a close without an answer
                with self.lock:
                    self.bad.append(f"{type(e).__name__}: {e}")
            finally:
                c.close()

    def start(self):
        for t in self.threads:
            t.start()

    def stop(self):
        self.halt.set()
        for t in self.threads:
            t.join(timeout=20)

    def total(self):
        with self.lock:
            return sum(self.by_pid.values())


def recycle():
    label = "recycle"
    with Prefork("host_check", "--workers", "2", "--port", "0", "--max-requests", str(N),
                 "--max-requests-jitter", str(J), "--respawn-budget", "0", "--metrics-path", "/metrics") as s:
        sup = s.proc.pid
        F.check(wait_for(lambda: len(harness.children(sup)) == 2 and s.stderr().count(" serving (pid") == 2, 10),
                f"{label}: two workers serving:\n{s.stderr()}")
        cl = Clients(s.port)
        cl.start()
        done = wait_for(lambda: s.stderr().count(") recycled; starting a fresh one") >= RECYCLES or cl.bad
                        or s.proc.poll() is not None, 120, step=0.05)
        cl.stop()
        # Every worker that reached its count (its `recycles after` line) has
        # drained, been replaced and its replacement said READY (the
        # `respawned` line) before we look: with the clients stopped, no
        # other worker reaches its count meanwhile.
        def settled():
            e = s.stderr()
            return e.count(" recycles after ") == e.count(") recycled;") == e.count("respawned (pid")
        wait_for(settled, 20)
        err = s.stderr()
        SEEN.update(int(p) for p in re.findall(r"\(pid (\d+)\)", err))
        SEEN.discard(sup)
        F.check(done and not cl.bad, f"{label}: {RECYCLES} recycles under load (got "
                                     f"{err.count(') recycled;')}), {cl.total()} requests")
        F.check(not cl.bad, f"{label}: no request lost or refused: {len(cl.bad)} of {cl.total() + len(cl.bad)} "
                            f"were not a whole 200 ({cl.bad[:5]}; the host said:\n{err[-3000:]})")
        F.check(s.proc.poll() is None, f"{label}: the supervisor serves on (rc {s.proc.poll()}):\n{err}")

        # Per worker index, in order: `serving (pid P)`, `recycles after D`,
        # `(pid P) recycled`, `respawned (pid Q)`, `serving (pid Q)`, ...
        draws = {i: [int(d) for d in re.findall(rf"m0: worker {i} recycles after (\d+) requests", err)] for i in (0, 1)}
        recycled = {i: [int(p) for p in re.findall(rf"m0: worker {i} \(pid (\d+)\) recycled; starting a fresh one", err)]
                    for i in (0, 1)}
        respawned = {i: [int(p) for p in re.findall(rf"m0: worker {i} respawned \(pid (\d+)\)", err)] for i in (0, 1)}
        first = {i: int(m) for i in (0, 1) for m in re.findall(rf"m0: worker {i} serving \(pid (\d+)\)", err)[:1]}
        all_draws = draws[0] + draws[1]
        F.check(all(N <= d <= N + J for d in all_draws) and all_draws,
                f"{label}: every draw is within [{N}, {N + J}] ({draws})")
        F.check(len(set(all_draws)) > 1, f"{label}: the draws differ between workers and recycles ({draws})")
        started = set(first.values())
        for i in (0, 1):
            F.check(len(draws[i]) == len(recycled[i]) and len(respawned[i]) == len(recycled[i]),
                    f"{label}: worker {i}: each `recycles after` has its `recycled` and its `respawned` "
                    f"({len(draws[i])}, {len(recycled[i])}, {len(respawned[i])})")
            lineage = [first.get(i)] + respawned[i]
            started |= set(respawned[i])
            for k, (pid, d) in enumerate(zip(recycled[i], draws[i])):
                F.check(pid == lineage[k], f"{label}: worker {i}'s recycle {k + 1} is its current pid "
                                           f"({pid}, lineage {lineage})")
                served = cl.by_pid.get(pid, 0)
                print(f"worker {i} pid {pid}: drew {d}, served {served}")
                F.check(d <= served <= d + 2 * C,
                        f"{label}: worker {i} (pid {pid}) drew {d} and served {served} (within [{d}, {d + 2 * C}])")
                F.check(not alive(pid), f"{label}: the recycled pid {pid} is gone")
                if k > 0:
                    F.check(served > 0, f"{label}: the replacement {pid} answered requests itself")
        F.check(set(cl.by_pid) <= started, f"{label}: every pid that answered is a worker the supervisor started "
                                           f"({sorted(set(cl.by_pid) - started)} are not)")
        F.check(not re.search(r"died of|exited \d|budget", err), f"{label}: no death counted:\n{err}")
        c = Conn(s.port, timeout=10)
        c.send(request("GET", "/metrics"))
        metrics = c.try_response()[3]
        c.close()
        F.check(re.search(rb"(?m)^m0_respawns_total 0$", metrics),
                f"{label}: m0_respawns_total is 0 ({re.findall(rb'm0_respawns_total.*', metrics)})")
        SEEN.update(harness.children(sup))
        rc = s.stop(timeout=15)
        F.check(rc == 0, f"{label}: SIGTERM drains: exit 0 (rc {rc}):\n{s.stderr()[-600:]}")
        F.check(wait_for(lambda: not [p for p in SEEN if alive(p)], 5), f"{label}: no worker outlives the supervisor")


def refusals():
    for args, word in ((["--max-requests", "10"], "--max-requests"),
                       (["--threads", "2", "--max-requests-jitter", "5"], "--max-requests-jitter")):
        rc, _, err = run("host_check", "--port", "0", *args, timeout=15)
        lines = [l for l in err.splitlines() if l.strip()]
        F.check(rc == 78 and len(lines) == 1 and re.match(r"^m0: .+ \(.+\)$", lines[0]) and word in lines[0],
                f"{args}: refused, exit 78 and one `m0: <detail> (<fix>)` line naming {word!r} (rc {rc}):\n{err}")


try:
    refusals()
    recycle()
finally:
    reap(SEEN)
F.done()
