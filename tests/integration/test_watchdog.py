"""The supervisor's heartbeat, `--worker-timeout-ms T` (prefork only;
docs/behaviour.md, "Heartbeat"): every loop pass stamps the worker's line on
the shared page, and the supervisor kills with SIGKILL, and so replaces,
counted as a death, a worker whose stamp is older than T.

host_check --workers 2 --worker-timeout-ms 1000 (the least allowed)
--respawn-budget 1, with the producer's beats off (M0_HOSTCHECK_PERIOD_MS=600000:
no frame turns a loop, only the loop itself does). Proves:
- idle workers are not replaced: for 4 s (four timeouts) no worker is killed
  and both pids stay, and each idle loop's stamp (read from the shared page,
  --run-dir: 64-byte head, then 128 bytes per loop, beat_ms its 10th word)
  moves on by at most 3/4 of the timeout at a time: an idle loop turns on its
  own well within it (at 1000 ms an idle loop once turned only every 1000 ms,
  and the supervisor now and then killed one);
- a worker whose loop is stuck (GET /slow?ms=600000 with no pool spins on the
  loop; M0_HOSTCHECK_SLOW_SAYS tells when it began) is killed: stderr names
  it, `worker W (pid P) has not turned its loop for X ms (timeout 1000 ms);
  killing it` with X >= 1000, then `died of signal 9`, within the timeout
  plus 10 s; the stuck request's connection is closed without an answer; a
  client on the other worker, asking /health on its keep-alive connection
  all along, sees only whole 200s; `worker W respawned (pid Q)` names a new
  child of the supervisor, which answers /instance itself, and
  m0_respawns_total is 1;
- the kill counts against the respawn budget: the replacement stuck the same
  way is killed too, the second death spends the budget of 1 (`respawn budget
  is spent`), the supervisor exits 1 and no worker outlives it;
- the heartbeat is refused outside prefork and below 1000 ms (exit 78, one
  `m0: <detail> (<fix>)` line).
"""
import mmap
import os
import re
import shutil
import struct
import tempfile
import threading
import time

import harness
from harness import Failures, Prefork, alive, reap, run, wait_for
from hostpaths import conn_on, instance
from rawhttp import Closed, Conn, request

F = Failures()
SEEN = set()  # every worker pid seen: killed by pid at the end if still running
T = 1000  # --worker-timeout-ms


def children(pid):
    out = harness.children(pid)
    SEEN.update(out)
    return out


class Survivor(threading.Thread):
    """/health over and over on one keep-alive connection: counts whole 200s,
    records anything else."""

    def __init__(self, conn):
        super().__init__(daemon=True)
        self.conn, self.ok, self.errors = conn, 0, []
        self.halt = threading.Event()

    def run(self):
        while not self.halt.is_set():
            try:
                self.conn.send(request("GET", "/health"))
                st, _, h, body, line = self.conn.read_response(timeout=10)
                if st != 200 or body != b'{"status":"ok"}':
                    self.errors.append(f"{line!r} {body!r}")
                    return
                self.ok += 1
            except (Closed, OSError, ValueError) as e:
                self.errors.append(f"{type(e).__name__}: {e}")
                return
            self.halt.wait(0.005)

    def stop(self):
        self.halt.set()
        self.join(timeout=15)


def beat_gaps(run_dir, seconds):
    """Samples both loops' beat_ms on the shared page for `seconds`: the
    largest step between successive stamps of each loop, and how many steps."""
    with open(os.path.join(run_dir, "page"), "rb") as f:
        page = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    try:
        magic, = struct.unpack_from("<Q", page, 8)
        if magic != 0x6567617030306d:
            return None
        last, gaps, steps = [None, None], [0, 0], [0, 0]
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for i in (0, 1):
                a, = struct.unpack_from("<Q", page, 64 + 128 * i + 72)
                b, = struct.unpack_from("<Q", page, 64 + 128 * i + 72)
                if a != b or a == 0:
                    continue  # a store in between, or no pass yet
                if last[i] is not None and a != last[i]:
                    gaps[i] = max(gaps[i], a - last[i])
                    steps[i] += 1
                last[i] = a
            time.sleep(0.005)
        return gaps, steps
    finally:
        page.close()


def stuck(s, conn, w, pid, label):
    """Sends the endless view on conn (served by worker w, pid) and waits for
    the supervisor to kill that worker. Returns the match of the kill line."""
    conn.send(request("GET", "/slow?ms=600000"))
    began = wait_for(lambda: f"/slow 600000 ms begins on loop {w} " in s.stderr(), 10)
    F.check(began, f"{label}: the endless view began on worker {w}:\n{s.stderr()}")
    kill_re = re.compile(rf"m0: worker {w} \(pid {pid}\) has not turned its loop for (\d+) ms "
                         rf"\(timeout {T} ms\); killing it")
    m = wait_for(lambda: kill_re.search(s.stderr()), T / 1000 + 10)
    F.check(m is not None, f"{label}: within the timeout + 10 s the supervisor says it kills worker {w} "
                           f"(pid {pid}):\n{s.stderr()}")
    if m:
        F.check(int(m.group(1)) >= T, f"{label}: ... not before its loop was still for the timeout ({m.group(0)})")
    died = wait_for(lambda: f"m0: worker {w} (pid {pid}) died of signal 9" in s.stderr(), 10)
    F.check(died, f"{label}: the worker died of SIGKILL, named:\n{s.stderr()}")
    F.check(wait_for(lambda: not alive(pid), 5), f"{label}: pid {pid} is gone")
    try:
        got = conn.read_response(timeout=10)
        F.check(False, f"{label}: the stuck request got no answer (got {got[4]!r})")
    except (Closed, OSError):
        F.check(True, "")
    return m


def watchdog():
    label = "watchdog"
    run_dir = tempfile.mkdtemp()
    try:
        watched(label, run_dir)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def watched(label, run_dir):
    with Prefork("host_check", "--workers", "2", "--port", "0", "--worker-timeout-ms", str(T), "--run-dir", run_dir,
                 "--respawn-budget", "1", "--respawn-window-ms", "600000", "--metrics-path", "/metrics",
                 env={"M0_HOSTCHECK_PERIOD_MS": "600000", "M0_HOSTCHECK_SLOW_SAYS": "1"}) as s:
        sup = s.proc.pid
        before = wait_for(lambda: children(sup) if len(children(sup)) == 2 and s.stderr().count(" serving (pid") == 2
                          else None, 10)
        F.check(before, f"{label}: two workers serving:\n{s.stderr()}")
        if not before:
            return
        # Idle workers: their loops turn on their own, within the timeout.
        got = beat_gaps(run_dir, 4 * T / 1000)
        F.check(got is not None, f"{label}: the shared page is in the run directory")
        if got:
            gaps, steps = got
            F.check(all(steps) and max(gaps) <= 3 * T // 4,
                    f"{label}: each idle loop stamps its beat at most {3 * T // 4} ms apart "
                    f"(largest steps {gaps} ms, over {steps} steps)")
        killed = "has not turned" in s.stderr()
        F.check(not killed, f"{label}: idle workers are not killed in four timeouts:\n{s.stderr()}")
        F.check(children(sup) == before, f"{label}: both idle workers' pids unchanged ({before} -> {children(sup)})")

        held = []
        victim = Conn(s.port, timeout=10)
        w, pid = instance(victim)
        got = conn_on(s.port, lambda ow, op: op != pid, held)
        F.check(got is not None, f"{label}: a connection on the other worker")
        if not got:
            return
        other, ow, opid = got
        for c in held:
            c.close()
        held.clear()
        bystander = Survivor(other)
        bystander.start()
        F.check(wait_for(lambda: bystander.ok >= 5, 10), f"{label}: the other worker serves /health")

        stuck(s, victim, w, pid, f"{label}: worker {w} stuck")
        victim.close()
        rm = wait_for(lambda: re.search(rf"m0: worker {w} respawned \(pid (\d+)\)", s.stderr()), 10)
        F.check(rm is not None, f"{label}: worker {w} is respawned:\n{s.stderr()}")
        if not rm:
            return
        new = int(rm.group(1))
        F.check(new != pid and new in children(sup), f"{label}: the replacement {new} is a new child of the supervisor")
        n0 = bystander.ok
        F.check(wait_for(lambda: bystander.ok >= n0 + 5 or bystander.errors, 10) and not bystander.errors,
                f"{label}: the other worker's client saw only whole 200s ({bystander.ok}, {bystander.errors})")
        bystander.stop()
        F.check(not bystander.errors, f"{label}: ... throughout ({bystander.errors})")

        # The replacement answers itself; another connection held on the
        # survivor makes accept sharing hand the next one to it.
        got = conn_on(s.port, lambda nw, np: np == new, held)
        F.check(got is not None, f"{label}: the replacement pid {new} answers /instance")
        metrics = b""
        try:
            c = Conn(s.port, timeout=10)
            c.send(request("GET", "/metrics"))
            metrics = c.read_response()[3]
            c.close()
        except (Closed, OSError) as e:
            metrics = repr(e).encode()
        F.check(re.search(rb"(?m)^m0_respawns_total 1$", metrics),
                f"{label}: m0_respawns_total is 1 ({re.findall(rb'm0_respawns_total.*', metrics)})")
        if not got:
            return
        nconn, _, _ = got
        for c in held:
            c.close()
        other.close()

        # The kill was a death: a second one spends the budget of 1.
        stuck(s, nconn, w, new, f"{label}: the replacement stuck")
        nconn.close()
        try:
            rc = s.wait(timeout=15)
        except AssertionError as e:
            rc = None
            F.check(False, f"{label}: {e}")
        err = s.stderr()
        F.check(rc == 1, f"{label}: the second kill spends the respawn budget: exit 1 (rc {rc}):\n{err}")
        F.check("respawn budget is spent" in err, f"{label}: the supervisor says the budget is spent:\n{err}")
        F.check(err.count("respawned") == 1, f"{label}: one respawn, not a second ({err.count('respawned')})")
        mine = set(SEEN) | {int(p) for p in re.findall(r"\(pid (\d+)\)", err)}
        mine.discard(sup)
        F.check(wait_for(lambda: not [p for p in mine if alive(p)], 5),
                f"{label}: no worker outlives the supervisor ({[p for p in mine if alive(p)]})")


def refusals():
    for args, word in ((["--worker-timeout-ms", "1000"], "--worker-timeout-ms"),
                       (["--threads", "2", "--worker-timeout-ms", "1000"], "--worker-timeout-ms"),
                       (["--workers", "2", "--worker-timeout-ms", "999"], "1000")):
        rc, _, err = run("host_check", "--port", "0", *args, timeout=15)
        lines = [l for l in err.splitlines() if l.strip()]
        F.check(rc == 78 and len(lines) == 1 and re.match(r"^m0: .+ \(.+\)$", lines[0]) and word in lines[0],
                f"{args}: refused, exit 78 and one `m0: <detail> (<fix>)` line naming {word!r} (rc {rc}):\n{err}")


try:
    refusals()
    watchdog()
finally:
    reap(SEEN)
F.done()
