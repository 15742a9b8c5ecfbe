"""Embedding (docs/behaviour.md, Embedding: a program starts the host inside its own
process, keeps main and its signals, its own nng actor publishes into the
host's streams, it stops the host with a bound).

Proves, with `embed` (apps/embed):
- `embed --port 0` serves: stderr has `embed: serving on
  http://127.0.0.1:PORT (run dir DIR)` with the port the host listens on and
  DIR a 0700 directory; GET /health is 200 {"status":"ok"}.
- GET /events is a text/event-stream whose `event: tick` frames (published by
  the program's own nng actor every 100 ms) arrive: at least 3 within 2 s,
  `id:` first, ids strictly increasing.
- SIGINT: the program's own handler runs (its line is printed, before the
  host's drain starts), the open stream is closed by the server, the program
  prints `embed: ticker published N (R refused); host stopped with 0` with
  N >= 3 and R = 0, and exits 0, all within 5 s; the run dir is gone after.
- `embed --threads 2 --metrics-path /metrics` (the host's flags pass
  through): four streams spanning both loops (m0_streams per loop, since
  embed sends no x-worker; else the check fails as vacuous) carry the very
  same tick ids; SIGINT -> exit 0.
- `embed --workers 2` is refused: nonzero exit, a line saying why (workers /
  threads), nothing served. `embed --port abc` exits 2.
"""
import json
import os
import re
import signal
import stat
import time
import urllib.request

from harness import Failures, Server, run, wait_for
from test_streams import Stream, contiguous

F = Failures()
SERVING_RE = re.compile(r"embed: serving on http://127\.0\.0\.1:(\d+) \(run dir (\S+)\)")


def ticks(st):
    return [f for f in list(st.frames) if f.event == "tick"]


def sigint_stop(F, s, label, streams, min_published):
    t0 = time.monotonic()
    s.signal(signal.SIGINT)
    try:
        rc = s.wait(timeout=5.0)
    except AssertionError as e:
        rc = None
        print(e)
    took = time.monotonic() - t0
    F.check(rc == 0 and took <= 5.0, f"{label}: SIGINT -> exit 0 within 5 s (rc {rc}, {took:.2f}s)")
    err = s.stderr()
    lines = err.splitlines()
    own = [i for i, l in enumerate(lines) if l == "embed: the program's own signal handler ran"]
    F.check(len(own) == 1, f"{label}: the program's own signal handler line, once:\n{err}")
    drain = [i for i, l in enumerate(lines) if "draining" in l]
    F.check(own and drain and own[0] < drain[0],
            f"{label}: the program's handler ran before the host's drain started (lines {own}, {drain})")
    m = re.search(r"^embed: ticker published (\d+) \((\d+) refused\); host stopped with (-?\d+)$", err, re.M)
    F.check(m is not None, f"{label}: the final `embed: ticker published N (R refused); host stopped with S` line:\n{err}")
    if m:
        n, r, code = (int(x) for x in m.groups())
        F.check(n >= min_published, f"{label}: the ticker published >= {min_published} frames ({n})")
        F.check(r == 0, f"{label}: none refused ({r})")
        F.check(code == 0, f"{label}: the host stopped with 0 ({code})")
    for i, st in enumerate(streams):
        F.check(wait_for(lambda: st.eof, 2.0), f"{label}: stream {i} is closed by the server at the stop")
        last = [f for f in st.frames if not f.comment][-1:]
        F.check(last and last[0].event == "m0.closing", f"{label}: stream {i} ends with m0.closing ({last})")
        st.close()


def single():
    label = "embed"
    with Server("embed", "--port", "0") as s:
        m = wait_for(lambda: SERVING_RE.search(s.stderr()), 3)
        F.check(m is not None, f"{label}: `embed: serving on http://127.0.0.1:PORT (run dir DIR)`:\n{s.stderr()}")
        run_dir = None
        if m:
            F.check(int(m.group(1)) == s.port, f"{label}: the program's port is the host's ({m.group(1)} vs {s.port})")
            run_dir = m.group(2)
            try:
                mode = stat.S_IMODE(os.stat(run_dir).st_mode)
            except OSError:
                mode = None
            F.check(mode == 0o700, f"{label}: the run dir {run_dir} exists, mode 0700 ({mode and oct(mode)})")
        try:
            r = urllib.request.urlopen(s.url("/health"), timeout=5)
            st_, body = r.status, r.read()
        except OSError as e:
            st_, body = repr(e), b""
        F.check(st_ == 200 and json.loads(body or b"{}") == {"status": "ok"},
                f"{label}: GET /health -> 200 {{\"status\":\"ok\"}} ({st_}, {body!r})")
        st = Stream(s.port, "/events")
        F.check(st.status == 200 and st.headers.get("content-type", "").startswith("text/event-stream"),
                f"{label}: GET /events is a stream ({st.status_line}, {st.headers})")
        got = wait_for(lambda: len(ticks(st)) >= 3, 2.0)
        tk = ticks(st)
        ids = [f.id for f in tk]
        F.check(got, f"{label}: >= 3 `event: tick` frames within 2 s ({len(tk)}; frames {st.frames[:3]})")
        F.check(all(f.id_first for f in tk), f"{label}: `id:` is each tick's first line ({tk[:2]})")
        F.check(len(ids) >= 2 and all(isinstance(x, int) for x in ids) and all(b > a for a, b in zip(ids, ids[1:])),
                f"{label}: tick ids strictly increase ({ids})")
        sigint_stop(F, s, label, [st], 3)
        if run_dir:
            F.check(not os.path.exists(run_dir), f"{label}: the run dir {run_dir} is removed at exit")


def threads():
    label = "embed --threads 2"
    # embed's /events carries no x-worker: the host's own metrics say which loops hold the streams.
    with Server("embed", "--port", "0", "--threads", "2", "--metrics-path", "/metrics") as s:
        streams = [Stream(s.port, "/events") for _ in range(4)]

        def per_loop():
            try:
                text = urllib.request.urlopen(s.url("/metrics"), timeout=5).read().decode()
            except OSError as e:
                text = repr(e)
            return {m.group(1): int(m.group(2)) for m in re.finditer(r'^m0_streams\{loop="(\d+)"\} (\d+)$', text, re.M)}
        # A stream is counted once its loop took it: the last may still be on its way.
        per_loop = wait_for(lambda: (lambda p: p if sum(p.values()) == 4 else None)(per_loop()), 5) or per_loop()
        F.check(per_loop.get("0", 0) >= 1 and per_loop.get("1", 0) >= 1 and sum(per_loop.values()) == 4,
                f"{label}: the four streams span both loops (m0_streams per loop {per_loop}), else this proves "
                f"nothing")
        wait_for(lambda: all(len(ticks(st)) >= 5 for st in streams), 10)
        ids = [[f.id for f in ticks(st)] for st in streams]
        F.check(all(len(l) >= 5 for l in ids), f"{label}: every stream gets ticks ({[len(l) for l in ids]})")
        if all(ids):
            lo, hi = max(l[0] for l in ids), min(l[-1] for l in ids)
            common = [[x for x in l if lo <= x <= hi] for l in ids]
            F.check(hi >= lo and all(c == common[0] for c in common) and contiguous(common[0]),
                    f"{label}: all streams carry the same tick ids, contiguous, over the window they share ({ids})")
        sigint_stop(F, s, label, streams, 5)


def refusals():
    label = "embed --workers 2"
    rc, out, err = run("embed", "--workers", "2", "--port", "0", timeout=10)
    F.check(rc not in (0, None) and rc != -signal.SIGKILL, f"{label}: refused with a nonzero exit ({rc})")
    F.check(re.search(r"worker", err) and re.search(r"thread", err),
            f"{label}: says why (worker processes are not for an embedded host; threads are) ({err!r})")
    F.check("listening" not in err and "serving on" not in err, f"{label}: nothing served ({err!r})")
    label = "embed --port abc"
    rc, out, err = run("embed", "--port", "abc", timeout=10)
    F.check(rc == 2, f"{label}: exit 2 ({rc}, {err!r})")
    F.check("abc" in err and "serving on" not in err, f"{label}: the message names the bad value ({err!r})")


if __name__ == "__main__":
    single()
    threads()
    refusals()
    F.done()
