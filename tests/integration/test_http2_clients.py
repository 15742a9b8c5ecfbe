#!/usr/bin/env python3
"""HTTP/2 with the clients issue 41 names that test_http2 (curl, h2load) and
test_https_browser (Chromium) do not drive: nghttp, python3-h2, python3-httpx
and openssl s_client, in every mode (single, --threads 2, --workers 2, and
--blocking-threads 1, where host_check's /pid is answered by a handler
thread), each over cleartext prior knowledge and over HTTPS with ALPN h2 (a
CA and a leaf this test makes with `openssl`):

- nghttp -v: the frames it prints (the server's SETTINGS, :status 200, DATA
  with END_STREAM) and the body; nghttp -d: a POST's body echoed;
  nghttp -u (cleartext): the HTTP/1.1 Upgrade to h2c, which m0 does not do,
  is answered as plain HTTP/1.1 (200 and the body, no 101, no frame), so
  nghttp reports "HTTP Upgrade failed";
- python3-h2, an H2Connection driven by hand over a socket or an ssl socket:
  seven streams at once (/health, /pid and five POSTs to /loop/echo, each body
  sent in three DATA frames), each answer matched to its stream by the body
  it echoes, a PING answered with its payload, then the client's GOAWAY,
  after which the host closes the connection;
- python3-httpx, http2=True over TLS (verify= the test's CA): HTTP/2, a GET
  and a POST on one connection;
- openssl s_client -alpn h2: "ALPN protocol: h2" and the chain verified;
  -alpn http/1.1: an HTTP/1.1 request typed by hand is answered HTTP/1.1.

h2 and httpx are Debian's python3-h2 and python3-httpx: when the python3
running this has neither and /usr/bin/python3 has them, the test runs itself
again under /usr/bin/python3 (saying so); when none has them, those parts are
skipped with a line naming the package and the rest runs.
"""
import os
import subprocess
import sys

DEBIAN_PY = "/usr/bin/python3"


def _has(mod):
    try:
        __import__(mod)
        return True
    except ImportError:
        return False


def _rerun_under_debian():
    """os.execv under Debian's python3 when it imports more of h2 (first) and httpx than this one."""
    if (_has("h2") and _has("httpx")) or os.path.realpath(sys.executable) == os.path.realpath(DEBIAN_PY):
        return
    if not os.access(DEBIAN_PY, os.X_OK):
        return
    imports = lambda mod: subprocess.run([DEBIAN_PY, "-c", "import " + mod], capture_output=True,
                                         timeout=30).returncode == 0
    mine, debian = (_has("h2"), _has("httpx")), (imports("h2.connection"), imports("httpx"))
    if debian[0] and debian > mine:
        print(f"test_http2_clients: {sys.executable} has no h2/httpx: running again under {DEBIAN_PY}", flush=True)
        os.execv(DEBIAN_PY, [DEBIAN_PY, *sys.argv])


_rerun_under_debian()

import re  # noqa: E402  (after the re-run: the same imports under either interpreter)
import socket  # noqa: E402
import ssl  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

from harness import Failures, Prefork, Server, output_dir, run_parts, sanitizer_report  # noqa: E402

H2 = _has("h2")
HTTPX = H2 and _has("httpx")
if H2:
    import h2.config  # noqa: E402
    import h2.connection  # noqa: E402
    import h2.events  # noqa: E402

F = Failures()
TMP = tempfile.mkdtemp(prefix="m0-h2clients-")
MODES = [("single", (), Server), ("--threads 2", ("--threads", "2"), Server),
         ("--workers 2", ("--workers", "2"), Prefork), ("pool", ("--blocking-threads", "1"), Server)]


def path(name):
    return os.path.join(TMP, name)


def openssl(*args, stdin=None):
    p = subprocess.run(["openssl", *args], capture_output=True, input=stdin, timeout=20)
    return p.returncode, p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")


def make_certs():
    """A CA and a leaf for localhost and 127.0.0.1 it signed (as test_https and test_http2 make them)."""
    for args in [("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                  path("ca.key"), "-out", path("ca.crt"), "-days", "30", "-subj", "/CN=m0 test CA",
                  "-addext", "keyUsage=critical,keyCertSign,cRLSign"),
                 ("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                  path("leaf.key"), "-out", path("leaf.csr"), "-subj", "/CN=localhost", "-addext",
                  "subjectAltName=DNS:localhost,IP:127.0.0.1"),
                 ("x509", "-req", "-in", path("leaf.csr"), "-CA", path("ca.crt"), "-CAkey", path("ca.key"),
                  "-CAcreateserial", "-out", path("leaf.crt"), "-days", "30", "-copy_extensions", "copy")]:
        rc, out = openssl(*args)
        assert rc == 0, out


# ---- nghttp ----------------------------------------------------------------

def nghttp(*args):
    p = subprocess.run(["nghttp", "--timeout=10", *args], capture_output=True, timeout=30)
    return p.returncode, p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")


def check_nghttp(where, base, tls):
    rc, out = nghttp("-v", base + "/health")
    F.check(rc == 0 and re.search(r"recv SETTINGS frame <length=\d+, flags=0x00, stream_id=0>", out) and
            re.search(r"recv \(stream_id=13\) :status: 200", out) and
            re.search(r"recv DATA frame <length=15, flags=0x01, stream_id=13>\s+; END_STREAM", out) and
            '{"status":"ok"}' in out, f"{where}: nghttp -v /health: SETTINGS, :status 200, END_STREAM, the body "
            f"(rc {rc})\n{out[-1500:]}")
    body = path("nghttp-body.txt")
    with open(body, "w") as f:
        f.write("posted by nghttp")
    rc, out = nghttp("-d", body, base + "/loop/echo")
    F.check(rc == 0 and '"body":"posted by nghttp"' in out, f"{where}: nghttp -d: the body echoed: {out[-800:]}")
    if tls:
        return
    # m0 does not do the HTTP/1.1 Upgrade to h2c (RFC 9113 dropped it): the request is answered as HTTP/1.1
    rc, out = nghttp("-v", "-u", base + "/health")
    answer = out.partition("HTTP Upgrade response")[2]
    F.check(answer.lstrip().startswith("HTTP/1.1 200") and '{"status":"ok"}' in answer and
            "HTTP Upgrade failed" in out and "recv SETTINGS" not in out,
            f"{where}: nghttp -u (Upgrade: h2c) is answered plain HTTP/1.1, no switch: {out[-1200:]}")


# ---- python3-h2, by hand ---------------------------------------------------

def h2_connect(port, tls):
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    if not tls:
        return raw
    c = ssl.create_default_context(cafile=path("ca.crt"))
    c.set_alpn_protocols(["h2"])
    s = c.wrap_socket(raw, server_hostname="localhost")
    assert s.selected_alpn_protocol() == "h2", s.selected_alpn_protocol()
    return s


def h2_pump(sock, conn, state, done, deadline):
    """Reads and hands frames to conn (answering its flow control) until done(state), EOF or the deadline."""
    while not done(state) and time.monotonic() < deadline:
        try:
            data = sock.recv(65536)
        except socket.timeout:
            return  # not an EOF: a check that wants one fails
        except (ConnectionResetError, ssl.SSLError):
            data = b""
        if not data:
            state["eof"] = True
            return
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.ResponseReceived):
                state["status"][ev.stream_id] = dict(ev.headers).get(":status")
            elif isinstance(ev, h2.events.DataReceived):
                state["body"][ev.stream_id] = state["body"].get(ev.stream_id, b"") + ev.data
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                state["ended"].add(ev.stream_id)
            elif isinstance(ev, h2.events.PingAckReceived):
                state["pong"] = ev.ping_data
        sock.sendall(conn.data_to_send())


def h2_requests(conn, sock, tls):
    """Seven streams opened at once; each POST's body goes in three DATA frames (three writes). Returns
    {stream id: what its answer must hold}."""
    scheme = "https" if tls else "http"
    head = lambda method, target: [(":method", method), (":scheme", scheme), (":path", target),
                                   (":authority", "localhost")]
    want = {}
    for target, expect in [("/health", '"status":"ok"'), ("/pid", None)]:
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, head("GET", target), end_stream=True)
        want[sid] = expect
    sock.sendall(conn.data_to_send())
    posts = []
    for i in range(5):
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, head("POST", "/loop/echo") + [("content-type", "text/plain")])
        posts.append((sid, [f"s{sid}-part{k}-" + "x" * (1000 * i) for k in range(3)]))
    sock.sendall(conn.data_to_send())
    for k in range(3):  # the streams' bodies interleaved, a DATA frame each per write
        for sid, parts in posts:
            conn.send_data(sid, parts[k].encode(), end_stream=k == 2)
        sock.sendall(conn.data_to_send())
    for sid, parts in posts:
        want[sid] = '"body":"' + "".join(parts) + '"'
    return want


def check_h2(where, port, tls):
    sock = h2_connect(port, tls)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    want = h2_requests(conn, sock, tls)
    conn.ping(b"m0-ping!")
    sock.sendall(conn.data_to_send())
    state = {"status": {}, "body": {}, "ended": set(), "pong": None, "eof": False}
    deadline = time.monotonic() + 15
    h2_pump(sock, conn, state, lambda st: st["ended"] >= set(want) and st["pong"], deadline)
    wrong = [(sid, state["status"].get(sid), state["body"].get(sid, b"")[-60:]) for sid, expect in want.items()
             if state["status"].get(sid) != "200" or sid not in state["ended"] or
             (expect and expect.encode() not in state["body"].get(sid, b""))]
    F.check(not wrong, f"{where}: h2, {len(want)} streams at once, each answer on its stream: wrong {wrong}")
    pid = state["body"].get(3, b"")  # /pid: a number (a handler thread's answer in the pool mode)
    F.check(pid.strip().isdigit(), f"{where}: h2, /pid answered: {pid[:40]!r}")
    F.check(state["pong"] == b"m0-ping!", f"{where}: h2, the PING acknowledged with its data: {state['pong']!r}")
    conn.close_connection()  # GOAWAY NO_ERROR, no stream open: the host ends the connection
    sock.sendall(conn.data_to_send())
    h2_pump(sock, conn, state, lambda st: False, time.monotonic() + 10)
    F.check(state["eof"], f"{where}: h2, after the client's GOAWAY the host closes the connection")
    sock.close()


# ---- python3-httpx and openssl s_client (TLS) ------------------------------

def check_httpx(where, port):
    import httpx
    base = f"https://127.0.0.1:{port}"  # the address: a fresh chroot's getaddrinfo may not know localhost
    ca = ssl.create_default_context(cafile=path("ca.crt"))  # a context: httpx 0.28 (Debian 13) deprecates a path
    with httpx.Client(http2=True, verify=ca, trust_env=False, timeout=10) as c:
        r = c.get(base + "/pid")
        F.check(r.http_version == "HTTP/2" and r.status_code == 200 and r.text.strip().isdigit(),
                f"{where}: httpx GET /pid: {r.http_version} {r.status_code} {r.text[:60]!r}")
        r = c.post(base + "/loop/echo", content=b"posted by httpx")
        body = r.json() if r.status_code == 200 else {}
        F.check(r.http_version == "HTTP/2" and body.get("body") == "posted by httpx",
                f"{where}: httpx POST: {r.http_version} {r.status_code} {r.text[:120]!r}")


def s_client(port, alpn, stdin=b"", *more):
    return openssl("s_client", "-connect", f"127.0.0.1:{port}", "-servername", "localhost", "-CAfile",
                   path("ca.crt"), "-alpn", alpn, *more, stdin=stdin)


def check_s_client(where, port):
    rc, out = s_client(port, "h2")
    F.check("ALPN protocol: h2" in out and "Verify return code: 0 (ok)" in out,
            f"{where}: openssl s_client -alpn h2: {out[-800:]}")
    # -ign_eof: the answer is read until the host closes (Connection: close), not cut at stdin's end
    rc, out = s_client(port, "http/1.1", b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
                       "-ign_eof")
    F.check("ALPN protocol: http/1.1" in out and re.search(r"^HTTP/1\.1 200 OK\r?$", out, re.M) and
            '{"status":"ok"}' in out, f"{where}: openssl s_client -alpn http/1.1, a request by hand: {out[-800:]}")


# ---- the modes -------------------------------------------------------------

def serve(where, args, cls, tls):
    extra = ("--certfile", path("leaf.crt"), "--keyfile", path("leaf.key")) if tls else ()
    where = f"{where} {'https' if tls else 'cleartext'}"
    # --keepalive-timeout-ms past every wait here: a connection the host closes is closed by what the test did
    with cls("host_check", "--port", "0", "--http2", "--keepalive-timeout-ms", "60000", *args, *extra) as s:
        clients = [("nghttp", lambda: check_nghttp(where, f"{'https' if tls else 'http'}://127.0.0.1:{s.port}", tls))]
        clients += [("h2", lambda: check_h2(where, s.port, tls))] if H2 else []
        clients += [("httpx", lambda: check_httpx(where, s.port))] if HTTPX and tls else []
        clients += [("s_client", lambda: check_s_client(where, s.port))] if tls else []
        for name, fn in clients:  # one client's exception (a refused handshake) leaves the others to run
            try:
                fn()
            except Exception as x:
                F.check(False, f"{where}: {name} raised {type(x).__name__}: {x}")
        rc, log = s.stop(), s.stderr()
        if rc != 0 or sanitizer_report(log):  # the whole log left to read: the check shows its end
            name = re.sub(r"[^a-z0-9]+", "-", where.lower()).strip("-") + ".log"
            with open(os.path.join(output_dir("test_http2_clients"), name), "w") as f:
                f.write(log)
        F.check(rc == 0, f"{where}: exit 0 on SIGTERM: {rc}\n{log[-1500:]}")
        F.check(not sanitizer_report(log), f"{where}: no sanitizer report: {sanitizer_report(log)}")


def part(name, args, cls):
    return lambda: [serve(name, args, cls, tls) for tls in (False, True)]


if __name__ == "__main__":
    if not H2:
        print("test_http2_clients: skipped the python3-h2 and python3-httpx parts (no interpreter imports h2: "
              "apt-get install python3-h2 python3-httpx)", flush=True)
    elif not HTTPX:
        print("test_http2_clients: skipped the python3-httpx part (apt-get install python3-httpx)", flush=True)
    make_certs()
    run_parts(F, [(name, part(name, args, cls)) for name, args, cls in MODES], tmp=TMP)
