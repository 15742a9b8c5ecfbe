"""Request limits and timeouts (docs/behaviour.md, Limits and timeouts;
docs/reference.md, Flags and variables / `--help`).

Proves, on a real server with small limits: request line + headers over
--max-header-bytes is 431, a target over --max-uri-bytes is 414, a body over
--max-body-bytes is 413, a request whose head is not complete within
--header-timeout-ms is 408 (sent partly then stalled, and trickled byte by
byte: trickling does not extend the deadline), a body not complete within
--body-timeout-ms is 408; a connection that never sends a byte is closed; a
Host-less HTTP/1.1 request is 400. After each refusal the server closes the
connection (recv returns b"" within a bound). Requests just under each limit
are served, and the defaults (32 KiB head, 8 KiB URI) hold without flags.
"""
import time

from harness import Failures, Server
from rawhttp import Conn, request

F = Failures()
HDR, URI, BODY, TMO = 1024, 256, 100, 500


def refused(port, data, want, what, then_wait=0.0, trickle=b"", trickle_every=0.0):
    """Sends `data` (then `trickle` byte by byte), expects `want` and a close.
    Returns seconds from the first byte to the answer."""
    with Conn(port, timeout=5) as k:
        t0 = time.monotonic()
        try:
            k.send(data)
            for b in trickle:
                time.sleep(trickle_every)
                k.send(bytes([b]))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer and close before we finish writing
        time.sleep(then_wait)
        st, _, h, _, line = k.try_response(timeout=5)
        took = time.monotonic() - t0
        F.check(st == want, f"{what} -> {want} (got {line!r})")
        F.check(st is None or h.get("connection", "").lower() == "close", f"{what}: answer says Connection: close ({h})")
        F.check(k.closed_within(3), f"{what}: server closes the connection after {want}")
        return took


def served(port, data, what, want=200):
    with Conn(port) as k:
        k.send(data)
        st, _, _, _, line = k.try_response()
        F.check(st == want, f"{what} -> {want} (got {line!r})")


def sizes(port):
    # 431: the whole head counts, one big header is enough.
    big = request("GET", "/x/now", [("X-Pad", "a" * (HDR + 100))])
    refused(port, big, 431, f"head of {len(big)} bytes > --max-header-bytes {HDR}")
    many = request("GET", "/x/now", [(f"X-H{i}", "v" * 40) for i in range(40)])
    refused(port, many, 431, f"40 headers, {len(many)} bytes in all > {HDR}")
    served(port, request("GET", "/x/now", [("X-Pad", "a" * (HDR - 200))]), f"head just under {HDR} bytes")

    # 414: the request target alone.
    long_uri = "/x/now?pad=" + "u" * URI
    refused(port, request("GET", long_uri), 414, f"URI of {len(long_uri)} bytes > --max-uri-bytes {URI}")
    ok_uri = "/x/now?pad=" + "u" * (URI - 40)
    served(port, request("GET", ok_uri), f"URI of {len(ok_uri)} bytes (under {URI})")


def body_limit(port):
    refused(port, request("POST", "/notes", [("Content-Length", str(BODY + 1))], b"b" * (BODY + 1)), 413,
            f"body of {BODY + 1} bytes > --max-body-bytes {BODY}")
    served(port, request("POST", "/notes", [("Content-Length", str(BODY))], b"b" * BODY), f"body of {BODY} bytes", 201)


def timeouts(port, body_port):
    lo, hi = TMO / 1000 - 0.1, TMO / 1000 + 1.5
    took = refused(port, b"GET /x/no", 408, "request line stalled mid-way")
    F.check(lo <= took <= hi, f"stalled request line answered after ~{TMO} ms (took {took:.2f}s)")

    took = refused(port, b"GET /x/now HTTP/1.1\r\nHost: t\r\nX-Slow: a", 408,
                   "headers trickled one byte per 100 ms", trickle=b"a" * 30, trickle_every=0.1)
    F.check(lo <= took <= hi, f"a trickle does not extend the header deadline (408 after {took:.2f}s)")

    with Conn(port) as k:  # says nothing at all
        t0 = time.monotonic()
        closed = k.closed_within(5)
        F.check(closed, "a connection that never sends a byte is closed")
        F.check(time.monotonic() - t0 <= hi, f"... within the header timeout ({time.monotonic() - t0:.2f}s)")

    took = refused(body_port, request("POST", "/notes", [("Content-Length", "50")], b"only ten b"), 408,
                   "body stalled after 10 of 50 bytes")
    F.check(lo <= took <= hi, f"stalled body answered after ~{TMO} ms (took {took:.2f}s)")

    # A request that completes in time is not touched by either timer.
    with Conn(port) as k:
        k.send(request("GET", "/x/now"))
        F.check(k.try_response()[0] == 200, "a prompt request on a timeout-configured server -> 200")


def host_rules(port):
    refused(port, b"GET /x/now HTTP/1.1\r\n\r\n", 400, "HTTP/1.1 without Host")
    served(port, b"GET /x/now HTTP/1.0\r\n\r\n", "HTTP/1.0 without Host (allowed)")


def defaults():
    with Server("ramp", "--port", "0") as s:
        refused(s.port, request("GET", "/x/now?" + "d" * 8300), 414, "URI of 8.1 KiB under the 8 KiB default")
        served(s.port, request("GET", "/x/now?" + "d" * 8000), "URI of 8000 bytes under the default")
        refused(s.port, request("GET", "/x/now", [(f"X-D{i}", "v" * 1000) for i in range(34)]), 431,
                "34 KiB of headers under the 32 KiB default")
        served(s.port, request("GET", "/x/now", [(f"X-D{i}", "v" * 1000) for i in range(30)]),
               "30 KiB of headers under the default")
        F.check(s.stop() == 0, "ramp (defaults) exits 0")


flags = ["--max-header-bytes", str(HDR), "--max-uri-bytes", str(URI), "--max-body-bytes", str(BODY),
         "--header-timeout-ms", str(TMO), "--body-timeout-ms", str(TMO)]
with Server("ramp", "--port", "0", *flags) as r, Server("notes", "--port", "0", *flags) as n:
    sizes(r.port)
    body_limit(n.port)
    timeouts(r.port, n.port)
    host_rules(r.port)
    F.check(r.stop() == 0 and n.stop() == 0, "both servers exit 0 on SIGTERM")
defaults()
F.done()
