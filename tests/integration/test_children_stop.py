"""The host's spawned actor instances (placement "process") stop as
docs/behaviour.md says (The drain): SIGTERM, then a wait within the drain's
bound, and never a restart once the drain began (host/children.c). Each case
under --threads 2 and under --workers 2 (where the supervisor spawns them),
with host_check's echo actor placed process, two instances.

Proves:
- waited for, not killed: instance 0 takes 1500 ms to stop
  (M0_ECHO_STOP_MS, said on stderr as it begins and when it is done), the
  drain's bound is 8000 ms; SIGTERM to the host, and once instance 0 says it
  is stopping a SIGINT to the host too (a signal that cuts the host's wait
  short, as a worker's or the other instance's SIGCHLD does under
  --workers): the host exits 0, instance 0 said it stopped, and no
  `did not stop within the drain's bound; killed` line (the wait took an
  early poll() return for the bound: killed ~10 ms after SIGTERM);
- never restarted in a drain: a GET /slow?ms=2500 keeps the drain going;
  once the host says it is draining, the test SIGKILLs instance 1: no
  `started again` line, no echo process the test had not seen before, the
  slow answer comes whole and the host exits 0;
- no instance outlives the host.
"""
import json
import os
import signal
import tempfile

from harness import Failures, Prefork, Server, alive, children, environ, reap, wait_for
from rawhttp import Conn, request

F = Failures()
TMP = tempfile.mkdtemp(prefix="m0-children-")
MODES = [("threads2", ["--threads", "2"], Server, "host draining"),
         ("workers2", ["--workers", "2"], Prefork, "supervisor draining")]
SEEN = set()


def topology():
    fd, path = tempfile.mkstemp(prefix="topo-", suffix=".json", dir=TMP)
    with os.fdopen(fd, "w") as f:
        json.dump({"app_actors": [{"name": "echo", "placement": "process", "instances": 2}]}, f)
    return path


def instances(host):
    """{instance number: pid} of the host's live echo children."""
    out = {}
    for p in children(host):
        e = environ(p)
        if e.get(b"M0__ACTOR") == b"echo" and alive(p):
            out[int(e.get(b"M0__ACTOR_INSTANCE", b"-1"))] = p
    SEEN.update(out.values())
    return out


def start(label, args, cls, env):
    s = cls("host_check", "--port", "0", "--topology", topology(), "--drain-timeout-ms", "8000", *args, env=env)
    s.start()
    kids = wait_for(lambda: (lambda k: k if len(k) == 2 else None)(instances(s.proc.pid)), 15)
    F.check(kids, f"{label}: two echo instances spawned ({instances(s.proc.pid)})\n{s.stderr()}")
    return s, kids or {}


def waited(label, args, cls, _draining):
    s, kids = start(label, args, cls, {"M0_ECHO_STOP_MS": "1500"})
    with s:
        if not kids:
            return
        # Spawned is not yet running: an instance stopped before its runner
        # took the signals (slow under ASan) ends at once, without its kind's
        # free, which is what this case watches.
        F.check(wait_for(lambda: f"echo: instance 0 (pid {kids[0]}) made" in s.stderr(), 15),
                f"{label}: instance 0 is made\n{s.stderr()}")
        s.signal(signal.SIGTERM)
        says = f"echo: instance 0 (pid {kids[0]}) stopping"
        F.check(wait_for(lambda: says in s.stderr(), 15), f"{label}: instance 0 began to stop\n{s.stderr()}")
        s.signal(signal.SIGINT)  # cuts the host's wait short, once
        rc = s.wait(20)
        err = s.stderr()
        F.check(rc == 0, f"{label}: the host exits 0 ({rc})\n{err}")
        F.check(f"echo: instance 0 (pid {kids[0]}) stopped" in err and "killed" not in err,
                f"{label}: instance 0 stopped by SIGTERM within the bound, not killed\n{err}")
        F.check(wait_for(lambda: not any(alive(p) for p in kids.values()), 5),
                f"{label}: no instance outlives the host")


def not_restarted(label, args, cls, draining):
    s, kids = start(label, args, cls, {"M0_HOSTCHECK_SLOW_SAYS": "1"})
    with s:
        if not kids:
            return
        c = Conn(s.port, timeout=15)
        c.send(request("GET", "/slow?ms=2500"))
        F.check(wait_for(lambda: "/slow 2500 ms begins" in s.stderr(), 15), f"{label}: /slow began\n{s.stderr()}")
        s.signal(signal.SIGTERM)
        F.check(wait_for(lambda: draining in s.stderr(), 15), f"{label}: the drain began\n{s.stderr()}")
        os.kill(kids[1], signal.SIGKILL)
        F.check(wait_for(lambda: not alive(kids[1]), 5), f"{label}: instance 1 is gone")
        late = set()

        def ended():
            late.update(set(instances(s.proc.pid).values()) - set(kids.values()))
            return s.proc.poll() is not None
        wait_for(ended, 20)
        st, _, _, body, _ = c.try_response(timeout=10)
        rc = s.wait(5)
        err = s.stderr()
        F.check(st == 200 and b'"ms":2500' in body, f"{label}: the slow answer came whole ({st} {body[:80]!r})")
        F.check(rc == 0, f"{label}: the host exits 0 ({rc})\n{err}")
        F.check("started again" not in err and not late,
                f"{label}: no instance started again in the drain (new pids {late})\n{err}")
        F.check(wait_for(lambda: not any(alive(p) for p in SEEN), 5), f"{label}: no instance outlives the host")


try:
    for label, args, cls, draining in MODES:
        waited(f"{label}, waited", args, cls, draining)
        not_restarted(f"{label}, no restart", args, cls, draining)
finally:
    reap(SEEN)
F.done()
