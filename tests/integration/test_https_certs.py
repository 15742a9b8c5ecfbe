#!/usr/bin/env python3
"""Certificates are configuration, read once per generation (docs/behaviour.md,
HTTPS): under --workers 2 the supervisor's check reads --certfile/--keyfile
and hands the bytes it passed to every worker it spawns (a sealed memfd).

The files are then replaced by garbage (an operator's half-written copy) and
a worker is killed with SIGKILL: its respawned successor serves HTTPS with the
certificate read at start (its serial checked on every answer), holding the
sealed bytes, not the files. A SIGHUP then reads the files again: refused in
one line naming the file, and the old generation serves on.

Session tickets across a reload (single and --workers 2): a session made on
generation 1 (TLS 1.3 and 1.2) resumes on generation 2 after a SIGHUP, the
ticket secret handed from a generation to the next and to its workers.

A file named as --certfile or --keyfile that is not a regular file (a FIFO,
which blocks an open for ever, a directory, a device): --doctor and a start
exit 78 in one line naming it, within a bound; one put in place of the
certificate before a SIGHUP is refused in one line, the old generation
serving on. A reload's doctor that does not answer (SIGSTOPped here: it
stands for any hang) is killed within --reload-timeout-ms and the reload
refused in one line, while under --workers 2 a worker killed meanwhile is
respawned after it and a SIGTERM ends the host with 0.
"""
import os
import re
import signal
import socket
import ssl
import subprocess
import tempfile

from harness import Failures, Prefork, Server, children, run, run_parts, wait_for

F = Failures()
TMP = tempfile.mkdtemp(prefix="m0-https-certs-")
SERVING = re.compile(r"^m0: reload: generation 2 serving \(pid (\d+)\)", re.M)


def path(name):
    return os.path.join(TMP, name)


def openssl(*args):
    p = subprocess.run(["openssl", *args], capture_output=True, timeout=20)
    assert p.returncode == 0, p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")


def make_certs():
    """A CA (keyUsage: Python 3.13 verifies strictly) and a leaf it signed: live.crt, live.key."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", path("ca.key"), "-out", path("ca.crt"), "-days", "30",
            "-subj", "/CN=m0 test CA", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("req", *ec, "-keyout", path("live.key"), "-out", path("live.csr"), "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1")
    openssl("x509", "-req", "-in", path("live.csr"), "-CA", path("ca.crt"), "-CAkey", path("ca.key"),
            "-CAcreateserial", "-out", path("live.crt"), "-copy_extensions", "copy", "-days", "30")
    for name in ("live.crt", "live.key"):  # kept whole for the tickets' part
        with open(path(name)) as f, open(path("kept" + name[4:]), "w") as out:
            out.write(f.read())


def ctx(version=None):
    c = ssl.create_default_context(cafile=path("ca.crt"))
    if version:
        c.minimum_version = c.maximum_version = version
    return c


def get(port, target="/pid", c=None, session=None, facts=None):
    """(status line, body, the served certificate's serial) of one request on a new TLS connection,
    or None when the connection fails (a worker killed under it); facts (a dict): whether the
    session was resumed, and the session to resume later (a session resumes through its context)."""
    c = c or ctx()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with c.wrap_socket(raw, server_hostname="localhost", session=session) as s:
                serial = s.getpeercert().get("serialNumber")
                s.sendall(f"GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
                data = b""
                while True:
                    try:
                        b = s.recv(65536)
                    except (ssl.SSLEOFError, ConnectionResetError):
                        break
                    if not b:
                        break
                    data += b
                if facts is not None:
                    facts.update(reused=s.session_reused, session=s.session)  # after the reads: TLS 1.3's ticket
    except (OSError, ssl.SSLError):
        return None
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(), body.decode(errors="replace").strip(), serial


def holds_sealed_bytes(pid):
    """Whether pid holds the certificates' memfd (config/certs.c names it m0-certs)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:m0-certs"):
                return True
        except OSError:
            pass
    return False


def part_respawn():
    args = ["--port", "0", "--workers", "2", "--certfile", path("live.crt"), "--keyfile", path("live.key")]
    with Prefork("host_check", *args) as s:
        first = get(s.port)
        F.check(first is not None and first[0] == "HTTP/1.1 200 OK", f"--workers 2 serves HTTPS ({first})")
        serial = first[2] if first else None
        workers = children(s.proc.pid)
        F.check(len(workers) == 2, f"two workers ({workers})")
        # an operator's half-written replacement: neither file is PEM any more
        for name in ("live.crt", "live.key"):
            with open(path(name), "w") as f:
                f.write("-----BEGIN CERT")
        victim = min(workers)
        os.kill(victim, signal.SIGKILL)
        gone = lambda: s.proc.poll() is not None  # a worker that refused its configuration stops the host
        fresh = wait_for(lambda: (children(s.proc.pid) - workers) or gone(), 20)
        fresh = fresh if isinstance(fresh, set) else set()
        F.check(bool(fresh), f"the supervisor respawned worker {victim}\n{s.stderr()[-1200:]}")
        new = min(fresh) if fresh else -1
        served, serials = set(), set()

        def new_one_served():
            r = get(s.port)
            if r and r[0] == "HTTP/1.1 200 OK":
                served.add(r[1])
                serials.add(r[2])
            return str(new) in served or gone() or None

        F.check(wait_for(new_one_served, 20) and not gone(),
                f"the respawned worker {new} serves HTTPS after the files turned to garbage (served by {served}; "
                f"host exit {s.proc.poll()})\n{s.stderr()[-1200:]}")
        F.check(serials == {serial}, f"with the certificate read at start (serials {serials}, was {serial})")
        F.check(holds_sealed_bytes(new), f"the respawned worker {new} holds the sealed bytes (memfd m0-certs)")
        # a new generation reads the files again: refused, naming the file; the old one serves on
        if gone():
            return
        s.signal(signal.SIGHUP)
        refused = re.compile(r"^m0: reload refused: .*live\.crt: holds no PEM certificate.*generation 1 keeps serving",
                             re.M)
        F.check(bool(wait_for(lambda: refused.search(s.stderr()), 30)),
                f"SIGHUP with garbage files: refused in one line naming the file\n{s.stderr()[-1200:]}")
        after = [get(s.port) for _ in range(4)]
        F.check(all(r and r[0] == "HTTP/1.1 200 OK" and r[2] == serial for r in after),
                f"the old generation serves on with its certificate ({after})")
        F.check(s.stop(timeout=20) == 0, f"drained and exited 0\n{s.stderr()[-800:]}")


def tickets(mode, *more):
    """A session made on generation 1 resumes on generation 2 after a SIGHUP: the ticket
    secret goes on from a generation to the next, and to its workers (config/certs.h)."""
    with Prefork("host_check", "--port", "0", "--certfile", path("kept.crt"), "--keyfile", path("kept.key"),
                 *more) as s:
        old = {str(p) for p in children(s.proc.pid) | {s.proc.pid}}  # generation 1's processes
        made = {}
        for name, v in (("TLS 1.3", ssl.TLSVersion.TLSv1_3), ("TLS 1.2", ssl.TLSVersion.TLSv1_2)):
            facts, c = {}, ctx(v)
            r = get(s.port, c=c, facts=facts)
            F.check(r is not None and r[1] in old and facts.get("session") is not None,
                    f"{mode}, {name}: a session made on generation 1 ({r})")
            made[name] = (c, facts.get("session"))
        s.signal(signal.SIGHUP)
        F.check(bool(wait_for(lambda: SERVING.search(s.stderr()), 30)),
                f"{mode}: SIGHUP: generation 2 serves\n{s.stderr()[-1200:]}")
        for name, (c, session) in made.items():
            facts = {}

            def on_next():
                facts.clear()
                r = get(s.port, c=c, session=session, facts=facts)
                return r is not None and r[1] not in old and r[0] == "HTTP/1.1 200 OK" or None

            F.check(bool(wait_for(on_next, 20)), f"{mode}, {name}: a connection served by generation 2")
            F.check(facts.get("reused") is True,
                    f"{mode}, {name}: generation 1's session resumed on generation 2 ({facts})")
        F.check(s.stop(timeout=20) == 0, f"{mode}: exited 0\n{s.stderr()[-800:]}")


def part_tickets():
    tickets("single")
    tickets("--workers 2", "--workers", "2")


def copy_certs(prefix):
    """live.crt/.key copied to PREFIX.crt/.key (replaced by the part that uses them)."""
    for ext in ("crt", "key"):
        with open(path("live." + ext)) as f, open(path(f"{prefix}.{ext}"), "w") as out:
            out.write(f.read())
    return path(prefix + ".crt"), path(prefix + ".key")


def part_not_regular():
    """--doctor and a start: 78 and one line naming the file, never a hang."""
    crt, key = copy_certs("nr")
    os.mkfifo(path("fifo.pem"))
    cases = [("a FIFO as --certfile", path("fifo.pem"), key, "a FIFO"),
             ("a FIFO as --keyfile", crt, path("fifo.pem"), "a FIFO"),
             ("a directory as --certfile", TMP, key, "a directory"),
             ("a device as --keyfile", crt, "/dev/zero", "a character device")]
    for label, c, k, kind in cases:
        named = k if c == crt else c
        for how in (["--doctor"], []):
            try:
                rc, out, err = run("host_check", "--port", "0", "--certfile", c, "--keyfile", k, *how, timeout=20)
            except subprocess.TimeoutExpired:
                F.check(False, f"{label} {how}: no answer within 20 s (hung)")
                continue
            lines = [ln for ln in err.splitlines() if ln.startswith("m0:")]
            want = f"{named}: is not a regular file ({kind})"
            shown = out if how else err
            F.check(rc == 78 and want in shown and (how or len(lines) == 1),
                    f"{label} {how}: exit 78 and one line saying '{want}' (exit {rc}, {err[-400:]!r})")


def part_fifo_reload():
    """A FIFO in place of the certificate, then SIGHUP: refused in one line; the old generation serves."""
    crt, key = copy_certs("fr")
    with Server("host_check", "--port", "0", "--certfile", crt, "--keyfile", key) as s:
        os.unlink(crt)
        os.mkfifo(crt)
        s.signal(signal.SIGHUP)
        refused = re.compile(r"^m0: reload refused: .*fr\.crt: is not a regular file \(a FIFO\).*"
                             r"generation 1 keeps serving$", re.M)
        F.check(bool(wait_for(lambda: refused.search(s.stderr()), 30)),
                f"SIGHUP with a FIFO as --certfile: refused in one line naming it\n{s.stderr()[-1200:]}")
        r = get(s.port, "/health")
        F.check(r is not None and r[0] == "HTTP/1.1 200 OK", f"/health still 200 ({r})")
        F.check(s.stop(timeout=20) == 0, f"SIGTERM: exited 0\n{s.stderr()[-800:]}")


def doctor_of(sup):
    """The pid of sup's child running --doctor, or None."""
    for pid in children(sup):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"--doctor" in f.read().split(b"\0"):
                    return pid
        except OSError:
            pass
    return None


def part_doctor_bound():
    """A reload's doctor that does not answer is killed within --reload-timeout-ms; the host goes on."""
    crt, key = copy_certs("db")
    bound = 3000
    with Prefork("host_check", "--port", "0", "--workers", "2", "--reload-timeout-ms", str(bound),
                 "--certfile", crt, "--keyfile", key) as s:
        sup = s.proc.pid
        workers = children(sup)
        F.check(len(workers) == 2, f"two workers ({workers})")
        with open(crt, "w") as f:  # a doctor that answers refuses: a missed catch starts no generation
            f.write("-----BEGIN CERT")
        slow = re.compile(rf"^m0: reload refused: the checks did not answer within {bound} ms .*doctor pid (\d+) "
                          r"killed; generation 1 keeps serving$", re.M)
        answered = re.compile(r"^m0: reload refused: .*db\.crt: holds no PEM certificate", re.M)
        caught = None
        for attempt in range(10):  # the doctor must be caught running: retried when it answered first
            seen = len(answered.findall(s.stderr()))
            s.signal(signal.SIGHUP)
            doc = wait_for(lambda: doctor_of(sup), 10, step=0.0005)
            if doc:
                try:
                    os.kill(doc, signal.SIGSTOP)
                except OSError:
                    doc = None
            wait_for(lambda: slow.search(s.stderr()) or len(answered.findall(s.stderr())) > seen, 30)
            if doc and len(answered.findall(s.stderr())) == seen:  # stopped before it answered: no retry
                caught = doc
                break
        F.check(caught is not None, f"a reload's doctor caught running and stopped ({attempt + 1} tries)")
        if caught is None:
            return
        m = slow.search(s.stderr())
        F.check(m and int(m.group(1)) == caught, f"a stopped doctor ({caught}): the reload refused within {bound} ms "
                                                 f"in one line naming it\n{s.stderr()[-1200:]}")
        F.check(not os.path.exists(f"/proc/{caught}"), f"the doctor {caught} killed and reaped (no zombie)")
        r = get(s.port, "/health")
        F.check(r is not None and r[0] == "HTTP/1.1 200 OK", f"/health still 200 ({r})")
        # a worker killed while a doctor hangs is respawned once it is killed; SIGTERM is acted on
        s.signal(signal.SIGHUP)
        doc = wait_for(lambda: doctor_of(sup), 10, step=0.0005)
        if doc:
            try:
                os.kill(doc, signal.SIGSTOP)
            except OSError:
                pass
        victim = min(children(sup) - {doc})
        os.kill(victim, signal.SIGKILL)
        fresh = wait_for(lambda: children(sup) - workers - {doc} or None, 30)
        F.check(bool(fresh), f"worker {victim}, killed while a doctor hung, respawned\n{s.stderr()[-800:]}")
        # a SIGTERM while a doctor hangs: acted on at once (the doctor killed, the reload refused), exit 0
        wait_for(lambda: doc is None or not os.path.exists(f"/proc/{doc}"), 30)
        s.signal(signal.SIGHUP)
        doc = wait_for(lambda: doctor_of(sup), 10, step=0.0005)
        if doc:
            try:
                os.kill(doc, signal.SIGSTOP)
            except OSError:
                pass
        F.check(s.stop(timeout=30) == 0, f"SIGTERM while a doctor hangs: exited 0\n{s.stderr()[-800:]}")
        F.check(not doc or not os.path.exists(f"/proc/{doc}"), f"and its doctor {doc} is gone")
        if doc:
            F.check(f"m0: reload refused: a SIGTERM came while the checks ran; doctor pid {doc} killed" in s.stderr(),
                    f"the SIGTERM is acted on at once: the reload refused in one line\n{s.stderr()[-800:]}")


make_certs()
run_parts(F, [("not-regular", part_not_regular), ("fifo-reload", part_fifo_reload),
              ("doctor-bound", part_doctor_bound), ("respawn", part_respawn), ("tickets", part_tickets)], tmp=TMP)
