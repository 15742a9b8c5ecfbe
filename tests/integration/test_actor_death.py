"""The requests with an instance that died are answered 502 when the host
learns of the death, not at the next deadline tick (docs/actors.md, the
host's own answers; actors/asks.c, asks_left; service/service.c,
slot_left_tell).

Setup: host_check whose actor `silent` (it takes requests and never
answers) is placed in a spawned process, every actor route of host_check
given a 60 s timeout by the topology file. The tick that checks deadlines
then runs every 7.5 s (a quarter of the shortest bound a loop serves: the
deferred views' 30 s default): before the change, a dead instance's
requests were answered at that tick, up to 7.5 s after the death.

Proves, under --threads 2 and under --workers 2 (where the supervisor's
relay closes the dead instance's legs and each worker learns it from its
door):
- 4 GET /actor/silent in flight (the gauge says 4), the instance SIGKILLed:
  each is answered 502 within a wait of 5 s from the kill (7.5 s after the
  first request, the old tick's, is past it);
- /metrics counts 4 instance_died and nothing in flight after;
- the instance is spawned again and the drain exits 0.
No timing is asserted: the waits are bounds.
"""
import os
import re
import signal
import tempfile
import time
import urllib.request

import harness
from harness import Failures, Prefork, Server, alive, children, environ, wait_for, write_json
from rawhttp import Conn, request

F = Failures()
TMP = tempfile.mkdtemp(prefix="m0-death-")
N = 4
WAIT = 5.0  # less than the old tick's 7.5 s: a 502 that waits for it is not seen in time
ROUTES = [("GET", "/actor/echo", "echo"), ("POST", "/actor/echo", "echo"), ("GET", "/actor/silent", "silent"),
          ("GET", "/actor/relay", "relay")]


def silent_figures(text):
    """silent's m0_actor_ figures: {'name{labels}': value}."""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r'^(m0_actor_\S*actor="silent"\S*) (-?\d+)$', text, re.M)}


def metrics(port):
    return silent_figures(urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode())


def sees_instance(c):
    """Whether the worker (the host) behind keep-alive connection c has silent's instance live."""
    c.send(request("GET", "/metrics"))
    st, _, _, body, _ = c.try_response(timeout=5)
    return st == 200 and silent_figures(body.decode()).get('m0_actor_instances{actor="silent"}') == 1


def figure(port, name, what=None):
    key = f'{name}{{actor="silent"}}' if what is None else f'{name}{{actor="silent",outcome="{what}"}}'
    return metrics(port).get(key)


def instance_pids(sup):
    return {p for p in children(sup) if environ(p).get(b"M0__ACTOR") == b"silent"}


def case(label, mode_args, cls):
    topo = {"app_actors": [{"name": "silent", "placement": "process"}],
            "routes": [{"method": m, "pattern": p, "actor": a, "timeout_ms": 60000} for m, p, a in ROUTES]}
    with cls("host_check", "--port", "0", "--metrics-path", "/metrics", "--topology", write_json(topo, TMP),
             *mode_args) as s:
        pids = wait_for(lambda: (lambda k: k if len(k) == 1 else None)(instance_pids(s.proc.pid)), 10) or set()
        up = wait_for(lambda: figure(s.port, "m0_actor_instances") == 1, 10)
        F.check(pids and up, f"{label}: one spawned instance of silent, live ({pids}, {metrics(s.port)})")
        conns = [Conn(s.port, timeout=WAIT + 5) for _ in range(N)]
        # each connection's worker (under --workers) has had the instance introduced by the relay
        seen = all(wait_for(lambda: sees_instance(c), 10) for c in conns)
        F.check(seen, f"{label}: the loop behind each connection sees the instance")
        for c in conns:
            c.send(request("GET", "/actor/silent"))
        held = wait_for(lambda: figure(s.port, "m0_actor_in_flight") == N, 10)
        F.check(held, f"{label}: {N} requests with the instance ({metrics(s.port)})")
        victim = next(iter(pids), None)
        if victim:
            os.kill(victim, signal.SIGKILL)
        t0 = time.monotonic()
        got = []
        for c in conns:
            st, _, _, _, line = c.try_response(timeout=max(0.01, t0 + WAIT - time.monotonic()))
            got.append(st if st is not None else line)
            c.close()
        F.check(got == [502] * N,
                f"{label}: the {N} requests with the SIGKILLed instance are 502 within {WAIT:.0f} s of the "
                f"death, not at the deadline tick ({got}, {time.monotonic() - t0:.2f} s)")
        counted = wait_for(lambda: figure(s.port, "m0_actor_requests_total", "instance_died") == N
                           and figure(s.port, "m0_actor_in_flight") == 0, 5)
        F.check(counted, f"{label}: /metrics: {N} instance_died, none in flight ({metrics(s.port)})")
        again = wait_for(lambda: (lambda k: k if k and victim not in k else None)(instance_pids(s.proc.pid)), 10)
        F.check(again, f"{label}: the instance is spawned again ({instance_pids(s.proc.pid)})")
        kids = instance_pids(s.proc.pid)
        F.check(s.stop() == 0, f"{label}: SIGTERM -> exit 0\n{s.stderr()[-1500:]}")
        F.check(wait_for(lambda: not any(alive(k) for k in kids), 5), f"{label}: no instance outlives the host")


t_start = time.monotonic()
case("--threads 2", ["--threads", "2"], Server)
case("--workers 2", ["--workers", "2"], Prefork)
print(f"took {time.monotonic() - t_start:.1f}s")
F.done()
