"""The front end `m0 --topology FILE` with stream routes (docs/topology.md,
Stream routes): a site whose every route is served by external actors has
live pages.

- The file: an external python actor `rooms` (python/m0actor.py) serves
  POST /rooms/{room}/say by publishing its body on channel "room.<room>";
  GET /rooms/{room}/live is `"stream": "room.{room}"`. The doctor prints the
  stream route as the file wrote it, beside the actor route.
- Threads (2 loops) and prefork ("mode": "prefork", 2 workers): a raw-socket
  SSE client, `curl -N` and a python3-websockets client on /rooms/blue/live
  get the five frames said in room blue, in order, each once (the WebSocket
  its data alone); a client of /rooms/red/live gets only red's frame (the
  channel is the template filled in with the segment). An SSE client that
  comes back with Last-Event-ID: <the second frame's id> gets the third to
  the fifth from the history, in order, then a live one; so does a
  WebSocket with the m0.events subprotocol and ?last_event_id=. A HEAD is the
  stream's head without a body; a room whose name makes no channel (more
  than 64 bytes) is 404.
- Files the reader refuses, each exit 78 and one line naming the key and
  the fix: a channel "m0.x", a route with both actor and stream, an
  unknown key, a {name} the pattern lacks, a POST stream route, a
  timeout_ms on a stream route.
"""
import asyncio
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

try:
    import websockets
except ImportError:  # Debian's package, when the tests run under another python3 of the same version
    sys.path.append("/usr/lib/python3/dist-packages")
    import websockets

import harness
from harness import BIN, Failures, sanitizer_report, Prefork, Server, private_dir, run, run_parts, wait_for, write_json

F = Failures()
TMP = tempfile.mkdtemp(prefix="m0-front-streams-")
PROGRAMS = []
PYDIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "python"))

# The external actor: POST /rooms/{room}/say publishes the body on "room.<room>", then answers 200 (the frame
# went on the instance's link before the reply, so a client that has the 200 has had the frame sent).
ROOMS = r"""
import sys
sys.path.insert(0, sys.argv[1])
import m0actor
actor = m0actor.Instance(sys.argv[2])
def receive(req):
    room = req.params[0] if req.params else "?"
    text = req.body.decode() if isinstance(req.body, bytes) else str(req.body)
    ok = actor.publish("room." + room, "event: said\ndata: " + text, timeout=5)
    return (200 if ok else 500), [("Content-Type", "text/plain")], b"said"
sys.exit(actor.serve(receive))
"""

TOPO = {
    "app_actors": [{"name": "rooms", "placement": "external"}],
    "routes": [{"method": "POST", "pattern": "/rooms/{room}/say", "actor": "rooms", "timeout_ms": 5000},
               {"method": "GET", "pattern": "/rooms/{room}/live", "stream": "room.{room}"}],
}
HEADERS_KW = "additional_headers" if int(websockets.__version__.split(".")[0]) >= 14 else "extra_headers"


def say(port, room, text, timeout=10):
    body = text.encode()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"POST /rooms/{room}/say HTTP/1.1\r\nHost: t\r\nContent-Length: {len(body)}\r\n"
                  f"Connection: close\r\n\r\n".encode() + body)
        buf = b""
        while True:
            b = s.recv(4096)
            if not b:
                break
            buf += b
    m = re.match(rb"HTTP/1\.1 (\d+)", buf)
    return int(m.group(1)) if m else None


class Sse(harness.EventStream):
    """GET PATH as an EventSource asks it; its head read (subscribed then)."""

    def __init__(self, port, path, headers=()):
        super().__init__(port, path, 10, [("Accept", "text/event-stream")] + list(headers))

    def frames(self):
        return [(int(m.group(1)), m.group(2).decode()) for m in
                re.finditer(rb"id: (\d+)\nevent: said\ndata: ([^\n]*)\n\n", self.buf)]


class Curl:
    """curl -sN -v on PATH, its body and its trace (where the head shows at
    once: curl holds a head it prints with -i until the body's first bytes)
    gathered by threads."""

    def __init__(self, port, path):
        self.p = subprocess.Popen(["curl", "-sN", "-v", "--max-time", "60", f"http://127.0.0.1:{port}{path}"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        PROGRAMS.append(self.p)
        self.out, self.trace = b"", b""
        for name in ("out", "trace"):
            threading.Thread(target=self._read, args=(name,), daemon=True).start()

    def _read(self, name):
        f = self.p.stdout if name == "out" else self.p.stderr
        for chunk in iter(lambda: f.read1(65536), b""):
            setattr(self, name, getattr(self, name) + chunk)

    def frames(self):
        return [(int(m.group(1)), m.group(2).decode()) for m in
                re.finditer(rb"id: (\d+)\r?\nevent: said\r?\ndata: ([^\r\n]*)\r?\n", self.out)]

    def close(self):
        self.p.kill()
        self.p.wait(5)


class Ws:
    """A python3-websockets client of PATH on a thread of its own: its
    messages in .got; .open once the 101 came (subscribed then)."""

    def __init__(self, port, path):
        self.url, self.got, self.open, self.err = f"ws://127.0.0.1:{port}{path}", [], threading.Event(), None
        self.stop = threading.Event()
        self.t = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self.t.start()

    async def _run(self):
        try:
            async with websockets.connect(self.url, open_timeout=10) as ws:
                self.open.set()
                while not self.stop.is_set():
                    try:
                        self.got.append(await asyncio.wait_for(ws.recv(), 0.2))
                    except asyncio.TimeoutError:
                        pass
        except Exception as x:  # said by the check that reads .err
            self.err = repr(x)
            self.open.set()

    def close(self):
        self.stop.set()
        self.t.join(10)


def start_rooms(url):
    p = subprocess.Popen([sys.executable, "-c", ROOMS, PYDIR, url], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    PROGRAMS.append(p)
    return p


def doctor(path, rd, label):
    url, rc, out, err = harness.doctor_url(path, "rooms", rd, app="m0")
    routes = []
    try:
        routes = harness.as_json(out.strip().splitlines()[-1])["topology"]["routes"]
    except (TypeError, KeyError, IndexError):
        pass
    F.check({"method": "GET", "pattern": "/rooms/{room}/live", "stream": "room.{room}"} in routes
            and any(r.get("actor") == "rooms" for r in routes),
            f"{label}: the doctor prints the stream route and the actor's ({rc}: {routes})")
    return url


def serve(label, topo, cls):
    rd = private_dir("rd-", TMP)
    path = write_json(topo, TMP, indent=2)
    url = doctor(path, rd, label)
    if url is None:
        F.check(False, f"{label}: the doctor names rooms' url")
        return
    with cls("m0", "--port", "0", "--topology", path, "--run-dir", rd) as s:
        actor = start_rooms(url)
        F.check(wait_for(lambda: say(s.port, "warm", "w") == 200, 20),
                f"{label}: the external actor answers through the front end")
        live(label, s.port)
        resume(label, s.port)
        edges(label, s.port)
        actor.kill()
        actor.wait(5)
        rc, err = s.stop(), s.stderr()
        F.check(rc == 0 and not sanitizer_report(err),
                f"{label}: SIGTERM -> exit 0, no sanitizer report ({rc}): {err[-1500:]}")


def live(label, port):
    sse, red = Sse(port, "/rooms/blue/live"), Sse(port, "/rooms/red/live")
    F.check(sse.buf.startswith(b"HTTP/1.1 200") and b"text/event-stream" in sse.buf.split(b"\r\n\r\n")[0],
            f"{label}: /rooms/blue/live is an SSE stream ({sse.buf[:120]!r})")
    curl, ws = Curl(port, "/rooms/blue/live"), Ws(port, "/rooms/blue/live")
    F.check(wait_for(lambda: b"< Content-Type: text/event-stream" in curl.trace, 10) and ws.open.wait(10) and ws.err is None,
            f"{label}: curl -N and the WebSocket are subscribed ({curl.trace[-300:]!r}, {ws.err})")
    words = [f"b{i}" for i in range(5)]
    F.check(all(say(port, "blue", w) == 200 for w in words) and say(port, "red", "r0") == 200,
            f"{label}: five frames said in blue, one in red")
    want = len(words)
    F.check(sse.until(lambda: len(sse.frames()) >= want, 10) and [d for _, d in sse.frames()] == words,
            f"{label}: the raw SSE client gets blue's frames in order ({sse.frames()})")
    ids = [i for i, _ in sse.frames()]
    F.check(ids == sorted(set(ids)), f"{label}: their ids go up ({ids})")
    F.check(wait_for(lambda: len(curl.frames()) >= want, 10) and [d for _, d in curl.frames()] == words,
            f"{label}: curl -N gets them in order ({curl.frames()})")
    F.check(wait_for(lambda: len(ws.got) >= want, 10) and ws.got[:want] == words,
            f"{label}: the WebSocket gets their data in order ({ws.got})")
    F.check(red.until(lambda: len(red.frames()) >= 1, 10) and [d for _, d in red.frames()] == ["r0"],
            f"{label}: /rooms/red/live gets red's frame alone ({red.frames()})")
    for c in (sse, red, curl, ws):
        c.close()


def resume(label, port):
    first = Sse(port, "/rooms/green/live")
    words = [f"g{i}" for i in range(5)]
    F.check(all(say(port, "green", w) == 200 for w in words), f"{label}: five frames said in green")
    F.check(first.until(lambda: len(first.frames()) >= 5, 10), f"{label}: green's frames came ({first.frames()})")
    first.close()
    fr = first.frames()
    if len(fr) < 5:
        return
    back = Sse(port, "/rooms/green/live", [("Last-Event-ID", str(fr[1][0]))])
    F.check(back.until(lambda: len(back.frames()) >= 3, 10) and back.frames()[:3] == fr[2:5],
            f"{label}: Last-Event-ID {fr[1][0]} resumes with the third to the fifth ({back.frames()}, {fr})")
    F.check(say(port, "green", "g5") == 200 and back.until(lambda: len(back.frames()) >= 4, 10)
            and [d for _, d in back.frames()] == words[2:] + ["g5"],
            f"{label}: then the live one ({back.frames()})")
    back.close()
    got = asyncio.run(ws_resume(port, fr[1][0], 4))
    F.check([(int(m.group(1)), m.group(2)) for m in (re.match(r"id: (\d+)\nevent: said\ndata: (.*)$", x)
                                                      for x in got) if m][:3] == fr[2:5] and len(got) == 4,
            f"{label}: a WebSocket with m0.events and ?last_event_id={fr[1][0]} resumes there too ({got})")


async def ws_resume(port, last, n):
    out = []
    async with websockets.connect(f"ws://127.0.0.1:{port}/rooms/green/live?last_event_id={last}",
                                  subprotocols=["m0.events"], open_timeout=10) as ws:
        try:
            while len(out) < n:
                out.append(await asyncio.wait_for(ws.recv(), 10))
        except (asyncio.TimeoutError, websockets.ConnectionClosed):
            pass
    return out


def edges(label, port):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"HEAD /rooms/blue/live HTTP/1.1\r\nHost: t\r\n\r\nGET /rooms/" + b"x" * 70 + b"/live HTTP/1.1\r\n"
                  b"Host: t\r\nConnection: close\r\n\r\n")
        buf = b""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            b = s.recv(4096)
            if not b:
                break
            buf += b
    heads = re.findall(rb"HTTP/1\.1 (\d+)", buf)
    F.check(heads[:2] == [b"200", b"404"] and b"text/event-stream" in buf,
            f"{label}: HEAD is the stream's head and keeps its connection; a room of no channel is 404 ({buf[:300]!r})")


def threads():
    serve("threads", dict(TOPO, mode="threads", loops=2), Server)


def prefork():
    serve("prefork", dict(TOPO, mode="prefork", loops=2), Prefork)


def refused():
    base = [{"name": "rooms", "placement": "external"}]
    cases = [
        ({"method": "GET", "pattern": "/x", "stream": "m0.x"}, 'routes[0].stream begins "m0."'),
        ({"method": "GET", "pattern": "/x", "stream": "a", "actor": "rooms"}, 'routes[0] has both "actor" and "stream"'),
        ({"method": "GET", "pattern": "/x", "stream": "a", "channel": "a"}, 'routes[0] has the unknown key "channel"'),
        ({"method": "GET", "pattern": "/x/{a}", "stream": "r.{b}"}, "routes[0].stream names a {parameter} that is no"),
        ({"method": "POST", "pattern": "/x", "stream": "a"}, 'routes[0].method is "POST": a stream route is "GET"'),
        ({"method": "GET", "pattern": "/x", "stream": "a", "timeout_ms": 5}, "routes[0].timeout_ms is for an actor's"),
        ({"method": "GET", "pattern": "/x", "stream": "two words"}, "routes[0].stream holds a space"),
    ]
    for route, line in cases:
        path = write_json({"app_actors": base, "routes": [route]}, TMP)
        rc, out, err = run("m0", "--topology", path, "--port", "0")
        lines = [x for x in err.splitlines() if x.strip()]
        F.check(rc == 78 and len(lines) == 1 and line in lines[0] and "(" in lines[0],
                f"{route}: exit 78 and one line naming it ({rc}, {err!r})")


run_parts(F, [("refused", refused), ("threads", threads), ("prefork", prefork)], PROGRAMS, TMP)
