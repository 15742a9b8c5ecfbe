"""Server-sent event streams (docs/behaviour.md, The producer, Streams and the
bus, Drain; docs/apps.md, host_check /events and /events-from-func).

Proves:
- One loop: GET /events and GET /events-from-func answer 200
  `text/event-stream`, `x-worker: 0`, no Content-Length; within 1 s at the
  default period (100 ms) a stream carries at least 3 beats; every frame's
  first line is `id: <n>`, ids rise by exactly 1, the beat number with them,
  and the data's pid is the server's.
- Heartbeat: with the producer idle (period 100 s) and `--sse-heartbeat-ms
  200`, an idle stream receives `:` comment frames at about that cadence (at
  least 3 and at most 10 in 1.2 s); a stream that beats every 100 ms is never
  idle for 200 ms, so it carries no comment at all.
- `--threads 2`: four streams that span both loops (x-worker 0 and 1; if they
  do not, the check fails as vacuous) carry the same contiguous id sequence
  over ~1.5 s (no gap, no repeat, at least 10 ids in common, identical data
  for each id) and one pid, the server's.
- `--workers 2`: the same across processes: x-worker spans 0 and 1, ids
  contiguous and identical across the four streams, one pid in the data.
- `--blocking-threads 1`: /events-from-func is 409 and the log names the
  refused stream (409, pool, its channel);
  /events still streams (opened on the loop).
- Drain (single, threads, workers): with streams open, SIGTERM: each stream
  receives a final `event: m0.closing` frame with a `retry:` line, nothing
  after it, then EOF; the process exits 0.
- Resume and HEAD (single, `--workers 2`): /events?welcome=1 opened with
  `Last-Event-ID: N` gets the view's own frame (m0_stream_write: no id)
  first, then the held frames after N, contiguous; a HEAD of /events and
  of /events-from-func is the stream's head (200 text/event-stream, no
  `Connection: close`) and the connection stays an ordinary keep-alive one:
  a second request on it is answered, with no stream frame before it.

The SSE client here (`Stream`, `drain_check`, and `children` / `reap_seen`,
which remember every worker pid seen and kill the ones left) is imported by
the other stream tests; this file runs its own checks only as a script.
`Prefork` and `wait_for` are the harness's.
"""
import http.client
import json
import signal
import socket
import threading
import time

import harness
from harness import Failures, Prefork, Server, reap, wait_for

SEEN_PIDS = set()  # every worker pid observed: killed by pid at the end if still running


def children(pid):
    out = harness.children(pid)
    SEEN_PIDS.update(out)
    return out


def reap_seen():
    """Kills (by pid) any worker this test saw that is still alive."""
    reap(SEEN_PIDS)


class Frame:
    """One SSE frame (the text between blank lines)."""

    def __init__(self, text, t):
        self.t = t
        self.raw = text
        self.lines = text.split("\n")
        self.comment = all(line.startswith(":") for line in self.lines)
        self.fields = []
        for line in self.lines:
            if line.startswith(":"):
                continue
            k, sep, v = line.partition(":")
            if sep and v.startswith(" "):
                v = v[1:]
            self.fields.append((k, v))
        get = lambda k: next((v for kk, v in self.fields if kk == k), None)
        self.event = get("event")
        self.retry = get("retry")
        data = [v for k, v in self.fields if k == "data"]
        self.data = "\n".join(data) if data else None
        idv = get("id")
        try:
            self.id = int(idv) if idv is not None else None
        except ValueError:
            self.id = None
        self.id_first = self.lines[0].startswith("id: ") and self.id is not None

    def json(self):
        try:
            return json.loads(self.data)
        except (TypeError, ValueError):
            return None

    def __repr__(self):
        return repr(self.raw)


class Stream:
    """GET `path` on a fresh connection; reads the head (bounded), then a
    thread reads frames until EOF or close(). A non-stream answer (one with a
    Content-Length) is read whole into `body` and no thread runs.

    status, headers{lower: value}, frames [Frame], eof (bool), eof_t."""

    def __init__(self, port, path="/events", timeout=5.0, headers=""):
        self.path = path
        self.frames = []
        self.eof = False
        self.eof_t = None
        self.error = None
        self.body = b""
        self.halt = threading.Event()
        self.thread = None
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n{headers}\r\n".encode())
        buf = b""
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{path}: no response head within {timeout}s ({buf[:200]!r})")
            self.sock.settimeout(left)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"{path}: closed before a response head ({buf[:200]!r})")
            buf += chunk
        head, self.buf = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        self.status_line = lines[0]
        self.status = int(lines[0].split(" ")[1])
        self.headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            self.headers.setdefault(k.strip().lower(), v.strip())
        self.t_head = time.monotonic()
        if "content-length" in self.headers:
            n = int(self.headers["content-length"])
            while len(self.buf) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.sock.settimeout(left)
                chunk = self.sock.recv(65536)
                if not chunk:
                    break
                self.buf += chunk
            self.body = self.buf[:n]
            return
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    @property
    def worker(self):
        return self.headers.get("x-worker")

    def _parse(self):
        self.buf = self.buf.replace(b"\r\n", b"\n")
        while b"\n\n" in self.buf:
            text, self.buf = self.buf.split(b"\n\n", 1)
            self.frames.append(Frame(text.decode("utf-8", "replace"), time.monotonic()))

    def _read(self):
        self._parse()
        while not self.halt.is_set():
            self.sock.settimeout(0.1)
            try:
                chunk = self.sock.recv(65536)
            except (socket.timeout, TimeoutError):
                continue
            except OSError as e:  # reset counts as the end of the stream
                self.error = repr(e)
                chunk = b""
            if not chunk:
                self.eof_t = time.monotonic()
                self.eof = True
                return
            self.buf += chunk
            self._parse()

    def beats(self):
        return [f for f in list(self.frames) if f.event == "beat"]

    def ids(self, event="beat"):
        return [f.id for f in list(self.frames) if f.event == event]

    def comments(self):
        return [f for f in list(self.frames) if f.comment]

    def wait_frames(self, n, timeout, event="beat"):
        return wait_for(lambda: len(self.ids(event)) >= n or self.eof, timeout) and len(self.ids(event)) >= n

    def close(self):
        self.halt.set()
        if self.thread:
            self.thread.join(timeout=2)
        try:
            self.sock.close()
        except OSError:
            pass


def is_stream_head(st):
    return (st.status == 200 and st.headers.get("content-type", "").startswith("text/event-stream")
            and "content-length" not in st.headers)


def contiguous(ids):
    return all(b == a + 1 for a, b in zip(ids, ids[1:]))


def open_spanning(port, n, path="/events"):
    """Opens n streams one after another (each head read before the next):
    accept sharing should spread them over the loops/workers."""
    out = []
    for _ in range(n):
        out.append(Stream(port, path))
    return out


def instance(port, timeout=3.0):
    """GET /instance on a fresh connection: its JSON (worker, thread, pid, hits)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", "/instance", headers={"Connection": "close"})
        r = c.getresponse()
        return json.loads(r.read())
    finally:
        c.close()


def hold_each(F, port, label, want=("0", "1")):
    """Opens streams one after another until one is held on each worker in
    `want` (accept sharing spreads them); closes the extras. {x-worker: Stream},
    or None with a failed check on F."""
    held, extra = {}, []
    for _ in range(8):
        st = Stream(port, "/events")
        if st.worker in held or st.worker not in want or not is_stream_head(st):
            extra.append(st)
        else:
            held[st.worker] = st
        if set(held) == set(want):
            break
    F.check(set(held) == set(want), f"{label}: a stream held on worker(s) {list(want)} (x-worker {sorted(held)}, "
                                    f"extras {[st.worker for st in extra]})")
    for st in extra:
        st.close()
    return held if set(held) == set(want) else None


def map_workers(F, port, kids, label):
    """x-worker -> pid under --workers 2 (`kids`: the supervisor's two
    children), by GET /instance on fresh connections (bounded); with one
    worker seen, the other is the other child. None with a failed check on F."""
    pid_of = {}
    for _ in range(100):
        try:
            j = instance(port)
            pid_of[str(j["worker"])] = j["pid"]
        except Exception:
            pass
        if len(pid_of) == 2:
            break
    if len(pid_of) == 1:
        (w, p), = pid_of.items()
        rest = kids - {p}
        if len(rest) == 1:
            pid_of[{"0": "1", "1": "0"}[w]] = rest.pop()
    ok = set(pid_of) == {"0", "1"} and set(pid_of.values()) == kids
    F.check(ok, f"{label}: x-worker mapped to the worker pids ({pid_of}, children {kids})")
    return pid_of if ok else None


def drain_check(F, s, streams, label):
    """SIGTERM with `streams` open: each gets `event: m0.closing` + `retry:`
    as its last frame, then EOF; exit 0. The host's drain bound is 5 s;
    the waits here are 30 s, so a loaded machine's scheduling is not taken
    for a missed bound (bench/run_lifecycle times the drain)."""
    t0 = time.monotonic()
    s.signal(signal.SIGTERM)
    wait_for(lambda: all(st.eof for st in streams), 30.0)
    for i, st in enumerate(streams):
        real = [f for f in list(st.frames) if not f.comment]
        last = real[-1] if real else None
        F.check(last is not None and last.event == "m0.closing" and last.retry is not None,
                f"{label}: stream {i} (x-worker {st.worker}) ends with an `event: m0.closing` frame carrying "
                f"`retry:` (last frames {real[-3:]})")
        closing = [f for f in real if f.event == "m0.closing"]
        F.check(len(closing) == 1, f"{label}: stream {i}: exactly one m0.closing frame ({len(closing)})")
        F.check(last is not None and last.retry == "1000", f"{label}: stream {i}: `retry: 1000` ({last!r})")
        F.check(st.eof, f"{label}: stream {i}: the server closes it (EOF) after SIGTERM "
                f"(eof {st.eof}, {st.eof_t and st.eof_t - t0}, buffered {st.buf[:100]!r})")
        F.check(not st.buf.strip(), f"{label}: stream {i}: nothing after the closing frame ({st.buf[:100]!r})")
    try:
        rc = s.wait(timeout=max(0.1, 30.0 - (time.monotonic() - t0)))
    except AssertionError as e:
        rc = None
        print(e)
    took = time.monotonic() - t0
    F.check(rc == 0, f"{label}: SIGTERM -> exit 0 (rc {rc}, {took:.2f}s):\n{s.stderr()}")
    for st in streams:
        st.close()


def check_common(F, streams, label, server_pid=None):
    """Every stream's beat ids are contiguous; over the window every stream
    covers, all carry exactly the same ids with the same data; one pid."""
    ids = [st.ids() for st in streams]
    for i, (st, l) in enumerate(zip(streams, ids)):
        F.check(len(l) >= 10, f"{label}: stream {i} (x-worker {st.worker}) carried >= 10 beats in ~1.5 s ({len(l)})")
        F.check(contiguous(l), f"{label}: stream {i} (x-worker {st.worker}): ids rise by exactly 1, "
                               f"no gap, no repeat ({l})")
        bad = [f for f in st.frames if not f.comment and not f.id_first]
        F.check(not bad, f"{label}: stream {i}: `id:` is the first line of every frame ({bad[:2]})")
    if not all(ids):
        F.check(False, f"{label}: every stream carried beats ({[len(l) for l in ids]})")
        return
    lo, hi = max(l[0] for l in ids), min(l[-1] for l in ids)
    F.check(hi - lo + 1 >= 10, f"{label}: the four streams share >= 10 ids ({lo}..{hi})")
    want = list(range(lo, hi + 1))
    for i, l in enumerate(ids):
        got = [x for x in l if lo <= x <= hi]
        F.check(got == want, f"{label}: stream {i} carries every id {lo}..{hi} exactly once ({got})")
    data = [{f.id: f.data for f in st.beats() if lo <= f.id <= hi} for st in streams]
    F.check(all(d == data[0] for d in data), f"{label}: each id has the same data on every stream")
    pids = {(f.json() or {}).get("pid") for st in streams for f in st.beats()}
    F.check(len(pids) == 1, f"{label}: one pid in every beat of every stream ({pids})")
    if server_pid is not None:
        F.check(pids == {server_pid}, f"{label}: that pid is the server's ({pids} vs {server_pid})")
    return pids


def single(F):
    label = "single"
    with Server("host_check", "--port", "0") as s:
        streams = []
        for path in ("/events", "/events-from-func"):
            st = Stream(s.port, path)
            streams.append(st)
            F.check(is_stream_head(st), f"{label}: GET {path} -> 200 text/event-stream, no Content-Length "
                                        f"({st.status_line}, {st.headers})")
            F.check(st.worker == "0", f"{label}: GET {path} carries x-worker: 0 ({st.worker})")
            t0 = st.t_head
            time.sleep(max(0.0, t0 + 1.0 - time.monotonic()))
            within = [f for f in st.beats() if f.t <= t0 + 1.0]
            F.check(len(within) >= 3, f"{label}: {path}: >= 3 beats within 1 s at period 100 ({len(within)})")
            ids = [f.id for f in within]
            F.check(contiguous(ids) and len(ids) >= 2, f"{label}: {path}: ids rise by exactly 1 ({ids})")
            beats = [(f.json() or {}).get("beat") for f in within]
            F.check(all(isinstance(b, int) for b in beats) and contiguous(beats),
                    f"{label}: {path}: beat numbers rise by exactly 1 ({beats})")
            bad = [f for f in st.frames if not f.id_first]
            F.check(not bad and st.frames, f"{label}: {path}: `id: <n>` is the first line of every frame ({bad[:2]})")
            pids = {(f.json() or {}).get("pid") for f in within}
            F.check(pids == {s.proc.pid}, f"{label}: {path}: the data's pid is the server's ({pids})")
            F.check(not st.eof, f"{label}: {path}: the stream stays open")
        # Both streams: the same ids over the time both were open.
        a, b = streams[0].ids(), streams[1].ids()
        common = [x for x in a if x >= b[0]] if b else []
        F.check(common and common == [x for x in b if x <= a[-1]],
                f"{label}: the loop-opened and function-opened streams carry the same ids ({a} / {b})")
        drain_check(F, s, streams, f"{label} drain")


def heartbeat(F):
    label = "heartbeat"
    with Server("host_check", "--port", "0", "--sse-heartbeat-ms", "200", "--metrics-path", "/metrics",
                env={"M0_HOSTCHECK_PERIOD_MS": "100000"}) as s:
        st = Stream(s.port, "/events")
        F.check(is_stream_head(st), f"{label}: GET /events is a stream ({st.status_line})")
        # The producer's first step (beat 1) may land just after the stream opens (a loaded machine): the idle
        # window starts once the host has published it (m0_events_published_total), or once it arrived if later.
        F.check(wait_for(lambda: (harness.metric(s.port, "m0_events_published_total") or 0) >= 1, 10),
                f"{label}: the producer published its first beat")
        first = [f for f in st.frames if not f.comment]
        t0 = max([time.monotonic()] + [f.t for f in first])
        time.sleep(max(0.0, t0 + 1.2 - time.monotonic()))
        com = [f for f in st.comments() if t0 < f.t <= t0 + 1.2]
        real = [f for f in st.frames if not f.comment and (f.json() or {}).get("beat") != 1]
        F.check(3 <= len(com) <= 10,
                f"{label}: an idle stream gets a heartbeat comment every ~200 ms (3..10 in 1.2 s, got {len(com)}: "
                f"{[round(f.t - t0, 2) for f in com]})")
        F.check(all(f.raw.startswith(":") for f in com) and com and com[0].raw == ": beat",
                f"{label}: the heartbeat is a `:` comment frame ({com[:2]})")
        F.check(not real, f"{label}: no beat after the first on the idle stream at period 100 s ({real[:2]})")
        F.check(not st.eof, f"{label}: the idle stream stays open")
        st.close()
    # The heartbeat at 6x the beat period: a loaded machine may delay a beat
    # by a few hundred ms, which must not make this check flaky.
    with Server("host_check", "--port", "0", "--sse-heartbeat-ms", "600") as s:
        st = Stream(s.port, "/events")
        time.sleep(1.2)
        F.check(len(st.beats()) >= 8, f"{label}: at period 100 the stream beats ({len(st.beats())} in 1.2 s)")
        F.check(not st.comments(),
                f"{label}: a stream beating every 100 ms is never idle for 600 ms: no heartbeat "
                f"({len(st.comments())} comments)")
        st.close()
        F.check(s.stop() == 0, f"{label}: SIGTERM -> exit 0")


def threads(F):
    label = "threads 2"
    with Server("host_check", "--threads", "2", "--port", "0") as s:
        streams = open_spanning(s.port, 4)
        workers = [st.worker for st in streams]
        F.check(all(is_stream_head(st) for st in streams),
                f"{label}: four /events streams answered 200 text/event-stream ({[st.status_line for st in streams]})")
        F.check(set(workers) == {"0", "1"},
                f"{label}: the four streams span both loops, else this test proves nothing (x-worker {workers})")
        time.sleep(1.5)
        check_common(F, streams, label, server_pid=s.proc.pid)
        drain_check(F, s, streams, f"{label} drain")


def workers(F):
    label = "workers 2"
    with Prefork("host_check", "--workers", "2", "--port", "0") as s:
        sup = s.proc.pid
        kids = wait_for(lambda: children(sup) if len(children(sup)) == 2 else None, 5)
        F.check(kids, f"{label}: two worker processes under the supervisor ({children(sup)})")
        streams = open_spanning(s.port, 4)
        workers = [st.worker for st in streams]
        F.check(all(is_stream_head(st) for st in streams),
                f"{label}: four /events streams answered 200 text/event-stream ({[st.status_line for st in streams]})")
        F.check(set(workers) == {"0", "1"},
                f"{label}: the four streams span both workers, else this test proves nothing (x-worker {workers})")
        time.sleep(1.5)
        pids = check_common(F, streams, label)
        print(f"{label}: beats carry pid {pids} (supervisor {sup}, workers {sorted(kids or [])})", flush=True)
        drain_check(F, s, streams, f"{label} drain")


def pool(F):
    label = "blocking-threads 1"
    with Server("host_check", "--blocking-threads", "1", "--port", "0") as s:
        bad = Stream(s.port, "/events-from-func")
        F.check(bad.status == 409, f"{label}: /events-from-func (opened on a pool thread) -> 409 ({bad.status_line})")
        F.check(not bad.headers.get("content-type", "").startswith("text/event-stream"),
                f"{label}: the 409 is not a stream ({bad.headers})")
        bad.close()
        named = lambda: [l for l in s.stderr().splitlines() if "409" in l and "pool" in l and "beats" in l]
        F.check(wait_for(named, 2), f"{label}: the log names the refused stream (a line with 409, pool, "
                                    f"and its channel `beats`):\n{s.stderr()}")
        st = Stream(s.port, "/events")
        F.check(is_stream_head(st), f"{label}: /events (opened on the loop) is a stream ({st.status_line})")
        F.check(st.wait_frames(3, 2.0) and contiguous(st.ids()), f"{label}: /events beats ({st.ids()})")
        drain_check(F, s, [st], f"{label} drain")


def resume_and_head(F, label, cls, *mode):
    from rawhttp import Conn, request
    with cls("host_check", "--port", "0", "--stream-history", "64", *mode) as s:
        first = Stream(s.port, "/events")
        F.check(first.wait_frames(4, 10), f"{label}: a stream's first beats ({first.ids()})")
        first.close()
        last = first.ids()[1] if len(first.ids()) > 1 else 0
        # The loops keep the beats while nobody listens: resume behind a few more.
        again = Stream(s.port, "/events?welcome=1", headers=f"Last-Event-ID: {last}\r\n")
        F.check(wait_for(lambda: len([f for f in list(again.frames) if not f.comment]) >= 4, 10),
                f"{label}: the resumed stream carries frames ({again.frames[:4]})")
        real = [f for f in list(again.frames) if not f.comment]
        ids = [f.id for f in real[1:4]]
        F.check(real and real[0].event == "welcome" and real[0].id is None,
                f"{label}: Last-Event-ID: {last} with ?welcome=1: the view's own frame comes first, without an id "
                f"({real[:3]})")
        F.check(ids == [last + 1, last + 2, last + 3] and all(f.event == "beat" for f in real[1:4]),
                f"{label}: then the held beats after {last}, contiguous ({ids})")
        again.close()
        for path in ("/events", "/events-from-func"):
            with Conn(s.port) as k:
                k.send(request("HEAD", path))
                st, _, hdr, _, line = k.try_response(head=True)
                F.check(st == 200 and hdr.get("content-type") == "text/event-stream" and "connection" not in hdr,
                        f"{label}: HEAD {path}: the stream's head, no Connection: close ({line}, {hdr})")
                k.send(request("GET", "/health"))
                st, _, _, body, line = k.try_response()
                F.check(st == 200 and b"ok" in body,
                        f"{label}: HEAD {path}: the connection stays keep-alive: a second request on it is "
                        f"answered, no stream frame before it ({line} {body[:60]!r})")
        F.check(s.stop() == 0, f"{label}: SIGTERM -> exit 0")


if __name__ == "__main__":
    F = Failures()
    try:
        single(F)
        heartbeat(F)
        threads(F)
        workers(F)
        pool(F)
        resume_and_head(F, "resume single", Server)
        resume_and_head(F, "resume workers 2", Prefork, "--workers", "2")
    finally:
        reap_seen()
    F.done()
