#!/usr/bin/env python3
"""OCSP stapling (--ocsp-response; docs/behaviour.md, HTTPS), with a CA, two
leaves and their OCSP responses this test makes with `openssl ocsp` (its
own responder: an index of serials, good or revoked):

1. single and --workers 2: `openssl s_client -status` over TLS 1.3 and 1.2
   is stapled the response (successful, the certificate good) and
   `curl --cert-status` accepts it; without --ocsp-response nothing is
   stapled;
2. SNI: two certificates, only the second with a response: a client asking
   for its name is stapled it, one asking for the first's is not;
3. the doctor: exit 78 and one line naming the file for a response that is
   not DER, one that says the certificate is revoked, one for another
   certificate, a chain with no issuer to match it against, and
   --ocsp-response without --certfile;
4. SIGHUP with the response replaced by a revoked one: refused in one line
   naming it, the old generation stapling the good one on.
"""
import os
import re
import signal
import subprocess
import tempfile

from harness import BIN, Failures, Prefork, Server, run_parts, wait_for

F = Failures()
TMP = tempfile.mkdtemp(prefix="m0-ocsp-")


def path(name):
    return os.path.join(TMP, name)


def openssl(*args, stdin=b""):
    p = subprocess.run(["openssl", *args], capture_output=True, input=stdin, timeout=30)
    return p.returncode, p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")


def leaf(name, sans):
    """name.key, name.crt signed by the CA, and name.chain (the leaf, then the CA)."""
    for args in (["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                  path(name + ".key"), "-out", path(name + ".csr"), "-subj", "/CN=" + sans.split(",")[0][4:],
                  "-addext", "subjectAltName=" + sans],
                 ["x509", "-req", "-in", path(name + ".csr"), "-CA", path("ca.crt"), "-CAkey", path("ca.key"),
                  "-CAcreateserial", "-out", path(name + ".crt"), "-days", "30", "-copy_extensions", "copy"]):
        rc, out = openssl(*args)
        assert rc == 0, out
    with open(path(name + ".chain"), "w") as f:
        f.write(open(path(name + ".crt")).read() + open(path("ca.crt")).read())


def response(name, revoked=False):
    """The CA's OCSP response for name.crt into name[-revoked].der."""
    rc, serial = openssl("x509", "-serial", "-noout", "-in", path(name + ".crt"))
    serial = serial.strip().split("=")[1]
    line = ("R\t301231000000Z\t200101000000Z\t" if revoked else "V\t301231000000Z\t\t") + serial + "\tunknown\t/CN=x\n"
    with open(path("index.txt"), "w") as f:
        f.write(line)
    out_file = path(name + ("-revoked" if revoked else "") + ".der")
    for args in (["ocsp", "-issuer", path("ca.crt"), "-cert", path(name + ".crt"), "-reqout", path("req.der")],
                 ["ocsp", "-index", path("index.txt"), "-rsigner", path("ca.crt"), "-rkey", path("ca.key"), "-CA",
                  path("ca.crt"), "-reqin", path("req.der"), "-respout", out_file, "-ndays", "1"]):
        rc, out = openssl(*args)
        assert rc == 0, out
    return out_file


def make_all():
    rc, out = openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                      path("ca.key"), "-out", path("ca.crt"), "-days", "30", "-subj", "/CN=m0 ocsp CA",
                      "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    assert rc == 0, out
    leaf("a", "DNS:localhost,IP:127.0.0.1")
    leaf("b", "DNS:b.test")
    response("a")
    response("a", revoked=True)
    response("b")


def stapled(port, *more):
    """What s_client -status says of the staple: 'good', 'none' or the text it printed."""
    rc, out = openssl("s_client", "-connect", f"127.0.0.1:{port}", "-status", "-CAfile", path("ca.crt"), *more)
    if "OCSP response: no response sent" in out:
        return "none"
    m = re.search(r"Cert Status: (\w+)", out)
    return m.group(1) if m and "OCSP Response Status: successful" in out else out[-400:]


def tls(cert="a.chain", key="a.key", ocsp="a.der"):
    return ["--port", "0", "--certfile", path(cert), "--keyfile", path(key)] + (["--ocsp-response", ocsp] if ocsp else [])


def part_stapled():
    for label, more, cls in (("single", [], Server), ("workers", ["--workers", "2"], Prefork)):
        with cls("host_check", *tls(ocsp=path("a.der")), *more) as s:
            for version in ("-tls1_3", "-tls1_2"):
                got = stapled(s.port, version)
                F.check(got == "good", f"{label} {version}: the response stapled, the certificate good ({got!r})")
            p = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--cert-status", "--cacert",
                                path("ca.crt"), f"https://localhost:{s.port}/health"], capture_output=True, timeout=20)
            F.check(p.stdout == b"200", f"{label}: curl --cert-status accepts it ({p.stdout!r} {p.stderr[-200:]!r})")
            F.check(s.stop(timeout=20) == 0, f"{label}: exited 0\n{s.stderr()[-500:]}")
    with Server("host_check", *tls(ocsp=None)) as s:
        F.check(stapled(s.port) == "none", "without --ocsp-response nothing is stapled")


def part_sni():
    with Server("host_check", "--port", "0", "--certfile", path("a.chain") + "," + path("b.chain"), "--keyfile",
                path("a.key") + "," + path("b.key"), "--ocsp-response", "," + path("b.der")) as s:
        F.check(stapled(s.port, "-servername", "b.test") == "good", "SNI b.test: its certificate's response stapled")
        F.check(stapled(s.port, "-servername", "localhost") == "none", "SNI localhost: none (its entry is empty)")


def part_doctor():
    cases = (("not DER", tls(ocsp=path("a.chain")), "a.chain: not a DER OCSP response"),
             ("revoked", tls(ocsp=path("a-revoked.der")), "certificate is revoked"),
             ("another certificate's", tls(ocsp=path("b.der")), "answers for another certificate"),
             ("no issuer in the chain", tls(cert="a.crt", ocsp=path("a.der")), "holds no issuer"),
             ("no --certfile", ["--port", "0", "--ocsp-response", path("a.der")], "but no --certfile"))
    for label, args, want in cases:
        p = subprocess.run([os.path.join(BIN, "host_check"), *args], capture_output=True, timeout=20)
        lines = [x for x in p.stderr.decode().splitlines() if x.startswith("m0:")]
        F.check(p.returncode == 78 and len(lines) == 1 and want in lines[0],
                f"{label}: exit 78, one line saying {want!r} ({p.returncode}: {lines})")


def part_reload():
    live = path("live.der")
    with open(live, "wb") as f:
        f.write(open(path("a.der"), "rb").read())
    with Server("host_check", *tls(ocsp=live)) as s:
        F.check(stapled(s.port) == "good", "before the reload: stapled")
        with open(live, "wb") as f:
            f.write(open(path("a-revoked.der"), "rb").read())
        s.signal(signal.SIGHUP)
        F.check(wait_for(lambda: re.search(r"^m0: reload refused: .*live\.der: says .*revoked", s.stderr(), re.M), 30),
                f"SIGHUP with a revoked response: refused, naming the file\n{s.stderr()[-800:]}")
        F.check(stapled(s.port) == "good", "the old generation staples the good one on")
        F.check(s.stop(timeout=20) == 0, f"exited 0\n{s.stderr()[-500:]}")


make_all()
run_parts(F, [("stapled", part_stapled), ("sni", part_sni), ("doctor", part_doctor), ("reload", part_reload)],
          tmp=TMP)
