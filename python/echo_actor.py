#!/usr/bin/env python3
"""The echo actor in Python: one instance of `echo` at URL.

    python/echo_actor.py URL [INSTANCE]

URL is where the host listens for the actor's instances (the doctor prints
it under topology.app_actors[].url). Every request is answered 200 with a
JSON body naming this process, the instance, the method, the path and the
body. Exits 0 on the host's STOP, SIGTERM or SIGINT; 1 when URL cannot be
dialed; 2 on a usage error. The wire is docs/wire.md; m0actor.py beside this
file speaks it.
"""

import json
import os
import sys

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

    def receive(req):
        body = json.dumps({"actor": "echo", "pid": pid, "instance": instance, "method": req.method,
                           "path": req.path, "body": req.body.decode("utf-8", errors="replace")},
                          separators=(",", ":"))
        return 200, [("Content-Type", "application/json")], body.encode("utf-8")

    def connected(url):
        print("echo_actor: instance %d of echo at %s (pid %d)" % (instance, url, pid), file=sys.stderr, flush=True)

    return m0actor.run(url, receive, instance, on_connect=connected)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
