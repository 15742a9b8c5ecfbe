#!/usr/bin/env python3
"""The plain listener beside HTTPS (--plain-port; docs/behaviour.md, HTTPS):
a second listener on the same loops that serves the metrics path and sends
every other request to HTTPS with 308, as nginx's `listen 80` server with
`return 308 https://$host$request_uri`. With a self-signed certificate this
test makes with `openssl`:

1. every mode (single, --threads 2, --workers 2, --blocking-threads 1):
   on the plain port a GET and a POST are answered 308 with Location
   https://<Host's name>:<HTTPS port><path>?<query>, the metrics path 200
   with the host's counts, and curl -L follows to HTTPS and gets the route's
   200; the HTTPS port serves as before; both requests pipelined on one
   connection are answered, their bytes sent whole, a byte at a time and in
   random cuts with the FIN behind the last (a keep-alive plain connection);
2. the Location's name: an IPv6 Host kept in brackets, the port of the
   Host replaced by HTTPS's; an HTTP/1.0 request with no Host is 400; a
   target too long for a Location header is 414, never a cut Location;
   HTTP/2 prior knowledge (--http2) on the plain port: 308 too;
3. hostile: a TLS ClientHello sent to the plain port is refused as HTTP
   (400, closed) and HTTPS goes on answering;
4. the doctor: --plain-port without --certfile, and equal to --port, exit 78
   with one line naming it; a plain port already taken: exit non-zero with
   one line naming --plain-port;
5. SIGHUP: the next generation inherits the plain listener (same port, no
   refused connection), and the drain closes it;
6. socket activation: descriptor 4 is the plain listener (LISTEN_FDS=2).
"""
import os
import re
import signal
import socket
import ssl
import subprocess
import tempfile

from harness import BIN, Failures, Prefork, Server, run_parts, wait_for
from rawhttp import Conn, Splits, parse_responses, request

F = Failures()
TMP = tempfile.mkdtemp(prefix="m0-plain-")
PLAIN_RE = re.compile(r"plain HTTP on http://\S+:(\d+) ")
CERT, KEY = os.path.join(TMP, "leaf.crt"), os.path.join(TMP, "leaf.key")
SPLITS = Splits()


def hreq(*args, **kw):
    """Request bytes with the Host the headers give (rawhttp's "t" left out)."""
    return request(*args, host=False, **kw)


def make_cert():
    p = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", KEY, "-out", CERT, "-days", "30", "-subj", "/CN=localhost", "-addext",
                        "subjectAltName=DNS:localhost,IP:127.0.0.1"], capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr


def tls_args(*more):
    return ["--port", "0", "--certfile", CERT, "--keyfile", KEY, "--metrics-path", "/metrics", *more]


def plain_port(s):
    m = wait_for(lambda: PLAIN_RE.search(s.stderr()), 10)
    return int(m.group(1)) if m else None


def exchange(port, data, timeout=5.0):
    """The responses to data (requests) on one plain connection, closed by us after."""
    with Conn(port, timeout=timeout) as k:
        k.send(data)
        out, _ = k.read_until_closed(timeout=timeout)
    return parse_responses(out)[0]


def https_status(port, target="/health"):
    c = ssl.create_default_context(cafile=CERT)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            c.wrap_socket(raw, server_hostname="localhost") as s:
        s.sendall(request("GET", target, headers=[("Connection", "close")]))
        data = b""
        while (d := s.recv(65536)):
            data += d
    return parse_responses(data)[0][0].status


def curl(*args):
    p = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{url_effective}", "--max-time", "10",
                        *args], capture_output=True, timeout=20)
    return p.stdout.decode()


def check_serves(label, s):
    pp = plain_port(s)
    F.check(pp and pp != s.port, f"{label}: the plain listener's line names its port ({pp}, HTTPS {s.port})")
    if not pp:
        return
    host = f"localhost:{pp}"
    get = hreq("GET", "/health?x=1", headers=[("Host", host), ("Connection", "close")])
    (r,) = exchange(pp, get)
    want = f"https://localhost:{s.port}/health?x=1"
    F.check(r.status == 308 and r.header("location") == want, f"{label}: GET 308 to {want} ({r}, {r.header('location')})")
    (r,) = exchange(pp, hreq("POST", "/echo", headers=[("Host", host), ("Content-Length", "2"),
                                                          ("Connection", "close")], body=b"hi"))
    F.check(r.status == 308 and r.header("location") == f"https://localhost:{s.port}/echo",
            f"{label}: POST 308 (keeps its method and body)")
    (r,) = exchange(pp, hreq("GET", "/metrics", headers=[("Host", host), ("Connection", "close")]))
    F.check(r.status == 200 and b"m0_requests_total" in r.body, f"{label}: the metrics path served on the plain port ({r})")
    got = curl("-L", "--cacert", CERT, f"http://localhost:{pp}/health")
    F.check(got == f"200 https://localhost:{s.port}/health", f"{label}: curl -L follows to HTTPS: {got!r}")
    F.check(https_status(s.port) == 200, f"{label}: HTTPS serves")
    two = [hreq("GET", "/a", headers=[("Host", host)]), hreq("GET", "/metrics", headers=[("Host", host),
                                                                                             ("Connection", "close")])]
    for mode in SPLITS.modes(label, 2):
        with Conn(pp) as k:
            k.send_split(two, mode, fin=True)
            out, closed = k.read_until_closed()
        rs = parse_responses(out)[0]
        F.check(closed and [r.status for r in rs] == [308, 200],
                f"{label}: two requests on one plain connection, {mode}: {rs}")


def part_modes():
    for label, more, cls in (("single", [], Server), ("threads", ["--threads", "2"], Server),
                             ("workers", ["--workers", "2"], Prefork), ("pool", ["--blocking-threads", "1"], Server)):
        with cls("host_check", *tls_args("--plain-port", "0", *more)) as s:
            check_serves(label, s)
            F.check(s.stop(timeout=20) == 0, f"{label}: exited 0\n{s.stderr()[-600:]}")


def part_names():
    with Server("host_check", *tls_args("--plain-port", "0", "--http2")) as s:
        pp = plain_port(s)
        (r,) = exchange(pp, hreq("GET", "/x", headers=[("Host", "[::1]:81"), ("Connection", "close")]))
        F.check(r.header("location") == f"https://[::1]:{s.port}/x", f"an IPv6 Host kept whole: {r.header('location')}")
        (r,) = exchange(pp, request("GET", "/x", version="HTTP/1.0", host=False))
        F.check(r.status == 400, f"HTTP/1.0 with no Host: 400 ({r})")
        long_target = "/" + "a" * 8180
        rs = exchange(pp, hreq("GET", long_target, headers=[("Host", "localhost"), ("Connection", "close")]))
        F.check(rs and rs[0].status in (414, 431) and rs[0].header("location") is None,
                f"a target too long for a Location: 414, no Location ({rs})")
        p = subprocess.run(["curl", "-s", "-i", "--http2-prior-knowledge", "--max-time", "10",
                            f"http://localhost:{pp}/health"], capture_output=True, timeout=20)
        out = p.stdout.decode(errors="replace")
        F.check(out.startswith("HTTP/2 308") and f"location: https://localhost:{s.port}/health" in out,
                f"HTTP/2 prior knowledge on the plain port: 308\n{out[:300]}")
        F.check(s.stop(timeout=20) == 0, f"exited 0\n{s.stderr()[-600:]}")


def part_hostile():
    with Server("host_check", *tls_args("--plain-port", "0")) as s:
        pp = plain_port(s)
        hello = bytes.fromhex("16030100") + bytes([0x50]) + b"\x01" + b"\x00" * 79
        with Conn(pp) as k:
            k.send(hello)
            out, closed = k.read_until_closed()
        F.check(closed and out.startswith(b"HTTP/1.1 400"), f"a ClientHello on the plain port: 400 and closed ({out[:40]!r})")
        F.check(https_status(s.port) == 200, "HTTPS answers after it")
        F.check(s.stop(timeout=20) == 0, f"exited 0\n{s.stderr()[-600:]}")


def part_doctor():
    cases = (("no --certfile", ["--port", "0", "--plain-port", "0"], "but there is no --certfile"),
             ("the same port", ["--port", "18443", "--certfile", CERT, "--keyfile", KEY, "--plain-port", "18443"],
              "--plain-port and --port are both 18443"))
    for label, args, want in cases:
        p = subprocess.run([os.path.join(BIN, "host_check"), *args], capture_output=True, timeout=20)
        lines = [x for x in p.stderr.decode().splitlines() if x.startswith("m0:")]
        F.check(p.returncode == 78 and len(lines) == 1 and want in lines[0] and "plain-port" in lines[0],
                f"{label}: exit 78, one line naming --plain-port ({p.returncode}: {lines})")
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        p = subprocess.run([os.path.join(BIN, "host_check"), *tls_args("--plain-port", str(taken.getsockname()[1]))],
                           capture_output=True, timeout=20)
        err = p.stderr.decode()
        F.check(p.returncode != 0 and "--plain-port" in err and "listening on" not in err,
                f"a plain port taken: not served, the line names --plain-port ({p.returncode}: {err[-300:]})")
    finally:
        taken.close()


def part_reload():
    with Server("host_check", *tls_args("--plain-port", "0")) as s:
        pp = plain_port(s)
        s.signal(signal.SIGHUP)
        F.check(wait_for(lambda: re.search(r"^m0: reload: generation 2 serving", s.stderr(), re.M), 30),
                f"SIGHUP: generation 2 serves\n{s.stderr()[-800:]}")
        F.check(len(PLAIN_RE.findall(s.stderr())) == 2 and set(PLAIN_RE.findall(s.stderr())) == {str(pp)},
                f"generation 2 has the same plain port {pp}: {PLAIN_RE.findall(s.stderr())}")
        (r,) = exchange(pp, hreq("GET", "/metrics", headers=[("Host", "localhost"), ("Connection", "close")]))
        F.check(r.status == 200, f"the plain port serves after the reload ({r})")
        F.check(s.stop(timeout=20) == 0, f"exited 0\n{s.stderr()[-600:]}")
        try:
            socket.create_connection(("127.0.0.1", pp), timeout=2).close()
            F.check(False, "the plain listener is closed at the exit")
        except OSError:
            F.check(True, "the plain listener is closed at the exit")


def part_activation():
    l3, l4 = socket.socket(), socket.socket()
    for l in (l3, l4):
        l.bind(("127.0.0.1", 0))
        l.listen(16)
    srcs = [l3.fileno(), l4.fileno()]

    def child():
        high = [os.dup(f) for f in srcs]
        for i, f in enumerate(high):
            os.dup2(f, 3 + i)

    env = dict(os.environ, LISTEN_FDS="2")
    env.pop("NOTIFY_SOCKET", None)
    cmd = ["/bin/sh", "-c", 'export LISTEN_PID=$$; exec "$0" "$@"', os.path.join(BIN, "host_check"), *tls_args()]
    err = tempfile.TemporaryFile()
    p = subprocess.Popen(cmd, env=env, stderr=err, pass_fds=tuple(srcs) + (3, 4), preexec_fn=child)
    try:
        def text():
            err.seek(0)
            return err.read().decode(errors="replace")
        F.check(wait_for(lambda: "listening on" in text() or p.poll() is not None, 10) and p.poll() is None,
                f"activated with two listeners: serving\n{text()[-500:]}")
        pp = l4.getsockname()[1]
        (r,) = exchange(pp, hreq("GET", "/x", headers=[("Host", "localhost"), ("Connection", "close")]))
        F.check(r.status == 308 and r.header("location") == f"https://localhost:{l3.getsockname()[1]}/x",
                f"descriptor 4 is the plain listener: 308 to descriptor 3's port ({r}, {r.header('location')})")
        F.check(https_status(l3.getsockname()[1]) == 200, "descriptor 3 serves HTTPS")
        p.send_signal(signal.SIGTERM)
        F.check(p.wait(20) == 0, f"exited 0\n{text()[-400:]}")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(5)
        l3.close()
        l4.close()


make_cert()
run_parts(F, [("modes", part_modes), ("names", part_names), ("hostile", part_hostile), ("doctor", part_doctor),
              ("reload", part_reload), ("activation", part_activation)], tmp=TMP)
