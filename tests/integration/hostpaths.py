"""Helpers shared by the tests of the host's failure paths (test_watchdog,
test_recycle, test_drain_bound, test_barrier_failed): which loop serves a
connection, a connection on a chosen loop, a host started on a listener the
test made itself (socket activation), and the records of `--trace -`.
"""
import json
import os
import re
import socket
import subprocess

import harness
from harness import BIN
from rawhttp import Conn, request


def instance(conn, timeout=10):
    """GET /instance on conn: (worker, pid) of the loop that answered (under
    --threads, worker is the loop's index)."""
    conn.send(request("GET", "/instance"))
    st, _, _, body, line = conn.read_response(timeout=timeout)
    m = re.search(rb'"worker":(\d+),"thread":(-?\d+),"pid":(\d+)', body)
    if st != 200 or not m:
        raise AssertionError(f"/instance: {line!r} {body!r}")
    return int(m.group(1)), int(m.group(3))


def conn_on(port, want, held, tries=64, timeout=10):
    """A keep-alive connection served by the loop `want(worker, pid)` picks:
    new connections until one lands there. The others are kept in `held`
    (open, so accept sharing, which hands a connection to the least-loaded
    loop, moves the next one along). Returns (conn, worker, pid) or None."""
    for _ in range(tries):
        c = Conn(port, timeout=timeout)
        w, pid = instance(c, timeout)
        if want(w, pid):
            return c, w, pid
        held.append(c)
    return None


def activated(app, args, env=None):
    """Starts BIN/app on a listener this test bound itself (socket activation:
    descriptor 3, LISTEN_PID/LISTEN_FDS), so the test knows the port before
    the host has read anything, and keeps its own descriptor of the listener:
    a connection that no loop accepted is still in its backlog afterwards.
    Returns (proc, listening socket, port, stderr log file)."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(64)
    port = lsock.getsockname()[1]
    e = dict(os.environ, LISTEN_FDS="1")
    e.pop("LISTEN_PID", None)
    if env:
        e.update(env)
    err = harness.log_file()
    # LISTEN_PID must be the server's own pid: set in the child before exec.
    proc = subprocess.Popen(["/bin/sh", "-c", 'export LISTEN_PID=$$; exec "$0" "$@"', os.path.join(BIN, app)] + list(args),
                            env=e, stdout=subprocess.DEVNULL, stderr=err, pass_fds=(lsock.fileno(), 3),
                            preexec_fn=lambda: os.dup2(lsock.fileno(), 3))
    return proc, lsock, port, err


read_log = harness.read_log


def trace_records(text):
    """The JSON records of `--trace -` among the other lines of stderr, in order."""
    out = []
    for line in text.splitlines():
        if line.startswith('{"t":'):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out
