"""Execution modes keep one handler instance per loop / worker / pool thread
(docs/behaviour.md, Modes; docs/apps.md, host_check /instance), and accept
sharing spreads connections.

Proves:
- `--threads 2`: four keep-alive connections opened at once, /instance five
  times on each (round-robin, one request at a time): one pid for all, both
  loops 0 and 1 are seen (x-worker; seeing only one loop fails the test as
  vacuous), a connection stays on its loop, x-worker equals the body's worker,
  thread is -1, and for each loop the hits it reports are exactly 1..n in
  request order across all the connections that landed on it (nothing shared
  between loops, nothing lost, nothing rebuilt). Then the same four
  connections hammered concurrently: each loop's new hits are exactly the next
  n numbers, increasing on every connection.
- `--workers 2`: the same traffic sees two distinct pids, both children of the
  supervisor (not the supervisor itself), pid <-> worker one to one, each
  pid's hits 1..n in request order.
- `--threads 2 --blocking-threads 2`: /instance runs on a pool thread: thread
  is 0 or 1, one pid, per (worker, thread) hits 1..n in request order; then
  concurrently (a /slow?ms=5 before each /instance keeps pool threads busy)
  both pool threads of a loop serve, and each (worker, thread) continues its
  own count exactly.
- Accept sharing: 32 connections held open at once under `--threads 2`, each
  loop gets at least 8; the per-loop drained lines at exit name `handed off`
  and `taken over`, hand-offs balance take-overs, and each loop's logged
  connection count equals what the clients saw.
"""
import collections
import json
import os
import re
import threading

import harness
from harness import Failures, Server
from rawhttp import Conn, request

F = Failures()
ROUNDS = 5
NCONN = 4


def children(pid):
    """Child pids of `pid` (all its threads' children), [] if it is gone."""
    out = harness.children(pid)
    return sorted(out)


def instance(c):
    st, _, h, body, line = c.read_response(timeout=10)
    if st != 200:
        raise AssertionError(f"/instance answered {line!r} {body[:100]!r}")
    d = json.loads(body)
    d["x-worker"] = h.get("x-worker")
    return d


def round_robin(port, label):
    """NCONN connections opened before any request, then ROUNDS rounds of one
    /instance per connection, strictly one at a time: [(conn index, answer)]."""
    conns = [Conn(port, timeout=10) for _ in range(NCONN)]
    seq = []
    for _ in range(ROUNDS):
        for i, c in enumerate(conns):
            c.send(request("GET", "/instance"))
            seq.append((i, instance(c)))
    F.check(len(seq) == ROUNDS * NCONN, f"{label}: {ROUNDS * NCONN} answers on {NCONN} keep-alive connections")
    return conns, seq


def check_common(seq, label):
    for i, d in seq:
        F.check(d["x-worker"] == str(d["worker"]), f"{label}: x-worker {d['x-worker']} == body worker {d['worker']}")
    per_conn = collections.defaultdict(set)
    for i, d in seq:
        per_conn[i].add((d["worker"], d["pid"]))
    for i, s in sorted(per_conn.items()):
        F.check(len(s) == 1, f"{label}: connection {i} stays on one loop/process (saw {sorted(s)})")


def check_hits(seq, key, label):
    """For each handler (key(d)), the hits it reported, in request order, are exactly 1..n."""
    by = collections.defaultdict(list)
    for _, d in seq:
        by[key(d)].append(d["hits"])
    for k, hits in sorted(by.items()):
        F.check(hits == list(range(1, len(hits) + 1)), f"{label}: handler {k} hits are 1..{len(hits)} in order ({hits})")
    return by


def concurrent(conns, per_conn, label, slow_ms=0):
    """Every connection on its own thread, per_conn /instance each, at once
    (each preceded by /slow?ms=slow_ms when slow_ms, to keep pool threads busy)."""
    results = [[] for _ in conns]
    errors = []
    start = threading.Barrier(len(conns))

    def run(i):
        try:
            start.wait(timeout=5)
            for _ in range(per_conn):
                if slow_ms:
                    conns[i].send(request("GET", f"/slow?ms={slow_ms}"))
                    st = conns[i].read_response(timeout=10)[0]
                    if st != 200:
                        raise AssertionError(f"/slow answered {st}")
                conns[i].send(request("GET", "/instance"))
                results[i].append(instance(conns[i]))
        except Exception as e:  # reported below
            errors.append(f"conn {i}: {e!r}")

    ts = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(conns))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60)
    F.check(not errors and not any(t.is_alive() for t in ts), f"{label}: concurrent requests all answered ({errors})")
    return results


def check_continued(res, by, key, label):
    """After round_robin left handler k at len(by[k]) hits, the concurrent answers
    for k are exactly the next numbers, and increase along every connection."""
    more = collections.defaultdict(list)
    for i, answers in enumerate(res):
        per = collections.defaultdict(list)
        for d in answers:
            per[key(d)].append(d["hits"])
            more[key(d)].append(d["hits"])
        for k, hs in per.items():
            F.check(hs == sorted(set(hs)), f"{label}: handler {k}'s hits increase along connection {i} ({hs})")
    for k, hs in sorted(more.items()):
        n0 = len(by.get(k, []))
        F.check(sorted(hs) == list(range(n0 + 1, n0 + len(hs) + 1)),
                f"{label}: handler {k} hits are exactly {n0 + 1}..{n0 + len(hs)} ({sorted(hs)})")
    return more


def threads_mode():
    label = "--threads 2"
    with Server("host_check", "--threads", "2", "--port", "0") as s:
        conns, seq = round_robin(s.port, label)
        check_common(seq, label)
        pids = {d["pid"] for _, d in seq}
        F.check(pids == {s.proc.pid}, f"{label}: one pid for all answers, the one started ({pids} vs {s.proc.pid})")
        F.check(all(d["thread"] == -1 for _, d in seq), f"{label}: thread is -1 on the loop's own handler")
        workers = {d["x-worker"] for _, d in seq}
        F.check(workers == {"0", "1"}, f"{label}: both loops 0 and 1 seen by x-worker (saw {sorted(workers)}; one loop = vacuous)")
        by = check_hits(seq, lambda d: d["worker"], label)

        # Concurrently now: each loop's hits continue exactly where they stopped.
        res = concurrent(conns, 10, label + " concurrent")
        check_continued(res, by, lambda d: d["worker"], label + " concurrent")
        for c in conns:
            c.close()
        F.check(s.stop() == 0, f"{label}: exit 0 on SIGTERM")


def workers_mode():
    label = "--workers 2"
    with Server("host_check", "--workers", "2", "--port", "0") as s:
        kids = children(s.proc.pid)
        conns, seq = round_robin(s.port, label)
        check_common(seq, label)
        pids = {d["pid"] for _, d in seq}
        F.check(len(pids) == 2, f"{label}: two distinct pids serve ({sorted(pids)})")
        F.check(s.proc.pid not in pids, f"{label}: the supervisor ({s.proc.pid}) serves nothing itself")
        F.check(pids <= set(kids), f"{label}: the serving pids {sorted(pids)} are the supervisor's children {kids}")
        pw = {(d["pid"], d["worker"]) for _, d in seq}
        F.check(len(pw) == len(pids) == len({w for _, w in pw}), f"{label}: pid <-> worker one to one ({sorted(pw)})")
        check_hits(seq, lambda d: d["pid"], label)
        for c in conns:
            c.close()
        F.check(s.stop() == 0, f"{label}: exit 0 on SIGTERM")


def pool_mode():
    label = "--threads 2 --blocking-threads 2"
    with Server("host_check", "--threads", "2", "--blocking-threads", "2", "--port", "0") as s:
        conns, seq = round_robin(s.port, label)
        check_common(seq, label)
        threads = {d["thread"] for _, d in seq}
        F.check(threads <= {0, 1} and threads, f"{label}: /instance runs on pool thread 0 or 1 (saw {sorted(threads)})")
        F.check({d["pid"] for _, d in seq} == {s.proc.pid}, f"{label}: one pid")
        F.check({d["worker"] for _, d in seq} == {0, 1}, f"{label}: both loops seen")
        key = lambda d: (d["worker"], d["thread"])
        by = check_hits(seq, key, label)
        # Concurrently, with slow views keeping a loop's pool threads busy, so
        # both pool threads of a loop serve and each keeps its own count.
        res = concurrent(conns, 20, label + " concurrent", slow_ms=5)
        more = check_continued(res, by, key, label + " concurrent")
        F.check(all(t in (0, 1) for _, t in more), f"{label} concurrent: thread is 0 or 1 ({sorted(more)})")
        F.check(any((w, 0) in more and (w, 1) in more for w in (0, 1)),
                f"{label} concurrent: some loop's two pool threads both served (saw {sorted(more)}; else vacuous)")
        for c in conns:
            c.close()
        F.check(s.stop() == 0, f"{label}: exit 0 on SIGTERM")


DRAINED_RE = re.compile(r"m0: loop\.(\d+) drained: (\d+) requests, (\d+) connections, .*?(\d+) handed off, (\d+) taken over")


def accept_sharing():
    label = "accept sharing, 32 connections, --threads 2"
    with Server("host_check", "--threads", "2", "--port", "0") as s:
        conns = [Conn(s.port, timeout=10) for _ in range(32)]  # all open before any request
        seen = collections.Counter()
        for c in conns:
            c.send(request("GET", "/instance"))
            seen[instance(c)["x-worker"]] += 1
        F.check(all(seen[w] >= 8 for w in ("0", "1")), f"{label}: each loop gets at least 8 ({dict(seen)})")
        for c in conns:
            c.close()
        F.check(s.stop() == 0, f"{label}: exit 0 on SIGTERM")
        err = s.stderr()
        lines = {int(m.group(1)): m for m in DRAINED_RE.finditer(err)}
        F.check("handed off" in err and sorted(lines) == [0, 1], f"{label}: each loop's drained line names hand-offs:\n{err}")
        if sorted(lines) == [0, 1]:
            handed = sum(int(m.group(4)) for m in lines.values())
            taken = sum(int(m.group(5)) for m in lines.values())
            F.check(handed == taken, f"{label}: hand-offs ({handed}) == take-overs ({taken})")
            for w, m in lines.items():
                F.check(int(m.group(3)) == seen[str(w)],
                        f"{label}: loop {w} logs {m.group(3)} connections, clients saw {seen[str(w)]}")


threads_mode()
workers_mode()
pool_mode()
accept_sharing()
F.done()
