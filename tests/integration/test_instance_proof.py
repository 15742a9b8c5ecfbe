"""Instances prove who they are (runtime/proof.h; docs/wire.md, Proving who
you are; docs/topology.md, Instances prove who they are): over plain tcp,
loopback included, an application actor's instance is admitted only once it
answers its actor's challenge with HMAC-SHA256 of the secret.

host_check with its `echo` actor placed external at tcp://127.0.0.1:P with
"secret" naming a key file (mode 600), GET /actor/echo routed to it:

- the doctor refuses (78, one line naming the fix) the same file without a
  secret, with a key file others may read (`chmod 600`), and one too short;
  it accepts "trusted_network": true instead of a secret;
- an impostor (python/echo_actor.py with no secret: any local program; run
  as `nobody` too when this test is root) dials the URL: it is challenged,
  never admitted, never given a request (its stderr says it was asked for a
  proof and had none); GET /actor/echo is not answered by it (503: no
  instance), and `m0_refused_total{actor="echo",reason="proof"}` counts it
  once its time to answer ran out;
- one with a wrong secret (another key file) is refused at its answer;
- the real instances serve: echo_actor (the C runner) and
  python/echo_actor.py, each with M0_ACTOR_SECRET_FILE: 200 from their pid;
- 2,000 dials that answer the challenge wrongly, each from its own source
  address (127.1.x.y), are each refused and counted (reason proof: exactly
  2,000), and stderr names them once, not once per address; 100 that hold
  without answering take at most the 64 proofs in progress, the rest are
  refused at once (reason instances), again said once; the real instance
  still serves after both;
- placement process over tcp (--threads 2, and --workers 2, where the
  supervisor spawns and challenges them): the host hands its instances a
  fresh secret in their environment (M0__ACTOR_SECRET, never on their
  command line) and they serve; an impostor is not admitted there either.
"""
import json
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from harness import BIN, Failures, sanitizer_report, Prefork, Server, children, environ, run, wait_for, with_free_port

F = Failures()
TMP = tempfile.mkdtemp(prefix="m0-proof-")
os.chmod(TMP, 0o755)  # the nobody impostor runs the python runner from its own copy here
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PY_ECHO = os.path.join(ROOT, "python", "echo_actor.py")
K_HELLO = 18
ENV = struct.Struct("<IHHIIQQQI")
MAGIC = 0x3145306D


def key_file(name, text, mode=0o600):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(text + "\n")
    os.chmod(path, mode)
    return path


def topology(name, actor):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        json.dump({"app_actors": [actor]}, f)
    return path


def refused(port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {(a, r): int(n) for a, r, n in
            re.findall(r'^m0_refused_total\{actor="([^"]+)",reason="([^"]+)"\} (\d+)$', text, re.M)}


def echo(port, timeout=5):
    """GET /actor/echo: (status, the answering pid or None)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/actor/echo", timeout=timeout) as r:
            return r.status, json.loads(r.read()).get("pid")
    except urllib.error.HTTPError as e:
        return e.code, None


def instance(argv, secret_file=None, user=None):
    """A runner process; its stderr goes to a file (read with said(p))."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("M0_ACTOR_SECRET") and not k.startswith("M0__")}
    if secret_file:
        env["M0_ACTOR_SECRET_FILE"] = secret_file
    pre = None
    if user is not None:
        def pre():
            os.setgid(user[1])
            os.setgroups([])
            os.setuid(user[0])
    err = tempfile.TemporaryFile(dir=TMP)
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err, preexec_fn=pre)
    p.err_file = err
    return p


def said(p):
    return os.pread(p.err_file.fileno(), 1 << 20, 0).decode(errors="replace")


def stop(p):
    if p.poll() is None:
        p.terminate()
    try:
        p.wait(5)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(5)
    return said(p)


def proof_lines(err, reason):
    return [l for l in err.splitlines() if l.startswith("m0: echo refused a ") and f"({reason}: " in l]


# ---- a raw pair1 dialer over tcp from a chosen source address ----

def recvn(s, n):
    out = b""
    while len(out) < n:
        b = s.recv(n - len(out))
        if not b:
            raise ConnectionError("closed")
        out += b
    return out


def raw_dial(port, src, answer):
    """An SP pair1 peer from address src: the handshake, then (answer) the
    challenge read and answered with 32 wrong bytes; returns True once the
    host closed the connection (its refusal counted before), or holds the
    socket open unanswered (answer False) and returns it."""
    s = socket.socket()
    s.settimeout(10)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    s.sendall(b"\x00SP\x00\x00\x11\x00\x00")
    recvn(s, 8)
    if not answer:
        return s
    try:
        n = struct.unpack(">Q", recvn(s, 8))[0]
        if n > 4096:
            raise ValueError(f"a message of {n} bytes where a challenge was due")
        body = recvn(s, n)
        _magic, kind, _fl, frm, to, _seq, _hi, _lo, plen = ENV.unpack_from(body, 4)
        if kind != K_HELLO or plen != n - 4 - ENV.size:
            raise ValueError(f"kind {kind}, {plen} bytes: not a challenge")
        wrong = ENV.pack(MAGIC, K_HELLO, 0, to, frm, 0, 0, 0, 32) + b"\x00" * 32
        s.sendall(struct.pack(">QI", 4 + len(wrong), 0) + wrong)
        s.settimeout(5)
        try:
            while s.recv(4096):
                pass  # a REQUEST would be a wrong proof admitted
        except ConnectionResetError:
            pass  # closed by the host: what is waited for
        except socket.timeout:
            raise ValueError("the wrong proof was not refused: the connection stays open") from None
        return True
    finally:
        s.close()


def flood(port, count, start, threads=8):
    errors = []
    addrs = [f"127.1.{(start + i) // 250}.{(start + i) % 250 + 1}" for i in range(count)]
    def work(part):
        for a in part:
            if len(errors) >= 8:  # the rule is broken: no need to wait out 2,000 of them
                return
            try:
                raw_dial(port, a, True)
            except Exception as e:  # noqa: BLE001 (collected, checked below)
                errors.append(f"{a}: {e!r}")
    ts = [threading.Thread(target=work, args=(addrs[i::threads],)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    return errors, len(set(addrs))


def refusal(path):
    """The doctor's failed check for path, and the line serving it says: (rc,
    check, lines)."""
    rc, out, _err = run("host_check", "--doctor", "--topology", path)
    d = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
    bad = [c for c in d.get("checks", []) if not c["ok"]]
    src, _out, err = run("host_check", "--port", "0", "--topology", path)
    return rc, src, bad, [l for l in err.splitlines() if l.startswith("m0: ") and not l.startswith("m0: warning: ")]


def doctor_cases(port, key):
    url = f"tcp://127.0.0.1:{port}"
    base = {"name": "echo", "placement": "external", "url": url}
    rc, src, bad, lines = refusal(topology("none.json", base))
    F.check(rc == 78 and src == 78 and len(bad) == 1 and len(lines) == 1
            and "plain tcp with nothing that proves who dials it" in lines[0]
            and '"secret"' in lines[0] and '"trusted_network": true' in lines[0],
            f"doctor: plain tcp without a secret is 78, one line naming the fix ({rc}, {src}, {bad}, {lines})")
    loose = key_file("loose.key", "a" * 32, 0o644)
    rc, src, bad, lines = refusal(topology("loose.json", dict(base, secret=loose)))
    F.check(rc == 78 and src == 78 and len(lines) == 1 and f"chmod 600 {loose}" in lines[0],
            f"doctor: a key file others may read is 78, one line saying chmod 600 ({rc}, {src}, {lines})")
    short = key_file("short.key", "abc")
    rc, src, bad, lines = refusal(topology("short.json", dict(base, secret=short)))
    F.check(rc == 78 and src == 78 and len(lines) == 1 and "holds too few bytes" in lines[0],
            f"doctor: a short secret is 78 ({rc}, {src}, {lines})")
    rc, src, bad, lines = refusal(topology("thread.json", {"name": "echo", "placement": "thread", "secret": key}))
    F.check(rc == 78 and src == 78 and len(lines) == 1
            and "app_actors[0].secret is for process and external" in lines[0],
            f"doctor: a thread actor's secret is refused at its key ({rc}, {src}, {lines})")
    rc, src, bad, lines = refusal(topology("tn.json", dict(base, trusted_network="yes")))
    F.check(rc == 78 and src == 78 and len(lines) == 1 and "trusted_network must be true or false" in lines[0],
            f"doctor: trusted_network must be a boolean ({rc}, {src}, {lines})")
    rc, out, err = run("host_check", "--doctor", "--topology",
                       topology("trusted.json", dict(base, trusted_network=True)))
    d = json.loads(out.strip().splitlines()[-1]) if rc == 0 and out.strip() else {}
    got = [a for a in d.get("topology", {}).get("app_actors", []) if a["name"] == "echo"]
    F.check(rc == 0 and got and got[0].get("trusted_network") is True,
            f"doctor: trusted_network true is accepted and printed ({rc}, {got}, {err[-400:]})")
    rc, out, err = run("host_check", "--doctor", "--topology", topology("good.json", dict(base, secret=key)))
    d = json.loads(out.strip().splitlines()[-1]) if rc == 0 and out.strip() else {}
    got = [a for a in d.get("topology", {}).get("app_actors", []) if a["name"] == "echo"]
    F.check(rc == 0 and got and got[0].get("secret") == key,
            f"doctor: a good key file is accepted and printed as its path ({rc}, {got}, {err[-400:]})")


def nobody():
    """(uid, gid, python) to run the impostor as nobody, or None (said)."""
    if os.geteuid() != 0:
        print("SKIP (half): not root, so the impostor runs as this user only (any local program)")
        return None
    try:
        import pwd
        pw = pwd.getpwnam("nobody")
    except KeyError:
        print("SKIP (half): no user nobody: the impostor runs as this user only")
        return None
    # a python nobody may run: this one may live under a private home
    for py in (sys.executable, "/usr/bin/python3"):
        try:
            probe = subprocess.run([py, "-c", "import ctypes; ctypes.CDLL('libnng.so.1')"], capture_output=True,
                                   timeout=10, preexec_fn=lambda: (os.setgid(pw.pw_gid), os.setgroups([]),
                                                                   os.setuid(pw.pw_uid)))
        except OSError:
            continue
        if probe.returncode == 0:
            return pw.pw_uid, pw.pw_gid, py
    print("SKIP (half): no python with libnng that nobody may run: the impostor runs as this user only")
    return None


def external(port):
    key = key_file("echo.key", os.urandom(24).hex())
    other = key_file("other.key", os.urandom(24).hex())
    doctor_cases(port, key)
    url = f"tcp://127.0.0.1:{port}"
    path = topology("serve.json", {"name": "echo", "placement": "external", "url": url, "secret": key})
    # a copy of the python runner the nobody user can read (the tree may be private)
    pydir = os.path.join(TMP, "py")
    os.mkdir(pydir, 0o755)
    for f in ("m0actor.py", "echo_actor.py"):
        with open(os.path.join(ROOT, "python", f), "rb") as src, open(os.path.join(pydir, f), "wb") as dst:
            dst.write(src.read())
        os.chmod(os.path.join(pydir, f), 0o644)
    py_echo = os.path.join(pydir, "echo_actor.py")
    with Server("host_check", "--port", "0", "--topology", path, "--metrics-path", "/metrics") as s:
        nb = nobody()
        users = [("this user", None, sys.executable)] + ([("nobody", nb[:2], nb[2])] if nb else [])
        for who, user, py in users:
            label = f"impostor ({who}, no secret)"
            before = refused(s.port).get(("echo", "proof"), 0)
            imp = instance([py, py_echo, url], user=user)
            try:
                F.check(wait_for(lambda: "asks this instance to prove" in said(imp), 10, 0.05),
                        f"{label}: it was challenged ({said(imp)[-300:]})")
                for _ in range(3):
                    st, pid = echo(s.port, timeout=5)
                    F.check(st != 200 and pid is None, f"{label}: GET /actor/echo is not answered by it ({st}, {pid})")
                F.check(wait_for(lambda: refused(s.port).get(("echo", "proof"), 0) > before, 10),
                        f"{label}: refused (proof) once its time to answer ran out ({refused(s.port)})")
                F.check(imp.poll() is None, f"{label}: still running (it redials) ({imp.poll()})")
            finally:
                err = stop(imp)
            F.check("asks this instance to prove it holds the actor's secret" in err,
                    f"{label}: it was challenged and had nothing to prove ({err[-400:]})")
            F.check("REQUEST" not in err, f"{label}: it was given no request ({err[-300:]})")
        label = "impostor (a wrong secret)"
        before = refused(s.port).get(("echo", "proof"), 0)
        imp = instance([os.path.join(BIN, "echo_actor"), url], secret_file=other)
        try:
            F.check(wait_for(lambda: refused(s.port).get(("echo", "proof"), 0) > before, 5),
                    f"{label}: refused (proof) at its answer ({refused(s.port)})")
            for _ in range(3):
                st, pid = echo(s.port, timeout=5)
                F.check(st != 200 and pid != imp.pid, f"{label}: GET /actor/echo is not answered by it ({st}, {pid})")
        finally:
            stop(imp)
        for label, argv in (("echo_actor (C) with the secret", [os.path.join(BIN, "echo_actor"), url]),
                            ("python/echo_actor.py with the secret", [sys.executable, PY_ECHO, url])):
            real = instance(argv, secret_file=key)
            try:
                got = wait_for(lambda: (lambda r: r if r[0] == 200 else None)(echo(s.port, 5)), 15, 0.1)
                F.check(got and got[1] == real.pid, f"{label}: serves GET /actor/echo (200 from its pid) ({got})")
                if "C" in label:
                    flooded(s, real, port)
            finally:
                err = stop(real)
            F.check("asks this instance to prove" not in err, f"{label}: had what it was asked ({err[-300:]})")
        F.check("refused a " in s.stderr(), "the refusals were said on stderr")
        stopped(s, "external")


def flooded(s, real, aport):
    """2,000 wrong answers and 100 silent dials, each from its own address,
    while the real instance serves."""
    before = refused(s.port)
    t0 = time.monotonic()
    errors, n = flood(aport, 2000, 0)
    F.check(not errors, f"flood: every dial was answered with a challenge and closed ({errors[:3]})")
    want = before.get(("echo", "proof"), 0) + n
    F.check(wait_for(lambda: refused(s.port).get(("echo", "proof"), 0) >= want, 10),
            f"flood: each of the {n} wrong proofs refused and counted (proof {refused(s.port).get(('echo', 'proof'))}, "
            f"want {want})")
    held = []
    try:
        t1 = time.monotonic()
        for i in range(100):
            held.append(raw_dial(aport, f"127.2.{i // 200}.{i % 200 + 1}", False))
        # all 100 within the 3 s a proof may take: 36 refused at once (a machine so loaded that the first
        # ones' time ran out before the last dialed let some of those in: at least one, then)
        least = 100 - 64 if time.monotonic() - t1 < 2.5 else 1
        F.check(wait_for(lambda: refused(s.port).get(("echo", "instances"), 0) - before.get(("echo", "instances"), 0)
                         >= least, 10),
                f"silent dials: past the 64 proofs in progress each is refused at once (instances: "
                f"{refused(s.port).get(('echo', 'instances'))})")
    finally:
        for h in held:
            h.close()
    elapsed = time.monotonic() - t0
    err = s.stderr()
    bound = 1 + int(elapsed // 10)
    for reason in ("proof", "instances"):
        lines = proof_lines(err, reason)
        F.check(1 <= len(lines) <= bound, f"flood: {reason} refusals said at most {bound} time(s) in {elapsed:.1f} s, "
                                          f"not once per address ({len(lines)} lines: {lines[:3]})")
    got = echo(s.port)
    F.check(got == (200, real.pid), f"flood: the real instance still serves ({got})")


def spawned(mode, args, cls, port):
    label = f"process over tcp ({mode})"
    url = f"tcp://127.0.0.1:{port}"
    path = topology(f"proc-{mode}.json", {"name": "echo", "placement": "process", "instances": 2, "url": url})
    rc, out, err = run("host_check", "--doctor", "--topology", path, *args)
    F.check(rc == 0, f"{label}: the doctor accepts process placement on plain tcp (the host makes the secret) "
                     f"({rc}, {err[-300:]})")
    with cls("host_check", "--port", "0", "--topology", path, "--metrics-path", "/metrics", *args) as s:
        got = wait_for(lambda: (lambda r: r if r[0] == 200 else None)(echo(s.port, 5)), 15, 0.1)
        F.check(got, f"{label}: a spawned instance serves ({got}, {s.stderr()[-400:]})")
        kids = [p for p in children(s.proc.pid) if environ(p).get(b"M0__ACTOR") == b"echo"]
        secrets = set()
        for p in kids:
            argv = open(f"/proc/{p}/cmdline", "rb").read()
            sec = environ(p).get(b"M0__ACTOR_SECRET")
            secrets.update([sec] if sec else [])
            F.check(sec and sec not in argv, f"{label}: instance {p} has its secret in its environment, "
                                                     f"not its command line")
        F.check(len(kids) == 2 and len(secrets) == 1, f"{label}: both instances were handed the one secret "
                                                      f"({len(kids)} instances, {len(secrets)} secrets)")
        imp = instance([sys.executable, PY_ECHO, url])
        try:
            wait_for(lambda: "asks this instance to prove" in said(imp), 10, 0.05)
            for _ in range(6):
                st, pid = echo(s.port)
                F.check(st == 200 and pid != imp.pid, f"{label}: the impostor never answers ({st}, {pid})")
        finally:
            err = stop(imp)
        F.check("asks this instance to prove" in err, f"{label}: the impostor was challenged ({err[-300:]})")
        stopped(s, label)


def stopped(s, label):
    rc = s.stop()
    err = s.stderr()
    F.check(rc == 0 and not sanitizer_report(err),
            f"{label}: the host exits 0 at SIGTERM, no sanitizer report ({rc}, {err[-600:]})")


with_free_port(external)
with_free_port(lambda port: spawned("threads 2", ["--threads", "2"], Server, port))
with_free_port(lambda port: spawned("workers 2", ["--workers", "2"], Prefork, port))
F.done()
