"""systemd's variables at their edges (docs/behaviour.md, systemd;
docs/reference.md, Variables the host sets or reserves, Exit codes).
test_systemd.py proves the ordinary case; this file what is around it.

Socket activation (LISTEN_PID, LISTEN_FDS, descriptor 3), each case a real
host_check started through /bin/sh so that LISTEN_PID can be its own pid:
- LISTEN_PID another process's: the variables are not for this host: it binds
  its own --port and serves there, and never accepts on descriptor 3 (a
  connection made to that listener is still waiting in its backlog when the
  host has exited, and this test accepts it).
- LISTEN_FDS=0: not activated, the host binds its own port.
- A listener on [::1] (when this machine has it) or on 127.0.0.2 as
  descriptor 3 (also under --workers 2): served there, and the listening line
  names that address and port (before, it named --host's 127.0.0.1).
- Refused, exit 78 and one `m0:` line naming what is wrong, nothing served:
  LISTEN_FDS=2 without --certfile (the second listener is the plain one
  beside HTTPS: test_plain_listener.py serves it; before, the second was
  silently ignored), LISTEN_FDS=3, LISTEN_FDS=abc, and descriptor 3 a regular file (was:
  a listening line with port -1, then exit 1 "loop.0 cannot listen"), a UDP
  socket (was: "listening" on the UDP port, exit 0, nothing ever served), a
  TCP socket that was never made to listen (was: served on a port the kernel
  picked), a listening unix socket (was: "listening" on port -1), not open at
  all (was: silently bound the flag's port); LISTEN_FDS=2 also under
  --workers 2.
Readiness (NOTIFY_SOCKET):
- an abstract socket ("@name") receives READY=1 and STOPPING=1;
- a SIGHUP: RELOADING=1, then READY=1 once the next generation serves and
  the old one drained, never MAINPID= (the pid stays: host/master.h), no
  STOPPING=1 for the old generation, STOPPING=1 at the SIGTERM to the top
  pid, which exits 0;
- one nobody listens on, a relative path, or one too long for a socket: the
  host serves all the same and exits 0 (readiness is never fatal).
- Under --workers 2 no worker inherits NOTIFY_SOCKET, LISTEN_PID, LISTEN_FDS
  or LISTEN_FDNAMES (read from /proc/<worker>/environ).
About 8 s.
"""
import os
import re
import signal
import socket
import subprocess
import tempfile
import time

import harness
from harness import BIN, Failures, Prefork, Server, children, wait_for
from rawhttp import request

F = Failures()
SH = 'export LISTEN_PID=$$; exec "$0" "$@"'


def get(port, family=socket.AF_INET, addr="127.0.0.1"):
    try:
        s = socket.socket(family)
        s.settimeout(5)
        s.connect((addr, port))
        s.sendall(request("GET", "/health", headers=[("Connection", "close")]))
        data = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
        s.close()
        return data.split(b"\r\n")[0].decode(errors="replace")
    except OSError as e:
        return f"no answer: {e}"


class Activated:
    """host_check started with LISTEN_FDS and `fds` as descriptors 3, 4, ...
    (None: descriptor 3 closed); LISTEN_PID its own pid unless `pid` is given."""

    def __init__(self, fds, listen_fds="1", pid=None, args=(), env=None):
        self.err = harness.log_file()
        e = dict(os.environ, LISTEN_FDS=listen_fds)
        e.pop("NOTIFY_SOCKET", None)
        e.update(env or {})
        srcs = [f.fileno() for f in fds if f is not None]
        # Descriptors 3, 4, ... are kept past exec (pass_fds); with None the
        # child keeps no descriptor 3 (subprocess closes what is not passed).
        keep = tuple(srcs) + tuple(range(3, 3 + len(srcs)))

        def child():
            high = [os.dup(f) for f in srcs]  # first out of the way of 3, 4, ...
            for i, f in enumerate(high):
                os.dup2(f, 3 + i)

        cmd = ["/bin/sh", "-c", f"export LISTEN_PID={pid}; exec \"$0\" \"$@\"" if pid else SH,
               os.path.join(BIN, "host_check"), "--port", "0", *args]
        self.proc = subprocess.Popen(cmd, env=e, stderr=self.err, pass_fds=keep, preexec_fn=child)

    def stderr(self):
        return harness.read_log(self.err)

    def port(self):
        m = wait_for(lambda: harness.LISTEN_RE.search(self.stderr()) or self.proc.poll() is not None, 10)
        m = harness.LISTEN_RE.search(self.stderr())
        return int(m.group(2)) if m else None

    def finish(self, timeout=15):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            return None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


def tcp_listener(family=socket.AF_INET, addr="127.0.0.1"):
    s = socket.socket(family)
    s.bind((addr, 0))
    s.listen(16)
    return s


def not_for_us():
    for label, kw in (("LISTEN_PID=1 (another process's)", {"pid": "1"}), ("LISTEN_FDS=0", {"listen_fds": "0"})):
        lsock = tcp_listener()
        a = Activated([lsock], **kw)
        try:
            port = a.port()
            F.check(port is not None and port != lsock.getsockname()[1],
                    f"{label}: the host binds a port of its own ({port}), not descriptor 3's")
            F.check(port is not None and get(port) == "HTTP/1.1 200 OK", f"{label}: and serves there")
            pending = socket.create_connection(lsock.getsockname(), timeout=5)
            rc = a.finish()
            F.check(rc == 0, f"{label}: exit 0 after SIGTERM (rc {rc}) {a.stderr()[-300:]}")
            lsock.settimeout(5)
            try:
                conn, _ = lsock.accept()
                conn.close()
                taken = False
            except OSError:
                taken = True
            F.check(not taken, f"{label}: descriptor 3 was never accepted on (its waiting connection is still there)")
            pending.close()
        finally:
            a.kill()
            lsock.close()


def other_listeners():
    """The listening line names the handed-over socket's own address and port
    (before: --host's, 127.0.0.1 whatever descriptor 3 was bound to)."""
    for family, addr, shown, args in ((socket.AF_INET6, "::1", "[::1]", []), (socket.AF_INET, "127.0.0.2", "127.0.0.2", []),
                                      (socket.AF_INET, "127.0.0.2", "127.0.0.2", ["--workers", "2"])):
        try:
            lsock = tcp_listener(family, addr)
        except OSError as e:
            print(f"SKIP: an activated listener on {addr}: this machine cannot bind it ({e})")
            continue
        a = Activated([lsock], args=args)
        try:
            port = a.port()
            want = f"listening on http://{shown}:{lsock.getsockname()[1]} "
            F.check(port == lsock.getsockname()[1] and want in a.stderr(),
                    f"a listener on {addr} as descriptor 3 {args}: the listening line says {want!r} "
                    f"({[l for l in a.stderr().splitlines() if 'listening' in l]})")
            line = get(lsock.getsockname()[1], family, addr)
            F.check(line == "HTTP/1.1 200 OK", f"... and it is served there ({line!r})")
            F.check(a.finish() == 0, "... exit 0")
        finally:
            a.kill()
            lsock.close()


def refused():
    d = tempfile.mkdtemp(prefix="m0-act-")
    regular = open(os.path.join(d, "file"), "w+b")
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    unbound = socket.socket()
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(os.path.join(d, "s"))
    unix.listen(1)
    l1, l2, l3 = tcp_listener(), tcp_listener(), tcp_listener()
    cases = [
        ("LISTEN_FDS=2", [l1, l2], {"listen_fds": "2"}, "the second is the plain one beside HTTPS, but there is no --certfile"),
        ("LISTEN_FDS=2 --workers 2", [l1, l2], {"listen_fds": "2", "args": ["--workers", "2"]},
         "the second is the plain one beside HTTPS, but there is no --certfile"),
        ("LISTEN_FDS=3", [l1, l2, l3], {"listen_fds": "3"}, "socket activation hands over 3 descriptors (LISTEN_FDS=3)"),
        ("LISTEN_FDS=abc", [l1], {"listen_fds": "abc"}, "LISTEN_FDS=abc is not a count of descriptors"),
        ("descriptor 3 a regular file", [regular], {}, "descriptor 3 is a regular file"),
        ("descriptor 3 a UDP socket", [udp], {}, "descriptor 3 is a datagram (UDP) socket"),
        ("descriptor 3 a TCP socket not listening", [unbound], {}, "descriptor 3 is a TCP socket that is not listening"),
        ("descriptor 3 a unix socket", [unix], {}, "descriptor 3 is a unix socket"),
        ("descriptor 3 not open", [None], {}, "descriptor 3 is not open"),
    ]
    try:
        for label, fds, kw, want in cases:
            a = Activated(fds, **kw)
            try:
                rc = a.proc.wait(15)
            except subprocess.TimeoutExpired:
                rc = a.finish()
            err = a.stderr()
            lines = [l for l in err.splitlines() if l.startswith("m0:")]
            F.check(rc == 78, f"{label}: exit 78 (got {rc}): {err.strip()[-300:]}")
            F.check(len(lines) == 1 and want in lines[0], f"{label}: one m0: line saying {want!r}: {lines}")
            F.check("listening on" not in err, f"{label}: nothing served")
            a.kill()
    finally:
        for s in (regular, udp, unbound, unix, l1, l2, l3):
            s.close()
        for n in os.listdir(d):
            os.unlink(os.path.join(d, n))
        os.rmdir(d)


def notify():
    name = f"m0-test-activation-{os.getpid()}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    sock.settimeout(10)
    try:
        with Server("host_check", "--port", "0", env={"NOTIFY_SOCKET": "@" + name}) as s:
            try:
                got = sock.recv(64)
            except OSError as e:
                got = repr(e)
            F.check(got == b"READY=1", f"NOTIFY_SOCKET=@{name} (abstract): READY=1 (got {got!r})")
            s.signal(signal.SIGTERM)
            try:
                got = sock.recv(64)
            except OSError as e:
                got = repr(e)
            F.check(got == b"STOPPING=1", f"... then STOPPING=1 (got {got!r})")
            F.check(s.wait(10) == 0, "... exit 0")
    finally:
        sock.close()
    d = tempfile.mkdtemp(prefix="m0-notify-")
    try:
        for label, path in (("nobody listens there", os.path.join(d, "nobody")), ("a relative path", "notify"),
                            ("a path too long for a socket", "/" + "n" * 200)):
            with Server("host_check", "--port", "0", env={"NOTIFY_SOCKET": path}) as s:
                F.check(get(s.port) == "HTTP/1.1 200 OK", f"NOTIFY_SOCKET {label}: the host serves all the same")
                F.check(s.stop() == 0, f"NOTIFY_SOCKET {label}: exit 0")
    finally:
        os.rmdir(d)


def notify_reload():
    """A reload under systemd: RELOADING=1, then READY=1 (said by the top
    pid, which stays the main pid: the master relays the next generation's
    word), no MAINPID=, no STOPPING=1 for the old generation (the service
    goes on), and STOPPING=1 at the SIGTERM to the top pid."""
    name = f"m0-test-reload-{os.getpid()}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    sock.settimeout(10)

    def recv():
        try:
            return sock.recv(128)
        except OSError as e:
            return repr(e).encode()
    new = None
    try:
        with Server("host_check", "--port", "0", env={"NOTIFY_SOCKET": "@" + name}) as s:
            F.check(recv() == b"READY=1", "reload under systemd: READY=1 at the start")
            s.signal(signal.SIGHUP)
            F.check(recv() == b"RELOADING=1", "reload under systemd: RELOADING=1 from the old generation")
            m = wait_for(lambda: re.search(r"generation 2 serving \(pid (\d+)\)", s.stderr()), 10)
            new = int(m.group(1)) if m else None
            got = recv()
            F.check(new is not None and got == b"READY=1",
                    f"reload under systemd: READY=1 once generation 2 (pid {new}) serves, no MAINPID= (got {got!r})")
            sock.settimeout(0.5)
            got = recv()
            F.check(b"timed out" in got, f"reload under systemd: the old one said no STOPPING=1 (got {got!r})")
            sock.settimeout(10)
            F.check(s.proc.poll() is None, "reload under systemd: the top pid stays")
            s.signal(signal.SIGTERM)
            F.check(recv() == b"STOPPING=1", "reload under systemd: STOPPING=1 at the SIGTERM to the top pid")
            F.check(s.wait(10) == 0, "reload under systemd: the top pid exits 0 with generation 2's drain")
            F.check(new is None or wait_for(lambda: not harness.alive(new), 10),
                    "reload under systemd: generation 2 is gone")
    finally:
        if new and harness.alive(new):
            os.kill(new, signal.SIGKILL)
        sock.close()


def workers_env():
    env = {"NOTIFY_SOCKET": "/nonexistent/notify", "LISTEN_PID": "1", "LISTEN_FDS": "1", "LISTEN_FDNAMES": "web"}
    with Prefork("host_check", "--port", "0", "--workers", "2", env=env) as s:
        kids = wait_for(lambda: len(children(s.proc.pid)) == 2 and children(s.proc.pid), 10) or set()
        found = {}
        for pid in kids:
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    names = [e.split(b"=", 1)[0].decode() for e in f.read().split(b"\0") if e]
            except OSError as e:
                names = [f"unreadable: {e}"]
            found[pid] = [n for n in names if n in env or n.startswith("unreadable")]
        F.check(len(kids) == 2 and all(v == [] for v in found.values()),
                f"--workers 2: no worker inherits {sorted(env)} ({found})")
        F.check(s.stop() == 0, "--workers 2: exit 0")


not_for_us()
other_listeners()
refused()
notify()
notify_reload()
workers_env()
F.done()
