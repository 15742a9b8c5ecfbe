#!/usr/bin/env python3
"""HTTP/2 (--http2; docs/behaviour.md, HTTP/2) with real clients and hand-made
frames:

1. cleartext prior knowledge: curl --http2-prior-knowledge (200, a 404, HEAD,
   a POST with a body echoed back), h2load with 100 concurrent streams on
   one connection (every request 2xx), a traceparent echoed, m0_defer's answers (one, then 200 on
   50 streams at once), streams reset or left while their answer is away,
   an application actor's replies (one with a body, 50 at once), its reply
   in pieces;
   without --http2 the preface is answered as HTTP/1.1 (an error status);
1b. --blocking-threads 2: the handler threads' answers, 100 streams at once;
    a 30 MB file (m0_respond_file) whole and by range;
2. HTTPS: curl --http2 negotiates h2 by ALPN, curl --http1.1 still gets
   HTTP/1.1 (a self-signed CA this test makes with `openssl`);
3. hostile: an HPACK bomb (one header in the dynamic table referenced until
   the list passes the limit: the stream is reset), a rapid-reset burst
   (HEADERS + RST_STREAM: GOAWAY long before the burst's end), a SETTINGS frame of
   100 entries (GOAWAY ENHANCE_YOUR_CALM), a PING flood that reads no ACK
   (the connection is ended), garbage after the preface (GOAWAY
   PROTOCOL_ERROR), the preface a byte at a time (served), 150 streams
   left open (past 100 refused), 20 CONTINUATION frames (GOAWAY), 40 bodies sent
   at once (past 8 MiB held, 413), an idle connection (GOAWAY, then the
   close); after each,
   /health still answers over HTTP/2 and HTTP/1.1;
4. the drain: GOAWAY with the last stream id, a stream whose answer is away
   still answered, then the close;
5. --threads 2 and --workers 2: h2load over both loops' connections.
"""
import json
import os
import re
import socket
import struct
import subprocess
import tempfile

from harness import Failures, Prefork, Server, run, run_parts

F = Failures()
TMP = tempfile.mkdtemp(prefix="m0-http2-")
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST, SETTINGS, PING, GOAWAY = 0, 1, 3, 4, 6, 7
END_STREAM, END_HEADERS, ACK = 1, 4, 1
ENHANCE_YOUR_CALM, PROTOCOL_ERROR = 0xB, 0x1


def path(name):
    return os.path.join(TMP, name)


def openssl(*args):
    p = subprocess.run(["openssl", *args], capture_output=True, timeout=20)
    assert p.returncode == 0, p.stderr.decode(errors="replace")


def make_certs():
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
            path("ca.key"), "-out", path("ca.crt"), "-days", "30", "-subj", "/CN=m0 test CA",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # Python 3.13 verifies strictly (X509_STRICT)
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", path("leaf.key"),
            "-out", path("leaf.csr"), "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1")
    openssl("x509", "-req", "-in", path("leaf.csr"), "-CA", path("ca.crt"), "-CAkey", path("ca.key"),
            "-CAcreateserial", "-out", path("leaf.crt"), "-days", "30", "-copy_extensions", "copy")


def curl(*args):
    """(exit code, body + '\\n' + 'code version', stderr) of one curl run."""
    p = subprocess.run(["curl", "-sS", "--max-time", "10", "-w", "\\n%{http_code} %{http_version}", *args],
                       capture_output=True, timeout=20)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def h2load(url, n=400, m=100, clients=1):
    p = subprocess.run(["h2load", "-n", str(n), "-c", str(clients), "-m", str(m), url], capture_output=True,
                       timeout=60)
    out = p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")
    m2 = re.search(r"status codes: (\d+) 2xx", out)
    return (int(m2.group(1)) if m2 else -1), out


# ---- hand-made frames -----------------------------------------------------

def frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload


def hint(n, bits, first=0):
    """An HPACK integer with a prefix of `bits` bits (RFC 7541 5.1)."""
    top = (1 << bits) - 1
    if n < top:
        return bytes([first | n])
    out, n = [first | top], n - top
    while n >= 128:
        out.append(n % 128 + 128)
        n //= 128
    return bytes(out + [n])


def literal(name, value, index=False):
    """A literal field with a new name: added to the dynamic table (index) or not."""
    return (b"\x40" if index else b"\x00") + hint(len(name), 7) + name + hint(len(value), 7) + value


def request(path_=b"/health", method=b"GET"):
    return (literal(b":method", method) + literal(b":scheme", b"http") + literal(b":path", path_) +
            literal(b":authority", b"localhost"))


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def frames_until(s, done, limit=1 << 22, ack=True):
    """Reads frames until done(frames) or EOF, each PING answered (ack) as a client's library does; returns
    (frames, eof)."""
    buf, frames = b"", []
    while not done(frames):
        try:
            b = s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            return frames, True
        if not b:
            return frames, True
        buf += b
        while len(buf) >= 9:
            n = int.from_bytes(buf[:3], "big")
            if len(buf) < 9 + n:
                break
            frames.append((buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF, buf[9:9 + n]))
            if ack and buf[3] == PING and not buf[4] & ACK:
                s.sendall(frame(PING, ACK, 0, buf[9:9 + n]))
            buf = buf[9 + n:]
        if len(buf) > limit:
            break
    return frames, False


def goaway_code(frames):
    for t, _, _, p in frames:
        if t == GOAWAY:
            return int.from_bytes(p[4:8], "big")
    return None


def goaway_last(frames):
    """The last stream id of the last GOAWAY (the drain says 2^31-1 first), or None."""
    return ([int.from_bytes(p[:4], "big") & 0x7FFFFFFF for t, _, _, p in frames if t == GOAWAY] or [None])[-1]


def has(frames, ftype, sid=None):
    return any(t == ftype and (sid is None or s == sid) for t, _, s, _ in frames)


def health(port):
    rc, out, err = curl("--http2-prior-knowledge", f"http://127.0.0.1:{port}/health")
    rc1, out1, _ = curl("--http1.1", f"http://127.0.0.1:{port}/health")
    return out.endswith("200 2") and out1.endswith("200 1.1")


# ---- parts ---------------------------------------------------------------

def part_cleartext():
    with Server("host_check", "--port", "0", "--http2") as s:
        u = f"http://127.0.0.1:{s.port}"
        rc, out, err = curl("--http2-prior-knowledge", u + "/health")
        F.check(rc == 0 and out.endswith("200 2") and '"ok"' in out, f"prior knowledge /health: {rc} {out!r} {err}")
        rc, out, err = curl("--http2-prior-knowledge", u + "/nope")
        F.check(out.endswith("404 2"), f"a 404 over HTTP/2: {out!r} {err}")
        rc, out, err = curl("--http2-prior-knowledge", "-I", u + "/health")
        F.check(rc == 0 and "HTTP/2 200" in out and "content-length: 15" in out.lower(), f"HEAD: {out!r} {err}")
        F.check("connection:" not in out.lower(), f"no connection field in an HTTP/2 head: {out!r}")
        tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        rc, out, err = curl("--http2-prior-knowledge", "-i", "-H", "traceparent: " + tp, u + "/health")
        F.check(f"traceparent: {tp}" in out, f"a stream's traceparent is its trace id, echoed: {out!r}")
        rc, out, err = curl("--http2-prior-knowledge", "--data-binary", "hello over h2", u + "/loop/echo")
        F.check(out.endswith("200 2") and "hello over h2" in out, f"a POST's body reaches the view: {out!r} {err}")
        ok, out = h2load(u + "/health", n=400, m=100)
        F.check(ok == 400, f"h2load, 100 streams on one connection: {ok} of 400 2xx\n{out}")
        rc, out, err = curl("--http2-prior-knowledge", "--data-binary", "to the actor", u + "/actor/echo")
        F.check(out.endswith("200 2") and '"body":"to the actor"' in out, f"an application actor's reply: {out!r} {err}")
        ok, out = h2load(u + "/actor/echo", n=200, m=50)
        F.check(ok == 200, f"h2load, an actor's replies on 50 streams at once: {ok} of 200 2xx\n{out}")
        rc, out, err = curl("--http2-prior-knowledge", u + "/actor/stream")
        F.check(out.endswith("200 2") and "aaaaaaaaaaaaaaa\n" in out, f"an actor's reply in pieces (test_http2_streams): {out!r}")
        rc, out, err = curl("--http2-prior-knowledge", u + "/deferred?ms=10")
        F.check(rc == 0 and out.endswith("200 2") and '"deferred":10' in out, f"m0_defer's answer: {out!r} {err}")
        ok, out = h2load(u + "/deferred?ms=1", n=200, m=50)
        F.check(ok == 200, f"h2load, deferred answers on 50 streams at once: {ok} of 200 2xx\n{out}")
        # streams whose answer is away when the client resets them, or leaves: the answer finds no stream
        c = connect(s.port)
        c.sendall(PREFACE + frame(SETTINGS, 0, 0) + frame(HEADERS, END_STREAM | END_HEADERS, 1,
                                                           request(b"/deferred?ms=200")) +
                  frame(RST, 0, 1, struct.pack(">I", 8)) +
                  frame(HEADERS, END_STREAM | END_HEADERS, 3, request(b"/deferred?ms=200")))
        c.close()
        rc, out, err = curl("--http2-prior-knowledge", u + "/deferred?ms=300")
        F.check(out.endswith("200 2"), f"served after streams left while their answers were away: {out!r} {err}")
    for args, on in [((), False), (("--http2",), True)]:
        rc, out, err = run("host_check", "--port", "0", "--doctor", *args, timeout=20)
        h2 = json.loads(out).get("http2", {}) if rc == 0 else {}
        F.check(h2.get("on") is on and ("505" in h2.get("how", "")) != on, f"the doctor's http2 {args}: {rc} {h2}")
    with Server("host_check", "--port", "0") as s:  # off by default: the preface is HTTP/1.1's error
        c = connect(s.port)
        c.sendall(PREFACE)
        data = c.recv(4096)
        c.close()
        F.check(data.startswith(b"HTTP/1.1 4") or data.startswith(b"HTTP/1.1 505"),
                f"without --http2 the preface is refused as HTTP/1.1: {data[:60]!r}")


def part_https():
    make_certs()
    with Server("host_check", "--port", "0", "--http2", "--certfile", path("leaf.crt"), "--keyfile",
                path("leaf.key")) as s:
        u = f"https://localhost:{s.port}/health"
        rc, out, err = curl("--cacert", path("ca.crt"), "--http2", u, u)
        F.check(rc == 0 and out.count("200 2") == 2, f"curl --http2 over TLS: {out!r} {err}")
        rc, out, err = curl("--cacert", path("ca.crt"), "--http1.1", u)
        F.check(out.endswith("200 1.1"), f"curl --http1.1 over TLS: {out!r} {err}")
        # h2load asks getaddrinfo, which a fresh Debian 12 chroot does not answer
        # for "localhost" (curl resolves that name itself): the address, so no
        # SNI and the default certificate
        ok, out = h2load(f"https://127.0.0.1:{s.port}/health", n=200, m=100)
        F.check(ok == 200, f"h2load over TLS (ALPN h2): {ok} of 200 2xx\n{out}")
    with Prefork("host_check", "--port", "0", "--http2", "--workers", "2", "--certfile", path("leaf.crt"),
                 "--keyfile", path("leaf.key")) as s:
        ok, out = h2load(f"https://127.0.0.1:{s.port}/health", n=400, m=50, clients=4)
        F.check(ok == 400, f"--workers 2 over TLS (ALPN h2 in each worker): {ok} of 400 2xx\n{out}")


def hostile_bomb(port):
    c = connect(port)
    big = b"x" * 4000  # one dynamic-table entry, then ~4 KB for each one-byte reference
    block = literal(b"bomb", big, index=True) + b"\xbe" * 60  # index 62: the entry just added (60 fields: under the count limit)
    c.sendall(PREFACE + frame(SETTINGS, 0, 0) + frame(HEADERS, END_STREAM | END_HEADERS, 1, request() + block) +
              frame(HEADERS, END_STREAM | END_HEADERS, 3, request()))
    frames, eof = frames_until(c, lambda fr: (has(fr, RST, 1) or goaway_code(fr) is not None) and
                               has(fr, HEADERS, 3))
    c.close()
    F.check(has(frames, RST, 1) or goaway_code(frames) is not None, f"HPACK bomb: stream 1 refused: {frames[:6]}")
    F.check(not has(frames, HEADERS, 1), "HPACK bomb: stream 1 not answered")


def hostile_fields(port):
    """:authority and 99 fields are answered; :authority and 100 (101 for a view, whose limit is 100) reset
    the stream, none dropped silently."""
    c = connect(port)
    fields = lambda k: request() + b"".join(literal(b"x-%d" % i, b"v") for i in range(k))
    c.sendall(PREFACE + frame(SETTINGS, 0, 0) + frame(HEADERS, END_STREAM | END_HEADERS, 1, fields(99)) +
              frame(HEADERS, END_STREAM | END_HEADERS, 3, fields(100)))
    frames, eof = frames_until(c, lambda fr: has(fr, HEADERS, 1) and (has(fr, RST, 3) or has(fr, HEADERS, 3)))
    c.close()
    F.check(has(frames, HEADERS, 1) and has(frames, RST, 3) and not has(frames, HEADERS, 3),
            f"100 fields and :authority: reset, 99 answered: {[(t, sid) for t, _, sid, _ in frames]}")


def hostile_rapid_reset(port):
    c = connect(port)
    burst = b"".join(frame(HEADERS, END_STREAM | END_HEADERS, i, request()) + frame(RST, 0, i, struct.pack(">I", 8))
                     for i in range(1, 2001, 2))
    c.sendall(PREFACE + frame(SETTINGS, 0, 0) + burst)
    frames, eof = frames_until(c, lambda fr: goaway_code(fr) is not None)
    c.close()
    last = next((int.from_bytes(p[:4], "big") & 0x7FFFFFFF for t, _, _, p in frames if t == GOAWAY), None)
    F.check(last is not None and last < 1999 and goaway_code(frames) == ENHANCE_YOUR_CALM,
            f"rapid reset: GOAWAY ENHANCE_YOUR_CALM before the burst's end: last stream {last}, "
            f"code {goaway_code(frames)}")


def hostile_settings(port):
    c = connect(port)
    entries = b"".join(struct.pack(">HI", 1, 4096) for _ in range(100))
    c.sendall(PREFACE + frame(SETTINGS, 0, 0, entries))
    frames, eof = frames_until(c, lambda fr: goaway_code(fr) is not None)
    c.close()
    F.check(goaway_code(frames) == ENHANCE_YOUR_CALM, f"SETTINGS of 100 entries: GOAWAY ENHANCE_YOUR_CALM: "
            f"{goaway_code(frames)}")


def hostile_ping_flood(port):
    """PINGs sent without reading an ACK: the host stops queuing them and ends the connection."""
    c = connect(port)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    pings = frame(PING, 0, 0, b"12345678") * 4096
    c.sendall(PREFACE + frame(SETTINGS, 0, 0))
    ended = False
    try:
        for _ in range(2000):  # at most 140 MB of PINGs
            c.sendall(pings)
    except (BrokenPipeError, ConnectionResetError):
        ended = True
    except socket.timeout:
        ended = False  # the host stopped reading and kept the connection: not refused
    c.close()
    F.check(ended, "PING flood: the connection is ended")


def hostile_garbage(port):
    c = connect(port)
    c.sendall(PREFACE + b"\x00\x00\x04\x99garbage-not-a-frame" * 4)
    frames, eof = frames_until(c, lambda fr: False)
    c.close()
    F.check(eof and goaway_code(frames) is not None, f"garbage after the preface: GOAWAY and closed: {frames[:4]}")


def hostile_split(port):
    c = connect(port)
    for b in PREFACE:
        c.sendall(bytes([b]))
    c.sendall(frame(SETTINGS, 0, 0) + frame(HEADERS, END_STREAM | END_HEADERS, 1, request()))
    frames, eof = frames_until(c, lambda fr: any(t == DATA and s == 1 and f & END_STREAM for t, f, s, _ in fr))
    c.close()
    body = b"".join(p for t, _, s, p in frames if t == DATA and s == 1)
    F.check(b'"ok"' in body, f"the preface a byte at a time: served: {frames[:6]}")


def hostile_streams(port):
    """150 streams opened and left open (no END_STREAM): past 100 each is refused (RST_STREAM)."""
    c = connect(port)
    c.sendall(PREFACE + frame(SETTINGS, 0, 0) +
              b"".join(frame(HEADERS, END_HEADERS, i, request(b"/loop/echo", b"POST")) for i in range(1, 301, 2)))
    frames, eof = frames_until(c, lambda fr: sum(t == RST for t, _, _, _ in fr) >= 50 or goaway_code(fr) is not None)
    c.close()
    refused = sorted(s for t, _, s, _ in frames if t == RST)
    F.check(len(refused) >= 50 and refused[0] > 200, f"past 100 open streams each is refused: {refused[:5]}.. "
            f"({len(refused)}), GOAWAY {goaway_code(frames)}")


def hostile_continuation(port):
    """A HEADERS followed by 20 CONTINUATION frames of one field each (the 2024 CONTINUATION flood): GOAWAY."""
    c = connect(port)
    frames_out = frame(HEADERS, END_STREAM, 1, request())
    frames_out += b"".join(frame(9, 0, 1, literal(b"x-c", b"v")) for _ in range(20))  # 9: CONTINUATION
    c.sendall(PREFACE + frame(SETTINGS, 0, 0) + frames_out)
    frames, eof = frames_until(c, lambda fr: goaway_code(fr) is not None)
    c.close()
    F.check(goaway_code(frames) == ENHANCE_YOUR_CALM and not has(frames, HEADERS, 1),
            f"CONTINUATION flood: GOAWAY ENHANCE_YOUR_CALM, the stream not answered: {goaway_code(frames)}")


def hostile_idle(port):
    """A connection idle past --keepalive-timeout-ms is told GOAWAY NO_ERROR, then closed."""
    c = connect(port)
    c.sendall(PREFACE + frame(SETTINGS, 0, 0) + frame(HEADERS, END_STREAM | END_HEADERS, 1, request()))
    frames, eof = frames_until(c, lambda fr: False)  # until the host closes it (the socket's 10 s at most)
    c.close()
    last = goaway_last(frames)
    F.check(eof and has(frames, DATA, 1) and goaway_code(frames) == 0 and last == 1,
            f"idle: answered, then GOAWAY NO_ERROR naming stream 1 and the close: {goaway_code(frames)} {last}")


def hostile_bodies(port):
    """40 streams at once, each sending a body under --max-body-bytes (900 KB): past 8 MiB held at once
    the rest are answered 413."""
    body = path("body.txt")
    with open(body, "wb") as f:
        f.write(b"b" * 900000)
    p = subprocess.run(["h2load", "-n", "40", "-c", "1", "-m", "40", "-d", body, f"http://127.0.0.1:{port}/loop/echo"],
                       capture_output=True, timeout=60)
    m = re.search(r"status codes: (\d+) 2xx, \d+ 3xx, (\d+) 4xx", p.stdout.decode(errors="replace"))
    F.check(m and int(m.group(1)) > 0 and int(m.group(2)) > 0 and int(m.group(1)) + int(m.group(2)) == 40,
            f"bodies held at once are bounded: some 413: {m and m.group(0)}")


def part_hostile():
    with Server("host_check", "--port", "0", "--http2", "--keepalive-timeout-ms", "2000", "--metrics-path",
                "/metrics") as s:
        for name, fn in [("hpack bomb", hostile_bomb), ("fields", hostile_fields), ("rapid reset", hostile_rapid_reset),
                         ("settings", hostile_settings), ("ping flood", hostile_ping_flood),
                         ("garbage", hostile_garbage), ("split preface", hostile_split),
                         ("streams", hostile_streams), ("continuation", hostile_continuation),
                         ("bodies", hostile_bodies), ("idle", hostile_idle)]:
            fn(s.port)
            F.check(health(s.port), f"/health answers after the {name}")
        F.check(s.proc.poll() is None, f"the host lives: {s.stderr()[-2000:]}")
        rc, out, err = curl("--http2-prior-knowledge", f"http://127.0.0.1:{s.port}/metrics")
        n = sum(int(v) for v in re.findall(r'^m0_http2_refused_total\{loop="\d+"\} (\d+)$', out, re.M))
        F.check(n >= 5, f"hostile: the refusals on /metrics (m0_http2_refused_total): {n}")
        F.check(s.stop() == 0, f"hostile: drained, exit 0\n{s.stderr()[-1500:]}")
        m = re.search(r"drained: \d+ requests, \d+ connections, (\d+) refused", s.stderr())
        F.check(m and int(m.group(1)) >= 5, f"hostile: each refusal counted (the drain's line): {m and m.group(0)}")


def static_file(folder, name, size):
    """A folder for todo's M0_TODO_STATIC holding name, size random bytes: (the folder, the bytes)."""
    d = path(folder)
    os.makedirs(d, exist_ok=True)
    data = os.urandom(size)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)
    return d, data


def part_files():
    """m0_respond_file over HTTP/2 (todo's /static/{name}): 30 MB whole and byte-exact, within curl's bound
    (DATA held back at the 1 MiB mark goes on as the writes end, not at the sweep's second: 27 s so), and a range."""
    d, data = static_file("static", "big.bin", 30 << 20)
    with Server("todo", "--port", "0", "--http2", "--blocking-threads", "1", env={"M0_TODO_STATIC": d}) as s:
        u = f"http://127.0.0.1:{s.port}/static/big.bin"
        p = subprocess.run(["curl", "-sS", "--max-time", "15", "--http2-prior-knowledge", "-o", path("got.bin"), u],
                           capture_output=True, timeout=30)
        got = open(path("got.bin"), "rb").read() if os.path.exists(path("got.bin")) else b""
        F.check(p.returncode == 0 and got == data, f"30 MB file over HTTP/2: {p.returncode} {len(got)} bytes "
                f"{p.stderr.decode(errors='replace')}")
        p = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-r", "1000-1999", u], capture_output=True,
                           timeout=20)
        F.check(p.stdout == data[1000:2000], f"a range over HTTP/2: {len(p.stdout)} bytes")


def part_pool():
    with Server("host_check", "--port", "0", "--http2", "--blocking-threads", "2") as s:
        u = f"http://127.0.0.1:{s.port}"
        rc, out, err = curl("--http2-prior-knowledge", u + "/pid")
        F.check(out.endswith("200 2") and out.split("\n")[0].strip().isdigit(), f"a handler thread's answer: {out!r} {err}")
        ok, out = h2load(u + "/pid", n=400, m=100)
        F.check(ok == 400, f"h2load, the handler threads' answers on 100 streams: {ok} of 400 2xx\n{out}")
        F.check(health(s.port), "/health beside the handler threads")


def part_drain():
    """SIGTERM while a stream's answer is away: GOAWAY naming the last stream, the answer still sent, then
    the close; the host exits 0."""
    with Server("host_check", "--port", "0", "--http2") as s:
        c = connect(s.port)
        c.sendall(PREFACE + frame(SETTINGS, 0, 0) +
                  frame(HEADERS, END_STREAM | END_HEADERS, 1, request(b"/deferred?ms=2000")) +
                  frame(HEADERS, END_STREAM | END_HEADERS, 3, request()))
        frames, eof = frames_until(c, lambda fr: has(fr, HEADERS, 3))  # both read: the second is answered
        s.signal()
        more, eof = frames_until(c, lambda fr: False)
        c.close()
        frames += more
        body = b"".join(p for t, _, sid, p in frames if t == DATA and sid == 1)
        last = goaway_last(frames)
        F.check(last == 3 and goaway_code(frames) == 0, f"drain: GOAWAY NO_ERROR, last stream 3: {last}")
        F.check(b'"deferred":2000' in body and eof, f"drain: the stream away is answered, then the close: {body!r}")
        F.check(s.wait(15) == 0, f"drain: exit 0\n{s.stderr()[-1500:]}")


def part_drain_window():
    """SIGTERM while a 1 MiB file is held by the client's flow-control window (65,535 bytes sent): the
    WINDOW_UPDATEs sent after the GOAWAY are read, the file goes whole, then the close."""
    d, data = static_file("static-drain", "one.bin", 1 << 20)
    with Server("todo", "--port", "0", "--http2", "--blocking-threads", "1", env={"M0_TODO_STATIC": d}) as s:
        c = connect(s.port)
        c.sendall(PREFACE + frame(SETTINGS, 0, 0) + frame(HEADERS, END_STREAM | END_HEADERS, 1,
                                                        request(b"/static/one.bin")))
        got = lambda fr: sum(len(p) for t, _, sid, p in fr if t == DATA and sid == 1)
        frames, eof = frames_until(c, lambda fr: got(fr) >= 65535)
        s.signal()
        more, eof = frames_until(c, lambda fr: goaway_code(fr) is not None)
        frames += more
        grow = struct.pack(">I", 1 << 30)
        c.sendall(frame(8, 0, 0, grow) + frame(8, 0, 1, grow))  # 8: WINDOW_UPDATE, the connection's and the stream's
        more, eof = frames_until(c, lambda fr: False)
        c.close()
        frames += more
        body = b"".join(p for t, _, sid, p in frames if t == DATA and sid == 1)
        F.check(body == data and eof, f"drain: a file held by flow control is sent whole after the GOAWAY: "
                f"{len(body)} of {len(data)} bytes, eof {eof}")
        F.check(s.wait(15) == 0, f"drain (window): exit 0\n{s.stderr()[-1500:]}")


def part_slow():
    """--body-timeout-ms 1000: a body trickled a byte every 0.3 s (slowloris) has its stream reset (CANCEL)
    without an answer, while a second stream on the same connection is answered and /health answers."""
    with Server("host_check", "--port", "0", "--http2", "--body-timeout-ms", "1000") as s:
        c = connect(s.port)
        c.sendall(PREFACE + frame(SETTINGS, 0, 0) + frame(HEADERS, END_HEADERS, 1, request(b"/loop/echo", b"POST")))
        c.settimeout(0.3)
        frames, buf = [], b""
        for _ in range(20):  # 6 s at most; the reset comes about a second (and a sweep) in
            c.sendall(frame(DATA, 0, 1, b"x"))
            more, eof = frames_until(c, lambda fr: has(fr, RST, 1))
            frames += more
            if has(frames, RST, 1) or not eof:
                break
        c.settimeout(10)
        c.sendall(frame(DATA, END_STREAM, 1, b"x") + frame(HEADERS, END_STREAM | END_HEADERS, 3, request()))
        more, eof = frames_until(c, lambda fr: has(fr, HEADERS, 3))
        c.close()
        frames += more
        rst = next((int.from_bytes(p[:4], "big") for t, _, sid, p in frames if t == RST and sid == 1), None)
        F.check(rst == 8 and not has(frames, HEADERS, 1), f"a trickled body is reset (CANCEL), not answered: {rst}")
        F.check(has(frames, HEADERS, 3), "the connection's next stream is answered")
        F.check(health(s.port), "/health after the slow body")


def part_short_file():
    """A file cut shorter while its stream waits on flow control: the stream is reset (INTERNAL_ERROR), the
    host's fault, not the client's: m0_http2_refused_total stays 0."""
    d = path("static-short")
    os.makedirs(d, exist_ok=True)
    name = os.path.join(d, "cut.bin")
    with open(name, "wb") as f:
        f.write(os.urandom(1 << 20))
    with Server("todo", "--port", "0", "--http2", "--blocking-threads", "1", "--metrics-path", "/metrics",
                env={"M0_TODO_STATIC": d}) as s:
        c = connect(s.port)
        c.sendall(PREFACE + frame(SETTINGS, 0, 0) + frame(HEADERS, END_STREAM | END_HEADERS, 1,
                                                        request(b"/static/cut.bin")))
        frames, eof = frames_until(c, lambda fr: sum(len(p) for t, _, sid, p in fr if t == DATA and sid == 1) >= 65535)
        os.truncate(name, 100000)
        grow = struct.pack(">I", 1 << 30)
        c.sendall(frame(8, 0, 0, grow) + frame(8, 0, 1, grow))  # 8: WINDOW_UPDATE
        more, eof = frames_until(c, lambda fr: has(fr, RST, 1))
        c.close()
        F.check(has(more, RST, 1), f"a file cut short: its stream reset: eof {eof}")
        rc, out, err = curl("--http2-prior-knowledge", f"http://127.0.0.1:{s.port}/metrics")
        n = re.findall(r'^m0_http2_refused_total\{loop="\d+"\} (\d+)$', out, re.M)
        F.check(n and sum(int(v) for v in n) == 0, f"the host's own reset is not counted a refusal: {n}")


def part_modes():
    for args, cls in [(("--threads", "2"), Server), (("--workers", "2"), Prefork)]:
        with cls("host_check", "--port", "0", "--http2", *args) as s:
            ok, out = h2load(f"http://127.0.0.1:{s.port}/health", n=400, m=50, clients=4)
            F.check(ok == 400, f"{args}: h2load, 4 connections: {ok} of 400 2xx\n{out}")
            F.check(health(s.port), f"{args}: /health")


if __name__ == "__main__":  # test_http2_hostile.py takes its frames from here
    run_parts(F, [("cleartext", part_cleartext), ("pool", part_pool), ("files", part_files), ("https", part_https),
                  ("hostile", part_hostile), ("drain", part_drain), ("drain window", part_drain_window),
                  ("slow", part_slow), ("short file", part_short_file), ("modes", part_modes)], tmp=TMP)
