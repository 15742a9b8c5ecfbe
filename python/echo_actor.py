#!/usr/bin/env python3
"""The echo actor in Python: one instance of `echo` at URL.

    python/echo_actor.py URL [INSTANCE]

URL is where the host listens for the actor's instances (the doctor prints
it under topology.app_actors[].url). Every request is answered 200 with a
JSON body naming this process, the instance, the method, the path and the
body. Messages as apps/echo_actor/echo.h answers them: a call of type 1
(ECHO) is answered type 2 with {"actor":"echo","pid":P,"instance":I,
"data":D}; each type 3 (COUNT) is counted, and a call of type 4 (COUNTED)
answered type 4 with {"instance":I,"counted":N}; others get no answer.
GET /actor/stream is answered in pieces as echo.h's (?n=N&size=S&sse=1&ms=M),
from a thread of its own (m0actor's Request.writer).
Exits 0 on the host's STOP, SIGTERM or SIGINT; 1 when URL cannot be
dialed; 2 on a usage error. The wire is docs/wire.md; m0actor.py beside this
file speaks it.
"""

import json
import os
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import m0actor  # noqa: E402


def main(argv):
    if len(argv) not in (2, 3):
        print("usage: echo_actor.py URL [INSTANCE]", file=sys.stderr)
        return 2
    url = argv[1]
    try:
        instance = int(argv[2]) if len(argv) == 3 else 0
    except ValueError:
        print("echo_actor: INSTANCE must be a number, not %r" % argv[2], file=sys.stderr)
        return 2
    pid = os.getpid()

    def stream(w, n, size, sse, ms):
        try:
            for i in range(n):
                if ms:
                    time.sleep(ms / 1000)
                w.write(("data: %d\n\n" % i).encode() if sse else bytes([97 + i % 26]) * (size - 1) + b"\n")
            w.end()
        except BrokenPipeError:
            print("echo: stream of instance %d: the client left after %d pieces" % (instance, i), file=sys.stderr,
                  flush=True)
            w.end()
        except Exception:
            w.abort()

    def receive(req):
        if req.path == "/actor/stream":
            q = dict(urllib.parse.parse_qsl(req.target.partition("?")[2]))
            n, size, ms = (min(max(int(q.get(k, d)), lo), hi) for k, d, lo, hi in
                           (("n", 4, 0, 1000000), ("size", 16, 1, 262144), ("ms", 0, 0, 1000)))
            sse = q.get("sse") == "1"
            w = req.writer(200, "text/event-stream" if sse else "text/plain", [("X-Echo-Pid", str(pid))])
            threading.Thread(target=stream, args=(w, n, size, sse, ms), daemon=True).start()
            return None
        body = json.dumps({"actor": "echo", "pid": pid, "instance": instance, "method": req.method,
                           "path": req.path, "body": req.body.decode("utf-8", errors="replace")},
                          separators=(",", ":"))
        return 200, [("Content-Type", "application/json")], body.encode("utf-8")

    counted = [0]

    def message(mtype, data):
        if mtype == 3:
            counted[0] += 1
        if mtype == 1:
            return 2, json.dumps({"instance": instance, "actor": "echo", "pid": pid,
                                  "data": data.decode("utf-8", errors="replace")}, separators=(",", ":"))
        if mtype == 4:
            return 4, json.dumps({"instance": instance, "counted": counted[0]}, separators=(",", ":"))
        return None

    def connected(url):
        print("echo_actor: instance %d of echo at %s (pid %d)" % (instance, url, pid), file=sys.stderr, flush=True)

    return m0actor.run(url, receive, instance, on_connect=connected, on_message=message)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
