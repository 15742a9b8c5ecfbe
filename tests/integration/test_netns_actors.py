"""Application actors on another machine, for real (issue 19, point 4;
docs/actors.md, Outside the host; docs/topology.md, Across machines): an
external actor's instances run in another network namespace and reach the
host over tls+tcp://, mutual TLS with certificates this test makes.

Two network namespaces A and B joined by a veth pair (10.78.0.1/24 in A,
10.78.0.2/24 in B; both ends and both `lo` up). openssl makes, in a temporary
directory, a CA, a host certificate (subjectAltName IP:10.78.0.1 and
DNS:10.78.0.1, which mbed TLS 2.28 matches as text), an instance certificate,
and a second CA with an instance certificate of its own (the stranger).
host_check runs in A: `--host 10.78.0.1 --port 0 --run-dir DIR
--metrics-path /metrics`, M0_HOSTCHECK_PERIOD_MS=100000 (the producer is
quiet), with a topology file: mode single, "tls" naming the host's
certificate, key and the CA, actor echo placed external at
tls+tcp://10.78.0.1:PORT, and POST /actor/echo given timeout_ms 5000.
echo_actor instances run in B (`ip netns exec B`, M0_TLS_CERT/KEY/CA set).
The HTTP client runs in B too (its sockets are made by a thread that entered
B with setns), so every byte, HTTP and actor link alike, crosses the veth.

Proves:
- The doctor in A accepts the file, resolves echo's URL as the file's, and
  its "links" list says echo's link is "encrypted": true.
- The listener at tls+tcp://10.78.0.1:PORT speaks TLS: from B, Python's ssl
  with the instance's certificate completes a handshake and is shown a
  certificate for IP 10.78.0.1 issued by the test's CA; without a client
  certificate it gets no session (mutual: the host asks for one).
- With one echo_actor up in B, POST /actor/echo is 200 with the echoed body,
  and its JSON pid is that B-side process's pid (the process, as B's
  /proc/net/tcp shows, holds an established connection from 10.78.0.2 to
  10.78.0.1:PORT).
- A request with x-sleep-ms: 3000, in flight (m0_actor_in_flight 1) when the
  instance is SIGKILLed, is answered 502 well before its 3 s (within 1.5 s of
  the kill); three requests after it are each answered 503 within the
  route's 5 s; m0_actor_instances is 0 and instance_died counted 1. Every
  client read is bounded.
- A new echo_actor in B (no host restart: the host's pid, and GET /pid, are
  unchanged) is served again: 200 with the new pid.
- Frames published on the remote side reach the host's streams: two GET
  /events streams held from B; four POST /actor/echo with x-publish: beats
  and body from-b-N each say "published": true, and each frame arrives on
  both streams as `data: from-b-N` with the same id, ids strictly
  increasing, each equal to /metrics' m0_events_published_total read after it
  arrived (the host's counter numbered it); no other frame arrives.
- An echo_actor in B whose certificate is signed by another CA (it trusts
  the right CA, so only the host can refuse it) never gets a request: while
  it is the only one, its handshakes are refused (the host's nng listener
  counts them as auth errors: at least two, it redials), m0_actor_instances
  stays 0 and the route answers 503 meanwhile; /health stays 200;
  with a good instance joined beside it, ten requests are all answered by
  the good one.
- SIGTERM to the host -> exit 0; the connected echo_actor is told STOP and
  exits 0.
If namespaces cannot be made here (not root, no iproute2, no permission, no
veth) or openssl is missing, it prints `SKIP: <reason>` and exits 0.
Namespaces and the temporary directory (certificates included) are deleted
in a finally block, and every process it started is killed by its pid.
"""
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

import harness
from harness import BIN, Failures, wait_for
from netns import Netns, sh, skip
from rawhttp import Conn, request

F = Failures()
NET = Netns("m0x", "10.78.0")
NS_A, NS_B, ADDR_A, ADDR_B = NET.a, NET.b, NET.addr_a, NET.addr_b
APORT = 20000 + os.getpid() % 12000  # echo's link port in A: a fresh namespace, below the ephemeral range (the HTTP --port 0)
URL = f"tls+tcp://{ADDR_A}:{APORT}"
TIMEOUT_MS = 5000  # POST /actor/echo's route timeout
CLONE_NEWNET = 0x40000000
LIBC = ctypes.CDLL(None, use_errno=True)
PROCS = []  # every process started: killed by pid in the finally
HTTP_PORT = None
ECHO_LABEL = 'actor="echo"'


# ---- namespaces ------------------------------------------------------------------------------------------------

def prerequisites():
    if not shutil.which("openssl"):
        skip("openssl is missing: the test cannot make its certificates")
    NET.prerequisites()


def setup():
    """The namespaces and the veth pair (netns.py); SKIPs when that, or
    entering B from a thread of this process, is impossible here."""
    NET.setup()
    try:  # this process's threads enter B by setns: it must work here
        in_ns(NS_B, lambda: None)
    except OSError as e:
        skip(f"setns into {NS_B} is refused here ({e})")


def in_ns(ns, fn, timeout=15):
    """fn() run on a thread of its own that entered namespace `ns` (setns
    changes the calling thread's network namespace only, and a socket stays
    in the namespace it was made in, whichever thread uses it later)."""
    res = {}

    def body():
        try:
            fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
            try:
                if LIBC.setns(fd, CLONE_NEWNET) != 0:
                    e = ctypes.get_errno()
                    raise OSError(e, f"setns: {os.strerror(e)}")
            finally:
                os.close(fd)
            res["v"] = fn()
        except BaseException as e:  # handed back to the caller
            res["e"] = e

    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise TimeoutError(f"in_ns({ns}) did not finish within {timeout}s")
    if "e" in res:
        raise res["e"]
    return res.get("v")


class BConn(Conn):
    """rawhttp's Conn, its socket made in namespace B, to the host's listener
    at 10.78.0.1 (in A): every byte crosses the veth."""

    def __init__(self, timeout=5.0):
        self.sock = in_ns(NS_B, lambda: socket.create_connection((ADDR_A, HTTP_PORT), timeout=timeout))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.buf = b""
        self.split = None  # every send whole: the namespaces, not the cuts, are what this test is about


def ask(method, path, body=b"", headers=(), timeout=8.0):
    """One request on its own connection from B: (status, headers, body, seconds, local address)."""
    t0 = time.monotonic()
    try:
        c = BConn(timeout=timeout)
    except OSError as e:
        return None, {}, f"connect: {e}".encode(), time.monotonic() - t0, None
    with c:
        local = c.sock.getsockname()[0]
        hs = list(headers) + ([("Content-Length", str(len(body)))] if body else [])
        c.send(request(method, path, headers=hs, body=body))
        st, _, h, b, line = c.try_response(timeout=timeout)
    return st, h, b if st is not None else line.encode(), time.monotonic() - t0, local


def echo(body=b"x", headers=(), timeout=8.0):
    st, h, b, took, local = ask("POST", "/actor/echo", body, headers, timeout)
    try:
        j = json.loads(b) if st == 200 else None
    except ValueError:
        j = None
    return st, j if isinstance(j, dict) else None, b, took


def metrics_text():
    st, _, b, _, _ = ask("GET", "/metrics", timeout=5)
    return b.decode(errors="replace") if st == 200 else ""


def figure(name, text=None):
    """The value of one /metrics sample (name with its labels), or None."""
    text = metrics_text() if text is None else text
    m = re.search(rf"^{re.escape(name)} (-?\d+)$", text, re.M)
    return int(m.group(1)) if m else None


def live():
    return figure('m0_actor_instances{actor="echo"}')


def refused_handshakes():
    """The host's nng listeners' authentication failures (a TLS handshake
    refused: a peer without a certificate of the CA), summed."""
    text = metrics_text()
    return sum(int(v) for v in re.findall(r'^m0_nng_stat\{[^}]*scope="listener"[^}]*stat="auth"\} (\d+)$', text, re.M))


# ---- certificates ----------------------------------------------------------------------------------------------

def make_certs(d):
    """A CA, the host's certificate (IP and DNS 10.78.0.1), an instance's; a
    second CA and a stranger's certificate signed by it. EC P-256 keys."""
    def ossl(*args):
        rc, out, err = sh("openssl", *args, timeout=60)
        if rc != 0:
            raise RuntimeError(f"openssl {' '.join(args)}: {err}")

    p = lambda n: os.path.join(d, n)
    key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    for ca in ("ca", "ca2"):
        ossl("req", "-x509", *key, "-keyout", p(f"{ca}.key"), "-out", p(f"{ca}.crt"), "-days", "2",
             "-subj", f"/CN=m0 test {ca}", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    leaves = [("host", "ca", f"IP:{ADDR_A},DNS:{ADDR_A}"), ("instance", "ca", "DNS:echo-instance"),
              ("stranger", "ca2", "DNS:echo-instance")]
    for name, ca, san in leaves:
        with open(p(f"{name}.ext"), "w") as f:
            f.write(f"basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                    f"extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName={san}\n")
        ossl("req", *key, "-keyout", p(f"{name}.key"), "-out", p(f"{name}.csr"), "-subj", f"/CN={name}")
        ossl("x509", "-req", "-in", p(f"{name}.csr"), "-CA", p(f"{ca}.crt"), "-CAkey", p(f"{ca}.key"),
             "-CAcreateserial", "-out", p(f"{name}.crt"), "-days", "2", "-extfile", p(f"{name}.ext"))
    return p


def tls_probe(p, with_cert):
    """From B: a TLS handshake with the actor's listener, trusting the CA,
    with or without the instance's certificate. ('ok', peer certificate) or
    ('refused', what happened)."""
    def go():
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(p("ca.crt"))
        if with_cert:
            ctx.load_cert_chain(p("instance.crt"), p("instance.key"))
        raw = socket.create_connection((ADDR_A, APORT), timeout=5)
        try:
            s = ctx.wrap_socket(raw, server_hostname=ADDR_A)
        except (ssl.SSLError, OSError) as e:
            raw.close()
            return "refused", f"handshake: {type(e).__name__}: {e}"
        try:
            cert = s.getpeercert()
            if with_cert:
                return "ok", cert
            # TLS 1.3 reports a refused client certificate after the handshake, at the first read
            s.settimeout(3)
            try:
                got = s.recv(1)
                return ("refused", "closed") if not got else ("ok", cert)
            except (ssl.SSLError, OSError) as e:
                return ("refused", f"read: {type(e).__name__}: {e}") if not isinstance(e, socket.timeout) \
                    else ("ok", cert)
        finally:
            s.close()

    return in_ns(NS_B, go)


# ---- processes -------------------------------------------------------------------------------------------------

def start(argv, errpath, env):
    f = open(errpath, "w+b")
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=f, env=env)
    p.errf = f
    PROCS.append(p)
    return p


def err_of(p):
    return harness.read_log(p.errf)


def comm(pid):
    try:
        return open(f"/proc/{pid}/comm").read().strip()
    except OSError:
        return None


def instance(p, i, cert="instance", ca="ca", tmp=None):
    """echo_actor INSTANCE i in B, dialing URL with cert/key and CA."""
    env = dict(os.environ, M0_TLS_CERT=p(f"{cert}.crt"), M0_TLS_KEY=p(f"{cert}.key"), M0_TLS_CA=p(f"{ca}.crt"))
    a = start(["ip", "netns", "exec", NS_B, os.path.join(BIN, "echo_actor"), URL, str(i)],
              os.path.join(tmp, f"echo{i}.err"), env)
    wait_for(lambda: comm(a.pid) == "echo_actor" or a.poll() is not None, 5)
    F.check(comm(a.pid) == "echo_actor", f"instance {i}: `ip netns exec` ran echo_actor as pid {a.pid} "
                                         f"({comm(a.pid)}, rc {a.poll()})")
    return a


def stop(p, sig=signal.SIGTERM, timeout=5):
    if p.poll() is None:
        p.send_signal(sig)
    try:
        return p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(timeout=5)
        return None


class Stream:
    """A GET /events stream held from B: its head, then SSE frames."""

    def __init__(self):
        self.frames = []
        self.c = BConn(timeout=5)
        self.c.send(request("GET", "/events", headers=[("Accept", "text/event-stream")]))
        deadline = time.monotonic() + 5
        try:
            while b"\r\n\r\n" not in self.c.buf:
                self.c._fill(deadline)
        except Exception as e:
            self.status, self.ctype = None, f"{type(e).__name__}: {e}"
            return
        head, self.c.buf = self.c.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split(" ")[1])
        hdr = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
        self.ctype = hdr.get("content-type", "")

    def until(self, pred, timeout):
        """Reads frames until one satisfies pred (returns it) or the bound passes (None)."""
        deadline = time.monotonic() + timeout
        while True:
            while b"\n\n" in self.c.buf.replace(b"\r\n", b"\n"):
                text = self.c.buf.replace(b"\r\n", b"\n")
                frame, _, rest = text.partition(b"\n\n")
                self.c.buf = rest
                if not frame.strip() or frame.startswith(b":"):
                    continue
                f = {}
                for line in frame.decode("utf-8", "replace").split("\n"):
                    k, _, v = line.partition(": ")
                    f.setdefault(k, v)
                self.frames.append(f)
                if pred(f):
                    return f
            try:
                self.c._fill(deadline)
            except Exception:
                return None

    def close(self):
        self.c.close()


# ---- the test --------------------------------------------------------------------------------------------------

def main():
    global HTTP_PORT
    prerequisites()
    tmp = tempfile.mkdtemp(prefix="m0-netns-actors-")
    os.chmod(tmp, 0o700)
    run_dir = os.path.join(tmp, "run")
    os.mkdir(run_dir, 0o700)
    host = None
    t_start = time.monotonic()
    try:
        setup()
        p = make_certs(tmp)
        topo = {"mode": "single",
                "tls": {"cert": p("host.crt"), "key": p("host.key"), "ca": p("ca.crt")},
                "app_actors": [{"name": "echo", "placement": "external", "url": URL}],
                "routes": [{"method": "POST", "pattern": "/actor/echo", "actor": "echo", "timeout_ms": TIMEOUT_MS}]}
        path = os.path.join(tmp, "topology.json")
        with open(path, "w") as f:
            json.dump(topo, f, indent=2)
        hc = os.path.join(BIN, "host_check")

        # The doctor, in A.
        rc, out, err = sh("ip", "netns", "exec", NS_A, hc, "--doctor", "--topology", path, "--run-dir", run_dir)
        try:
            d = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            d = {}
        F.check(rc == 0 and d.get("ok") is True, f"doctor in A: the tls topology is accepted ({rc}, {err}"
                                                  f"{out[-600:]})")
        ent = next((x for x in d.get("topology", {}).get("app_actors", []) if x.get("name") == "echo"), {})
        F.check(ent.get("placement") == "external" and ent.get("url") == URL,
                f"doctor in A: echo is external at {URL} ({ent})")
        enc = [x for x in d.get("links", []) if x.get("actor") == "echo"]
        F.check(enc == [{"actor": "echo", "url": URL, "encrypted": True}],
                f"doctor in A: its links say echo's is \"encrypted\": true ({enc})")

        # The host, in A.
        env = dict(os.environ, M0_HOSTCHECK_PERIOD_MS="100000")
        host = start(["ip", "netns", "exec", NS_A, hc, "--topology", path, "--run-dir", run_dir, "--host", ADDR_A,
                      "--port", "0", "--metrics-path", "/metrics"], os.path.join(tmp, "host.err"), env)
        wait_for(lambda: re.search(rf"listening on http://{re.escape(ADDR_A)}:(\d+) ", err_of(host))
                 or host.poll() is not None, 10)
        m = re.search(rf"listening on http://{re.escape(ADDR_A)}:(\d+) ", err_of(host))
        F.check(m is not None, f"host in A: listens on http://{ADDR_A}:P (rc {host.poll()}):\n{err_of(host)}")
        if not m:
            return
        HTTP_PORT = int(m.group(1))
        F.check(comm(host.pid) == "host_check", f"host in A: `ip netns exec` ran host_check as pid {host.pid}")
        host_pid = host.pid

        st, h, b, took, local = ask("GET", "/health")
        F.check(st == 200 and local == ADDR_B, f"client in B: GET /health from {local} is 200 ({st} {b[:200]!r})")
        st, _, b, _ = echo(b"nobody")
        F.check(st == 503, f"no instance yet: POST /actor/echo is 503 ({st} {b[:200]!r})")

        # The listener speaks TLS, mutual.
        try:
            how, what = tls_probe(p, True)
        except OSError as e:
            how, what = "error", str(e)
        sans = what.get("subjectAltName", ()) if isinstance(what, dict) else ()
        issuer = dict(x[0] for x in what.get("issuer", ())) if isinstance(what, dict) else {}
        spoke = how == "ok" and ("IP Address", ADDR_A) in sans and issuer.get("commonName") == "m0 test ca"
        F.check(spoke, f"TLS from B with the instance's certificate: a handshake, the host's certificate for "
                       f"IP {ADDR_A} issued by the test CA ({how}, {what})")
        try:
            how, what = tls_probe(p, False)
        except OSError as e:
            how, what = "error", str(e)
        F.check(spoke and how == "refused",  # a listener that speaks no TLS refuses this too: only with the above
                f"TLS from B without a client certificate: the same listener gives no session ({how}, {what})")

        # One instance in B.
        a1 = instance(p, 1, tmp=tmp)
        F.check(wait_for(lambda: live() == 1 or a1.poll() is not None, 10) and live() == 1,
                f"instance 1 in B joins (m0_actor_instances 1: {live()}; rc {a1.poll()}):\n{err_of(a1)}\n"
                f"{err_of(host)[-800:]}")
        st, j, b, took = echo(b"hello from b")
        F.check(st == 200 and j and j.get("pid") == a1.pid and j.get("instance") == 1
                and j.get("body") == "hello from b" and j.get("actor") == "echo",
                f"POST /actor/echo: 200 from the instance in B, pid {a1.pid} ({st} {b[:300]!r})")
        socks = NET.tcp(NS_B, a1.pid)
        F.check(any(l[0] == ADDR_B and r == (ADDR_A, APORT) and s == "01" for l, r, s in socks),
                f"instance 1's link: an established connection {ADDR_B} -> {ADDR_A}:{APORT} in B ({socks})")

        # In flight when the instance dies: 502, early; then 503.
        c = BConn(timeout=10)
        body = b"held"
        t0 = time.monotonic()
        c.send(request("POST", "/actor/echo", headers=[("x-sleep-ms", "3000"), ("Content-Length", str(len(body)))],
                       body=body))
        infl = 'm0_actor_in_flight{actor="echo"}'
        F.check(wait_for(lambda: figure(infl) == 1, 2),
                f"the x-sleep-ms: 3000 request is in flight ({infl} {figure(infl)})")
        t_kill = time.monotonic()
        os.kill(a1.pid, signal.SIGKILL)
        a1.wait(timeout=5)
        st, _, h, b, line = c.try_response(timeout=8)
        t_ans = time.monotonic()
        c.close()
        F.check(st == 502 and t_ans - t0 < 2.5 and t_ans - t_kill < 1.5,
                f"SIGKILL with the request in flight: 502 well before its 3 s ({st} {line}; "
                f"{t_ans - t0:.2f}s after the send, {t_ans - t_kill:.2f}s after the kill)")
        print(f"in flight, SIGKILLed: {st} {t_ans - t0:.3f}s after the send, {t_ans - t_kill:.3f}s after the kill",
              flush=True)
        after = [echo(f"after-{i}".encode(), timeout=TIMEOUT_MS / 1000 + 3) for i in range(3)]
        F.check(all(st == 503 and took < TIMEOUT_MS / 1000 for st, _, _, took in after),
                f"after the death: 503 within the route's {TIMEOUT_MS} ms, three times "
                f"({[(st, round(took, 3)) for st, _, _, took in after]})")
        print(f"after the death: {[(st, round(took, 3)) for st, _, _, took in after]}", flush=True)
        text = metrics_text()
        F.check(figure('m0_actor_instances{actor="echo"}', text) == 0
                and figure('m0_actor_requests_total{actor="echo",outcome="instance_died"}', text) == 1,
                f"/metrics: instances 0, instance_died 1 ({[l for l in text.splitlines() if ECHO_LABEL in l]})")

        # A new instance, no host restart.
        a2 = instance(p, 2, tmp=tmp)
        F.check(wait_for(lambda: live() == 1 or a2.poll() is not None, 10) and live() == 1,
                f"instance 2 in B joins ({live()}; rc {a2.poll()}):\n{err_of(a2)}")
        st, j, b, took = echo(b"again")
        F.check(st == 200 and j and j.get("pid") == a2.pid and j.get("pid") != a1.pid and j.get("body") == "again",
                f"the new instance serves: 200, pid {a2.pid} ({st} {b[:300]!r})")
        st, _, b, _, _ = ask("GET", "/pid")
        F.check(host.poll() is None and host.pid == host_pid and st == 200 and b.strip() == str(host_pid).encode(),
                f"no host restart: the host's pid is still {host_pid} (GET /pid {st} {b!r}, rc {host.poll()})")

        # Frames published in B reach the host's streams.
        streams = [Stream() for _ in range(2)]
        F.check(all(s.status == 200 and s.ctype.startswith("text/event-stream") for s in streams),
                f"two GET /events streams from B ({[(s.status, s.ctype) for s in streams]})")
        ids, counter = [[], []], []
        for n in range(1, 5):
            msg = f"from-b-{n}"
            st, j, b, _ = echo(msg.encode(), headers=[("x-publish", "beats")])
            F.check(st == 200 and j and j.get("published") is True and j.get("pid") == a2.pid,
                    f"publish {n}: 200 \"published\": true from the instance in B ({st} {b[:300]!r})")
            for i, s in enumerate(streams):
                f = s.until(lambda f: f.get("data") == msg, 5) if s.status == 200 else None
                F.check(f is not None and f.get("id", "").isdigit(),
                        f"publish {n}: stream {i} gets `data: {msg}` with an id ({f}; {s.frames if s.status else ''})")
                ids[i].append(int(f["id"]) if f and f.get("id", "").isdigit() else None)
            counter.append(figure("m0_events_published_total"))
        print(f"published ids {ids[0]}, m0_events_published_total after each {counter}", flush=True)
        F.check(ids[0] == ids[1], f"both streams got the same ids ({ids})")
        F.check(all(x is not None for x in ids[0]) and all(a < b for a, b in zip(ids[0], ids[0][1:])),
                f"ids strictly increasing ({ids[0]})")
        F.check(ids[0] == counter, f"each id is the host's counter (m0_events_published_total after it: {counter}, "
                                   f"ids {ids[0]})")
        for i, s in enumerate(streams):
            s.until(lambda f: False, 0.3)
            F.check([f.get("data") for f in s.frames] == [f"from-b-{n}" for n in range(1, 5)],
                    f"stream {i}: the four frames and nothing else ({s.frames})")
            s.close()

        # A stranger: a certificate of another CA.
        rc = stop(a2)
        F.check(rc == 0, f"instance 2: SIGTERM -> exit 0 ({rc}):\n{err_of(a2)[-300:]}")
        F.check(wait_for(lambda: live() == 0, 5), f"instance 2 left ({live()})")
        a0 = refused_handshakes()
        r = instance(p, 9, cert="stranger", ca="ca", tmp=tmp)
        seen = []

        def refused_twice():  # the stranger dials and redials; each handshake is refused at the host
            st, j, b, took = echo(b"stranger?")
            seen.append((st, live(), (j or {}).get("pid")))
            return refused_handshakes() >= a0 + 2

        F.check(wait_for(refused_twice, 10, step=0.2),
                f"the host refuses the stranger's TLS handshakes (nng listeners' auth errors {a0} -> "
                f"{refused_handshakes()}; the stranger rc {r.poll()}):\n{err_of(r)[-300:]}")
        print(f"stranger: {refused_handshakes() - a0} handshakes refused, answers meanwhile {seen}", flush=True)
        F.check(r.poll() is None, f"the stranger runs (it dials and redials) (rc {r.poll()}):\n{err_of(r)[-300:]}")
        F.check(len(seen) >= 2 and all(st == 503 and n == 0 for st, n, _ in seen),
                f"the stranger is never an instance: 503 while it is the only one, m0_actor_instances 0 ({seen})")
        st, _, b, _, _ = ask("GET", "/health")
        F.check(st == 200, f"the host keeps serving: /health 200 ({st} {b!r})")
        a3 = instance(p, 3, tmp=tmp)
        F.check(wait_for(lambda: live() == 1 or a3.poll() is not None, 10) and live() == 1,
                f"instance 3 in B joins beside the stranger ({live()}):\n{err_of(a3)}")
        got = [echo(f"good-{i}".encode()) for i in range(10)]
        F.check(all(st == 200 and j and j.get("pid") == a3.pid for st, j, _, _ in got),
                f"ten requests, all answered by the good instance {a3.pid}, never the stranger {r.pid} "
                f"({[(st, (j or {}).get('pid')) for st, j, _, _ in got]})")
        F.check(live() == 1, f"still one instance ({live()})")

        # SIGTERM.
        t0 = time.monotonic()
        os.kill(host.pid, signal.SIGTERM)
        try:
            rc = host.wait(timeout=8)
        except subprocess.TimeoutExpired:
            rc = None
        F.check(rc == 0, f"host in A: SIGTERM -> exit 0 ({rc}, {time.monotonic() - t0:.2f}s):\n{err_of(host)[-800:]}")
        try:
            rc = a3.wait(timeout=5)
        except subprocess.TimeoutExpired:
            rc = None
        F.check(rc == 0, f"instance 3: told STOP by the draining host, exit 0 ({rc}):\n{err_of(a3)[-300:]}")
    finally:
        for pr in reversed(PROCS):
            if pr.poll() is None:
                pr.kill()
                try:
                    pr.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
        NET.teardown(F)
        shutil.rmtree(tmp, ignore_errors=True)
        print(f"took {time.monotonic() - t_start:.1f}s", flush=True)


if __name__ == "__main__":
    main()
    F.done()
