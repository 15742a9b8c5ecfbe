"""FAILED during the start barrier, while the others are already READY
(docs/behaviour.md, the barrier and exit 78): a `make` that refuses ends the
process with exit 78 and the make's message, and no loop has served.

Each case starts host_check on a listener the test bound itself (socket
activation, so the port is known from the start and the test keeps its own
descriptor of it) with `--trace -` (every actor message on stderr) and
`--drain-timeout-ms 30000`. The failing make waits for a gate file
(M0_HOSTCHECK_FAIL_GATE); the test opens the gate only once the trace shows
every other actor's READY received by its coordinator, and after it has sent
a probe request into the listener. Cases: a pool thread (pool.1.0,
M0_HOSTCHECK_POOL_MAKE_FAILS=late), a loop (loop 1,
M0_HOSTCHECK_LOOP_MAKE_FAILS=1) and the producer
(M0_HOSTCHECK_PRODUCER_FAILS=late), each under --threads 2 and under
--workers 2 (there the failing pool thread or loop is worker 1's, and the
ready one is worker 0, whose READY the supervisor has received). Proves, for
each:
- exit 78 within 10 s of the gate (the 30 s drain bound is not waited out:
  nothing was in flight), the make's message on stderr, never `listening on`,
  nobody named as not finishing its drain;
- no GO was ever sent (no `go` record in the trace), and under prefork the
  supervisor says the worker refused its configuration and respawns nothing;
- nothing answered: the probe received no byte, and after the exit it is
  still in the listener's backlog (the test accepts it itself): no loop ever
  accepted a connection;
- no worker outlives the supervisor.
And a SIGTERM during the start, while loop 1's make still runs (held at the
gate; --threads 2 and --workers 2): every coordinator says `stopped while
starting` (under prefork the supervisor and both workers), the make then
returns (its failure is the end of that loop's drain), and the host exits 0
with the usual drain, no GO sent, nobody named, the probe never accepted.
"""
import os
import re
import signal
import socket
import tempfile
import time

import harness
from harness import Failures, alive, reap, wait_for
from hostpaths import activated, read_log, trace_records

F = Failures()
SEEN = set()

CASES = [
    # label, args, knob, the make's message, the actors whose READY the
    # coordinator (the supervisor under prefork) must have received first
    ("pool thread, threads", ["--threads", "2", "--blocking-threads", "1"], {"M0_HOSTCHECK_POOL_MAKE_FAILS": "late"},
     "make refused on pool thread 1.0 (M0_HOSTCHECK_POOL_MAKE_FAILS=late)",
     {"loop.0", "loop.1", "pool.0.0", "producer"}),
    ("pool thread, prefork", ["--workers", "2", "--blocking-threads", "1"], {"M0_HOSTCHECK_POOL_MAKE_FAILS": "late"},
     "make refused on pool thread 1.0 (M0_HOSTCHECK_POOL_MAKE_FAILS=late)", {"worker.0", "producer"}),
    ("loop, threads", ["--threads", "2"], {"M0_HOSTCHECK_LOOP_MAKE_FAILS": "1"},
     "make refused on loop 1 (M0_HOSTCHECK_LOOP_MAKE_FAILS=1)", {"loop.0", "producer"}),
    ("loop, prefork", ["--workers", "2"], {"M0_HOSTCHECK_LOOP_MAKE_FAILS": "1"},
     "make refused on loop 1 (M0_HOSTCHECK_LOOP_MAKE_FAILS=1)", {"worker.0", "producer"}),
    ("producer, threads", ["--threads", "2"], {"M0_HOSTCHECK_PRODUCER_FAILS": "late"},
     "the producer's make refused late (M0_HOSTCHECK_PRODUCER_FAILS=late)", {"loop.0", "loop.1"}),
    ("producer, prefork", ["--workers", "2"], {"M0_HOSTCHECK_PRODUCER_FAILS": "late"},
     "the producer's make refused late (M0_HOSTCHECK_PRODUCER_FAILS=late)", {"worker.0", "worker.1"}),
]


def ready_at_coordinator(text):
    return {r["from"] for r in trace_records(text)
            if r.get("dir") == "recv" and r.get("to") == "coordinator" and r.get("kind") == "ready"}


def probe_unseen(label, probe, lsock):
    """The probe got no byte and no close, and is still in the backlog."""
    probe.settimeout(0)
    try:
        got = probe.recv(4096)
    except BlockingIOError:
        got = None  # nothing came, and the connection is still open
    except OSError as e:
        got = repr(e).encode()
    F.check(got is None, f"{label}: the probe got no answer and no close ({got!r})")
    lsock.settimeout(0)
    try:
        c, peer = lsock.accept()
        c.close()
        F.check(peer == probe.getsockname(), f"{label}: the probe is still in the backlog ({peer})")
    except BlockingIOError:
        F.check(False, f"{label}: the probe is still in the listener's backlog: no loop accepted it")


def stopped_while_starting(label, args, ready, coordinators):
    gate = os.path.join(tempfile.mkdtemp(), "gate")
    env = {"M0_HOSTCHECK_LOOP_MAKE_FAILS": "1", "M0_HOSTCHECK_FAIL_GATE": gate}
    proc, lsock, port, errf = activated("host_check", args + ["--trace", "-", "--drain-timeout-ms", "30000"], env=env)
    probe = None
    try:
        # READY from the others, and loop 1's make waiting: its process is up,
        # its signals taken (a worker still starting ends at SIGTERM unheard).
        ok = wait_for(lambda: (ready <= ready_at_coordinator(read_log(errf))
                               and "host_check: a make waits for the gate" in read_log(errf))
                      or proc.poll() is not None, 20, step=0.02)
        SEEN.update(harness.children(proc.pid))
        F.check(ok and proc.poll() is None, f"{label}: READY from {sorted(ready)} while loop 1's make waits:\n"
                                            f"{read_log(errf)[-2000:]}")
        probe = socket.create_connection(("127.0.0.1", port), timeout=5)
        probe.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
        proc.send_signal(signal.SIGTERM)
        said = wait_for(lambda: read_log(errf).count("m0: stopped while starting") >= coordinators, 10)
        F.check(said, f"{label}: {coordinators} coordinator(s) say `stopped while starting`:\n{read_log(errf)[-2000:]}")
        with open(gate, "w"):
            pass
        try:
            rc = proc.wait(timeout=20)
        except Exception:
            rc = None
        err = read_log(errf)
        text = "\n".join(l for l in err.splitlines() if not l.startswith('{"t":'))
        F.check(rc == 0, f"{label}: exit 0 after the usual drain (rc {rc}):\n{text}")
        F.check("listening on" not in text and not re.search(r"did not (finish|stop|exit)|exited \d|died", text),
                f"{label}: never listening, nobody named:\n{text}")
        F.check(not [r for r in trace_records(err) if r.get("kind") == "go"], f"{label}: no GO was ever sent")
        probe_unseen(label, probe, lsock)
        SEEN.update(int(p) for p in re.findall(r"\(pid (\d+)\)", text))
        SEEN.discard(proc.pid)
        F.check(wait_for(lambda: not [p for p in SEEN if alive(p)], 5), f"{label}: no worker outlives the supervisor")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
        if probe:
            probe.close()
        lsock.close()
        try:
            os.unlink(gate)
        except OSError:
            pass
        os.rmdir(os.path.dirname(gate))


def case(label, args, knob, message, ready):
    prefork = "--workers" in args
    gate = os.path.join(tempfile.mkdtemp(), "gate")
    env = dict(knob, M0_HOSTCHECK_FAIL_GATE=gate)
    proc, lsock, port, errf = activated("host_check", args + ["--trace", "-", "--drain-timeout-ms", "30000"], env=env)
    probe = None
    try:
        def others_ready():
            if prefork:
                SEEN.update(harness.children(proc.pid))
            return ready <= ready_at_coordinator(read_log(errf)) or proc.poll() is not None

        wait_for(others_ready, 20, step=0.02)
        err = read_log(errf)
        F.check(ready <= ready_at_coordinator(err) and proc.poll() is None,
                f"{label}: the coordinator received READY from {sorted(ready)} while the make waits "
                f"(got {sorted(ready_at_coordinator(err))}, rc {proc.poll()}):\n{err[-3000:]}")
        probe = socket.create_connection(("127.0.0.1", port), timeout=5)
        probe.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
        with open(gate, "w"):
            pass
        t0 = time.monotonic()
        try:
            rc = proc.wait(timeout=20)
        except Exception:
            rc = None
        took = time.monotonic() - t0
        err = read_log(errf)
        recs = trace_records(err)
        text = "\n".join(l for l in err.splitlines() if not l.startswith('{"t":'))
        F.check(rc == 78, f"{label}: exit 78 (rc {rc}):\n{text}")
        F.check(took < 10, f"{label}: within 10 s of the failing make, not the 30 s drain bound ({took:.2f} s)")
        F.check(f"m0: host_check: {message}" in text, f"{label}: the make's message is on stderr:\n{text}")
        F.check("listening on" not in text, f"{label}: never `listening on`:\n{text}")
        F.check(not re.search(r"did not (finish its drain|stop|exit)", text),
                f"{label}: nobody named as not finishing (nothing was in flight):\n{text}")
        gos = [r for r in recs if r.get("kind") == "go"]
        F.check(not gos, f"{label}: no GO was ever sent ({gos[:3]})")
        if prefork:
            if "producer" not in label:
                F.check(re.search(r"m0: worker 1 \(pid \d+\) refused its configuration \(exit 78\)", text),
                        f"{label}: the supervisor says worker 1 refused its configuration:\n{text}")
            F.check("respawned" not in text, f"{label}: nothing respawned:\n{text}")
        probe_unseen(label, probe, lsock)
        SEEN.update(int(p) for p in re.findall(r"\(pid (\d+)\)", text))
        SEEN.discard(proc.pid)
        F.check(wait_for(lambda: not [p for p in SEEN if alive(p)], 5),
                f"{label}: no worker outlives the supervisor ({[p for p in SEEN if alive(p)]})")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
        if probe:
            probe.close()
        lsock.close()
        try:
            os.unlink(gate)
            os.rmdir(os.path.dirname(gate))
        except OSError:
            pass


try:
    for c in CASES:
        case(*c)
    stopped_while_starting("SIGTERM while starting, threads", ["--threads", "2"], {"loop.0", "producer"}, 1)
    stopped_while_starting("SIGTERM while starting, prefork", ["--workers", "2"], {"worker.0", "producer"}, 3)
finally:
    reap(SEEN)
F.done()
