"""The handler pool (docs/behaviour.md, The pool, Drain; docs/apps.md, host_check).

Proves:
- Placement: under `--blocking-threads 2`, while two /slow?ms=4000 spin on
  both pool threads (each said it began), 24 /health (an on-loop route) on a
  third connection are all answered before either /slow answer arrives: slow
  views run behind the loop, not on it. Without `--blocking-threads` the
  first /health is answered only after the /slow's answer (the arm proving
  the check can fail: there the view spins on the loop itself). An order, not
  a latency: it holds however loaded the machine is.
- Order: five requests pipelined in ONE send on one connection through the
  pool (/slow?ms=50, /instance, /slow?ms=10, /health, /instance) come back as
  five responses in request order, each recognisably the answer to its own
  request, and the connection is still usable.
- Yielding: a pool thread that has run a slow view (/slow?ms=30, ~30 ms of
  CPU) is at nice 19 and says so on stderr, one line each, while the loop's
  thread stays at nice 0; 300 trivial views (/instance) through the same pool
  before that, with a 2 ms view (/slow?ms=2) every 50th, leave every thread at
  nice 0 and say nothing (actors/pool.h: the CPU beyond 1 ms per view is a
  debt that faster views pay back; a thread yields at 4 ms of it).
- Drain: a SIGTERM while /slow?ms=3000 runs on a pool thread: the response is
  written whole (200, {"ms":3000}, full Content-Length), the listener is
  closed meanwhile, and the process exits 0.
"""
import json
import os
import select
import socket
import threading
import time

from harness import Failures, Server, listens, wait_for
from rawhttp import Closed, Conn, request

F = Failures()


SLOW_MS = 4000  # long enough that 24 /health round trips fit inside it on any machine that serves at all


def readable(sock):
    """True when sock has bytes (or an EOF) waiting: an answer has arrived."""
    return bool(select.select([sock], [], [], 0)[0])


def health_during_slow(s, label, nslow):
    """nslow clients each send one /slow?ms=SLOW_MS; once every one of them
    said it began (M0_HOSTCHECK_SLOW_SAYS=1), a third connection asks /health
    24 times, one after the other. Returns, for each /health answer, whether
    some /slow answer had already arrived when it was read; then reads the
    /slow answers."""
    before = s.stderr().count(f"/slow {SLOW_MS} ms begins")
    slow = [Conn(s.port, timeout=SLOW_MS / 1000 + 20) for _ in range(nslow)]
    try:
        for c in slow:
            c.send(request("GET", f"/slow?ms={SLOW_MS}"))
        F.check(wait_for(lambda: s.stderr().count(f"/slow {SLOW_MS} ms begins") - before >= nslow, 20),
                f"{label}: {nslow} /slow views began before the first /health\n{s.stderr()}")
        after_slow = []
        with Conn(s.port, timeout=SLOW_MS / 1000 + 20) as h:
            for n in range(24):
                h.send(request("GET", "/health"))
                st, _, _, body, line = h.read_response()
                F.check(st == 200 and body == b'{"status":"ok"}', f"{label}: /health {n} answered ({line!r} {body!r})")
                after_slow.append(any(readable(c.sock) for c in slow))
        for c in slow:
            st, _, _, body, line = c.read_response()
            F.check(st == 200 and json.loads(body) == {"ms": SLOW_MS}, f"{label}: /slow answered ({line!r} {body!r})")
        return after_slow
    finally:
        for c in slow:
            c.close()


def placement():
    # An ordering, not a latency: with a pool, the loop answers /health while
    # both pool threads are still inside their /slow; without one, the loop
    # itself spins in /slow, so the first /health is read only after /slow's
    # answer was written (one loop writes that answer before it reads again).
    with Server("host_check", "--blocking-threads", "2", "--port", "0", env={"M0_HOSTCHECK_SLOW_SAYS": "1"}) as s:
        after = health_during_slow(s, "--blocking-threads 2", 2)
        F.check(len(after) == 24 and not any(after),
                f"--blocking-threads 2: all 24 /health answered while both /slow?ms={SLOW_MS} still ran on the "
                f"pool (answered after a /slow: {after})")
        F.check(s.stop() == 0, "--blocking-threads 2: exit 0 on SIGTERM")
    with Server("host_check", "--port", "0", env={"M0_HOSTCHECK_SLOW_SAYS": "1"}) as s:
        after = health_during_slow(s, "no pool", 1)
        F.check(after and after[0],
                f"no pool: the first /health is answered only after the /slow on the loop (the control arm: {after})")
        F.check(s.stop() == 0, "no pool: exit 0 on SIGTERM")


def pipelined_order():
    label = "pipeline through the pool"
    with Server("host_check", "--blocking-threads", "2", "--port", "0") as s:
        with Conn(s.port, timeout=10) as c:
            c.send(request("GET", "/slow?ms=50") + request("GET", "/instance") + request("GET", "/slow?ms=10")
                   + request("GET", "/health") + request("GET", "/instance"))

            def is_instance(st, b):
                d = json.loads(b)
                return st == 200 and set(d) == {"worker", "thread", "pid", "hits"} and d["thread"] in (0, 1)

            expect = [
                ("/slow?ms=50", lambda st, b: st == 200 and json.loads(b) == {"ms": 50}),
                ("/instance", is_instance),
                ("/slow?ms=10", lambda st, b: st == 200 and json.loads(b) == {"ms": 10}),
                ("/health", lambda st, b: st == 200 and b == b'{"status":"ok"}'),
                ("/instance", is_instance),
            ]
            got = []
            for name, ok in expect:
                try:
                    st, _, _, body, line = c.read_response(timeout=10)
                except (Closed, TimeoutError) as e:
                    F.check(False, f"{label}: response {len(got) + 1} ({name}) missing: {e}")
                    break
                got.append(body)
                F.check(ok(st, body), f"{label}: response {len(got)} answers {name} ({line!r} {body!r})")
            F.check(len(got) == 5, f"{label}: 5 responses for 5 requests (got {len(got)})")
            if len(got) == 5:
                h1, h2 = json.loads(got[1]), json.loads(got[4])
                if (h1["worker"], h1["thread"]) == (h2["worker"], h2["thread"]):
                    F.check(h2["hits"] == h1["hits"] + 1, f"{label}: same handler, second /instance counts one more ({h1} {h2})")
            F.check(c.buf == b"", f"{label}: nothing after the 5th response ({c.buf[:80]!r})")
            c.send(request("GET", "/health"))
            F.check(c.read_response(timeout=10)[3] == b'{"status":"ok"}', f"{label}: connection usable afterwards")
        F.check(s.stop() == 0, f"{label}: exit 0 on SIGTERM")


def nices(pid):
    """{thread name: [nice, ...]} of pid's threads (/proc/pid/task/*/stat)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                st = f.read()
        except FileNotFoundError:
            continue
        comm = st[st.index("(") + 1:st.rindex(")")]
        out.setdefault(comm, []).append(int(st[st.rindex(")") + 2:].split()[16]))  # field 19: nice
    return out


def yielding():
    label = "pool threads yield after slow views"
    # The host inherits the suite's nice (`nice -n 5 ./dev coverage`): the
    # threads that do not yield stay at it, the two that do go to 19.
    base = os.getpriority(os.PRIO_PROCESS, 0)
    if base >= 19:
        F.check(False, f"{label}: cannot be judged when the suite itself runs at nice {base}")
        return
    with Server("host_check", "--blocking-threads", "2", "--port", "0") as s:
        pid = s.proc.pid
        with Conn(s.port, timeout=10) as c:
            for i in range(300):
                # A 2 ms view now and then (at most 1 ms of CPU beyond the line,
                # however loaded the machine: it spins on the clock) is a debt
                # the trivial views after it pay back: it moves nothing.
                path = "/slow?ms=2" if i % 50 == 25 else "/instance"
                c.send(request("GET", path))
                st, _, _, _, line = c.read_response(timeout=10)
                if st != 200:
                    F.check(False, f"{label}: {path} answered {line!r}")
                    break
        before = nices(pid)
        F.check(all(n == base for ns in before.values() for n in ns),
                f"{label}: after 300 trivial views (and six 2 ms ones) every thread is at nice {base} ({before})")
        F.check("nice 19" not in s.stderr(), f"{label}: nothing said after trivial views:\n{s.stderr()}")
        errors = []

        def slow():
            try:
                with Conn(s.port, timeout=10) as c:
                    for _ in range(3):
                        c.send(request("GET", "/slow?ms=30"))
                        if c.read_response(timeout=10)[0] != 200:
                            errors.append("/slow not 200")
            except Exception as e:
                errors.append(repr(e))

        # Two clients at once, again while a pool thread has not said it yet:
        # on a loaded machine one thread can take every slow view while the
        # other waits for a CPU (the premise is both running slow views, not
        # how soon). Bounded: 20 rounds.
        alive = False
        for _ in range(20):
            ts = [threading.Thread(target=slow, daemon=True) for _ in range(2)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(timeout=15)
            alive = alive or any(t.is_alive() for t in ts)
            if errors or alive or wait_for(lambda: s.stderr().count("it now runs at nice 19") >= 2, 2):
                break
        F.check(not errors and not alive, f"{label}: the slow views answered ({errors})")
        said = s.stderr().count("it now runs at nice 19")
        after = nices(pid)
        niced = [n for ns in after.values() for n in ns if n == 19]
        F.check(len(niced) == 2 and said == 2,
                f"{label}: both pool threads at nice 19 and said so once each ({after}):\n{s.stderr()}")
        F.check(all(n in (base, 19) for ns in after.values() for n in ns),
                f"{label}: every other thread (the loop's among them) still at nice {base} ({after})")
        with Conn(s.port, timeout=10) as c:
            c.send(request("GET", "/health"))
            F.check(c.read_response(timeout=10)[3] == b'{"status":"ok"}', f"{label}: the loop still answers")
        F.check(s.stop() == 0, f"{label}: exit 0 on SIGTERM")


def drain_in_flight():
    # 3 s of view: the drain (bound 5 s) outlasts the listener check by seconds
    # even on a loaded machine (1 s did not, once, with two other suites running).
    label = "SIGTERM during a pool-thread /slow?ms=3000"
    with Server("host_check", "--blocking-threads", "1", "--port", "0", env={"M0_HOSTCHECK_SLOW_SAYS": "1"}) as s:
        with Conn(s.port, timeout=10) as c:
            t0 = time.monotonic()  # before the send: the view's 3000 ms all come after it
            c.send(request("GET", "/slow?ms=3000"))
            F.check(wait_for(lambda: "/slow 3000 ms begins on loop 0 thread 0" in s.stderr(), 10),
                    f"{label}: the view began on the pool thread\n{s.stderr()}")  # it is spinning there now
            s.signal()
            # The kernel's word that the listener is gone (bounded; the drain outlasts it by the view's rest).
            wait_for(lambda: not listens(s.proc.pid, s.port), 5)
            try:
                socket.create_connection(("127.0.0.1", s.port), timeout=2).close()
                refused = False
            except OSError:
                refused = True
            draining = s.proc.poll() is None  # the host is still up, the view still spinning
            F.check(refused and draining, f"{label}: the listener is closed during the drain (refused {refused}, "
                                          f"host still draining {draining})")
            try:
                st, _, h, body, line = c.read_response(timeout=10)
                took = time.monotonic() - t0
                F.check(st == 200 and body == b'{"ms":3000}' and int(h.get("content-length", -1)) == len(body),
                        f"{label}: answered whole ({line!r} {h} {body!r})")
                F.check(took >= 2.95, f"{label}: after the full 3000 ms ({took:.2f}s)")
            except (Closed, TimeoutError) as e:
                F.check(False, f"{label}: the in-flight request was answered whole ({e}):\n{s.stderr()}")
        rc = s.wait(timeout=10)
        F.check(rc == 0, f"{label}: exit 0 (got {rc}):\n{s.stderr()}")


placement()
pipelined_order()
yielding()
drain_in_flight()
F.done()
