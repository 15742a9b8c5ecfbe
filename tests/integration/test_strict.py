"""Strictness of the request line and the head (issue 20, points 9, 14, 15;
docs/behaviour.md, Request smuggling and malformed requests): what an RFC
9110/9112 conformance suite sends, against the real host_check.

Proves:
  - each malformed request below, sent whole in ONE write on a fresh
    connection with a second request behind it, gets exactly one answer with
    its status (400; CONNECT 501, RFC 9110 9.1 and 9.3.6; an unsupported
    version 505; a Content-Length over the limit 413), says Connection: close,
    and the server closes, answering nothing more;
  - OWS after a header value is not part of it: `Expect: 100-continue <tab>`
    and `Transfer-Encoding: chunked ` are those (before: 417 and 400);
  - an absolute-form target (RFC 9112 3.2.2) is served as its origin-form:
    /health answers, /loop/echo sees the path /loop/echo, the connection
    stays open;
  - a request line split across reads is read as sent (one SP between its
    parts even when the server dropped it between reads; two still two);
  - one empty line before a request is skipped (RFC 9112 2.2), a Host with a
    port or an IPv6 literal is served;
  - an Upgrade is ignored (RFC 9110 7.8): the request after it on the same
    connection is answered, not refused;
  - OPTIONS * is not refused by the parser, and the server answers it for
    itself (204), not the router (404).
After all of them the same process answers /health (no crash).
"""
import json
import time

from harness import Failures, Server
from rawhttp import Conn

F = Failures()
SMUGGLED = b"GET /pid HTTP/1.1\r\nHost: t\r\n\r\n"


def head(line, *headers, host=True):
    hs = ([b"Host: t"] if host else []) + [h if isinstance(h, bytes) else h.encode() for h in headers]
    return line + b"\r\n" + b"".join(h + b"\r\n" for h in hs) + b"\r\n"


GET = b"GET /health HTTP/1.1"
B400 = {400}
REFUSED = [
    # bare CR: RFC 9112 2.2 (an element with a bare CR is invalid)
    ("bare CR before the request line", B400, b"\r" + head(GET)),
    ("bare CR, then CRLF, before the request line", B400, b"\r\r\n" + head(GET)),
    ("bare CR ending the request line", B400, GET + b"\rHost: t\r\n\r\n"),
    ("bare CR before a header's CRLF", B400, head(GET, b"X: a\r")),
    # the request line: RFC 9112 3 (method SP request-target SP HTTP-version), 2.3
    ("HTTP/1 (no minor)", B400, head(b"GET /health HTTP/1")),
    ("HTTP/01.1", B400, head(b"GET /health HTTP/01.1")),
    ("HTTP/1.1 followed by a SP", B400, head(b"GET /health HTTP/1.1 ")),
    ("HTTP/ 1.1", B400, head(b"GET /health HTTP/ 1.1")),
    ("RTSP/1.1 for HTTP/1.1", B400, head(b"GET /health RTSP/1.1")),
    ("two SP between method and target", B400, head(b"GET  /health HTTP/1.1")),
    ("two SP between target and version", B400, head(b"GET /health  HTTP/1.1")),
    ("HTTP/2.0: well-formed, not served", {505}, head(b"GET /health HTTP/2.0")),
    # the target's forms: RFC 9112 3.2
    ("GET * (asterisk-form is for OPTIONS)", B400, head(b"GET * HTTP/1.1")),
    ("OPTIONS *x", B400, head(b"OPTIONS *x HTTP/1.1")),
    ("a fragment in the target", B400, head(b"GET /health#x HTTP/1.1")),
    ("absolute-form, scheme ftp", B400, head(b"GET ftp://t/health HTTP/1.1")),
    ("absolute-form, empty authority", B400, head(b"GET http:///health HTTP/1.1")),
    ("absolute-form with userinfo", B400, head(b"GET http://u@t/health HTTP/1.1")),
    ("absolute-form, empty path before a query", B400, head(b"GET http://t?x=1 HTTP/1.1")),
    ("absolute-form on 1.1 without Host", B400, head(b"GET http://t/health HTTP/1.1", host=False)),
    ("CONNECT to an origin server", {501}, head(b"CONNECT t:443 HTTP/1.1", "Host: t:443", host=False)),
    # the head: RFC 9110 5.1, 7.2; RFC 9112 3.2, 6.3
    ("empty header name", B400, head(GET, b": x")),
    ("Host with userinfo", B400, head(GET, "Host: user@t", host=False)),
    ("Host with a path", B400, head(GET, "Host: t/x", host=False)),
    ("Host empty", B400, head(GET, "Host:", host=False)),
    ("Host only OWS", B400, head(GET, "Host:  \t", host=False)),
    ("two Hosts folded with a comma", B400, head(GET, "Host: a, b", host=False)),
    ("two Hosts folded with a bare comma", B400, head(GET, "Host: a,b", host=False)),
    ("Host with a port not digits", B400, head(GET, "Host: t:8x", host=False)),
    ("two Host headers", B400, head(GET, "Host: other")),
    ("Content-Length that overflows", B400,
     head(b"POST /loop/echo HTTP/1.1", "Content-Length: 99999999999999999999")),
    ("Content-Length over --max-body-bytes", {413},
     head(b"POST /loop/echo HTTP/1.1", "Content-Length: 999999999999")),
]


def probe(port, name, allowed, data):
    with Conn(port, timeout=5) as k:
        try:
            k.send(data + SMUGGLED)
        except (BrokenPipeError, ConnectionResetError):
            pass
        st, _, h, body, line = k.try_response()
        closed = k.closed_within(3)
        extra = k.buf
    want = "/".join(map(str, sorted(allowed)))
    F.check(st in allowed, f"[{name}] -> {want} (got {line!r} {body[:60]!r})")
    F.check(st is None or h.get("connection", "").lower() == "close", f"[{name}] answer says Connection: close")
    F.check(closed, f"[{name}] server closes the connection after refusing")
    F.check(extra == b"", f"[{name}] nothing answered after the refusal: {extra[:120]!r}")


def served(port, name, data, want_status=200, then=True):
    """data is answered want_status and the connection stays open: the
    next request on it is answered too. Returns the first answer's body."""
    with Conn(port, timeout=5) as k:
        k.send(data)
        st, _, h, body, line = k.try_response()
        F.check(st == want_status, f"[{name}] -> {want_status} (got {line!r} {body[:80]!r})")
        F.check(h.get("connection", "").lower() != "close", f"[{name}] the connection stays open")
        if then:
            k.send(SMUGGLED)
            st2, _, _, _, line2 = k.try_response()
            F.check(st2 == 200, f"[{name}] the next request on the connection -> 200 (got {line2!r})")
        return body


def in_pieces(port, name, pieces, want_status):
    """The pieces written one by one, 100 ms apart, so the server reads them
    apart and drops between reads what no span needs (a SP after a method):
    the request line is still read as it was sent."""
    with Conn(port, timeout=5) as k:
        for piece in pieces:
            k.send(piece)
            time.sleep(0.1)
        st, _, _, body, line = k.try_response()
        F.check(st == want_status, f"[{name}] in {len(pieces)} reads -> {want_status} (got {line!r} {body[:60]!r})")


def echoed_path(body):
    try:
        return json.loads(body).get("path")
    except ValueError:
        return None


with Server("host_check", "--port", "0") as s:
    p = s.port
    for name, allowed, data in REFUSED:
        probe(p, name, allowed, data)

    # issue 20.9: OWS around a value is not part of it
    served(p, "Expect: 100-continue<SP><HTAB>", head(b"POST /loop/echo HTTP/1.1", "Expect: 100-continue \t",
                                                   "Content-Length: 2") + b"hi")
    body = served(p, "Transfer-Encoding: chunked<SP>",
                  head(b"POST /loop/echo HTTP/1.1", "Transfer-Encoding: chunked ") + b"3\r\nabc\r\n0\r\n\r\n")
    F.check(b'"body":"abc"' in body, f"[Transfer-Encoding: chunked<SP>] the de-chunked body is read ({body[:120]!r})")

    # issue 20.14: absolute-form
    served(p, "absolute-form http", head(b"GET http://t/health HTTP/1.1"))
    served(p, "absolute-form HTTPS with a port, another Host", head(b"GET HTTPS://example.com:8443/health HTTP/1.1"))
    body = served(p, "absolute-form /loop/echo?x=1", head(b"GET http://t/loop/echo?x=1 HTTP/1.1"))
    F.check(echoed_path(body) == "/loop/echo", f"[absolute-form /loop/echo?x=1] the view sees path /loop/echo ({body[:120]!r})")
    served(p, "absolute-form on 1.0 without Host",
           head(b"GET http://t/health HTTP/1.0", "Connection: keep-alive", host=False))

    # a request line split across reads (the connection keeps only what the
    # spans need between them): one SP is still one, two are still two
    in_pieces(p, "GET |/health |HTTP/1.1", [b"GET ", b"/health ", b"HTTP/1.1\r\nHost: t\r\n\r\n"], 200)
    in_pieces(p, "GET /health H|TTP/1.1", [b"GET /health H", b"TTP/1.1\r\nHost: t\r\n\r\n"], 200)
    in_pieces(p, "GET | /health", [b"GET ", b" /health HTTP/1.1\r\nHost: t\r\n\r\n"], 400)
    in_pieces(p, "GET /health | HTTP/1.1", [b"GET /health ", b" HTTP/1.1\r\nHost: t\r\n\r\n"], 400)

    # what stays served
    served(p, "one CRLF before the request line", b"\r\n" + head(GET))
    served(p, "Host with a port", head(GET, "Host: t:80", host=False))
    served(p, "Host an IPv6 literal with a port", head(GET, "Host: [::1]:8080", host=False))
    served(p, "Upgrade ignored, then the next request",
           head(GET, "Connection: upgrade", "Upgrade: websocket"))

    # OPTIONS *: the server in general (RFC 9110 9.3.7)
    with Conn(p, timeout=5) as k:
        k.send(head(b"OPTIONS * HTTP/1.1"))
        st, _, h, _, line = k.try_response()
        F.check(st is not None and st not in (400, 501) and h.get("connection", "").lower() != "close",
                f"[OPTIONS *] not refused by the parser (got {line!r})")
        F.check(st == 204, f"[OPTIONS *] -> 204 for the server (got {line!r})")

    F.check(s.proc.poll() is None, "server still running after every case")
    served(p, "/health after every case", head(GET), then=False)
    F.check(s.stop() == 0, "host_check exits 0 on SIGTERM")
F.done()
