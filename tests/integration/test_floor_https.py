"""bench/floor_https.c (bin/m0_floor_https), the floor bench/run_https measures
under one HTTPS loop, answers what the bench's clients ask as ramp does.

For each mode (socket: OpenSSL on the socket; mem: on memory BIOs the loop
copies, m0's way), on port 0 with a P-256 certificate made here: the port is
in its one listening line; Python's ssl client (the certificate verified)
gets GET /x/now answered 200 with ramp's 15-byte JSON, twice on one
keep-alive connection; a TLS 1.2 session is resumed by its ticket (the
resumed load's handshake); `openssl s_client` negotiates TLS 1.3; SIGTERM
ends it with 0. A floor that answers nothing, or only full handshakes, would
make bench/run_https's floor arms fail or measure the wrong thing.
"""
import http.client
import os
import re
import signal
import socket
import ssl
import subprocess
import tempfile

from harness import BIN, Failures, output_dir, run_parts, wait_for

F = Failures()
BODY = b'{"route":"now"}'


def make_cert(d):
    cert, key = os.path.join(d, "leaf.crt"), os.path.join(d, "leaf.key")
    p = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], capture_output=True, timeout=30)
    if p.returncode != 0:
        raise RuntimeError(f"openssl req: {p.stderr.decode(errors='replace')}")
    return cert, key


def start(mode, cert, key, out):
    err = open(os.path.join(out, f"floor-{mode}.stderr"), "w+b")
    proc = subprocess.Popen([os.path.join(BIN, "m0_floor_https"), mode, "0", cert, key], stdout=subprocess.DEVNULL,
                            stderr=err)

    def port():
        err.flush()
        with open(err.name, "rb") as f:
            m = re.search(rb"listening on https://127\.0\.0\.1:(\d+) \(pid (\d+)\)", f.read())
        return m and int(m.group(2)) == proc.pid and int(m.group(1))
    return proc, wait_for(lambda: port() or proc.poll() is not None, 10) and port()


def keepalive(port, ctx):
    """Two GETs on one connection: [(status, content-type, body)], and whether one socket carried both."""
    c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
    got, socks = [], set()
    for _ in range(2):
        c.request("GET", "/x/now")
        r = c.getresponse()
        got.append((r.status, r.getheader("Content-Type"), r.read()))
        socks.add(id(c.sock))
    c.close()
    return got, len(socks) == 1


def resumed(port, cafile):
    """A TLS 1.2 handshake, then another offering its session: was the second resumed?"""
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    sess = None
    for _ in range(2):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost", session=sess) as s:
                s.sendall(b"GET /x/now HTTP/1.1\r\nHost: localhost\r\n\r\n")
                s.recv(4096)
                was, sess = s.session_reused, s.session
    return was


def s_client(port):
    p = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-brief", "-tls1_3"], input=b"",
                       capture_output=True, timeout=20)
    return (p.stdout + p.stderr).decode(errors="replace")


def one_mode(mode, cert, key, out):
    proc, port = start(mode, cert, key, out)
    try:
        F.check(bool(port), f"{mode}: one listening line with its port and pid")
        if not port:
            return
        ctx = ssl.create_default_context(cafile=cert)
        got, one = keepalive(port, ctx)
        F.check(all(g == (200, "application/json", BODY) for g in got) and len(got) == 2,
                f"{mode}: GET /x/now twice answered 200 application/json {BODY!r} ({got})")
        F.check(one, f"{mode}: both on one keep-alive connection")
        F.check(resumed(port, cert), f"{mode}: a TLS 1.2 session resumed by its ticket")
        out_s = s_client(port)
        F.check("TLSv1.3" in out_s, f"{mode}: openssl s_client negotiates TLS 1.3 ({out_s[-300:]!r})")
        F.check(proc.poll() is None, f"{mode}: still running after its clients left")
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=10)
        F.check(rc == 0, f"{mode}: SIGTERM ends it with 0 (got {rc})")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def usage(cert, key):
    p = subprocess.run([os.path.join(BIN, "m0_floor_https"), "tls", "0", cert, key], capture_output=True, timeout=10)
    F.check(p.returncode == 2 and b"usage" in p.stderr, f"an unknown mode: the usage, exit 2 ({p.returncode})")


def main():
    out = output_dir("test_floor_https")
    d = tempfile.mkdtemp(prefix="floor-https-")
    cert, key = make_cert(d)
    run_parts(F, [(mode, lambda m=mode: one_mode(m, cert, key, out)) for mode in ("socket", "mem")] +
              [("usage", lambda: usage(cert, key))], tmp=d)


if __name__ == "__main__":
    main()
