"""The rollback window (issue 37, Deliver 4; host/rollback.h; docs/behaviour.md,
Reload and upgrade).

1. Back and forth (PID 1 of `unshare --pid --fork --mount-proc`, skipped with
   one line where namespaces cannot be made; and --workers 2 with
   --pid-file): a copy of host_check at TMP/app with --topology TMP/topo.json
   (a route /which served by the echo actor) and --reload-keep-ms 60000.
   Then the file loses the route and a different binary (host_check with
   bytes appended) is renamed over TMP/app, and SIGUSR2: generation 2
   serves, /which is 404, the process answering runs the new file, and a
   line says generation 1 is kept. SIGUSR1: generation 3 serves generation
   1's binary (its bytes, though no file holds them now) and configuration
   (/which answers 200 while the file says otherwise), said in one line;
   SIGUSR1 again: generation 4 is generation 2's again (404, the new bytes).
   Under light load every request answered 200; SIGTERM: exit 0, nothing
   left.
2. The window (--threads 2, --reload-keep-ms 1500): SIGUSR1 before any
   reload is refused with a line; SIGHUP, generation 2 serves, and 1.5 s
   later a line says generation 1 was dropped; SIGUSR1 then is refused with
   a line and the host serves on. Without --reload-keep-ms, SIGUSR1 is
   refused with a line (it does not end the host).
"""
import hashlib
import os
import re
import shutil
import signal
import tempfile
import time

from harness import (BIN, Failures, HealthLoad, InPidNamespace, Server, alive, descendants, get,
                     pid_namespace_refused, reap, wait_for)

F = Failures()
SERVING = re.compile(r"^m0: reload: generation (\d+) serving \(pid (\d+)\)", re.M)
REFUSED = re.compile(r"^m0: reload: generation \d+ is (still draining|still starting|not serving).*this SIG\w+ is "
                     r"refused$", re.M)
WITH = {"routes": [{"method": "GET", "pattern": "/which", "actor": "echo"}]}


def sha(path):
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def reload(s, top, sig, gen):
    """sig to the top pid until generation gen serves (a reload while the
    previous one still drains is refused with a line: sent again); its pid."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        refused = len(REFUSED.findall(s.stderr()))
        os.kill(top, sig)
        got = wait_for(lambda: next((int(m.group(2)) for m in SERVING.finditer(s.stderr()) if int(m.group(1)) == gen),
                                    None) or len(REFUSED.findall(s.stderr())) > refused, 20)
        if got is True:
            time.sleep(0.1)
            continue
        return got
    return None


def outside(pid, root):
    """The pid, as seen here, of root's descendant whose pid in its own
    namespace is pid (the same when root is not in another namespace)."""
    for p in descendants(root) | {root}:
        try:
            with open(f"/proc/{p}/status") as f:
                ns = next((line.split()[1:] for line in f if line.startswith("NSpid:")), [])
        except OSError:
            continue
        if ns and int(ns[-1]) == pid and (len(ns) > 1 or p == pid):
            return p
    return pid


def which(port, root):
    """/which's status and the sha256 of the binary of the process that answered /pid."""
    st, _ = get(port, "/which", timeout=10)
    _, pid = get(port, "/pid", timeout=10)
    return st, sha(f"/proc/{outside(int(pid), root)}/exe")


def write(path, obj):
    import json
    with open(path + ".new", "w") as f:
        json.dump(obj, f)
    os.rename(path + ".new", path)


def back_and_forth(mode, args, pid1):
    tmp = tempfile.mkdtemp(prefix="m0-rollback-")
    app, topo = os.path.join(tmp, "app"), os.path.join(tmp, "topo.json")
    shutil.copyfile(os.path.join(BIN, "host_check"), app)
    os.chmod(app, 0o755)
    write(topo, WITH)
    one = sha(app)
    cmd = [app, "--port", "0", "--topology", topo, "--reload-keep-ms", "60000", "--pid-file",
           os.path.join(tmp, "pid"), *args]
    s = InPidNamespace(*cmd) if pid1 else Server(cmd[0], *cmd[1:])
    left = set()
    try:
        s.start()
        top = s.init if pid1 else s.proc.pid
        F.check(top is not None, f"[{mode}] the top process is there")
        if top is None:
            return
        F.check(wait_for(lambda: which(s.port, s.proc.pid) == (200, one), 10),
                f"[{mode}] generation 1: /which 200 from the first binary ({which(s.port, s.proc.pid)})")
        load = HealthLoad(s.port)
        load.start()
        # A new binary (the same program, other bytes) and a file without /which.
        with open(app + ".new", "wb") as f:
            with open(os.path.join(BIN, "host_check"), "rb") as src:
                f.write(src.read() + b"\0m0 rollback test: the second binary\n")
        os.chmod(app + ".new", 0o755)
        os.rename(app + ".new", app)
        two = sha(app)
        write(topo, {})
        steps = [(signal.SIGUSR2, 2, (404, two), "kept for 60000 ms"),
                 (signal.SIGUSR1, 3, (200, one), "rolled back to generation 1: generation 3"),
                 (signal.SIGUSR1, 4, (404, two), "rolled back to generation 2: generation 4")]
        for sig, gen, want, line in steps:
            pid = reload(s, top, sig, gen)
            F.check(pid, f"[{mode}] {sig.name}: generation {gen} serves\n{s.stderr()[-2000:]}")
            if not pid:
                break  # what follows would only wait out its bounds
            F.check(wait_for(lambda: line in s.stderr(), 10), f"[{mode}] {sig.name}: the line '{line}'\n"
                                                               f"{s.stderr()[-2000:]}")
            # (the generation before answers until its drain began: a moment)
            got = wait_for(lambda: (lambda g: g == want and g)(which(s.port, s.proc.pid)), 10) or \
                which(s.port, s.proc.pid)
            F.check(got == want, f"[{mode}] {sig.name}: generation {gen} answers /which {want[0]} from the "
                                 f"{'first' if want[1] == one else 'second'} binary (got {got[0]}, "
                                 f"{'first' if got[1] == one else 'second' if got[1] == two else got[1]})")
        load.stop()
        F.check(load.ok > 0 and not load.failed,
                f"[{mode}] every request across the rollbacks answered 200: {load.ok} ok, failed {load.failed[:5]}")
        F.check(sha(app) == two and "/which" not in open(topo).read(), f"[{mode}] the files were left as they are")
        left = descendants(s.proc.pid)
        os.kill(top, signal.SIGTERM)
        rc = s.wait(timeout=20)
        F.check(rc == 0, f"[{mode}] SIGTERM: exit 0 (got {rc})\n{s.stderr()[-1500:]}")
        F.check(wait_for(lambda: not [p for p in left if alive(p)], 10), f"[{mode}] nothing is left after the stop")
        F.check(not os.path.exists(os.path.join(tmp, "pid")), f"[{mode}] the pid file is removed")
        print(f"[{mode}] SIGUSR2, SIGUSR1 twice: {load.ok} requests, 0 failed; exit {rc}", flush=True)
    finally:
        s.kill()
        reap(left | descendants(s.proc.pid) if s.proc else left)
        shutil.rmtree(tmp, ignore_errors=True)


def refused(s, text, timeout=10):
    """SIGUSR1 to the host until text is on its stderr (one sent while the
    host is not serving yet is refused with another line: sent again)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s.signal(signal.SIGUSR1)
        if wait_for(lambda: text in s.stderr(), 0.5):
            return True
    return False


def window():
    s = Server("host_check", "--port", "0", "--threads", "2", "--reload-keep-ms", "1500")
    try:
        s.start()
        F.check(refused(s, "m0: rollback: no earlier generation is kept; this SIGUSR1 is refused; generation 1 "
                           "serves on"), f"[window] SIGUSR1 before a reload: refused\n{s.stderr()[-1500:]}")
        F.check(reload(s, s.proc.pid, signal.SIGHUP, 2), f"[window] SIGHUP: generation 2 serves\n{s.stderr()[-1500:]}")
        dropped = "m0: rollback: generation 1's binary and configuration dropped after 1500 ms (--reload-keep-ms)"
        F.check(wait_for(lambda: dropped in s.stderr(), 20), f"[window] the line '{dropped}'\n{s.stderr()[-1500:]}")
        gone = "m0: rollback: generation 1 was dropped after 1500 ms (--reload-keep-ms); this SIGUSR1 is refused"
        F.check(refused(s, gone), f"[window] SIGUSR1 after it: '{gone}'\n{s.stderr()[-1500:]}")
        F.check(get(s.port, "/health")[0] == 200 and s.proc.poll() is None, "[window] the host serves on")
        F.check(s.stop(timeout=20) == 0, "[window] SIGTERM: exit 0")
    finally:
        s.kill()
    with Server("host_check", "--port", "0") as s:
        F.check(refused(s, "m0: rollback: nothing is kept (--reload-keep-ms is 0); this SIGUSR1 is refused"),
                f"[off] SIGUSR1 without the window: refused\n{s.stderr()[-1500:]}")
        F.check(get(s.port, "/health")[0] == 200 and s.proc.poll() is None, "[off] the host serves on")
        F.check(s.stop(timeout=20) == 0, "[off] SIGTERM: exit 0")
    print("[window] dropped after 1500 ms, SIGUSR1 refused before and after, and without the window", flush=True)


if __name__ == "__main__":
    why = pid_namespace_refused()
    if why:
        print(f"SKIP (PID 1): {why}")
    else:
        back_and_forth("pid1", [], True)
    back_and_forth("workers2", ["--workers", "2"], False)
    window()
    F.done()
