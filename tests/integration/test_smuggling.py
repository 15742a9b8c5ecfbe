"""Request smuggling and malformed requests are refused (docs/behaviour.md,
Request smuggling and malformed requests: both Content-Length and
Transfer-Encoding, duplicate or malformed lengths, obsolete line folding: 400
and close).

Proves: each vector below, sent whole in ONE write on a fresh connection,
gets exactly one answer with the expected status and then the server closes
the connection, sending nothing more (a second request hidden in the body,
GET /x/smuggled, is never answered). Statuses: 400 everywhere except
  - HTTP/9.9 request line: 505 (400 also accepted; both refuse the version);
  - an unknown transfer coding (gzip, chunked / xchunked): 400, or 501 which
    RFC 9112 §6.1 allows for a coding the server does not implement.
After all vectors the same process still answers /x/now normally (no crash).
"""
from harness import Failures, Server
from rawhttp import Conn

F = Failures()
SMUGGLED = b"GET /x/smuggled HTTP/1.1\r\nHost: t\r\n\r\n"


def req(*headers, body=b"", line=b"POST /x/now HTTP/1.1", host=True):
    hs = ([b"Host: t"] if host else []) + [h if isinstance(h, bytes) else h.encode() for h in headers]
    return line + b"\r\n" + b"".join(h + b"\r\n" for h in hs) + b"\r\n" + body


CHUNKED_SMUGGLE = b"0\r\n\r\n" + SMUGGLED
B400 = {400}
VECTORS = [
    ("Content-Length + Transfer-Encoding", B400,
     req("Content-Length: 44", "Transfer-Encoding: chunked", body=CHUNKED_SMUGGLE)),
    ("Transfer-Encoding + Content-Length (reversed order)", B400,
     req("Transfer-Encoding: chunked", "Content-Length: 5", body=CHUNKED_SMUGGLE)),
    ("two Content-Length, different", B400, req("Content-Length: 5", "Content-Length: 6", body=b"hello!" + SMUGGLED)),
    ("two Content-Length, equal", B400, req("Content-Length: 5", "Content-Length: 5", body=b"hello" + SMUGGLED)),
    ("Content-Length list '5, 5'", B400, req("Content-Length: 5, 5", body=b"hello" + SMUGGLED)),
    ("Content-Length: +5", B400, req("Content-Length: +5", body=b"hello" + SMUGGLED)),
    ("Content-Length: -5", B400, req("Content-Length: -5", body=b"hello" + SMUGGLED)),
    ("Content-Length: '5 5'", B400, req("Content-Length: 5 5", body=b"hello" + SMUGGLED)),
    ("Content-Length: 5a", B400, req("Content-Length: 5a", body=b"hello" + SMUGGLED)),
    ("Transfer-Encoding: gzip, chunked", {400, 501}, req("Transfer-Encoding: gzip, chunked", body=CHUNKED_SMUGGLE)),
    ("Transfer-Encoding: chunked, twice", B400,
     req("Transfer-Encoding: chunked", "Transfer-Encoding: chunked", body=CHUNKED_SMUGGLE)),
    ("Transfer-Encoding: xchunked", {400, 501}, req("Transfer-Encoding: xchunked", body=CHUNKED_SMUGGLE)),
    ("Transfer-Encoding on HTTP/1.0", B400,
     req("Transfer-Encoding: chunked", body=CHUNKED_SMUGGLE, line=b"POST /x/now HTTP/1.0")),
    ("chunk size 'zz'", B400, req("Transfer-Encoding: chunked", body=b"zz\r\nhello\r\n0\r\n\r\n" + SMUGGLED)),
    ("chunk size overflow ffffffffffffffffff", B400,
     req("Transfer-Encoding: chunked", body=b"ffffffffffffffffff\r\nhello\r\n0\r\n\r\n" + SMUGGLED)),
    ("chunk data longer than its size", B400,
     req("Transfer-Encoding: chunked", body=b"3\r\nhello\r\n0\r\n\r\n" + SMUGGLED)),
    ("obsolete line folding", B400, req("X-Folded: first", b" second", line=b"GET /x/now HTTP/1.1")),
    ("obs-fold hiding Transfer-Encoding", B400,
     req("X-A: a", b" Transfer-Encoding: chunked", "Content-Length: 5", body=b"hello" + SMUGGLED)),
    # llhttp 8.1 hands over only what follows a fold of an empty first line:
    # served before m0 looked for the line end itself.
    ("obs-fold of an empty first line hiding Transfer-Encoding", B400,
     req("X-A:", b" Transfer-Encoding: chunked", "Content-Length: 5", body=b"hello" + SMUGGLED)),
    ("bare LF line endings", B400, b"GET /x/now HTTP/1.1\nHost: t\n\n" + SMUGGLED),
    # Each of these four passed Debian 12's llhttp 8.1 (strict mode) and is
    # refused by llhttp 9.2: m0 refuses them itself (http/parse.h).
    ("bare LF ending the request line only", B400, b"GET /x/now HTTP/1.1\nHost: t\r\n\r\n" + SMUGGLED),
    ("bare LF ending the head only", B400, b"GET /x/now HTTP/1.1\r\nHost: t\r\n\n" + SMUGGLED),
    ("empty header name", B400, req(b": x", line=b"GET /x/now HTTP/1.1")),
    ("Content-Length in the trailers", B400,
     req("Transfer-Encoding: chunked", body=b"0\r\nContent-Length: 44\r\n\r\n" + SMUGGLED)),
    ("bare CR inside a header value", B400, req(b"X-A: a\rb", line=b"GET /x/now HTTP/1.1")),
    ("NUL byte in a header value", B400, req(b"X-A: a\x00b", line=b"GET /x/now HTTP/1.1")),
    ("space before the colon (Content-Length : 5)", B400, req("Content-Length : 5", body=b"hello" + SMUGGLED)),
    ("invalid character in a header name", B400, req("X(A): b", line=b"GET /x/now HTTP/1.1")),
    ("invalid method token G@T", B400, req(line=b"G@T /x/now HTTP/1.1")),
    ("two Host headers", B400, req("Host: other", line=b"GET /x/now HTTP/1.1")),
    ("request line HTTP/9.9", {505, 400}, req(line=b"GET /x/now HTTP/9.9")),
]


def probe(port, name, allowed, data):
    with Conn(port, timeout=5) as k:
        try:
            k.send(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        st, _, h, body, line = k.try_response()
        closed = k.closed_within(3)
        extra = k.buf
    want = "/".join(map(str, sorted(allowed)))
    F.check(st in allowed, f"[{name}] -> {want} (got {line!r} {body[:60]!r})")
    F.check(st is None or h.get("connection", "").lower() == "close", f"[{name}] answer says Connection: close")
    F.check(closed, f"[{name}] server closes the connection after refusing")
    F.check(extra == b"", f"[{name}] nothing answered after the refusal (smuggled request?): {extra[:120]!r}")
    return st in allowed and closed and not extra


def control(port):
    """The same framing, written correctly, IS served: the vectors fail for their fault alone."""
    with Conn(port) as k:
        k.send(req("Content-Length: 5", body=b"hello", line=b"GET /x/now HTTP/1.1") + b"GET /x/now HTTP/1.1\r\nHost: t\r\n\r\n")
        a, b = k.try_response(), k.try_response()
        F.check(a[0] == 200 and b[0] == 200, f"control: GET with a Content-Length body, then a GET -> 200, 200 ({a[4]!r} {b[4]!r})")
    with Conn(port) as k:
        k.send(req("Transfer-Encoding: chunked", body=b"5\r\nhello\r\n0\r\n\r\n", line=b"GET /x/now HTTP/1.1"))
        F.check(k.try_response()[0] == 200, "control: GET with a well-formed chunked body -> 200")


with Server("ramp", "--port", "0") as s:
    control(s.port)
    refused = [name for name, allowed, data in VECTORS if probe(s.port, name, allowed, data)]
    print(f"{len(refused)} of {len(VECTORS)} vectors refused and closed")
    F.check(len(VECTORS) >= 12, "at least 12 vectors")
    F.check(s.proc.poll() is None, "server still running after every vector")
    with Conn(s.port) as k:
        k.send(b"GET /x/now HTTP/1.1\r\nHost: t\r\n\r\n")
        st, _, _, body, line = k.try_response()
        F.check(st == 200 and body == b'{"route":"now"}', f"/x/now answered normally after all vectors ({line!r})")
    F.check(s.stop() == 0, "ramp exits 0 on SIGTERM after the vectors")
F.done()
