"""A client that goes away while its request is with the pool (http/conn.c:
a connection waiting on the pool reads nothing, so its close is found when
the answer comes back; a connection the server closed meanwhile keeps its
memory for the pool's answer, which m0__http_complete then drops).

Proves, for host_check /slow?ms=1000 under --blocking-threads 1, in single
mode, with --threads 2 and with --workers 2: a client that sends it, waits
until the request is in the pool (m0_pool_queue 1) and then closes (FIN), or
resets (SO_LINGER 0): the answer arriving for it is dropped without harm, the
connection is closed and counted out (m0_open_connections back to what it
was, m0_pool_queue 0), nothing is said on stderr about a malformed or lost
result, the process (every worker) still runs, no worker was respawned,
later requests (/slow?ms=0 and /instance through the pool, /health on the
loop) are answered, and SIGTERM drains to exit 0.

And the case where the server itself has closed the connection while the
request waits (handle_echo, --blocking-threads 2: GET /big?n=8MiB, whose
answer the client does not read, then /hold, which waits for a /release;
then the client resets, so the write in flight fails): the server's socket
for it is gone (/proc/net/tcp) while the connection is still counted open
(its memory waits for the pool's answer); after /release the answer is
dropped and the connection counted out; the server still serves and exits 0.
"""
import socket

from harness import Failures, Prefork, Server, children, wait_for
from slowpeer import Metrics, Reader, ends, get, reset, server_queue, small_socket

F = Failures()




def serves(label, port):
    with socket.create_connection(("127.0.0.1", port), timeout=20) as c:
        r = Reader(c)
        got = []
        for path in ("/slow?ms=0", "/instance", "/health"):
            try:
                c.sendall(get(path))
                st, _, body = r.response(timeout=20)
            except (OSError, ValueError) as e:
                st, body = None, repr(e).encode()
            got.append((path, st, body[:40]))
        F.check([g[1] for g in got] == [200, 200, 200] and got[0][2] == b'{"ms":0}' and got[2][2] == b'{"status":"ok"}',
                f"{label}: later requests answered ({got})")


def host_check(mode, args, cls=Server):
    with cls("host_check", "--port", "0", "--blocking-threads", "1", "--metrics-path", "/metrics", *args) as s:
        pid = s.proc.pid
        m = Metrics(s.port)
        workers = children(pid) if cls is Prefork else set()
        open0 = 1  # m's connection
        F.check(wait_for(lambda: m("open_connections") == open0, 10), f"{mode}: one connection open ({m('open_connections')})")
        for how in ("close", "reset"):
            label = f"{mode}, {how} while in the pool"
            c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
            c.sendall(get("/slow?ms=1000"))
            F.check(wait_for(lambda: m("pool_queue") == 1, 10),
                    f"{label}: the request is in the pool (m0_pool_queue {m('pool_queue')})")
            F.check(m("open_connections") == open0 + 1, f"{label}: its connection counted open")
            if how == "close":
                c.close()
            else:
                reset(c)
            F.check(wait_for(lambda: m("pool_queue") == 0 and m("open_connections") == open0, 10),
                    f"{label}: the answer came back, was dropped, and the connection is closed and counted out "
                    f"(m0_pool_queue {m('pool_queue')}, m0_open_connections "
                    f"{m('open_connections')}, {open0} before)")
            F.check(s.proc.poll() is None, f"{label}: the server still runs")
            serves(label, s.port)
            F.check(wait_for(lambda: m("open_connections") == open0, 10), f"{label}: that client counted out too")
        if cls is Prefork:
            F.check(children(pid) == workers and m("respawns_total") == 0,
                    f"{mode}: the same workers serve, none respawned ({workers} -> {children(pid)})")
        err = s.stderr()
        F.check("malformed" not in err and "cannot return" not in err, f"{mode}: nothing lost or malformed:\n{err[-600:]}")
        rc = s.stop(timeout=15)
        F.check(rc == 0, f"{mode}: exit 0 on SIGTERM (got {rc}):\n{s.stderr()[-600:]}")


def closed_while_waiting():
    label = "server closed it while /hold waits"
    with Server("handle_echo", "--port", "0", "--blocking-threads", "2", "--metrics-path", "/metrics") as s:
        pid = s.proc.pid
        m = Metrics(s.port)
        open0 = 1  # m's connection
        c = small_socket(s.port)
        c.sendall(get(f"/big?n={8 << 20}") + get("/hold"))
        e = ends(c)

        def held():
            q = server_queue(pid, e)
            return q is not None and q[0] > 0 and m("pool_queue") == 1

        F.check(wait_for(held, 10), f"{label}: the 8 MiB answer is being written while /hold is in the pool "
                                    f"({server_queue(pid, e)}, m0_pool_queue {m('pool_queue')})")
        reset(c)
        F.check(wait_for(lambda: server_queue(pid, e) is None, 10),
                f"{label}: after the reset the server closed its socket ({server_queue(pid, e)})")
        F.check(m("open_connections") == open0 + 1 and m("pool_queue") == 1,
                f"{label}: ... and still counts the connection open while /hold waits "
                f"({m('open_connections')} open, {open0} before)")
        with socket.create_connection(("127.0.0.1", s.port), timeout=10) as rel:
            rel.sendall(get("/release"))
            F.check(Reader(rel).response(timeout=20)[2] == b"ok\n", f"{label}: /release answered")
        F.check(wait_for(lambda: m("pool_queue") == 0 and m("open_connections") == open0, 10),
                f"{label}: the answer for the closed connection was dropped and it is counted out "
                f"({m('open_connections')} open, {open0} before)")
        with socket.create_connection(("127.0.0.1", s.port), timeout=10) as k:
            k.sendall(get("/x"))
            st, _, body = Reader(k).response(timeout=20)
            F.check(st == 200 and body.startswith(b"GET /x\n"), f"{label}: the server still serves ({st} {body[:30]!r})")
        rc = s.stop(timeout=15)
        F.check(rc == 0, f"{label}: exit 0 on SIGTERM (got {rc}):\n{s.stderr()[-600:]}")


host_check("single", [])
host_check("threads 2", ["--threads", "2"])
host_check("workers 2", ["--workers", "2"], Prefork)
closed_while_waiting()
F.done()
