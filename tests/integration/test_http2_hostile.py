#!/usr/bin/env python3
"""HTTP/2 under departing and hostile clients (docs/behaviour.md, HTTP/2), hand-made frames over a raw socket
(test_http2.py's):

1. the drain in two GOAWAYs (RFC 9113 6.8), at SIGTERM and at SIGHUP: first 2^31-1 and a PING; a request
   the client sends before it answers the PING (its HEADERS split across two writes) is still answered, and
   the last GOAWAY names it; then the close.
"""
import signal

from harness import Failures, Server, run_parts
from test_http2 import (ACK, DATA, END_HEADERS, END_STREAM, GOAWAY, HEADERS, PING, PREFACE, SETTINGS,
                        TMP, connect, frame, frames_until, goaway_code, goaway_last, has, health, request)

F = Failures()
LAST = (1 << 31) - 1


def answered(frames, sid):
    return any(t == DATA and s == sid and f & END_STREAM for t, f, s, _ in frames)


def drain_round_trip(sig):
    """sig arrives; the client reads the first GOAWAY and the PING, sends streams 3 (split across two writes)
    and 5, then the PING's ACK: both are answered and the last GOAWAY names 5."""
    with Server("host_check", "--port", "0", "--http2") as s:
        c = connect(s.port)
        c.sendall(PREFACE + frame(SETTINGS, 0, 0) + frame(HEADERS, END_STREAM | END_HEADERS, 1, request()))
        frames, eof = frames_until(c, lambda fr: answered(fr, 1))
        s.signal(sig)
        more, eof = frames_until(c, lambda fr: has(fr, GOAWAY) and has(fr, PING), ack=False)
        frames += more
        first = next((p for t, _, _, p in more if t == GOAWAY), b"\0" * 8)
        F.check(int.from_bytes(first[:4], "big") == LAST and goaway_code(more) == 0,
                f"{sig.name}: the first GOAWAY names 2^31-1, NO_ERROR: {first[:8].hex()}")
        ping = next((p for t, f, _, p in more if t == PING and not f & ACK), b"")
        three = frame(HEADERS, END_STREAM | END_HEADERS, 3, request())
        c.sendall(three[:7])  # a request on the wire when the GOAWAY arrived: in two pieces
        c.sendall(three[7:] + frame(HEADERS, END_STREAM | END_HEADERS, 5, request()))
        c.sendall(frame(PING, ACK, 0, ping))
        more, eof = frames_until(c, lambda fr: False)  # until the close
        c.close()
        frames += more
        F.check(answered(more, 3) and answered(more, 5), f"{sig.name}: the requests sent before the PING's ACK are "
                f"answered: {[(t, sid) for t, _, sid, _ in more][:12]}")
        F.check(goaway_last(more) == 5 and eof, f"{sig.name}: the last GOAWAY names stream 5, then the close: "
                f"{goaway_last(more)} eof {eof}")
        if sig == signal.SIGHUP:
            F.check(health(s.port), "SIGHUP: /health answers after the reload")
        F.check(s.stop() == 0, f"{sig.name}: exit 0\n{s.stderr()[-1500:]}")


def part_drain():
    drain_round_trip(signal.SIGTERM)
    drain_round_trip(signal.SIGHUP)


run_parts(F, [("drain", part_drain)], tmp=TMP)
