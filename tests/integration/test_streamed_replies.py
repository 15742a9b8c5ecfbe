"""Replies that stream (m0_reply_writer; service/stream.h, actors/streamed.h,
docs/actors.md "Replies that stream"), on host_check's GET /actor/stream
served in pieces by the echo actor (apps/echo_actor/echo.h: ?n=N pieces of
?size=S bytes, piece i all the letter 'a' + i % 26 but a last '\\n'; ?sse=1
as server-sent events "data: i"; ?ms=M between pieces).

Proves:
- The access log has one line per stream, its status and body bytes.
- Placements: the same stream from echo on a thread, in a spawned process
  and in an external echo_actor (C, and python/echo_actor.py on m0actor's
  Request.writer) is the whole body, byte for byte: read by
  curl, by a raw socket taking the chunked framing in 7-byte reads and one
  byte at a time, and a 16 MiB one (more than the 256 KiB window many
  times over: the room is granted back) in large reads; a text/event-stream
  one read by an SSE client gets its events in order.
- Modes: under --threads 2 (thread placement) and --workers 2 (process and
  external placement: the relay carries STREAM and CREDIT) every one of
  several streams is whole.
- The client leaving mid-stream: the instance's write fails EPIPE (echo says
  "the client left"), on a thread and in an external program (C and Python).
- The instance dying mid-stream (a process instance SIGKILLed): the
  connection is closed without the last chunk (the body is cut, never one
  that looks whole) and the host serves on: /health, and /actor/echo from
  the restarted instance.
- Backpressure is counted: a client that never reads a 100 MiB stream
  leaves the host's memory (VmRSS) within 48 MiB of what it was, and the
  instance had written at most 48 MiB when the client left.
- A misbehaving instance (tests/integration/wire_actor.py stream-bad): DATA
  before its OPEN, a second OPEN and DATA after the END are dropped and
  counted (m0_actor_replies_dropped_total unknown_id 3); the client gets
  the stream as the good messages made it ("hello world"), the host serves
  on, and the instance is told GONE for the DATA after the END (a stream the
  host let go that it still writes).
- A STREAM too short for its op and id (wire_actor stream-short) is dropped
  and counted refused, never taken as the stream before it: the client still
  gets "hello world". An OPEN whose first bytes are past the 256 KiB window
  (stream-over) is answered 502, counted bad_reply, and its instance told
  GONE.
- A client that stops reading a stream (a tiny SO_RCVBUF, never read) is
  closed by the host's sweep once its bytes have not moved for
  --body-timeout-ms: the instance's write fails EPIPE, and what the client
  then reads ends without the last chunk.
"""
import hashlib
import http.client
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import harness
from harness import BIN, Failures, Prefork, Server, private_dir, run_parts, wait_for, write_json
from rawhttp import Conn

F = Failures()
TMP = tempfile.mkdtemp(prefix="m0-streamed-")
HERE = os.path.dirname(os.path.abspath(__file__))
WIRE_ACTOR = os.path.join(HERE, "wire_actor.py")
PY_ECHO = os.path.join(HERE, "..", "..", "python", "echo_actor.py")
PROGRAMS = []
MIB = 1 << 20


def host(topo, *args, rd=None, cls=Server):
    a = ["--port", "0", "--metrics-path", "/metrics", "--topology", write_json(topo, TMP, indent=2)]
    if rd is not None:
        a += ["--run-dir", rd]
    return cls("host_check", *a, *args)


def start(argv):
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    PROGRAMS.append(p)
    return p


def said_until(p, cond, timeout):
    """What p writes on stdout until cond(all of it) holds, p ends, or
    timeout seconds pass (0: nothing is read)."""
    out, deadline = b"", time.monotonic() + timeout
    fd = p.stdout.fileno()
    while timeout and not cond(out.decode(errors="replace")):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        out += chunk
    return out.decode(errors="replace")


def live(port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith('m0_actor_instances{actor="echo"}'):
            return int(line.split()[-1])
    return None


def want(n, size):
    return b"".join(bytes([97 + i % 26]) * (size - 1) + b"\n" for i in range(n))


def want_digest(n, size):
    h = hashlib.sha256()
    for i in range(n):
        h.update(bytes([97 + i % 26]) * (size - 1) + b"\n")
    return h.hexdigest()


class Stream:
    """A GET on a raw socket, its head read; then its chunked body read in
    reads of at most `step` bytes (the framing checked as it comes)."""

    def __init__(self, port, target, step=65536, rcvbuf=None):
        self.sock = socket.socket()
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(15)
        self.sock.connect(("127.0.0.1", port))
        self.sock.sendall(f"GET {target} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
        self.step, self.buf, self.eof = step, b"", False

    def fill(self):
        b = self.sock.recv(self.step)
        if not b:
            self.eof = True
            raise EOFError
        self.buf += b

    def take(self, n):
        while len(self.buf) < n:
            self.fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def line(self):
        while b"\r\n" not in self.buf:
            self.fill()
        out, _, self.buf = self.buf.partition(b"\r\n")
        return out

    def head(self):
        status = self.line()
        headers = {}
        while True:
            h = self.line()
            if not h:
                break
            k, _, v = h.decode().partition(":")
            headers[k.strip().lower()] = v.strip()
        return int(status.split()[1]), headers

    def chunk(self):
        """The next chunk's bytes; b"" for the last chunk (its CRLF taken)."""
        size = int(self.line(), 16)
        data = self.take(size)
        if self.take(2) != b"\r\n":
            raise ValueError("a chunk not followed by CRLF")
        return data

    def body(self, digest=False):
        h, n = hashlib.sha256(), 0
        parts = []
        while True:
            c = self.chunk()
            if not c:
                return (h.hexdigest(), n) if digest else b"".join(parts)
            n += len(c)
            h.update(c) if digest else parts.append(c)

    def close(self):
        self.sock.close()


def whole(port, label, n=4, size=16, step=65536, digest=False):
    # Under --workers a worker whose door has not met the instance yet answers 503 (bounded retries).
    deadline = time.monotonic() + 10
    while True:
        s = Stream(port, f"/actor/stream?n={n}&size={size}", step)
        st, h = s.head()
        if st != 503 or time.monotonic() > deadline:
            break
        s.close()
        time.sleep(0.05)
    try:
        F.check(st == 200 and h.get("transfer-encoding") == "chunked" and h.get("content-type") == "text/plain",
                f"{label}: 200 chunked text/plain ({st} {h})")
        if st != 200:
            return h
        got = s.body(digest)
        ok = got == ((want_digest(n, size), n * size) if digest else want(n, size))
        F.check(ok, f"{label}: the body is whole, n={n} size={size} step={step} "
                    f"({got if digest else (len(got), got[:40])})")
        return h
    finally:
        s.close()


def sse(port, label, n=5):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", f"/actor/stream?n={n}&sse=1")
    r = c.getresponse()
    events, data = [], []
    for raw in r:  # an SSE client: lines, an event at each blank one
        line = raw.decode().rstrip("\n")
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and data:
            events.append("\n".join(data))
            data = []
    c.close()
    F.check(r.status == 200 and r.getheader("Content-Type") == "text/event-stream",
            f"{label}: SSE 200 text/event-stream ({r.status} {r.getheader('Content-Type')})")
    F.check(events == [str(i) for i in range(n)], f"{label}: SSE events in order ({events})")


def curl(port, label, n=50, size=1000):
    out = subprocess.run(["curl", "-s", "-N", "--max-time", "15", f"http://127.0.0.1:{port}/actor/stream?n={n}&size={size}"],
                         capture_output=True, timeout=20)
    F.check(out.returncode == 0 and out.stdout == want(n, size),
            f"{label}: curl reads the whole body ({out.returncode}, {len(out.stdout)} bytes)")


def all_reads(port, label):
    curl(port, label)
    whole(port, f"{label} 7-byte reads", n=20, size=100, step=7)
    whole(port, f"{label} byte at a time", n=4, size=16, step=1)
    whole(port, f"{label} 16 MiB", n=256, size=65536, digest=True)
    sse(port, label)


def echo_actor(url, instance=3):
    return start([os.path.join(BIN, "echo_actor"), url, str(instance)])


# ---- parts ----------------------------------------------------------------------------------------------------


def stream_lines(s):
    out = []
    for line in s.stdout().splitlines():
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if isinstance(j, dict) and j.get("path") == "/actor/stream":
            out.append(j)
    return out


def placements():
    with host({"mode": "single", "app_actors": [{"name": "echo", "placement": "thread"}]}, "--access-log") as s:
        all_reads(s.port, "thread")
        F.check(wait_for(lambda: len(stream_lines(s)) == 5, 5) and
                any(j.get("status") == 200 and j.get("bytes") == 256 * 65536 for j in stream_lines(s)),
                f"thread: the access log has a line for each stream, with its body's bytes ({stream_lines(s)})")
    with host({"mode": "single", "app_actors": [{"name": "echo", "placement": "process"}]}) as s:
        F.check(wait_for(lambda: live(s.port) == 1, 10), "process: the instance is live")
        all_reads(s.port, "process")
    rd = private_dir("rd-", TMP)
    with host({"mode": "single", "app_actors": [{"name": "echo", "placement": "external"}]}, rd=rd) as s:
        a = echo_actor(f"ipc://{rd}/actor.echo.sock")
        F.check(wait_for(lambda: live(s.port) == 1, 10), "external: echo_actor connects")
        all_reads(s.port, "external")
        a.terminate()
        a.wait(5)
    rd = private_dir("rd-", TMP)
    with host({"mode": "single", "app_actors": [{"name": "echo", "placement": "external"}]}, rd=rd) as s:
        err = os.path.join(TMP, "echo_actor_py.err")
        with open(err, "w") as f:  # python/echo_actor.py: m0actor's Request.writer
            a = subprocess.Popen([sys.executable, PY_ECHO, f"ipc://{rd}/actor.echo.sock", "5"], stderr=f)
        PROGRAMS.append(a)
        F.check(wait_for(lambda: live(s.port) == 1, 10), "external Python: echo_actor.py connects")
        all_reads(s.port, "external Python")
        leave_early(s.port, "external Python", lambda: open(err).read())
        a.terminate()
        a.wait(5)


def modes():
    with host({"mode": "threads", "loops": 2, "app_actors": [{"name": "echo", "placement": "thread"}]}) as s:
        for i in range(4):
            whole(s.port, f"threads #{i}", n=200, size=10000, digest=True)
    for placement in ("process", "external"):
        rd = private_dir("rd-", TMP)
        topo = {"mode": "prefork", "loops": 2, "app_actors": [{"name": "echo", "placement": placement}]}
        with host(topo, rd=rd, cls=Prefork) as s:
            if placement == "external":
                echo_actor(f"ipc://{rd}/actor.echo.sock")
            F.check(wait_for(lambda: live(s.port) == 1, 10), f"workers {placement}: the instance is live")
            for i in range(6):
                whole(s.port, f"workers {placement} #{i}", n=200, size=10000, digest=True)
            sse(s.port, f"workers {placement}")


def leave_early(port, label, said):
    s = Stream(port, "/actor/stream?n=1000&size=100&ms=10")
    st, _ = s.head()
    first = s.chunk()
    s.close()
    F.check(st == 200 and first == want(1, 100), f"{label}: the stream begins ({st} {first[:20]!r})")
    F.check(wait_for(lambda: "the client left" in said(), 10),
            f"{label}: the instance learns the client left (EPIPE) ({said()[-300:]!r})")


def gone():
    with host({"mode": "single", "app_actors": [{"name": "echo", "placement": "thread"}]}) as s:
        leave_early(s.port, "gone thread", s.stderr)
        F.check(harness.get(s.port, "/actor/echo")[0] == 200, "gone thread: the actor serves on")
    rd = private_dir("rd-", TMP)
    with host({"mode": "single", "app_actors": [{"name": "echo", "placement": "external"}]}, rd=rd) as s:
        err = os.path.join(TMP, "echo_actor.err")
        with open(err, "w") as f:
            a = subprocess.Popen([os.path.join(BIN, "echo_actor"), f"ipc://{rd}/actor.echo.sock", "3"], stderr=f)
        PROGRAMS.append(a)
        F.check(wait_for(lambda: live(s.port) == 1, 10), "gone external: echo_actor connects")
        leave_early(s.port, "gone external", lambda: open(err).read())
        a.terminate()
        a.wait(5)


def killed():
    with host({"mode": "single", "app_actors": [{"name": "echo", "placement": "process"}]}) as s:
        F.check(wait_for(lambda: live(s.port) == 1, 10), "killed: the instance is live")
        st = Stream(s.port, "/actor/stream?n=1000&size=100&ms=10")
        code, h = st.head()
        first = st.chunk()
        pid = int(h.get("x-echo-pid", "0"))
        F.check(code == 200 and first and pid > 0 and pid != s.proc.pid, f"killed: a stream from a child ({h})")
        if pid > 0 and pid != s.proc.pid:
            os.kill(pid, signal.SIGKILL)
        rest, ended = b"", False
        try:
            while True:
                if not st.chunk():
                    ended = True
                    break
        except (EOFError, ConnectionResetError):
            pass
        except socket.timeout:
            rest = b"timeout"
        st.close()
        F.check(st.eof and not ended and rest == b"",
                f"killed: the connection closes without the last chunk (eof {st.eof}, last chunk {ended}, {rest!r})")
        F.check(harness.get(s.port, "/health")[0] == 200, "killed: the host serves on (/health)")
        F.check(wait_for(lambda: harness.get(s.port, "/actor/echo")[0] == 200, 10),
                "killed: /actor/echo answers again (the instance restarted)")


def rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def slow_client():
    for placement in ("thread", "process"):
        with host({"mode": "single", "app_actors": [{"name": "echo", "placement": placement}]}) as s:
            F.check(wait_for(lambda: live(s.port) == 1, 10), f"slow {placement}: the instance is live")
            whole(s.port, f"slow {placement}: warm-up", n=64, size=65536, digest=True)
            base = rss(s.proc.pid)
            st = Stream(s.port, "/actor/stream?n=400&size=262144", rcvbuf=65536)  # 100 MiB, never read
            peak = base
            # Without the window the instance would fill the host with the whole body in well under this
            # bound; it is a bound on the look, not a timing asserted.
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline and peak - base < 48 * MIB:
                peak = max(peak, rss(s.proc.pid))
                time.sleep(0.05)
            st.close()
            F.check(peak - base < 48 * MIB,
                    f"slow {placement}: the host's memory stays bounded ({(peak - base) / MIB:.1f} MiB over "
                    f"{base / MIB:.1f})")
            said = wait_for(lambda: "the client left after" in s.stderr(), 10)
            k = None
            if said:
                tail = s.stderr().split("the client left after", 1)[1]
                k = int(tail.split()[0])
            F.check(k is not None and k * 262144 < 48 * MIB,
                    f"slow {placement}: the instance wrote at most 48 MiB before the client left ({k} pieces)")


def hostile():
    rd = private_dir("rd-", TMP)
    with host({"mode": "single", "app_actors": [{"name": "echo", "placement": "external"}]}, rd=rd) as s:
        w = start([sys.executable, WIRE_ACTOR, f"ipc://{rd}/actor.echo.sock", "stream-bad"])
        F.check(wait_for(lambda: live(s.port) == 1, 10), "hostile: the wire actor connects")
        for i in range(2):
            st = Stream(s.port, "/actor/echo")
            code, h = st.head()
            body = st.body()
            st.close()
            F.check(code == 200 and body == b"hello world", f"hostile #{i}: the stream as its good messages made it "
                                                             f"({code} {body!r})")
        def dropped():  # the DATA after the END may come in after the client has its body
            text = urllib.request.urlopen(f"http://127.0.0.1:{s.port}/metrics", timeout=5).read().decode()
            return [line for line in text.splitlines()
                    if line.startswith('m0_actor_replies_dropped_total{actor="echo",reason="unknown_id"}')]

        wait_for(lambda: dropped() and int(dropped()[0].split()[-1]) >= 6, 5)
        F.check(dropped() and int(dropped()[0].split()[-1]) == 6,
                f"hostile: DATA before OPEN, OPEN twice, DATA after END dropped and counted, 3 a stream ({dropped()})")
        F.check(harness.get(s.port, "/health")[0] == 200, "hostile: the host serves on")
        w.kill()
        out = w.communicate(timeout=5)[0]
        got = {line.split()[1] for line in out.splitlines() if line.startswith("got ")}
        gone = {line.split()[2] for line in out.splitlines() if line.startswith("credit 2 ")}
        F.check(len(got) == 2 and gone == got, f"hostile: told GONE for the DATA after each END ({got} {gone})")


def metric(port, prefix):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return sum(int(line.split()[-1]) for line in text.splitlines() if line.startswith(prefix))


def refused():
    dropped = 'm0_actor_replies_dropped_total{actor="echo",reason='
    for mode in ("stream-short", "stream-over"):
        rd = private_dir("rd-", TMP)
        with host({"mode": "single", "app_actors": [{"name": "echo", "placement": "external"}]}, rd=rd) as s:
            w = start([sys.executable, WIRE_ACTOR, f"ipc://{rd}/actor.echo.sock", mode])
            F.check(wait_for(lambda: live(s.port) == 1, 10), f"{mode}: the wire actor connects")
            st = Stream(s.port, "/actor/echo")
            code, _ = st.head()
            if mode == "stream-short":
                body = st.body()
                F.check(code == 200 and body == b"hello world",
                        f"{mode}: the short STREAM is no part of the stream ({code} {body!r})")
                F.check(wait_for(lambda: metric(s.port, dropped + '"refused"}') == 1, 5) and
                        metric(s.port, dropped + '"unknown_id"}') == 0 and
                        metric(s.port, 'm0_actor_requests_total{actor="echo",outcome="bad_reply"}') == 0,
                        f"{mode}: counted refused, and nothing else ({metric(s.port, dropped)})")
            else:
                F.check(code == 502, f"{mode}: an OPEN past the window is answered 502 ({code})")
                F.check(metric(s.port, 'm0_actor_requests_total{actor="echo",outcome="bad_reply"}') == 1,
                        f"{mode}: counted bad_reply")
            st.close()
            # the GONE comes after the 502, on the instance's link: waited for
            # in what the wire actor says (bounded), then it is stopped
            out = said_until(w, lambda o: any(line.startswith("credit 2 ") for line in o.splitlines()),
                             10 if mode == "stream-over" else 0)
            w.kill()
            out += w.communicate(timeout=5)[0]
            if mode == "stream-over":
                ids = [line.split()[1] for line in out.splitlines() if line.startswith("got ")]
                F.check(ids and f"credit 2 {ids[0]} 0" in out, f"{mode}: the instance is told GONE ({out!r})")


def stuck():
    """A client that never reads its stream is closed by the sweep (the body timeout, 1 s here)."""
    with host({"mode": "single", "app_actors": [{"name": "echo", "placement": "thread"}]},
              "--body-timeout-ms", "1000") as s:
        st = Stream(s.port, "/actor/stream?n=400&size=262144", rcvbuf=4096)  # 100 MiB, never read
        code, _ = st.head()
        F.check(code == 200, f"stuck: the stream begins ({code})")
        # Bounded waits on the conditions, no timing asserted.
        F.check(wait_for(lambda: "the client left after" in s.stderr(), 30),
                f"stuck: the host closes the connection and the instance's write fails EPIPE ({s.stderr()[-300:]!r})")
        ended = reset = False
        try:
            while not ended:
                ended = st.chunk() == b""
        except EOFError:
            pass
        except ConnectionResetError:
            reset = True
        except socket.timeout:
            pass
        st.close()
        F.check((st.eof or reset) and not ended, f"stuck: what the client reads ends without the last chunk "
                                                 f"(eof {st.eof}, reset {reset}, last chunk {ended})")
        F.check(harness.get(s.port, "/health")[0] == 200, "stuck: the host serves on")


PARTS = [("placements", placements), ("modes", modes), ("gone", gone), ("killed", killed),
         ("slow_client", slow_client), ("hostile", hostile), ("refused", refused), ("stuck", stuck)]

if __name__ == "__main__":
    only = None
    if "--only" in sys.argv:
        only = set(sys.argv[sys.argv.index("--only") + 1].split(","))
    run_parts(F, [(n, p) for n, p in PARTS if not only or n in only], PROGRAMS, TMP)
