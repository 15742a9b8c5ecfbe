"""Frames reach each stream in id order, whoever published them
(docs/behaviour.md, Streams and the bus: In id order; http/stream.c,
chan_late).

Every publisher takes its id from the one shared counter and then sends its
frame to every loop; two publishers that take ids in one order can have
their frames reach a loop in the other (two threads of the host, two
processes, two pipes into one mailbox). Such a late frame is dropped on
that loop's channel, counted and told, never written after a higher id.

With `host_check` (its producer beating every millisecond on `beats`, its
`echo` actor on a thread of the host) in single mode and under
`--threads 2`, while two `m0pub` processes (each 6,000 lines on standard
input) and four connections of pipelined `POST /actor/echo` with
`x-publish: beats` (the actor's instance publishes: the host numbers the
frame) flood the channel all at once, two raw SSE clients on `/events` and
one raw WebSocket client on `/ws` read it:
- each SSE stream's ids are strictly increasing (an `m0.gap` between them
  is allowed: it is how a loss is told, docs/behaviour.md A slow client);
- the WebSocket's messages carry data only, so each is given the id an SSE
  stream saw with the same data (every datum is unique: `a-N`, `b-N`,
  `e-N`, a beat's number): those ids are strictly increasing too; the
  socket may be closed with 1013 if it fell behind (documented), nothing
  else;
- each stream received frames of all three outside publishers (the flood
  did reach it), and frames numbered after every flood frame still arrive;
- what was dropped is counted: m0_channel_frames_dropped_total{channel=
  "beats"} is at least the number of late frames the streams were told of
  (printed: how often the publishers crossed by more than the loop holds
  a frame for, http/order.c);
- the loop put crossed frames back in order rather than drop them: in
  single mode a stream was told of at most a quarter of the flood's
  frames as late (with the hold gone, three quarters and more were; with
  it, none on an idle machine, 5 % under two floods and --workers 2);
- SIGTERM: exit 0.

A frame later than the loop holds for (its channel's check, the last
guard), with the producer quiet: the echo instance is asked to publish on
`m0.no` (refused: no channel a stream may use), which takes an id H from
the counter and publishes nothing; the next frame (H+1) waits for H, then
is written; `m0pub --id H` (an id taken and never written, so the loop
admits it) then reaches the loop after H+1: the stream never gets it, its
ids still rise, and m0_channel_frames_dropped_total{channel="beats"} counts
it.
"""
import http.client
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time

from harness import BIN, Failures, Server, wait_for
from rawhttp import ws_frames

F = Failures()
LINES = 6000  # per m0pub
POSTS = 750  # per echo connection (below --max-keepalive-requests' 1000)
CONNS = 4


class Reader:
    """A socket that a daemon thread reads (self.read) until it closes."""

    def start(self):
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.thread.join(5)


class SSE(Reader):
    """A raw SSE client: its frames as (event, id or None, data)."""

    def __init__(self, port):
        self.frames = []
        self.err = None
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.sendall(b"GET /events HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n\r\n")
        self.start()

    def read(self):
        buf = b""
        head = False
        try:
            self.sock.settimeout(60)
            while True:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    return
                buf += chunk
                if not head:
                    if b"\r\n\r\n" not in buf:
                        continue
                    buf = buf.split(b"\r\n\r\n", 1)[1]
                    head = True
                *whole, buf = buf.split(b"\n\n")
                for ev in whole:
                    f = {"event": "message", "id": None, "data": []}
                    for line in ev.decode().split("\n"):
                        k, _, v = line.partition(": ")
                        if k == "id":
                            f["id"] = int(v)
                        elif k == "event":
                            f["event"] = v
                        elif k == "data":
                            f["data"].append(v)
                    if not ev.startswith(b":"):
                        self.frames.append((f["event"], f["id"], "\n".join(f["data"])))
        except OSError as e:
            self.err = e


class WS(Reader):
    """A raw WebSocket client on /ws: its text messages, and the close code."""

    def __init__(self, port):
        self.msgs = []
        self.code = None
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.sendall(b"GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                          b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("closed before the upgrade")
            buf += chunk
        head, self.rest = buf.split(b"\r\n\r\n", 1)
        self.status = head.split(b" ")[1]
        self.start()

    def read(self):
        buf = self.rest
        try:
            self.sock.settimeout(60)
            while True:
                frames, buf = ws_frames(buf)
                for op, payload in frames:
                    if op == 1:
                        self.msgs.append(payload.decode())
                    elif op == 8:
                        self.code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005
                        return
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    return
                buf += chunk
        except OSError:
            pass


def echo_flood(port, tag, n, out):
    """n pipelined POST /actor/echo with x-publish: beats, body TAG-k, in
    windows of 50; how many were answered 200 with published true."""
    ok = 0

    def more():
        chunk = s.recv(1 << 16)
        if not chunk:
            raise ConnectionError(f"closed after {ok} answers")
        return chunk

    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=20)
        k = 0
        buf = b""
        while k < n:
            batch = min(50, n - k)
            req = b"".join(b"POST /actor/echo HTTP/1.1\r\nHost: t\r\nx-publish: beats\r\nContent-Length: %d\r\n\r\n%s"
                           % (len(d), d) for d in (f"{tag}-{k + i}".encode() for i in range(batch)))
            s.sendall(req)
            k += batch
            got = 0
            while got < batch:
                while b"\r\n\r\n" not in buf:
                    buf += more()
                head, buf = buf.split(b"\r\n\r\n", 1)
                m = re.search(rb"(?i)content-length: *(\d+)", head)
                ln = int(m.group(1)) if m else 0
                while len(buf) < ln:
                    buf += more()
                body, buf = buf[:ln], buf[ln:]
                got += 1
                ok += head.startswith(b"HTTP/1.1 200") and b'"published":true' in body
        s.close()
    except OSError as e:
        print(f"test: echo flood {tag}: {e}", flush=True)
    out[tag] = ok


def counter(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    return int(re.search(r"^m0_events_published_total (\d+)", text, re.M).group(1))


def dropped(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    m = re.search(r'^m0_channel_frames_dropped_total\{channel="beats"\} (\d+)', text, re.M)
    return int(m.group(1)) if m else 0


def increasing(ids):
    """The first place ids do not strictly rise: (i, ids[i-1], ids[i]) or None."""
    for i in range(1, len(ids)):
        if ids[i] <= ids[i - 1]:
            return (i, ids[i - 1], ids[i])
    return None


def told_late(frames):
    """How many frames m0.gap events said were lost below what the stream had."""
    n = 0
    for ev, _, data in frames:
        if ev == "m0.gap":
            m = re.search(r'"after":(\d+),"first":(\d+),"last":(\d+),"lost":(\d+)', data)
            if m and int(m.group(2)) and int(m.group(2)) <= int(m.group(1)):
                n += int(m.group(4))
    return n


def flood(mode):
    label = " ".join(mode) or "single"
    run = tempfile.mkdtemp(prefix="m0-order-")
    os.chmod(run, 0o700)
    env = {"M0_HOSTCHECK_PERIOD_MS": "1"}
    with Server("host_check", "--port", "0", "--run-dir", run, "--metrics-path", "/metrics", *mode, env=env) as s:
        streams = [SSE(s.port), SSE(s.port)]
        ws = WS(s.port)
        F.check(ws.status == b"101", f"{label}: the WebSocket opened ({ws.status})")
        ok = wait_for(lambda: all(len(st.frames) >= 3 for st in streams) and len(ws.msgs) >= 3, 10)
        F.check(ok, f"{label}: both streams and the WebSocket receive beats before the flood")
        pubs = [subprocess.Popen([os.path.join(BIN, "m0pub"), "--run-dir", run, "--event", "flood"],
                                 stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                for _ in ("a", "b")]
        answered = {}
        echoes = [threading.Thread(target=echo_flood, args=(s.port, f"e{i}", POSTS, answered)) for i in range(CONNS)]
        for t in echoes:
            t.start()
        feeders = [threading.Thread(target=p.communicate, args=("".join(f"{tag}-{k}\n" for k in range(LINES)).encode(),),
                                    kwargs={"timeout": 60})
                   for p, tag in zip(pubs, ("a", "b"))]
        for t in feeders:
            t.start()
        t0 = time.monotonic()
        for t in feeders + echoes:
            t.join(90)
        print(f"test: {label}: the flood took {time.monotonic() - t0:.1f}s", flush=True)
        rcs = [p.wait(timeout=10) for p in pubs]
        F.check(rcs == [0, 0], f"{label}: both m0pub floods of {LINES} lines exited 0 ({rcs})")
        F.check(sum(answered.values()) >= CONNS * POSTS // 2,
                f"{label}: the echo instance published most of its {CONNS * POSTS} frames ({answered})")
        # A marker after every flood frame: every stream gets it (the flood is over for it).
        mark = subprocess.run([os.path.join(BIN, "m0pub"), "--run-dir", run, "--event", "mark", "after-flood"],
                              capture_output=True, text=True, timeout=10)
        F.check(mark.returncode == 0, f"{label}: the marker published ({mark.returncode}, {mark.stderr!r})")
        mid = int(mark.stdout.strip() or 0)

        def past():  # every reader has a frame numbered at or after the marker (it, or a beat after it)
            seen = {d: i for st in streams for _, i, d in list(st.frames) if i}
            return all(any((f[1] or 0) >= mid for f in list(st.frames)) for st in streams) and \
                (ws.code is not None or any(seen.get(m, 0) >= mid for m in ws.msgs[-100:]))

        F.check(wait_for(past, 20), f"{label}: every stream and the WebSocket got frames numbered from the marker's "
                                    f"id {mid} on")
        ids_of = {}
        for st in streams:
            frames = list(st.frames)
            ids = [i for _, i, _ in frames if i is not None]
            for _, i, d in frames:
                if i is not None:
                    ids_of[d] = i
            bad = increasing(ids)
            F.check(bad is None, f"{label}: an SSE stream's {len(ids)} ids are strictly increasing "
                                 f"(first fall at {bad})")
            kinds = {d.split("-")[0] for ev, _, d in frames if ev == "flood" or d.startswith("e")}
            F.check({"a", "b"} <= kinds and any(k.startswith("e") for k in kinds),
                    f"{label}: the stream received frames of both m0pubs and the echo instance ({sorted(kinds)[:8]})")
        msgs = list(ws.msgs)
        mapped = [ids_of[m] for m in msgs if m in ids_of]
        bad = increasing(mapped)
        F.check(bad is None, f"{label}: the WebSocket's {len(mapped)} messages (of {len(msgs)}) come in id order "
                             f"(first fall at {bad})")
        F.check(ws.code in (None, 1013), f"{label}: the WebSocket stayed open or was closed with 1013 ({ws.code})")
        F.check(len(mapped) >= 100, f"{label}: most WebSocket messages were seen on a stream too ({len(mapped)})")
        late = max(told_late(st.frames) for st in streams)
        d = dropped(s.port)
        F.check(d >= late, f"{label}: m0_channel_frames_dropped_total{{channel=\"beats\"}} {d} counts at least the "
                           f"{late} late frames a stream was told of")
        if not mode:
            F.check(late <= (2 * LINES + CONNS * POSTS) // 4,
                    f"{label}: crossed frames were put back in order, at most a quarter told as late ({late})")
        print(f"test: {label}: {len(ids_of)} ids seen, {late} late frames told to one stream, {d} dropped on beats",
              flush=True)
        for st in streams:
            st.close()
        ws.close()
        F.check(s.stop(timeout=15) == 0, f"{label}: SIGTERM -> exit 0")
    shutil.rmtree(run, ignore_errors=True)


def late():
    label = "late"
    run = tempfile.mkdtemp(prefix="m0-order-")
    os.chmod(run, 0o700)
    with Server("host_check", "--port", "0", "--run-dir", run, "--metrics-path", "/metrics",
                env={"M0_HOSTCHECK_PERIOD_MS": "100000"}) as s:
        st = SSE(s.port)

        def pub(*args):
            p = subprocess.run([os.path.join(BIN, "m0pub"), "--run-dir", run, "--event", "late", *args],
                               capture_output=True, text=True, timeout=10)
            return p.returncode, p.stdout.strip()

        rc, first = pub("first")
        F.check(rc == 0 and wait_for(lambda: any(d == "first" for _, _, d in st.frames), 5),
                f"{label}: a first frame ({rc}, {first}) reaches the stream")
        was = counter(s.port)
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=5)
        c.request("POST", "/actor/echo", body=b"never", headers={"x-publish": "m0.no"})
        body = c.getresponse().read()
        c.close()
        hole = counter(s.port)
        F.check(b'"published":false' in body and hole == was + 1,
                f"{label}: the refused publish took id {hole} and published nothing ({body[:80]!r}, {was} -> {hole})")
        rc, after = pub("after-hole")
        F.check(rc == 0 and wait_for(lambda: any(d == "after-hole" for _, _, d in st.frames), 5),
                f"{label}: the next frame ({after}) is written once its wait for {hole} is over")
        rc, out = pub("--id", str(hole), "too-late")
        F.check(rc == 0 and out == str(hole), f"{label}: m0pub --id {hole} published ({rc}, {out!r})")
        rc, _ = pub("closing")
        wait_for(lambda: any(d == "closing" for _, _, d in st.frames), 5)
        frames = list(st.frames)
        ids = [i for _, i, _ in frames if i is not None]
        F.check(not any(d == "too-late" for _, _, d in frames) and increasing(ids) is None,
                f"{label}: the stream never got id {hole} after {after}; its ids rise ({frames[-4:]})")
        F.check(dropped(s.port) >= 1, f"{label}: m0_channel_frames_dropped_total{{channel=\"beats\"}} counts it "
                                      f"({dropped(s.port)})")
        st.close()
        F.check(s.stop() == 0, f"{label}: SIGTERM -> exit 0")
    shutil.rmtree(run, ignore_errors=True)


for m in ([], ["--threads", "2"]):
    flood(m)
late()
F.done()
