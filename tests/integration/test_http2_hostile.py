#!/usr/bin/env python3
"""HTTP/2 under departing and hostile clients (docs/behaviour.md, HTTP/2), hand-made frames over a raw socket
(test_http2.py's):

1. the drain in two GOAWAYs (RFC 9113 6.8), at SIGTERM and at SIGHUP: first 2^31-1 and a PING; a request
   the client sends before it answers the PING (its HEADERS split across two writes) is still answered, and
   the last GOAWAY names it; then the close;
2. floods end the session with GOAWAY ENHANCE_YOUR_CALM (test_http2's hostile part checks Rapid Reset,
   SETTINGS and CONTINUATION), counted on /metrics;
3. stream ids that go down, or a closed stream's id used again: GOAWAY PROTOCOL_ERROR;
4. ALPN decides over TLS (RFC 9113 3.3): h2 chosen and an HTTP/1.1 request sent: GOAWAY PROTOCOL_ERROR and the
   close, not served; http/1.1 chosen, or none, and the preface sent: HTTP/1.1's 505 and the close;
5. the send timeout: a client that PINGs but never opens its flow-control window to take a 1 MiB answer is
   told GOAWAY and closed --body-timeout-ms after its last DATA went, as an HTTP/1.1 client that reads none;
6. memory: 10 HTTPS clients on h2 that never read, 10 streams of a 4 MiB file each: the host's RSS grows by
   less than 1.5 MB a client (about 0.8 measured; 3 MB before the bound), /health still answers (not measured
   under a sanitizer, whose allocator keeps freed memory).
"""
import os
import re
import signal
import socket
import ssl
import struct
import time

from harness import Failures, Server, run_parts
from test_http2 import (ACK, DATA, END_HEADERS, END_STREAM, GOAWAY, HEADERS, PING, PREFACE, PROTOCOL_ERROR, SETTINGS,
                        TMP, connect, curl, make_certs, path, static_file, frame, frames_until, goaway_code, goaway_last, has, health, literal,
                        request)

F = Failures()
LAST = (1 << 31) - 1


def answered(frames, sid):
    return any(t == DATA and s == sid and f & END_STREAM for t, f, s, _ in frames)


def drain_round_trip(sig):
    """sig arrives; the client reads the first GOAWAY and the PING, sends streams 3 (split across two writes)
    and 5, then the PING's ACK: both are answered and the last GOAWAY names 5."""
    with Server("host_check", "--port", "0", "--http2") as s:
        c = connect(s.port)
        c.sendall(PREFACE + frame(SETTINGS, 0, 0) + frame(HEADERS, END_STREAM | END_HEADERS, 1, request()))
        frames, eof = frames_until(c, lambda fr: answered(fr, 1))
        s.signal(sig)
        more, eof = frames_until(c, lambda fr: has(fr, GOAWAY) and has(fr, PING), ack=False)
        frames += more
        first = next((p for t, _, _, p in more if t == GOAWAY), b"\0" * 8)
        F.check(int.from_bytes(first[:4], "big") == LAST and goaway_code(more) == 0,
                f"{sig.name}: the first GOAWAY names 2^31-1, NO_ERROR: {first[:8].hex()}")
        ping = next((p for t, f, _, p in more if t == PING and not f & ACK), b"")
        three = frame(HEADERS, END_STREAM | END_HEADERS, 3, request())
        c.sendall(three[:7])  # a request on the wire when the GOAWAY arrived: in two pieces
        c.sendall(three[7:] + frame(HEADERS, END_STREAM | END_HEADERS, 5, request()))
        c.sendall(frame(PING, ACK, 0, ping))
        more, eof = frames_until(c, lambda fr: False)  # until the close
        c.close()
        frames += more
        F.check(answered(more, 3) and answered(more, 5), f"{sig.name}: the requests sent before the PING's ACK are "
                f"answered: {[(t, sid) for t, _, sid, _ in more][:12]}")
        F.check(goaway_last(more) == 5 and eof, f"{sig.name}: the last GOAWAY names stream 5, then the close: "
                f"{goaway_last(more)} eof {eof}")
        if sig == signal.SIGHUP:
            F.check(health(s.port), "SIGHUP: /health answers after the reload")
        F.check(s.stop() == 0, f"{sig.name}: exit 0\n{s.stderr()[-1500:]}")


def drain_no_ack():
    """A client that never answers the drain's PING still gets the last GOAWAY (the wait is bounded), then the
    close; the host exits 0. A long drain bound: the loop's sweep (the wait's end) runs through the drain's fresh
    grace, a quarter of it (30 s here; the client's socket waits 10 s)."""
    with Server("host_check", "--port", "0", "--http2", "--drain-timeout-ms", "120000", "--header-timeout-ms",
                "120000") as s:
        c = connect(s.port)
        c.sendall(PREFACE + frame(SETTINGS, 0, 0) + frame(HEADERS, END_STREAM | END_HEADERS, 1, request()))
        frames, eof = frames_until(c, lambda fr: answered(fr, 1))
        s.signal()
        more, eof = frames_until(c, lambda fr: False, ack=False)  # until the close (the socket's 10 s at most)
        c.close()
        lasts = [int.from_bytes(p[:4], "big") & 0x7FFFFFFF for t, _, _, p in more if t == GOAWAY]
        F.check(lasts == [LAST, 1] and eof, f"no PING ACK: GOAWAY 2^31-1, then the last naming 1, then the close: "
                f"{lasts} eof {eof}")
        F.check(s.wait(15) == 0 and "did not finish" not in s.stderr(), f"no PING ACK: exit 0\n{s.stderr()[-1500:]}")


def part_drain():
    drain_round_trip(signal.SIGTERM)
    drain_round_trip(signal.SIGHUP)
    drain_no_ack()


def stream_ids(port, frames_out, what):
    c = connect(port)
    c.sendall(PREFACE + frame(SETTINGS, 0, 0) + frames_out)
    frames, eof = frames_until(c, lambda fr: goaway_code(fr) is not None)
    c.close()
    F.check(goaway_code(frames) == PROTOCOL_ERROR, f"{what}: GOAWAY PROTOCOL_ERROR: {goaway_code(frames)}")


def part_stream_ids():
    get = lambda sid: frame(HEADERS, END_STREAM | END_HEADERS, sid, request())
    with Server("host_check", "--port", "0", "--http2", "--metrics-path", "/metrics") as s:
        stream_ids(s.port, get(5) + get(3), "stream ids that go down (5, then 3)")
        stream_ids(s.port, get(1) + get(3) + get(1), "a closed stream's id used again (1, 3, 1)")
        c = connect(s.port)  # trailers: a HEADERS on an open stream's id, not one that goes down
        c.sendall(PREFACE + frame(SETTINGS, 0, 0) + frame(HEADERS, END_HEADERS, 1, request(b"/loop/echo", b"POST")) +
                  frame(HEADERS, END_STREAM | END_HEADERS, 3, request()) + frame(DATA, 0, 1, b"body") +
                  frame(HEADERS, END_STREAM | END_HEADERS, 1, literal(b"x-trailer", b"v")))
        frames, eof = frames_until(c, lambda fr: answered(fr, 1) or goaway_code(fr) is not None)
        c.close()
        F.check(answered(frames, 1) and goaway_code(frames) is None, f"trailers on an open stream: answered, no "
                f"GOAWAY: {goaway_code(frames)}")
        F.check(health(s.port), "/health after the stream ids")
        rc, out, err = curl("--http2-prior-knowledge", f"http://127.0.0.1:{s.port}/metrics")
        n = sum(int(v) for v in re.findall(r'^m0_http2_refused_total\{loop="\d+"\} (\d+)$', out, re.M))
        F.check(n >= 2, f"stream ids: each refusal counted (m0_http2_refused_total): {n}")


def tls_talk(port, alpn, send):
    """What the host says to send over TLS with ALPN alpn (None: no ALPN), until its close: (chosen, bytes)."""
    ctx = ssl.create_default_context(cafile=path("ca.crt"))
    if alpn:
        ctx.set_alpn_protocols(alpn)
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    c = ctx.wrap_socket(raw, server_hostname="localhost")
    chosen, got = c.selected_alpn_protocol(), b""
    c.sendall(send)
    try:
        while True:
            b = c.recv(65536)
            if not b:
                break
            got += b
    except (ConnectionResetError, socket.timeout, ssl.SSLError):
        pass
    c.close()
    return chosen, got


def h2_frames(b):
    frames = []
    while len(b) >= 9 and len(b) >= 9 + int.from_bytes(b[:3], "big"):
        n = int.from_bytes(b[:3], "big")
        frames.append((b[3], b[4], int.from_bytes(b[5:9], "big") & 0x7FFFFFFF, b[9:9 + n]))
        b = b[9 + n:]
    return frames


def part_alpn():
    make_certs()
    h1 = b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"
    h2 = PREFACE + frame(SETTINGS, 0, 0) + frame(HEADERS, END_STREAM | END_HEADERS, 1, request())
    with Server("host_check", "--port", "0", "--http2", "--certfile", path("leaf.crt"), "--keyfile",
                path("leaf.key")) as s:
        chosen, got = tls_talk(s.port, ["h2"], h1)
        F.check(chosen == "h2" and not got.startswith(b"HTTP/") and goaway_code(h2_frames(got)) == PROTOCOL_ERROR,
                f"ALPN h2, an HTTP/1.1 request: GOAWAY PROTOCOL_ERROR, not served: {chosen} {got[:80]!r}")
        for alpn in (["http/1.1"], None):
            chosen, got = tls_talk(s.port, alpn, h2)
            F.check(got.startswith(b"HTTP/1.1 505") and b"Connection: close" in got,
                    f"ALPN {chosen}, the preface: HTTP/1.1's 505 and the close: {got[:80]!r}")
        F.check(s.proc.poll() is None, "the host lives after the ALPN cases")


def part_send_timeout():
    d, data = static_file("static-held", "one.bin", 1 << 20)
    with Server("todo", "--port", "0", "--http2", "--blocking-threads", "1", "--body-timeout-ms", "1000",
                "--keepalive-timeout-ms", "60000", env={"M0_TODO_STATIC": d}) as s:
        c = connect(s.port)
        c.sendall(PREFACE + frame(SETTINGS, 0, 0) + frame(HEADERS, END_STREAM | END_HEADERS, 1,
                                                        request(b"/static/one.bin")))
        got = lambda fr: sum(len(p) for t, _, sid, p in fr if t == DATA and sid == 1)
        frames, eof = frames_until(c, lambda fr: got(fr) >= 65535)  # the window's worth, then nothing
        c.settimeout(0.25)
        for _ in range(60):  # 15 s at most of a PING every quarter second; the bound is a second and a sweep
            try:
                c.sendall(frame(PING, 0, 0, b"stillhre"))
            except OSError:
                break
            more, _ = frames_until(c, lambda fr: has(fr, GOAWAY))  # a quarter second, or the GOAWAY
            frames += more
            if has(frames, GOAWAY):
                break
        c.settimeout(5)
        closed = False
        try:
            while c.recv(65536):
                pass
            closed = True
        except ConnectionResetError:
            closed = True
        except socket.timeout:
            closed = False
        c.close()
        F.check(has(frames, GOAWAY) and closed and got(frames) < len(data), f"send timeout: PINGs and a shut "
                f"window: GOAWAY ({goaway_code(frames)}) and the close ({closed}), {got(frames)} of {len(data)} bytes")
        F.check(health(s.port), "/health after the send timeout")


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))


def sanitized(s):
    with open(f"/proc/{s.proc.pid}/maps") as f:
        return any("libasan" in line or "libtsan" in line for line in f)


def health_tls(port):
    rc, out, err = curl("--cacert", path("ca.crt"), "--http2", f"https://localhost:{port}/health")
    return out.endswith("200 2")


def part_memory():
    make_certs()
    d, data = static_file("static-mem", "four.bin", 4 << 20)
    n = 10
    with Server("todo", "--port", "0", "--http2", "--blocking-threads", "1", "--certfile", path("leaf.crt"),
                "--keyfile", path("leaf.key"), "--keepalive-timeout-ms", "60000", "--body-timeout-ms", "60000",
                env={"M0_TODO_STATIC": d}) as s:
        F.check(health_tls(s.port), "memory: /health before")
        before = rss_kb(s.proc.pid)
        ctx = ssl.create_default_context(cafile=path("ca.crt"))
        ctx.set_alpn_protocols(["h2"])
        window = struct.pack(">HI", 4, (1 << 31) - 1)  # SETTINGS_INITIAL_WINDOW_SIZE: flow control holds nothing
        conns = []
        for _ in range(n):
            raw = socket.socket()
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            raw.settimeout(10)
            raw.connect(("127.0.0.1", s.port))
            c = ctx.wrap_socket(raw, server_hostname="localhost")
            c.sendall(PREFACE + frame(SETTINGS, 0, 0, window) + frame(8, 0, 0, struct.pack(">I", (1 << 31) - 65536)) +
                      b"".join(frame(HEADERS, END_STREAM | END_HEADERS, sid, request(b"/static/four.bin"))
                               for sid in range(1, 21, 2)))
            conns.append(c)
        peak, last, still = before, before, 0
        for _ in range(40):  # until RSS holds still for a second (10 s at most)
            time.sleep(0.25)
            now = rss_kb(s.proc.pid)
            peak, still, last = max(peak, now), (still + 1 if abs(now - last) < 256 else 0), now
            if still >= 4:
                break
        for c in conns:
            c.close()
        grown = (peak - before) / n
        if not sanitized(s):
            F.check(grown < 1536, f"memory: each HTTPS client on h2 that reads nothing holds {grown:.0f} KB "
                    f"(under 1.5 MB; RSS {before} -> {peak} KB)")
        print(f"memory: {grown:.0f} KB a client, RSS {before} -> {peak} KB", flush=True)
        F.check(health_tls(s.port), "memory: /health after the clients")
        F.check(s.stop() == 0, f"memory: exit 0\n{s.stderr()[-1500:]}")


run_parts(F, [("drain", part_drain), ("stream ids", part_stream_ids), ("alpn", part_alpn),
              ("send timeout", part_send_timeout), ("memory", part_memory)], tmp=TMP)
