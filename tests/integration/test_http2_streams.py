#!/usr/bin/env python3
"""Server-sent-event streams and replies in pieces over HTTP/2
(docs/behaviour.md, HTTP/2; http/h2_stream.c), host_check's GET /events
(the producer's beats, each an event with an id) with hand-made frames and
curl:

1. cleartext prior knowledge: two streams on one connection (streams 1 and
   3), each answered HEADERS then DATA, the events of each in id order;
   /metrics counts both subscribers; the client's RST_STREAM of stream 1
   takes it out of the fan-out (the count goes back to 1) while stream 3
   is still served; a WebSocket upgrade's fields on a stream reset it
   (WebSocket stays HTTP/1.1);
1b. flow control: a subscriber whose stream window is 0 (SETTINGS) is a
   slow one: m0pub's 30 KB frames past its 64 KiB cap are dropped for it
   and counted while a reading stream gets each; once it opens its window
   it gets what waited, an m0.gap telling the loss, then the next frame;
1c. an application actor's reply in pieces (/actor/stream: a writer): whole,
   10 MiB of it through flow control, and one reset halfway leaves the next
   served; a view's writer (todo's /todos/export, NDJSON) whole;
1c'. a reply in pieces whose client opens no window (SETTINGS 0) is reset
   CANCEL once --body-timeout-ms passes with nothing sent, and the
   connection answers its next stream;
1d. a route that is a channel (m0 --topology, "stream"): m0pub's frames
   arrive on its HTTP/2 stream in order;
2. the drain (SIGTERM): the open stream is sent its `event: m0.closing`
   and ends (END_STREAM); one whose window is 0 (which can take no
   goodbye) is reset CANCEL and its connection closed; the host exits 0
   within the drain's bound;
3. HTTPS, ALPN h2: curl --http2 reads the stream (HTTP version 2, events in
   id order) until its --max-time.
Each host is stopped by SIGTERM: exit 0, no sanitizer report (an ASan
build's leak of a stand-in, say).
"""
import json
import os
import re
import socket
import struct
import subprocess
import tempfile

from harness import BIN, Failures, Server, run_parts, sanitizer_report, wait_for
from test_http2 import (DATA, END_HEADERS, END_STREAM, HEADERS, PREFACE, RST, SETTINGS, TMP, connect, frame,
                        literal, make_certs, path, request)

F = Failures()
CANCEL = 0x8
WINDOW_UPDATE = 8
INITIAL_WINDOW_SIZE = 4
BIG = "x" * 30000  # two of these fill a subscriber's 64 KiB queue


class Conn:
    """One HTTP/2 connection read frame by frame; each stream's DATA bytes kept."""

    def __init__(self, port, window=(1 << 31) - 1):
        self.s = connect(port)
        self.s.settimeout(10)
        self.buf = b""
        self.frames = []
        self.data = {}
        self.ended = set()
        self.eof = False
        # Each stream's window (SETTINGS_INITIAL_WINDOW_SIZE: 0 takes no DATA until a WINDOW_UPDATE), and a
        # connection's window large enough that flow control never holds a frame here.
        self.s.sendall(PREFACE + frame(SETTINGS, 0, 0, struct.pack(">HI", INITIAL_WINDOW_SIZE, window)) +
                       frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 30)))

    def open(self, sid, path_=b"/events"):
        self.s.sendall(frame(HEADERS, END_STREAM | END_HEADERS, sid, request(path_)))

    def read_until(self, done, limit=2000):
        """Reads frames until done() or EOF, at most `limit` reads (each bounded by the socket timeout)."""
        for _ in range(limit):
            if done():
                return True
            try:
                b = self.s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                b = b""
            if not b:
                self.eof = True
                return done()
            self.buf += b
            while len(self.buf) >= 9:
                n = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) < 9 + n:
                    break
                t, fl, sid = self.buf[3], self.buf[4], int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
                p = self.buf[9:9 + n]
                self.frames.append((t, fl, sid, p))
                if t == DATA:
                    self.data[sid] = self.data.get(sid, b"") + p
                if t in (DATA, HEADERS) and fl & END_STREAM:
                    self.ended.add(sid)
                self.buf = self.buf[9 + n:]
        return done()

    def ids(self, sid):
        return [int(m) for m in re.findall(rb"^id: (\d+)$", self.data.get(sid, b""), re.M)]

    def close(self):
        self.s.close()


def streams_metric(port):
    """The sum of m0_streams over the loops (HTTP/1.1), or None."""
    p = subprocess.run(["curl", "-sS", "--max-time", "5", f"http://127.0.0.1:{port}/metrics"], capture_output=True,
                       timeout=10)
    v = re.findall(rb'^m0_streams\{loop="\d+"\} (\d+)$', p.stdout, re.M)
    return sum(int(x) for x in v) if v else None


def stopped(s, label, signalled=False):
    """SIGTERM (unless sent already), then exit 0 and no sanitizer's report (an ASan build's leak or misuse)."""
    rc = s.wait(15) if signalled else s.stop(timeout=15)
    F.check(rc == 0, f"{label}: the host exits 0 ({rc})")
    F.check(not sanitizer_report(s.stderr()), f"{label}: no sanitizer report:\n{sanitizer_report(s.stderr())}")


def in_order(ids):
    return all(a < b for a, b in zip(ids, ids[1:]))


def part_two_streams():
    with Server("host_check", "--port", "0", "--http2", "--metrics-path", "/metrics") as s:
        c = Conn(s.port)
        c.open(1)
        c.open(3)
        got = c.read_until(lambda: len(c.ids(1)) >= 3 and len(c.ids(3)) >= 3)
        F.check(got, f"two streams on one connection: events on each (1: {c.ids(1)}, 3: {c.ids(3)}, eof {c.eof})")
        for sid in (1, 3):
            heads = [i for i, (t, _, x, _) in enumerate(c.frames) if t == HEADERS and x == sid]
            datas = [i for i, (t, _, x, _) in enumerate(c.frames) if t == DATA and x == sid]
            F.check(heads and datas and heads[0] < datas[0], f"stream {sid}: HEADERS, then DATA")
            F.check(in_order(c.ids(sid)), f"stream {sid}: events in id order: {c.ids(sid)}")
            F.check(sid not in c.ended, f"stream {sid}: not ended")
        F.check(wait_for(lambda: streams_metric(s.port) == 2, 10), f"/metrics: 2 streams ({streams_metric(s.port)})")
        c.s.sendall(frame(RST, 0, 1, struct.pack(">I", CANCEL)))
        F.check(wait_for(lambda: streams_metric(s.port) == 1, 10),
                f"RST_STREAM of stream 1: its subscriber gone, 1 stream left ({streams_metric(s.port)})")
        seen = len(c.ids(3))
        got = c.read_until(lambda: len(c.ids(3)) >= seen + 3)
        F.check(got and in_order(c.ids(3)), f"stream 3 is still served after stream 1's reset: {c.ids(3)[seen:]}")
        # WebSocket stays HTTP/1.1: an upgrade's fields on a stream are a protocol error (reset).
        upgrade = request(b"/events") + literal(b"upgrade", b"websocket")
        c.s.sendall(frame(HEADERS, END_STREAM | END_HEADERS, 5, upgrade))
        F.check(c.read_until(lambda: any(t == RST and x == 5 for t, _, x, _ in c.frames)),
                "a WebSocket upgrade's fields over HTTP/2: the stream is reset")
        c.close()
        F.check(wait_for(lambda: streams_metric(s.port) == 0, 10),
                f"the connection closed: no stream left ({streams_metric(s.port)})")
        stopped(s, "two streams")


def dropped(port):
    """m0_channel_frames_dropped_total{channel="beats"} (0 when absent)."""
    p = subprocess.run(["curl", "-sS", "--max-time", "5", f"http://127.0.0.1:{port}/metrics"], capture_output=True,
                       timeout=10)
    m = re.search(rb'^m0_channel_frames_dropped_total\{channel="beats"\} (\d+)$', p.stdout, re.M)
    return int(m.group(1)) if m else 0


def part_window():
    """A subscriber that opens no window is a slow one: its frames are
    dropped past the cap and counted, and once it opens its window it gets
    what waited, then an m0.gap naming the loss, then the next frame."""
    run_dir = tempfile.mkdtemp(dir=TMP)
    os.chmod(run_dir, 0o700)
    with Server("host_check", "--port", "0", "--http2", "--run-dir", run_dir, "--metrics-path", "/metrics",
                env={"M0_HOSTCHECK_PERIOD_MS": "100000"}) as s:
        reader, stuck = Conn(s.port), Conn(s.port, window=0)
        reader.open(1)
        stuck.open(1)
        F.check(stuck.read_until(lambda: any(t == HEADERS and x == 1 for t, _, x, _ in stuck.frames)),
                "window 0: the stream's HEADERS come (not flow-controlled)")
        F.check(wait_for(lambda: streams_metric(s.port) == 2, 10), f"window 0: 2 streams ({streams_metric(s.port)})")
        pub = subprocess.Popen([os.path.join(BIN, "m0pub"), "--run-dir", run_dir, "--event", "big"],
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        n = 0
        while n < 40 and dropped(s.port) == 0:  # one at a time, each once the reader has it
            pub.stdin.write(f"{n} {BIG}\n")
            pub.stdin.flush()
            n += 1
            if not reader.read_until(lambda: reader.data.get(1, b"").count(b"event: big") >= n):
                break
        lost = dropped(s.port)
        F.check(lost >= 1 and not stuck.data.get(1), f"window 0: frames dropped for it past the cap ({lost} of {n}), "
                                                     f"no DATA sent to it ({len(stuck.data.get(1, b''))} bytes)")
        stuck.s.sendall(frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 1 << 30)))
        F.check(stuck.read_until(lambda: b"event: m0.gap" in stuck.data.get(1, b"")),
                f"window opened: an m0.gap comes after what waited: ...{stuck.data.get(1, b'')[-200:]!r}")
        pub.stdin.write(f"{n} {BIG}\n")
        pub.stdin.flush()
        data = stuck.data.get(1, b"")
        got = stuck.read_until(lambda: stuck.data.get(1, b"").count(b"event: big") > data.count(b"event: big"))
        after = stuck.data.get(1, b"")
        F.check(got and after.index(b"event: m0.gap") < after.rindex(b"event: big"),
                f"window opened: the next frame follows the gap ({got})")
        gap = re.search(rb'event: m0.gap\ndata: (\{.*\})', after)
        told = json.loads(gap.group(1)) if gap else {}
        F.check(told.get("lost", 0) >= 1 and told.get("lost", 0) == lost, f"window opened: the gap tells the {lost} "
                                                                        f"lost: {told}")
        pub.stdin.close()
        pub.wait(timeout=10)
        reader.close()
        stuck.close()
        stopped(s, "window")


def part_pieces():
    """An application actor's reply in pieces (host_check's /actor/stream, a
    writer) over HTTP/2: whole, 10 MiB of it through flow control, and one
    the client resets halfway leaves the host serving the next whole."""
    with Server("host_check", "--port", "0", "--http2") as s:
        u = f"http://127.0.0.1:{s.port}/actor/stream"
        p = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "--max-time", "20", "-w",
                            "\n%{http_code} %{http_version}", u + "?n=3&size=5"], capture_output=True, timeout=30)
        F.check(p.stdout == b"aaaa\nbbbb\ncccc\n\n200 2",
                f"pieces: three pieces, then the end: {p.stdout!r} {p.stderr!r}")
        p = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "--max-time", "30", u + "?n=40&size=262144"],
                           capture_output=True, timeout=40)
        F.check(p.returncode == 0 and len(p.stdout) == 40 * 262144 and p.stdout[-262144:] == b"n" * 262143 + b"\n",
                f"pieces: 40 of 256 KiB whole ({len(p.stdout)} bytes, rc {p.returncode}) {p.stderr!r}")
        c = Conn(s.port, window=65535)
        c.open(1, b"/actor/stream?n=50&size=262144&ms=20")
        F.check(c.read_until(lambda: len(c.data.get(1, b"")) >= 1), "pieces: the first DATA")
        c.s.sendall(frame(RST, 0, 1, struct.pack(">I", CANCEL)))
        c.close()
        p = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "--max-time", "20", u + "?n=3&size=5"],
                           capture_output=True, timeout=30)
        F.check(p.stdout == b"aaaa\nbbbb\ncccc\n", f"pieces: after a reset one, the next is whole: {p.stdout!r}")
        stopped(s, "pieces")
    with Server("todo", "--port", "0", "--http2", "--blocking-threads", "1") as s:  # a view's writer
        u = f"http://127.0.0.1:{s.port}/todos"
        for i in range(3):
            subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "--max-time", "10", "-H",
                            "content-type: application/json", "-d", json.dumps({"title": f"t{i}"}), u],
                           capture_output=True, timeout=20)
        p = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "--max-time", "10", "-w", "%{http_version}",
                            u + "/export"], capture_output=True, timeout=20)
        lines = p.stdout.decode(errors="replace").split("\n")
        titles = [json.loads(x).get("title") for x in lines[:-1] if x.startswith("{")]
        F.check(titles == ["t0", "t1", "t2"] and lines[-1] == "2", f"a view's writer (todo's export): {p.stdout!r}")
        stopped(s, "a view's writer")


def part_stuck_writer():
    """A reply in pieces whose client opens no window takes none of it: its
    stream is reset CANCEL once --body-timeout-ms passes with nothing sent
    (HTTP/1.1's stuck writer is closed), and the connection serves on."""
    with Server("host_check", "--port", "0", "--http2", "--body-timeout-ms", "1000") as s:
        c = Conn(s.port, window=0)
        c.open(1, b"/actor/stream?n=50&size=262144")
        reset = c.read_until(lambda: any(t == RST and sid == 1 for t, _, sid, _ in c.frames))
        code = next((int.from_bytes(p[:4], "big") for t, _, sid, p in c.frames if t == RST and sid == 1), None)
        F.check(reset and code == CANCEL and not c.data.get(1),
                f"stuck writer: its stream reset CANCEL ({code}), no DATA taken: {c.frames[:4]}")
        c.open(3, b"/health")
        c.s.sendall(frame(WINDOW_UPDATE, 0, 3, struct.pack(">I", 65535)))  # this one it reads
        F.check(c.read_until(lambda: 3 in c.ended), f"stuck writer: the same connection answers its next stream "
                                                    f"({[f[:3] for f in c.frames[-3:]]})")
        c.close()
        stopped(s, "stuck writer")


def part_route():
    """A route that is a channel (m0 --topology, "stream": "room.{room}"):
    m0pub's frames on room.blue arrive on its HTTP/2 stream, in order."""
    rd = tempfile.mkdtemp(dir=TMP)
    os.chmod(rd, 0o700)
    topo = os.path.join(TMP, "topo.json")
    with open(topo, "w") as f:
        json.dump({"routes": [{"method": "GET", "pattern": "/live/{room}", "stream": "room.{room}"}]}, f)
    with Server("m0", "--port", "0", "--http2", "--topology", topo, "--run-dir", rd) as s:
        c = Conn(s.port)
        c.open(1, b"/live/blue")
        F.check(c.read_until(lambda: any(t == HEADERS and x == 1 for t, _, x, _ in c.frames)),
                "stream route: its HEADERS")
        for word in ("hello1", "hello2"):
            subprocess.run([os.path.join(BIN, "m0pub"), "--run-dir", rd, "--channel", "room.blue", "--event", "said",
                            word], capture_output=True, timeout=20)
        got = c.read_until(lambda: len(c.ids(1)) >= 2)
        data = c.data.get(1, b"")
        F.check(got and in_order(c.ids(1)) and 0 <= data.find(b"data: hello1") < data.find(b"data: hello2"),
                f"stream route: m0pub's two frames in order: {data!r}")
        c.close()
        stopped(s, "stream route")


def part_drain():
    with Server("host_check", "--port", "0", "--http2") as s:
        c = Conn(s.port)
        c.open(1)
        shut = Conn(s.port, window=0)  # its m0.closing can never be sent
        shut.open(1)
        F.check(c.read_until(lambda: len(c.ids(1)) >= 1), f"drain: the stream's first event ({c.ids(1)})")
        F.check(shut.read_until(lambda: any(t == HEADERS and sid == 1 for t, _, sid, _ in shut.frames)),
                f"drain: the stream of window 0 answered its HEADERS: {shut.frames[:4]}")
        s.signal()
        ended = c.read_until(lambda: 1 in c.ended)
        data = c.data.get(1, b"")
        F.check(ended, f"drain: the stream ends (END_STREAM; eof {c.eof}): ...{data[-200:]!r}")
        F.check(b"event: m0.closing" in data, f"drain: the stream is told m0.closing: ...{data[-200:]!r}")
        c.close()
        cut = lambda: any(t == RST and sid == 1 for t, _, sid, _ in shut.frames)
        shut.read_until(lambda: cut() and shut.eof)
        code = next((int.from_bytes(p[:4], "big") for t, _, sid, p in shut.frames if t == RST and sid == 1), None)
        F.check(code == CANCEL and shut.eof, f"drain: the stream of window 0 is reset CANCEL ({code}), then the "
                f"close (eof {shut.eof}): {[(t, sid) for t, _, sid, _ in shut.frames][-6:]}")
        shut.close()
        stopped(s, "drain", signalled=True)
        F.check("did not finish" not in s.stderr(), f"drain: within its bound:\n{s.stderr()[-800:]}")


def part_https():
    make_certs()
    with Server("host_check", "--port", "0", "--http2", "--certfile", path("leaf.crt"), "--keyfile",
                path("leaf.key")) as s:
        out = os.path.join(TMP, "events.txt")
        p = subprocess.run(["curl", "-sS", "--http2", "--cacert", path("ca.crt"), "--max-time", "2", "-o", out, "-w",
                            "%{http_code} %{http_version}", f"https://localhost:{s.port}/events"],
                           capture_output=True, timeout=20)
        body = open(out, "rb").read() if os.path.exists(out) else b""
        ids = [int(m) for m in re.findall(rb"^id: (\d+)$", body, re.M)]
        F.check(p.stdout.decode() == "200 2", f"https: curl --http2 answered over h2: {p.stdout!r} {p.stderr!r}")
        F.check(len(ids) >= 2 and in_order(ids), f"https: events in id order over h2: {ids} ({body[:200]!r})")


if __name__ == "__main__":
    run_parts(F, [("two streams", part_two_streams), ("window", part_window), ("pieces", part_pieces),
                  ("stuck writer", part_stuck_writer), ("route", part_route), ("drain", part_drain), ("https", part_https)], tmp=TMP)
