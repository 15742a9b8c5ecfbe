"""WebSocket (RFC 6455) and resumable streams (docs/http.md, WebSocket and
Streams; host_check GET /ws and GET /events).

Proves, with Python's `websockets` (Debian python3-websockets) and raw sockets
for what a library will not send:
- /ws upgrades (101, Sec-WebSocket-Accept checked by the library), receives
  the "beats" channel as text messages carrying each beat's data, and echoes
  text (UTF-8 beyond ASCII), binary and a fragmented message; a ping is
  answered; a close with 4000 is answered with 4000.
- permessage-deflate is negotiated when offered (and not when not), and
  compressed echoes and beats arrive whole.
- A frame published on "beats" reaches an SSE stream and a WebSocket alike:
  the same beat numbers, the same data.
- Refusals: an unmasked frame gets close 1002, text that is not UTF-8 1007,
  a message past --ws-max-message 1009, each followed by the server closing;
  a handshake without a key is 400, version 8 is 426 with
  Sec-WebSocket-Version: 13.
- An idle socket is pinged (--sse-heartbeat-ms 200, the producer idle).
- The drain closes every socket with 1001 and the host exits 0.
- Streams resume: a stream reopened with Last-Event-ID: N first gets the
  held ids after N, contiguous; with --stream-history 2 and more frames
  missed than that, an m0.gap event first, then the last two. A view's own
  frame (?welcome=1) comes first, without an id.
"""
import asyncio
import base64
import json
import os
import socket
import struct
import sys
import time

try:
    import websockets
except ImportError:  # Debian's package, when the tests run under another python3 of the same version
    sys.path.append("/usr/lib/python3/dist-packages")
    import websockets

from harness import Failures, Server, wait_for
from rawhttp import ws_frames

F = Failures()


def response_headers(ws):
    """The handshake's response headers: websockets 10 (Debian 12) keeps them
    in ws.response_headers, 14 (Debian 13: its new asyncio client) in
    ws.response.headers."""
    r = getattr(ws, "response", None)
    return r.headers if r is not None else ws.response_headers


def beat_of(msg):
    try:
        return json.loads(msg).get("beat")
    except (ValueError, AttributeError):
        return None


async def recv_until(ws, pred, timeout=5.0):
    """Messages until pred(msg) (beats interleave with echoes); the message or None."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            m = await asyncio.wait_for(ws.recv(), left)
        except (asyncio.TimeoutError, websockets.ConnectionClosed):
            return None
        if pred(m):
            return m


async def library_checks(port):
    url = f"ws://127.0.0.1:{port}/ws"
    async with websockets.connect(url, compression=None) as ws:
        F.check(response_headers(ws).get("Sec-WebSocket-Extensions") is None, "no extension when none is offered")
        m = await recv_until(ws, lambda m: beat_of(m) is not None)
        F.check(m is not None and isinstance(m, str), f"a beat arrives as a text message ({m!r})")
        await ws.send("héllo ✓")
        F.check(await recv_until(ws, lambda m: m == "héllo ✓") is not None, "text echoed")
        await ws.send(bytes(range(256)))
        F.check(await recv_until(ws, lambda m: m == bytes(range(256))) is not None, "binary echoed")
        await ws.send(["frag", "men", "ted"])  # one message in three frames
        F.check(await recv_until(ws, lambda m: m == "fragmented") is not None, "a fragmented message echoed whole")
        big = "x" * 70000  # a 64-bit length (past 65535)
        await ws.send(big)
        F.check(await recv_until(ws, lambda m: m == big) is not None, "a 70000-byte message echoed")
        pong = await ws.ping(b"p1")
        try:
            await asyncio.wait_for(pong, 3)
            F.check(True, "ping answered")
        except asyncio.TimeoutError:
            F.check(False, "ping answered")
        await ws.close(4000, "bye")
        F.check(ws.close_code == 4000, f"close 4000 answered with 4000 (got {ws.close_code})")

    async with websockets.connect(url) as ws:  # the library offers permessage-deflate
        ext = response_headers(ws).get("Sec-WebSocket-Extensions", "")
        F.check("permessage-deflate" in ext and "server_no_context_takeover" in ext,
                f"permessage-deflate negotiated, server_no_context_takeover ({ext!r})")
        text = "compress me " * 300
        await ws.send(text)
        F.check(await recv_until(ws, lambda m: m == text) is not None, "a compressed echo arrives whole")
        await ws.send(text[:500])
        F.check(await recv_until(ws, lambda m: m == text[:500]) is not None, "a second message (client context kept)")
        m = await recv_until(ws, lambda m: beat_of(m) is not None)
        F.check(m is not None, "beats arrive compressed and decode")


# ---- raw sockets -------------------------------------------------------------

def handshake(port, extra=b"", key=b"dGhlIHNhbXBsZSBub25jZQ==", version=b"13"):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    req = b"GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    if key:
        req += b"Sec-WebSocket-Key: " + key + b"\r\n"
    req += b"Sec-WebSocket-Version: " + version + b"\r\n" + extra + b"\r\n"
    s.sendall(req)
    buf = b""
    while b"\r\n\r\n" not in buf:
        c = s.recv(4096)
        if not c:
            break
        buf += c
    head, _, rest = buf.partition(b"\r\n\r\n")
    return s, head.decode("latin-1"), rest


def frame(op, payload, mask=True, fin=True):
    b0 = (0x80 if fin else 0) | op
    n = len(payload)
    hdr = bytes([b0])
    mbit = 0x80 if mask else 0
    if n < 126:
        hdr += bytes([mbit | n])
    elif n < 65536:
        hdr += bytes([mbit | 126]) + struct.pack(">H", n)
    else:
        hdr += bytes([mbit | 127]) + struct.pack(">Q", n)
    if not mask:
        return hdr + payload
    key = os.urandom(4)
    return hdr + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def read_frames(s, rest, until_close=True, timeout=5.0):
    """Server frames (op, payload) until a close frame and EOF, or the bound."""
    out, buf, eof = [], rest, False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got, buf = ws_frames(buf)
        out += got
        if eof or (not until_close and out):
            break
        s.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            c = s.recv(65536)
        except socket.timeout:
            break
        except ConnectionResetError:
            eof = True
            continue
        if not c:
            eof = True
        buf += c
    return out, eof


def close_code(frames):
    for op, p in frames:
        if op == 8 and len(p) >= 2:
            return struct.unpack(">H", p[:2])[0]
    return None


def raw_checks(port):
    s, head, rest = handshake(port)
    F.check(head.startswith("HTTP/1.1 101"), f"raw handshake: 101 ({head.splitlines()[0] if head else ''})")
    F.check("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in head, "RFC 6455's example key gets its accept value")
    s.sendall(frame(1, b"unmasked", mask=False))
    fr, eof = read_frames(s, rest)
    F.check(close_code(fr) == 1002 and eof, f"an unmasked frame: close 1002 and EOF ({close_code(fr)}, {eof})")
    s.close()

    s, head, rest = handshake(port)
    s.sendall(frame(1, b"ok \xed\xa0\x80 surrogate"))
    fr, eof = read_frames(s, rest)
    F.check(close_code(fr) == 1007 and eof, f"text that is not UTF-8: close 1007 ({close_code(fr)}, {eof})")
    s.close()

    s, head, rest = handshake(port)
    s.sendall(frame(2, b"a" * 1500))  # past --ws-max-message 1024
    fr, eof = read_frames(s, rest)
    F.check(close_code(fr) == 1009 and eof, f"a message too large: close 1009 ({close_code(fr)}, {eof})")
    s.close()

    s, head, rest = handshake(port)
    s.sendall(frame(1, b"x" * 600, fin=False) + frame(0, b"y" * 600))  # the total passes the bound
    fr, eof = read_frames(s, rest)
    F.check(close_code(fr) == 1009, f"fragments whose sum is too large: close 1009 ({close_code(fr)})")
    s.close()

    s, head, rest = handshake(port)
    s.sendall(frame(0, b"no message to continue"))
    fr, eof = read_frames(s, rest)
    F.check(close_code(fr) == 1002, f"a continuation with no message: close 1002 ({close_code(fr)})")
    s.close()

    s, head, _ = handshake(port, key=None)
    F.check(head.startswith("HTTP/1.1 400"), f"no Sec-WebSocket-Key: 400 ({head.splitlines()[0] if head else ''})")
    s.close()
    s, head, _ = handshake(port, version=b"8")
    F.check(head.startswith("HTTP/1.1 426") and "Sec-WebSocket-Version: 13" in head,
            f"version 8: 426 with Sec-WebSocket-Version: 13 ({head.splitlines()[0] if head else ''})")
    s.close()


def idle_ping(bin_dir):
    with Server("host_check", "--port", "0", "--sse-heartbeat-ms", "200",
                env={"M0_HOSTCHECK_PERIOD_MS": "100000"}) as srv:
        s, head, rest = handshake(srv.port)
        fr, _ = read_frames(s, rest, until_close=False, timeout=3)
        F.check(any(op == 9 for op, _ in fr), f"an idle socket is pinged ({[op for op, _ in fr]})")
        s.close()
        F.check(srv.stop() == 0, "exit 0")


async def same_channel(port):
    """An SSE stream and a WebSocket on "beats" carry the same beats."""
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"GET /events HTTP/1.1\r\nHost: t\r\n\r\n")
    await w.drain()
    sse = []
    async with websockets.connect(f"ws://127.0.0.1:{port}/ws", compression=None) as ws:
        ws_msgs = []
        buf = b""
        deadline = time.monotonic() + 5
        while (len(sse) < 5 or len(ws_msgs) < 5) and time.monotonic() < deadline:
            try:
                m = await asyncio.wait_for(ws.recv(), 0.05)
                ws_msgs.append(m)
            except asyncio.TimeoutError:
                pass
            try:
                buf += await asyncio.wait_for(r.read(65536), 0.05)
            except asyncio.TimeoutError:
                pass
            while b"\n\n" in buf:
                ev, buf = buf.split(b"\n\n", 1)
                for line in ev.split(b"\n"):
                    if line.startswith(b"data: "):
                        sse.append(line[6:].decode())
    w.close()
    common = set(sse) & set(ws_msgs)
    F.check(len(common) >= 3, f"SSE and WebSocket subscribers get the same frames ({len(common)} in common)")


# ---- resumption -----------------------------------------------------------------

def sse_events(port, path="/events", headers=b"", want=5, timeout=5.0):
    """(id or None, event, data) of the first `want` events of a stream."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: t\r\n" + headers + b"\r\n")
    buf, evs = b"", []
    deadline = time.monotonic() + timeout
    while len(evs) < want and time.monotonic() < deadline:
        s.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            c = s.recv(65536)
        except socket.timeout:
            break
        if not c:
            break
        buf += c
        if b"\r\n\r\n" in buf:
            _, buf = buf.split(b"\r\n\r\n", 1) if buf.startswith(b"HTTP/") else (b"", buf)
        while b"\n\n" in buf and len(evs) < want:
            ev, buf = buf.split(b"\n\n", 1)
            i, e, d = None, "message", None
            for line in ev.decode().split("\n"):
                k, _, v = line.partition(": ")
                if k == "id":
                    i = int(v)
                elif k == "event":
                    e = v
                elif k == "data":
                    d = v
            if ev.startswith(b":"):
                continue
            evs.append((i, e, d))
    s.close()
    return evs


def resume_checks():
    with Server("host_check", "--port", "0", "--threads", "2", "--stream-history", "64") as srv:
        first = sse_events(srv.port, want=4)
        F.check(len(first) == 4 and all(i for i, _, _ in first), f"a stream's first beats ({first})")
        last = first[-1][0] if first else 0
        # The loop keeps the beats while nobody is subscribed: wait until more were published.
        wait_for(lambda: sse_events(srv.port, want=1)[0][0] >= last + 4, 5)
        again = sse_events(srv.port, headers=f"Last-Event-ID: {last}\r\n".encode(), want=4)
        ids = [i for i, _, _ in again]
        F.check(ids[:1] == [last + 1] and ids == list(range(last + 1, last + 1 + len(ids))) and len(ids) == 4,
                f"Last-Event-ID: {last} resumes at {last + 1}, contiguous ({ids})")
        F.check(all(e == "beat" for _, e, _ in again), "the replayed frames are the beats, as published")
        w = sse_events(srv.port, path="/events?welcome=1", want=2)
        F.check(len(w) == 2 and w[0][1] == "welcome" and w[0][0] is None and w[1][1] == "beat",
                f"a view's own frame first, without an id, then the beats ({w})")
        F.check(srv.stop() == 0, "resume: exit 0")

    with Server("host_check", "--port", "0", "--stream-history", "2") as srv:
        first = sse_events(srv.port, want=1)
        last = first[0][0] if first else 0
        wait_for(lambda: sse_events(srv.port, want=1)[0][0] >= last + 6, 5)
        again = sse_events(srv.port, headers=f"Last-Event-ID: {last}\r\n".encode(), want=3)
        F.check(len(again) == 3 and again[0][1] == "m0.gap" and again[1][0] and again[1][0] > last + 1,
                f"frames dropped from a history of 2: m0.gap first, then the held ones ({again})")
        F.check(srv.stop() == 0, "gap: exit 0")


async def drain_check():
    with Server("host_check", "--port", "0", "--threads", "2") as srv:
        socks = [await websockets.connect(f"ws://127.0.0.1:{srv.port}/ws", compression=None) for _ in range(4)]
        for ws in socks:
            await recv_until(ws, lambda m: beat_of(m) is not None)
        srv.signal()
        codes = []
        for ws in socks:
            try:
                while True:
                    await asyncio.wait_for(ws.recv(), 5)
            except websockets.ConnectionClosed:
                codes.append(ws.close_code)
            except asyncio.TimeoutError:
                codes.append("timeout")
        F.check(codes == [1001] * 4, f"the drain closes every socket with 1001 ({codes})")
        F.check(srv.wait(10) == 0, "the drain: exit 0")


def main():
    with Server("host_check", "--port", "0", "--threads", "2", "--ws-max-message", "1024") as srv:
        raw_checks(srv.port)
        F.check(srv.stop() == 0, "raw: exit 0")
    with Server("host_check", "--port", "0", "--threads", "2") as srv:
        asyncio.run(library_checks(srv.port))
        asyncio.run(same_channel(srv.port))
        F.check(srv.stop() == 0, "library: exit 0")
    idle_ping(None)
    resume_checks()
    asyncio.run(drain_check())
    F.done()


if __name__ == "__main__":
    main()
