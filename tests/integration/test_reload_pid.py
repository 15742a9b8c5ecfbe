"""One pid for the host's whole life, upgrade by path, a bounded hand-over
(issue 37; host/master.h, host/reload.h; docs/behaviour.md, Reload).

1. Container: `unshare --pid --fork --mount-proc BIN/host_check --port 0
   [mode]` in single, --threads 2 and --workers 2 (skipped with one line
   where namespaces cannot be made). Under light load (fresh connections,
   one after another, from a thread), SIGHUP, SIGUSR2, SIGHUP to the
   namespace's init (PID 1 inside): each time `generation N serving`, the
   init is the same process (the namespace lives: the unshare process is
   still there), it is `m0: host_check master` once it handed over, and no
   request failed; then SIGTERM: unshare passes on exit 0, nothing left.
   Before the reloads, a process started in the namespace (nsenter) whose
   parent exits at once is re-parented to PID 1 and reaped when it exits.
2. Upgrade by path (--workers 2, a copy of host_check at TMP/app,
   --pid-file, NOTIFY_SOCKET a datagram socket of this test): a new binary
   renamed over TMP/app, SIGHUP, then SIGUSR2: generation 3 runs TMP/app as
   it is now (its /proc/PID/exe is that file's inode, not "(deleted)"); a
   second rename and SIGUSR2: generation 4 too. The pid file holds the top
   pid throughout; the titles are `m0: host_check master`, `... supervisor
   gen 4`, `... worker 0 gen 4`, `... worker 1 gen 4` and comm is the binary's
   name ("app", not "exe"); every datagram to NOTIFY_SOCKET came from the top
   pid (SO_PASSCRED), READY=1 and RELOADING=1 among them, never MAINPID=;
   SIGTERM: exit 0, the pid file removed.
3. A next generation that never serves (a script renamed over TMP/app that
   ignores SIGTERM; --reload-timeout-ms 1000, --drain-timeout-ms 1000):
   SIGUSR2, and it is named with its pid (`has not served within`, then
   `sending it SIGKILL`, then `stopped ... generation 1 keeps serving`),
   gone; generation 1 answers on, and a SIGHUP then starts generation 2.
4. A stop while the predecessor still drains (--workers 2): after one
   SIGHUP (the master is there), a /slow?ms=2500 in flight on generation 2,
   a second SIGHUP, and SIGTERM to the top pid once generation 3 serves:
   generation 3 drains first and generation 2, its parent still, reaps it
   (the supervisor's waitpid(-1)) and tells the master (REAPED=): the
   master exits 0 within the drain's bound, pid file removed, nothing left
   (before, it never heard of generation 3's exit and polled for ever).
"""
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile

from harness import (BIN, Failures, HealthLoad, InPidNamespace, Server, alive, children, descendants, get,
                     pid_namespace_refused, reap, wait_for)

F = Failures()
SERVING = re.compile(r"^m0: reload: generation (\d+) serving \(pid (\d+)\)", re.M)
PAST = re.compile(r"^m0: master: the generation that served before \(pid \d+\) exited 0$", re.M)
STARTING = re.compile(r"^m0: reload: generation (\d+) starting \(pid (\d+), (.*)\)$", re.M)


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return ""


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def serving(s, gen, timeout=20):
    """The pid of generation `gen` once its serving line is in the log."""
    m = wait_for(lambda: next((m for m in SERVING.finditer(s.stderr()) if int(m.group(1)) == gen), None), timeout)
    return int(m.group(2)) if m else None


def drained(s, top, gen, timeout=20, pid1=False):
    """Generation gen's predecessor is gone (until then the next reload is
    refused: it still drains): generation 1 is the master (its title), a
    later one's exit was said by the master. As PID 1 the master is there
    from the start and generation 1 is its child: its exit is said too."""
    if gen == 2 and not pid1:
        return wait_for(lambda: cmdline(top) == "m0: host_check master", timeout)
    return wait_for(lambda: len(PAST.findall(s.stderr())) >= gen - (1 if pid1 else 2), timeout)


def reaps(mode, init):
    """PID 1 reaps what is re-parented to it, before any reload too: a
    process started in the namespace (nsenter) whose parent exits at once."""
    nsenter = shutil.which("nsenter")
    if not nsenter:
        print(f"[{mode}] SKIP (reaping): nsenter is not installed")
        return
    # (its stdio not this test's pipes, which run() would wait on until it exits)
    r = subprocess.run([nsenter, "-t", str(init), "-p", "-m", "sh", "-c",
                        "(sleep 2 </dev/null >/dev/null 2>&1 &); true"], capture_output=True, timeout=10)
    if r.returncode != 0:
        print(f"[{mode}] SKIP (reaping): nsenter could not enter the namespace: {r.stderr.decode().strip()}")
        return
    orphan = lambda: [p for p in children(init) if comm(p) == "sleep"]  # noqa: E731
    seen = wait_for(orphan, 5)
    F.check(seen, f"[{mode}] an orphan in the namespace is re-parented to PID 1 ({children(init)}; nsenter said "
                  f"{r.stdout!r} {r.stderr!r})")
    F.check(wait_for(lambda: not orphan(), 10), f"[{mode}] PID 1 reaps it once it exits (no zombie: {orphan()})")


def container(mode, args):
    s = InPidNamespace("host_check", "--port", "0", *args)
    left = set()
    try:
        init = s.start().init
        F.check(init is not None, f"[{mode}] the namespace has an init")
        if init is None:
            return
        reaps(mode, init)
        load = HealthLoad(s.port)
        load.start()
        wait_for(lambda: load.ok > 0, 5)
        gen = 1
        for sig in (signal.SIGHUP, signal.SIGUSR2, signal.SIGHUP):
            os.kill(init, sig)
            gen += 1
            pid = serving(s, gen)
            F.check(pid is not None, f"[{mode}] {sig.name}: generation {gen} serves\n{s.stderr()[-1500:]}")
            if pid is None:
                break  # what follows would only wait out its bounds
            F.check(drained(s, init, gen, pid1=True), f"[{mode}] {sig.name}: generation {gen - 1} drained and is gone (or "
                                           f"the master)\n{s.stderr()[-1500:]}")
            F.check(s.proc.poll() is None and alive(init) and init in children(s.proc.pid),
                    f"[{mode}] after {sig.name}: the namespace's init {init} is still there (unshare "
                    f"{s.proc.poll()})")
            F.check(wait_for(lambda: cmdline(init) == "m0: host_check master", 5),
                    f"[{mode}] after {sig.name}: PID 1 is the master ({cmdline(init)!r})")
        load.stop()
        F.check(load.ok > 0 and not load.failed,
                f"[{mode}] every request under the reloads answered 200: {load.ok} ok, failed {load.failed[:5]}")
        left = descendants(s.proc.pid)
        os.kill(init, signal.SIGTERM)
        rc = s.wait(timeout=15)
        F.check(rc == 0, f"[{mode}] SIGTERM to PID 1: unshare exits 0 (got {rc})\n{s.stderr()[-1500:]}")
        F.check(not [p for p in left if alive(p)], f"[{mode}] nothing is left after the stop")
        print(f"[{mode}] 3 reloads, {load.ok} requests, 0 failed; exit {rc}", flush=True)
    finally:
        s.kill()
        reap(left | descendants(s.proc.pid) if s.proc else left)


def namespaces():
    refused = pid_namespace_refused()
    if refused:
        print(f"SKIP (namespaces): {refused}")
        return
    for mode, args in (("single", []), ("threads2", ["--threads", "2"]), ("workers2", ["--workers", "2"])):
        container(mode, args)


def replace_binary(path, source):
    """A new file at path (a rename over it: the running one's inode stays,
    "(deleted)")."""
    tmp = path + ".new"
    shutil.copyfile(source, tmp)
    os.chmod(tmp, 0o755)
    os.rename(tmp, path)


def notices(sock):
    """Every datagram waiting on sock: [(sender pid, text)]."""
    out = []
    while True:
        try:
            data, anc, _, _ = sock.recvmsg(4096, socket.CMSG_SPACE(12), socket.MSG_DONTWAIT)
        except BlockingIOError:
            return out
        pid = None
        for level, kind, value in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                pid = struct.unpack("iII", value[:12])[0]
        out.append((pid, data.decode(errors="replace")))


def by_path(tmp):
    app, pidfile, nsock = os.path.join(tmp, "app"), os.path.join(tmp, "host.pid"), os.path.join(tmp, "notify")
    shutil.copyfile(os.path.join(BIN, "host_check"), app)
    os.chmod(app, 0o755)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    sock.bind(nsock)
    s = Server(app, "--port", "0", "--workers", "2", "--pid-file", pidfile, env={"NOTIFY_SOCKET": nsock})
    s.app = app  # BIN/app does not exist: Server runs os.path.join(BIN, app), which is app itself when absolute
    got = []
    try:
        s.start()
        top = s.proc.pid
        read_pid = lambda: open(pidfile).read().strip() if os.path.exists(pidfile) else None  # noqa: E731
        F.check(read_pid() == str(top), f"by path: the pid file holds the top pid {top} ({read_pid()!r})")
        replace_binary(app, os.path.join(BIN, "host_check"))
        os.kill(top, signal.SIGHUP)
        F.check(serving(s, 2) is not None, f"by path: SIGHUP after a rename: generation 2 serves\n{s.stderr()[-1500:]}")
        F.check(drained(s, top, 2), "by path: generation 1 drained and is the master")
        for gen in (3, 4):
            ino = os.stat(app).st_ino
            os.kill(top, signal.SIGUSR2)
            pid = serving(s, gen)
            F.check(pid is not None, f"by path: SIGUSR2: generation {gen} serves\n{s.stderr()[-2000:]}")
            if pid is None:
                return
            st = next((m for m in STARTING.finditer(s.stderr()) if int(m.group(1)) == gen), None)
            F.check(st and st.group(3) == app, f"by path: generation {gen} started from {app} ({st and st.group(0)!r})")
            exe = os.readlink(f"/proc/{pid}/exe") if alive(pid) else ""
            F.check(exe == app and os.stat(f"/proc/{pid}/exe").st_ino == ino,
                    f"by path: generation {gen} (pid {pid}) runs the file at {app} as it is now ({exe!r})")
            F.check(drained(s, top, gen), f"by path: generation {gen - 1} drained and exited 0")
            if gen == 3:
                replace_binary(app, os.path.join(BIN, "host_check"))
            F.check(read_pid() == str(top), f"by path: after generation {gen}, the pid file still holds {top}")
        workers = sorted(children(pid))
        titles = sorted([cmdline(top), cmdline(pid)] + [cmdline(w) for w in workers])
        want = sorted(["m0: host_check master", "m0: host_check supervisor gen 4", "m0: host_check worker 0 gen 4",
                       "m0: host_check worker 1 gen 4"])
        F.check(titles == want, f"by path: the titles {titles} are {want}")
        names = {comm(p) for p in [top, pid] + workers}
        F.check(names == {"app"}, f"by path: comm is the binary's name, not exe ({names})")
        got = notices(sock)
        F.check(got and all(p == top for p, _ in got), f"by path: every notice came from the top pid {top}: {got}")
        texts = "\n".join(t for _, t in got)
        F.check("READY=1" in texts and "RELOADING=1" in texts and "MAINPID=" not in texts,
                f"by path: READY=1 and RELOADING=1, never MAINPID= ({texts!r})")
        left = descendants(top)
        rc = s.stop(signal.SIGTERM, timeout=15)
        F.check(rc == 0, f"by path: SIGTERM to the top: exit 0 (got {rc})\n{s.stderr()[-1500:]}")
        F.check(not os.path.exists(pidfile), "by path: the pid file is removed at exit")
        F.check(wait_for(lambda: not [p for p in left if alive(p)], 5), "by path: nothing is left after the stop")
        print(f"by path: generations 2-4 on one pid {top}; {len(got)} notices", flush=True)
    finally:
        s.kill()
        reap(descendants(s.proc.pid) if s.proc else set())
        sock.close()


HANG = """#!/usr/bin/env python3
# A next generation that never serves, and will not stop for SIGTERM.
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
time.sleep(60)
"""


def hanging(tmp):
    app = os.path.join(tmp, "app")
    shutil.copyfile(os.path.join(BIN, "host_check"), app)
    os.chmod(app, 0o755)
    s = Server(app, "--port", "0", "--reload-timeout-ms", "1000", "--drain-timeout-ms", "1000")
    hang = None
    try:
        s.start()
        top = s.proc.pid
        with open(app + ".new", "w") as f:
            f.write(HANG)
        os.chmod(app + ".new", 0o755)
        os.rename(app + ".new", app)
        os.kill(top, signal.SIGUSR2)
        m = wait_for(lambda: re.search(r"^m0: reload: generation 2 \(pid (\d+)\) has not served within 1000 ms",
                                       s.stderr(), re.M), 20)
        F.check(m, f"hanging: the next generation is named with its pid once its bound passed\n{s.stderr()[-1500:]}")
        if not m:
            hang = STARTING.search(s.stderr())
            hang = int(hang.group(2)) if hang else None
            return
        hang = int(m.group(1))
        F.check(wait_for(lambda: re.search(rf"^m0: reload: generation 2 \(pid {hang}\) did not stop .*SIGKILL$",
                                           s.stderr(), re.M), 20),
                f"hanging: it ignored SIGTERM and is sent SIGKILL\n{s.stderr()[-1500:]}")
        F.check(wait_for(lambda: re.search(rf"^m0: reload: generation 2 \(pid {hang}\) stopped .*generation 1 keeps "
                                           rf"serving$", s.stderr(), re.M), 20),
                f"hanging: it is stopped and generation 1 serves on\n{s.stderr()[-1500:]}")
        F.check(wait_for(lambda: not alive(hang), 5), f"hanging: pid {hang} is gone")
        st, _ = get(s.port, "/health")
        F.check(st == 200 and s.proc.poll() is None, f"hanging: generation 1 answers ({st})")
        os.kill(top, signal.SIGHUP)  # /proc/self/exe: host_check again; not refused as "still starting"
        F.check(serving(s, 2) is not None, f"hanging: a SIGHUP then starts generation 2\n{s.stderr()[-1500:]}")
        F.check(drained(s, top, 2), "hanging: generation 1 drained and is the master")
        rc = s.stop(signal.SIGTERM, timeout=15)
        F.check(rc == 0, f"hanging: SIGTERM: exit 0 (got {rc})")
        print(f"hanging: generation 2 (pid {hang}) stopped; generation 1 served on", flush=True)
    finally:
        s.kill()
        reap((descendants(s.proc.pid) if s.proc else set()) | ({hang} if hang else set()))


def stop_in_overlap(tmp):
    pidfile = os.path.join(tmp, "overlap.pid")
    s = Server("host_check", "--port", "0", "--workers", "2", "--drain-timeout-ms", "4000", "--pid-file", pidfile)
    slow = None
    try:
        s.start()
        top = s.proc.pid
        os.kill(top, signal.SIGHUP)
        F.check(serving(s, 2) is not None and drained(s, top, 2), f"overlap: generation 2 serves\n{s.stderr()}")
        slow = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        slow.sendall(b"GET /slow?ms=2500 HTTP/1.1\r\nHost: t\r\n\r\n")  # keeps generation 2 draining
        os.kill(top, signal.SIGHUP)
        F.check(serving(s, 3) is not None, f"overlap: generation 3 serves\n{s.stderr()[-1500:]}")
        left = descendants(top)
        rc = s.stop(signal.SIGTERM, timeout=4 + 5 + 5)
        F.check(rc == 0, f"overlap: SIGTERM while generation 2 drains: exit 0 within the bound (got {rc})\n"
                f"{s.stderr()[-1500:]}")
        F.check(not os.path.exists(pidfile), "overlap: the pid file is removed")
        F.check(wait_for(lambda: not [p for p in left if alive(p)], 5), "overlap: nothing is left")
        slow.settimeout(5)
        try:
            answer = slow.recv(4096)
        except OSError:
            answer = b""
        F.check(answer.startswith(b"HTTP/1.1 200"), f"overlap: the request in flight is answered ({answer[:40]!r})")
        print(f"overlap: stopped while generation 2 drained: exit {rc}", flush=True)
    finally:
        if slow:
            slow.close()
        s.kill()
        reap(descendants(s.proc.pid) if s.proc else set())


namespaces()
with tempfile.TemporaryDirectory(prefix="m0-reload-overlap-") as d:
    stop_in_overlap(d)
with tempfile.TemporaryDirectory(prefix="m0-reload-pid-") as d:
    by_path(d)
with tempfile.TemporaryDirectory(prefix="m0-reload-hang-") as d:
    hanging(d)
F.done()
