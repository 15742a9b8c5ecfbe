"""Graceful drain on SIGTERM / SIGINT (docs/behaviour.md, Drain;
docs/reference.md, Exit codes), on host_check.

Proves: a request in flight when the signal lands (/slow?ms=1500 spinning in
the handler) is answered whole (200, exact body {"ms":1500}) and the process
then exits 0 within 5 s; a keep-alive connection idle at the signal is closed
by the server, and an idle-only server drains at once (it does not wait for
the 60 s keep-alive timeout); a connection opened after the signal gets no
answer and is closed within a bound (never left hanging); SIGINT behaves the
same as SIGTERM; with --drain-timeout-ms 300 and /slow?ms=3000 in flight the
process exits 1 within ~2 s (not before its bound) and stderr names the loop
that did not finish; 50 back-to-back idle start/stop cycles (SIGTERM and
SIGINT) every one exit 0 within 1.5 s (no crash, no stall at teardown); a
stream requested after the signal on a connection accepted before it gets
its head and at once m0.closing with a retry hint; an SSE client that reads
nothing (its queue full, a frame dropped for it) does not hold the drain to
its bound: exit 0.
"""
import os
import re
import signal
import socket
import subprocess
import time

import harness
from harness import Failures, Server, private_dir, wait_for
from rawhttp import Conn, request

F = Failures()


def in_flight(sig):
    name = signal.Signals(sig).name
    with Server("host_check", "--port", "0", env={"M0_HOSTCHECK_SLOW_SAYS": "1"}) as s:
        idle = Conn(s.port)
        idle.send(request("GET", "/health"))
        F.check(idle.try_response()[3] == b'{"status":"ok"}', f"{name}: idle connection served once first")
        busy = Conn(s.port, timeout=8)
        busy.send(request("GET", "/slow?ms=1500"))
        spinning = wait_for(lambda: "/slow 1500 ms begins" in s.stderr(), 10)  # the handler is spinning now
        F.check(spinning, f"{name}: /slow said it began\n{s.stderr()}")
        t0 = time.monotonic()
        s.signal(sig)
        # The host took the signal (it says so before it tells the loop to drain).
        F.check(wait_for(lambda: "host draining" in s.stderr(), 10), f"{name}: the host says it drains\n{s.stderr()}")
        try:
            late = Conn(s.port, timeout=5)
            late.send(request("GET", "/health"))
        except OSError:
            late = None  # refused outright: the listener is gone, which is fine
        st, _, h, body, line = busy.try_response(timeout=6)
        answered = time.monotonic() - t0
        F.check(st == 200 and body == b'{"ms":1500}', f"{name}: in-flight /slow answered whole ({line!r} {body!r})")
        F.check(h.get("content-length") == str(len(body)), f"{name}: in-flight answer's Content-Length matches")
        F.check(answered >= 0.9, f"{name}: the in-flight request ran to its end ({answered:.2f}s after the signal)")
        F.check(busy.closed_within(3), f"{name}: connection closed after the in-flight answer")
        F.check(idle.closed_within(3), f"{name}: idle keep-alive connection closed by the server")
        if late is not None:
            st, *_, what = late.try_response(timeout=4)
            F.check(st is None, f"{name}: a connection opened after the signal is not served ({what!r})")
            F.check(late.closed_within(4), f"{name}: ... and is closed, not left hanging")
        rc = s.wait(5)
        took = time.monotonic() - t0
        F.check(rc == 0, f"{name}: exit 0 after the drain (got {rc})\n{s.stderr()}")
        F.check(took < 5, f"{name}: exited within 5 s of the signal ({took:.2f}s)")
        for c in (idle, busy) + ((late,) if late else ()):
            c.close()


def idle_only():
    with Server("host_check", "--port", "0") as s:
        conns = [Conn(s.port) for _ in range(3)]
        for c in conns:
            c.send(request("GET", "/health"))
            c.try_response()
        t0 = time.monotonic()
        s.signal(signal.SIGTERM)
        closed = all(c.closed_within(3) for c in conns)
        rc = s.wait(5)
        took = time.monotonic() - t0
        F.check(closed, "3 idle keep-alive connections all closed at SIGTERM")
        F.check(rc == 0 and took < 1.5, f"idle-only server drains at once: exit {rc} after {took:.2f}s")
        for c in conns:
            c.close()


def stream_begun_in_drain():
    """A connection accepted before the signal, its request sent after it (the
    fresh connection's grace): a stream it asks for is begun and at once
    given its m0.closing with the retry hint, like the streams open when the
    drain began (before: a head, then EOF)."""
    with Server("host_check", "--port", "0", "--metrics-path", "/metrics") as s:
        fresh = Conn(s.port)
        # Accepted (counted open) but nothing read: a probe on another
        # connection sees two open.
        def open_now():
            with Conn(s.port) as probe:
                probe.send(request("GET", "/metrics"))
                body = probe.try_response()[3].decode()
            m = re.search(r"^m0_open_connections\{loop=\"0\"\} (\d+)$", body, re.M)
            return m and int(m.group(1)) >= 2
        F.check(wait_for(open_now, 5), "stream begun in the drain: the fresh connection is open on the loop")
        s.signal(signal.SIGTERM)
        F.check(wait_for(lambda: "draining" in s.stderr(), 5), "stream begun in the drain: the drain began")
        fresh.send(request("GET", "/events"))
        data = b""
        try:
            while True:
                d = fresh.sock.recv(65536)
                if not d:
                    break
                data += d
        except OSError as e:
            data += f"<{e!r}>".encode()
        F.check(data.startswith(b"HTTP/1.1 200") and b"event: m0.closing" in data and b"retry: " in data,
                f"stream begun in the drain: a head, then m0.closing with retry:, then the close ({data[-300:]!r})")
        F.check(s.wait(5) == 0, "stream begun in the drain: exit 0")
        fresh.close()


def stream_not_read():
    """An SSE client that reads nothing, its socket and its stream's queue
    full (frames dropped for it): its goodbye cannot be written, and the
    drain closes it rather than wait for it to its bound (exit 1)."""
    rd = private_dir("rd-")
    with Server("host_check", "--port", "0", "--run-dir", rd, "--metrics-path", "/metrics") as s:
        deaf = socket.socket()
        deaf.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        deaf.connect(("127.0.0.1", s.port))
        deaf.sendall(request("GET", "/events"))

        def dropped():  # publishes one 60,000-byte frame; true once the deaf stream lost one
            subprocess.run([os.path.join(harness.BIN, "m0pub"), "--run-dir", rd, "--channel", "beats", "x" * 60000],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
            with Conn(s.port) as probe:
                probe.send(request("GET", "/metrics"))
                body = probe.try_response()[3].decode()
            return any(int(v) > 0 for v in re.findall(r"^m0_stream_frames_dropped_total\S* (\d+)$", body, re.M))
        full = wait_for(dropped, 30, step=0)
        F.check(full, "stream not read: frames published until the deaf stream's queue is full (one dropped)")
        s.signal(signal.SIGTERM)
        rc = s.wait(10)
        F.check(rc == 0, f"stream not read: its goodbye cannot be written, the drain closes it: exit 0, not the "
                         f"bound's 1 ({rc})\n{s.stderr()[-600:]}")
        deaf.close()


def drain_bound():
    with Server("host_check", "--port", "0", "--drain-timeout-ms", "300", env={"M0_HOSTCHECK_SLOW_SAYS": "1"}) as s:
        busy = Conn(s.port, timeout=8)
        busy.send(request("GET", "/slow?ms=3000"))
        F.check(wait_for(lambda: "/slow 3000 ms begins" in s.stderr(), 10), f"drain bound: /slow said it began\n{s.stderr()}")
        t0 = time.monotonic()
        s.signal(signal.SIGTERM)
        rc = s.wait(5)
        took = time.monotonic() - t0
        err = s.stderr()
        F.check(rc == 1, f"drain past --drain-timeout-ms 300 -> exit 1 (got {rc})\n{err}")
        F.check(0.25 <= took <= 2.0, f"exited at the 300 ms bound, not at the handler's end ({took:.2f}s)")
        stuck = [l for l in err.splitlines() if re.search(r"\bloop[ .#]?0\b", l) and re.search(r"did not|not finish|still|stuck", l)]
        F.check(stuck, f"stderr names loop 0 as the one that did not finish its drain:\n{err}")
        F.check("300" in "".join(stuck), f"... and says the bound it missed (300 ms): {stuck}")
        busy.close()


def repeated_stops(n=50):
    """An idle server stopped n times: every stop is exit 0 and prompt. Catches
    teardown races that a single run would miss."""
    bad = []
    for i in range(n):
        sig = signal.SIGINT if i % 2 else signal.SIGTERM
        with Server("host_check", "--port", "0") as s:
            t0 = time.monotonic()
            s.signal(sig)
            rc = s.wait(6)
            took = time.monotonic() - t0
            if rc != 0 or took > 1.5:
                tail = " | ".join(s.stderr().strip().splitlines()[-2:])
                bad.append(f"run {i + 1} {signal.Signals(sig).name}: exit {rc} after {took:.2f}s [{tail}]")
    F.check(not bad, f"{n} idle stops all exit 0 within 1.5 s; {len(bad)} did not:\n  " + "\n  ".join(bad))


in_flight(signal.SIGTERM)
in_flight(signal.SIGINT)
idle_only()
stream_begun_in_drain()
stream_not_read()
drain_bound()
repeated_stops()
F.done()
