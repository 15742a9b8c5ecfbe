"""Split and interleave (issue 35.2): every request reaches the server whole,
one byte per write, and cut at random places (rawhttp.Splits: seeded, the
seed printed, M0_TEST_SEED=S replays it), with the next request, or the FIN
(shutdown(SHUT_WR)), in the same write as the end of the last; what comes
back must be the same bytes as when it was sent whole.

Proves, against the real host_check in each mode (single, --threads 2,
--workers 2, --blocking-threads 1 where GET /slow runs on the pool):
- HTTP: GET, HEAD, POST with Content-Length (a view on the loop and the
  in-host actor `echo`), chunked with extensions and trailers,
  `Expect: 100-continue` (the body sent once the 100 came, and sent right
  behind the head), pipelines mixing all of these (404, 405, OPTIONS, the
  pool), a 100 KiB body between two requests, HTTP/1.0 keep-alive, a
  pipeline ended by `Connection: close`, a request (on the loop, the pool,
  an actor) then half of another and the FIN (answered, then closed), and
  smuggling shapes
  (docs/behaviour.md, Request smuggling) behind a good request: each in
  every cutting, with and without a FIN right behind it, answered exactly as
  when sent whole: the same responses (status line, headers but Date,
  framing, body; a pid and a worker's number read as the same), in order,
  nothing more, and (without a FIN, on a connection that stays open) a
  request sent after them answered as the next one.
- SSE: GET /events, and with Last-Event-ID (the held frames after it, from
  the next id), cut the same ways with the next request or the FIN right
  behind: the stream's head as when whole, whole frames with consecutive ids
  and never an HTTP response in the stream (a stream reads nothing more).
- The actor wire (docs/wire.md): an outside instance (wire_actor.py mirror,
  speaking the wire over nng itself) answers each request with the request
  as its record carried it: a request cut anywhere on its way in reaches the
  actor byte for byte as when sent whole (method, target, every header in
  order, the body de-chunked, a 64 KiB one too), and its reply reaches the
  client whole, in order among requests the loop answered itself.
nng frames its messages itself (one message, one envelope), so there is no
cutting on the wire's side to try.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

from harness import BIN, Failures, sanitizer_report, Prefork, Server, run, wait_for
from rawhttp import Conn, Splits, parse_responses, request

F = Failures()
SP = Splits()
F.replay = f"M0_TEST_SEED={SP.root}"
HERE = os.path.dirname(os.path.abspath(__file__))
TMP = tempfile.mkdtemp(prefix="m0-split-")
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
PROBE = request("GET", "/health", [("Connection", "close")])
SMUGGLED = b"GET /health?smuggled HTTP/1.1\r\nHost: t\r\n\r\n"


def cl(method, path, body, headers=()):
    return request(method, path, list(headers) + [("Content-Length", str(len(body)))], body)


def chunked(path, pieces, trailers=(), ext=b""):
    body = b"".join(b"%x%s\r\n%s\r\n" % (len(p), ext if i == 0 else b"", p) for i, p in enumerate(pieces))
    body += b"0\r\n" + b"".join(b"%s: %s\r\n" % t for t in trailers) + b"\r\n"
    return request("POST", path, [("Transfer-Encoding", "chunked")], body)


class Case:
    """Requests sent as `steps` (lists of messages; between two steps the
    client waits for `100 Continue`), `heads[i]` when request i is a HEAD,
    `want` the statuses of the final answers (or `alt`), each a status or
    (status, what its body holds when sent whole), `closes` when the server
    closes after the last, `drop_1xx` when a 100 may or may not come (the
    body was right behind the head); `fins` whether it is sent without a
    FIN behind it, with one, or both."""

    def __init__(self, name, steps, want, heads=(), closes=False, drop_1xx=False, alt=None, fins=(False, True)):
        self.bodies = [w[1] if isinstance(w, tuple) else "" for w in want]
        self.want = [w[0] if isinstance(w, tuple) else w for w in want]
        self.name, self.steps, self.alt = name, steps, alt or self.want
        self.heads, self.closes, self.drop_1xx, self.fins = list(heads), closes, drop_1xx, fins


def http_cases():
    """The HTTP cases. POOL runs on the pool thread under
    --blocking-threads, on the loop otherwise."""
    pool = POOL
    post = cl("POST", "/loop/echo", b"hello, split world")
    chunk = chunked("/loop/echo", [b"abc", b"\r\n:x", b"d" * 40], [(b"X-Trailer", b"1"), (b"X-T2", b"two")],
                    ext=b";name=val")
    actor = cl("POST", "/actor/echo", b'{"a":"b"}')
    head100 = request("POST", "/loop/echo", [("Content-Length", "11"), ("Expect", "100-continue")])
    # What each answer's body holds: the pipelines' answers are told apart.
    ok, slow = (200, '{"status":"ok"}'), (200, '{"ms":0}')
    posted, chunked_in = (200, '"body":"hello, split world"'), (200, '"body":"abc\\r\\n:xddd')
    acted = (200, '"path":"/actor/echo","body":"{\\"a\\":\\"b\\"}"')
    cases = [
        Case("GET", [[request("GET", "/health", [("Accept", "*/*"), ("X-Long", "v" * 300)])]], [ok]),
        Case("HEAD", [[request("HEAD", "/health")]], [200], heads=[True]),
        Case("POST Content-Length", [[post]], [posted]),
        Case("POST to an actor", [[actor]], [acted]),
        Case("chunked with trailers", [[chunk]], [chunked_in]),
        Case("pool route", [[request("GET", pool), request("HEAD", pool)]], [slow, 200], heads=[False, True]),
        Case("Expect: 100-continue, body after the 100", [[head100], [b"hello world"]], [(200, '"body":"hello world"')]),
        Case("Expect: 100-continue, body right behind", [[head100 + b"hello world"]], [(200, '"body":"hello world"')],
             drop_1xx=True),
        Case("pipeline", [[request("GET", "/health"), request("HEAD", "/health"), post, request("GET", pool),
                           chunk, request("GET", "/missing"), actor, request("DELETE", "/health"),
                           request("OPTIONS", "/health"), cl("POST", "/loop/echo", b"")]],
             [ok, 200, posted, slow, chunked_in, 404, acted, 405, 204, (200, '"body":""')],
             heads=[False, True]),
        Case("a 100 KiB body between two requests",
             [[request("GET", "/health"), cl("POST", "/loop/echo", b"0123456789abcdef" * 6400), request("GET", pool)]],
             [ok, (200, '"body":"' + "0123456789abcdef" * 6400 + '"'), slow]),
        Case("HTTP/1.0 keep-alive, then 1.1", [[request("GET", "/health", [("Connection", "keep-alive")], version="HTTP/1.0"),
                                                request("GET", "/health")]], [ok, ok]),
        # A request, then the start of another and the FIN: the first is
        # answered, the torn one cannot be, and the server closes.
        Case("a request, then half of one", [[post, request("GET", pool)[:9]]], [posted], closes=True, fins=(True,)),
        Case("a pool or actor request, then half of one", [[request("GET", pool), actor, b"POST /loop/echo HTTP/1.1\r\nHo"]],
             [slow, acted], closes=True, fins=(True,)),
        Case("pipeline ended by Connection: close",
             [[post, request("GET", pool), request("GET", "/health", [("Connection", "close")]), SMUGGLED]],
             [posted, slow, ok], closes=True),
    ]
    # Smuggling shapes behind a good request: the good one answered, the
    # bad one 400 (or 501 for a coding it does not know) and the connection
    # closed, the request hidden behind it never answered.
    def bad(*headers, body=b"", line=b"POST /loop/echo HTTP/1.1"):
        return line + b"\r\nHost: t\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + body

    for name, data in [
        ("Content-Length + Transfer-Encoding", bad(b"Content-Length: 44", b"Transfer-Encoding: chunked",
                                                     body=b"0\r\n\r\n" + SMUGGLED)),
        ("two Content-Length", bad(b"Content-Length: 5", b"Content-Length: 6", body=b"hello!" + SMUGGLED)),
        ("Content-Length '5, 5'", bad(b"Content-Length: 5, 5", body=b"hello" + SMUGGLED)),
        ("Transfer-Encoding: gzip, chunked", bad(b"Transfer-Encoding: gzip, chunked", body=b"0\r\n\r\n" + SMUGGLED)),
        ("chunk size 'zz'", bad(b"Transfer-Encoding: chunked", body=b"zz\r\nhello\r\n0\r\n\r\n" + SMUGGLED)),
        ("chunk data longer than its size", bad(b"Transfer-Encoding: chunked", body=b"3\r\nhello\r\n0\r\n\r\n" + SMUGGLED)),
        ("Content-Length in the trailers", bad(b"Transfer-Encoding: chunked",
                                               body=b"0\r\nContent-Length: 44\r\n\r\n" + SMUGGLED)),
        ("obsolete line folding", bad(b"X-A: a", b" Transfer-Encoding: chunked", b"Content-Length: 5",
                                      body=b"hello" + SMUGGLED)),
        ("bare LF", b"GET /health HTTP/1.1\nHost: t\n\n" + SMUGGLED),
        ("bare CR in a header value", bad(b"X-A: a\rb", line=b"GET /health HTTP/1.1")),
        ("space before the colon", bad(b"Content-Length : 5", body=b"hello" + SMUGGLED)),
        ("two Host headers", bad(b"Host: other", line=b"GET /health HTTP/1.1") + SMUGGLED),
    ]:
        cases.append(Case(f"smuggling: {name}", [[request("GET", "/health"), data]], [ok, 400], closes=True,
                          alt=[200, 501] if "gzip" in name else None))  # 501: RFC 9112 6.1, a coding not known
    return cases


# ---- what an answer is, read the same however it was cut --------------------

PID_RE = re.compile(rb'"pid":\d+')


def normal(responses, drop_1xx):
    """Each response as text: its status line and headers but Date, a
    worker's number and pid read as W and P, Content-Length as the
    normalised body's; then the body."""
    out = []
    for r in responses:
        if drop_1xx and r.status < 200:
            continue
        body = PID_RE.sub(b'"pid":P', r.body)
        lines = [r.head[0]]
        for line in r.head[1:]:
            k = line.partition(":")[0].lower()
            if k == "date":
                continue
            if k == "x-worker":
                line = "x-worker: W"
            if k == "content-length" and int(line.partition(":")[2]) == len(r.body):  # not a HEAD's
                line = f"Content-Length: {len(body)}"
            lines.append(line)
        out.append("\r\n".join(lines) + "\r\n\r\n" + body.decode("latin-1"))
    return out


def exchange(port, case, mode, fin):
    """Sends the case cut as mode says; (the answers as normal() reads
    them, or None, and what went wrong)."""
    heads = case.heads + [False] * (len(case.want) + 1 - len(case.heads))
    with Conn(port, timeout=10) as k:
        for i, msgs in enumerate(case.steps):
            last = i == len(case.steps) - 1
            k.send_split(msgs, mode, fin=fin and last)
            if not last and not k.wait_bytes(CONTINUE):
                return None, f"no 100 Continue after the head ({k.buf[:200]!r})"
        want = len(case.want)
        if not fin and not case.closes:
            _, err = k.read_responses(want, heads, keep=True)
            if err:
                return None, f"{want} answers not in: {err} ({k.buf[:300]!r})"
            k.send(PROBE)
            want += 1
        data, closed = k.read_until_closed()
    if not closed:
        return None, f"the server did not close ({data[-200:]!r})"
    try:
        got, rest = parse_responses(data, heads)
    except ValueError as e:
        return None, f"{e} in {data[:400]!r}"
    finals = [r for r in got if r.status >= 200]
    if len(finals) != want or rest:
        return None, f"{len(finals)} answers where {want} were due, {len(rest)} bytes after them ({data[-300:]!r})"
    return normal(got, case.drop_1xx), ""


def diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"answer {i + 1}: {y[:300]!r}, whole: {x[:300]!r}"
    return f"{len(b)} answers, whole {len(a)}"


def every_cutting(port, label, cases, n_random):
    """Each case sent whole (its answers checked: statuses, each body its
    own), then in every other cutting (answered as when whole), each with
    and without a FIN right behind it."""
    for case in cases:
        for fin in case.fins:
            tag = f"{label}: {case.name}{' + FIN' if fin else ''}"
            modes = SP.modes(f"{label}/{case.name}/{fin}", n_random)
            ref, err = exchange(port, case, modes[0], fin)
            probe = [200] if not fin and not case.closes else []
            finals = [r for r in ref or [] if int(r.split(" ", 2)[1]) >= 200]
            statuses = [int(r.split(" ", 2)[1]) for r in finals]
            F.check(ref is not None and statuses in (case.want + probe, case.alt + probe)
                    and all(b in r.split("\r\n\r\n", 1)[1] for b, r in zip(case.bodies, finals)),
                    f"{tag}, whole: answers {statuses}, each its own ({err or [r[-80:] for r in finals]})")
            if ref is None:
                continue
            for mode in modes[1:]:
                got, err = exchange(port, case, mode, fin)
                F.check(got == ref, f"{tag}, {mode}: as when whole ({err or diff(ref, got)})")


# ---- SSE ---------------------------------------------------------------------------

FRAME_RE = re.compile(rb"id: (\d+)\nevent: beat\ndata: \{\"beat\":\d+,\"pid\":\d+\}\n\n")


def stream_read(port, msgs, mode, fin, frames):
    """Opens a stream (msgs: its request and what follows it in the same
    write) cut as mode says: (head as normal() reads it, [frame ids], error)."""
    with Conn(port, timeout=10) as k:
        k.send_split(msgs, mode, fin=fin)
        if fin:
            data, closed = k.read_until_closed()
            if not closed:
                return None, [], f"a stream whose client half-closed was not closed ({data[-200:]!r})"
        else:
            k.wait_until(lambda b: b"\r\n\r\n" in b and len(FRAME_RE.findall(b.split(b"\r\n\r\n", 1)[1])) >= frames)
            data = k.buf
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return None, [], f"no head ({data[:200]!r})"
    head = normal(parse_responses(data[:end + 4], [True])[0], False)
    body = data[end + 4:]
    ids = [int(i) for i in FRAME_RE.findall(body)]
    whole = b"".join(m.group(0) for m in FRAME_RE.finditer(body))
    if b"HTTP/1." in body:
        return head, ids, f"an HTTP answer inside the stream ({body[:300]!r})"
    if not body.startswith(whole):
        return head, ids, f"bytes that are no frame in the stream ({body[:300]!r})"
    return head, ids, ""


def sse_in(port, label, n_random):
    ev = request("GET", "/events")
    nxt = request("GET", "/health")
    _, ids, _ = stream_read(port, [ev], SP.modes("x", 0)[0], False, 1)
    F.check(ids, f"{label}: SSE: a stream carries a beat ({ids})")
    last = (ids or [3])[0] - 2
    resume = request("GET", "/events", [("Last-Event-ID", str(last))])
    for name, msgs, first in [("GET /events", [ev, nxt], None), ("GET /events with Last-Event-ID", [resume, nxt], last + 1)]:
        for fin in (False, True):
            tag = f"{label}: SSE {name}{' + FIN' if fin else ' + the next request'}"
            ref = None
            for mode in SP.modes(f"{label}/{name}/{fin}", n_random):
                head, ids, err = stream_read(port, msgs[:1] if fin else msgs, mode, fin, 2)
                ref = ref or head
                F.check(head is not None and head == ref and not err, f"{tag}, {mode}: the stream's head as when whole, "
                        f"whole frames ({err or head})")
                F.check(ids == list(range(ids[0], ids[0] + len(ids))) if ids else fin and first is None,
                        f"{tag}, {mode}: consecutive ids ({ids})")
                if first is not None:
                    F.check(ids[:1] == [first], f"{tag}, {mode}: the held frames from {first} ({ids})")
                elif not fin:
                    F.check(len(ids) >= 2, f"{tag}, {mode}: beats come ({ids})")


# ---- the actor wire -------------------------------------------------------------

def wire_cases():
    hdrs = [("X-A", "1"), ("x-lower", "v  with  spaces"), ("X-Empty", ""), ("X-Long", "L" * 2000),
            ("Content-Type", "application/json")]
    big = bytes(range(256)) * 256  # 64 KiB, every byte value
    get = request("GET", "/actor/echo?q=1&r=%20x", hdrs)
    post = cl("POST", "/actor/echo", b'{"k":"v"}\r\n\x00end', hdrs)
    chunk = chunked("/actor/echo", [b"one", b"\r\n", b"three" * 30], [(b"X-Trailer", b"t")], ext=b";e=1")
    got = (200, "GET /actor/echo?q=1&r=%20x HTTP/1.1 path 11\nHost: t\nX-A: 1\nx-lower: v  with  spaces\nX-Empty: \n")
    posted = (200, 'POST /actor/echo HTTP/1.1 path 11\nHost: t\nX-A: 1\n')
    chunked_in = (200, "\n\none\r\nthreethree")
    bigged = (200, "Content-Length: 65536\n\n\x00\x01\x02")
    return [
        Case("wire: GET with headers", [[get]], [got]),
        Case("wire: POST Content-Length", [[post]], [posted]),
        Case("wire: POST chunked", [[chunk]], [chunked_in]),
        Case("wire: POST 64 KiB", [[cl("POST", "/actor/echo", big)]], [bigged]),
        Case("wire: HEAD", [[request("HEAD", "/actor/echo")]], [200], heads=[True]),
        Case("wire: pipeline with loop answers between", [[post, request("GET", "/health"), chunk, get,
                                                          request("GET", "/missing"), cl("POST", "/actor/echo", big)]],
             [posted, (200, '{"status":"ok"}'), chunked_in, got, 404, bigged]),
    ]


def wire_reference_ok(port, label):
    """The mirror's answer to a request sent whole is that request."""
    post = cl("POST", "/actor/echo", b"abc", [("X-A", "1")])
    case = Case("mirror", [[post]], [200])
    got, err = exchange(port, case, SP.modes("x", 0)[0], True)
    want = ("POST /actor/echo HTTP/1.1 path 11\nHost: t\nX-A: 1\nContent-Length: 3\n\nabc")
    F.check(got is not None and got[0].endswith("\r\n\r\n" + want) and "X-Wire: mirror" in got[0],
            f"{label}: the outside instance's answer is the request as sent ({got or err})")


def wire_in(mode_args, label, n_random, cls=Server):
    rd = tempfile.mkdtemp(prefix="rd-", dir=TMP)
    os.chmod(rd, 0o700)
    topo = os.path.join(TMP, f"topo-{len(os.listdir(TMP))}.json")
    with open(topo, "w") as f:
        json.dump({"mode": "single", "app_actors": [{"name": "echo", "placement": "external"}]}, f)
    rc, out, err = run("host_check", "--doctor", "--topology", topo, "--run-dir", rd, *mode_args)
    try:
        url = next(a["url"] for a in json.loads(out.strip().splitlines()[-1])["topology"]["app_actors"]
                   if a["name"] == "echo").replace("<run-dir>", rd)
    except (ValueError, IndexError, KeyError, StopIteration):
        F.check(False, f"{label}: the doctor names echo's url (rc {rc}: {out[-300:]} {err[-300:]})")
        return
    with cls("host_check", "--port", "0", "--metrics-path", "/metrics", "--topology", topo, "--run-dir", rd,
             *mode_args) as s:
        actor = subprocess.Popen([sys.executable, os.path.join(HERE, "wire_actor.py"), url, "mirror"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            def ready():
                with Conn(s.port) as k:
                    k.send(request("GET", "/actor/echo", [("Connection", "close")]))
                    return k.try_response()[0] == 200
            F.check(wait_for(ready, 10, 0.05), f"{label}: the outside instance answers")
            wire_reference_ok(s.port, label)
            every_cutting(s.port, label, wire_cases(), n_random)
            F.check(actor.poll() is None, f"{label}: the outside instance still runs "
                    f"({actor.poll()}: {actor.stderr.read().decode()[-300:] if actor.poll() is not None else ''})")
        finally:
            actor.kill()
            actor.wait(timeout=5)
        F.check(s.stop() == 0, f"{label}: the host exits 0 on SIGTERM")
        F.check(not sanitizer_report(s.stderr()), f"{label}: no sanitizer report ({sanitizer_report(s.stderr())})")
        print(f"{label}: {len(wire_cases())} cases through an outside instance, each in {3 + n_random} cuttings, "
              f"with and without a FIN", flush=True)


# ---- the modes ---------------------------------------------------------------------

ENV = {"M0_HOSTCHECK_PERIOD_MS": "50"}
POOL = "/slow?ms=0"
for label, args, cls, n_random in [
    ("single", [], Server, 5),
    ("--threads 2", ["--threads", "2"], Server, 2),
    ("--workers 2", ["--workers", "2"], Prefork, 2),
    ("--blocking-threads 1", ["--blocking-threads", "1"], Server, 2),
]:
    # A history of 1000 frames (50 s of beats): a Last-Event-ID read at
    # the start of the SSE cases is still held at their end, however loaded.
    with cls("host_check", "--port", "0", "--stream-history", "1000", *args, env=ENV) as s:
        every_cutting(s.port, label, http_cases(), n_random)
        sse_in(s.port, label, n_random)
        F.check(s.proc.poll() is None, f"{label}: the host still serves after every cutting")
        print(f"{label}: {len(http_cases())} HTTP cases and 4 SSE ones, each in {3 + n_random} cuttings, "
              f"with and without a FIN", flush=True)
        F.check(s.stop() == 0, f"{label}: exit 0 on SIGTERM ({s.stderr()[-400:]})")
        F.check(not sanitizer_report(s.stderr()), f"{label}: no sanitizer report ({sanitizer_report(s.stderr())})")

wire_in([], "wire, single", 4)
wire_in(["--workers", "2"], "wire, --workers 2", 2, cls=Prefork)
F.done()
