"""Answers that re-enter the loop's own bookkeeping (ARCHITECTURE.md, The loop:
closing never frees).

An answer given on the loop goes on with what the connection sent meanwhile:
the next pipelined request is parsed and dispatched inside the answer. When
that request goes to an actor, it takes an entry of the loop's table of asks,
and when the table is full it grows (moves) under the answer that is still
using its entry. host_check with --access-log (the answer's log line reads the
entry after the answer), 64 connections (the table's first size) each with
two GET /actor/silent pipelined in one write: every first request takes an
entry, the tick answers them all 504 at the route's timeout, and the first
answer parses a second request into a full table.

Proves: every connection gets both 504s, in order, one log line per answer
with its path, and the host serves /health after (under ASan, a read of the
moved entry is a heap-use-after-free and the host dies).
"""
import json
import os
import socket
import sys

from harness import Failures, Server, get, wait_for

F = Failures()
CONNS = 64  # the asks table's first size (actors/asks.c, ask_grow)


def read_answers(s, n, timeout=15.0):
    """n HTTP answers (heads with Content-Length bodies) from s: their statuses."""
    s.settimeout(timeout)
    buf, statuses = b"", []
    while len(statuses) < n:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            head = buf[:end].decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                k, _, v = line.partition(":")
                if k.strip().lower() == "content-length":
                    length = int(v.strip())
            if len(buf) >= end + 4 + length:
                statuses.append(int(head.split(" ")[1]))
                buf = buf[end + 4 + length:]
                continue
        try:
            chunk = s.recv(65536)
        except OSError:
            break
        if not chunk:
            break
        buf += chunk
    return statuses


def main():
    with Server("host_check", "--port", "0", "--access-log") as srv:
        req = b"GET /actor/silent HTTP/1.1\r\nHost: t\r\n\r\n"
        socks = [socket.create_connection(("127.0.0.1", srv.port), timeout=10) for _ in range(CONNS)]
        for s in socks:
            s.sendall(req + req)
        answers = [read_answers(s, 2) for s in socks]
        for s in socks:
            s.close()
        good = sum(1 for a in answers if a == [504, 504])
        F.check(good == CONNS, f"every connection got its two 504s in order ({good} of {CONNS}; "
                               f"first other: {next((a for a in answers if a != [504, 504]), None)})")
        F.check(srv.proc.poll() is None, f"the host is alive (exit {srv.proc.poll()}):\n{srv.stderr()[-3000:]}")
        if srv.proc.poll() is None:
            F.check(get(srv.port, "/health")[0] == 200, "/health answers after")

        def lines():
            out = []
            for line in srv.stdout().splitlines():
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
            return [x for x in out if x.get("path") == "/actor/silent"]

        logged = wait_for(lambda: len(lines()) >= 2 * CONNS and lines(), 10)
        F.check(len(logged or []) == 2 * CONNS and all(x.get("status") == 504 for x in logged or []),
                f"one access-log line per answer, each /actor/silent 504 ({len(logged or [])} lines)")
        F.check(srv.stop() == 0, "exit 0 on SIGTERM")
    F.done()


if __name__ == "__main__":
    main()
