"""Shared harness for integration tests: start a real m0 binary on an
ephemeral port, find the port in its log, stop it by pid, bound every wait.

    with Server("ramp", "--port", "0") as s:
        s.url("/x/now")  # http://127.0.0.1:PORT/x/now
        s.stop()          # SIGTERM, waits (bounded), returns the exit code

The helpers every test shares, defined here once: `Prefork` (a Server under
--workers that takes its workers down with it), `wait_for` (a bounded poll),
`children`, `alive`, `ours`, `reap` and `environ` (pids from /proc, so nothing is
signalled by name or after its pid was reused), `InPidNamespace`,
`pid_namespace_refused` and `nspid` (a host as PID 1 of a new PID
namespace, as in a container), `HealthLoad` (GET /health under a reload),
`free_port`, `free_ports`, `with_free_port` (a port a host is told, again if taken), `EventStream` (a raw client of a stream route)
and `port_map` (ports for a server told its port), `SPPeer` and
`sp_hello` (a push0 peer on an actor's mailbox), `private_dir` (a run
directory), `write_json` (a topology file), `run` and `m0pub` (a
binary to completion, bounded), `doctor_url` (where the doctor puts an
app actor), `Failures` (checks collected, exit 1 if any
failed), `sanitizer_report` (a sanitizer's report in a process's stderr).
"""
import argparse
import fcntl
import http.client
import json
import os
import re
import shutil
import signal
from signal import SIGTERM
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

_parser = argparse.ArgumentParser()
_parser.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin"))
_parser.add_argument("--out")
ARGS, _ = _parser.parse_known_args()
BIN = os.path.abspath(ARGS.bin)

LISTEN_RE = re.compile(r"listening on https?://(\S+):(\d+) ")


def log_file():
    """A temporary file for a server's output, opened O_APPEND: the server's
    writes always land at the end even while the test seeks this same open
    file to read it (without it, a write racing a seek(0) overwrote the start
    of the log)."""
    f = tempfile.TemporaryFile(mode="w+b")
    fcntl.fcntl(f.fileno(), fcntl.F_SETFL, fcntl.fcntl(f.fileno(), fcntl.F_GETFL) | os.O_APPEND)
    return f


def read_log(f):
    """The whole of a log file made by log_file(), as text. Read with pread,
    never seek(0) then read(): the server holds the same open file
    description, and each of its O_APPEND writes moves the shared offset to
    the end, so a write between the seek and the read made the read start at
    the end and return nothing (CI saw test_activation miss a listening line
    that was there, under --workers 2 where workers write as it starts)."""
    fd, out = f.fileno(), b""
    while True:
        chunk = os.pread(fd, 1 << 20, len(out))
        if not chunk:
            return out.decode(errors="replace")
        out += chunk


def get(port, path, headers=None, timeout=5.0):
    """One GET on a fresh connection to 127.0.0.1:port: (status, body) or raises."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path, headers=headers or {})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


class Server:
    def __init__(self, app, *args, env=None, start_timeout=10.0, expect_listen=True):
        self.app = app
        self.args = list(args)
        self.env = dict(os.environ)
        if env:
            self.env.update(env)
        self.start_timeout = start_timeout
        self.expect_listen = expect_listen
        self.proc = None
        self.port = None
        self.rc = None
        self._err = log_file()
        self._out = log_file()

    def __enter__(self):
        if self.proc is None:  # a server started by hand (under a changed rlimit, say) is not started twice
            self.start()
        return self

    def __exit__(self, *exc):
        self.kill()

    def start(self):
        self.proc = subprocess.Popen([os.path.join(BIN, self.app)] + self.args, stdout=self._out,
                                     stderr=self._err, env=self.env)
        if not self.expect_listen:
            return self
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            m = LISTEN_RE.search(self.stderr())
            if m:
                self.port = int(m.group(2))
                return self
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.app} exited {self.proc.returncode} before listening:\n{self.stderr()}")
            time.sleep(0.02)
        raise AssertionError(f"{self.app} did not listen within {self.start_timeout}s:\n{self.stderr()}")

    def url(self, path="/"):
        return f"http://127.0.0.1:{self.port}{path}"

    def stderr(self):
        return read_log(self._err)

    def stdout(self):
        return read_log(self._out)

    def signal(self, sig=SIGTERM):
        os.kill(self.proc.pid, sig)

    def wait(self, timeout=10.0):
        """Waits for the exit (bounded); returns the exit code."""
        try:
            self.rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.app} did not exit within {timeout}s:\n{self.stderr()}")
        return self.rc

    def stop(self, sig=SIGTERM, timeout=10.0):
        self.signal(sig)
        return self.wait(timeout)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)


class InPidNamespace(Server):
    """A Server run as PID 1 of a new PID namespace with its own /proc
    (`unshare --pid --fork --mount-proc APP ARGS`): proc is the unshare
    process, which waits for it and passes its exit code on; start() also
    finds the namespace's init as seen from here (init: the unshare
    process's child, None if none came within 5 s)."""

    def __init__(self, app, *args, **kw):
        super().__init__(shutil.which("unshare") or "unshare", *PID_NS, os.path.join(BIN, app), *args, **kw)
        self.init = None

    def start(self):
        super().start()
        self.init = wait_for(lambda: next(iter(children(self.proc.pid)), None), 5)
        return self


class Prefork(Server):
    """A Server for `--workers N` whose exit (kill(), the end of its `with`)
    also takes down its workers if the test left the supervisor running (a
    failed check): SIGSTOP the supervisor so it spawns nothing more, note its
    children, SIGKILL it, then SIGKILL those pids."""

    def kill(self):
        if self.proc and self.proc.poll() is None:
            sup = self.proc.pid
            try:
                os.kill(sup, signal.SIGSTOP)
            except OSError:
                pass
            kids = children(sup)
            super().kill()
            for p in kids:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass


def private_dir(prefix="m0-run-", where=None):
    """A new run directory (in `where`, else the system's temporary one):
    mode 0700, owned by us, as the host wants its run directory."""
    d = tempfile.mkdtemp(prefix=prefix, dir=where)
    os.chmod(d, 0o700)
    return d


def write_json(obj, where, indent=None):
    """obj as a new topo-*.json file in directory `where`; its path."""
    fd, path = tempfile.mkstemp(prefix="topo-", suffix=".json", dir=where)
    with os.fdopen(fd, "w") as f:
        json.dump(obj, f, indent=indent)
    return path


def output_dir(name):
    """The directory for what test `name` leaves to look at, created: --out,
    as tests/CMakeLists.txt gives it, else test-output/NAME beside --bin."""
    d = os.path.abspath(ARGS.out or os.path.join(BIN, "..", "test-output", name))
    os.makedirs(d, exist_ok=True)
    return d


def wait_for(cond, timeout, step=0.01):
    """Calls cond() every `step` seconds until it returns something true or
    `timeout` seconds have passed (every wait in a test is bounded); returns
    that value, else what cond() returns once more at the deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(step)
    return cond()


def socket_inodes(pid):
    """The inode numbers of pid's sockets (empty when it is gone)."""
    out = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                t = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if t.startswith("socket:["):
                out.add(t[8:-1])
    except OSError:
        pass
    return out


def listen_ports(pid):
    """The TCP ports pid holds listening sockets on (state 0A in /proc/net/tcp
    or tcp6): the kernel's view of its listeners, not the log's."""
    mine = socket_inodes(pid)
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            p = row.split()
            if len(p) > 9 and p[3] == "0A" and p[9] in mine:
                ports.append(int(p[1].rsplit(":", 1)[1], 16))
    return ports


def listens(pid, port):
    """True while pid holds a socket listening on TCP `port`."""
    return port in listen_ports(pid)


def free_ports(n):
    """n distinct free TCP ports on 127.0.0.1. Every socket is held until
    all are picked: one closed before the next bind could be handed out
    again (two actors given one port made a file refused, seen once in a
    Debian 13 chroot)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port():
    """A free TCP port on 127.0.0.1, for a server told which port to take."""
    return free_ports(1)[0]


def with_free_port(run, attempts=3):
    """run(port) with a port free now, and again with another (attempts at
    most) when the host said it could not listen at it: a port free now may
    be taken before the host listens (another program's connection got it as
    its own; two suites side by side do that). For a URL the host must be
    told, where port 0 cannot be."""
    for attempt in range(attempts):
        port = free_port()
        try:
            return run(port)
        except AssertionError as e:
            if "cannot listen at tcp://" not in str(e) or attempt == attempts - 1:
                raise
            print(f"port {port} was taken before the host listened; another", flush=True)


def port_map(names):
    """A distinct free port per name: {name: port}."""
    names = list(names)
    return dict(zip(names, free_ports(len(names))))


SP_PUSH0 = b"\x00SP\x00\x00\x50\x00\x00"  # nng's SP header of a push0 peer (an actor's mailbox is pull0)
SP_PULL0 = b"\x00SP\x00\x00\x51\x00\x00"


def sp_hello(sock):
    """Sends push0's SP header on sock; the (up to) 8 bytes the other end
    answers with, SP_PULL0 from an actor's mailbox."""
    sock.sendall(SP_PUSH0)
    got = b""
    while len(got) < 8:
        chunk = sock.recv(8 - len(got))
        if not chunk:
            break
        got += chunk
    return got


class SPPeer:
    """A pipeline0 push peer on an actor's mailbox, nng's SP framing by hand
    (each message exactly the bytes a test gives), at addr ("tcp", port) or
    ("ipc", path) (a unix socket: each message a 0x01 byte, then the 8-byte
    length). ok: the mailbox answered the SP greeting as pull0; peer: how
    the host's log names this peer."""

    def __init__(self, addr, timeout=10):
        self.kind, where = addr
        if self.kind == "tcp":
            self.s = socket.create_connection(("127.0.0.1", where), timeout=timeout)
            self.peer = f"tcp peer 127.0.0.1:{self.s.getsockname()[1]}"
        else:
            self.s = socket.socket(socket.AF_UNIX)
            self.s.settimeout(timeout)
            self.s.connect(where)
            self.peer = f"ipc peer pid {os.getpid()}"
        self.ok = sp_hello(self.s) == SP_PULL0

    def head(self, n):
        return (b"\x01" if self.kind == "ipc" else b"") + struct.pack(">Q", n)

    def send(self, body):
        self.s.sendall(self.head(len(body)) + body)

    def raw(self, data):
        self.s.sendall(data)

    def hung_up(self, timeout):
        """True once the host closes the connection (EOF or reset) within timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.s.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                if self.s.recv(1) == b"":
                    return True
            except (socket.timeout, TimeoutError):
                return False
            except OSError:
                return True
        return False

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


def metric(port, name, timeout=5.0):
    """The sum of every sample of `name` on http://127.0.0.1:PORT/metrics
    (the server runs with --metrics-path /metrics), None if it has none."""
    import urllib.request
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout).read().decode()
    vals = re.findall(rf"^{re.escape(name)}(?:\{{[^}}]*\}})? (\d+)$", text, re.M)
    return sum(int(v) for v in vals) if vals else None


def alive(pid):
    """True if pid runs: it exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def environ(pid):
    """pid's environment as it was started, {name: value} in bytes ({} when
    it is gone): /proc/PID/environ."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return dict(x.split(b"=", 1) for x in f.read().split(b"\0") if b"=" in x)
    except OSError:
        return {}


def ours(pid, app):
    """pid is alive (not a zombie) and still runs the binary BIN/app: never
    signal a pid that exited and was reused by someone else."""
    return alive(pid) and os.path.realpath(f"/proc/{pid}/exe") == os.path.realpath(os.path.join(BIN, app))


def reap(pids):
    """Kills (by pid: SIGCONT, then SIGKILL) each of `pids` still alive: what
    a failed run must not leave behind (the workers a test saw)."""
    for p in pids:
        if alive(p):
            try:
                os.kill(p, signal.SIGCONT)
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass


def actor_pids(host, seen=None):
    """{actor: pid} of host's live spawned instances (their M0__ACTOR), each
    also added to the set `seen` when one is given (to reap them at the end)."""
    out = {}
    for p in children(host):
        a = environ(p).get(b"M0__ACTOR")
        if a and alive(p):
            out[a.decode()] = p
    if seen is not None:
        seen.update(out.values())
    return out


def children(pid):
    """The child pids of pid (every thread's children), an empty set if it is
    gone: under --workers, the supervisor's workers."""
    out = set()
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{t}/children") as f:
                    out.update(int(x) for x in f.read().split())
            except OSError:
                pass
    except OSError:
        pass
    return out


def descendants(pid):
    """Every pid below pid (children, theirs, ...), as far as /proc shows."""
    out, todo = set(), [pid]
    while todo:
        for c in children(todo.pop()):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


PID_NS = ["--pid", "--fork", "--mount-proc"]


def pid_namespace_refused():
    """Why `unshare --pid --fork --mount-proc` cannot run here (not installed,
    could not run, not permitted), or None when it can: a test that needs a
    PID namespace says SKIP with this reason."""
    unshare = shutil.which("unshare")
    if not unshare:
        return "unshare is not installed"
    try:
        probe = subprocess.run([unshare, *PID_NS, "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unshare could not run: {e}"
    if probe.returncode != 0:
        return (f"unshare {' '.join(PID_NS)} is not permitted here (exit {probe.returncode}): "
                f"{probe.stderr.decode(errors='replace').strip()}")
    return None


def nspid(pid):
    """pid in every namespace, outermost first (the NSpid line of its
    status); [] once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return [int(x) for x in line.split()[1:]]
    except OSError:
        pass
    return []


class HealthLoad(threading.Thread):
    """GET /health on a fresh connection, one after another, until stopped:
    how many answered 200 (ok), and every other status or error (failed)."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.ok, self.failed, self.halt = port, 0, [], threading.Event()

    def run(self):
        while not self.halt.is_set():
            try:
                st, _ = get(self.port, "/health", timeout=10)
                if st == 200:
                    self.ok += 1
                else:
                    self.failed.append(st)
            except Exception as e:  # noqa: BLE001 - every failure is counted
                self.failed.append(repr(e))
            time.sleep(0.005)

    def stop(self):
        self.halt.set()
        self.join(15)


def run(app, *args, env=None, timeout=10.0):
    """Runs a binary to completion (bounded): (exit code, stdout, stderr)."""
    e = dict(os.environ)
    if env:
        e.update(env)
    p = subprocess.run([os.path.join(BIN, app)] + list(args), capture_output=True, env=e, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def doctor_url(path, name, rd, app="host_check"):
    """Where `APP --doctor --topology PATH --run-dir RD` says app actor
    `name` listens (<run-dir> filled in with rd): (url or None, exit code,
    stdout, stderr)."""
    rc, out, err = run(app, "--doctor", "--topology", path, "--run-dir", rd)
    try:
        url = next(a["url"] for a in json.loads(out.strip().splitlines()[-1])["topology"]["app_actors"]
                   if a["name"] == name)
    except (ValueError, IndexError, KeyError, StopIteration):
        return None, rc, out, err
    return url.replace("<run-dir>", rd), rc, out, err


def m0pub(*args, env=None, stdin=None, timeout=10.0):
    """Runs BIN/m0pub to completion (bounded) without the M0_RUN_DIR this
    process may have inherited (the test names the host: --run-dir, or
    M0_RUN_DIR in `env`); `stdin` is bytes or None: (exit code, stdout, stderr)."""
    e = dict(os.environ)
    e.pop("M0_RUN_DIR", None)
    if env:
        e.update(env)
    p = subprocess.run([os.path.join(BIN, "m0pub")] + list(args), input=stdin, capture_output=True, env=e,
                       timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


SANITIZER_RE = re.compile(r"ERROR: (?:Address|Leak)Sanitizer|WARNING: ThreadSanitizer|runtime error:")


def sanitizer_report(text):
    """The first sanitizer report in a process's stderr, with some lines
    before it, or None."""
    m = SANITIZER_RE.search(text)
    return text[max(0, m.start() - 300):m.start() + 2500] if m else None


class Failures:
    """Collects failed checks so one run reports them all; exits 1 if any.
    `replay` (say, rawhttp's "M0_TEST_SEED=S"), when set, ends every FAIL
    line and the summary, so a failure of a seeded run says how to redo it."""

    def __init__(self):
        self.failed = []
        self.passed = 0
        self.replay = None

    def check(self, cond, what):
        if cond:
            self.passed += 1
        else:
            self.failed.append(what)
            print(f"FAIL: {what}" + (f" [replay: {self.replay}]" if self.replay else ""), flush=True)

    def done(self):
        print(f"{self.passed} checks passed, {len(self.failed)} failed"
              + (f" [replay: {self.replay}]" if self.failed and self.replay else ""))
        sys.exit(1 if self.failed else 0)


def run_parts(F, parts, programs=(), tmp=None):
    """Runs each (name, callable) of parts in turn, timing it: one that
    raises is a failed check, and does not hide the others' results. Then
    kills what is left of programs (Popen) and removes tmp. F.done() ends
    the run."""
    try:
        for name, part in parts:
            t0 = time.monotonic()
            try:
                part()
            except Exception as x:
                import traceback
                traceback.print_exc()
                F.check(False, f"{name} raised {type(x).__name__}: {x}")
            print(f"{name}: {time.monotonic() - t0:.1f}s", flush=True)
    finally:
        for p in programs:
            if p.poll() is None:
                p.kill()
                p.wait(5)
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    F.done()


def as_json(b):
    """b parsed as a JSON object, or None (not JSON, or not an object)."""
    try:
        j = json.loads(b)
        return j if isinstance(j, dict) else None
    except ValueError:
        return None


class EventStream:
    """GET path (a stream route: /events) on a raw socket to 127.0.0.1:port,
    its head waited for (head: True once it came): what comes is kept in
    buf, read by until(). headers: (name, value) pairs sent with it."""

    def __init__(self, port, path="/events", timeout=10, headers=()):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers)
        self.s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n{extra}\r\n".encode())
        self.buf = b""
        self.head = self.until(lambda: b"\r\n\r\n" in self.buf, timeout)

    def until(self, cond, timeout):
        """Reads until cond() is true (True) or timeout seconds passed, the
        stream ended or broke (False)."""
        deadline = time.monotonic() + timeout
        while not cond():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.s.settimeout(left)
            try:
                b = self.s.recv(65536)
            except OSError:
                return False
            if not b:
                return False
            self.buf += b
        return True

    def close(self):
        self.s.close()
