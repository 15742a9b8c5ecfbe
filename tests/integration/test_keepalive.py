"""Keep-alive and the basic HTTP/1.1 surface of a real ramp server
(docs/behaviour.md, HTTP; docs/apps.md, ramp).

Proves: several requests on one http.client connection travel over ONE TCP
connection; HEAD answers Content-Length with no body; 404, 405 with Allow and
OPTIONS 204 with Allow; `--max-keepalive-requests 3` puts `Connection: close`
on the 3rd response and the server closes; `--keepalive-timeout-ms 500` closes
an idle connection (not much earlier, not much later); a client's
`Connection: close` and plain HTTP/1.0 are closed after the response; curl
gets the documented bodies from /x/now and /x/search and reuses its connection.
"""
import http.client
import json
import subprocess
import time

from harness import Failures, Server
from rawhttp import Conn, request

F = Failures()


def reuse_and_surface(s):
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=5)
    ports = []
    for path in ["/x/now", "/x/search?sel=7&k=4", "/x/now", "/x/slow?ms=1", "/x/now"]:
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        ports.append(c.sock.getsockname()[1] if c.sock else None)
        F.check(r.status == 200, f"GET {path} -> 200 (got {r.status})")
        F.check(r.getheader("Connection", "").lower() != "close", f"GET {path}: no Connection: close")
    F.check(None not in ports and len(set(ports)) == 1, f"5 requests reuse one TCP connection (local ports {ports})")

    c.request("GET", "/x/search?sel=7&k=4")
    r = c.getresponse()
    doc = json.loads(r.read())
    F.check(doc.get("sel") == 7 and doc.get("k") == 4 and len(doc.get("top", [])) == 4,
            f"/x/search body has sel, k and k ids: {doc}")

    c.request("GET", "/x/now")
    get_len = len(c.getresponse().read())
    c.request("HEAD", "/x/now")
    r = c.getresponse()
    F.check(r.status == 200, f"HEAD /x/now -> 200 (got {r.status})")
    F.check(r.getheader("Content-Length") == str(get_len),
            f"HEAD Content-Length equals GET's body length {get_len} (got {r.getheader('Content-Length')})")
    c.close()

    # HEAD on a raw socket: no body bytes may follow the head. A GET right
    # behind it proves the next bytes on the wire are the next response.
    with Conn(s.port) as k:
        k.send(request("HEAD", "/x/now") + request("GET", "/x/now"))
        st, _, h, _, _ = k.read_response(head=True)
        st2, _, _, body2, line2 = k.read_response()
        F.check(st == 200 and h.get("content-length") == "15", f"raw HEAD: 200, Content-Length 15 ({st}, {h})")
        F.check(st2 == 200 and body2 == b'{"route":"now"}', f"raw HEAD sent no body ({line2!r}, {body2!r})")

    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=5)
    c.request("GET", "/no/such/path")
    r = c.getresponse(); r.read()
    F.check(r.status == 404, f"unknown path -> 404 (got {r.status})")
    c.request("POST", "/x/now", body=b"")
    r = c.getresponse(); r.read()
    allow = r.getheader("Allow", "")
    F.check(r.status == 405, f"POST /x/now -> 405 (got {r.status})")
    F.check("GET" in allow and "HEAD" in allow and "POST" not in allow, f"405 Allow lists GET, HEAD (got {allow!r})")
    c.request("OPTIONS", "/x/search")
    r = c.getresponse(); body = r.read()
    F.check(r.status == 204 and body == b"", f"OPTIONS -> 204, no body (got {r.status}, {body!r})")
    F.check("GET" in r.getheader("Allow", ""), f"OPTIONS has Allow (got {r.getheader('Allow')!r})")
    c.request("GET", "/x/now")
    r = c.getresponse(); r.read()
    F.check(r.status == 200, "connection still usable after 404/405/OPTIONS")
    c.close()


def max_requests(bin_args):
    with Server("ramp", "--port", "0", "--max-keepalive-requests", "3", *bin_args) as s:
        with Conn(s.port) as k:
            for i in (1, 2, 3):
                k.send(request("GET", "/x/now"))
                st, _, h, body, _ = k.read_response()
                conn = h.get("connection", "").lower()
                F.check(st == 200 and body == b'{"route":"now"}', f"request {i}/3 answered 200")
                if i < 3:
                    F.check(conn != "close", f"response {i}/3 has no Connection: close (got {conn!r})")
                else:
                    F.check(conn == "close", f"response 3/3 carries Connection: close (got {conn!r})")
            F.check(k.closed_within(3), "server closes after the 3rd request")
        s.stop()


def idle_timeout():
    with Server("ramp", "--port", "0", "--keepalive-timeout-ms", "500") as s:
        with Conn(s.port) as k:
            k.send(request("GET", "/x/now"))
            st = k.read_response()[0]
            t0 = time.monotonic()
            closed = k.closed_within(5)
            waited = time.monotonic() - t0
            F.check(st == 200 and closed, f"idle keep-alive connection closed by the server (closed={closed})")
            F.check(0.3 <= waited <= 2.5, f"idle close after ~500 ms (took {waited:.2f}s)")
        s.stop()
    # A connection that keeps talking is not closed by the idle timer: it lives past the timeout (2.5 s > 2 s)
    # while no gap reaches it (a 500 ms pace leaves 1.5 s for a descheduled client; each gap is measured).
    with Server("ramp", "--port", "0", "--keepalive-timeout-ms", "2000") as s:
        with Conn(s.port) as k:
            ok, gaps, t_last = True, [], None
            for _ in range(5):
                time.sleep(0.5)  # the pacing is the behaviour: a client that keeps talking
                now = time.monotonic()
                if t_last is not None:
                    gaps.append(now - t_last)
                k.send(request("GET", "/x/now"))
                ok = ok and k.read_response()[0] == 200
                t_last = time.monotonic()
            F.check(max(gaps) < 2.0, f"the pace held: every gap below the 2 s timeout ({[round(g, 2) for g in gaps]})")
            F.check(ok, "a connection busy every 500 ms outlives a 2 s idle timeout (2.5 s in all)")
        s.stop()


def closing_clients(s):
    with Conn(s.port) as k:
        k.send(request("GET", "/x/now", [("Connection", "close")]))
        st, _, h, _, _ = k.read_response()
        F.check(st == 200 and h.get("connection", "").lower() == "close", f"1.1 Connection: close echoed ({h})")
        F.check(k.closed_within(3), "1.1 Connection: close -> server closes")
    with Conn(s.port) as k:
        k.send(b"GET /x/now HTTP/1.0\r\n\r\n")
        st, _, _, body, line = k.read_response()
        F.check(st == 200 and body == b'{"route":"now"}', f"HTTP/1.0 GET answered ({line!r})")
        F.check(k.closed_within(3), "HTTP/1.0 without keep-alive -> server closes after the response")


def with_curl(s):
    out = subprocess.run(["curl", "-sS", "--max-time", "10", "-w", "\n%{http_code} %{num_connects}\n",
                          s.url("/x/now"), s.url("/x/search?sel=3&k=2")],
                         capture_output=True, text=True, timeout=20)
    lines = out.stdout.strip().split("\n")
    F.check(out.returncode == 0 and len(lines) == 4, f"curl ran: rc={out.returncode} {out.stdout!r} {out.stderr!r}")
    if len(lines) == 4:
        F.check(lines[0] == '{"route":"now"}' and lines[1].startswith("200 1"), f"curl /x/now: {lines[:2]}")
        doc = json.loads(lines[2])
        F.check(doc.get("sel") == 3 and len(doc.get("top", [])) == 2, f"curl /x/search body: {lines[2]}")
        F.check(lines[3] == "200 0", f"curl reused its connection for the 2nd URL (code, new connects: {lines[3]})")


with Server("ramp", "--port", "0") as s:
    reuse_and_surface(s)
    closing_clients(s)
    with_curl(s)
    F.check(s.stop() == 0, "ramp exits 0 on SIGTERM")
max_requests([])
idle_timeout()
F.done()
