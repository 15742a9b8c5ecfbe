"""--max-connections: a loop past its capacity leaves the next connection in
the backlog, unanswered, and takes it as soon as one of its connections
closes — nothing is refused or dropped."""
import http.client
import socket
import time

from harness import Failures, Server

F = Failures()
with Server("host_check", "--port", "0", "--max-connections", "2") as s:
    held = []
    for _ in range(2):
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=5)
        c.request("GET", "/health")
        F.check(c.getresponse().read() == b'{"status":"ok"}', "a connection within capacity is served")
        held.append(c)
    third = socket.create_connection(("127.0.0.1", s.port), timeout=5)
    third.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
    third.settimeout(0.6)
    try:
        early = third.recv(4096)
    except socket.timeout:
        early = None
    F.check(early is None, f"past capacity, the third connection waits in the backlog (got {early!r})")
    held[0].close()
    third.settimeout(5)
    t0 = time.monotonic()
    got = b""
    try:
        while b'"status"' not in got:
            chunk = third.recv(4096)
            if not chunk:
                break
            got += chunk
    except socket.timeout:
        pass
    F.check(got.startswith(b"HTTP/1.1 200") and b'{"status":"ok"}' in got,
            f"once a connection closes, the waiting one is taken and answered ({got[:60]!r})")
    F.check(time.monotonic() - t0 < 2, "and promptly")
    third.close()
    held[1].close()
    F.check(s.stop() == 0, "exit 0")
F.done()
