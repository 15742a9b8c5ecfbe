"""Idle keep-alive connections at a reload (docs/behaviour.md, Reload): the
old generation's drain closes them at once, as nginx's old workers do, so a
client's next request (a browser's retry, an EventSource's reconnect) opens
a connection to whichever generation listens instead of landing on the one
that drains and being closed again; a request that already waits on such a
connection is answered, with Connection: close, not dropped (http/conn.c,
m0__http_drain).

host_check with --drain-timeout-ms 24000 and --header-timeout-ms 24000, so
the grace a connection accepted just before the drain has to send its
request (a quarter of the bound: 6 s) is longer than the waits here.

Proves:
- idle, closed at once (single, and --workers 2): a keep-alive connection
  that was answered by generation 1 and then sent nothing for 2.5 s
  (one answered within the last second may have its next request on the
  way, and is kept for it) is closed by the server within 4 s of
  `generation 2 serving` (kept for the grace, it would stay open 6 s),
  with nothing sent on it; a new connection is answered (200);
- a request waiting is answered (single): generation 1's one loop spins in
  GET /slow?ms=3000 while SIGHUP starts generation 2 and generation 1's
  drain begins (`host draining`, its loop's STOP queued behind the spin);
  then a GET /pid on an idle keep-alive connection of generation 1 (idle
  for 2.5 s) is sent, so it waits in the kernel when the loop drains (if
  the spin ended first, or the loop read the request before its STOP and
  answered it as any other, the try is made again with a spin twice as
  long): it is answered 200 by
  generation 1 with Connection: close, then the connection closes; the
  /slow answer comes whole.
"""
import os
import re
import signal
import time

from harness import Failures, Prefork, Server, alive, descendants, reap, wait_for
from rawhttp import Conn, request

F = Failures()
SEEN = set()
ARGS = ["--port", "0", "--drain-timeout-ms", "24000", "--header-timeout-ms", "24000"]


def serving_pid(s, gen):
    """The pid the log names for generation gen serving, or None."""
    m = re.search(rf"generation {gen} serving \(pid (\d+)\)", s.stderr())
    return int(m.group(1)) if m else None


def get_pid(c, label):
    c.send(request("GET", "/pid"))
    st, _, hdrs, body, why = c.try_response(timeout=10)
    F.check(st == 200, f"{label}: GET /pid answered 200 ({st} {why})")
    return st, hdrs, body


def stop_all(s):
    """Stops the host (SIGTERM to the pid it was started as, which keeps
    serving across reloads), and kills by pid whatever of it is left: what
    is checked here is the drain of generation 1, not the stop."""
    SEEN.update(descendants(s.proc.pid))
    g2 = serving_pid(s, 2)
    if g2:
        SEEN.add(g2)
        SEEN.update(descendants(g2))
    if s.proc.poll() is None:
        s.signal(signal.SIGTERM)
        if not wait_for(lambda: s.proc.poll() is not None, 30):
            print(f"note: the host did not exit within 30 s of SIGTERM; killed\n{s.stderr()}", flush=True)
            s.kill()
    reap(SEEN)


def idle_closed(label, args, cls):
    s = cls("host_check", *ARGS, *args)
    s.start()
    try:
        SEEN.update(descendants(s.proc.pid))
        c = Conn(s.port, timeout=10)
        get_pid(c, f"{label}: generation 1")
        time.sleep(2.5)  # idle well past the second in which a client may be sending its next request
        s.signal(signal.SIGHUP)
        F.check(wait_for(lambda: serving_pid(s, 2), 20), f"{label}: generation 2 serves\n{s.stderr()}")
        F.check(c.closed_within(4) and not c.buf,
                f"{label}: the idle keep-alive connection is closed by generation 1's drain at once, nothing sent "
                f"({c.buf[:80]!r})\n{s.stderr()}")
        c.close()
        with Conn(s.port, timeout=10) as n:
            get_pid(n, f"{label}: a new connection")
    finally:
        stop_all(s)


def request_waiting(ms):
    """One try; returns False when the premise did not hold: the spin ended
    before the request was sent (a slow start of generation 2 under load),
    or the STOP reached the loop after the request, so the loop read it
    before its STOP."""
    label = "single, a request waiting"
    s = Server("host_check", *ARGS, env={"M0_HOSTCHECK_SLOW_SAYS": "1"})
    s.start()
    try:
        b = Conn(s.port, timeout=15)
        _, _, body = get_pid(b, f"{label}: generation 1")
        time.sleep(2.5)  # not just answered: only the bytes waiting keep it
        a = Conn(s.port, timeout=15)
        a.send(request("GET", f"/slow?ms={ms}"))
        F.check(wait_for(lambda: f"/slow {ms} ms begins" in s.stderr(), 10), f"{label}: /slow began\n{s.stderr()}")
        s.signal(signal.SIGHUP)
        F.check(wait_for(lambda: serving_pid(s, 2) and "m0: host draining" in s.stderr(), 20),
                f"{label}: generation 2 serves and generation 1 drains\n{s.stderr()}")
        ended = f"/slow {ms} ms ends" in s.stderr()
        got = b.send(request("GET", "/pid")) or b.try_response(timeout=15)
        if ended:
            return False
        st, _, hdrs, body2, why = got
        if st == 200 and body2 == body and hdrs.get("connection", "").lower() != "close":
            # Answered as a plain keep-alive request: the loop read it before
            # its STOP (which the coordinator sends after saying "draining"),
            # so this try proved nothing of the drain: answered, not lost.
            return False
        F.check(st == 200 and body2 == body and hdrs.get("connection", "").lower() == "close",
                f"{label}: the request waiting on the idle connection is answered by generation 1 with "
                f"Connection: close ({st} {hdrs.get('connection')} {body2!r} vs {body!r}; {why})\n{s.stderr()}")
        F.check(b.closed_within(10), f"{label}: then the connection closes")
        st, _, _, sbody, why = a.try_response(timeout=15)
        F.check(st == 200 and f'"ms":{ms}'.encode() in sbody, f"{label}: the /slow answer came whole ({st} {why})")
        return True
    finally:
        stop_all(s)


try:
    idle_closed("single", [], Server)
    idle_closed("--workers 2", ["--workers", "2"], Prefork)
    # the spin must outlast generation 2's start; on a loaded machine it may not
    F.check(any(request_waiting(ms) for ms in (3000, 6000, 12000)),
            "single, a request waiting: the request waited behind the loop's STOP in one of three tries")
finally:
    reap(SEEN)
F.done()
