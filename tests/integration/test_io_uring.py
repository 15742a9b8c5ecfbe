"""The loops' io_uring transport (--io uring, http/io_ring.c): the main HTTP
behaviours through it, the doctor's line, and the fallback where io_uring is
refused.

Proves, against the real host_check with --io uring:
- the doctor says {"io": {"path": "uring"}} and its io check passes;
- a request sent whole, one byte per write and cut at random is answered the
  same; three requests pipelined in one write with the FIN right behind get
  three answers in order, then the close; keep-alive: ten requests on one
  connection; a 1 MiB body is read whole (POST /loop/echo answers 413 only
  past --max-body-bytes: 200 with its length here); a request then a bad
  one and the FIN: the first answered 200, the second 400 (both written
  before the close);
- files: todo's /static/{name} (m0_respond_file, sendfile on the ring's
  socket) whole and a range of it, byte-exact;
- a WebSocket echoes a masked text message; an SSE stream sends its beats;
- the drain: SIGTERM while a /slow request is on the pool, answered whole,
  exit 0.
(A paused client's backpressure under io_uring: test_slow_reader, which
passes with M0_IO=uring too.) And with io_uring_setup refused by a seccomp filter (as a container's profile
does): --io auto serves through epoll and the doctor says why; --io uring
refuses to start (exit 78, the io check and its fix).
"""
import ctypes
import json
import os
import signal
import socket
import struct
import subprocess
import tempfile

from harness import BIN, Failures, Server, wait_for
from rawhttp import Conn, Mode, parse_responses, request

F = Failures()
URING = ["--io", "uring"]
TMP = tempfile.mkdtemp(prefix="m0-uring-")


def refuse_io_uring():
    """preexec_fn: a seccomp filter that answers io_uring_setup (425 on
    every architecture Linux numbers from the generic table) with EPERM."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    nr_setup, errno_eperm = 425, 1

    def insn(code, jt, jf, k):
        return struct.pack("HBBI", code, jt, jf, k)
    prog = (insn(0x20, 0, 0, 0) +                                    # ld [nr]
            insn(0x15, 0, 1, nr_setup) +                             # jeq io_uring_setup
            insn(0x06, 0, 0, 0x00050000 | errno_eperm) +             # ret ERRNO(EPERM)
            insn(0x06, 0, 0, 0x7fff0000))                            # ret ALLOW
    buf = ctypes.create_string_buffer(prog)
    fprog = struct.pack("HxxxxxxQ", len(prog) // 8, ctypes.addressof(buf))
    fbuf = ctypes.create_string_buffer(fprog)
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.addressof(fbuf), 0, 0) != 0:  # NO_NEW_PRIVS, SECCOMP
        os._exit(99)


def doctor(*args, refused=False):
    p = subprocess.run([os.path.join(BIN, "host_check"), "--doctor", *args], capture_output=True, text=True,
                       timeout=30, preexec_fn=refuse_io_uring if refused else None)
    return p.returncode, json.loads(p.stdout) if p.stdout.strip() else {}


def check_of(d, name):
    return next((c for c in d.get("checks", []) if c["name"] == name), {})


def answers(port, messages, mode, fin, n):
    with Conn(port, timeout=10) as c:
        c.send_split(messages, mode, fin=fin)
        rs, why = c.read_responses(n)
        return rs, why, c


def part_doctor():
    rc, d = doctor(*URING)
    F.check(rc == 0 and d.get("io") == {"path": "uring"} and check_of(d, "io").get("ok"),
            f"the doctor with --io uring: io {d.get('io')}, check {check_of(d, 'io')} (exit {rc})")


def part_http(s):
    get = request("GET", "/health")
    for kind in ("whole", "bytes", "random"):
        rs, why, _ = answers(s.port, [get], Mode(kind, seed=7), False, 1)
        F.check(rs and rs[0].status == 200 and b'"status":"ok"' in rs[0].body, f"GET /health sent {kind}: 200 ({why})")
    three = [request("GET", "/health"), request("GET", "/loop/echo"), request("GET", "/health")]
    with Conn(s.port, timeout=10) as c:
        c.send_split(three, Mode("whole"), fin=True)
        data, closed = c.read_until_closed()
        rs = parse_responses(data)[0] if data else []
        F.check(closed and [r.status for r in rs] == [200, 200, 200],
                f"three pipelined with the FIN in the same write: three answers then the close "
                f"({[r.status for r in rs]}, closed {closed})")
    with Conn(s.port, timeout=10) as c:
        ok = 0
        for _ in range(10):
            c.send(request("GET", "/health"))
            rs, _ = c.read_responses(1)
            ok += bool(rs and rs[0].status == 200)
        F.check(ok == 10, f"keep-alive: ten requests on one connection answered ({ok})")
    body = bytes(i % 251 for i in range(1 << 20))
    rs, why, _ = answers(s.port, [request("POST", "/loop/echo", [("Content-Length", str(len(body)))], body)],
                         Mode("random", seed=3), False, 1)
    F.check(rs and rs[0].status == 200, f"a 1 MiB body read whole: 200 ({rs[0].status if rs else why})")
    bad = b"GET /health HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"
    for kind in ("whole", "bytes", "lines", "random"):
        with Conn(s.port, timeout=10) as c:
            c.send_split([request("GET", "/health"), bad], Mode(kind, seed=11), fin=True)
            data, closed = c.read_until_closed()
            rs = parse_responses(data)[0] if data else []
            F.check([r.status for r in rs] == [200, 400] and closed,
                    f"a request, a bad one and the FIN, sent {kind}: 200 then 400, then the close "
                    f"({[r.status for r in rs]})")


def part_files():
    d = os.path.join(TMP, "static")
    os.makedirs(d, exist_ok=True)
    data = bytes((i * 7 + i // 251) % 256 for i in range(3 << 20))
    with open(os.path.join(d, "big.bin"), "wb") as f:
        f.write(data)
    with Server("todo", "--port", "0", "--blocking-threads", "1", *URING, env={"M0_TODO_STATIC": d}) as s:
        p = subprocess.run(["curl", "-sS", s.url("/static/big.bin")], capture_output=True, timeout=30)
        F.check(p.returncode == 0 and p.stdout == data, f"a 3 MiB file whole ({len(p.stdout)} bytes)")
        p = subprocess.run(["curl", "-sS", "-r", "1000000-1200000", s.url("/static/big.bin")], capture_output=True,
                           timeout=30)
        F.check(p.returncode == 0 and p.stdout == data[1000000:1200001], f"a range of it ({len(p.stdout)} bytes)")


def part_streams(s):
    ws = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    ws.sendall(b"GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    got = b""
    while b"\r\n\r\n" not in got and len(got) < 65536:  # the 101 first (RFC 6455 4.1: a client waits for it)
        b = ws.recv(65536)
        if not b:
            break
        got += b
    msg, mask = b"through the ring", b"\x01\x02\x03\x04"
    ws.sendall(bytes([0x81, 0x80 | len(msg)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(msg)))
    while msg not in got and len(got) < 65536:
        b = ws.recv(65536)
        if not b:
            break
        got += b
    F.check(got.startswith(b"HTTP/1.1 101") and msg in got, f"a WebSocket echoes a text message ({got[:40]!r})")
    ws.close()
    with Conn(s.port, timeout=10) as c:
        c.send(request("GET", "/events"))
        F.check(c.wait_until(lambda b: b.count(b"\nid: ") >= 2, 10), f"an SSE stream sends its beats ({c.buf[:80]!r})")


def part_drain():
    s = Server("host_check", "--port", "0", "--blocking-threads", "1", *URING, env={"M0_HOSTCHECK_SLOW_SAYS": "1"})
    s.start()
    try:
        c = Conn(s.port, timeout=15)
        c.send(request("GET", "/slow?ms=500"))
        F.check(wait_for(lambda: "/slow 500 ms begins" in s.stderr(), 10), f"the drain: /slow began\n{s.stderr()}")
        s.signal(signal.SIGTERM)
        rs, why = c.read_responses(1, timeout=15)
        F.check(rs and rs[0].status == 200, f"the drain: the request on the pool answered ({why})")
        F.check(s.wait(15) == 0, f"then exit 0 ({s.rc})\n{s.stderr()}")
    finally:
        s.kill()


def part_refused():
    rc, d = doctor("--io", "auto", refused=True)
    io = d.get("io", {})
    F.check(rc == 0 and io.get("path") == "epoll" and "io_uring_queue_init" in io.get("why", ""),
            f"io_uring refused, --io auto: the doctor says epoll and why ({io}, exit {rc})")
    rc, d = doctor(*URING, refused=True)
    F.check(rc == 78 and not check_of(d, "io").get("ok") and "--io" in check_of(d, "io").get("fix", ""),
            f"io_uring refused, --io uring: exit 78, the io check fails with its fix ({check_of(d, 'io')})")
    p = subprocess.Popen([os.path.join(BIN, "host_check"), "--port", "0", "--io", "auto"], stderr=subprocess.PIPE,
                         preexec_fn=refuse_io_uring)
    try:
        line = p.stderr.readline().decode()
        port = int(line.rsplit(":", 1)[1].split()[0]) if "listening on" in line else 0
        with Conn(port, timeout=10) as c:
            c.send(request("GET", "/health"))
            rs, why = c.read_responses(1)
            F.check(rs and rs[0].status == 200, f"io_uring refused, --io auto serves through epoll ({why})")
    finally:
        p.send_signal(signal.SIGTERM)
        F.check(p.wait(timeout=15) == 0, "and drains (exit 0)")


rc0, d0 = doctor("--io", "auto")
if d0.get("io", {}).get("path") != "uring":
    # This kernel (or the container's profile) refuses io_uring: what is left
    # to prove here is the fallback, which part_refused makes happen anyway.
    print(f"io_uring is refused here ({d0.get('io')}): only the fallback is tested", flush=True)
    part_refused()
    F.done()
part_doctor()
with Server("host_check", "--port", "0", "--max-body-bytes", str(2 << 20), *URING) as srv:
    part_http(srv)
    part_streams(srv)
part_files()
part_drain()
part_refused()
F.done()
