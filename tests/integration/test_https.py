#!/usr/bin/env python3
"""HTTPS listeners (--certfile / --keyfile; docs/behaviour.md, HTTPS) with
real clients and certificates this test makes with `openssl` (a CA, leaves
signed by it, an expired one):

1. single: curl --cacert (TLS 1.3, ALPN http/1.1, keep-alive: one connection
   for two requests), Python's ssl at TLS 1.2 and 1.3, SNI choosing between
   two certificates (`openssl s_client -servername`), a client offering only
   h2 refused, resumption by `openssl s_client -sess_out / -sess_in`;
2. --threads 2, --io uring (HTTPS on libuv's transport, the doctor says so)
   and --workers 2: served, and a session made on one worker resumed on the
   other (ticket keys shared by every worker);
3. hostile: a ClientHello sent a byte at a time then silence (closed at
   --header-timeout-ms), a truncated record, plain HTTP at the TLS port
   (closed), a forged record sent with the client's Finished (the ticket,
   then bad_record_mac, closed), half-done handshakes held open, a client
   that sends and never reads: each closed or left alone while /health
   answers others; a client that pipelines records and reads slowly gets
   every answer (records left in the engine while the connection stopped
   reading);
4. the doctor (exit 78, one line naming the file): a missing file, a key
   that is not the certificate's, an expired certificate, a chain out of
   order; one ending within 14 days served with a warning;
5. files (m0_respond_file) whole and by range; an SSE stream and a
   WebSocket;
6. SIGHUP: a certificate replaced by an expired one is refused and the old
   one serves on; replaced by a good one, the next generation serves it.
"""
import json
import os
import re
import resource
import signal
import socket
import ssl
import subprocess
import tempfile
import time

from harness import BIN, Failures, Prefork, Server, run, run_parts, wait_for

F = Failures()
TMP = tempfile.mkdtemp(prefix="m0-https-")
SERVING = re.compile(r"^m0: reload: generation (\d+) serving \(pid (\d+)\)", re.M)


def path(name):
    return os.path.join(TMP, name)


def openssl(*args, stdin=None, timeout=20):
    p = subprocess.run(["openssl", *args], capture_output=True, input=stdin, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")


def make_leaf(name, sans, days):
    """A key and a leaf certificate signed by the test's CA: name.key, name.crt."""
    rc, out = openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                      path(name + ".key"), "-out", path(name + ".csr"), "-subj", "/CN=" + sans.split(",")[0][4:],
                      "-addext", "subjectAltName=" + sans)
    assert rc == 0, out
    sign = ["x509", "-req", "-in", path(name + ".csr"), "-CA", path("ca.crt"), "-CAkey", path("ca.key"),
            "-CAcreateserial", "-out", path(name + ".crt"), "-copy_extensions", "copy"]
    rc, out = openssl(*sign, "-days", str(days))
    if rc != 0 and days < 0:  # an openssl that refuses a negative -days has -not_before / -not_after (3.4+)
        rc, out = openssl(*sign, "-not_before", "20200101000000Z", "-not_after", "20200102000000Z")
    assert rc == 0, out


def make_certs():
    rc, out = openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                      path("ca.key"), "-out", path("ca.crt"), "-days", "30", "-subj", "/CN=m0 test CA",
                      "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # Python 3.13 verifies strictly (X509_STRICT)
    assert rc == 0, out
    make_leaf("leaf", "DNS:localhost,IP:127.0.0.1", 30)
    make_leaf("b", "DNS:b.test", 30)
    make_leaf("next", "DNS:localhost,IP:127.0.0.1", 30)
    make_leaf("old", "DNS:localhost,IP:127.0.0.1", -1)  # expired yesterday
    make_leaf("soon", "DNS:localhost,IP:127.0.0.1", 5)  # within the 14 days' warning
    with open(path("disorder.crt"), "w") as f:
        f.write(open(path("ca.crt")).read() + open(path("leaf.crt")).read())


def tls_args(cert="leaf.crt", key="leaf.key"):
    return ["--certfile", ",".join(map(path, cert.split(","))), "--keyfile", ",".join(map(path, key.split(",")))]


def ctx(version=None, alpn=("http/1.1",)):
    c = ssl.create_default_context(cafile=path("ca.crt"))
    if version:
        c.minimum_version = c.maximum_version = version
    if alpn:
        c.set_alpn_protocols(list(alpn))
    return c


def https_get(port, target="/health", c=None, session=None, host="localhost"):
    """(status line, body, the ssl socket's facts) of one request on a new TLS connection."""
    c = c or ctx()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with c.wrap_socket(raw, server_hostname=host, session=session) as s:
            s.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
            facts = {"version": s.version(), "alpn": s.selected_alpn_protocol(), "reused": s.session_reused,
                     "serial": s.getpeercert().get("serialNumber")}
            data = b""
            while True:
                try:
                    b = s.recv(65536)
                except (ssl.SSLEOFError, ConnectionResetError):
                    break
                if not b:
                    break
                data += b
            facts["session"] = s.session  # after the reads: TLS 1.3's ticket came with them
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(), body, facts


def closed_cleanly(port, version):
    """Whether an answer with Connection: close ends with the server's
    close_notify (ragged EOFs not suppressed: one raises SSLEOFError)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx(version).wrap_socket(raw, server_hostname="localhost", suppress_ragged_eofs=False) as s:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            try:
                while s.recv(65536):
                    pass
            except ssl.SSLEOFError:
                return False
    return True


def curl(port, *urls, extra=()):
    p = subprocess.run(["curl", "-sS", "--cacert", path("ca.crt"), *extra, "-w", "%{http_code} %{http_version} "
                        "%{num_connects}\\n", *[f"https://localhost:{port}{u}" for u in urls]],
                       capture_output=True, timeout=20)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def s_client(port, *args, stdin=b""):
    return openssl("s_client", "-connect", f"127.0.0.1:{port}", "-CAfile", path("ca.crt"), *args, stdin=stdin)


def part_single():
    with Server("host_check", "--port", "0", *tls_args("leaf.crt,b.crt", "leaf.key,b.key")) as s:
        F.check(f"listening on https://" in s.stderr(), f"the banner says https\n{s.stderr()}")
        rc, out, err = curl(s.port, "/health", "/health")
        lines = out.splitlines()
        F.check(rc == 0 and len(lines) == 2 and lines[0].endswith("200 1.1 1") and lines[1].endswith("200 1.1 0"),
                f"curl --cacert: two 200s over one connection ({rc} {out!r} {err})")
        for v in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            line, body, facts = https_get(s.port, c=ctx(v))
            F.check(line == "HTTP/1.1 200 OK" and b'"ok"' in body and facts["alpn"] == "http/1.1",
                    f"python ssl {v.name}: {line!r} {body!r} {facts['version']} alpn {facts['alpn']}")
            F.check(closed_cleanly(s.port, v), f"python ssl {v.name}: Connection: close ends with a close_notify "
                    "(a ragged end: the client cannot tell it from a cut, and OpenSSL 3.5 drops the session)")
        # SNI: b.test gets b's certificate, localhost the first (the default)
        for name, want in (("b.test", "CN = b.test"), ("localhost", "CN = localhost"), ("other.test", "CN = localhost")):
            rc, out = s_client(s.port, "-servername", name)
            F.check(f"subject={want}" in out.replace("subject=CN=", "subject=CN = "),
                    f"SNI {name}: the certificate of {want}\n{out[:600]}")
        # h2 alone: no protocol in common, refused (no_application_protocol)
        try:
            https_get(s.port, c=ctx(alpn=("h2",)))
            F.check(False, "a client offering only h2 was served")
        except (ssl.SSLError, ConnectionError, OSError) as x:
            F.check("NO_APPLICATION_PROTOCOL" in str(x).upper() or "ALERT" in str(x).upper(),
                    f"a client offering only h2 is refused by an alert ({x})")
        # resumption with openssl's client: a ticket, then a resumed handshake
        req = b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        rc, out = s_client(s.port, "-sess_out", path("sess.pem"), "-ign_eof", stdin=req)
        F.check("New, TLSv1.3" in out and '"ok"' in out, f"s_client: a full TLS 1.3 handshake and 200\n{out[-800:]}")
        rc, out = s_client(s.port, "-sess_in", path("sess.pem"), "-ign_eof", stdin=req)
        F.check("Reused, TLSv1.3" in out and '"ok"' in out, f"s_client -sess_in: resumed\n{out[-800:]}")
        F.check(s.stop() == 0, f"drained and exited 0\n{s.stderr()[-800:]}")


def resumes_everywhere(port, workers):
    """A session resumed on each serving process (by /pid), every time."""
    c = ctx()  # a session is resumed through the context that made it
    line, body, facts = https_get(port, "/pid", c=c)
    pids, sess = {body.strip()}, facts["session"]
    for _ in range(40):
        line, body, facts = https_get(port, "/pid", c=c, session=sess)
        if not facts["reused"]:
            return False, pids
        pids.add(body.strip())
        sess = facts["session"]
        if len(pids) >= workers:
            break
    return True, pids


def part_modes():
    with Server("host_check", "--port", "0", "--threads", "2", *tls_args()) as s:
        ok = all(https_get(s.port)[0] == "HTTP/1.1 200 OK" for _ in range(6))
        F.check(ok, "--threads 2: served over HTTPS")
        reused, _ = resumes_everywhere(s.port, 1)
        F.check(reused, "--threads 2: sessions resumed")
        F.check(s.stop() == 0, f"--threads 2 drained and exited 0\n{s.stderr()[-800:]}")
    # --io uring asked: HTTPS runs on libuv's transport all the same, and the doctor says so
    rc, out, err = run("host_check", "--port", "0", "--io", "uring", "--doctor", *tls_args(), timeout=20)
    io = json.loads(out).get("io", {}) if rc == 0 else {}
    F.check(io.get("path") == "epoll" and "HTTPS" in io.get("why", ""), f"--io uring with HTTPS: the doctor's io ({rc} {io})")
    with Server("host_check", "--port", "0", "--io", "uring", *tls_args()) as s:
        F.check(all(https_get(s.port)[0] == "HTTP/1.1 200 OK" for _ in range(3)), "--io uring: served over HTTPS")
        F.check(s.stop() == 0, f"--io uring drained and exited 0\n{s.stderr()[-800:]}")
    with Prefork("host_check", "--port", "0", "--workers", "2", *tls_args()) as s:
        ok = all(https_get(s.port)[0] == "HTTP/1.1 200 OK" for _ in range(6))
        F.check(ok, "--workers 2: served over HTTPS")
        reused, pids = resumes_everywhere(s.port, 2)
        F.check(reused, f"--workers 2: every session resumed, on the workers {sorted(pids)}")
        print(f"workers seen resuming: {len(pids)}", flush=True)
        F.check(s.stop() == 0, f"--workers 2 drained and exited 0\n{s.stderr()[-800:]}")


def client_hello():
    """The bytes of a real ClientHello (Python's, through memory BIOs)."""
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx().wrap_bio(inc, out, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def closed_within(sock, seconds):
    """True when the peer closes (EOF or reset) within seconds; what it sent first is ignored."""
    sock.settimeout(seconds)
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            if not sock.recv(4096):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
    return False


def raw_tls(port, rcvbuf=None, hold_last=False):
    """A TLS client over Python's memory BIOs on a raw socket, handshake done:
    (socket, SSLObject, incoming BIO, outgoing BIO); what it writes is sent
    as the test says (records of its choosing, in one send). hold_last: its
    last flight (TLS 1.3: its Finished) is left in the outgoing BIO, for the
    caller to send with what follows."""
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx().wrap_bio(inc, out, server_hostname="localhost")
    t = socket.socket()
    if rcvbuf:
        t.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    t.settimeout(10)
    t.connect(("127.0.0.1", port))
    for _ in range(20):
        try:
            obj.do_handshake()
            break
        except ssl.SSLWantReadError:
            t.sendall(out.read())
            b = t.recv(65536)
            if not b:
                break
            inc.write(b)
    if not hold_last:
        t.sendall(out.read())
    return t, obj, inc, out


def health(port):
    try:
        return https_get(port)[0] == "HTTP/1.1 200 OK"
    except (OSError, ssl.SSLError):
        return False


def part_hostile():
    with Server("host_check", "--port", "0", "--header-timeout-ms", "1000", *tls_args()) as s:
        hello = client_hello()
        # a ClientHello a byte at a time, then silence: closed at the head timeout
        slow = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        for b in hello[:40]:
            slow.sendall(bytes([b]))
        F.check(health(s.port), "a slow handshake in progress: /health answers others")
        F.check(closed_within(slow, 15), "a ClientHello cut short then silence: closed (head timeout)")
        slow.close()
        # plain HTTP at the TLS port: closed
        plain = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        plain.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
        F.check(closed_within(plain, 10), "plain HTTP at the HTTPS port: closed")
        plain.close()
        # a truncated record after a full handshake: the header says 1000 bytes, 10 come, then FIN
        t, obj, inc, out = raw_tls(s.port)
        F.check(obj.version() is not None, "the raw client finished its handshake")
        t.sendall(bytes([23, 3, 3, 0x03, 0xe8]) + b"0123456789")
        t.shutdown(socket.SHUT_WR)
        F.check(closed_within(t, 10), "a truncated record, then the client's FIN: closed")
        t.close()
        # a forged record (whole, but not encrypted by the session's key) in the same send as the
        # client's Finished: the server's ticket, then its alert, then closed
        t, obj, inc, out = raw_tls(s.port, hold_last=True)
        t.sendall(out.read() + bytes([23, 3, 3, 0, 40]) + bytes(range(40)))
        said = None
        try:
            while said is None:
                b = t.recv(4096)
                if not b:
                    break
                inc.write(b)
                try:
                    obj.read(4096)
                except ssl.SSLWantReadError:
                    pass
        except ssl.SSLError as x:
            said = str(x)
        except OSError:
            pass
        F.check(said is not None and "BAD_RECORD_MAC" in said.upper(),
                f"a forged record: the client is told bad_record_mac ({said})")
        t.close()
        # half-done handshakes held open, and a client that sends and never reads
        held = []
        for _ in range(30):
            h = socket.create_connection(("127.0.0.1", s.port), timeout=10)
            h.sendall(hello)
            held.append(h)
        c = ctx()
        greedy = c.wrap_socket(socket.create_connection(("127.0.0.1", s.port), timeout=10), server_hostname="localhost")
        greedy.setblocking(False)
        sent = 0
        try:  # 900 requests (under --max-keepalive-requests' 1000), their answers never read
            for _ in range(45):
                sent += greedy.send(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n" * 20)
        except (ssl.SSLWantWriteError, BlockingIOError, ssl.SSLWantReadError):
            pass
        F.check(all(health(s.port) for _ in range(5)),
                f"30 handshakes held and a client that never reads ({sent} bytes sent): /health answers others")
        for h in held:
            h.close()
        greedy.close()
        F.check(health(s.port), "after them: /health answers")
        F.check(s.stop() == 0, f"exited 0\n{s.stderr()[-800:]}")


def part_paused():
    """8 GET /big?n=512 KiB, each in a TLS record of its own, sent in one
    write by a client with a small receive buffer: the connection stops
    reading (1 MiB queued) with records still in its engine, and when the
    client catches up they are read out of it (the transport's ready list),
    so all 16 answers come, byte-exact in length."""
    n, size = 8, 1 << 19
    with Server("handle_echo", "--port", "0", *tls_args()) as s:
        t, obj, inc, out = raw_tls(s.port, rcvbuf=8192)
        for i in range(n):
            obj.write(f"GET /big?n={size} HTTP/1.1\r\nHost: localhost\r\nX-N: {i}\r\n\r\n".encode())
        t.sendall(out.read())
        got = b""
        t.settimeout(20)
        try:
            while got.count(b"HTTP/1.1 200") < n or len(got) < n * size:
                b = t.recv(1 << 16)
                if not b:
                    break
                inc.write(b)
                while True:
                    try:
                        got += obj.read(1 << 20)
                    except ssl.SSLWantReadError:
                        break
        except socket.timeout:
            pass
        t.close()
        F.check(got.count(b"HTTP/1.1 200") == n and len(got) >= n * size,
                f"a paused reader of {n} records: {got.count(b'HTTP/1.1 200')} answers, {len(got)} bytes")
        F.check(health_on(s.port, "/big?n=10"), "then another client is served")
        F.check(s.stop() == 0, f"exited 0\n{s.stderr()[-800:]}")


def health_on(port, target):
    try:
        return https_get(port, target)[0] == "HTTP/1.1 200 OK"
    except (OSError, ssl.SSLError):
        return False


def part_files():
    """m0_respond_file over HTTPS (todo's /static/{name}, on its pool): a 3
    MiB file whole and a range of it, byte-exact (no sendfile under TLS:
    the pieces are read into memory and encrypted)."""
    d = os.path.join(TMP, "static")
    os.makedirs(d, exist_ok=True)
    data = bytes((i * 7 + i // 251) % 256 for i in range(3 << 20))
    with open(os.path.join(d, "big.bin"), "wb") as f:
        f.write(data)
    for pool in (["--blocking-threads", "1"],):
        with Server("todo", "--port", "0", *pool, *tls_args(), env={"M0_TODO_STATIC": d}) as s:
            p = subprocess.run(["curl", "-sS", "--cacert", path("ca.crt"), f"https://localhost:{s.port}/static/big.bin"],
                               capture_output=True, timeout=30)
            F.check(p.returncode == 0 and p.stdout == data,
                    f"{pool or 'on the loop'}: a 3 MiB file whole over HTTPS ({p.returncode}, {len(p.stdout)} bytes, "
                    f"{p.stderr[-200:]!r})")
            p = subprocess.run(["curl", "-sS", "--cacert", path("ca.crt"), "-r", "1000000-1200000",
                                f"https://localhost:{s.port}/static/big.bin"], capture_output=True, timeout=30)
            F.check(p.returncode == 0 and p.stdout == data[1000000:1200001],
                    f"{pool or 'on the loop'}: a range of it ({p.returncode}, {len(p.stdout)} bytes)")
            F.check(health_on(s.port, "/health"), "and then /health")


def read_until(s, want, limit=1 << 20):
    """What s sends until `want` is in it (bounded by s's timeout and limit)."""
    got = b""
    while want not in got and len(got) < limit:
        b = s.recv(65536)
        if not b:
            break
        got += b
    return got


def part_streams():
    """An SSE stream and a WebSocket over HTTPS: the producer's beats reach both."""
    with Server("host_check", "--port", "0", *tls_args()) as s:
        c = ctx()
        with c.wrap_socket(socket.create_connection(("127.0.0.1", s.port), timeout=10), server_hostname="localhost") as t:
            t.sendall(b"GET /events HTTP/1.1\r\nHost: localhost\r\n\r\n")
            got = read_until(t, b"event: beat\n")
            F.check(got.startswith(b"HTTP/1.1 200") and b"event: beat\n" in got, f"SSE over HTTPS: a beat ({got[:300]!r})")
        with c.wrap_socket(socket.create_connection(("127.0.0.1", s.port), timeout=10), server_hostname="localhost") as t:
            t.sendall(b"GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
            got = read_until(t, b"\r\n\r\n")
            head, _, rest = got.partition(b"\r\n\r\n")
            F.check(head.startswith(b"HTTP/1.1 101") and b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in head,
                    f"WebSocket over HTTPS: 101 with the accept key ({head[:200]!r})")
            frame = rest if rest else t.recv(65536)
            F.check(frame[:1] == b"\x81" and b"beat" in frame, f"WebSocket over HTTPS: a beat as a text frame ({frame[:80]!r})")
        F.check(s.stop() == 0, f"exited 0\n{s.stderr()[-800:]}")


def part_doctor():
    cases = [
        ("a missing certificate", tls_args("none.crt", "leaf.key"), "none.crt: cannot be read"),
        ("a key that is not the certificate's", tls_args("leaf.crt", "b.key"), "b.key: the key does not match"),
        ("an expired certificate", tls_args("old.crt", "old.key"), "old.crt: certificate 1 of the chain (the leaf) expired"),
        ("a chain out of order", tls_args("disorder.crt", "leaf.key"), "the chain is out of order"),
    ]
    for what, args, want in cases:
        rc, out, err = run("host_check", "--port", "0", *args, timeout=20)
        lines = [l for l in err.splitlines() if l.startswith("m0: ")]
        F.check(rc == 78 and len(lines) == 1 and want in lines[0],
                f"{what}: exit 78 and one line naming the file: {rc} {err!r}")
        rc, out, err = run("host_check", "--port", "0", "--doctor", *args, timeout=20)
        try:
            check = next(c for c in json.loads(out)["checks"] if c["name"] == "certificates")
        except (ValueError, KeyError, StopIteration):
            check = {}
        F.check(rc == 78 and check.get("ok") is False and want in check.get("detail", ""),
                f"{what}: the doctor's check certificates says it ({rc} {check})")
    rc, out, err = run("host_check", "--port", "0", "--doctor", *tls_args(), timeout=20)
    check = next((c for c in json.loads(out)["checks"] if c["name"] == "certificates"), {}) if rc == 0 else {}
    F.check(check.get("ok") and "localhost, 127.0.0.1" in check.get("detail", ""),
            f"the doctor names a good certificate's names ({rc} {check} {err})")
    with Server("host_check", "--port", "0", *tls_args("soon.crt", "soon.key")) as s:
        warned = [l for l in s.stderr().splitlines() if l.startswith("m0: warning: ") and "soon.crt expires on" in l]
        F.check(len(warned) == 1 and health(s.port), f"a certificate ending within 14 days: served, one warning\n{s.stderr()}")


def serial(port):
    """The serving certificate's serial, or None (a connection cut while a generation hands over)."""
    try:
        return https_get(port)[2]["serial"]
    except (OSError, ssl.SSLError):
        return None


def rss_kb(pid):
    """Resident KB, counted page by page (status's VmRSS is a per-CPU count that lags)."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Rss:"))


def keepalive_conns(port, n):
    """n TLS connections, each after one keep-alive request answered, left
    open: a 16 KB body echoed, so that both of OpenSSL's record buffers were
    written through (an untouched page is not in RSS)."""
    c, conns, sent = ctx(), [], b"x" * 16000
    for _ in range(n):
        t = c.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="localhost")
        t.sendall(b"POST /loop/echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 16000\r\n\r\n" + sent)
        data = b""
        while b"\r\n\r\n" not in data:
            data += t.recv(65536)
        head, _, got = data.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
        while len(got) < length:
            got += t.recv(65536)
        conns.append(t)
    return conns


def part_idle():
    """Idle keep-alive connections let go of OpenSSL's record buffers
    (about 34 KB each) at the loop's sweep (within a second): once 200 wait,
    a batch of 100 more costs under 45 KB a connection, the buffers the
    waiting ones let go taken again (about 64 KB with them kept, 32 KB
    without: the session's state, the echo's buffers). Batches are made half
    a second apart until one does, six at most."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
    with Server("host_check", "--port", "0", *tls_args()) as s:
        with open(f"/proc/{s.proc.pid}/maps") as f:
            if any("libasan" in line or "libtsan" in line for line in f):
                return  # a sanitizer's allocator says nothing of OpenSSL's
        held, seen = keepalive_conns(s.port, 200), []

        def batch_is_cheap():
            before = rss_kb(s.proc.pid)
            held.extend(keepalive_conns(s.port, 100))
            seen.append((rss_kb(s.proc.pid) - before) / 100)
            return seen[-1] < 45

        cheap = any(batch_is_cheap() or time.sleep(0.5) for _ in range(6))  # 800 connections at most
        F.check(cheap,
                f"idle: 100 more keep-alive HTTPS connections cost under 45 KB each: {[round(g) for g in seen]}")
        print(f"idle: KB a connection, batch by batch: {[round(g, 1) for g in seen]}", flush=True)
        for t in held:
            t.close()
        F.check(s.stop(timeout=20) == 0, f"idle: exited 0\n{s.stderr()[-600:]}")


def part_reload():
    with open(path("live.crt"), "w") as f:
        f.write(open(path("leaf.crt")).read())
    with open(path("live.key"), "w") as f:
        f.write(open(path("leaf.key")).read())
    with Server("host_check", "--port", "0", "--certfile", path("live.crt"), "--keyfile", path("live.key")) as s:
        first = https_get(s.port)[2]["serial"]
        for src in ("old.crt", "old.key"):
            with open(path("live" + src[3:]), "w") as f:
                f.write(open(path(src)).read())
        s.signal(signal.SIGHUP)
        F.check(wait_for(lambda: re.search(r"^m0: reload refused: .*live\.crt: .*expired.*generation 1 keeps serving",
                                           s.stderr(), re.M), 20),
                f"SIGHUP with an expired certificate: refused, naming the file\n{s.stderr()[-1200:]}")
        line, _, facts = https_get(s.port)
        F.check(line == "HTTP/1.1 200 OK" and facts["serial"] == first,
                f"the old certificate serves on ({line!r}, serial {facts['serial']} was {first})")
        for src in ("next.crt", "next.key"):
            with open(path("live" + src[4:]), "w") as f:
                f.write(open(path(src)).read())
        s.signal(signal.SIGHUP)
        F.check(wait_for(lambda: any(int(m.group(1)) == 2 for m in SERVING.finditer(s.stderr())), 30),
                f"SIGHUP with a good certificate: generation 2 serves\n{s.stderr()[-1200:]}")
        got = wait_for(lambda: serial(s.port) not in (None, first) or None, 15)
        F.check(bool(got), "generation 2 serves the new certificate")
        F.check(s.stop(timeout=20) == 0, f"exited 0\n{s.stderr()[-800:]}")


make_certs()
run_parts(F, [("single", part_single), ("modes", part_modes), ("hostile", part_hostile), ("paused", part_paused), ("files", part_files), ("streams", part_streams),
              ("doctor", part_doctor), ("idle", part_idle),
              ("reload", part_reload)], tmp=TMP)
