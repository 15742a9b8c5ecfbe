"""A peer gone during its greeting, at every ipc mailbox (transport/ipc_watch.h).

nng 1.5.2 (Debian 12) stops an ipc listener for good when a connection to it
closes before the SP greeting is done: one `connect` and `close` on its path,
or one of m0's own dialers killed as it dials (a worker respawned, a relay's
leg cut), and no later peer got in. m0 watches its ipc listeners and makes a
stopped one again; nng 1.10 (Debian 13) goes on accepting by itself.

This test is such a peer: it connects to a socket file and closes at once,
three times, then checks that the peers that come after are served.
Proves:
- single: after the actor's socket (`actor.echo.sock`) and the loop's
  (`loop.0.sock`) were hit, an external echo instance that dials afterwards
  answers /actor/echo;
- `--workers 2`: after every socket of the run directory was hit (the
  supervisor's coordinator and actor sockets, each worker's, each loop's,
  each worker's door for the relay, the producer's), the instance answers
  connections on both workers, and a worker SIGKILLed then is respawned
  (the supervisor's socket takes it) and answers /instance;
- a listener is made again at most once per hit, judged before the kill (a live one is not taken
  for stopped), and each time in one line naming its URL; SIGTERM drains:
  exit 0.
"""
import collections
import glob
import http.client
import os
import re
import signal
import socket
import subprocess
import tempfile

import harness
from harness import BIN, Failures, Prefork, Server, children, private_dir, run_parts, wait_for, write_json

F = Failures()
TMP = tempfile.mkdtemp(prefix="m0-greeting-")
PROGRAMS = []
TOPO = {"app_actors": [{"name": "echo", "placement": "external"}]}
REMADE = re.compile(r"m0: the ipc listener at ipc://(\S+) had stopped taking connections .*: (.*)")
BOUND = 30  # seconds for a stopped listener to be found (2 s) and its peers to redial


def hit(path, times=3):
    """Connects to the unix socket at path and closes before any greeting."""
    for _ in range(times):
        c = socket.socket(socket.AF_UNIX)
        try:
            c.connect(path)
        except OSError:
            pass
        c.close()


def echo_instance(url):
    p = subprocess.Popen([os.path.join(BIN, "echo_actor"), url, "0"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    PROGRAMS.append(p)
    return p


def ask(port, path, method="GET", body=None, conn=None):
    c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        c.request(method, path, body=body)
        r = c.getresponse()
        return r.status, r.getheader("x-worker"), r.read()
    except (OSError, http.client.HTTPException):
        return None, None, b""
    finally:
        if conn is None:
            c.close()


def workers_echoed(port):
    """The workers whose connections /actor/echo answered 200, out of 8
    keep-alive connections held at once (so both workers have some)."""
    conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=5) for _ in range(8)]
    seen = set()
    try:
        for c in conns:
            _, w, _ = ask(port, "/instance", conn=c)
            if ask(port, "/actor/echo", "POST", b"w", conn=c)[0] == 200:
                seen.add(w)
    finally:
        for c in conns:
            c.close()
    return seen


def remade_once(s, hits, text=None):
    """Each URL made again at most as often as it was hit (a live listener is
    never taken for stopped), each line naming what became of it; text: the
    host's stderr up to a point (else all of it)."""
    lines = REMADE.findall(s.stderr() if text is None else text)
    per = collections.Counter(path for path, _ in lines)
    F.check(all(per[p] <= hits.get(p, 0) for p in per) and all(w.startswith("it listens there again")
                                                                for _, w in lines),
            f"a listener is made again at most once per hit, in one line ({lines}; hit {hits})")


def single():
    rd = private_dir("rd-", TMP)
    url, _, _, _ = harness.doctor_url(write_json(TOPO, TMP), "echo", rd)
    with Server("host_check", "--port", "0", "--topology", write_json(TOPO, TMP), "--run-dir", rd) as s:
        hits = {}
        for p in (url[len("ipc://"):], os.path.join(rd, "loop.0.sock")):
            hit(p)
            hits[p] = 1
        echo_instance(url)
        st = wait_for(lambda: ask(s.port, "/actor/echo", "POST", b"w")[0] == 200, BOUND)
        F.check(st, f"single: after its socket and the loop's were hit, an instance that dials then answers "
                    f"({ask(s.port, '/actor/echo', 'POST', b'w')[0]})")
        remade_once(s, hits)
        F.check(s.stop() == 0, "single: SIGTERM -> exit 0")


def workers():
    rd = private_dir("rd-", TMP)
    url, _, _, _ = harness.doctor_url(write_json(TOPO, TMP), "echo", rd)
    args = ["--port", "0", "--topology", write_json(TOPO, TMP), "--run-dir", rd, "--workers", "2"]
    with Prefork("host_check", *args) as s:
        kids = wait_for(lambda: (lambda k: k if len(k) == 2 else None)(children(s.proc.pid)), 10) or set()
        wait_for(lambda: len(glob.glob(os.path.join(rd, "actor.echo.w*.sock"))) == 2, 10)
        socks = sorted(glob.glob(os.path.join(rd, "*.sock")))
        hits = {}
        for p in socks:
            hit(p)
            hits[p] = 1
        echo_instance(url)
        seen = wait_for(lambda: (lambda w: w if w == {"0", "1"} else None)(workers_echoed(s.port)), BOUND)
        F.check(seen and len(socks) >= 8,
                f"--workers 2: after every socket of the run directory was hit "
                f"({[os.path.basename(p) for p in socks]}), the instance answers connections on both workers "
                f"({workers_echoed(s.port)})")
        # Judged before the kill: a worker killed as its dialers greet its
        # siblings stops their listeners too (nng 1.5.2), and those are made
        # again as rightly as the ones this test hit (in a Debian 12 chroot
        # under ASan, the surviving worker's loop.1.sock was).
        remade_once(s, hits, s.stderr())
        victim = min(kids) if kids else None
        if victim:
            os.kill(victim, signal.SIGKILL)
        now = wait_for(lambda: (lambda k: k if len(k) == 2 and victim not in k else None)(children(s.proc.pid)),
                       BOUND)
        back = wait_for(lambda: (lambda w: w if w == {"0", "1"} else None)(workers_echoed(s.port)), BOUND)
        F.check(victim and now and back,
                f"--workers 2: a worker SIGKILLed after the hits is respawned ({victim} -> {now}) and both workers "
                f"answer through the instance again ({workers_echoed(s.port)})")
        F.check(all(w.startswith("it listens there again") for _, w in REMADE.findall(s.stderr())),
                f"--workers 2: after the kill too, each listener made again says so in one line "
                f"({REMADE.findall(s.stderr())})")
        F.check(s.stop() == 0, "--workers 2: SIGTERM -> exit 0")


run_parts(F, [("single", single), ("workers", workers)], PROGRAMS, TMP)
