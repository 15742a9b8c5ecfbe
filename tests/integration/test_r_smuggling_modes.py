"""Request smuggling is refused the same way in every mode (docs/behaviour.md,
Request smuggling and malformed requests, Modes).

test_smuggling.py proves its vectors on ramp in single mode. This test takes
the SAME vectors and the same probe/control functions from that file (its
definitions are loaded without running its module-level test: the file runs
its server at import, so only its imports, assignments and function
definitions are executed here) and runs them against ramp in
  --threads 2, --workers 2, --blocking-threads 2,
  --workers 2 --blocking-threads 2.
Each vector is sent twice per mode on fresh connections (accept sharing
spreads them over the loops); ~26 vectors x 2 x 4 modes, a few seconds in all.

Proves, per mode: every vector is answered with the status test_smuggling.py
accepts for it (400; 505 or 400 for HTTP/9.9; 400 or 501 for an unknown
transfer coding), says Connection: close, is followed by nothing (the
smuggled GET /x/smuggled is never answered) and the server closes the
connection; the control requests (the same framing written correctly) are
served; both loops took part (each loop's drain line counts connections);
the server still serves /x/now afterwards and exits 0 on SIGTERM.
"""
import ast
import os
import re
import socket
import signal
import time

from harness import Failures, Server, children, ours
from rawhttp import Conn

F = Failures()


def load_definitions(path):
    """The imports, assignments and function definitions of a test module,
    without its module-level statements that run a server."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    keep = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.Assign, ast.ClassDef)
    tree.body = [n for n in tree.body if isinstance(n, keep)]
    ns = {"__name__": "test_smuggling_definitions", "__file__": path}
    exec(compile(tree, path, "exec"), ns)
    return ns


SM = load_definitions(os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_smuggling.py"))
SM["F"] = F  # its probe() and control() report into this run's Failures
VECTORS, probe, control = SM["VECTORS"], SM["probe"], SM["control"]

MODES = [
    ("threads2", ["--threads", "2"]),
    ("workers2", ["--workers", "2"]),
    ("bt2", ["--blocking-threads", "2"]),
    ("workers2+bt2", ["--workers", "2", "--blocking-threads", "2"]),
]
REPEAT = 2


t_all = time.monotonic()
F.check(len(VECTORS) >= 12, f"test_smuggling.py's vectors loaded ({len(VECTORS)})")
for mode, args in MODES:
    t0 = time.monotonic()
    kids = set()
    with Server("ramp", "--port", "0", *args) as s:
        kids = children(s.proc.pid)
        control(s.port)
        # One idle connection held open: accept sharing keeps ties where they
        # land, so without any load sequential connections may all stay on one
        # loop; with one loop holding a connection, the next goes to the other.
        held = socket.create_connection(("127.0.0.1", s.port), timeout=5)
        refused = 0
        for r in range(REPEAT):
            for name, allowed, data in VECTORS:
                refused += bool(probe(s.port, f"{mode} #{r + 1}: {name}", allowed, data))
        held.close()
        F.check(refused == REPEAT * len(VECTORS), f"[{mode}] {refused} of {REPEAT * len(VECTORS)} vector sends refused and closed")
        F.check(s.proc.poll() is None, f"[{mode}] server still running after every vector")
        with Conn(s.port) as k:
            k.send(b"GET /x/now HTTP/1.1\r\nHost: t\r\n\r\n")
            st, _, _, body, line = k.try_response()
            F.check(st == 200 and body == b'{"route":"now"}', f"[{mode}] /x/now answered normally after all vectors ({line!r})")
        rc = s.stop()
        F.check(rc == 0, f"[{mode}] exit 0 on SIGTERM after the vectors (got {rc})\n{s.stderr()[-1500:]}")
        loops = {int(a): int(b) for a, b in re.findall(r"loop\.(\d+) drained: \d+ requests, (\d+) connections", s.stderr())}
        if "workers2" in mode or "threads2" in mode:
            F.check(len(loops) == 2 and all(v > 0 for v in loops.values()),
                    f"[{mode}] both loops took connections (drain lines: {loops})")
    for p in [p for p in kids if ours(p, "ramp")]:
        try:
            os.kill(p, signal.SIGKILL)  # only if the supervisor left one behind (a failure above)
        except OSError:
            pass
    print(f"[{mode}] {refused} vector sends refused and closed in {time.monotonic() - t0:.1f}s", flush=True)
print(f"took {time.monotonic() - t_all:.1f}s")
F.done()
