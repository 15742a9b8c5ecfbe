"""Reload (SIGHUP) and binary upgrade (SIGUSR2) without losing a request
(issue 22), on host_check, in three modes: single, --threads 2, --workers 2.

Each mode starts host_check from a PRIVATE copy of the binary (so the test can
rename files over its path), with `--topology FILE` (the doctor's own topology
for that mode), `--metrics-path /metrics` and `--drain-timeout-ms 2000`. This
process is a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so whatever is
left at the end is found (and killed) by pid. Generation 1 does not exit: it
goes on as the master (host/master.h), the nearer subreaper, which reaps
every later generation and says each one's exit (`m0: master: the generation
that served before (pid P) exited N`): that line is its exit code here. The log is read with pread (every generation
appends to the same file description, whose offset each write moves).

Under continuous load for the whole run of reloads:
  - 2 threads on keep-alive connections, one request at a time (/health,
    /instance, /pid), one of them through http.client;
  - 1 thread on keep-alive connections pipelining 4 requests at a time;
  - 2 threads opening a new connection for every request;
  - 3 /events streams that reconnect at once after `m0.closing` + EOF, with
    Last-Event-ID (the last id they saw);
the test sends, ROUNDS times (2; M0_TEST_RELOAD_ROUNDS), 20 SIGHUPs and 5
SIGUSR2s (every fifth signal a SIGUSR2; M0_TEST_RELOAD_HUPS /
M0_TEST_RELOAD_USR2S change the counts, M0_TEST_RELOAD_MODES the modes),
waiting (bounded) for each one's lines before the next:
`m0: reload: generation N starting (pid P, PATH)`, P's banner ending
`pid P, generation N)` on the same port, `m0: reload: generation N serving
(pid P); generation N-1 draining`; then the old process (and, under
--workers, its workers) is gone within the drain bound and exited 0 (the
master's line; generation 1: its title is `m0: host_check master` within
the bound and no `drained with exit` line), the new one still runs, and (the old one gone, so no one else can
answer) /metrics says m0_generation N, m0_reloads_total = the successful
reloads so far and m0_last_reload_timestamp_seconds this reload's time
(within 2 s); /pid is P (single, threads) or a child of P (workers).
SIGUSR2's PATH is the private binary's path. After each reload every stream
has seen its connection to the old generation end and a beat on a new one
(waited for, bounded: the client may read the close late on a loaded
machine), so before each signal every stream is connected to the current
generation.
The first SIGUSR2 of each round has a GET /deferred?ms=1500 in flight on the
old generation (read by it: a /health in the same write was answered): it is
answered whole after its 1500 ms, and a SIGHUP to the new generation while the
old one drains it is refused (`generation N-1 is still draining (pid P); this
SIGHUP is refused`, host/reload.h's "one reload at a time").

Proves, over the whole load:
  - zero failed requests: no connect refused or failed, no reset/EOF after a
    byte of a response (truncated), no non-200 or wrong body, no answer in
    10 s. The one allowance is RFC 9112's (9.3.1, and 9.3.2 for a
    pipeline): a request that was NOT the first on its connection and got
    EOF/reset before any byte of its answer (or could not be sent) is retried
    once on a new connection; a retry that fails is a failure; the first
    request of a fresh connection that fails is a failure. Retries are
    counted and printed;
  - the load really ran across each reload (answers counted);
  - stream ids never go backwards (and never repeat) across a stream's
    reconnects; every stream connection ended with exactly one
    `event: m0.closing` frame carrying `retry:`, then EOF with nothing after
    it; every stream was closed at least once per successful reload; a
    reconnect is never refused, and is answered 200 text/event-stream;
  - a bad configuration on SIGHUP (the topology file rewritten: invalid JSON
    in single, an unknown key in the others): exactly one new log line, a
    `m0: reload refused: ... generation G keeps serving`; no new process (the
    top's children unchanged), /pid and m0_generation unchanged; the file
    restored, the next SIGHUP succeeds;
  - a binary whose make fails (a script renamed over the binary's path that
    execs the real copy with M0_HOSTCHECK_MAKE_FAILS=1) on SIGUSR2:
    `m0: reload: generation N (pid P) exited 78 before serving; generation G
    keeps serving`, P gone, /pid and m0_generation unchanged, and, the good
    binary renamed back, the next SIGUSR2 succeeds;
  - a reload in progress (a script whose producer make waits on a gate file
    that never appears, M0_HOSTCHECK_PRODUCER_FAILS=late +
    M0_HOSTCHECK_FAIL_GATE, so the new generation starts and never serves): a
    SIGHUP and a SIGUSR2 are each refused with `generation N is still
    starting (pid P); this SIGHUP (SIGUSR2) is refused`, and no third
    generation starts;
  - SIGTERM to the top pid (the master) in the middle of that reload (the
    load stopped, the streams told not to reconnect): the serving generation
    and the top pid exit 0 within the drain bound + 1.5 s, the new
    generation P is gone by then too and was asked to
    stop (`m0: stopped while starting`), every stream got its m0.closing, and
    nothing this test started is left running.
Counts (answers, retries, stream connections) and signal-to-serving times per
mode are printed. About 35 s on an idle 2-vCPU machine. By default a run in
which any request needed the RFC's retry fails too (the host's hand-over keeps
an idle keep-alive connection for one more request and answers what was
pipelined, so none should); M0_TEST_RELOAD_STRICT=0 allows the retries.
"""
import ctypes
import http.client
import json
import os
import re
import shutil
import signal
import socket
import tempfile
import threading
import time
import traceback

import harness
from harness import Failures, Server, alive, children, descendants, wait_for
from rawhttp import Closed, Conn, request

F = Failures()
HUPS = max(1, int(os.environ.get("M0_TEST_RELOAD_HUPS", "20")))
USR2S = max(1, int(os.environ.get("M0_TEST_RELOAD_USR2S", "5")))
ROUNDS = max(1, int(os.environ.get("M0_TEST_RELOAD_ROUNDS", "2")))  # the HUPS + USR2S sequence, this many times
STRICT = os.environ.get("M0_TEST_RELOAD_STRICT", "1") == "1"  # a retry is a failure too (see the end of run_mode)
HELD_MS = 1500  # the deferred answer in flight across one reload per round
DRAIN_MS = 2000
MODES = [("single", []), ("threads2", ["--threads", "2"]), ("workers2", ["--workers", "2"])]
if os.environ.get("M0_TEST_RELOAD_MODES"):  # e.g. "single,workers2"
    MODES = [m for m in MODES if m[0] in os.environ["M0_TEST_RELOAD_MODES"].split(",")]
SIGNAL_BOUND = 20.0  # signal -> the new generation serves
EXIT_BOUND = DRAIN_MS / 1000 + 3.0  # serving -> the old one is gone

# Every descendant is reparented to this process when its parent exits.
PR_SET_CHILD_SUBREAPER = 36
SUBREAPER = ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0

T0 = time.monotonic()  # times in the messages are seconds from here
EVENTS = []  # (time from T0, what): each signal and each serving line seen, for the messages
TMP = tempfile.mkdtemp(prefix="m0-reload-")
REAL = os.path.join(TMP, "real", "host_check")  # never renamed over: what the scripts exec
BINDIR = os.path.join(TMP, "bin")
BINPATH = os.path.join(BINDIR, "host_check")  # the path the host starts from, renamed over
GATE = os.path.join(TMP, "gate")
os.makedirs(os.path.dirname(REAL))
os.makedirs(BINDIR)
shutil.copy2(os.path.join(harness.BIN, "host_check"), REAL)


def put_binary(kind):
    """Renames over BINPATH (never writes it in place: ETXTBSY): the real
    binary ("good"), a script whose make fails ("fails"), or one whose
    producer make waits on GATE and then fails ("slow")."""
    tmp = os.path.join(BINDIR, f".{kind}")
    if kind == "good":
        shutil.copy2(REAL, tmp)
    else:
        env = {"fails": "M0_HOSTCHECK_MAKE_FAILS=1",
               "slow": f"M0_HOSTCHECK_PRODUCER_FAILS=late M0_HOSTCHECK_FAIL_GATE={GATE}"}[kind]
        with open(tmp, "w") as f:
            f.write(f'#!/bin/sh\n{env} exec {REAL} "$@"\n')
        os.chmod(tmp, 0o755)
    os.rename(tmp, BINPATH)


# ---------------------------------------------------------------- log lines
STARTING = re.compile(r"^m0: reload: generation (\d+) starting \(pid (\d+), (.*)\)$", re.M)
SERVING = re.compile(r"^m0: reload: generation (\d+) serving \(pid (\d+)\); generation (\d+) draining$", re.M)
REFUSED = re.compile(r"^m0: reload refused: .*generation (\d+) keeps serving$", re.M)
EXITED = re.compile(r"^m0: reload: generation (\d+) \(pid (\d+)\) (?:exited (\d+)|died of signal (\d+)) before serving; "
                    r"generation (\d+) keeps serving$", re.M)
BUSY = re.compile(r"^m0: reload: generation (\d+) is still starting \(pid (\d+)\); this (SIGHUP|SIGUSR2) is refused$",
                  re.M)
BANNER = re.compile(r"listening on http://127\.0\.0\.1:(\d+) \(.*pid (\d+), generation (\d+)\)$", re.M)


# ---------------------------------------------------------------- processes


MASTER_SAID = re.compile(r"^m0: master: the generation that served before \(pid THIS\) exited (\d+)$", re.M)


def master_title(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")[0].decode(errors="replace") == "m0: host_check master"
    except OSError:
        return False


def live_descendants():
    return {p for p in descendants(os.getpid()) if alive(p)}


def reap(pid):
    """waitpid(pid, WNOHANG) for a process this test became the parent of
    (subreaper): its exit code, None if it has not exited, "not ours" if it
    is not a child of this process."""
    try:
        got, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return "not ours"
    return os.waitstatus_to_exitcode(status) if got else None


def kill_all_left():
    """SIGKILL (by pid) every live descendant: this test starts nothing but
    the hosts (and the doctor, run to completion before)."""
    for p in live_descendants():
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


def note(what):
    EVENTS.append((round(time.monotonic() - T0, 3), what))


def send(pid, sig):
    note(f"{signal.Signals(sig).name} to {pid}")
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        F.check(False, f"{signal.Signals(sig).name} to pid {pid}: there is no such process")


def near(t0, t1):
    """The signals and lines noted from 150 ms before t0 to 150 ms after t1."""
    return [e for e in EVENTS if t0 - 0.15 <= e[0] <= t1 + 0.15]


def describe():
    """Every descendant of this test: pid, parent, state, what it waits in
    (wchan), its binary and its threads' states: printed when a wait fails."""
    out = []
    for p in sorted(descendants(os.getpid())):
        try:
            with open(f"/proc/{p}/stat") as f:
                st = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{p}/wchan") as f:
                wchan = f.read()
            exe = os.readlink(f"/proc/{p}/exe") if st[0] != "Z" else "-"
            tasks = []
            for t in sorted(os.listdir(f"/proc/{p}/task"), key=int):
                try:
                    with open(f"/proc/{p}/task/{t}/comm") as f:
                        comm = f.read().strip()
                    with open(f"/proc/{p}/task/{t}/wchan") as f:
                        tasks.append(f"{comm}:{f.read()}")
                except OSError:
                    pass
            out.append(f"    pid {p} ppid {st[1]} state {st[0]} wchan {wchan} exe {exe}\n      threads {tasks}")
        except OSError as e:
            out.append(f"    pid {p}: {e}")
    return "\n".join(out) or "    (none)"


def ppid(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


# ---------------------------------------------------------------- HTTP
def get(port, path, timeout=5.0):
    """GET on a fresh connection: (status, body) or (None, error)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path, headers={"Connection": "close"})
        r = c.getresponse()
        return r.status, r.read()
    except (OSError, http.client.HTTPException) as e:
        return None, repr(e).encode()
    finally:
        c.close()


def scrape(port):
    """/metrics on a fresh connection: {name: [values]}, or None."""
    st, body = get(port, "/metrics")
    if st != 200:
        return None
    out = {}
    for line in body.decode(errors="replace").splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{[^}]*\})? (\S+)", line)
        if m:
            try:
                out.setdefault(m.group(1), []).append(float(m.group(2)))
            except ValueError:
                pass
    return out


def body_ok(path, body):
    if path == "/health":
        return body == b'{"status":"ok"}'
    if path == "/pid":
        return body.strip().isdigit()
    try:
        j = json.loads(body)
        return isinstance(j, dict) and {"worker", "thread", "pid", "hits"} <= set(j)
    except ValueError:
        return False


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.answered = 0
        self.retries = []  # (client, path, why)
        self.bad = []
        self.nbad = 0

    def ok(self):
        with self.lock:
            self.answered += 1

    def retry(self, who, path, why):
        with self.lock:
            self.retries.append((who, path, why))

    def fail(self, what):
        t = round(time.monotonic() - T0, 3)
        with self.lock:
            self.nbad += 1
            if len(self.bad) < 30:
                self.bad.append((t, what))


class NoByte(Exception):
    """The connection ended (EOF, reset, or the send failed) before any byte
    of this request's answer."""


class Load:
    """The client threads. Each request is either answered whole (200, its
    Content-Length, the route's body), or (only when it was not the first
    request of its connection, and no byte of its answer came) retried once
    on a new connection; anything else is a failure on the tally."""

    def __init__(self, port, tally):
        self.port = port
        self.t = tally
        self.halt = threading.Event()
        self.threads = []

    def start(self):
        plan = [
            ("keepalive", self.keepalive, ("/health", "/instance", "/pid")),
            ("httpclient", self.httpclient, ("/instance", "/health")),
            ("pipelined", self.pipelined, ("/health", "/instance", "/pid", "/health")),
            ("fresh-a", self.fresh, ("/health", "/instance")),
            ("fresh-b", self.fresh, ("/pid", "/health")),
        ]
        for name, fn, paths in plan:
            th = threading.Thread(target=fn, args=(name, paths), daemon=True, name=name)
            th.start()
            self.threads.append(th)

    def stop(self):
        self.halt.set()
        for th in self.threads:
            th.join(timeout=15)
        return [th.name for th in self.threads if th.is_alive()]

    def pace(self):
        self.halt.wait(0.002)  # pacing only (a few hundred requests/s per thread), not a wait for a condition

    def connect(self, who):
        try:
            return Conn(self.port, timeout=10)
        except OSError as e:
            self.t.fail(f"{who}: connect failed: {type(e).__name__}: {e}")
            return None

    def read_one(self, conn, path):
        """One answer on conn: True if the connection may be used again.
        NoByte if it ended before any byte; raises nothing else (failures go
        on the tally, then False)."""
        try:
            st, _, h, body, line = conn.read_response(timeout=10)
        except Closed:
            if conn.buf:
                self.t.fail(f"{path}: truncated: closed after {len(conn.buf)} bytes of the answer {conn.buf[:100]!r}")
                return False
            raise NoByte("EOF/reset before a byte")
        except (TimeoutError, socket.timeout):
            self.t.fail(f"{path}: no whole answer within 10 s ({len(conn.buf)} bytes)")
            return False
        except (ValueError, IndexError, OSError) as e:
            self.t.fail(f"{path}: malformed answer ({type(e).__name__}: {e}) {conn.buf[:100]!r}")
            return False
        if not (line.startswith("HTTP/1.1 200") and h.get("content-length") == str(len(body)) and body_ok(path, body)):
            self.t.fail(f"{path}: not a whole 200: {line!r} cl={h.get('content-length')} body={body[:80]!r}")
            return False
        self.t.ok()
        return h.get("connection", "").lower() != "close"

    def once_fresh(self, who, path, retry_of=None):
        """One request alone on a new connection (the first on it: it must
        succeed)."""
        conn = self.connect(who)
        if conn is None:
            return
        try:
            try:
                conn.send(request("GET", path))
            except OSError as e:
                raise NoByte(f"send failed: {e}")
            self.read_one(conn, path)
        except NoByte as e:
            what = f" (the retry of a request that got {retry_of})" if retry_of else ""
            self.t.fail(f"{who}: {path}: first request on a new connection got no answer: {e}{what}")
        finally:
            conn.close()

    def retry(self, who, path, why):
        self.t.retry(who, path, why)
        self.once_fresh(who, path, retry_of=why)

    def fresh(self, who, paths):
        i = 0
        while not self.halt.is_set():
            self.once_fresh(who, paths[i % len(paths)])
            i += 1
            self.pace()

    def keepalive(self, who, paths):
        i = 0
        while not self.halt.is_set():
            conn = self.connect(who)
            if conn is None:
                self.pace()
                continue
            used = 0
            try:
                while not self.halt.is_set():
                    path = paths[i % len(paths)]
                    i += 1
                    try:
                        try:
                            conn.send(request("GET", path))
                        except OSError as e:
                            raise NoByte(f"send failed: {e}")
                        again = self.read_one(conn, path)
                    except NoByte as e:
                        if used == 0:
                            self.t.fail(f"{who}: {path}: first request on a new connection got no answer: {e}")
                        else:
                            self.retry(who, path, str(e))
                        break
                    used += 1
                    if not again:
                        break
                    self.pace()
            finally:
                conn.close()

    def pipelined(self, who, paths):
        """Keep-alive connections carrying len(paths) pipelined requests at a
        time: answers in order; once one is missing, the rest of that batch
        never had a byte (retried once each, unless it was the connection's
        very first request)."""
        while not self.halt.is_set():
            conn = self.connect(who)
            if conn is None:
                self.pace()
                continue
            used, usable = 0, True
            try:
                while usable and not self.halt.is_set():
                    try:
                        conn.send(b"".join(request("GET", p) for p in paths))
                        why = None
                    except OSError as e:
                        why = f"send failed: {e}"
                    for k, path in enumerate(paths):
                        if why is None:
                            try:
                                usable = self.read_one(conn, path)
                                if not usable:
                                    why = "an earlier answer of the pipeline closed it"
                                continue
                            except NoByte as e:
                                why = str(e)
                        usable = False
                        if used + k == 0:
                            self.t.fail(f"{who}: {path}: first request on a new connection got no answer: {why}")
                        else:
                            self.retry(who, path, f"pipelined #{k + 1}: {why}")
                    used += len(paths)
                    self.pace()
            finally:
                conn.close()

    def httpclient(self, who, paths):
        """Keep-alive through http.client: RemoteDisconnected is an EOF
        before the status line's first byte."""
        i = 0
        while not self.halt.is_set():
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
            used = 0
            try:
                while not self.halt.is_set():
                    path = paths[i % len(paths)]
                    i += 1
                    try:
                        c.request("GET", path)
                        r = c.getresponse()
                        body = r.read()
                    except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as e:
                        if used == 0:
                            self.t.fail(f"{who}: {path}: first request on a new connection got no answer: {e!r}")
                        else:
                            self.retry(who, path, repr(e))
                        break
                    except (OSError, http.client.HTTPException) as e:
                        self.t.fail(f"{who}: {path}: {e!r}")
                        break
                    used += 1
                    if not (r.status == 200 and body_ok(path, body)):
                        self.t.fail(f"{who}: {path}: {r.status} {body[:80]!r}")
                        break
                    self.t.ok()
                    if r.will_close:
                        break
                    self.pace()
            finally:
                c.close()


# ---------------------------------------------------------------- streams
class Reconnecting:
    """An /events client that reconnects at once (with Last-Event-ID) after
    each close, until halted. Per connection: (ids, closing frames, anything
    after the closing frame, how it ended)."""

    def __init__(self, port, n):
        self.port = port
        self.n = n
        self.halt = threading.Event()  # no more reconnects
        self.lock = threading.RLock()  # frame() says a problem while it holds it
        self.ids = []  # every beat id seen, in order, over every connection
        self.conns = []  # finished: dicts
        self.cur = None  # the open connection's dict
        self.problems = []
        self.thread = threading.Thread(target=self.run, daemon=True, name=f"stream{n}")
        self.thread.start()

    def problem(self, what):
        t = round(time.monotonic() - T0, 3)
        with self.lock:
            if len(self.problems) < 20:
                self.problems.append(f"at {t}s: stream {self.n}: {what}; around it: {near(t, t)}")

    def settled(self):
        """Connected, and a beat came on this connection."""
        with self.lock:
            return self.cur is not None and self.cur["beats"] > 0

    def run(self):
        while not self.halt.is_set():
            self.one()

    def one(self):
        last = self.ids[-1] if self.ids else None
        c = {"beats": 0, "closing": 0, "retry": None, "after": b"", "end": None, "last_id": last, "head": None,
             "opened": round(time.monotonic() - T0, 3)}
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        except OSError as e:
            self.problem(f"reconnect failed: {e!r}")
            c["end"] = f"connect: {e!r}"
            with self.lock:
                self.conns.append(c)
            self.halt.wait(0.05)
            return
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            hdr = f"Last-Event-ID: {last}\r\n" if last is not None else ""
            sock.sendall(f"GET /events HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n{hdr}\r\n".encode())
            buf = b""
            deadline = time.monotonic() + 10
            while b"\r\n\r\n" not in buf:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionError(f"closed before the head ({buf[:100]!r})")
                buf += chunk
            head, buf = buf.split(b"\r\n\r\n", 1)
            c["head"] = head.decode("latin-1").replace("\r\n", " | ")
            lower = head.decode("latin-1").lower()
            if not (c["head"].startswith("HTTP/1.1 200") and "content-type: text/event-stream" in lower):
                self.problem(f"not a stream: {head[:200]!r}")
                c["end"] = "not a stream"
                return
            with self.lock:
                self.cur = c
            # What came with the head (a stream begun during a drain gets its
            # m0.closing in the same write) is read first.
            buf = self.frames(c, buf.replace(b"\r\n", b"\n"))
            quiet_since = time.monotonic()
            while True:
                sock.settimeout(0.2)
                try:
                    chunk = sock.recv(65536)
                except (socket.timeout, TimeoutError):
                    if time.monotonic() - quiet_since > 10:
                        self.problem("no frame and no close within 10 s")
                        c["end"] = "silent"
                        return
                    if self.halt.is_set() and c["closing"] == 0 and time.monotonic() - quiet_since > 8:
                        c["end"] = "halted"
                        return
                    continue
                except OSError as e:
                    c["end"] = f"reset: {e!r}"
                    return
                if not chunk:
                    c["end"] = "eof"
                    return
                quiet_since = time.monotonic()
                if c["closing"]:
                    c["after"] += chunk
                    continue
                buf = self.frames(c, buf + chunk.replace(b"\r\n", b"\n"))
        except OSError as e:
            self.problem(f"connection failed: {e!r}")
            c["end"] = f"error: {e!r}"
        finally:
            sock.close()
            c["ended"] = round(time.monotonic() - T0, 3)
            with self.lock:
                self.cur = None
                self.conns.append(c)

    def frames(self, c, buf):
        """Takes every whole frame in buf; returns the rest (anything after
        an m0.closing goes to c["after"])."""
        while b"\n\n" in buf and not c["closing"]:
            text, buf = buf.split(b"\n\n", 1)
            self.frame(c, text.decode("utf-8", "replace"))
        if c["closing"]:
            c["after"] += buf
            buf = b""
        return buf

    def frame(self, c, text):
        fields = {}
        for line in text.split("\n"):
            if line.startswith(":"):
                continue
            k, _, v = line.partition(":")
            fields.setdefault(k, v[1:] if v.startswith(" ") else v)
        if fields.get("event") == "m0.closing":
            c["closing"] += 1
            c["retry"] = fields.get("retry")
        elif fields.get("event") == "beat":
            try:
                i = int(fields.get("id"))
            except (TypeError, ValueError):
                self.problem(f"a beat without a numeric id: {text!r}")
                return
            with self.lock:
                if self.ids and i <= self.ids[-1]:
                    self.problem(f"id {i} after {self.ids[-1]} (Last-Event-ID {c['last_id']}, "
                                 f"connection {len(self.conns) + 1})")
                self.ids.append(i)
                c["beats"] += 1

    def finish(self):
        self.halt.set()
        self.thread.join(timeout=15)
        return not self.thread.is_alive()


# ---------------------------------------------------------------- one mode
class Host:
    """The top process and its log: gen 1 is Popen's, every later one is
    found in the log and reparented to this process when its parent exits."""

    def __init__(self, label, args):
        self.label = label
        self.srv = Server(BINPATH, *args, start_timeout=15)
        self.srv.start()
        self.port = self.srv.port
        self.top = self.srv.proc.pid
        self.gen = 1
        self.reloads = 0
        self.skipped = False  # a generation failed before serving: its number may be used or skipped

    def log(self):
        """The whole log, every generation's (they share the file)."""
        return harness.read_log(self.srv._err)

    def since(self, mark):
        return self.log()[mark:]

    def exit_code(self, pid):
        """The exit code of a process that is gone (bounded wait already done)."""
        if pid == self.srv.proc.pid:
            try:
                return self.srv.proc.wait(timeout=1)
            except Exception:
                return None
        got = wait_for(lambda: (lambda r: (r,) if r is not None else None)(reap(pid)), 5.0)
        if got and got[0] == "not ours":  # the master reaped it and says its exit (late, on a loaded machine)
            said = wait_for(lambda: MASTER_SAID.search(self.log().replace(f"(pid {pid})", "(pid THIS)")), 20.0)
            return int(said.group(1)) if said else "not ours"
        return got[0] if got else None

    def serving_pid_ok(self, label):
        st, body = get(self.port, "/pid")
        pid = int(body) if st == 200 and body.strip().isdigit() else None
        want = pid == self.top if "workers" not in self.label else ppid(pid) == self.top
        F.check(want, f"{label}: /pid answers {pid}: the top {self.top} (or its worker) ({st} {body[:80]!r})")
        return pid


def wait_streams(streams, label, timeout=10):
    ok = wait_for(lambda: all(s.settled() for s in streams), timeout)
    F.check(ok, f"{label}: every stream is connected and beating before the signal "
                f"({[s.settled() for s in streams]})")


DRAINING = re.compile(r"^m0: reload: generation (\d+) is still draining \(pid (\d+)\); this (SIGHUP|SIGUSR2) is refused$",
                      re.M)


def one_reload(h, sig, label, streams, want_path=None, held=False):
    """sig to the top; the new generation serves; the old one exits 0.
    held: a GET /deferred?ms=HELD_MS sent to the old one first is in flight
    across the reload: it is answered whole, the old one exits only after it,
    and a SIGHUP to the new one while the old one drains is refused."""
    wait_streams(streams, label)
    busy = None
    if held:
        # /health and the deferred request in one write: once /health is answered, the old one has read both.
        try:
            busy = Conn(h.port, timeout=10)
            busy.send(request("GET", "/health") + request("GET", f"/deferred?ms={HELD_MS}"))
            first = busy.try_response(timeout=10)
        except OSError as e:
            busy, first = None, (None, "", {}, b"", repr(e))
        F.check(first[0] == 200, f"{label}: /health before the deferred request answered ({first[4]!r})")
        t_busy = time.monotonic()
    mark = len(h.log())
    old, gen = h.top, h.gen
    old_kids = children(old)  # under --workers, its workers
    # Each stream's connections so far: the one open now is the old
    # generation's, and this reload must end it (see the wait below).
    ended = [len(s.conns) for s in streams]
    t_wall = time.time()
    t0 = time.monotonic()
    send(old, sig)
    got = wait_for(lambda: SERVING.search(h.since(mark)), SIGNAL_BOUND)
    took = time.monotonic() - t0
    note(f"serving line of generation {gen + 1} seen" if got else "no serving line")
    seg = h.since(mark)
    st = STARTING.search(seg)
    F.check(got, f"{label}: `generation N serving ...; generation {gen} draining` within {SIGNAL_BOUND} s "
                 f"of the signal to pid {old} ({took:.2f}s)\n{seg[-1500:]}\n  the processes:\n{describe()}\n"
                 f"  the log's end:\n{h.log()[-2500:]}")
    want = (gen + 1, gen + 2) if h.skipped else (gen + 1,)
    F.check(st and int(st.group(1)) in want,
            f"{label}: `generation {gen + 1} starting (pid P, PATH)` ({st and st.group(0)!r})\n{seg[-1500:]}")
    if not (st and got):
        return False
    new, ngen = int(st.group(2)), int(st.group(1))
    if h.skipped:
        print(f"  [{h.label}] after a generation that failed before serving, the next one is numbered {ngen} "
              f"(generation {gen} was serving)", flush=True)
        h.skipped = False
    if want_path:
        F.check(st.group(3) == want_path, f"{label}: the new generation runs the binary's path at start "
                                          f"({st.group(3)!r}, want {want_path!r})")
    F.check((int(got.group(1)), int(got.group(2)), int(got.group(3))) == (ngen, new, gen),
            f"{label}: the serving line names generation {ngen}, pid {new}, then {gen} ({got.group(0)!r})")
    banners = [b for b in BANNER.finditer(seg) if int(b.group(2)) == new]
    F.check(banners and int(banners[0].group(1)) == h.port and int(banners[0].group(3)) == ngen,
            f"{label}: pid {new}'s banner: the same port {h.port}, `generation {ngen})` "
            f"({[b.group(0) for b in banners]})")
    if busy:
        m1 = len(h.log())
        send(new, signal.SIGHUP)
        refused = wait_for(lambda: DRAINING.search(h.since(m1)), 5)
        F.check(refused and (int(refused.group(1)), int(refused.group(2)), refused.group(3)) == (gen, old, "SIGHUP"),
                f"{label}: a SIGHUP to the new one while the old one drains the deferred answer: `generation {gen} "
                f"is still draining (pid {old}); this SIGHUP is refused` ({refused and refused.group(0)!r})\n"
                f"{h.since(m1)[-800:]}")
        st2, _, hd, body, line = busy.try_response(timeout=10)
        done = time.monotonic() - t_busy
        F.check(st2 == 200 and body == f'{{"deferred":{HELD_MS}}}'.encode() and hd.get("content-length") == str(len(body)),
                f"{label}: the deferred request in flight across the reload is answered whole ({line!r} {body!r})")
        F.check(done >= HELD_MS / 1000 - 0.3, f"{label}: ... after its {HELD_MS} ms ({done:.2f}s)")
        F.check(busy.closed_within(3), f"{label}: ... and the old one closes that connection")
        busy.close()
    if old == h.srv.proc.pid:
        # Generation 1 is the pid a supervisor knows: drained, it goes on as the master (host/master.h).
        gone = wait_for(lambda: master_title(old), EXIT_BOUND)
        note(f"generation 1 (pid {old}) is the master" if gone else "generation 1 is not the master")
        F.check(gone, f"{label}: generation 1 (pid {old}) drains and becomes the master within {EXIT_BOUND:.1f} s "
                      f"of serving ({master_title(old)!r})")
        rc = 0 if gone and "m0: generation 1 drained with exit" not in h.since(mark) else None
    else:
        gone = wait_for(lambda: not alive(old), EXIT_BOUND)
        note(f"old generation {gen} (pid {old}) gone" if gone else f"old generation {gen} still there")
        F.check(gone, f"{label}: the old generation {gen} (pid {old}) exits within {EXIT_BOUND:.1f} s of serving")
        rc = h.exit_code(old) if gone else None
    F.check(rc == 0, f"{label}: the old generation (pid {old}) exits 0 (got {rc})\n{h.since(mark)[-1500:]}")
    F.check(alive(new), f"{label}: the new generation (pid {new}) outlives the old one")
    F.check(wait_for(lambda: not any(alive(k) for k in old_kids), 2),
            f"{label}: the old generation's processes are gone ({[k for k in old_kids if alive(k)]})")
    # The old generation closed its streams before it exited, but a stream's
    # thread may not have read that close yet (a loaded machine): until it
    # has, its connection still looks settled to the next reload's
    # wait_streams, which would signal while the stream is between
    # generations, and that reload would close nothing of it. So the
    # condition is waited for here: each stream saw its old connection end
    # and beats on a new one (the old generation gone, the new one's).
    moved = wait_for(lambda: all(len(s.conns) > n and s.settled() for s, n in zip(streams, ended)), 10)
    F.check(moved, f"{label}: every stream was closed by the reload and beats on the new generation "
                   f"(connections {[len(s.conns) for s in streams]}, before {ended}; "
                   f"settled {[s.settled() for s in streams]})")
    h.top, h.gen = new, ngen
    h.reloads += 1
    # The old one is gone: whoever answers now is the new generation.
    m = scrape(h.port)
    gens = (m or {}).get("m0_generation")
    rel = (m or {}).get("m0_reloads_total")
    ts = (m or {}).get("m0_last_reload_timestamp_seconds")
    F.check(gens and set(gens) == {float(h.gen)}, f"{label}: m0_generation is {h.gen} ({gens})")
    F.check(rel and set(rel) == {float(h.reloads)}, f"{label}: m0_reloads_total is {h.reloads} ({rel})")
    F.check(ts and all(t_wall - 2 <= t <= time.time() + 2 for t in ts),
            f"{label}: m0_last_reload_timestamp_seconds is this reload's time ({ts}, signal at {t_wall:.0f})")
    h.serving_pid_ok(label)
    return took


def bad_config(h, topo_path, good_text, bad_text, label, streams):
    """SIGHUP with a configuration the checks refuse: one line, nothing changes."""
    wait_streams(streams, label)
    mark = len(h.log())
    kids = children(h.top)
    pid0 = h.serving_pid_ok(f"{label} (before)")
    with open(topo_path + ".tmp", "w") as f:
        f.write(bad_text)
    os.rename(topo_path + ".tmp", topo_path)
    send(h.top, signal.SIGHUP)
    got = wait_for(lambda: REFUSED.search(h.since(mark)), 10)
    F.check(got and int(got.group(1)) == h.gen,
            f"{label}: `m0: reload refused: ... generation {h.gen} keeps serving`:\n{h.since(mark)[-1500:]}")
    F.check(alive(h.top), f"{label}: the top (pid {h.top}) keeps running")
    F.check(children(h.top) == kids, f"{label}: no new process ({children(h.top)} vs {kids})")
    F.check(h.serving_pid_ok(f"{label} (after)") == pid0 or "workers" in h.label, f"{label}: the same pid answers")
    m = scrape(h.port) or {}
    F.check(set(m.get("m0_generation") or []) == {float(h.gen)} and
            set(m.get("m0_reloads_total") or []) == {float(h.reloads)},
            f"{label}: m0_generation {h.gen}, m0_reloads_total {h.reloads} unchanged "
            f"({m.get('m0_generation')}, {m.get('m0_reloads_total')})")
    with open(topo_path + ".tmp", "w") as f:
        f.write(good_text)
    os.rename(topo_path + ".tmp", topo_path)
    # Everything the refusal printed is in the log by the time the checks above ran: one line.
    lines = [l for l in h.since(mark).splitlines() if l.strip()]
    F.check(len(lines) == 1 and REFUSED.match(lines[0]), f"{label}: exactly one line in the log ({lines})")
    F.check(children(h.top) == kids, f"{label}: still no new process after the checks ({children(h.top)})")


def failing_binary(h, label, streams):
    """SIGUSR2 with a binary whose make fails: the old one keeps serving."""
    wait_streams(streams, label)
    mark = len(h.log())
    pid0 = h.serving_pid_ok(f"{label} (before)")
    put_binary("fails")
    try:
        send(h.top, signal.SIGUSR2)
        got = wait_for(lambda: EXITED.search(h.since(mark)), SIGNAL_BOUND)
    finally:
        put_binary("good")
    seg = h.since(mark)
    st = STARTING.search(seg)
    F.check(st and st.group(3) == BINPATH, f"{label}: `generation N starting (pid P, {BINPATH})` "
                                           f"({st and st.group(0)!r})")
    F.check(got, f"{label}: `generation N (pid P) exited C before serving; generation {h.gen} keeps serving`:\n"
                 f"{seg[-1500:]}")
    if got:
        F.check(int(got.group(5)) == h.gen and got.group(3) == "78" and st and got.group(2) == st.group(2),
                f"{label}: ... exited 78 (the make's refusal), generation {h.gen}, the pid of the starting line "
                f"({got.group(0)!r})")
        F.check(wait_for(lambda: not alive(int(got.group(2))), 5), f"{label}: the failed generation is gone")
    F.check(not SERVING.search(seg), f"{label}: no `serving` line")
    F.check(alive(h.top), f"{label}: the old one (pid {h.top}) keeps serving")
    F.check(h.serving_pid_ok(f"{label} (after)") == pid0 or "workers" in h.label, f"{label}: the same pid answers")
    m = scrape(h.port) or {}
    F.check(set(m.get("m0_generation") or []) == {float(h.gen)} and
            set(m.get("m0_reloads_total") or []) == {float(h.reloads)},
            f"{label}: m0_generation {h.gen}, m0_reloads_total {h.reloads} unchanged "
            f"({m.get('m0_generation')}, {m.get('m0_reloads_total')})")
    return got


def term_mid_reload(h, label, streams, load):
    """A reload that never serves (the producer's make waits on GATE): a HUP
    and a USR2 during it are refused; then SIGTERM to the old: it exits 0
    within the bound, and nothing is left."""
    wait_streams(streams, label)
    lost = load.stop()
    F.check(not lost, f"{label}: every load thread stopped ({lost})")
    for s in streams:
        s.halt.set()  # the next close is the last: no reconnect
    mark = len(h.log())
    put_binary("slow")
    try:
        send(h.top, signal.SIGUSR2)
        st = wait_for(lambda: STARTING.search(h.since(mark)), 10)
        new = int(st.group(2)) if st else None
        # The good binary goes back only once the script has exec'd the real one (whose make waits on GATE).
        execd = new and wait_for(lambda: alive(new) and os.path.realpath(f"/proc/{new}/exe") == os.path.realpath(REAL),
                                 10)
    finally:
        put_binary("good")
    F.check(st, f"{label}: the new generation starts:\n{h.since(mark)[-1500:]}")
    F.check(execd, f"{label}: pid {new} runs the slow script's binary")
    top_kids = children(h.top)  # the new generation (and, under --workers, the old one's workers)
    for sig in (signal.SIGHUP, signal.SIGUSR2):
        name = signal.Signals(sig).name
        m1 = len(h.log())
        send(h.top, sig)
        busy = wait_for(lambda: BUSY.search(h.since(m1)), 10)
        F.check(busy and st and (int(busy.group(1)), int(busy.group(2)), busy.group(3)) == (int(st.group(1)), new, name),
                f"{label}: {name} during the reload: `generation N is still starting (pid {new}); "
                f"this {name} is refused` ({busy and busy.group(0)!r})\n{h.since(m1)[-800:]}")
    F.check(not SERVING.search(h.since(mark)) and not EXITED.search(h.since(mark)),
            f"{label}: the slow generation neither served nor exited yet")
    F.check(len(STARTING.findall(h.since(mark))) == 1 and children(h.top) <= top_kids,
            f"{label}: no third generation started ({children(h.top) - top_kids}):\n{h.since(mark)[-800:]}")
    t0 = time.monotonic()
    old = h.top
    # To the pid a supervisor knows (the master once generation 1 handed over): it drains whatever serves.
    send(h.srv.proc.pid, signal.SIGTERM)
    gone = wait_for(lambda: not alive(old) and h.srv.proc.poll() is not None, DRAIN_MS / 1000 + 1.5)
    took = time.monotonic() - t0
    F.check(gone, f"{label}: the old (pid {old}) and the top pid {h.srv.proc.pid} exit within the bound + 1.5 s "
                  f"({took:.2f}s)")
    rc = h.exit_code(h.srv.proc.pid) if gone else None
    F.check(rc == 0, f"{label}: ... and the top pid exits 0 (got {rc}):\n{h.since(mark)[-2000:]}")
    F.check(new and wait_for(lambda: not alive(new), max(0.2, t0 + DRAIN_MS / 1000 + 1.5 - time.monotonic())),
            f"{label}: the new generation (pid {new}) is gone too, within the bound + 1.5 s")
    # Both generations drain: the starting one was asked to stop (its start ends with the host's usual line,
    # docs/behaviour.md and test_stopped_starting), not only killed when the old one's bound ran out. A
    # start still before its signal handlers (slow under the sanitizers) dies of that SIGTERM instead.
    F.check("m0: stopped while starting" in h.since(mark) or
            re.search(rf"generation \d+ \(pid {new}\) (died of signal {int(signal.SIGTERM)} before serving|"
                      rf"stopped with this one \(died of signal {int(signal.SIGTERM)}\))", h.since(mark)),
            f"{label}: the starting generation says `m0: stopped while starting` (it was sent SIGTERM):\n"
            f"{h.since(mark)[-1500:]}")
    left = wait_for(lambda: not live_descendants(), 1.0)
    F.check(left, f"{label}: nothing this test started is left running ({live_descendants()})")
    for s in streams:
        F.check(s.finish(), f"{label}: stream {s.n} finished")


def run_mode(mode, args):
    t_mode = time.monotonic()
    label = mode
    doctor = harness.run("host_check", "--doctor", *args)
    topo = json.loads(doctor[1].strip().splitlines()[-1])["topology"]
    topo_path = os.path.join(TMP, f"{mode}.json")
    good = json.dumps(topo, indent=2)
    bad = good[: len(good) // 2] if mode == "single" else json.dumps(dict(topo, reload_test_unknown_key=1), indent=2)
    with open(topo_path, "w") as f:
        f.write(good)
    put_binary("good")
    tally = Tally()
    h = Host(mode, ["--topology", topo_path, "--port", "0", "--metrics-path", "/metrics",
                    "--drain-timeout-ms", str(DRAIN_MS)])
    load = Load(h.port, tally)
    streams = []
    times = {signal.SIGHUP: [], signal.SIGUSR2: []}
    try:
        m = scrape(h.port) or {}
        F.check(m.get("m0_generation") == [1.0] or set(m.get("m0_generation") or []) == {1.0},
                f"{label}: m0_generation 1 at the start ({m.get('m0_generation')})")
        F.check(set(m.get("m0_reloads_total") or []) == {0.0}, f"{label}: m0_reloads_total 0 ({m.get('m0_reloads_total')})")
        F.check(set(m.get("m0_last_reload_timestamp_seconds") or []) == {0.0},
                f"{label}: m0_last_reload_timestamp_seconds 0 ({m.get('m0_last_reload_timestamp_seconds')})")
        F.check(BANNER.search(h.log()) and BANNER.search(h.log()).group(3) == "1",
                f"{label}: the first banner says generation 1:\n{h.log()}")
        streams = [Reconnecting(h.port, i) for i in range(3)]
        load.start()
        F.check(wait_for(lambda: tally.answered >= 20, 10), f"{label}: the load runs ({tally.answered})")
        total = HUPS + USR2S
        usr2_at = [i for i in range(total) if i % 5 == 4][:USR2S]  # every fifth signal is a SIGUSR2
        usr2_at += [i for i in range(total - 1, -1, -1) if i not in usr2_at][:USR2S - len(usr2_at)]
        bad_at = next(i for i in range(min(3, total - 1), -1, -1) if i not in usr2_at or i == 0)
        fail_at = next(i for i in range(min(6, total - 1), -1, -1) if i in usr2_at or i == 0)
        n, dead = 0, False
        for rnd in range(ROUNDS):
            for i in range(total):
                n += 1
                what = f"{label}: reload {n} (round {rnd + 1})"
                if not alive(h.top):
                    F.check(False, f"{what}: the serving generation (pid {h.top}) is gone; this mode stops here:\n"
                                   f"{h.log()[-2000:]}")
                    dead = True
                    break
                if i == bad_at:  # the next signal, a SIGHUP with the file restored, must succeed
                    bad_config(h, topo_path, good, bad, f"{what}: bad configuration first", streams)
                if i == fail_at:
                    failing_binary(h, f"{what}: a failing binary first", streams)
                    h.skipped = True
                sig = signal.SIGUSR2 if i in usr2_at else signal.SIGHUP
                a0 = tally.answered
                slow = i == usr2_at[0]  # the first SIGUSR2 of a round: a deferred answer holds the old one's drain
                took = one_reload(h, sig, f"{what} ({signal.Signals(sig).name})", streams,
                                  want_path=BINPATH if sig == signal.SIGUSR2 else None, held=slow)
                if took is False:
                    break
                times[sig].append(took)
                F.check(wait_for(lambda: tally.answered > a0, 10),
                        f"{what}: the load was answered across it ({tally.answered - a0})")
            else:
                continue
            break
        if not dead:
            term_mid_reload(h, f"{label}: SIGTERM in the middle of a reload", streams, load)
    finally:
        load.halt.set()
        for s in streams:
            s.halt.set()
        kill_all_left()
        h.srv.kill()
        try:
            os.unlink(GATE)
        except OSError:
            pass
    # The load.
    for t, what in tally.bad:
        print(f"  [{mode}] at {t}s: {what}; around it: {near(t, t)}")
    F.check(tally.nbad == 0, f"{label}: zero failed requests ({tally.nbad} failures, {tally.answered} answered)")
    if STRICT:  # the host's hand-over leaves no client a reason to retry (M0_TEST_RELOAD_STRICT=0: allowed)
        F.check(not tally.retries, f"{label}: strict: no request needed RFC 9112's retry ({len(tally.retries)} did)")
    F.check(tally.answered >= 50 * h.reloads, f"{label}: the load ran ({tally.answered} answered)")
    kinds = {}
    for who, path, why in tally.retries:
        k = f"{who}: {why.split(':')[0] if who == 'pipelined' else why}"
        kinds[k] = kinds.get(k, 0) + 1
    for k, n in sorted(kinds.items()):
        print(f"  [{mode}] retried once on a new connection (RFC 9112 9.3.1), then answered: {n} x {k}")
    # The streams.
    for s in streams:
        for p in s.problems:
            print(f"  [{mode}] {p}")
        F.check(not s.problems, f"{label}: stream {s.n}: ids rise across reconnects, every reconnect served "
                                f"({len(s.problems)} problems)")
        bad_end = [c for c in s.conns if not (c["closing"] == 1 and c["retry"] and not c["after"].strip()
                                              and c["end"] == "eof")]
        F.check(s.conns and not bad_end,
                f"{label}: stream {s.n}: each of its {len(s.conns)} connections ended with one m0.closing with "
                f"retry:, nothing after it, then EOF ({bad_end[:3]}; around them: "
                f"{[near(c['opened'], c.get('ended', c['opened'])) for c in bad_end[:3]]})")
        F.check(len(s.conns) >= h.reloads + 1,
                f"{label}: stream {s.n}: closed at each of the {h.reloads} reloads and at the end "
                f"({len(s.conns)} connections)")
        F.check(len(s.ids) >= h.reloads + 1, f"{label}: stream {s.n}: beats came in each generation ({len(s.ids)} ids)")
    hup, usr2 = times[signal.SIGHUP], times[signal.SIGUSR2]
    fmt = lambda l: f"{len(l)} x, median {sorted(l)[len(l) // 2]:.3f}s, max {max(l):.3f}s" if l else "none"
    print(f"[{mode}] {time.monotonic() - t_mode:.1f}s: {h.reloads} reloads (SIGHUP {fmt(hup)}; SIGUSR2 {fmt(usr2)} "
          f"signal -> serving); {tally.answered} answered, {len(tally.retries)} retried (RFC 9112 9.3.1), "
          f"{tally.nbad} failed; streams: {[len(s.conns) for s in streams]} connections, "
          f"{[len(s.ids) for s in streams]} beats", flush=True)


def main():
    F.check(SUBREAPER, "this test is a child subreaper (prctl), so it can read every old generation's exit code")
    t_all = time.monotonic()
    try:
        for mode, args in MODES:
            try:
                run_mode(mode, args)
            except Exception:
                F.check(False, f"{mode}: the test itself raised:\n{traceback.format_exc()}")
    finally:
        kill_all_left()
        shutil.rmtree(TMP, ignore_errors=True)
    print(f"total {time.monotonic() - t_all:.1f}s")
    F.done()


if __name__ == "__main__":
    main()
