"""What the host refuses before anything starts, and what a start that fails
says (docs/reference.md, Checks: threads per process, `pool-routes`,
`descriptors`; Variables m0 does not read; issue 20).

Proves, on host_check:
- descriptors: under RLIMIT_NOFILE 64, `--threads 8` (it said `m0: loop.0
  cannot start` with no reason and crashed, exit 139) and under 1024
  `--threads 130` (SIGSEGV in uv_loop_close) are refused: exit 78, one line
  naming the limit, what is needed and the fix, nothing listening; the
  doctor's `descriptors` check says the same and exits 78; `--threads 2`
  under 64 is still served;
- a loop that cannot start says why and its process exits 1: a prefork
  worker of ramp (no actors: nothing else in it waits on the lost
  descriptors) respawned after its supervisor's limit was lowered (prlimit)
  to two thirds of what a worker opens: `m0: loop.1 cannot start: ...` or another start
  failure naming `RLIMIT_NOFILE is L`, the worker `exited 1` (not `died of
  signal 11`), the supervisor exits 1 when the respawn budget is spent;
- counts have bounds checked before anything starts: `--threads 99999` is 78
  (threads-count) in serve and doctor, and `--threads 64 --blocking-threads
  100` (6464 threads in one process: the doctor said ok) is 78, refused in
  well under a second with nothing bound;
- M0_NEEDS_POOL (M0_HOSTCHECK_NEEDS_POOL=1 flags host_check's /slow): without
  a pool, 78 and one line naming `route GET /slow` and
  `--blocking-threads`; with `--blocking-threads 1` served, /slow on a pool
  thread; =loop (M0_ON_LOOP too) is 78 even with a pool; the doctor's
  `pool-routes` check agrees each time;
- an M0_ variable m0 does not read: M0_THREAD=2 serves (one loop) with
  `m0: warning: M0_THREAD is not a variable m0 reads; ignored (did you mean
  M0_THREADS?)`; the doctor lists it in `unknown_variables` and its
  environment check names it; an unknown variable's value is never printed;
  the host's own (M0_TLS_CERT, M0__*) and the application's (M0_HOSTCHECK_*)
  are not named; a refusal stays one line.
"""
import json
import os
import re
import resource
import signal
import socket
import subprocess
import time

from harness import BIN, Failures, Server, run, wait_for

F = Failures()


def m0_lines(err):
    return [l for l in err.splitlines() if l.startswith("m0: ")]


def limited(soft, *args, env=None, timeout=30):
    """Runs host_check to completion under RLIMIT_NOFILE soft."""
    e = dict(os.environ)
    e.update(env or {})
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]

    def lower():
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    try:
        p = subprocess.run([os.path.join(BIN, "host_check"), *args], capture_output=True, text=True, env=e,
                           timeout=timeout, preexec_fn=lower)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as x:
        return None, "", f"(did not exit within {timeout}s) {x.stderr!r}"


def checks(out):
    try:
        return {c["name"]: c for c in json.loads(out.strip().splitlines()[-1])["checks"]}
    except (IndexError, ValueError, KeyError):
        return {}


def descriptors():
    for soft, threads in ((64, "8"), (1024, "130")):
        if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < soft:
            print(f"SKIP: RLIMIT_NOFILE's hard limit is below {soft}")
            continue
        label = f"RLIMIT_NOFILE {soft}, --threads {threads}"
        rc, out, err = limited(soft, "--port", "0", "--threads", threads)
        lines = m0_lines(err)
        F.check(rc == 78, f"{label}: exit 78, not a crash (rc {rc}):\n{err[-600:]}")
        F.check(len(lines) == 1 and f"RLIMIT_NOFILE is {soft}" in lines[0] and "needs about" in lines[0]
                and "ulimit -n" in lines[0] and "listening" not in err,
                f"{label}: one line naming the limit, the need and the fix, nothing served:\n{err[-600:]}")
        rc, out, err = limited(soft, "--doctor", "--threads", threads)
        d = checks(out).get("descriptors", {})
        F.check(rc == 78 and d.get("ok") is False and f"RLIMIT_NOFILE is {soft}" in d.get("detail", "")
                and "ulimit -n" in d.get("fix", ""), f"{label}: the doctor's descriptors check refuses ({rc}, {d})")
    # what fits is served
    rc, out, err = limited(64, "--doctor", "--threads", "2")
    F.check(rc == 0 and checks(out).get("descriptors", {}).get("ok"), f"64, --threads 2: the doctor says ok ({rc})")


def worker_cannot_start():
    """A worker's loop out of descriptors at start: said, exit 1, never a
    signal. The check cannot see this (the limit changed after it ran)."""
    label = "a respawned worker under a lowered limit"
    # The window is long: a worker that fails its start takes up to its
    # drain's bound to exit, and deaths further apart than the window never
    # spend the budget (the supervisor would respawn for ever, rightly).
    s = Server("ramp", "--port", "0", "--workers", "2", "--respawn-budget", "1", "--respawn-window-ms", "600000",
               "--drain-timeout-ms", "1000")
    with s:
        kids = wait_for(lambda: [int(x) for x in open(f"/proc/{s.proc.pid}/task/{s.proc.pid}/children").read().split()]
                        if s.stderr().count(" serving (pid") == 2 else None, 10)
        if not kids or len(kids) != 2:
            F.check(False, f"{label}: two workers serving ({kids}):\n{s.stderr()}")
            return
        m = re.search(r"worker 1 serving \(pid (\d+)\)", s.stderr())
        w1 = int(m.group(1)) if m else kids[1]
        opened = len(os.listdir(f"/proc/{w1}/fd"))
        # About two thirds of what a worker opens: its setup fits, its loop
        # (or what the coordinator opens for it) does not.
        soft = opened * 2 // 3
        resource.prlimit(s.proc.pid, resource.RLIMIT_NOFILE, (soft, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        os.kill(w1, signal.SIGKILL)
        try:
            rc = s.wait(timeout=30)
        except AssertionError as e:
            F.check(False, f"{label}: the supervisor exits: {e}")
            return
        err = s.stderr()
        F.check(rc == 1, f"{label}: the budget is spent, exit 1 (rc {rc}):\n{err}")
        F.check(re.search(r"m0: worker 1 \(pid \d+\) exited 1\n", err) is not None and
                not re.search(r"worker 1 \(pid \d+\) died of signal (11|6|7)", err),
                f"{label}: the new worker exited 1, not by a signal:\n{err}")
        F.check(f"RLIMIT_NOFILE is {soft}" in err and "cannot" in err,
                f"{label}: its start says it ran out of descriptors, with the limit ({soft}):\n{err}")
        F.check("cannot start\n" not in err and not re.search(r"loop\.\d cannot start$", err, re.M),
                f"{label}: no start failure without its reason:\n{err}")


def counts():
    for args, check in ((["--threads", "99999"], "threads-count"),
                        (["--threads", "64", "--blocking-threads", "100"], "blocking-threads-count"),
                        (["--workers", "4096", "--blocking-threads", "4096"], "blocking-threads-count")):
        label = " ".join(args)
        t0 = time.monotonic()
        rc, out, err = run("host_check", "--port", "0", *args, timeout=30)
        took = time.monotonic() - t0
        F.check(rc == 78 and len(m0_lines(err)) == 1 and "listening" not in err,
                f"{label}: refused before anything starts, one line ({rc}, {m0_lines(err)})")
        F.check(took < 5, f"{label}: at once ({took:.2f} s)")
        rc, out, _ = run("host_check", "--doctor", *args, timeout=30)
        c = checks(out).get(check, {})
        F.check(rc == 78 and c.get("ok") is False, f"{label}: the doctor's {check} refuses ({rc}, {c})")


def needs_pool():
    label = "M0_NEEDS_POOL without a pool"
    env = {"M0_HOSTCHECK_NEEDS_POOL": "1"}
    rc, out, err = run("host_check", "--port", "0", env=env)
    lines = m0_lines(err)
    F.check(rc == 78 and len(lines) == 1 and "route GET /slow needs the pool" in lines[0]
            and "--blocking-threads 1 or more" in lines[0] and "listening" not in err,
            f"{label}: 78 and one line naming the route and the fix ({rc}, {lines})")
    rc, out, _ = run("host_check", "--doctor", env=env)
    c = checks(out).get("pool-routes", {})
    F.check(rc == 78 and c.get("ok") is False and "GET /slow" in c.get("detail", ""), f"{label}: the doctor ({rc}, {c})")
    label = "M0_NEEDS_POOL with --blocking-threads 1"
    rc, out, _ = run("host_check", "--doctor", "--blocking-threads", "1", env=env)
    F.check(rc == 0 and checks(out).get("pool-routes", {}).get("ok"), f"{label}: the doctor says ok ({rc})")
    with Server("host_check", "--port", "0", "--blocking-threads", "1",
                env=dict(env, M0_HOSTCHECK_SLOW_SAYS="1")) as s:
        c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        c.sendall(b"GET /slow?ms=10 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        buf = b""
        while True:
            d = c.recv(4096)
            if not d:
                break
            buf += d
        c.close()
        F.check(buf.startswith(b"HTTP/1.1 200") and b'{"ms":10}' in buf, f"{label}: /slow answered ({buf[:80]!r})")
        F.check("host_check: /slow 10 ms begins on loop 0 thread 0" in s.stderr(),
                f"{label}: on the pool thread:\n{s.stderr()}")
        F.check(s.stop() == 0, f"{label}: drains to exit 0")
    label = "M0_ON_LOOP | M0_NEEDS_POOL"
    rc, out, err = run("host_check", "--port", "0", "--blocking-threads", "1", env={"M0_HOSTCHECK_NEEDS_POOL": "loop"})
    lines = m0_lines(err)
    F.check(rc == 78 and len(lines) == 1 and "route GET /slow is flagged both M0_ON_LOOP and M0_NEEDS_POOL" in lines[0],
            f"{label}: 78, one line ({rc}, {lines})")


def unknown_variables():
    secret = "sekrit-4b1d-value"
    env = {"M0_THREAD": "2", "M0_API_KEY": secret, "M0_TLS_CERT": "/nonexistent", "M0_HOSTCHECK_PERIOD_MS": "100"}
    with Server("host_check", "--port", "0", env=env) as s:
        err = s.stderr()
        F.check("m0: warning: M0_THREAD is not a variable m0 reads; ignored (did you mean M0_THREADS?)\n" in err,
                f"M0_THREAD=2: a warning line names it:\n{err}")
        F.check("m0: warning: M0_API_KEY is not a variable m0 reads; ignored\n" in err,
                f"M0_API_KEY: named:\n{err}")
        F.check(secret not in err and "M0_TLS_CERT" not in err and "M0_HOSTCHECK" not in err,
                f"no value, nor the host's or the application's own variables, is named:\n{err}")
        F.check("(single, 1 loop," in err, f"M0_THREAD changes nothing: one loop:\n{err}")
        F.check(s.stop() == 0, "then drains to exit 0")
    rc, out, err = run("host_check", "--doctor", env=env)
    try:
        d = json.loads(out.strip().splitlines()[-1])
    except (IndexError, ValueError):
        d = {}
    names = [u.get("name") for u in d.get("unknown_variables", [])]
    F.check(rc == 0 and sorted(names) == ["M0_API_KEY", "M0_THREAD"],
            f"the doctor lists the unknown variables ({rc}, {names})")
    envc = checks(out).get("environment", {})
    F.check(envc.get("ok") and "M0_THREAD (did you mean M0_THREADS?)" in envc.get("detail", ""),
            f"the doctor's environment check names them ({envc})")
    F.check(secret not in out and secret not in err, "the doctor prints no value")
    # a refusal stays its one line
    rc, out, err = run("host_check", "--port", "0", "--threads", "0", env=env)
    F.check(rc == 78 and len(m0_lines(err)) == 1, f"a refusal is still one line ({rc}, {m0_lines(err)})")


descriptors()
worker_cannot_start()
counts()
needs_pool()
unknown_variables()
F.done()
