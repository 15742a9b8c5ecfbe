"""The start barrier and the refusals of the execution modes (docs/behaviour.md,
The barrier, Modes; docs/reference.md, Checks; docs/apps.md, host_check).

Proves:
- `M0_HOSTCHECK_LOOP_MAKE_FAILS=1 host_check --threads 2 --port 0` (loop 1's
  make is held by M0_HOSTCHECK_FAIL_GATE until the probe was sent and had a
  second to be answered, then fails) exits 78 within 10 s, never prints `listening on`,
  names the failing make, and — the barrier itself — a client that connects to
  the already-bound listener (found through /proc, not the log) while loop 1
  is still inside its make gets NO answer: loop 0 took no connection. The
  same probe against a healthy `--threads 2` gets its 200 (the control arm
  proving the probe can see a served request). The same barrier across
  processes: `--workers 2` with loop 1's make failing exits 78, unserved.
- `M0_HOSTCHECK_POOL_MAKE_FAILS=1 ... --blocking-threads 1` exits 78 (also
  under `--workers 2`), `M0_HOSTCHECK_MAKE_FAILS=1 host_check --workers 2`
  exits 78: a worker exiting 78 is not respawned, the supervisor stops the
  rest, and no worker process outlives it.
- Configuration refusals, each ONE `m0: <detail> (<fix>)` line and exit 78:
  `notes --threads 2`, `M0_HOSTCHECK_MAX_WORKERS=1 host_check --threads 2`
  (max_threads defaults to the worker limit), `--threads 2 --workers 2`.
- A failing make is refused promptly: nothing is in flight, so the refusal
  neither waits out the drain bound (5000 ms) nor names a loop, pool thread or
  producer as "did not finish its drain" / "did not stop".
"""
import os
import re
import socket
import subprocess
import tempfile
import time

import harness
from harness import BIN, Failures, alive, listen_ports, run, wait_for

F = Failures()
QUIET_RE = re.compile(r"did not (finish its drain|stop)")


def recv_until(sock, deadline):
    """What sock receives until it closes, a whole /health answer came, or
    deadline passes."""
    got = b""
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(4096)
        except (socket.timeout, TimeoutError):
            break
        if not chunk:
            break
        got += chunk
        if b"\r\n\r\n" in got and b'"status"' in got:
            break
    return got


def start_and_probe(app, args, env, gate=False, exit_within=10.0):
    """Starts app, finds its listener through /proc (within 10 s) and sends
    GET /health on it. With gate, the late make (M0_HOSTCHECK_FAIL_GATE) is
    held until the probe is sent and has had a second to be answered (a host
    that serves before its barrier answers at once; a correct one never
    does), then let fail. Returns (rc or None, stderr, seconds from the
    gate's opening (or the start) to the exit, probe) where probe is None
    (no listener seen) or the bytes the probe got back before the connection
    closed (b"" = no answer)."""
    e = dict(os.environ)
    e.update(env)
    gate_path = None
    if gate:
        gate_path = os.path.join(tempfile.mkdtemp(prefix="m0-gate-"), "open")
        e["M0_HOSTCHECK_FAIL_GATE"] = gate_path
    err = harness.log_file()
    t0 = time.monotonic()
    proc = subprocess.Popen([os.path.join(BIN, app)] + args, stdout=subprocess.DEVNULL, stderr=err, env=e)
    probe = None

    def open_gate():
        nonlocal t0
        if gate_path and not os.path.exists(gate_path):
            open(gate_path, "w").close()
            t0 = time.monotonic()

    try:
        ports = []

        def listening():
            ports[:] = listen_ports(proc.pid)
            return ports or proc.poll() is not None
        wait_for(listening, 10)
        if ports:
            probe = b""
            try:
                with socket.create_connection(("127.0.0.1", ports[0]), timeout=2) as s:
                    s.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                    if gate_path:
                        probe += recv_until(s, time.monotonic() + 1.0)
                        open_gate()
                    probe += recv_until(s, t0 + exit_within)
            except OSError:
                pass  # refused / reset: no answer
        open_gate()
        try:
            rc = proc.wait(timeout=max(0.1, exit_within - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            rc = None
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
    return rc, harness.read_log(err), took, probe


def check_failed_make(label, app, args, env, reason, probe=False):
    rc, err, took, got = start_and_probe(app, args, env, gate=probe)
    F.check(rc == 78, f"{label}: exits 78 within 10 s (rc {rc}, {took:.2f}s):\n{err}")
    F.check("listening on" not in err, f"{label}: never says `listening on`:\n{err}")
    F.check(reason in err, f"{label}: names the failing make ({reason!r}):\n{err}")
    F.check("respawned" not in err, f"{label}: nothing respawned:\n{err}")
    if probe:
        F.check(got is not None, f"{label}: the probe found the bound listener (else the barrier check is vacuous)")
        F.check(not got, f"{label}: a connection made while loop 1 is still in its make is not served ({(got or b'')[:120]!r})")
    # Nothing is in flight: the refusal must not wait out the drain bound, nor
    # name a thread that was never inside the application.
    quiet = QUIET_RE.findall(err)
    F.check(not quiet, f"{label}: nothing named as not stopping (nothing was in flight):\n{err}")
    F.check(took < 3.0, f"{label}: refused promptly ({took:.2f}s; the 5000 ms drain bound is not waited out)")
    for pid in re.findall(r"\(pid (\d+)\)", err):
        F.check(not alive(int(pid)), f"{label}: worker pid {pid} does not outlive the supervisor")
    return err


def barrier():
    # The control arm: the probe does see a served /health when nothing fails.
    rc, err, took, got = start_and_probe("host_check", ["--threads", "2", "--port", "0"], {}, exit_within=3.0)
    F.check(got is not None and got.startswith(b"HTTP/1.1 200") and b'{"status":"ok"}' in got,
            f"control: the /proc probe is served by a healthy --threads 2 ({got!r})")
    F.check(rc is None, "control: a healthy host keeps serving (it was killed by the test)")

    check_failed_make("LOOP_MAKE_FAILS --threads 2", "host_check", ["--threads", "2", "--port", "0"],
                      {"M0_HOSTCHECK_LOOP_MAKE_FAILS": "1"}, "make refused on loop 1", probe=True)
    check_failed_make("LOOP_MAKE_FAILS --workers 2", "host_check", ["--workers", "2", "--port", "0"],
                      {"M0_HOSTCHECK_LOOP_MAKE_FAILS": "1"}, "make refused on loop 1", probe=True)
    check_failed_make("POOL_MAKE_FAILS --blocking-threads 1", "host_check", ["--blocking-threads", "1", "--port", "0"],
                      {"M0_HOSTCHECK_POOL_MAKE_FAILS": "1"}, "make refused on pool thread")
    check_failed_make("POOL_MAKE_FAILS --workers 2 --blocking-threads 1", "host_check",
                      ["--workers", "2", "--blocking-threads", "1", "--port", "0"],
                      {"M0_HOSTCHECK_POOL_MAKE_FAILS": "1"}, "make refused on pool thread")
    err = check_failed_make("MAKE_FAILS --workers 2", "host_check", ["--workers", "2", "--port", "0"],
                            {"M0_HOSTCHECK_MAKE_FAILS": "1"}, "make refused on loop")
    F.check("refused its configuration" in err, f"MAKE_FAILS --workers 2: the supervisor names the worker's refusal:\n{err}")


REFUSAL_RE = re.compile(r"^m0: .+ \(.+\)$")


def refusals():
    cases = [
        ("notes --threads 2", "notes", ["--threads", "2", "--port", "0"], {}, "notes"),
        ("MAX_WORKERS=1 --threads 2", "host_check", ["--threads", "2", "--port", "0"],
         {"M0_HOSTCHECK_MAX_WORKERS": "1"}, "at most 1"),
        ("--threads 2 --workers 2", "host_check", ["--threads", "2", "--workers", "2", "--port", "0"], {}, "threads"),
    ]
    for label, app, args, env, word in cases:
        t0 = time.monotonic()
        rc, out, err = run(app, *args, env=env, timeout=10)
        took = time.monotonic() - t0
        lines = [l for l in err.splitlines() if l.strip()]
        F.check(rc == 78, f"{label}: exit 78 (rc {rc}):\n{err}")
        F.check(len(lines) == 1 and REFUSAL_RE.match(lines[0]) and word in lines[0],
                f"{label}: ONE `m0: <detail> (<fix>)` line naming {word!r}:\n{err}")
        F.check("listening on" not in err, f"{label}: never listens")
        F.check(took < 3.0, f"{label}: refused at once ({took:.2f}s)")


refusals()
barrier()
F.done()
