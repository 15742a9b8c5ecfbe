"""HTTP/1.1 pipelining on a real ramp server (docs/behaviour.md, HTTP:
"pipelining (answered in order)").

Proves: 16 GETs to different routes (/x/now, /x/search?sel=N&k=1, /x/slow?ms=0,
an unknown path) written in ONE send come back as 16 whole responses in request
order, each one identifiable as the answer to its own request; a slow request
at the head of a pipeline does not let the fast ones behind it overtake it; the
same holds when the pipeline arrives split at awkward byte boundaries (one byte
per send across two requests, splits inside "\\r\\n\\r\\n" and inside a header
name); and the connection stays usable afterwards.
"""
import json
import time

from harness import Failures, Server
from rawhttp import Conn, request

F = Failures()


def build_batch():
    """16 requests; for each, a function that says whether a response is its answer."""
    reqs, expect = [], []
    for i in range(16):
        kind = i % 4
        if kind == 0:
            reqs.append(request("GET", "/x/now"))
            expect.append(("now", lambda st, b: st == 200 and b == b'{"route":"now"}'))
        elif kind == 1:
            sel = i + 1  # distinct sel per request: the body names which request it answers
            reqs.append(request("GET", f"/x/search?sel={sel}&k=1"))
            expect.append((f"search sel={sel}",
                           lambda st, b, sel=sel: st == 200 and json.loads(b).get("sel") == sel
                           and json.loads(b).get("k") == 1))
        elif kind == 2:
            reqs.append(request("GET", "/x/slow?ms=0"))
            expect.append(("slow", lambda st, b: st == 200 and b == b'{"ms":0}'))
        else:
            reqs.append(request("GET", f"/x/missing{i}"))
            expect.append(("404", lambda st, b: st == 404))
    return reqs, expect


def read_all(k, expect, label, timeout=10):
    got = []
    for name, ok in expect:
        try:
            st, _, h, body, line = k.read_response(timeout=timeout)
        except Exception as e:  # Closed / TimeoutError: report and stop
            F.check(False, f"{label}: response {len(got) + 1} ({name}) missing: {e}")
            return got
        got.append((name, st, body))
        F.check(ok(st, body), f"{label}: response {len(got)} is the answer to {name} ({line!r} {body[:80]!r})")
    return got


def one_send(port):
    reqs, expect = build_batch()
    with Conn(port) as k:
        k.send(b"".join(reqs))
        got = read_all(k, expect, "one send")
        F.check(len(got) == 16, f"16 pipelined requests -> 16 responses (got {len(got)})")
        F.check(k.buf == b"", f"nothing after the 16th response ({k.buf[:80]!r})")
        k.send(request("GET", "/x/now"))
        F.check(k.read_response()[3] == b'{"route":"now"}', "connection usable after the pipeline")


def slow_first(port):
    with Conn(port) as k:
        t0 = time.monotonic()  # before the send: the view's 300 ms all come after it
        k.send(request("GET", "/x/slow?ms=300") + request("GET", "/x/now") + request("GET", "/x/search?sel=42&k=1"))
        st1, _, _, b1, _ = k.read_response()
        first_at = time.monotonic() - t0
        st2, _, _, b2, _ = k.read_response()
        st3, _, _, b3, _ = k.read_response()
        F.check(st1 == 200 and b1 == b'{"ms":300}' and first_at >= 0.25,
                f"slow head of pipeline answered first, after its 300 ms ({first_at:.2f}s, {b1!r})")
        F.check(b2 == b'{"route":"now"}', f"then /x/now ({b2!r})")
        F.check(st3 == 200 and json.loads(b3).get("sel") == 42, f"then /x/search sel=42 ({b3!r})")


def awkward_splits(port):
    reqs, expect = build_batch()
    data = b"".join(reqs[:6])
    with Conn(port) as k:
        # The first two requests one byte per send, with tiny pauses so the
        # server really sees each byte as a separate read.
        two = len(reqs[0]) + len(reqs[1])
        for i in range(two):
            k.send(data[i:i + 1])
            if i % 7 == 0:
                time.sleep(0.002)
        # The rest cut inside "\r\n\r\n", inside a header name and mid request line.
        rest = data[two:]
        cuts = sorted({rest.find(b"\r\n\r\n") + 1, rest.find(b"Host") + 2, rest.find(b"HTTP/1.1") + 5,
                       rest.find(b"\r\n\r\n") + 3, len(rest) - 1})
        prev = 0
        for c in cuts + [len(rest)]:
            k.send(rest[prev:c])
            prev = c
            time.sleep(0.02)
        got = read_all(k, expect[:6], "split sends")
        F.check(len(got) == 6, f"6 byte-split pipelined requests -> 6 responses (got {len(got)})")

    # Two whole requests and half of a third in one send, the rest later.
    with Conn(port) as k:
        third = request("GET", "/x/search?sel=99&k=1")
        k.send(reqs[0] + reqs[1] + third[:11])
        a = k.read_response()
        b = k.read_response()
        time.sleep(0.1)
        k.send(third[11:])
        c = k.read_response()
        F.check(a[3] == b'{"route":"now"}' and json.loads(b[3]).get("sel") == 2 and json.loads(c[3]).get("sel") == 99,
                f"two whole + a torn third: in order ({a[4]!r} {b[3][:30]!r} {c[3][:30]!r})")


with Server("ramp", "--port", "0") as s:
    one_send(s.port)
    slow_first(s.port)
    awkward_splits(s.port)
    one_send(s.port)  # again, after the split traffic: the server kept no bad state
    F.check(s.stop() == 0, "ramp exits 0 on SIGTERM")
F.done()
