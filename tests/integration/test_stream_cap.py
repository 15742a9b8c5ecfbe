"""A slow consumer (docs/behaviour.md, A slow client): a subscriber whose
client stops reading is capped at 64 KiB of queued frames; beyond, frames
are dropped for it alone, counted by channel
(m0_channel_frames_dropped_total{channel}), and it is told in band, while a
stream that reads, on the same host, receives every frame with contiguous
ids.

Each part runs in single mode and under --workers 2 (the counter is summed
through the shared page: any worker's /metrics says the host's figure).
Frames are published by m0pub on host_check's channel "beats" (its producer
idle), one at a time, the next only once the reading stream has this one
(the cap is two 30 KB frames: a reader slower than the publisher, on a
loaded machine, would meet it too), until the stuck one has lost some.

Proves:
- SSE: a client with a 4 KiB receive buffer that reads nothing after its
  head loses frames; when it reads again it finds every frame the reading
  stream got either written to it or told lost: an `event: m0.gap` whose
  data is {"after", "first", "last", "lost"} comes before any frame after
  the loss, names the last id it was given (after), the first and last ids
  lost, and how many (lost); no frame is missing without one. The marker
  comes once its queue is written out, with nothing more published; a
  frame published after it follows it. The channel's counter rose by the
  frames told lost.
- WebSocket: a socket with a 4 KiB receive buffer that reads nothing gets,
  once it reads again, every message up to the first frame it lost, in
  order, then a close frame 1013 whose reason names that frame's id and
  the channel, then the end of the connection; the counter rose by one.
- The reading stream got all the frames, ids contiguous; the host exits 0.
"""
import json
import os
import re
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request

from harness import BIN, Failures, Prefork, Server, wait_for
from rawhttp import ws_frames as split_frames
from test_streams import Frame, Stream

F = Failures()
LINE = "x" * 30000
MAX_FRAMES = 600  # 18 MB: far past what the kernel's buffers and the cap hold for one stuck client


def dropped(port):
    """m0_channel_frames_dropped_total{channel="beats"} (0 when absent)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    m = re.search(r'^m0_channel_frames_dropped_total\{channel="beats"\} (\d+)$', text, re.M)
    return int(m.group(1)) if m else 0


def stuck_socket(port, request):
    """A client with a 4 KiB receive buffer: sends request, reads the head
    (bounded), then reads nothing. (socket, the bytes after the head)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    s.sendall(request)
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(1)
        if not chunk:
            break
        buf += chunk
    return s, buf


class Publisher:
    """m0pub on the run directory, one 30 KB frame per line (event "big",
    data "<i> xxx..."), each waited for on the reading stream."""

    def __init__(self, run_dir, reader):
        self.reader = reader
        self.n = 0
        self.proc = subprocess.Popen([os.path.join(BIN, "m0pub"), "--run-dir", run_dir, "--event", "big"],
                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)

    def got(self):
        return len([f for f in list(self.reader.frames) if f.event == "big"])

    def one(self):
        self.proc.stdin.write(f"{self.n} {LINE}\n")
        self.proc.stdin.flush()
        self.n += 1
        return wait_for(lambda: self.got() >= self.n, 30)

    def until_lost(self, port, base, more):
        """Publishes until the channel's counter passed base + more (bounded)."""
        while self.n < MAX_FRAMES:
            if not self.one():
                return False
            if dropped(port) >= base + more:
                return True
        return False

    def close(self):
        self.proc.stdin.close()
        err = self.proc.stderr.read()
        return self.proc.wait(timeout=30), err


def published(reader):
    """The reading stream's numbered frames from the first one published
    here (a beat of the idle producer may fall among them: it is one too)."""
    frames = [f for f in list(reader.frames) if f.id is not None]
    first = next((f.id for f in frames if f.event == "big"), None)
    return [f for f in frames if first is not None and f.id >= first]


def read_sse(sock, rest, until, timeout=30):
    """Frames from a raw stream socket until until(frames) or the bound."""
    buf, frames = rest, []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        buf = buf.replace(b"\r\n", b"\n")
        while b"\n\n" in buf:
            text, buf = buf.split(b"\n\n", 1)
            frames.append(Frame(text.decode("utf-8", "replace"), time.monotonic()))
        if until(frames):
            break
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except (socket.timeout, TimeoutError):
            break
        if not chunk:
            break
        buf += chunk
    return frames


def walk(label, seq, frames):
    """Every id of seq (the reading stream's, in order) is in frames either
    as a frame or inside one m0.gap that comes before any later frame.
    Returns (ok, the markers, ids told lost)."""
    at, last_given, markers, told = 0, None, [], 0
    pos = {i: k for k, i in enumerate(seq)}
    for f in frames:
        if f.comment:
            continue
        if f.event == "m0.gap":
            d = f.json() or {}
            markers.append(d)
            first, last, lost = d.get("first"), d.get("last"), d.get("lost")
            k = pos.get(last)
            span = seq[at:k + 1] if k is not None else []
            ok = (k is not None and span and span[0] == first and len(span) == lost
                  and d.get("after") == (last_given or 0))
            F.check(ok, f"{label}: the m0.gap {d} covers the next ids exactly (after {last_given}, "
                        f"next {seq[at:at + 3]}...)")
            if not ok:
                return False, markers, told
            told += lost
            at = k + 1
            continue
        if f.id is None or f.id < seq[0]:
            continue  # the view's own frames, a beat from before the publishing
        if at >= len(seq) or f.id != seq[at]:
            F.check(False, f"{label}: frame {f.id} came where {seq[at:at + 1]} was due, with no m0.gap before it")
            return False, markers, told
        last_given = f.id
        at += 1
    return at == len(seq), markers, told


def sse_part(label, s, run_dir):
    stuck, rest = stuck_socket(s.port, b"GET /events HTTP/1.1\r\nHost: t\r\n\r\n")
    F.check(rest.startswith(b"HTTP/1.1 200"), f"{label}: the stream that stops reading was opened ({rest[:60]!r})")
    reader = Stream(s.port, "/events")
    base = dropped(s.port)
    pub = Publisher(run_dir, reader)
    lost_some = pub.until_lost(s.port, base, 3)
    F.check(lost_some, f"{label}: the stuck stream lost frames within {pub.n} frames of 30 KB "
                       f"(counter {dropped(s.port) - base})")
    n_before = pub.n
    # It reads again: everything queued, then the marker, with nothing more published.
    frames = read_sse(stuck, b"", lambda fr: any(f.event == "m0.gap" for f in fr))
    F.check(any(f.event == "m0.gap" for f in frames),
            f"{label}: once its queue is written out, the stream is told of its loss with nothing more published "
            f"({len(frames)} frames read, last {frames[-1:]!r:.120})")
    # One more frame: it follows the marker.
    F.check(pub.one(), f"{label}: one more frame published")
    frames += read_sse(stuck, b"", lambda fr: any(f.event == "big" and f.data.startswith(f"{n_before} ")
                                                  for f in fr))
    rc, err = pub.close()
    F.check(rc == 0, f"{label}: m0pub published {pub.n} frames ({err[-200:]})")
    seq = [f.id for f in published(reader)]
    big = [f for f in published(reader) if f.event == "big"]
    F.check(len(big) == pub.n and seq == list(range(seq[0], seq[0] + len(seq))) if seq else False,
            f"{label}: the reading stream got all {pub.n} frames, ids contiguous (got {len(big)})")
    ok, markers, told = walk(label, seq, frames)
    print(f"{label}: {pub.n} frames published; the stuck stream was told {markers}", flush=True)
    F.check(ok and markers, f"{label}: every frame the reader got reached the stuck stream or was told lost "
                            f"({len(markers)} m0.gap: {markers})")
    F.check(told > 0 and dropped(s.port) - base == told,
            f"{label}: m0_channel_frames_dropped_total{{channel=\"beats\"}} rose by the frames told lost "
            f"({dropped(s.port) - base} vs {told})")
    reader.close()
    stuck.close()


def ws_frames(sock, timeout=30):
    """Server frames (op, payload) until a close frame and EOF, or the bound."""
    out, buf, eof = [], b"", False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not eof:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except (socket.timeout, TimeoutError):
            break
        except ConnectionResetError:
            chunk = b""
        eof = not chunk
        buf += chunk
        got, buf = split_frames(buf)
        out += got
    return out, eof


def ws_part(label, s, run_dir):
    stuck, head = stuck_socket(s.port, b"GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                                       b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                                       b"Sec-WebSocket-Version: 13\r\n\r\n")
    F.check(head.startswith(b"HTTP/1.1 101"), f"{label}: the WebSocket that stops reading was opened ({head[:60]!r})")
    reader = Stream(s.port, "/events")
    base = dropped(s.port)
    pub = Publisher(run_dir, reader)
    F.check(pub.until_lost(s.port, base, 1), f"{label}: the stuck WebSocket lost a frame within {pub.n} frames")
    frames, eof = ws_frames(stuck)
    rc, err = pub.close()
    F.check(rc == 0, f"{label}: m0pub published {pub.n} frames ({err[-200:]})")
    big = [f for f in published(reader) if f.data is not None]
    texts = [p.decode() for op, p in frames if op == 1]
    k = len(texts)
    F.check(0 < k < len(big) and texts == [f.data for f in big[:k]],
            f"{label}: the socket got the first {k} frames' data, in order, none skipped "
            f"(of {len(big)}: {[t[:6] for t in texts[:3]]}...)")
    close = [p for op, p in frames if op == 8]
    print(f"{label}: {pub.n} frames published; the stuck socket got {k}, then {close[:1]}", flush=True)
    code = struct.unpack(">H", close[0][:2])[0] if close and len(close[0]) >= 2 else None
    reason = close[0][2:].decode("utf-8", "replace") if close else ""
    want = f"from id {big[k].id} " if k < len(big) else "?"
    F.check(code == 1013 and want in reason and "beats" in reason,
            f"{label}: then a close 1013 naming the first frame lost ({code} {reason!r}, want {want!r} and the channel)")
    F.check(frames and frames[-1][0] == 8 and eof, f"{label}: nothing after the close, then the end "
                                                   f"(last op {frames[-1][0] if frames else None}, eof {eof})")
    F.check(dropped(s.port) - base == 1, f"{label}: the channel's counter rose by the one frame lost "
                                         f"({dropped(s.port) - base}); none after the close")
    reader.close()
    stuck.close()


def run(label, cls, *mode):
    run_dir = tempfile.mkdtemp()
    os.chmod(run_dir, 0o700)
    with cls("host_check", "--port", "0", "--run-dir", run_dir, "--metrics-path", "/metrics", *mode,
             env={"M0_HOSTCHECK_PERIOD_MS": "100000"}) as s:
        sse_part(f"{label} SSE", s, run_dir)
        ws_part(f"{label} WebSocket", s, run_dir)
        F.check(s.stop(timeout=15) == 0, f"{label}: exit 0")


t0 = time.monotonic()
run("single", Server)
run("workers 2", Prefork, "--workers", "2")
print(f"took {time.monotonic() - t0:.1f}s")
F.done()
