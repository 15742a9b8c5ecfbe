"""Mailboxes on tcp:// addresses (docs/topology.md, Across machines) and the
drain's edges an operator meets (docs/behaviour.md, Draining).

Proves, with `host_check` and topology files whose every actor listens on
tcp://127.0.0.1:PORT:
- An address already taken by another program is a start that fails, exit 1,
  nothing served (no listening line), naming the actor and its address:
  single mode with the coordinator's, the producer's, loop.0's or pool.0.0's
  port taken
  (`m0: cannot open the coordinator's mailbox at tcp://...`,
  `m0: the producer cannot open its mailbox at tcp://...` then
  `m0: cannot start the producer`, `m0: loop.0 cannot open its mailbox at
  tcp://...` then `m0: cannot open loop 0`, `m0: pool.0.0 cannot open its
  mailbox at tcp://...` then `m0: cannot start pool thread 0.0`: a pool
  thread's used to end its thread silently and the start hung at the
  barrier for ever), and under prefork with the
  supervisor's port taken (`m0: cannot open the supervisor's mailbox at
  tcp://...`), no worker left behind.
- A peer that is no m0 actor, speaking nng's SP protocol over TCP, sends
  bad envelopes (not an envelope, a forged JOB and a forged RESULT carrying
  a made-up pointer, each addressed to the mailbox it is sent to) to
  loop.0's, the coordinator's and the producer's tcp mailboxes: each is
  counted once in /metrics by the actor that refused it and why
  (`m0_refused_total{actor="loop.0",reason="malformed"} 1`, `...,reason="kind"}
  2`, the same for the coordinator and the producer, nothing else), each
  actor names the peer once on stderr (`m0: loop.0 refused a malformed
  message from tcp peer 127.0.0.1:PORT (malformed: ...`, PORT this peer's;
  no line per message, no `dropped a malformed message`), nothing crashes,
  and the host still serves /health and a stream whose producer beats keep
  coming after them, then drains to exit 0. (test_hostile.py sends every
  other kind of bad message to every mailbox of every mode.)
- A second SIGTERM during a drain is answered `m0: already draining; the
  bound is N ms`, the drain goes on: the slow request in flight is answered
  200 and the exit is 0.
- Under prefork, a producer inside a step longer than the drain's bound is
  named (`m0: the producer did not stop within 300 ms (it is inside its
  step)`) and the exit is 1.
"""
import json
import os
import re
import shutil
import signal
import socket
import struct
import tempfile
import threading
import time
import urllib.request

from harness import Failures, Prefork, SPPeer, Server, alive, children, environ, port_map, run, wait_for

F = Failures()
TMP = tempfile.mkdtemp(prefix="m0-tcpmb-")
SINGLE = ["coordinator", "producer", "loop.0"]
PREFORK = ["coordinator", "producer", "worker.0", "worker.1", "loop.0", "loop.1"]
MAGIC = 0x3145306D  # "m0E1"
K_JOB, K_RESULT = 10, 11  # runtime/envelope.h


def topology(names, mode, loops, ports, pool=0):
    path = os.path.join(TMP, f"topo-{mode}-{len(os.listdir(TMP))}.json")
    with open(path, "w") as fh:
        json.dump({"mode": mode, "loops": loops, "handler_threads": pool, "transport": "tcp",
                   "actors": [{"name": n, "url": f"tcp://127.0.0.1:{ports[n]}"} for n in names]}, fh)
    return path


def taken(names, mode, loops, which, expect, extra=(), env=None, pool=0):
    ports = port_map(names)
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("127.0.0.1", ports[which]))
    holder.listen(1)
    try:
        path = topology(names, mode, loops, ports, pool)
        rc, _, err = run("host_check", "--port", "0", "--topology", path, *extra, env=env, timeout=60)
    finally:
        holder.close()
    label = f"{mode}, {which}'s port {ports[which]} taken"
    F.check(rc == 1, f"{label}: exit 1 ({rc}):\n{err}")
    F.check("listening on" not in err, f"{label}: nothing served:\n{err}")
    for line in expect:
        line = line.replace("PORT", str(ports[which]))
        F.check(line in err, f"{label}: says {line!r}:\n{err}")


def ports_taken():
    taken(SINGLE, "single", 1, "coordinator", ["m0: cannot open the coordinator's mailbox at tcp://127.0.0.1:PORT\n"])
    taken(SINGLE, "single", 1, "producer", ["m0: the producer cannot open its mailbox at tcp://127.0.0.1:PORT\n",
                                            "m0: cannot start the producer\n"])
    taken(SINGLE, "single", 1, "loop.0", ["m0: loop.0 cannot open its mailbox at tcp://127.0.0.1:PORT\n",
                                          "m0: cannot open loop 0\n"])
    # a pool thread's (it used to end its thread without a word, and the host
    # waited at the barrier for its READY for ever)
    taken(SINGLE + ["pool.0.0"], "single", 1, "pool.0.0",
          ["m0: pool.0.0 cannot open its mailbox at tcp://127.0.0.1:PORT\n", "m0: cannot start pool thread 0.0\n"],
          pool=1)
    # under prefork: run() waited for the supervisor; its workers (found by a
    # variable only this run's processes carry) must be gone too
    tag = f"M0_TEST_TCPMB={os.getpid()}-{time.monotonic_ns()}"
    taken(PREFORK, "prefork", 2, "coordinator",
          ["m0: cannot open the supervisor's mailbox at tcp://127.0.0.1:PORT\n"], env={tag.split("=")[0]: tag.split("=")[1]})
    F.check(wait_for(lambda: not tagged(tag), 10), f"prefork, supervisor's port taken: no worker left behind ({tagged(tag)})")


def tagged(tag):
    """The live processes whose environment holds tag (NAME=VALUE)."""
    name, value = tag.encode().split(b"=", 1)
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and environ(p).get(name) == value and alive(int(p))]



def envelope(kind, frm, to, payload=b""):
    # magic, kind, flags, from, to, seq, trace hi/lo, length (runtime/envelope.h)
    return struct.pack("<IHHIIQQQI", MAGIC, kind, 0, frm, to, 1, 0, 0, len(payload)) + payload


def stream_ids(port, want):
    """The first `want` event ids of GET /events, read off a raw socket (bounded)."""
    ids, buf = [], b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
        c.sendall(b"GET /events HTTP/1.1\r\nHost: t\r\n\r\n")
        try:
            while len(ids) < want:
                chunk = c.recv(4096)
                if not chunk:
                    break
                buf += chunk
                ids = [int(l[4:]) for l in buf.split(b"\n") if l.startswith(b"id: ")]
        except OSError:
            pass
    return ids[:want]


def refused(port):
    """m0_refused_total's samples on /metrics: {(actor, reason): n}."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {(a, r): int(n) for a, r, n in
            re.findall(r'^m0_refused_total\{actor="([^"]+)",reason="([^"]+)"\} (\d+)$', text, re.M)}


def malformed_over_tcp():
    ports = port_map(SINGLE)
    path = topology(SINGLE, "single", 1, ports)
    ids = {"loop.0": (2 << 24) | 0, "coordinator": 1 << 24, "producer": 4 << 24}
    loop0, pool0 = ids["loop.0"], (3 << 24) | 0
    bogus = struct.pack("<I", 1) + struct.pack("<QI", 0xDEADBEEF, 0)
    with Server("host_check", "--port", "0", "--topology", path, "--metrics-path", "/metrics") as s:
        F.check(refused(s.port) == {}, f"tcp: nothing refused before the peer ({refused(s.port)})")
        want = {}
        for actor in ("loop.0", "coordinator", "producer"):
            me = ids[actor]
            bad = [b"junk", envelope(K_JOB, loop0, me, bogus), envelope(K_RESULT, pool0, me, bogus)]
            p = SPPeer(("tcp", ports[actor]), timeout=5)
            F.check(p.ok, f"tcp {actor}: its mailbox answers the SP handshake as pull0")
            for b in bad:
                p.send(b)
            want.update({(actor, "malformed"): 1, (actor, "kind"): 2})
            F.check(wait_for(lambda: refused(s.port) == want, 5, 0.02),
                    f"tcp {actor}: each of the {len(bad)} bad envelopes counted once, by {actor}: malformed 1, kind 2 "
                    f"(want {want}, got {refused(s.port)})")
            peer = f"tcp peer 127.0.0.1:{p.s.getsockname()[1]}"
            said = [l for l in s.stderr().splitlines() if l.startswith(f"m0: {actor} refused a ")]
            F.check(len(said) == 1 and f"refused a malformed message from {peer} (malformed: " in said[0],
                    f"tcp {actor}: the peer is named once, as {peer}, for its first refusal ({said})")
            p.close()
            F.check(s.proc.poll() is None, f"tcp {actor}: the host still runs after them (rc {s.proc.poll()})")
        F.check("dropped a malformed message" not in s.stderr(), f"tcp: no line per message:\n{s.stderr()[-600:]}")
        with urllib.request.urlopen(s.url("/health"), timeout=5) as r:
            F.check(r.status == 200 and json.loads(r.read()) == {"status": "ok"}, "tcp: /health still 200")
        # the producer, sent the same, still beats: a stream gets three frames
        ids = stream_ids(s.port, 3)
        F.check(len(ids) == 3 and ids == sorted(ids), f"tcp: the producer still publishes after them ({ids})")
        rc = s.stop()
        F.check(rc == 0 and "m0: drained, exit 0" in s.stderr(), f"tcp: drains to exit 0 ({rc}):\n{s.stderr()[-400:]}")


def second_sigterm():
    env = {"M0_HOSTCHECK_SLOW_SAYS": "1"}
    with Server("host_check", "--port", "0", "--blocking-threads", "1", env=env) as s:
        got = {}

        def slow():
            try:
                with urllib.request.urlopen(s.url("/slow?ms=1500"), timeout=30) as r:
                    got["status"], got["body"] = r.status, json.loads(r.read())
            except Exception as e:  # noqa: BLE001 (reported below)
                got["error"] = repr(e)

        t = threading.Thread(target=slow)
        t.start()
        F.check(wait_for(lambda: "host_check: /slow 1500 ms begins" in s.stderr(), 10),
                f"second SIGTERM: the slow view began:\n{s.stderr()}")
        s.signal(signal.SIGTERM)
        F.check(wait_for(lambda: "draining" in s.stderr(), 5), f"second SIGTERM: the drain began:\n{s.stderr()}")
        s.signal(signal.SIGTERM)
        F.check(wait_for(lambda: "m0: already draining; the bound is 5000 ms" in s.stderr(), 5),
                f"second SIGTERM: answered `already draining`:\n{s.stderr()}")
        rc = s.wait(15)
        t.join(30)
        F.check(got.get("status") == 200 and got.get("body") == {"ms": 1500},
                f"second SIGTERM: the request in flight was answered 200 ({got})")
        F.check(rc == 0, f"second SIGTERM: the drain went on to exit 0 ({rc}):\n{s.stderr()[-400:]}")


def prefork_producer_stuck():
    env = {"M0_HOSTCHECK_STEP_MS": "4000", "M0_HOSTCHECK_STEP_SAYS": "1"}
    with Prefork("host_check", "--port", "0", "--workers", "2", "--drain-timeout-ms", "300", env=env) as s:
        F.check(wait_for(lambda: "host_check: step" in s.stderr() and "begins" in s.stderr(), 15),
                f"prefork producer: a step began:\n{s.stderr()}")
        kids = children(s.proc.pid)
        rc = s.stop(timeout=15)
        err = s.stderr()
        F.check("m0: the producer did not stop within 300 ms (it is inside its step); exiting anyway" in err,
                f"prefork producer: named for missing the bound:\n{err[-600:]}")
        F.check(rc == 1, f"prefork producer: exit 1 ({rc})")
        F.check(wait_for(lambda: not any(alive(k) for k in kids), 10),
                f"prefork producer: its workers are gone ({[k for k in kids if alive(k)]})")


try:
    ports_taken()
    malformed_over_tcp()
    second_sigterm()
    prefork_producer_stuck()
finally:
    shutil.rmtree(TMP, ignore_errors=True)
F.done()
