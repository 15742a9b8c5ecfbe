"""The fleet's bus when its NATS server fails (bus/bus.c, design notes;
docs/behaviour.md, A fleet): unreachable at the start, stopped (slow: it
answers nothing), and killed with its store wiped at random moments while
both hosts publish.

Real binaries: host A single, host B under --workers 2 (its bridge in the
supervisor), each one's producer beating every 50 ms (the pid in the data),
`m0pub` publishing on both hosts in a loop, `nats-server -js` on one port
throughout, its store directory deleted between a stop and the next start.
The moments and the signals come from a seed, printed (M0_SEED=N replays).

Proves:
- Hosts started before their NATS server serve at once, their own beats on
  their own streams without an id, say so once ("cannot be reached yet"),
  m0_bus_connected 0; once it is up, m0_bus_connected 1 and both hosts'
  beats on both streams.
- nats-server stopped (SIGSTOP: the socket open, nothing answered): within a
  bound, on both hosts, m0_bus_connected 0, the link is seen lost (pings),
  each said when it began and not at every retry, the host serves and its
  own beats reach its own streams; SIGCONT: connected again (a reconnect),
  both hosts' beats flow, and each reader's ids go on contiguous, no m0.gap
  (what was pushed to the dead link is taken again from the stream).
- Frames the stream let go while both hosts were away (published, then all
  but the last purged, through the same store by a server on another port;
  then the server back on its own): within a bound each reader gets one
  m0.gap, each host logs one line, it is not counted as a reset, and both
  hosts' beats flow again.
- Each round: SIGTERM (at least one round SIGKILL) at a random moment, the
  store deleted, the server started again. Within a bound, on both hosts:
  m0_bus_resets_total one more, m0_bus_connected 1, exactly one more log line
  naming the new stream; every SSE reader (kept open across all rounds)
  gets one m0.gap whose "after" is at or above every id it had before it,
  then both hosts' beats and m0pub's notes with ids above every id before;
  the same id carries the same beat on both hosts.
- Across everything, each reader's ids strictly increase, and each host
  drains on SIGTERM, exit 0.
"""
import json
import os
import random
import re
import shutil
import signal
import socket
import threading
import time

from harness import Failures, Prefork, Server, free_port, m0pub, metric, private_dir, wait_for, get
from test_fleet import (Nats, beat_map, fleet_msg, nats_publish, numbered, pids_of,
                        strictly_increasing, write_topo)
from test_streams import Stream, children, contiguous, reap_seen

PERIOD_MS = "50"
ROUNDS = 3
RESET_LINE = re.compile(r"m0: bus: the stream \S+ on \S+ is a new one")
EVICTED_LINE = re.compile(r"m0: bus: the stream \S+ let fleet frames \d+ to \d+ go before this host took them")


class Publisher(threading.Thread):
    """m0pub on one host's run directory, one note after another until stopped."""

    def __init__(self, run_dir, tag):
        super().__init__(daemon=True)
        self.run_dir, self.tag, self.n, self.failed = run_dir, tag, 0, []
        self.halt = threading.Event()

    def run(self):
        while not self.halt.is_set():
            self.n += 1
            rc, out, err = m0pub("--run-dir", self.run_dir, "--event", "note", f"{self.tag}-{self.n}")
            if rc != 0:
                self.failed.append((rc, err))
            self.halt.wait(0.05)

    def stop(self):
        self.halt.set()
        self.join(timeout=15)


def local_beats(st, since, pid):
    """The beats of `pid` on st after frame index `since`, written without an id line."""
    return [f for f in list(st.frames)[since:] if f.event == "beat" and (f.json() or {}).get("pid") == pid
            and f.id is None]


def order(st):
    """Where a reader's ids first go back, with the frames around: for the failure's message."""
    fr = [f for f in list(st.frames) if f.id is not None]
    k = next((i for i in range(1, len(fr)) if fr[i].id <= fr[i - 1].id), None)
    return "in order" if k is None else [(f.id, f.event, (f.data or "")[:30]) for f in fr[max(0, k - 4):k + 3]]


def gaps(st, after):
    return [f for f in list(st.frames) if f.event == "m0.gap" and f.id is not None and f.id > after]


def notes_after(st, after, tag):
    return [f for f in list(st.frames) if f.event == "note" and f.id is not None and f.id > after
            and (f.data or "").startswith(tag)]


def flowing(st, after, prod_pids, n=6):
    """Both producers' beats, n of them, with ids above `after`."""
    return pids_of(st, after) == prod_pids and len([i for i in beat_map(st) if i > after]) >= n


def nats_request(port, subject, payload):
    """One request as any NATS client makes it (a reply inbox): the reply's payload."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    f = s.makefile("rb")
    f.readline()  # INFO
    s.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\nSUB _INBOX.t 1\r\n'
              + f"PUB {subject} _INBOX.t {len(payload)}\r\n".encode() + payload + b"\r\n")
    try:
        while True:
            line = f.readline()
            if not line or line.startswith(b"-ERR"):
                return None
            if line.startswith(b"MSG"):
                return f.read(int(line.split()[-1]) + 2)[:-2]
            if line.startswith(b"PING"):
                s.sendall(b"PONG\r\n")
    finally:
        s.close()


def evicted(F, hosts, ports, named, prod_pids, nats):
    """Frames the stream let go while the hosts were away: published and
    purged through the same store on another port, then the server back."""
    lines = {h: len(EVICTED_LINE.findall(s.stderr())) for h, s in hosts.items()}
    resets = {h: metric(p, "m0_bus_resets_total") for h, p in ports.items()}
    nats.stop()
    mark = {n: max(numbered(st), default=0) for n, st in named.items()}
    side = Nats(nats.store).start()
    try:
        # On a channel no one reads, and the last one kept: a purged stream
        # left empty may come back from its store numbered from before.
        nats_publish(side.port, "m0.reset", [fleet_msg(b"aside", b'event: beat\ndata: {"pid":0}')] * 5)
        reply = json.loads(nats_request(side.port, "$JS.API.STREAM.PURGE.m0_reset", b'{"keep":1}') or b"{}")
    finally:
        side.stop()
    F.check(reply.get("purged", 0) >= 4, f"evicted: 5 frames published, all but the last purged, while the hosts "
                                         f"were away ({reply})")
    nats.start()
    top = max(mark.values())
    for n, st in named.items():
        F.check(wait_for(lambda: gaps(st, mark[n]), 20), f"evicted: {n}: an m0.gap")
        g = gaps(st, mark[n])
        after = (g[0].json() or {}).get("after") if g else None
        F.check(len(g) == 1 and isinstance(after, int) and mark[n] <= after < g[0].id,
                f"evicted: {n}: one m0.gap, after the last id the host wrote ({[f.raw for f in g]}, mark {mark[n]})")
    ok = wait_for(lambda: all(flowing(st, top, prod_pids) for st in named.values()), 30)
    F.check(ok, f"evicted: both hosts' beats flow again above {top}, and not the purged ones "
                f"({[pids_of(st, top) for st in named.values()]})")
    for h, s in hosts.items():
        F.check(len(EVICTED_LINE.findall(s.stderr())) == lines[h] + 1,
                f"evicted: {h} logs it in one line ({s.stderr()[-900:]!r})")
        F.check(metric(ports[h], "m0_bus_resets_total") == resets[h], f"evicted: {h}: not a reset")


def unreachable_at_start(F, hosts, ports, named, prod_pids, nats):
    for h, s in hosts.items():
        F.check(wait_for(lambda: "cannot be reached yet" in s.stderr(), 10),
                f"start: {h} says the bus cannot be reached yet ({s.stderr()[-400:]!r})")
        F.check(metric(ports[h], "m0_bus_connected") == 0, f"start: {h}: m0_bus_connected 0")
    for n, own in (("A", hosts["A"].proc.pid), ("B", hosts["B"].proc.pid)):
        st = named[n]
        F.check(wait_for(lambda: len(local_beats(st, 0, own)) >= 3, 10),
                f"start: {n}'s own beats reach its stream without an id while NATS is not up")
    nats.start()
    for h, p in ports.items():
        F.check(wait_for(lambda: metric(p, "m0_bus_connected") == 1, 20), f"start: {h}: m0_bus_connected 1")
    ok = wait_for(lambda: all(flowing(st, 0, prod_pids) for st in named.values()), 20)
    F.check(ok, f"start: both hosts' beats reach both streams once NATS is up "
                f"({[pids_of(st) for st in named.values()]})")
    for h, s in hosts.items():
        F.check(s.stderr().count("cannot be reached yet") == 1, f"start: {h} said it once")


def stopped_server(F, hosts, ports, named, prod_pids, nats):
    said = {h: s.stderr().count("serving local streams only") for h, s in hosts.items()}
    lost = {h: s.stderr().count("m0: bus: lost ") for h, s in hosts.items()}
    start = {n: max(numbered(st), default=0) for n, st in named.items()}
    nats.proc.send_signal(signal.SIGSTOP)
    try:
        for h, p in ports.items():
            F.check(wait_for(lambda: metric(p, "m0_bus_connected") == 0, 20),
                    f"stopped: {h}: m0_bus_connected 0 within a bound")
            # Its stream's requests time out first (the bridge's check), then
            # the link is seen lost (unanswered pings).
            F.check(wait_for(lambda: hosts[h].stderr().count("m0: bus: lost ") == lost[h] + 1, 20),
                    f"stopped: {h}: the link is seen lost ({hosts[h].stderr()[-600:]!r})")
        mark = {n: len(st.frames) for n, st in named.items()}
        for n, own in (("A", hosts["A"].proc.pid), ("B", hosts["B"].proc.pid)):
            st = named[n]
            F.check(wait_for(lambda: len(local_beats(st, mark[n], own)) >= 3, 10),
                    f"stopped: {n}'s own beats reach its stream without an id")
            F.check(get(ports[n], "/metrics")[0] == 200, f"stopped: {n} serves")
        for h, s in hosts.items():  # said when it began, not at each retry
            n = s.stderr().count("serving local streams only") - said[h]
            F.check(1 <= n <= 2, f"stopped: {h} says it once or twice (the stream, the link), not at every retry "
                                 f"({n}: {s.stderr()[-600:]!r})")
        last = max(max(numbered(st), default=0) for st in named.values())
    finally:
        nats.proc.send_signal(signal.SIGCONT)
    for h, p in ports.items():
        F.check(wait_for(lambda: metric(p, "m0_bus_connected") == 1, 20), f"stopped: {h}: connected again")
    ok = wait_for(lambda: all(flowing(st, last, prod_pids) for st in named.values()), 20)
    F.check(ok, f"stopped: both hosts' beats flow again on both streams above {last}")
    # The store kept everything: what was pushed to the dead link comes again.
    for n, st in named.items():
        ids = [i for i in numbered(st) if start[n] <= i <= last + 6]
        F.check(ids and ids[0] == start[n] and contiguous(ids) and not gaps(st, start[n]),
                f"stopped: {n}: nothing lost, no m0.gap: ids contiguous from {start[n]} ({order(st)}, "
                f"{[b - a for a, b in zip(ids, ids[1:]) if b != a + 1][:5]} missing)")


def reset_round(F, k, rng, sig, hosts, ports, named, prod_pids, nats, pubs):
    label = f"round {k} ({sig.name})"
    time.sleep(rng.uniform(0.1, 2.0))  # the random moment: frames in flight on both hosts
    resets = {h: metric(p, "m0_bus_resets_total") for h, p in ports.items()}
    lines = {h: len(RESET_LINE.findall(s.stderr())) for h, s in hosts.items()}
    nats.proc.send_signal(sig)
    nats.proc.wait(timeout=10)
    mark = {n: max(numbered(st), default=0) for n, st in named.items()}
    shutil.rmtree(nats.store)
    print(f"{label}: nats-server stopped, store wiped; last ids {mark}", flush=True)
    nats.start()
    top = max(mark.values())
    for h, p in ports.items():
        F.check(wait_for(lambda: metric(p, "m0_bus_resets_total") == resets[h] + 1, 20),
                f"{label}: {h}: m0_bus_resets_total {resets[h]} -> {metric(p, 'm0_bus_resets_total')}")
        F.check(wait_for(lambda: metric(p, "m0_bus_connected") == 1, 20), f"{label}: {h}: m0_bus_connected 1")
    ok = wait_for(lambda: all(flowing(st, top, prod_pids) for st in named.values()), 30)
    F.check(ok, f"{label}: both hosts' beats reach both streams with ids above {top} "
                f"({[sorted(i for i in beat_map(st) if i > top)[:4] for st in named.values()]})")
    for n, st in named.items():
        # "after": the last id the host wrote, at or above what this reader
        # had when the server died (frames in flight came after the mark),
        # and no frame of the old stream after it on this stream.
        g = gaps(st, mark[n])
        after = (g[0].json() or {}).get("after") if g else None
        prev = max((i for i in numbered(st) if g and i < g[0].id), default=0)
        F.check(len(g) == 1 and isinstance(after, int) and mark[n] <= after < g[0].id and prev <= after,
                f"{label}: {n}: one m0.gap after the reset, after the last id the host wrote "
                f"({[f.raw for f in g]}, mark {mark[n]}, the last id before it {prev}; "
                f"{hosts[n].stderr()[-700:]!r})")
        F.check(strictly_increasing(numbered(st)), f"{label}: {n}: ids strictly increasing ({order(st)})")
    for p in pubs:
        ok = wait_for(lambda: all(notes_after(st, top, p.tag) for st in named.values()), 20)
        F.check(ok, f"{label}: m0pub's notes on {p.tag} reach both streams with ids above {top}")
    com = set(beat_map(named["A"])) & set(beat_map(named["B"]))
    com = {i for i in com if i > top}
    F.check(len(com) >= 4 and all(beat_map(named["A"])[i] == beat_map(named["B"])[i] for i in com),
            f"{label}: the same id carries the same beat on A and B ({len(com)} common)")
    for h, s in hosts.items():
        F.check(len(RESET_LINE.findall(s.stderr())) == lines[h] + 1,
                f"{label}: {h} logs the reset in one line ({s.stderr()[-800:]!r})")


def main():
    F = Failures()
    seed = int(os.environ.get("M0_SEED") or random.SystemRandom().randrange(1 << 30))
    print(f"seed {seed} (M0_SEED={seed} replays the moments and signals)", flush=True)
    rng = random.Random(seed)
    d = private_dir("m0-busreset-")
    nats = Nats(os.path.join(d, "js"), port=free_port())
    topo = write_topo(d, "topo.json", {"nats": f"nats://127.0.0.1:{nats.port}", "subject": "m0.reset"})
    da, db = private_dir("m0-busreset-a-"), private_dir("m0-busreset-b-")
    env = {"M0_HOSTCHECK_PERIOD_MS": PERIOD_MS}
    common = ["--port", "0", "--topology", topo, "--metrics-path", "/metrics"]
    A = Server("host_check", *common, "--run-dir", da, env=env)
    B = Prefork("host_check", *common, "--run-dir", db, "--workers", "2", env=env)
    hosts = {"A": A, "B": B}
    streams, pubs = [], []
    try:
        A.start()
        B.start()
        children(B.proc.pid)
        ports = {"A": A.port, "B": B.port}
        sa, sb = Stream(A.port), Stream(B.port)
        streams += [sa, sb]
        named = {"A": sa, "B": sb}
        prod_pids = {A.proc.pid, B.proc.pid}
        unreachable_at_start(F, hosts, ports, named, prod_pids, nats)
        pubs = [Publisher(da, f"pa{seed}"), Publisher(db, f"pb{seed}")]
        for p in pubs:
            p.start()
        stopped_server(F, hosts, ports, named, prod_pids, nats)
        evicted(F, hosts, ports, named, prod_pids, nats)
        sigs = [signal.SIGTERM, signal.SIGKILL] + [rng.choice([signal.SIGTERM, signal.SIGKILL])
                                                   for _ in range(ROUNDS - 2)]
        rng.shuffle(sigs)
        for k, sig in enumerate(sigs, 1):
            reset_round(F, k, rng, sig, hosts, ports, named, prod_pids, nats, pubs)
        for p in pubs:
            p.stop()
            F.check(not p.failed, f"m0pub on {p.tag} exits 0 throughout ({p.failed[:2]})")
        for h, p in ports.items():
            F.check(metric(p, "m0_bus_resets_total") == ROUNDS, f"{h}: m0_bus_resets_total {ROUNDS}")
            F.check(metric(p, "m0_bus_reconnects_total") >= ROUNDS + 1, f"{h}: m0_bus_reconnects_total >= {ROUNDS + 1}")
        for n, st in named.items():
            F.check(not st.eof and strictly_increasing(numbered(st)),
                    f"{n}: one stream through everything, ids strictly increasing ({len(numbered(st))} ids, "
                    f"{order(st)})")
        for st in streams:
            st.close()
        streams = []
        for h, s in hosts.items():
            rc = s.stop(timeout=15)
            F.check(rc == 0, f"{h} drains, exit 0 ({rc}):\n{s.stderr()[-1500:]}")
    finally:
        for p in pubs:
            p.halt.set()
        for st in streams:
            st.close()
        A.kill()
        B.kill()
        if nats.proc and nats.proc.poll() is None:
            nats.proc.send_signal(signal.SIGCONT)
        nats.stop()
        reap_seen()
    F.done()


if __name__ == "__main__":
    main()
