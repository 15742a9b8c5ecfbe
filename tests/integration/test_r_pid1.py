"""The host behaves the same as PID 1 (docs/behaviour.md, Drain: "the binary
behaves the same as PID 1"), as in a container without an init.

host_check runs as PID 1 of a new PID namespace:
    unshare --pid --fork --mount-proc BIN/host_check --port 0 [mode flags]
(the namespace's init is the child of the unshare process; its pid as seen
from here is read from /proc, and /proc/<it>/status NSpid says it is 1
inside). If unshare is missing or not permitted, the test prints SKIP with
the reason and exits 0.

As PID 1, host_check is the master from the start (host/master.h: what PID 1
owes its children, reaping, without waiting for a reload), and generation 1
its child. Proves, in single, --threads 2 and --workers 2 (each ~2 s):
  - PID 1 inside the namespace (NSpid) is host_check, titled `m0: host_check
    master`; its one child is generation 1, whose log line names its pid
    inside the namespace, and serves /health;
  - under --workers 2, /pid answers (fresh connections held open so both
    workers answer) are pids INSIDE the namespace: exactly the inner NSpid
    values of generation 1's children, none of them a pid as seen from outside;
  - SIGTERM sent to the namespace's init drains it: a /slow?ms=800 in flight
    at the signal is answered whole ({"ms":800}) and the process exits 0
    (unshare passes its exit code on) within 5 s; nothing of it is left.
"""
import os
import re
import signal
import sys
import time

from harness import BIN, Failures, InPidNamespace, children, nspid, pid_namespace_refused, wait_for
from rawhttp import Conn, request

F = Failures()
WHY = pid_namespace_refused()
if WHY:
    print(f"SKIP: {WHY}")
    sys.exit(0)


def mode_run(mode, args):
    t0 = time.monotonic()
    s = InPidNamespace("host_check", "--port", "0", *args, env={"M0_HOSTCHECK_SLOW_SAYS": "1"})
    init = None
    try:
        init = s.start().init
        F.check(init is not None, f"[{mode}] the unshare process has a child (the namespace's init)")
        if init is None:
            return
        ns = nspid(init)
        F.check(len(ns) >= 2 and ns[-1] == 1, f"[{mode}] the server is PID 1 inside its namespace (NSpid {ns})")
        F.check(os.path.realpath(f"/proc/{init}/exe") == os.path.realpath(os.path.join(BIN, "host_check")),
                f"[{mode}] that PID 1 is host_check itself")
        try:
            title = open(f"/proc/{init}/cmdline", "rb").read().split(b"\0")[0].decode()
        except OSError:
            title = ""
        F.check(title == "m0: host_check master", f"[{mode}] PID 1 is the master ({title!r})")
        gen1 = wait_for(lambda: next(iter(children(init)), None), 5)
        inner1 = nspid(gen1)[-1:] if gen1 else []
        F.check(gen1 and inner1 and re.search(rf"pid {inner1[0]}, generation 1\)", s.stderr()) is not None,
                f"[{mode}] generation 1 is PID 1's child, and its log names its pid inside ({inner1}): "
                f"{s.stderr().splitlines()[:1]}")
        with Conn(s.port) as k:
            k.send(request("GET", "/health"))
            st, _, _, body, line = k.try_response()
            F.check(st == 200 and body == b'{"status":"ok"}', f"[{mode}] /health served by PID 1 ({line!r})")
        if "--workers" in args:
            deadline = time.monotonic() + 5
            while len(children(gen1)) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            workers = children(gen1)
            inner = {nspid(p)[-1] for p in workers}
            answers, held = set(), []
            for _ in range(12):
                k = Conn(s.port)
                held.append(k)
                k.send(request("GET", "/pid"))
                st, _, _, body, _ = k.try_response()
                if st == 200 and body.isdigit():
                    answers.add(int(body))
                if len(answers) >= 2:
                    break
            for k in held:
                k.close()
            print(f"[{mode}] workers seen from outside {sorted(workers)}, inside {sorted(inner)}; /pid answered {sorted(answers)}")
            F.check(len(workers) == 2, f"[{mode}] generation 1 has 2 worker children ({workers})")
            F.check(len(answers) == 2 and answers == inner,
                    f"[{mode}] /pid answers are the workers' pids inside the namespace: {answers} vs {inner}")
            F.check(not answers & workers, f"[{mode}] no /pid answer is a pid as seen from outside")
        busy = Conn(s.port, timeout=8)
        busy.send(request("GET", "/slow?ms=800"))
        F.check(wait_for(lambda: "/slow 800 ms begins" in s.stderr(), 10),
                f"[{mode}] the /slow view began before the signal\n{s.stderr()[-600:]}")  # in flight now
        t_sig = time.monotonic()
        os.kill(init, signal.SIGTERM)
        st, _, h, body, line = busy.try_response(timeout=6)
        busy.close()
        F.check(st == 200 and body == b'{"ms":800}' and h.get("content-length") == "10",
                f"[{mode}] the request in flight at SIGTERM is answered whole ({line!r} {body!r})")
        rc = s.wait(6)
        took = time.monotonic() - t_sig
        F.check(rc == 0, f"[{mode}] SIGTERM to PID 1 drains: exit 0 (got {rc})\n{s.stderr()[-1500:]}")
        F.check(took < 5, f"[{mode}] exited within 5 s of the signal ({took:.2f}s)")
        F.check(not children(s.proc.pid), f"[{mode}] nothing of the namespace is left")
    finally:
        if s.proc and s.proc.poll() is None:
            if init is not None and nspid(init)[-1:] == [1]:
                os.kill(init, signal.SIGKILL)  # takes the whole namespace with it
            s.kill()
    print(f"[{mode}] done in {time.monotonic() - t0:.1f}s", flush=True)


for mode, args in [("single", []), ("threads2", ["--threads", "2"]), ("workers2", ["--workers", "2"])]:
    mode_run(mode, args)
F.done()
