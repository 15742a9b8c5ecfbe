"""The HTTP surface an application builds on (docs/http.md), end to end with
host_check and raw sockets:

- a path with a dot-segment ("." or "..", %2E spellings too) is answered 400
  and the connection closed, before any view or the router sees it; paths
  that only look alike (/a/..b, /.hidden, a ".." in the query) are routed;
- HEAD of a stream route is the stream's headers, never a stream that stays
  open (bug 10): the connection goes on as keep-alive, its next request
  answered; a stream route behind a pool (where a stream cannot begin: 409)
  is an ordinary answer and keeps the connection.
"""
from harness import Failures, Server
from rawhttp import Conn, request

F = Failures()


def dot_segments():
    with Server("host_check", "--port", "0", "--blocking-threads", "1") as s:
        for path in ["/health/.", "/a/../health", "/%2e%2E/health", "/./health", "/health/%2E", "/x/.%2e/health"]:
            with Conn(s.port) as k:
                k.send(request("GET", path))
                st, _, hdr, _, line = k.try_response()
                F.check(st == 400, f"GET {path} -> 400 ({line})")
                F.check(hdr.get("connection") == "close" and k.closed_within(5), f"GET {path}: closed after its 400")
        for path, want in [("/a/..b", 404), ("/.hidden", 404), ("/health?next=/../x", 200), ("/health", 200),
                           ("/...", 404)]:
            with Conn(s.port) as k:
                k.send(request("GET", path))
                st, _, _, _, line = k.try_response()
                F.check(st == want, f"GET {path} -> {want} ({line})")
        F.check(s.stop() == 0, "host_check exits 0")


def head_of_stream():
    with Server("host_check", "--port", "0") as s:  # no pool: both routes stream on the loop
        for path in ["/events", "/events-from-func"]:
            with Conn(s.port) as k:
                k.send(request("HEAD", path))
                st, _, hdr, _, line = k.try_response(head=True)
                F.check(st == 200 and hdr.get("content-type") == "text/event-stream", f"HEAD {path}: the stream's head ({line})")
                F.check("connection" not in hdr, f"HEAD {path}: no Connection: close ({hdr})")
                k.send(request("GET", "/health"))
                st, _, _, _, line = k.try_response()
                F.check(st == 200, f"HEAD {path}: then the connection answers the next request, no stream ({line})")
        F.check(s.stop() == 0, "host_check exits 0")
    with Server("host_check", "--port", "0", "--blocking-threads", "1") as s:
        with Conn(s.port) as k:
            k.send(request("HEAD", "/events-from-func"))
            st, _, _, _, line = k.try_response(head=True)
            F.check(st == 409, f"HEAD /events-from-func behind a pool -> 409 ({line})")
            k.send(request("GET", "/health"))
            F.check(k.try_response()[0] == 200, "and the connection goes on")
        with Conn(s.port) as k:  # GET still streams
            k.send(request("GET", "/events"))
            st, _, hdr, _, _ = k.try_response(head=True)
            F.check(st == 200 and hdr.get("content-type") == "text/event-stream", "GET /events is a stream")
            F.check(not k.closed_within(0.5), "GET /events stays open")
        F.check(s.stop() == 0, "host_check exits 0")


dot_segments()
head_of_stream()
F.done()
