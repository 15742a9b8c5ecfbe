"""Clients that stop reading their answers (http/conn.c: the second output
queue, pausing on a full queue, resuming, a write error), against
handle_echo, whose /big?n=N answers N bytes of a known pattern.

The promise (http/conn.h): at most one write in flight per connection; answers
made meanwhile go to a second queue; once more than 1 MiB (CONN_OUT_HIGH) of
output is queued for a connection, the server stops reading it, and reads
again when the client has caught up. So a client that withholds its reads
costs the server about that mark, not what it asked for.

Memory budget: while one client withholds N_BIG answers of 1 MiB (48 MiB), the
server's resident memory (VmRSS) grows by at most BUDGET = 8 MiB for it: the
1 MiB mark, an answer beyond it, the copy made when the unwritten rest moves
to the connection's queue, and the allocator's slack (twice that under
AddressSanitizer, whose quarantine keeps freed memory resident for a while).
The kernel's socket buffers are not the server's memory and are not counted.

Whether the server reads a connection is seen from outside: the bytes the
client sent that the server has not read are its socket's rx_queue
(/proc/net/tcp), looked at after the loop has provably turned twice
(slowpeer.Turns: two requests answered one after the other on another
connection). No sleep, no timing.

Proves, in single mode (one loop: every connection on the same loop):
  A. a burst of N_BIG pipelined GET /big (1 MiB each) in one send by a client
     with a 4 KiB receive buffer that reads nothing: the server stops reading
     (a request sent after it stays unread in the kernel) and its memory grows
     by at most BUDGET;
  B. requests sent one at a time while the server's write is stuck go to the
     second queue until it is full; then the server stops reading (within 64
     requests of 256 KiB, half of them static bodies), and 100 more requests
     sent then stay unread; memory within the budget for both clients;
  C. meanwhile another client is served: a 1 MiB answer byte-exact and ten
     echoes, on a new connection;
  D. when the clients read again, every answer arrives, in order (x-query
     names its request) and byte-exact, and each connection still serves;
  E. a client that resets its connection (SO_LINGER 0) while the server has
     output queued for it: the connection is closed and counted out
     (m0_open_connections back to what it was), the server still serves a
     1 MiB answer byte-exact, and SIGTERM drains to exit 0;
  H. the last answer written while the client does not read: a GET /big of
     8 MiB with Connection: close; and requests of 256 KiB one at a time
     until one answer is partly queued behind the kernel's buffer (the server
     still reading), then the client's half-close (shutdown SHUT_WR): every
     answer arrives whole, then the server closes the connection (EOF);
and under --blocking-threads:
  F. the same burst through the pool (every answer made by a pool thread):
     the server stops taking the client's requests once its queue is full
     (memory within the budget after 80 pool round trips of another client,
     each of which would have carried one more of them), and all N_BIG
     answers then arrive byte-exact;
  G. a client whose queue was full (an 8 MiB answer unread, then a 1 byte
     one) reads it all; the server resumes, and its next request goes to the
     pool (/hold, which waits for a /release): the server does not read the client's
     input while that request waits: of an 8 MiB request body sent
     meanwhile, no more than the kernel's buffers take leaves the client
     (< 4 MiB); after the /release everything is answered (the body echoed
     whole).
"""
import select
import socket
import time

from harness import Failures, Server, wait_for
from slowpeer import Metrics, Reader, Turns, get, pattern, reset, server_queue, small_socket, unread, vm_rss

F = Failures()
BIG = 1 << 20
QUARTER = 1 << 18
N_BIG = 48
BUDGET = 8 << 20
MiB = 1 << 20
BIG_BODY = pattern(BIG)




def check_big(label, r, query, n=BIG, timeout=60):
    """Reads one /big answer from Reader r: 200, its own x-query, n bytes of the pattern."""
    try:
        st, h, body = r.response(timeout=timeout)
    except (OSError, TimeoutError, ValueError) as e:
        F.check(False, f"{label}: the answer to /big?{query} arrived ({e})")
        return False
    ok = st == 200 and h.get("x-query") == query and body == (BIG_BODY if n == BIG else pattern(n))
    F.check(ok, f"{label}: the answer to /big?{query} is whole and byte-exact (status {st}, x-query "
                f"{h.get('x-query')!r}, {len(body)} bytes)")
    return ok


def read_all(label, sock, queries):
    r = Reader(sock)
    for i, q in enumerate(queries):
        n = int(q.split("&")[0][2:])
        if not check_big(f"{label} #{i}", r, q, n):
            return r
    return r


def still_serves(label, sock, r):
    try:
        sock.sendall(get("/after"))
        st, _, body = r.response(timeout=20)
    except (OSError, TimeoutError, ValueError) as e:
        st, body = None, repr(e).encode()
    F.check(st == 200 and body.startswith(b"GET /after\n"), f"{label}: the connection still serves ({st} {body[:40]!r})")


def fresh_big(label, port):
    with socket.create_connection(("127.0.0.1", port), timeout=20) as c:
        c.sendall(get(f"/big?n={BIG}&fresh=1"))
        check_big(label, Reader(c), f"n={BIG}&fresh=1")


def budget(pid):
    """BUDGET, doubled for a server built with AddressSanitizer."""
    with open(f"/proc/{pid}/maps") as f:
        return 2 * BUDGET if "libasan" in f.read() else BUDGET


def warm_up(port):
    """The allocator's first touches of answer-sized buffers happen here, not
    in the measured part: three 1 MiB answers read normally."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as c:
        r = Reader(c)
        for i in range(3):
            c.sendall(get(f"/big?n={BIG}&warm={i}"))
            r.response(timeout=30)


def single():
    with Server("handle_echo", "--port", "0", "--metrics-path", "/metrics") as s:
        pid = s.proc.pid
        warm_up(s.port)
        m = Metrics(s.port)
        turns = Turns(s.port)
        open0 = 2  # m's connection and turns'
        F.check(wait_for(lambda: m("open_connections") == open0, 10),
                f"two connections open before the slow clients ({m('open_connections')})")
        base = vm_rss(pid)

        # A: a burst in one send
        a = small_socket(s.port)
        # Taken by the loop before anything is sent: otherwise a turn of the loop
        # can come before the accept, and what it proves is about nothing.
        F.check(wait_for(lambda: m("open_connections") == open0 + 1, 10),
                f"A: the server has taken the slow connection ({m('open_connections')})")
        qa = [f"n={BIG}&a={i}" for i in range(N_BIG)]
        a.sendall(b"".join(get(f"/big?{q}") for q in qa))
        F.check(turns(), "A: the loop answers another connection meanwhile")
        probe = get(f"/big?n={BIG}&a=probe")
        a.sendall(probe)
        F.check(turns(), "A: ... twice more")
        qa.append(f"n={BIG}&a=probe")
        q = server_queue(pid, a)
        F.check(q is not None and q[1] == len(probe),
                f"A: the server stopped reading the client: the request sent after the burst is unread "
                f"({q and q[1]} of {len(probe)} bytes in its socket)")
        grew = vm_rss(pid) - base
        print(f"A: {q} (tx, rx) in the server's socket; memory +{grew / MiB:.1f} MiB", flush=True)
        F.check(grew <= budget(pid), f"A: the server's memory grew by {grew / MiB:.1f} MiB <= {budget(pid) // MiB} MiB "
                                f"while the client withholds {N_BIG} MiB")

        # B: one request at a time while the write is stuck: the second queue
        b = small_socket(s.port)
        F.check(wait_for(lambda: m("open_connections") == open0 + 2, 10),
                f"B: the server has taken the second slow connection ({m('open_connections')})")
        qb, paused_at = [], None
        for i in range(64):
            qb.append(f"n={QUARTER}&b={i}&static={i % 2}")
            b.sendall(get(f"/big?{qb[-1]}"))
            turns()
            q = server_queue(pid, b)
            if q is None or q[1] > 0:
                paused_at = i
                break
        F.check(paused_at is not None and paused_at >= 1,
                f"B: the server read requests into the second queue, then stopped reading once it was full "
                f"(stopped at request {paused_at}, {server_queue(pid, b)})")
        held_b = server_queue(pid, b)[1] if paused_at is not None else 0
        more = [f"n={QUARTER}&b=more{i}&static={i % 2}" for i in range(100)]
        burst = b"".join(get(f"/big?{q}") for q in more)
        b.sendall(burst)
        qb += more
        turns()
        q = server_queue(pid, b)
        F.check(q is not None and q[1] == held_b + len(burst),
                f"B: nothing read while paused: {q and q[1]} == {held_b} + {len(burst)} bytes unread")
        grew = vm_rss(pid) - base
        print(f"B: stopped reading at request {paused_at}; {q} (tx, rx); memory +{grew / MiB:.1f} MiB", flush=True)
        withheld = N_BIG + 1 + len(qb) // 4
        F.check(grew <= 2 * budget(pid), f"B: the server's memory grew by {grew / MiB:.1f} MiB <= {2 * budget(pid) // MiB} MiB "
                                    f"for two clients withholding {withheld} MiB")

        # C: another client meanwhile
        with socket.create_connection(("127.0.0.1", s.port), timeout=20) as c:
            r = Reader(c)
            c.sendall(get(f"/big?n={BIG}&c=1"))
            check_big("C: another client meanwhile", r, f"n={BIG}&c=1")
            echoes = 0
            for i in range(10):
                c.sendall(get(f"/e{i}"))
                st, _, body = r.response(timeout=20)
                echoes += st == 200 and body.startswith(f"GET /e{i}\n".encode())
            F.check(echoes == 10, f"C: ten echoes answered meanwhile ({echoes})")

        # D: the clients read again
        ra = read_all("D: client A", a, qa)
        rb = read_all("D: client B", b, qb)
        still_serves("D: client A", a, ra)
        still_serves("D: client B", b, rb)
        a.close()
        b.close()
        F.check(wait_for(lambda: m("open_connections") == open0, 10),
                f"D: both connections closed and counted out ({m('open_connections')} open, {open0} before)")

        # E: a reset while output is queued
        e = small_socket(s.port)
        e.sendall(b"".join(get(f"/big?n={BIG}&e={i}") for i in range(32)))
        turns()
        q = server_queue(pid, e)
        F.check(q is not None and q[0] > 0, f"E: the server has output queued for the client ({q})")
        F.check(m("open_connections") == open0 + 1, "E: the connection is counted open")
        reset(e)
        F.check(wait_for(lambda: m("open_connections") == open0, 10),
                f"E: after the reset the connection is closed and counted out "
                f"({m('open_connections')} open, {open0} before)")
        F.check(s.proc.poll() is None, "E: the server is still running")
        fresh_big("E: then a new client", s.port)

        # H: the last answer, written while the client does not read
        eight = 8 * MiB
        for how in ("Connection: close", "half-close"):
            h = small_socket(s.port)
            if how == "half-close":
                # One 256 KiB answer at a time until the kernel takes no more
                # of one (the rest is queued: a write in flight) while the
                # server still reads (below the mark); then the half-close.
                qh, writing = [], False
                for i in range(64):
                    qh.append(f"n={QUARTER}&h={i}")
                    h.sendall(get(f"/big?{qh[-1]}"))
                    turns()
                    q = server_queue(pid, h)
                    if q is None or q[1] > 0:
                        break  # paused first: this run cannot show it
                    if q[0] + unread(h) < len(qh) * QUARTER:  # in the kernel: the server's send queue, our receive buffer
                        writing = True
                        break
                F.check(writing, f"H ({how}): an answer is being written while the server reads ({server_queue(pid, h)})")
                h.shutdown(socket.SHUT_WR)
                turns()
                r = read_all(f"H ({how})", h, qh)
            else:
                h.sendall(get(f"/big?n={eight}&h=0", "Connection: close\r\n"))
                turns()
                q = server_queue(pid, h)
                F.check(q is not None and q[0] > 0, f"H ({how}): the answer is being written ({q})")
                r = read_all(f"H ({how})", h, [f"n={eight}&h=0"])
            try:
                h.settimeout(20)
                rest = h.recv(65536)
            except OSError as e:
                rest = repr(e).encode()
            F.check(rest == b"" and not r.buf, f"H ({how}): then the server closes ({rest[:40]!r}, {len(r.buf)} left)")
            h.close()
        turns.close()
        rc = s.stop(timeout=15)
        F.check(rc == 0, f"exit 0 on SIGTERM (got {rc}):\n{s.stderr()[-600:]}")


def pool_burst():
    with Server("handle_echo", "--port", "0", "--blocking-threads", "1", "--metrics-path", "/metrics") as s:
        pid = s.proc.pid
        warm_up(s.port)
        base = vm_rss(pid)
        f = small_socket(s.port)
        qf = [f"n={BIG}&f={i}" for i in range(N_BIG)]
        f.sendall(b"".join(get(f"/big?{q}") for q in qf))
        turns = Turns(s.port)
        F.check(all(turns(1) for _ in range(80)), "F: 80 requests of another client through the pool answered")
        grew = vm_rss(pid) - base
        print(f"F: memory +{grew / MiB:.1f} MiB", flush=True)
        F.check(grew <= budget(pid), f"F: the server's memory grew by {grew / MiB:.1f} MiB <= {budget(pid) // MiB} MiB "
                                f"while the client withholds {N_BIG} MiB of pool answers")
        r = read_all("F: the client reads again", f, qf)
        still_serves("F", f, r)
        f.close()
        turns.close()
        rc = s.stop(timeout=15)
        F.check(rc == 0, f"F: exit 0 on SIGTERM (got {rc}):\n{s.stderr()[-600:]}")


def pool_wait():
    body_n = 8 * MiB
    with Server("handle_echo", "--port", "0", "--blocking-threads", "2", "--metrics-path", "/metrics",
                "--max-body-bytes", str(body_n)) as s:
        pid = s.proc.pid
        g = small_socket(s.port, rcvbuf=4096, sndbuf=65536)
        head = f"POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: {body_n}\r\n\r\n".encode()
        # 8 MiB answered first fills the kernel's buffers and leaves more than
        # the mark in the queue, so the server stops taking requests when the
        # next (1 byte) is answered: /hold goes to the pool when the client
        # has read both and the server resumes.
        g.sendall(get(f"/big?n={8 * MiB}&g=0") + get("/big?n=1&g=1") + get("/hold") + head)
        r = read_all("G: the client reads its first answers", g, [f"n={8 * MiB}&g=0", "n=1&g=1"])
        turns = Turns(s.port, "/metrics")
        turns()
        m = Metrics(s.port)
        F.check(m("pool_queue") >= 1, "G: /hold waits in the pool")
        body = pattern(body_n)
        g.setblocking(False)
        sent = 0
        while sent < body_n:
            try:
                sent += g.send(body[sent:sent + 65536])
                continue
            except BlockingIOError:
                pass
            turns()
            if not select.select([], [g], [], 0)[1]:
                break  # the server did not make room: it is not reading
        q = server_queue(pid, g)
        print(f"G: {sent} bytes of the body sent while /hold waits; {q} (tx, rx)", flush=True)
        F.check(sent < 4 * MiB and q is not None and q[1] > 0,
                f"G: while /hold waits the server does not read the client: {sent / MiB:.2f} MiB of the "
                f"{body_n // MiB} MiB body left the client, {q and q[1]} bytes unread in the server's socket")
        with socket.create_connection(("127.0.0.1", s.port), timeout=10) as rel:
            rel.sendall(get("/release"))
            F.check(Reader(rel).response(timeout=20)[2] == b"ok\n", "G: /release answered (by the other pool thread)")
        g.setblocking(True)
        g.settimeout(60)
        st, _, b = r.response(timeout=40)
        F.check(st == 200 and b == b"released\n", f"G: /hold answered after the release ({st} {b!r})")
        g.sendall(body[sent:])
        st, _, b = r.response(timeout=60)
        want = b"POST /up\nworker 0 thread "
        F.check(st == 200 and b.startswith(want) and b.endswith(b"\nbody %d\n" % body_n + body),
                f"G: the 8 MiB body was read and echoed whole after the wait ({st}, {len(b)} bytes)")
        g.close()
        turns.close()
        rc = s.stop(timeout=15)
        F.check(rc == 0, f"G: exit 0 on SIGTERM (got {rc}):\n{s.stderr()[-600:]}")


t0 = time.monotonic()
single()
pool_burst()
pool_wait()
print(f"took {time.monotonic() - t0:.1f}s")
F.done()
