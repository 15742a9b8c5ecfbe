"""The drain's one bound, `--drain-timeout-ms B`, missed by each kind of actor
(docs/behaviour.md, the drain and the exit codes): whoever has not finished
when the bound passes is named on stderr and the process exits 1 without
waiting for it, while everyone else's answers are delivered.

A stuck request is GET /slow?ms=600000 (it spins in the view); an in-bound one
is GET /slow?ms=700, begun before the signal. M0_HOSTCHECK_SLOW_SAYS says on
stderr when each view begins, so the signal is sent once both are running.
Proves, each case exiting 1 within the bound plus MARGIN (0.9 s, measured
from the signal: the bound is the bound, under prefork too; the exit comes
~10-30 ms after it here, and a second past it, the supervisor's old wait for
a stopped worker or a producer inside its step, fails) and the in-bound
request answered whole (200, {"ms":700}):
- a loop (--threads 2, B 2000): the loop inside the endless view is named
  (`loop.A did not finish its drain within 2000 ms`); the other loop drains
  (`loop.B drained`) and is not named; a second signal (SIGINT) once the
  drain began says `already draining; the bound is 2000 ms` and does not
  shorten it (the in-bound answer still comes);
- a pool thread (--blocking-threads 2, B 2000): the thread inside the endless
  view is named (`pool.0.X did not stop within 2000 ms (it is inside a
  view)`), the thread that answered is not;
- a worker whose loop is stuck (--workers 2, B 2000): it says its loop did not
  finish, exits 1, and the supervisor names it (`worker A (pid P) exited 1
  from its drain`); the other worker exits cleanly; no worker outlives it;
- a worker that the test kills (SIGKILL) while the drain waits for its stuck
  loop: `worker A (pid P) died of signal 9 during the drain`, exit 1;
- a worker sent SIGTERM alone while the host serves, its loop stuck: it
  misses its own bound and exits 1, and the supervisor counts a death
  (`worker A (pid P) exited 1`) and respawns it, and the replacement serves;
- a worker that does not exit at all (SIGSTOP before the SIGTERM): the
  supervisor kills it once the bound has passed (`worker A (pid P) did not
  exit within the bound; killed`); the other worker's answer is delivered;
  no worker outlives it;
- the producer, inside a 600 s step (M0_HOSTCHECK_STEP_MS), under --threads 2
  and under --workers 2 (where it lives in the supervisor): `the producer did
  not stop within B ms (it is inside its step)`; no loop or worker named;
  and a producer whose step ends within the bound (1000 ms of a 4000 ms
  bound, --workers 2) is waited for: exit 0, nobody named; a producer whose
  step failed (M0_HOSTCHECK_PRODUCER_FAILS=step: `step failed ... the
  producer stops, serving goes on`) leaves serving alone and still stops at
  the drain: exit 0, nobody named;
- and within the bound: a connection accepted before the drain whose request
  is sent once the drain has begun (the listener provably closed) is answered,
  with Connection: close; one that never sends is closed by the server within
  the bound, and that drain exits 0.
"""
import os
import re
import signal
import socket
import time

import harness
from harness import Failures, Prefork, Server, alive, reap, wait_for
from hostpaths import conn_on, instance
from rawhttp import Closed, Conn, request

F = Failures()
SEEN = set()
# How far past the bound an exit may come, from the signal: the bound is
# what is under test, so this is a check of time, kept as wide as it can be
# and still tell the second the supervisor used to add (its sabotage adds
# exactly that): 0.9 s of slack for a loaded 2-CPU machine, ASan and TSan.
MARGIN = 0.9
# ThreadSanitizer sleeps a second in every process's exit (atexit_sleep_ms,
# default 1000): the whole second the supervisor allows a worker past the bound
# for its own teardown. The hosts here run without that sleep, so a worker that
# exits 1 on its own is not mistaken for one that does not exit.
TSAN = ":".join(o for o in (os.environ.get("TSAN_OPTIONS", ""), "atexit_sleep_ms=0") if o)
SAYS = {"M0_HOSTCHECK_SLOW_SAYS": "1", "TSAN_OPTIONS": TSAN}


def begin(s, conn, ms, where, label):
    """Sends /slow?ms=ms on conn and waits until the view says it began on
    `where` (`loop W thread T`)."""
    conn.send(request("GET", f"/slow?ms={ms}"))
    ok = wait_for(lambda: f"host_check: /slow {ms} ms begins on {where}" in s.stderr(), 15)
    F.check(ok, f"{label}: /slow?ms={ms} began on {where}:\n{s.stderr()}")
    return ok


def answered(conn, label):
    try:
        st, _, h, body, line = conn.read_response(timeout=15)
        F.check(st == 200 and body == b'{"ms":700}' and h.get("content-length") == str(len(body)),
                f"{label}: the in-bound request is answered whole ({line!r} {body!r})")
    except (Closed, TimeoutError, OSError) as e:
        F.check(False, f"{label}: the in-bound request is answered ({type(e).__name__}: {e})")


def exits(s, bound_s, label, want=1, t0=None):
    """Waits for the exit; it must come within bound_s + MARGIN of t0 (the
    signal's time, monotonic)."""
    t0 = time.monotonic() if t0 is None else t0
    try:
        rc = s.wait(timeout=bound_s + 15)
    except AssertionError as e:
        F.check(False, f"{label}: {e}")
        return None
    took = time.monotonic() - t0
    F.check(rc == want, f"{label}: exit {want} (rc {rc}):\n{s.stderr()}")
    F.check(took < bound_s + MARGIN, f"{label}: exits within the bound plus {MARGIN} s of the signal "
                                     f"({took:.3f} s, bound {bound_s} s)")
    return rc


def loop_misses():
    label = "a loop (--threads 2)"
    with Server("host_check", "--threads", "2", "--port", "0", "--drain-timeout-ms", "2000", env=SAYS) as s:
        held = []
        stuck = Conn(s.port, timeout=15)
        a, _ = instance(stuck)
        got = conn_on(s.port, lambda w, _: w != a, held)
        F.check(got is not None, f"{label}: a connection on the other loop")
        if not got:
            return
        inb, b, _ = got
        if not (begin(s, stuck, 600000, f"loop {a} thread -1", label) and begin(s, inb, 700, f"loop {b} thread -1", label)):
            return
        t0 = time.monotonic()
        s.signal(signal.SIGTERM)
        F.check(wait_for(lambda: "m0: host draining" in s.stderr(), 10), f"{label}: the drain began")
        s.signal(signal.SIGINT)
        F.check(wait_for(lambda: "m0: already draining; the bound is 2000 ms" in s.stderr(), 10),
                f"{label}: a second signal: `already draining`:\n{s.stderr()}")
        answered(inb, label)
        exits(s, 2, label, t0=t0)
        err = s.stderr()
        F.check(f"m0: loop.{a} did not finish its drain within 2000 ms; exiting anyway" in err,
                f"{label}: loop.{a} is named:\n{err}")
        F.check(f"m0: loop.{b} drained:" in err and f"loop.{b} did not" not in err,
                f"{label}: loop.{b} drained and is not named:\n{err}")
        F.check(not stuck.try_response(timeout=5)[0], f"{label}: the stuck request has no answer")
        for c in held + [stuck, inb]:
            c.close()


def pool_misses():
    label = "a pool thread (--blocking-threads 2)"
    with Server("host_check", "--blocking-threads", "2", "--port", "0", "--drain-timeout-ms", "2000", env=SAYS) as s:
        stuck, inb = Conn(s.port, timeout=15), Conn(s.port, timeout=15)
        stuck.send(request("GET", "/slow?ms=600000"))
        m = wait_for(lambda: re.search(r"/slow 600000 ms begins on loop 0 thread (\d)", s.stderr()), 15)
        F.check(m is not None, f"{label}: the endless view began on a pool thread:\n{s.stderr()}")
        if not m:
            return
        x = int(m.group(1))
        y = 1 - x
        if not begin(s, inb, 700, f"loop 0 thread {y}", label):
            return
        t0 = time.monotonic()
        s.signal(signal.SIGTERM)
        answered(inb, label)
        exits(s, 2, label, t0=t0)
        err = s.stderr()
        F.check(f"m0: pool.0.{x} did not stop within 2000 ms (it is inside a view); exiting anyway" in err,
                f"{label}: pool.0.{x} is named, inside a view:\n{err}")
        F.check(f"pool.0.{y} did not" not in err, f"{label}: pool.0.{y}, which answered, is not named:\n{err}")
        stuck.close()
        inb.close()


def workers(s):
    sup = s.proc.pid
    kids = wait_for(lambda: harness.children(sup) if len(harness.children(sup)) == 2
                    and s.stderr().count(" serving (pid") == 2 else None, 10)
    SEEN.update(kids or ())
    return kids


def none_outlive(s, label):
    mine = set(SEEN) | {int(p) for p in re.findall(r"\(pid (\d+)\)", s.stderr())}
    mine.discard(s.proc.pid)
    F.check(wait_for(lambda: not [p for p in mine if alive(p)], 5),
            f"{label}: no worker outlives the supervisor ({[p for p in mine if alive(p)]})")


def worker_loop_misses():
    label = "a worker whose loop is stuck (--workers 2)"
    with Prefork("host_check", "--workers", "2", "--port", "0", "--drain-timeout-ms", "2000", env=SAYS) as s:
        if not workers(s):
            F.check(False, f"{label}: two workers serving:\n{s.stderr()}")
            return
        held = []
        stuck = Conn(s.port, timeout=15)
        a, pa = instance(stuck)
        got = conn_on(s.port, lambda w, _: w != a, held)
        F.check(got is not None, f"{label}: a connection on the other worker")
        if not got:
            return
        inb, b, pb = got
        if not (begin(s, stuck, 600000, f"loop {a} thread -1", label) and begin(s, inb, 700, f"loop {b} thread -1", label)):
            return
        t0 = time.monotonic()
        s.signal(signal.SIGTERM)
        answered(inb, label)
        exits(s, 2, label, t0=t0)
        err = s.stderr()
        F.check(f"m0: loop.{a} did not finish its drain within 2000 ms; exiting anyway" in err,
                f"{label}: worker {a} names its loop:\n{err}")
        F.check(f"m0: worker {a} (pid {pa}) exited 1 from its drain" in err,
                f"{label}: the supervisor names worker {a} (pid {pa}):\n{err}")
        F.check(f"m0: loop.{b} drained:" in err and f"worker {b} (pid" not in err.split("supervisor draining")[-1],
                f"{label}: worker {b} drained and is not named:\n{err}")
        none_outlive(s, label)
        for c in held + [stuck, inb]:
            c.close()


def stuck_pair(s, label):
    """Worker a stuck in the endless view, worker b running the in-bound
    one: (stuck conn, a, pid a, in-bound conn, b, pid b, held) or None."""
    held = []
    stuck = Conn(s.port, timeout=15)
    a, pa = instance(stuck)
    got = conn_on(s.port, lambda w, _: w != a, held)
    F.check(got is not None, f"{label}: a connection on the other worker")
    if not got:
        return None
    inb, b, pb = got
    if not (begin(s, stuck, 600000, f"loop {a} thread -1", label) and begin(s, inb, 700, f"loop {b} thread -1", label)):
        return None
    return stuck, a, pa, inb, b, pb, held


def worker_killed():
    label = "a worker killed during the drain (--workers 2)"
    with Prefork("host_check", "--workers", "2", "--port", "0", "--drain-timeout-ms", "4000", env=SAYS) as s:
        got = workers(s) and stuck_pair(s, label)
        if not got:
            F.check(False, f"{label}: two workers, one stuck, one busy:\n{s.stderr()}")
            return
        stuck, a, pa, inb, b, pb, held = got
        t0 = time.monotonic()
        s.signal(signal.SIGTERM)
        F.check(wait_for(lambda: s.stderr().count("m0: worker draining") == 2, 10), f"{label}: both workers drain")
        answered(inb, label)
        os_kill(pa, signal.SIGKILL)
        exits(s, 4, label, t0=t0)
        err = s.stderr()
        F.check(f"m0: worker {a} (pid {pa}) died of signal 9 during the drain" in err,
                f"{label}: the supervisor names worker {a} (pid {pa}):\n{err}")
        F.check("respawned" not in err, f"{label}: nothing respawned during the drain")
        none_outlive(s, label)
        for c in held + [stuck, inb]:
            c.close()


def worker_drained_alone():
    label = "a worker drained alone misses its bound (--workers 2)"
    with Prefork("host_check", "--workers", "2", "--port", "0", "--drain-timeout-ms", "1000", env=SAYS) as s:
        got = workers(s) and stuck_pair(s, label)
        if not got:
            F.check(False, f"{label}: two workers, one stuck, one busy:\n{s.stderr()}")
            return
        stuck, a, pa, inb, b, pb, held = got
        os_kill(pa, signal.SIGTERM)
        m = wait_for(lambda: re.search(rf"m0: worker {a} respawned \(pid (\d+)\)", s.stderr()), 1 + 10)
        err = s.stderr()
        F.check(f"m0: loop.{a} did not finish its drain within 1000 ms; exiting anyway" in err,
                f"{label}: worker {a} names its loop:\n{err}")
        F.check(f"m0: worker {a} (pid {pa}) exited 1\n" in err, f"{label}: the supervisor counts the exit 1 of "
                                                               f"worker {a} (pid {pa}) as a death:\n{err}")
        F.check(m is not None, f"{label}: and respawns it:\n{err}")
        answered(inb, label)
        if m:
            new = int(m.group(1))
            SEEN.add(new)
            got = conn_on(s.port, lambda w, p: p == new, held)
            F.check(got is not None, f"{label}: the replacement {new} serves")
        F.check(s.proc.poll() is None, f"{label}: the supervisor serves on")
        rc = s.stop(timeout=15)
        F.check(rc == 0, f"{label}: then SIGTERM drains the rest: exit 0 (rc {rc}):\n{s.stderr()[-800:]}")
        none_outlive(s, label)
        for c in held + [stuck, inb]:
            c.close()


def worker_stays():
    label = "a worker that does not exit (SIGSTOP, --workers 2)"
    with Prefork("host_check", "--workers", "2", "--port", "0", "--drain-timeout-ms", "2000", env=SAYS) as s:
        if not workers(s):
            F.check(False, f"{label}: two workers serving:\n{s.stderr()}")
            return
        held = []
        inb = Conn(s.port, timeout=15)
        b, pb = instance(inb)
        kids = harness.children(s.proc.pid)
        pa = next(iter(kids - {pb}))
        a = 1 - b
        if not begin(s, inb, 700, f"loop {b} thread -1", label):
            return
        try:
            os_kill(pa, signal.SIGSTOP)
            t0 = time.monotonic()
            s.signal(signal.SIGTERM)
            answered(inb, label)
            exits(s, 2, label, t0=t0)
        finally:
            os_kill(pa, signal.SIGCONT)
        err = s.stderr()
        F.check(f"m0: worker {a} (pid {pa}) did not exit within the bound; killed" in err,
                f"{label}: the supervisor kills and names worker {a} (pid {pa}):\n{err}")
        F.check(f"m0: loop.{b} drained:" in err, f"{label}: worker {b} drained:\n{err}")
        none_outlive(s, label)
        inb.close()


def os_kill(pid, sig):
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def producer_misses(mode):
    label = f"the producer ({' '.join(mode)})"
    cls = Prefork if "--workers" in mode else Server
    env = dict(SAYS, M0_HOSTCHECK_STEP_MS="600000", M0_HOSTCHECK_PERIOD_MS="100")
    with cls("host_check", *mode, "--port", "0", "--drain-timeout-ms", "1500", env=env) as s:
        if cls is Prefork and not workers(s):
            F.check(False, f"{label}: two workers serving:\n{s.stderr()}")
            return
        # GO reached the producer before `listening on`: it is in (or, taking
        # GO before any STOP, about to enter) its first step.
        inb = Conn(s.port, timeout=15)
        w, _ = instance(inb)
        if not begin(s, inb, 700, f"loop {w} thread -1", label):
            return
        t0 = time.monotonic()
        s.signal(signal.SIGTERM)
        answered(inb, label)
        exits(s, 1.5, label, t0=t0)
        err = s.stderr()
        F.check("m0: the producer did not stop within 1500 ms (it is inside its step); exiting anyway" in err,
                f"{label}: the producer is named, inside its step:\n{err}")
        F.check(not re.search(r"loop\.\d did not|worker \d \(pid \d+\) (did not|exited|died)", err),
                f"{label}: no loop or worker is named:\n{err}")
        F.check(err.count(" drained:") == 2, f"{label}: both loops drained:\n{err}")
        if cls is Prefork:
            none_outlive(s, label)
        inb.close()


def producer_within():
    label = "the producer within the bound (--workers 2)"
    env = dict(SAYS, M0_HOSTCHECK_STEP_MS="1000", M0_HOSTCHECK_PERIOD_MS="100")
    with Prefork("host_check", "--workers", "2", "--port", "0", "--drain-timeout-ms", "4000", env=env) as s:
        if not workers(s):
            F.check(False, f"{label}: two workers serving:\n{s.stderr()}")
            return
        t0 = time.monotonic()
        s.signal(signal.SIGTERM)
        exits(s, 4, label, want=0, t0=t0)
        err = s.stderr()
        F.check(not re.search(r"did not|exited \d|died", err), f"{label}: nobody named:\n{err}")
        none_outlive(s, label)


def producer_failed_step():
    label = "a producer whose step failed (--threads 2)"
    with Server("host_check", "--threads", "2", "--port", "0", "--drain-timeout-ms", "2000",
                env={"M0_HOSTCHECK_PRODUCER_FAILS": "step", "M0_HOSTCHECK_PERIOD_MS": "20"}) as s:
        F.check(wait_for(lambda: "m0: producer: step failed (returned -1); the producer stops, serving goes on"
                         in s.stderr(), 10), f"{label}: the failed step is named:\n{s.stderr()}")
        c = Conn(s.port, timeout=15)
        c.send(request("GET", "/health"))
        F.check(c.try_response()[0] == 200, f"{label}: serving goes on")
        c.close()
        t0 = time.monotonic()
        s.signal(signal.SIGTERM)
        exits(s, 2, label, want=0, t0=t0)
        F.check("did not" not in s.stderr(), f"{label}: nobody named:\n{s.stderr()}")


def fresh_connection():
    label = "a connection accepted before the drain"
    with Server("host_check", "--port", "0", "--drain-timeout-ms", "4000", "--metrics-path", "/metrics") as s:
        fresh, silent = Conn(s.port, timeout=15), Conn(s.port, timeout=15)
        probe = Conn(s.port, timeout=15)

        def accepted():  # probe, fresh and silent are the loop's
            probe.send(request("GET", "/metrics"))
            body = probe.read_response()[3]
            return re.search(rb'(?m)^m0_open_connections\{loop="0"\} 3$', body)

        F.check(wait_for(accepted, 10, step=0.05), f"{label}: the loop accepted both connections")
        probe.close()
        t0 = time.monotonic()
        s.signal(signal.SIGTERM)

        def refused():  # the loop closed its listener: its drain has run
            try:
                socket.create_connection(("127.0.0.1", s.port), timeout=1).close()
                return False
            except ConnectionRefusedError:
                return True
            except OSError:
                return False

        F.check(wait_for(refused, 10), f"{label}: the listener closes at the drain")
        fresh.send(request("GET", "/health"))
        st, _, h, body, line = fresh.try_response(timeout=10)
        F.check(st == 200 and body == b'{"status":"ok"}', f"{label}: its request, sent after the drain began, "
                                                           f"is answered ({line!r} {body!r})")
        F.check(h.get("connection", "").lower() == "close", f"{label}: ... with Connection: close ({h})")
        F.check(fresh.closed_within(5), f"{label}: ... and the connection closed")
        F.check(silent.closed_within(4 + 5), f"{label}: a connection that never sends is closed by the server")
        exits(s, 4, label, want=0, t0=t0)
        F.check(time.monotonic() - t0 < 4 + 5, f"{label}: within the bound")
        fresh.close()
        silent.close()


try:
    fresh_connection()
    loop_misses()
    pool_misses()
    worker_loop_misses()
    worker_stays()
    worker_killed()
    worker_drained_alone()
    producer_misses(["--threads", "2"])
    producer_misses(["--workers", "2"])
    producer_within()
    producer_failed_step()
finally:
    reap(SEEN)
F.done()
