"""A SIGTERM during the start (docs/behaviour.md, Start: "A SIGTERM during
the start ends it (`m0: stopped while starting`) with the usual drain").

Proves, with `host_check` whose make is held by M0_HOSTCHECK_FAIL_GATE (a
late make waits until the gate file exists, then refuses):
- single mode, the producer's make held: SIGTERM (once the handlers are in)
  is answered `m0: stopped while starting` before anything is served; the
  make, released after that, refuses into a drain that counts it as over;
  loop.0 drains with 0 requests, nothing was listening, and the exit is 0.
- prefork, worker 1's pool thread's make held: SIGTERM to the supervisor is
  answered `m0: stopped while starting` by the supervisor and by each worker
  (three lines), both loops drain, exit 0, no worker left.
"""
import os
import signal
import tempfile

from harness import Failures, Prefork, Server, alive, children, environ, wait_for

F = Failures()
TMP = tempfile.mkdtemp(prefix="m0-stopstart-")
LINE = "m0: stopped while starting"


def execd(pid, worker):
    """pid runs the host's own code: a worker's environment names it (a child
    of posix_spawn shows its parent's environment, and its parent's SIGTERM
    handler in SigCgt, until its exec: a SIGTERM then finds the default
    action after the exec, and the worker is gone without its drain); the
    single host is host_check itself, no longer the test's forked python."""
    try:
        if worker:
            return b"M0__WORKER" in environ(pid)
        return os.path.basename(os.readlink(f"/proc/{pid}/exe")) == "host_check"
    except OSError:
        return False


def handlers_in(pid, worker=False):
    """SIGTERM is caught by the host's own handler: looked at after the exec
    is seen (an exec resets caught signals to their default, so a handler
    seen after it is the host's)."""
    if not execd(pid, worker):
        return False
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("SigCgt:"):
                    return int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)) != 0
    except OSError:
        pass
    return False


def single():
    gate = os.path.join(TMP, "gate-single")
    env = {"M0_HOSTCHECK_PRODUCER_FAILS": "late", "M0_HOSTCHECK_FAIL_GATE": gate}
    with Server("host_check", "--port", "0", env=env, expect_listen=False) as s:
        F.check(wait_for(lambda: handlers_in(s.proc.pid), 10), "single: the host installs its SIGTERM handler")
        s.signal(signal.SIGTERM)
        F.check(wait_for(lambda: LINE in s.stderr(), 10), f"single: `{LINE}`:\n{s.stderr()}")
        open(gate, "w").close()  # the held make refuses now, inside the drain
        rc = s.wait(15)
        err = s.stderr()
        F.check(rc == 0, f"single: the drain ends with exit 0 ({rc}):\n{err}")
        F.check("listening on" not in err, f"single: nothing was served:\n{err}")
        F.check("m0: loop.0 drained: 0 requests" in err, f"single: loop.0 drained, 0 requests:\n{err}")


def prefork():
    gate = os.path.join(TMP, "gate-prefork")
    env = {"M0_HOSTCHECK_POOL_MAKE_FAILS": "late", "M0_HOSTCHECK_FAIL_GATE": gate}
    with Prefork("host_check", "--port", "0", "--workers", "2", "--blocking-threads", "1", env=env,
                 expect_listen=False) as s:
        sup = s.proc.pid
        F.check(wait_for(lambda: handlers_in(sup) and len(children(sup)) == 2
                         and all(handlers_in(k, worker=True) for k in children(sup)), 15),
                f"prefork: two workers, every process with its handler ({children(sup)})")
        kids = children(sup)
        s.signal(signal.SIGTERM)
        F.check(wait_for(lambda: s.stderr().count(LINE) >= 3, 10),
                f"prefork: `{LINE}` from the supervisor and each worker:\n{s.stderr()}")
        open(gate, "w").close()
        rc = s.wait(20)
        err = s.stderr()
        F.check(rc == 0 and err.count(LINE) == 3, f"prefork: exit 0 ({rc}), the line three times:\n{err}")
        F.check("listening on" not in err, f"prefork: nothing was served:\n{err}")
        F.check("m0: loop.0 drained: 0 requests" in err and "m0: loop.1 drained: 0 requests" in err,
                f"prefork: both loops drained:\n{err}")
        F.check(wait_for(lambda: not any(alive(k) for k in kids), 10),
                f"prefork: no worker left ({[k for k in kids if alive(k)]})")


try:
    single()
    prefork()
finally:
    for f in os.listdir(TMP):
        os.unlink(os.path.join(TMP, f))
    os.rmdir(TMP)
F.done()
