"""Tracing (docs/reference.md, Flags and variables `--trace`, Tracing;
ARCHITECTURE "Tracing").

Proves:
- `--trace -` with `--blocking-threads 1`: a GET /instance carrying
  `traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01`
  yields, on stderr, exactly four records with that trace id, in this order
  (file order and time order): send job loop.0->pool.0.0, recv job, send
  result pool.0.0->loop.0, recv result; each send and its recv share seq and
  bytes. Every record on stderr is one JSON object with t, dir (send|recv),
  from, to, kind, seq, bytes, trace (32 lowercase hex). A request without
  traceparent causes a job/result that does NOT carry that id. The lifecycle
  shows up as well: ready, go (before the request), stop, stopped (after
  SIGTERM), and the producer's frames; exit 0.
- `--threads 2` with held connections: accept sharing's hand-offs are traced
  as `handoff` records between loop.0 and loop.1.
- Tracing off (no --trace): the same traceparent request leaves no JSON
  record, no trace id, no `"kind"` on stderr.
- m0trace live: started first at ipc://TMP/x.sock, the host with `--trace` to
  that URL; while the host still runs, m0trace's stdout already holds the four
  job/result records with the trace id, in time order as above (lines come
  over several sockets, so their arrival order is not asserted; every line a
  JSON record).
  `m0trace --kind job` prints only job lines (and at least the two of the
  request); `--actor pool.0.0` only records from or to pool.0.0.
  `--chrome FILE`: after SIGINT, m0trace exits 0 and FILE is JSON
  {"traceEvents":[...]} with ph "M" thread_name metadata naming loop.0 and
  pool.0.0 (one tid per actor, no two actors on one tid), ph "i" instant
  events (one per record it saw), and flow events where every "s" id has
  exactly one "f" with that id, no earlier than it, on another track (but
  a message sent to an actor already told to stop, which it may never
  take: none); a job
  flow starts on loop.0's track and finishes on pool.0.0's. `--seconds 1`
  stops by itself (exit 0) and still writes valid Chrome JSON.
- Records carry process, pid and tid: `--trace -` names the host's process
  and pid, and the job's send and the result's recv are on loop.0's thread,
  the other two on pool.0.0's; the Chrome trace has process_name metadata
  per pid and a track per (pid, tid).
- One request, one id: two traced requests that wait in one pool JOB (the
  pool held by /slow) each have send job, recv job, send result, recv result
  of the same messages; the same for an actor's REQUEST and REPLY (echo held
  by x-sleep-ms). A request answered on the loop has one `serve` record
  (kind http) when its traceparent is sampled, none otherwise; with
  `m0trace --requests all --kind http`, every /health has one and nothing
  else comes; `--requests` without `--run-dir` is usage (exit 2).
- Switched while running (a host started without --trace, under load from
  4 connections): `m0trace --run-dir --actor pool.0.0` gets records of
  pool.0.0 only (the host filters: m0trace prints what it is sent); stopped,
  the host's tracer no longer dials the URL (/metrics) and a listener there
  gets nothing over 200 more requests; switched on again for pool.1.0 at the
  same URL, only records made since arrive; every request is answered 200.
  A host tracing to stderr refuses a control naming a URL: m0trace exits 78,
  m0_refused_total{reason="control"} is 1, the host says why. No host at
  --run-dir: 78; --kind jobs: 2.
- `--workers 2`: records name worker.0 and worker.1, each with its own pid, a
  child of the supervisor; the Chrome trace has one process per worker, by
  pid. A killed worker's respawn is traced by the supervisor (its recv ready
  and send go, with its pid).
- An external echo_actor (outside the host, recording nothing): the Chrome
  trace has a process for its actor, `echo (outside the host)`, with a pid
  above any Linux pid and a thread `echo.0`; each request the host sent it
  ends its flow there, after its start, and each reply starts one there,
  ending where the host took it.
"""
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import harness
from harness import BIN, Failures, Server, get, wait_for

F = Failures()
TID = "0af7651916cd43dd8448eb211c80319c"
TP = f"00-{TID}-b7ad6b7169203331-01"
KEYS = {"t", "dir", "from", "to", "kind", "seq", "bytes", "trace", "process", "pid", "tid"}
HEX32 = re.compile(r"^[0-9a-f]{32}$")
TMP = tempfile.mkdtemp(prefix="m0-trace-")


def records(text):
    """(records, bad lines) from the JSON-looking lines of a text."""
    recs, bad = [], []
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        try:
            recs.append(json.loads(line))
        except ValueError:
            bad.append(line)
    return recs, bad


def well_formed(r):
    return (isinstance(r, dict) and set(r) == KEYS and r["dir"] in ("send", "recv", "serve")
            and isinstance(r["t"], (int, float)) and isinstance(r["seq"], int) and isinstance(r["bytes"], int)
            and isinstance(r["from"], str) and isinstance(r["to"], str) and isinstance(r["kind"], str)
            and isinstance(r["trace"], str) and HEX32.match(r["trace"]) is not None
            and isinstance(r["process"], str) and isinstance(r["pid"], int) and r["pid"] > 0
            and isinstance(r["tid"], int) and r["tid"] > 0)


def the_four(recs, label, by_time=False):
    """Checks the traceparent request's four records (in the order given, or
    sorted by their time when they came over several sockets); returns them."""
    mine = [r for r in recs if r.get("trace") == TID]
    if by_time:
        mine.sort(key=lambda r: r["t"])
    shape = [(r["dir"], r["kind"], r["from"], r["to"]) for r in mine]
    want = [("send", "job", "loop.0", "pool.0.0"), ("recv", "job", "loop.0", "pool.0.0"),
            ("send", "result", "pool.0.0", "loop.0"), ("recv", "result", "pool.0.0", "loop.0")]
    F.check(shape == want, f"{label}: exactly four records carry the trace id, in {'time' if by_time else 'file'} "
                           f"order send job, recv job, "
                           f"send result, recv result\n  got  {shape}\n  want {want}")
    if len(mine) == 4:
        ts = [r["t"] for r in mine]
        F.check(ts == sorted(ts), f"{label}: their times do not go backwards ({ts})")
        F.check(mine[0]["seq"] == mine[1]["seq"] and mine[2]["seq"] == mine[3]["seq"],
                f"{label}: each send and its recv share a seq ({[r['seq'] for r in mine]})")
        F.check(mine[0]["bytes"] == mine[1]["bytes"] > 0 and mine[2]["bytes"] == mine[3]["bytes"] > 0,
                f"{label}: each send and its recv carry the same (nonzero) bytes ({[r['bytes'] for r in mine]})")
    return mine


def stderr_trace():
    label = "--trace -"
    with Server("host_check", "--port", "0", "--blocking-threads", "1", "--trace", "-") as s:
        st, body = get(s.port, "/instance", {"traceparent": TP})
        F.check(st == 200, f"{label}: GET /instance with traceparent -> 200 ({st} {body[:100]!r})")
        wait_for(lambda: len([r for r in records(s.stderr())[0] if r.get("trace") == TID]) >= 4, 3)
        st2, _ = get(s.port, "/instance")
        wait_for(lambda: len([r for r in records(s.stderr())[0] if r.get("kind") == "result"]) >= 4, 3)
        pid = s.proc.pid
        rc = s.stop()
        F.check(rc == 0, f"{label}: SIGTERM -> exit 0 ({rc})")
        err = s.stderr()
    recs, bad = records(err)
    F.check(not bad, f"{label}: every JSON-looking stderr line parses ({bad[:2]})")
    malformed = [r for r in recs if not well_formed(r)]
    F.check(recs and not malformed, f"{label}: every record has exactly t, dir, from, to, kind, seq, bytes, trace "
                                    f"(32 hex), process, pid, tid ({len(recs)} records, malformed {malformed[:2]})")
    F.check(recs and all(r["pid"] == pid and r["process"] == "host" for r in recs),
            f"{label}: every record names the host's process (host, pid {pid}): "
            f"{sorted({(r['process'], r['pid']) for r in recs})}")
    mine = the_four(recs, label)
    if len(mine) == 4:
        tids = [r["tid"] for r in mine]
        F.check(tids[0] == tids[3] != tids[1] == tids[2],
                f"{label}: the job is sent on loop.0's thread and received on pool.0.0's, the result the "
                f"other way: two threads ({tids})")
    other = [r for r in recs if r["kind"] in ("job", "result") and r.get("trace") != TID]
    F.check(st2 == 200 and len(other) == 4,
            f"{label}: the request without traceparent has its own job/result records, not carrying the id "
            f"({[(r['dir'], r['kind'], r['trace']) for r in other]})")
    kinds = {r["kind"] for r in recs}
    F.check({"ready", "go", "stop", "stopped", "frame", "job", "result"} <= kinds,
            f"{label}: the lifecycle and the bus are traced: ready, go, stop, stopped, frame, job, result ({kinds})")
    frames = [r for r in recs if r["kind"] == "frame" and r["dir"] == "send"]
    F.check(frames and all(r["to"] == "loop.0" for r in frames), f"{label}: frames go to loop.0 ({frames[:2]})")
    # What the barrier promises, actor by actor (the order of one actor's
    # records on stderr is the order of its own calls): loop.0 has received
    # its go before it sends its first job, and the producer before it sends
    # its first frame. Only the coordinator's stop, which SIGTERM causes, is
    # known to follow the request; the producer's go is not ordered with
    # the request at all (on a loaded machine its thread may first run after
    # the request is served, and even after the stop was sent to loop.0).
    def first(pred):
        return next((i for i, r in enumerate(recs) if pred(r)), None)
    go_loop = first(lambda r: r["kind"] == "go" and r["dir"] == "recv" and r["to"] == "loop.0")
    first_job = first(lambda r: r["kind"] == "job" and r["dir"] == "send" and r["from"] == "loop.0")
    first_stop = first(lambda r: r["kind"] == "stop" and r["dir"] == "send" and r["to"] == "loop.0")
    F.check(go_loop is not None and first_job is not None and go_loop < first_job
            and first_stop is not None and first_stop > first_job,
            f"{label}: loop.0 receives go before its first job, stop is sent after it "
            f"(go {go_loop}, job {first_job}, stop {first_stop})")
    go_prod = first(lambda r: r["kind"] == "go" and r["dir"] == "recv" and r["to"] == "producer")
    first_frame = first(lambda r: r["kind"] == "frame" and r["dir"] == "send" and r["from"] == "producer")
    F.check(go_prod is not None and first_frame is not None and go_prod < first_frame,
            f"{label}: the producer receives go before its first frame (go {go_prod}, frame {first_frame})")


def batch_ids():
    """Two traced requests in one batch each keep their own id: a pool JOB
    (and its RESULT), and an application actor's REQUEST (and its REPLY).
    The pool thread (the one echo instance) is held by a slow request, so
    the two that come meanwhile wait in one batch (a round where they did
    not is tried again)."""
    import socket
    cases = (("pool", "GET /slow?ms=200", "GET /instance", ("job", "result")),
             ("actor echo", "GET /actor/echo HTTP/1.1\r\nx-sleep-ms: 200", "GET /actor/echo", ("request", "reply")))
    with Server("host_check", "--port", "0", "--blocking-threads", "1", "--trace", "-") as s:
        for name, hold, path, (ask, answer) in cases:
            label = f"--trace -: a {name} batch of two traced requests"
            if " HTTP/1.1" not in hold:
                hold += " HTTP/1.1"
            found = None
            for round_ in range(6):
                ids = [f"{len(name):02x}{round_:02x}" + "b" * 27 + f"{k}" for k in (1, 2)]
                socks = [socket.create_connection(("127.0.0.1", s.port), timeout=5) for _ in range(3)]
                try:
                    seen = len(records(s.stderr())[0])
                    socks[0].sendall(hold.encode() + b"\r\nHost: x\r\n\r\n")
                    wait_for(lambda: any(r.get("kind") == ask and r.get("dir") == "recv"
                                         for r in records(s.stderr())[0][seen:]), 3)
                    for sock, tid in zip(socks[1:], ids):
                        sock.sendall(f"{path} HTTP/1.1\r\nHost: x\r\n"
                                     f"traceparent: 00-{tid}-b7ad6b7169203331-01\r\n\r\n".encode())
                    for sock in socks:
                        sock.recv(65536)
                finally:
                    for sock in socks:
                        sock.close()

                def mine():
                    recs = records(s.stderr())[0]
                    by = {t: [(r["dir"], r["kind"], r["seq"]) for r in recs if r.get("trace") == t] for t in ids}
                    return by if all(len(v) >= 4 for v in by.values()) else None
                by = wait_for(mine, 5)
                if by and by[ids[0]][0][2] == by[ids[1]][0][2]:  # both in one batch
                    found = by
                    break
            F.check(found is not None,
                    f"{label}: two traced requests of one {ask.upper()} each have their own records (6 rounds tried)")
            if found:
                for t, recs in found.items():
                    F.check([(d, k) for d, k, _ in recs] == [("send", ask), ("recv", ask), ("send", answer),
                                                             ("recv", answer)],
                            f"{label}: request {t[-4:]} has its own send {ask}, recv {ask}, send {answer}, "
                            f"recv {answer} ({recs})")
                a, b = found.values()
                F.check([x[2] for x in a] == [x[2] for x in b],
                        f"{label}: both ids' records are of the same {ask.upper()} and {answer.upper()} "
                        f"(seqs {a} {b})")
        F.check(s.stop() == 0, "--trace -: batches: SIGTERM -> exit 0")


def served_on_loop():
    """A request answered on the loop (no message) has a record of its own,
    dir "serve", kind "http": by default those whose traceparent is sampled;
    with m0trace --requests all, every one."""
    label = "--trace -: a request served on the loop"
    unsampled = f"00-{TID[:-4]}0000-b7ad6b7169203331-00"
    with Server("host_check", "--port", "0", "--trace", "-") as s:
        for headers in ({"traceparent": TP}, {"traceparent": unsampled}, {}):
            st, _ = get(s.port, "/health", headers)
            F.check(st == 200, f"{label}: GET /health {headers} -> 200 ({st})")
        got = wait_for(lambda: [r for r in records(s.stderr())[0] if r.get("dir") == "serve"], 3)
        F.check(s.stop() == 0, f"{label}: SIGTERM -> exit 0")
        got = [r for r in records(s.stderr())[0] if r.get("dir") == "serve"]
    F.check(len(got) == 1 and got[0]["trace"] == TID and got[0]["kind"] == "http" and
            got[0]["from"] == got[0]["to"] == "loop.0" and got[0]["bytes"] > 0 and well_formed(got[0]),
            f"{label}: one serve record, of the sampled request only, with its trace id ({got})")

    label = "m0trace --run-dir --requests all --kind http"
    run = os.path.join(TMP, "run-served")
    os.mkdir(run, 0o700)
    with Server("host_check", "--port", "0", "--run-dir", run, "--blocking-threads", "1") as s:
        t = Tracer("--run-dir", run, "--requests", "all", "--kind", "http")
        try:
            # m0trace's switch reaches the loop as a message: until a request's
            # record comes back, the loop may not have taken it yet (a loaded
            # machine served the first GET before it). Those GETs, w of them,
            # come first; the three after them are the loop's requests w+1 to
            # w+3 (a record's seq), and they are judged.
            warm = []
            wait_for(lambda: warm.append(get(s.port, "/health")) or records(t.stdout())[0], 10)
            w = len(warm)
            for _ in range(3):
                get(s.port, "/health")
            get(s.port, "/instance")  # the pool's: messages, no serve record, and not of kind http
            judged = lambda: [r for r in records(t.stdout())[0] if r.get("seq", 0) > w]  # noqa: E731
            wait_for(lambda: len(judged()) >= 3, 5)
            F.check(t.stop(signal.SIGINT) == 0, f"{label}: SIGINT -> m0trace exits 0 ({t.stderr()})")
            got = judged()
        finally:
            t.kill()
        F.check(len(got) == 3 and all(r["dir"] == "serve" and r["kind"] == "http" and r["trace"] == "0" * 32
                                      for r in got),
                f"{label}: each GET /health on the loop, without a traceparent, has its serve record, and "
                f"nothing else comes ({got})")
        F.check(sorted(r["seq"] for r in got) == [w + 1, w + 2, w + 3],
                f"{label}: each with the loop's own request count ({[r['seq'] for r in got]}, after {w})")
        F.check(s.stop() == 0, f"{label}: the host exits 0 on SIGTERM")
    r = subprocess.run([os.path.join(BIN, "m0trace"), "--requests", "all", f"ipc://{TMP}/r.sock"],
                       capture_output=True, text=True, timeout=10)
    F.check(r.returncode == 2 and "--run-dir" in r.stderr, f"m0trace --requests without --run-dir: exit 2 "
                                                           f"({r.returncode}: {r.stderr!r})")


def handoff_trace():
    label = "--trace - --threads 2"
    with Server("host_check", "--port", "0", "--threads", "2", "--trace", "-") as s:
        conns = []
        try:
            def handoffs():
                return [r for r in records(s.stderr())[0] if r.get("kind") == "handoff"]
            # In bursts: 8 connections wait in the backlog together, so the loop
            # that wakes accepts several in one pass and hands the ones past its
            # share to its sibling. One at a time, the two loops could take turns
            # and never differ by one (the fresh Debian 12 chroot's ASan run saw
            # no hand-off in 40).
            for _ in range(10):
                burst = [http.client.HTTPConnection("127.0.0.1", s.port, timeout=5) for _ in range(8)]
                for c in burst:
                    c.connect()
                conns += burst
                for c in burst:
                    c.request("GET", "/instance")
                    c.getresponse().read()
                if handoffs():
                    break
            h = wait_for(handoffs, 2)
        finally:
            for c in conns:
                c.close()
        F.check(h, f"{label}: held connections cause hand-offs, traced as `handoff` records")
        F.check(h and all({r["from"], r["to"]} == {"loop.0", "loop.1"} for r in h),
                f"{label}: a handoff goes from one loop to the other ({h[:2]})")
        F.check(s.stop() == 0, f"{label}: SIGTERM -> exit 0")


def tracing_off():
    label = "no --trace"
    with Server("host_check", "--port", "0", "--blocking-threads", "1") as s:
        st, _ = get(s.port, "/instance", {"traceparent": TP})
        F.check(st == 200, f"{label}: GET /instance with traceparent -> 200 ({st})")
        rc = s.stop()  # stderr is whole once the host has exited: no record may still be on its way
        err = s.stderr()
    recs, bad = records(err)
    F.check(not recs and not bad and TID not in err and '"kind"' not in err,
            f"{label}: no trace record on stderr ({len(recs)} records):\n{err[:600]}")
    F.check(rc == 0, f"{label}: SIGTERM -> exit 0 ({rc})")


class Tracer:
    n = 0

    def __init__(self, *args, url=None):
        Tracer.n += 1
        self.url = url or f"ipc://{TMP}/t{Tracer.n}.sock"
        self.out = harness.log_file()
        self.err = harness.log_file()
        self.proc = subprocess.Popen([os.path.join(BIN, "m0trace")] + list(args) + [self.url],
                                     stdout=self.out, stderr=self.err)
        ok = wait_for(lambda: "listening" in self.stderr() or self.proc.poll() is not None, 5)
        if not ok or self.proc.poll() is not None:
            self.kill()
            raise AssertionError(f"m0trace {args} did not start listening: {self.stderr()}")

    def stdout(self):
        return harness.read_log(self.out)

    def stderr(self):
        return harness.read_log(self.err)

    def stop(self, sig=signal.SIGINT, timeout=5):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
            return None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)


def traced_run(tracer, label):
    """A pool host tracing to `tracer`: one traceparent request; returns what
    m0trace printed while the host was still running."""
    with Server("host_check", "--port", "0", "--blocking-threads", "1", "--trace", tracer.url) as s:
        st, _ = get(s.port, "/instance", {"traceparent": TP})
        F.check(st == 200, f"{label}: GET /instance with traceparent -> 200 ({st})")
        live = wait_for(lambda: (lambda t: t if t.count(TID) >= 4 else None)(tracer.stdout()), 3) or tracer.stdout()
        alive = s.proc.poll() is None
        F.check(alive, f"{label}: the host is still running while m0trace prints")
        pid = s.proc.pid
        F.check(s.stop() == 0, f"{label}: the host exits 0 on SIGTERM")
    return live, pid


def m0trace_live():
    label = "m0trace"
    chrome = os.path.join(TMP, "trace.json")
    t = Tracer("--chrome", chrome)
    try:
        live, pid = traced_run(t, label)
        recs, bad = records(live)
        lines = [l for l in live.splitlines() if l.strip()]
        F.check(lines and not bad and len(recs) == len(lines) and all(well_formed(r) for r in recs),
                f"{label}: every stdout line is one trace record ({len(lines)} lines, {len(recs)} records, {bad[:2]})")
        the_four(recs, f"{label} (live)", by_time=True)
        # Let the drain's records arrive (the coordinator takes STOPPED from loop.0 and the producer), then stop.
        wait_for(lambda: len([r for r in records(t.stdout())[0] if r.get("kind") == "stopped" and r.get("dir") == "recv"]) >= 2, 5)
        rc = t.stop(signal.SIGINT)
        F.check(rc == 0, f"{label}: SIGINT -> m0trace exits 0 ({rc}): {t.stderr()}")
        total = len([l for l in t.stdout().splitlines() if l.strip()])
        chrome_check(chrome, total, label, {pid: "host"})
    finally:
        t.kill()

    label = "m0trace --kind job"
    t = Tracer("--kind", "job")
    try:
        traced_run(t, label)
        wait_for(lambda: len([r for r in records(t.stdout())[0] if r.get("trace") == TID]) >= 2, 5)  # send and recv
        rc = t.stop(signal.SIGTERM)
        out = t.stdout()
        recs, bad = records(out)
        lines = [l for l in out.splitlines() if l.strip()]
        F.check(rc == 0, f"{label}: SIGTERM -> exit 0 ({rc})")
        F.check(len(recs) == len(lines) and all(r.get("kind") == "job" for r in recs),
                f"{label}: only job records ({sorted({r.get('kind') for r in recs})})")
        mine = [(r["dir"], r["from"], r["to"]) for r in recs if r["trace"] == TID]
        F.check(mine == [("send", "loop.0", "pool.0.0"), ("recv", "loop.0", "pool.0.0")],
                f"{label}: the request's send and recv job records ({mine})")
    finally:
        t.kill()

    label = "m0trace --actor pool.0.0"
    t = Tracer("--actor", "pool.0.0")
    try:
        traced_run(t, label)
        wait_for(lambda: {"job", "result", "ready"} <= {r.get("kind") for r in records(t.stdout())[0]}, 5)
        rc = t.stop(signal.SIGTERM)
        recs, _ = records(t.stdout())
        F.check(rc == 0, f"{label}: SIGTERM -> exit 0 ({rc})")
        F.check(recs and all("pool.0.0" in (r["from"], r["to"]) for r in recs),
                f"{label}: only records from or to pool.0.0 "
                f"({sorted({(r['from'], r['to']) for r in recs})})")
        F.check({"job", "result", "ready"} <= {r["kind"] for r in recs},
                f"{label}: pool.0.0's ready, job and result are there ({sorted({r['kind'] for r in recs})})")
    finally:
        t.kill()

    label = "m0trace --seconds 1"
    chrome = os.path.join(TMP, "seconds.json")
    t = Tracer("--seconds", "1", "--chrome", chrome)
    try:
        t0 = time.monotonic()
        try:
            rc = t.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            rc = None
        F.check(rc == 0 and time.monotonic() - t0 < 3, f"{label}: stops by itself, exit 0 ({rc}, "
                                                        f"{time.monotonic() - t0:.2f}s)")
        try:
            with open(chrome) as f:
                d = json.load(f)
        except (OSError, ValueError) as e:
            d = repr(e)
        F.check(isinstance(d, dict) and isinstance(d.get("traceEvents"), list),
                f"{label}: the Chrome file is {{\"traceEvents\": [...]}} even with nothing seen ({d})")
    finally:
        t.kill()


class Load:
    """GET /instance from 4 connections, one after another on each, until
    stopped: the host is under load while its tracing is switched."""

    def __init__(self, port):
        self.port, self.done, self.errors = port, 0, []
        self.halt = threading.Event()
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(4)]
        for t in self.threads:
            t.start()

    def run(self):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            while not self.halt.is_set():
                c.request("GET", "/instance")
                r = c.getresponse()
                r.read()
                if r.status != 200:
                    self.errors.append(r.status)
                self.done += 1
        except (OSError, http.client.HTTPException) as e:
            self.errors.append(repr(e))
        finally:
            c.close()

    def more(self, n, timeout=10):
        """Waits until n more requests were answered."""
        goal = self.done + n
        return wait_for(lambda: self.done >= goal, timeout)

    def stop(self):
        self.halt.set()
        for t in self.threads:
            t.join(timeout=10)


def metric_line(port, pattern):
    """The value of the first /metrics line matching pattern (a regex), or None."""
    try:
        _, body = get(port, "/metrics")
    except OSError:
        return None
    m = re.search(pattern + r" (\d+)$", body.decode(), re.M)
    return int(m.group(1)) if m else None


def switched_while_running():
    """A host started without --trace, under load: m0trace --run-dir switches
    one actor's tracing on, and off again when it stops."""
    label = "m0trace --run-dir --actor pool.0.0"
    run = os.path.join(TMP, "run-switch")
    os.mkdir(run, 0o700)
    with Server("host_check", "--port", "0", "--threads", "2", "--blocking-threads", "1", "--run-dir", run,
                "--metrics-path", "/metrics") as s:
        load = Load(s.port)
        try:
            F.check(load.more(50), f"{label}: the host serves the load ({load.done} requests, {load.errors[:2]})")
            t = Tracer("--run-dir", run, "--actor", "pool.0.0")
            try:
                F.check("tracing switched on" in t.stderr(), f"{label}: m0trace says it switched tracing on "
                                                              f"({t.stderr()!r})")
                got = wait_for(lambda: (lambda r: r if len([x for x in r if x["kind"] == "job"]) >= 20 else None)(
                    records(t.stdout())[0]), 10) or records(t.stdout())[0]
                F.check(len([r for r in got if r["kind"] == "job"]) >= 20,
                        f"{label}: records arrive while the host runs ({len(got)})")
                F.check(got and all("pool.0.0" in (r["from"], r["to"]) for r in got),
                        f"{label}: the host sends only pool.0.0's records "
                        f"({sorted({(r['from'], r['to']) for r in got})})")
                F.check(got and all(r["pid"] == s.proc.pid and r["process"] == "host" for r in got),
                        f"{label}: records name the host's process and pid ({s.proc.pid})")
                st, _ = get(s.port, "/instance", {"traceparent": TP})  # on a loop of its own choosing
                rc = t.stop(signal.SIGINT)
                F.check(rc == 0, f"{label}: SIGINT -> m0trace exits 0 ({rc}): {t.stderr()}")
            finally:
                t.kill()
            # Off: the host lets go of the URL (its tracer's dialer leaves
            # /metrics), and a plain listener there receives nothing while
            # the load goes on.
            pat = rf'm0_nng_stat{{process="host",side="other",actor="",scope="dialer",url="{re.escape(t.url)}",' \
                  rf'socket="\d+",stat="pipes"}}'
            F.check(wait_for(lambda: metric_line(s.port, pat) is None, 10),
                    f"{label}: once m0trace stopped, the host's tracer no longer dials its URL")
            quiet = Tracer(url=t.url)
            try:
                F.check(load.more(200), f"{label}: 200 more requests are served ({load.done})")
                out = quiet.stdout()
                F.check(out == "", f"{label}: once m0trace stopped, the host sends no record "
                                   f"({len(out.splitlines())} lines: {out[:300]!r})")
            finally:
                quiet.kill()
            # On again, for another actor, at the same URL: only records made
            # since (none of the first session's were kept for it).
            t0 = time.time()
            again = Tracer("--run-dir", run, "--actor", "pool.1.0", url=t.url)
            try:
                got = wait_for(lambda: (lambda r: r if len([x for x in r if x["kind"] == "job"]) >= 10 else None)(
                    records(again.stdout())[0]), 10) or records(again.stdout())[0]
                F.check(len(got) >= 10 and all("pool.1.0" in (r["from"], r["to"]) for r in got),
                        f"{label}: switched on again for pool.1.0, only its records come "
                        f"({len(got)}: {sorted({(r['from'], r['to']) for r in got})})")
                old = [r for r in got if r["t"] < t0]
                F.check(not old, f"{label}: nothing made before it was switched on again ({old[:2]})")
                F.check(again.stop(signal.SIGTERM) == 0, f"{label}: SIGTERM -> m0trace exits 0")
            finally:
                again.kill()
        finally:
            load.stop()
        F.check(not load.errors, f"{label}: every request under load is answered 200 ({load.errors[:3]})")
        refused = metric_line(s.port, r'm0_refused_total\{actor="loop\.\d",reason="control"\}')
        F.check(not refused, f"{label}: no control was refused ({refused})")
        F.check(s.stop() == 0, f"{label}: the host exits 0 on SIGTERM")

    label = "m0trace --run-dir (refused)"
    run = os.path.join(TMP, "run-refused")
    os.mkdir(run, 0o700)
    with Server("host_check", "--port", "0", "--run-dir", run, "--trace", "-", "--metrics-path", "/metrics") as s:
        t = subprocess.run([os.path.join(BIN, "m0trace"), "--run-dir", run, f"ipc://{TMP}/refused.sock"],
                           capture_output=True, text=True, timeout=10)
        F.check(t.returncode == 78 and "refused the control" in t.stderr,
                f"{label}: a host tracing to stderr refuses a control that names a URL: m0trace exits 78 "
                f"({t.returncode}: {t.stderr!r})")
        n = metric_line(s.port, r'm0_refused_total\{actor="loop\.0",reason="control"\}')
        F.check(n == 1, f"{label}: the refusal is counted once, m0_refused_total{{reason=\"control\"}} ({n})")
        F.check(wait_for(lambda: "trace control from" in s.stderr() and "traces to stderr" in s.stderr(), 5),
                f"{label}: the host's stderr says why ({s.stderr()[-400:]!r})")
        F.check(s.stop() == 0, f"{label}: the host exits 0 on SIGTERM")
    r = subprocess.run([os.path.join(BIN, "m0trace"), "--run-dir", os.path.join(TMP, "nobody"),
                        f"ipc://{TMP}/nobody.sock"], capture_output=True, text=True, timeout=10)
    F.check(r.returncode == 78 and "--run-dir" in r.stderr,
            f"m0trace --run-dir with no host there: exit 78 and a line naming it ({r.returncode}: {r.stderr!r})")
    r = subprocess.run([os.path.join(BIN, "m0trace"), "--kind", "jobs", f"ipc://{TMP}/k.sock"],
                       capture_output=True, text=True, timeout=10)
    F.check(r.returncode == 2 and "usage" in r.stderr, f"m0trace --kind jobs: exit 2 and the usage ({r.returncode})")


def worker_processes():
    """--workers 2: records name each worker's process and pid; the Chrome
    trace has one process per worker, named worker.0 and worker.1."""
    label = "m0trace --run-dir under --workers 2"
    run = os.path.join(TMP, "run-workers")
    os.mkdir(run, 0o700)
    chrome = os.path.join(TMP, "workers.json")
    with Server("host_check", "--port", "0", "--workers", "2", "--blocking-threads", "1", "--run-dir", run) as s:
        t = Tracer("--run-dir", run, "--chrome", chrome, "--kind", "job", "--kind", "result")
        try:
            def both():
                for _ in range(8):  # new connections: each lands on a worker the kernel picks
                    get(s.port, "/instance")
                return {r["process"] for r in records(t.stdout())[0]} >= {"worker.0", "worker.1"}
            seen = wait_for(both, 20)
            recs = records(t.stdout())[0]
            F.check(seen, f"{label}: both workers' pools are traced ({sorted({r['process'] for r in recs})})")
            kids = [int(p) for p in open(f"/proc/{s.proc.pid}/task/{s.proc.pid}/children").read().split()]
            by_proc = {}
            for r in recs:
                by_proc.setdefault(r["process"], set()).add(r["pid"])
            F.check(all(len(p) == 1 for p in by_proc.values()) and
                    {next(iter(p)) for p in by_proc.values()} <= set(kids) and
                    len({next(iter(p)) for p in by_proc.values()}) == len(by_proc),
                    f"{label}: each worker's records carry its own pid, a child of the supervisor "
                    f"({by_proc}, children {kids})")
            rc = t.stop(signal.SIGINT)
            F.check(rc == 0, f"{label}: SIGINT -> m0trace exits 0 ({rc}): {t.stderr()}")
            want = {next(iter(p)): name for name, p in by_proc.items() if len(p) == 1}
            try:
                with open(chrome) as f:
                    ev = json.load(f)["traceEvents"]
            except (OSError, ValueError, KeyError) as e:
                ev = []
                F.check(False, f"{label}: the Chrome file is valid ({e!r})")
            procs = {e["pid"]: e["args"]["name"] for e in ev if e.get("name") == "process_name"}
            F.check(procs == want and set(procs.values()) >= {"worker.0", "worker.1"},
                    f"{label}: Chrome: one process per worker, by its pid ({procs}, want {want})")
        finally:
            t.kill()
        # The supervisor's own tracer (it has no loop: m0trace tells its
        # mailbox in the run directory): a killed worker's respawn shows as
        # the supervisor's recv ready and send go, in its process.
        label = "m0trace --run-dir: the prefork supervisor"
        t = Tracer("--run-dir", run, "--kind", "go", "--kind", "ready")
        try:
            def sup():
                r = [x for x in records(t.stdout())[0] if x["process"] == "supervisor"]
                return r if {("recv", "ready"), ("send", "go")} <= {(x["dir"], x["kind"]) for x in r} else None
            # m0trace says "switched on" once its control is sent, not once the
            # supervisor took it: a respawn before that is not recorded (seen
            # under two chroot suites and stress-ng), so a worker is killed
            # again, at most three times, each once the one before is back.
            got = []
            for _ in range(3):
                respawns = s.stderr().count("respawned")
                kids = [int(p) for p in open(f"/proc/{s.proc.pid}/task/{s.proc.pid}/children").read().split()]
                os.kill(min(kids), signal.SIGKILL)
                got = wait_for(sup, 10) or []
                if got or not wait_for(lambda: s.stderr().count("respawned") > respawns, 10):
                    break
            F.check(got and all(x["pid"] == s.proc.pid and x["tid"] > 0 for x in got),
                    f"{label}: the respawn's ready and go are recorded by the supervisor, pid {s.proc.pid} "
                    f"({[(x['dir'], x['kind'], x['from'], x['to'], x['pid']) for x in records(t.stdout())[0]][:6]})")
            F.check(t.stop(signal.SIGINT) == 0, f"{label}: SIGINT -> m0trace exits 0 ({t.stderr()})")
        finally:
            t.kill()
        F.check(wait_for(lambda: "respawned" in s.stderr(), 10), f"{label}: the worker was respawned")
        F.check(s.stop() == 0, f"{label}: the host exits 0 on SIGTERM")


def outside_track():
    """An application instance outside the host records nothing: the Chrome
    trace still gives it a track of its own, a process named for its actor
    (echo: m0trace names actors as the host does) with a pid no Linux process has,
    a thread per instance, on which each request the host sent it ends its
    flow and each reply it sent starts one, ending where the host took it."""
    label = "m0trace --chrome, an external echo"
    run = os.path.join(TMP, "run-outside")
    os.mkdir(run, 0o700)
    topo = os.path.join(run, "topo.json")
    with open(topo, "w") as f:
        json.dump({"mode": "single", "app_actors": [{"name": "echo", "placement": "external"}]}, f)
    chrome = os.path.join(TMP, "outside.json")
    with Server("host_check", "--port", "0", "--run-dir", run, "--topology", topo) as s:
        a = subprocess.Popen([os.path.join(BIN, "echo_actor"), f"ipc://{run}/actor.echo.sock", "0"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            F.check(wait_for(lambda: get(s.port, "/actor/echo")[0] == 200, 10), f"{label}: the instance answers")
            t = Tracer("--run-dir", run, "--chrome", chrome, "--kind", "request", "--kind", "reply")
            try:
                for _ in range(5):
                    get(s.port, "/actor/echo")
                wait_for(lambda: sum(r["kind"] == "reply" for r in records(t.stdout())[0]) >= 5, 5)
                F.check(t.stop(signal.SIGINT) == 0, f"{label}: SIGINT -> m0trace exits 0 ({t.stderr()})")
            finally:
                t.kill()
        finally:
            a.terminate()
            a.wait(timeout=10)
        F.check(s.stop() == 0, f"{label}: the host exits 0")
    try:
        with open(chrome) as f:
            ev = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError) as e:
        F.check(False, f"{label}: the Chrome file is valid ({e!r})")
        return
    procs = {e["pid"]: e["args"]["name"] for e in ev if e.get("name") == "process_name"}
    out = [p for p, n in procs.items() if n == "echo (outside the host)"]
    F.check(len(out) == 1 and out[0] > 4194304,
            f"{label}: a process for the outside actor, its pid above any Linux pid ({procs})")
    if len(out) != 1:
        return
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
    F.check(threads.get((out[0], 1)) == "echo.0", f"{label}: its instance 0 is a thread, echo.0 ({threads})")
    on = [e for e in ev if e.get("pid") == out[0] and e.get("ph") in ("s", "f")]
    starts = {e["id"]: e for e in ev if e.get("ph") == "s"}
    ends = {}
    for e in ev:
        if e.get("ph") == "f":
            ends.setdefault(e["id"], []).append(e)
    reqs = [e for e in on if e["ph"] == "f" and e["name"] == "request"]
    reps = [e for e in on if e["ph"] == "s" and e["name"] == "reply"]
    F.check(len(reqs) >= 5 and all(e["id"] in starts and starts[e["id"]]["pid"] != out[0] and
                                   starts[e["id"]]["ts"] <= e["ts"] for e in reqs),
            f"{label}: each request the host sent ends its flow on the instance's track, after its start "
            f"({len(reqs)} of them)")
    F.check(len(reps) >= 5 and len({e["id"] for e in reps}) == len(reps) and
            all(ends.get(e["id"]) and all(x["ts"] >= e["ts"] and x["pid"] != out[0] for x in ends[e["id"]])
                for e in reps),
            f"{label}: each reply starts one flow on the instance's track, ending where the host took it "
            f"({len(reps)} of them)")


def chrome_check(path, total, label, want_procs):
    label = f"{label} --chrome"
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        F.check(False, f"{label}: the file is valid JSON ({e!r})")
        return
    ev = d.get("traceEvents") if isinstance(d, dict) else None
    F.check(isinstance(ev, list) and ev, f"{label}: an object with a non-empty traceEvents list ({str(d)[:200]})")
    if not ev:
        return
    meta = [e for e in ev if e.get("ph") == "M"]
    names, procs = {}, {}
    for e in meta:
        name = (e.get("args") or {}).get("name")
        if e.get("name") == "thread_name":
            names.setdefault((e.get("pid"), e.get("tid")), []).append(name)
        elif e.get("name") == "process_name":
            procs.setdefault(e.get("pid"), []).append(name)
    track_of = {a: key for key, n in names.items() for a in str(n[0]).split()}  # actor -> (pid, tid)
    F.check(procs == {p: [n] for p, n in want_procs.items()},
            f"{label}: process_name metadata names each process of the host by its pid ({procs}, want {want_procs})")
    F.check("loop.0" in track_of and "pool.0.0" in track_of and track_of["loop.0"] != track_of["pool.0.0"],
            f"{label}: thread_name metadata names loop.0's and pool.0.0's threads, two tracks ({names})")
    F.check(all(len(n) == 1 for n in names.values()), f"{label}: one name per track (pid, tid) ({names})")
    inst = [e for e in ev if e.get("ph") == "i"]
    F.check(len(inst) >= total > 0, f"{label}: one instant event per record (>= the {total} records printed, "
                                    f"{len(inst)})")
    F.check(all((e.get("pid"), e.get("tid")) in names and isinstance(e.get("ts"), (int, float)) for e in inst),
            f"{label}: every instant event is on a named track, with a ts ({inst[:1]})")
    mine = [e for e in inst if ((e.get("args") or {}).get("trace")) == TID]
    F.check(len(mine) == 4, f"{label}: the request's four records are instant events carrying its trace id "
                            f"({len(mine)})")
    s = [e for e in ev if e.get("ph") == "s"]
    f_ = [e for e in ev if e.get("ph") == "f"]
    F.check(s and f_, f"{label}: flow events (s and f) are present ({len(s)} s, {len(f_)} f)")
    by_id = {}
    for e in f_:
        by_id.setdefault(e.get("id"), []).append(e)
    # A message sent to an actor already told to stop may never be taken: the
    # producer's frame published as the drain begins stays in loop.0's
    # mailbox (streams end, so it is moot). Its s has no f, truthfully; it
    # is the only flow allowed to stay open.
    stop_sent = {}
    for e in inst:
        a = e.get("args") or {}
        if a.get("dir") == "send" and a.get("kind") == "stop":
            stop_sent[a.get("to")] = min(e["ts"], stop_sent.get(a.get("to"), e["ts"]))
    to_of = lambda e: str(e.get("id")).split(">", 1)[-1].split("#", 1)[0]
    into_drain = lambda e: to_of(e) in stop_sent and stop_sent[to_of(e)] <= e.get("ts", 0)
    unmatched = [e for e in s if len(by_id.get(e.get("id"), [])) > 1
                 or (not by_id.get(e.get("id")) and not into_drain(e))]
    F.check(not unmatched, f"{label}: every s has exactly one f with its id, but a message sent to an actor "
                           f"already told to stop, which may have none ({unmatched[:2]})")
    sids = {e.get("id") for e in s}
    orphans = [e for e in f_ if e.get("id") not in sids]
    F.check(not orphans, f"{label}: every f has an s ({orphans[:2]})")
    backwards = [e for e in s if by_id.get(e.get("id")) and by_id[e["id"]][0].get("ts", 0) < e.get("ts", 0)]
    F.check(not backwards, f"{label}: no flow ends before it starts ({backwards[:2]})")
    track = lambda e: (e.get("pid"), e.get("tid"))
    job = [e for e in s if e.get("name") == "job" and track(e) == track_of.get("loop.0")
           and by_id.get(e.get("id")) and track(by_id[e["id"]][0]) == track_of.get("pool.0.0")]
    F.check(job, f"{label}: a job flow runs from loop.0's track to pool.0.0's")


if __name__ == "__main__":
    try:
        stderr_trace()
        batch_ids()
        served_on_loop()
        handoff_trace()
        tracing_off()
        m0trace_live()
        switched_while_running()
        worker_processes()
        outside_track()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    F.done()
