"""An application that answers with m0_app.handle instead of a views table
(apps/handle_echo): every request reaches the one function, whatever its
method and path. The views table's own answers (404 for an unknown path, 405
with Allow for a known path and another method, 204 with Allow for OPTIONS)
belong to the table and are NOT applied: the app answers those requests
itself. What the host still does for a handle app: HEAD gets the headers and
the Content-Length of the app's answer without its body; a handler that
returns without answering gets a 500 (and a line on stderr); the
--metrics-path is answered on the loop before the handler; pipelined
requests are answered in order.

Proves, without a pool (the handler on the loop: "thread -1"), with
--threads 2, and with --blocking-threads 2 (every request on a pool thread:
"thread 0" or "thread 1", a stream refused with 409 there):
  - GET, DELETE, PUT, PATCH, OPTIONS on known-looking and unknown paths, and
    OPTIONS *, are all the handler's 200 echo of method and target, with no
    Allow header;
  - a POST body reaches the handler whole;
  - HEAD /big?n=1000 has Content-Length 1000 and no body, HEAD /x the length
    of the echo it would send, and the next answer on the connection follows
    at once (no stray body bytes);
  - /silent (the handler returns without answering): 500, and stderr says so;
  - /metrics is the host's Prometheus text;
  - six requests in one send come back as six answers in order;
  - /stream: a server-sent-event stream on the loop, 409 under the pool;
and --doctor says the application answers with a handler.
"""
import json
import re

from harness import Failures, Server, run
from rawhttp import Conn, request

F = Failures()


def is_echo(label, got, method, target, pool, body=b""):
    st, _, h, b, line = got
    m = re.match(rb"(\S+) (\S+)\nworker (\d+) thread (-?\d+)\nbody (\d+)\n", b)
    ok = (st == 200 and m is not None and m.group(1).decode() == method and m.group(2).decode() == target
          and int(m.group(5)) == len(body) and b[m.end():] == body and "allow" not in h
          and (int(m.group(4)) in (0, 1) if pool else int(m.group(4)) == -1))
    F.check(ok, f"{label}: {method} {target} is the handler's 200 echo{' on a pool thread' if pool else ' on the loop'}, "
                f"no Allow ({line!r} {h.get('allow')!r} {b[:60]!r})")
    return m


def mode(label, args, pool):
    with Server("handle_echo", "--port", "0", "--metrics-path", "/metrics", *args) as s:
        with Conn(s.port, timeout=10) as c:
            for method, target in (("GET", "/x"), ("GET", "/no/such/path"), ("DELETE", "/x"), ("PUT", "/x"),
                                   ("PATCH", "/anything"), ("OPTIONS", "/x"), ("OPTIONS", "*")):
                c.send(request(method, target))
                is_echo(label, c.try_response(), method, target, pool)
            c.send(request("POST", "/p", [("Content-Length", "11")], b"hello world"))
            is_echo(label, c.try_response(), "POST", "/p", pool, b"hello world")

            c.send(request("HEAD", "/big?n=1000") + request("GET", "/after-head"))
            st, _, h, b, line = c.try_response(head=True)
            F.check(st == 200 and h.get("content-length") == "1000" and h.get("x-query") == "n=1000",
                    f"{label}: HEAD /big?n=1000: 200, Content-Length 1000 ({line!r} {h})")
            is_echo(f"{label}: after the HEAD, no body bytes:", c.try_response(), "GET", "/after-head", pool)
            c.send(request("HEAD", "/x"))
            st, _, h, b, line = c.try_response(head=True)
            want = len(f"HEAD /x\nworker 0 thread {0 if pool else -1}\nbody 0\n")
            F.check(st == 200 and h.get("content-length") == str(want), f"{label}: HEAD /x: the length of the "
                    f"echo it would send ({h.get('content-length')} vs {want})")
            c.send(request("GET", "/after-head2"))
            is_echo(f"{label}: after HEAD /x,", c.try_response(), "GET", "/after-head2", pool)

            c.send(request("GET", "/silent"))
            st, _, h, b, line = c.try_response()
            F.check(st == 500, f"{label}: /silent (no answer from the handler) is a 500 ({line!r})")
            c.send(request("GET", "/metrics"))
            st, _, h, b, line = c.try_response()
            F.check(st == 200 and b"m0_requests_total{" in b and h.get("content-type", "").startswith("text/plain; version=0.0.4"),
                    f"{label}: /metrics is the host's ({line!r} {b[:60]!r})")

            paths = [f"/p{i}" for i in range(6)]
            c.send(b"".join(request("GET", p) for p in paths))
            order = [is_echo(f"{label}: pipelined", c.try_response(), "GET", p, pool) is not None for p in paths]
            F.check(all(order), f"{label}: six pipelined requests answered in order ({order})")
            F.check(c.buf == b"", f"{label}: nothing after them ({c.buf[:60]!r})")
        with Conn(s.port, timeout=10) as c:
            c.send(request("GET", "/stream"))
            st, _, h, b, line = c.try_response(head=True)
            if pool:
                F.check(st == 409, f"{label}: /stream from a pool thread is refused with 409 ({line!r})")
            else:
                F.check(st == 200 and h.get("content-type") == "text/event-stream",
                        f"{label}: /stream opens a stream on the loop ({line!r} {h})")
        rc = s.stop(timeout=15)
        err = s.stderr()
        F.check(rc == 0, f"{label}: exit 0 on SIGTERM (got {rc})")
        said = re.search(r"(loop \d+|pool\.\d+\.\d+): the view for GET /silent returned without answering; sent 500", err)
        F.check(said is not None and (said.group(1).startswith("pool") == pool),
                f"{label}: stderr names the handler that did not answer:\n{err[-800:]}")


rc, out, err = run("handle_echo", "--doctor")
try:
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    app = checks.get("application", {})
except (ValueError, KeyError) as e:
    app = {"detail": f"unreadable doctor output: {e}: {out[:200]!r}"}
F.check(rc == 0 and app.get("ok") and app.get("detail") == "handle_echo answers with a handler",
        f"--doctor: the application answers with a handler ({app})")
mode("single", [], False)
mode("threads 2", ["--threads", "2"], False)
mode("pool", ["--blocking-threads", "2"], True)
F.done()
