"""Slow clients (slowloris) are cut off by the timeouts and do not slow the
others (docs/behaviour.md, Limits and timeouts: request line + headers -> 408
and close, body -> 408 and close).

Server: host_check --header-timeout-ms 2000 --body-timeout-ms 2000
--max-connections 4096, in single mode first, then the same with
--threads 2 and with --workers 2, because 1000 connections arriving at once
exercise the accept sharing between loops (M0_TEST_SLOW_MODES=single,...
runs a subset). The test raises its own RLIMIT_NOFILE (soft limit up to
8192, never above the hard limit; the server and the trickler inherit it).

Two phases, each with CONNS = 1000 trickling connections driven by a separate
process (this file run with --trickle, non-blocking sockets and a selector, so
its work never holds the GIL of the measuring client):
  1. headers: each connection sends `GET /health HTTP/1.1\\r\\nHost: t\\r\\nX-Pad: a...`
     one byte every 500 ms (the head never completes);
  2. bodies: each sends a whole head with `Content-Length: 100`, then the body
     one byte every 500 ms (the body never completes).
Proves, per phase:
  - a normal client's /health latency (300 sequential requests on one
    keep-alive connection, 0.5 ms apart) has p99 during the trickle
    <= 2 x p99 before + 2 ms. The 2 ms absolute floor is there because p99
    before is ~0.1-1 ms, so 2x alone would turn scheduler noise of a
    shared, loaded 2-vCPU machine into a failure; 2 ms is still far below
    what a loop busy with 1000 slow connections would cost. For the same
    reason each p99 is the best of 3 samples of 300 (a server that is slow
    during the trickle is slow in all three), and the trickler runs at nice
    10 so its own CPU does not stand in for the server's. Every "during"
    sample must have finished before the first trickler could time out;
  - every one of the 1000 trickling connections gets exactly one whole 408
    and is then closed by the server, no earlier than 1.95 s and no later than
    5 s after its connect() call (the 2 s timeout plus ~3 s);
  - the server still answers /health afterwards and its drain log counts the
    timeouts; SIGTERM exits 0.
If the server stops answering /health during the header trickle, the body
phase of that mode is skipped (its failure is already reported).
Runs in ~30 s when the server is right (~10 s a mode), ~40 s when a mode stalls.
"""
import json
import os
import re
import resource
import selectors
import socket
import subprocess
import sys
import time

CONNS = 1000
SAMPLES = 3  # p99 is the best of 3 samples of 300 requests, before and during
MODES = [("single", []), ("threads2", ["--threads", "2"]), ("workers2", ["--workers", "2"])]
if os.environ.get("M0_TEST_SLOW_MODES"):  # e.g. "single" to run a subset
    MODES = [m for m in MODES if m[0] in os.environ["M0_TEST_SLOW_MODES"].split(",")]
PERIOD = 0.5
TIMEOUT_S = 2.0
HEAD = b"GET /health HTTP/1.1\r\nHost: t\r\nX-Pad: " + b"a" * 200
BODY_HEAD = b"GET /health HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n"


def raise_nofile(want=8192):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def trickle(mode, n, port, limit):
    """The trickler process: n connections, one byte each every PERIOD, until
    the server answers and closes each, or `limit` seconds pass. Prints READY
    once every connection is connected and has sent its first bytes, then one
    JSON line with each connection's connect time, status, answer and close
    times (time.monotonic(), which is CLOCK_MONOTONIC: comparable across
    processes)."""
    raise_nofile()
    sel = selectors.DefaultSelector()
    conns = []
    for i in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        t_call = time.monotonic()  # the server cannot accept (start its clock) before this
        s.connect_ex(("127.0.0.1", port))
        c = {"s": s, "i": i, "t_call": t_call, "connected": None, "sent": 0, "buf": b"", "status": None, "answered": None,
             "closed": None, "err": None}
        conns.append(c)
        sel.register(s, selectors.EVENT_WRITE, c)
    data = HEAD if mode == "head" else b"x" * 100
    t_begin = time.monotonic()
    pending = n
    while pending and time.monotonic() - t_begin < 10:
        for key, _ in sel.select(timeout=0.5):
            c = key.data
            err = c["s"].getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            c["connected"] = time.monotonic()
            pending -= 1
            if err:
                c["err"] = f"connect: {os.strerror(err)}"
                c["closed"] = c["connected"]
                sel.unregister(c["s"])
                continue
            try:
                if mode == "body":
                    c["s"].sendall(BODY_HEAD)  # small: fits the empty send buffer
                c["s"].send(data[:1])
                c["sent"] = 1
            except OSError as e:
                c["err"] = f"first send: {e}"
            c["next"] = c["connected"] + PERIOD
            sel.modify(c["s"], selectors.EVENT_READ, c)
    print("READY", flush=True)
    end = time.monotonic() + limit
    live = [c for c in conns if c["closed"] is None]
    while live and time.monotonic() < end:
        now = time.monotonic()
        for c in live:
            if c["buf"] or c["closed"] is not None or c.get("next") is None:
                continue  # answered: stop sending, only read
            if now >= c["next"] and c["sent"] < len(data):
                try:
                    c["s"].send(data[c["sent"]:c["sent"] + 1])
                    c["sent"] += 1
                except BlockingIOError:
                    pass
                except OSError as e:
                    c["err"] = c["err"] or f"send: {e}"
                c["next"] += PERIOD
        nxt = min([c["next"] for c in live if c.get("next") and not c["buf"]] or [now + 0.05])
        for key, _ in sel.select(timeout=max(0.0, min(0.05, nxt - time.monotonic()))):
            c = key.data
            try:
                chunk = c["s"].recv(65536)
            except BlockingIOError:
                continue
            except OSError as e:
                c["err"] = c["err"] or f"recv: {e}"
                chunk = b""
            t = time.monotonic()
            if chunk:
                c["buf"] += chunk
                if c["answered"] is None and b"\r\n\r\n" in c["buf"]:
                    c["answered"] = t
            else:
                c["closed"] = t
                sel.unregister(c["s"])
                c["s"].close()
        live = [c for c in live if c["closed"] is None]
    out = []
    for c in conns:
        st = None
        try:
            if c["buf"].startswith(b"HTTP/1.1 "):
                st = int(c["buf"][9:12])
        except ValueError:
            pass
        out.append({"t_call": c["t_call"], "connected": c["connected"], "status": st, "answered": c["answered"], "closed": c["closed"],
                    "bytes": len(c["buf"]), "whole": whole(c["buf"]), "err": c["err"], "sent": c["sent"]})
        if c["closed"] is None:
            c["s"].close()
    print(json.dumps(out), flush=True)


def whole(buf):
    """One complete response with exactly its Content-Length body, nothing after."""
    if b"\r\n\r\n" not in buf:
        return False
    head, body = buf.split(b"\r\n\r\n", 1)
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            return v.strip().isdigit() and int(v) == len(body)
    return False


if len(sys.argv) >= 5 and sys.argv[1] == "--trickle":
    trickle(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
    sys.exit(0)

from harness import Failures, Server  # noqa: E402
from rawhttp import Closed, Conn, request  # noqa: E402

F = Failures()


def p99_health(port, n=300, gap=0.0005):
    """(p99, p50) in ms of n sequential /health on one keep-alive connection
    (n=300: p99 is the 4th worst); (inf, inf) and a reason if one is not
    answered whole within 5 s."""
    lat = []
    try:
        with Conn(port, timeout=5) as k:
            for _ in range(n):
                t0 = time.perf_counter()
                k.send(request("GET", "/health"))
                st, _, _, body, _ = k.read_response()
                lat.append(time.perf_counter() - t0)
                if st != 200 or body != b'{"status":"ok"}':
                    return float("inf"), float("inf"), f"/health answered {st} {body!r}"
                time.sleep(gap)
    except (OSError, Closed, ValueError, IndexError) as e:
        return float("inf"), float("inf"), f"request {len(lat) + 1} of {n}: no whole answer within 5 s ({type(e).__name__}: {e})"
    lat.sort()
    return lat[-(n // 100) - 1] * 1000, lat[n // 2] * 1000, None


def best_p99(port):
    """The best of SAMPLES samples; stops at the first sample that failed."""
    best = (float("inf"), float("inf"), None)
    for _ in range(SAMPLES):
        r = p99_health(port)
        if r[2]:
            return r
        best = min(best, r)
    return best


def phase(s, label, kind):
    """One trickle phase; returns False if the server stopped answering."""
    before, b50, why = best_p99(s.port)
    F.check(why is None, f"[{label}] /health answered before the trickle ({why})")
    tr = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--trickle", kind, str(CONNS), str(s.port),
                           str(TIMEOUT_S + 6)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          preexec_fn=lambda: os.nice(10))
    try:
        ready = tr.stdout.readline().strip()
        F.check(ready == "READY", f"[{label}] trickler connected its {CONNS} connections ({ready!r})")
        t0 = time.monotonic()
        during, d50, why = best_p99(s.port)
        probe_end = time.monotonic()
        F.check(why is None, f"[{label}] /health answered whole during the trickle ({why})")
        out, err = tr.communicate(timeout=TIMEOUT_S + 20)
    finally:
        if tr.poll() is None:
            tr.kill()
            tr.wait(5)
    res = json.loads(out.strip().splitlines()[-1]) if out.strip() else []
    F.check(len(res) == CONNS, f"[{label}] trickler reported {len(res)} connections\n{err[-1000:]}")
    if not res:
        return False
    first = min(c["t_call"] for c in res)
    bound = 2 * before + 2.0
    print(f"[{label}] /health p99 before {before:.3f} ms (p50 {b50:.3f}), during {during:.3f} ms (p50 {d50:.3f}); "
          f"bound {bound:.3f} ms; probe ran {t0 - first:.2f}..{probe_end - first:.2f}s after the first connect")
    F.check(probe_end < first + TIMEOUT_S - 0.1, f"[{label}] the 'during' probe finished while every connection still trickled")
    F.check(during <= bound, f"[{label}] /health p99 during the trickle {during:.3f} ms <= 2 x {before:.3f} + 2 ms")
    got408 = [c for c in res if c["status"] == 408 and c["whole"]]
    closed = [c for c in res if c["closed"] is not None and c["status"] == 408]
    # Times count from the connect() call: the server's clock starts at its
    # accept, which cannot come earlier (the trickler may notice the
    # completed connect later than it happened).
    too_early = [c for c in res if c["answered"] is not None and c["answered"] - c["t_call"] < TIMEOUT_S - 0.05]
    too_late = [c for c in res if c["closed"] is None or c["closed"] - c["t_call"] > TIMEOUT_S + 3.0]
    ans = sorted(c["answered"] - c["t_call"] for c in res if c["answered"])
    cls = sorted(c["closed"] - c["t_call"] for c in res if c["closed"])
    bad = [c for c in res if not (c["status"] == 408 and c["whole"])]
    print(f"[{label}] {len(got408)} whole 408s, {len(closed)} closed after one; answer at "
          f"{ans[0] if ans else 0:.2f}..{ans[-1] if ans else 0:.2f}s, close at {cls[0] if cls else 0:.2f}..{cls[-1] if cls else 0:.2f}s after connect()")
    F.check(len(got408) == CONNS, f"[{label}] all {CONNS} trickling connections got one whole 408 ({len(got408)}); e.g. {bad[:2]}")
    F.check(len(closed) == CONNS, f"[{label}] ... and were closed by the server ({len(closed)})")
    F.check(not too_early, f"[{label}] none answered before the {TIMEOUT_S} s timeout ({len(too_early)}): {too_early[:2]}")
    F.check(not too_late, f"[{label}] all closed within {TIMEOUT_S} + 3 s of connecting ({len(too_late)} not): {too_late[:2]}")
    with Conn(s.port) as k:
        k.send(request("GET", "/health"))
        st = k.try_response()[0]
    F.check(st == 200, f"[{label}] /health still answered after the trickle")
    return why is None and st == 200


limit = raise_nofile()
print(f"RLIMIT_NOFILE soft limit {limit}")
t_all = time.monotonic()
if limit < CONNS + 200:
    print(f"SKIP: RLIMIT_NOFILE cannot be raised above {limit} (hard limit); {CONNS} connections need more")
    sys.exit(0)
for mode, args in MODES:
    t0 = time.monotonic()
    with Server("host_check", "--port", "0", *args, "--header-timeout-ms", "2000", "--body-timeout-ms", "2000",
                "--max-connections", "4096") as s:
        if phase(s, f"{mode} head", "head"):
            phase(s, f"{mode} body", "body")
        else:
            print(f"[{mode}] the server stopped answering during the header trickle: body phase skipped")
        rc = s.stop(timeout=12)
        F.check(rc == 0, f"[{mode}] exit 0 on SIGTERM after the trickles (got {rc})\n{s.stderr()[-800:]}")
        m = [int(x) for x in re.findall(r"(\d+) timed out", s.stderr())]
        F.check(sum(m) >= 2 * CONNS, f"[{mode}] the drain log counts >= {2 * CONNS} timeouts ({m})")
    print(f"[{mode}] done in {time.monotonic() - t0:.1f}s", flush=True)
print(f"took {time.monotonic() - t_all:.1f}s")
F.done()
