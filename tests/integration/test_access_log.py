"""The access log (docs/reference.md, Access log: `--access-log` / `M0_ACCESS_LOG`,
one JSON line per response, answered on the loop or by a pool thread).

Proves: with --access-log every response, including HEAD, 404, 405, OPTIONS,
pipelined ones and refusals (414, 400), produces exactly one line on stdout,
in response order, written while serving (not at exit); each line is one JSON
object with `method`, `path` (the target without its query, or with it) and
`status` matching the request; a path with a quote and a backslash is escaped
so the line stays valid JSON; every line, refusals included, has the same core
shape (`time`, `status`); a refusal whose request line was read whole still
names its method and path; M0_ACCESS_LOG=1 turns it on; without either,
stdout stays empty; nothing of it goes to stderr. With a pool
(--blocking-threads), the responses its threads answer are logged too, once
each, beside the loop's (they were missing). A request that brings a valid
`traceparent` gets it back in its response and its trace id in its log line
(`trace`): answered on the loop, by a pool thread (pipelined in one batch,
each its own id), and by an application actor on a thread; a request without
one, or with a malformed one, gets neither.
"""
import json
import os
import tempfile
import time

from harness import Failures, Server
from rawhttp import Conn, request

F = Failures()


def wait_lines(s, n, timeout=5.0):
    """Waits (bounded) until stdout holds at least n lines; returns them."""
    deadline = time.monotonic() + timeout
    while True:
        lines = [l for l in s.stdout().splitlines() if l.strip()]
        if len(lines) >= n or time.monotonic() > deadline:
            return lines
        time.sleep(0.02)


def parse(lines):
    out = []
    for l in lines:
        try:
            doc = json.loads(l)
            F.check(isinstance(doc, dict), f"line is a JSON object: {l!r}")
        except ValueError:
            F.check(False, f"line is valid JSON: {l!r}")
            doc = {}
        out.append(doc)
    return out


def path_matches(logged, target):
    base = target.split("?", 1)[0]
    return logged in (base, target)


def served_lines():
    # (method, target, expected status); sent on one keep-alive connection, then a pipelined batch
    plan = [("GET", "/x/now", 200), ("HEAD", "/x/now", 200), ("GET", "/x/search?sel=2&k=3", 200),
            ("GET", "/no/such", 404), ("POST", "/x/now", 405), ("OPTIONS", "/x/search", 204),
            ("GET", '/q"uo\\te', 404)]
    batch = [("GET", "/x/now", 200), ("GET", "/x/slow?ms=1", 200), ("GET", "/x/gone", 404),
             ("GET", "/x/search?sel=9&k=1", 200), ("HEAD", "/x/search?sel=9&k=1", 200)]
    with Server("ramp", "--port", "0", "--access-log", "--max-uri-bytes", "256") as s:
        with Conn(s.port) as k:
            for m, t, want in plan:
                k.send(request(m, t, [("Content-Length", "0")] if m == "POST" else []))
                st = k.try_response(head=m == "HEAD")[0]
                F.check(st == want, f"{m} {t} -> {want} (got {st})")
            k.send(b"".join(request(m, t) for m, t, _ in batch))
            for m, t, want in batch:
                F.check(k.try_response(head=m == "HEAD")[0] == want, f"pipelined {m} {t} -> {want}")
        n = len(plan) + len(batch)
        lines = wait_lines(s, n)
        F.check(len(lines) == n, f"{n} responses -> {n} lines while serving (got {len(lines)})")
        for (m, t, want), doc in zip(plan + batch, parse(lines)):
            F.check(doc.get("method") == m and path_matches(doc.get("path"), t) and doc.get("status") == want,
                    f"line for {m} {t} {want}: {doc}")

        # Refusals are responses too: one line each.
        with Conn(s.port) as k:
            k.send(request("GET", "/x/now?" + "u" * 300))
            F.check(k.try_response()[0] == 414, "long URI -> 414")
        with Conn(s.port) as k:
            k.send(b"GET /x/now HTTP/1.1\r\n\r\n")
            F.check(k.try_response()[0] == 400, "Host-less 1.1 -> 400")
        lines = wait_lines(s, n + 2)
        F.check(len(lines) == n + 2, f"2 refusals -> 2 more lines (got {len(lines) - n})")
        docs = parse(lines)
        refusals = docs[n:]
        F.check([d.get("status") for d in refusals] == [414, 400], f"refusal lines carry their status: {refusals}")
        if len(refusals) == 2:
            F.check(refusals[1].get("method") == "GET" and refusals[1].get("path") == "/x/now",
                    f"a 400 whose request line was whole names method and path: {refusals[1]}")
        shape = [d for d in docs if not ({"time", "status"} <= d.keys())]
        F.check(not shape, f"every line, refusals included, has time and status: {shape}")
        F.check('"uo' not in s.stderr() and "/x/search" not in s.stderr(), "no access lines on stderr")
        F.check(s.stop() == 0, "ramp --access-log exits 0")


def pool_lines():
    """Views answered by a pool thread log their line like the loop's."""
    plan = [("GET", "/x/search?sel=1&k=2", 200), ("GET", "/x/now", 200), ("HEAD", "/x/slow?ms=1", 200),
            ("GET", "/x/slow?ms=1", 200), ("GET", "/x/gone", 404)]
    with Server("ramp", "--port", "0", "--access-log", "--blocking-threads", "1") as s:
        with Conn(s.port) as k:
            for m, t, want in plan:
                k.send(request(m, t))
                F.check(k.try_response(head=m == "HEAD")[0] == want, f"pool: {m} {t} -> {want}")
            k.send(b"".join(request(m, t) for m, t, _ in plan))  # pipelined: loop and pool answers interleaved
            for m, t, want in plan:
                F.check(k.try_response(head=m == "HEAD")[0] == want, f"pool, pipelined: {m} {t} -> {want}")
        lines = wait_lines(s, 2 * len(plan))
        docs = parse(lines)
        F.check(len(docs) == 2 * len(plan), f"{2 * len(plan)} responses, loop and pool -> as many lines (got {len(docs)})")
        got = sorted((d.get("method"), d.get("path"), d.get("status")) for d in docs)
        want = sorted((m, t.split("?", 1)[0], st) for m, t, st in plan * 2)
        F.check(got == want, f"one line per response, pool ones included: {got}")
        F.check(all(d.get("bytes") == 0 for d in docs if d.get("method") == "HEAD"), "a HEAD logs 0 bytes")
        s.stop()


def tp(i, flags="01"):
    return f"00-{(i << 64) | i:032x}-{0xabc0 + i:016x}-{flags}"  # both halves of the id set


def trace_ids():
    """Each request's own trace id, on the loop, in the pool, at an actor."""
    plan = [("/x/now", tp(0x11)), ("/x/slow?ms=1", tp(0x22, "00")), ("/x/now", None), ("/x/slow?ms=1", tp(0x33)),
            ("/x/now", "00-zz" + "0" * 30 + "-" + "1" * 16 + "-01")]  # malformed: no id
    with Server("ramp", "--port", "0", "--access-log", "--blocking-threads", "1") as s:
        with Conn(s.port) as k:  # pipelined: the two pool requests ride one batch
            k.send(b"".join(request("GET", t, [("traceparent", v)] if v else []) for t, v in plan))
            for t, v in plan:
                st, _, hdrs, _, _ = k.try_response()
                want = v if v and "zz" not in v else None
                F.check(st == 200 and hdrs.get("traceparent") == want,
                        f"trace: {t} with {v} answers traceparent {want} (got {st}, {hdrs.get('traceparent')})")
        docs = parse(wait_lines(s, len(plan)))
        got = sorted((d.get("path"), d.get("trace") or "") for d in docs)
        want = sorted((t.split("?", 1)[0], v[3:35] if v and "zz" not in v else "") for t, v in plan)
        F.check(got == want, f"trace: each log line names its own request's trace id: {got} (want {want})")
        s.stop()
    fd, topo = tempfile.mkstemp(prefix="topo-", suffix=".json", dir=os.environ.get("TMPDIR", "/tmp"))
    with os.fdopen(fd, "w") as f:
        json.dump({"mode": "single", "app_actors": [{"name": "echo", "placement": "thread"}]}, f)
    try:
        with Server("host_check", "--port", "0", "--access-log", "--topology", topo) as s:
            with Conn(s.port) as k:
                k.send(request("GET", "/actor/echo", [("traceparent", tp(0x44))]) + request("GET", "/actor/echo"))
                st, _, hdrs, _, _ = k.try_response()
                F.check(st == 200 and hdrs.get("traceparent") == tp(0x44),
                        f"trace: an actor's answer carries the request's traceparent ({st}, {hdrs})")
                st, _, hdrs, _, _ = k.try_response()
                F.check(st == 200 and "traceparent" not in hdrs, f"trace: and none without one ({st}, {hdrs})")
            docs = [d for d in parse(wait_lines(s, 2)) if d.get("path") == "/actor/echo"]
            F.check([d.get("trace") for d in docs] == [tp(0x44)[3:35], None],
                    f"trace: the actor's log lines name the id, or none ({docs})")
            s.stop()
    finally:
        os.unlink(topo)


def switched_by_env_and_off():
    with Server("ramp", "--port", "0", env={"M0_ACCESS_LOG": "1"}) as s:
        with Conn(s.port) as k:
            k.send(request("GET", "/x/now"))
            k.try_response()
        lines = wait_lines(s, 1)
        doc = parse(lines[:1])[0] if lines else {}
        F.check(doc.get("path") == "/x/now" and doc.get("status") == 200, f"M0_ACCESS_LOG=1 logs too: {lines}")
        s.stop()
    with Server("ramp", "--port", "0") as s:
        with Conn(s.port) as k:
            for _ in range(3):
                k.send(request("GET", "/x/now"))
                k.try_response()
        s.stop()  # a line that would be written is written before the exit (the drain): none may wait for time
        F.check(s.stdout() == "", f"without --access-log stdout stays empty ({s.stdout()[:100]!r})")


served_lines()
pool_lines()
trace_ids()
switched_by_env_and_off()
F.done()
