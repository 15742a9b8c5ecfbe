"""Slow clients (slowloris) are cut off by the timeouts and the others are
still served (docs/behaviour.md, Limits and timeouts: request line + headers
-> 408 and close, body -> 408 and close).

Server: host_check --header-timeout-ms 2000 --body-timeout-ms 2000
--max-connections 4096, in single mode first, then the same with
--threads 2 and with --workers 2, because 1000 connections arriving at once
exercise the accept sharing between loops (M0_TEST_SLOW_MODES=single,...
runs a subset). The test raises its own RLIMIT_NOFILE (soft limit up to
8192, never above the hard limit; the server and the trickler inherit it).

Two phases, each with CONNS = 1000 trickling connections driven by a separate
process (this file run with --trickle, non-blocking sockets and a selector, so
its work never holds the GIL of the normal client; bench/run_slow_clients
runs the same trickler):
  1. headers: each connection sends `GET /health HTTP/1.1\r\nHost: t\r\nX-Pad: a...`
     one byte every 500 ms (the head never completes);
  2. bodies: each sends a whole head with `Content-Length: 100`, then the body
     one byte every 500 ms (the body never completes).
Proves, per phase:
  - a normal client is served during the trickle: 300 sequential /health on
    one keep-alive connection, each answered whole within 5 s (what that
    costs its latency is a measurement: bench/run_slow_clients);
  - every trickling connection whose first bytes went out within 1 s (half
    the timeout) of its connect() call gets exactly one whole 408 and is
    then closed by the server; one whose first bytes went out later (a
    trickler starved on a loaded machine) gets that or is closed with no
    answer, as a connection that never sent a byte is (docs/behaviour.md);
    none is answered before the 2 s timeout counted from its connect() (a
    loaded machine can only make it later), every one is closed before the
    trickler gives up (the timeout + 6 s), and some were in time;
  - the server still answers /health afterwards and its drain log counts a
    timeout for each 408; SIGTERM exits 0.
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
    JSON line with each connection's connect time, first send, status, answer
    and close times (time.monotonic(), which is CLOCK_MONOTONIC: comparable
    across processes)."""
    raise_nofile()
    sel = selectors.DefaultSelector()
    conns = []
    for i in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        t_call = time.monotonic()  # the server cannot accept (start its clock) before this
        s.connect_ex(("127.0.0.1", port))
        c = {"s": s, "i": i, "t_call": t_call, "connected": None, "first": None, "sent": 0, "buf": b"", "status": None,
             "answered": None,
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
                c["first"] = time.monotonic()
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
                    "bytes": len(c["buf"]), "whole": whole(c["buf"]), "err": c["err"], "sent": c["sent"],
                    "first": c["first"]})
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


def health_during(port, n=300, gap=0.0005):
    """n sequential /health on one keep-alive connection: None, or why one
    was not answered whole within 5 s."""
    done = 0
    try:
        with Conn(port, timeout=5) as k:
            for _ in range(n):
                k.send(request("GET", "/health"))
                st, _, _, body, _ = k.read_response()
                if st != 200 or body != b'{"status":"ok"}':
                    return f"/health answered {st} {body!r}"
                done += 1
                time.sleep(gap)
    except (OSError, Closed, ValueError, IndexError) as e:
        return f"request {done + 1} of {n}: no whole answer within 5 s ({type(e).__name__}: {e})"
    return None


def phase(s, label, kind):
    """One trickle phase; returns False if the server stopped answering."""
    why = health_during(s.port)
    F.check(why is None, f"[{label}] /health answered before the trickle ({why})")
    tr = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--trickle", kind, str(CONNS), str(s.port),
                           str(TIMEOUT_S + 6)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = tr.stdout.readline().strip()
        F.check(ready == "READY", f"[{label}] trickler connected its {CONNS} connections ({ready!r})")
        why = health_during(s.port)
        F.check(why is None, f"[{label}] /health answered whole during the trickle ({why})")
        out, err = tr.communicate(timeout=TIMEOUT_S + 20)
    finally:
        if tr.poll() is None:
            tr.kill()
            tr.wait(5)
    res = json.loads(out.strip().splitlines()[-1]) if out.strip() else []
    F.check(len(res) == CONNS, f"[{label}] trickler reported {len(res)} connections\n{err[-1000:]}")
    if not res:
        return False, 0
    # What the server saw of each connection depends on when its first
    # bytes went out: a trickler starved on a loaded machine may send them
    # only after the server's timeout, and a connection that never sent a
    # byte (to the server's knowledge) is closed with no answer
    # (docs/behaviour.md). So a connection whose first bytes went out within
    # half the timeout of its connect() must get its 408; a later one may get
    # the 408 or that silent close, nothing else.
    prompt = [c for c in res if c["first"] is not None and c["first"] - c["t_call"] < TIMEOUT_S / 2]
    late = [c for c in res if c not in prompt]
    got408 = [c for c in res if c["status"] == 408 and c["whole"]]
    closed = [c for c in res if c["closed"] is not None and (c["status"] == 408 or c["bytes"] == 0)]
    bad_prompt = [c for c in prompt if not (c["status"] == 408 and c["whole"])]
    bad_late = [c for c in late if not ((c["status"] == 408 and c["whole"]) or c["bytes"] == 0)]
    # Times count from the connect() call: the server's clock starts at its
    # accept, which cannot come earlier (the trickler may notice the
    # completed connect later than it happened).
    too_early = [c for c in res if c["answered"] is not None and c["answered"] - c["t_call"] < TIMEOUT_S - 0.05]
    ans = sorted(c["answered"] - c["t_call"] for c in res if c["answered"])
    cls = sorted(c["closed"] - c["t_call"] for c in res if c["closed"])
    print(f"[{label}] {len(prompt)} connections sent their first bytes within {TIMEOUT_S / 2:g} s of connect(), "
          f"{len(late)} later; {len(got408)} whole 408s, {len(closed)} closed after one or with no answer; answer at "
          f"{ans[0] if ans else 0:.2f}..{ans[-1] if ans else 0:.2f}s, close at {cls[0] if cls else 0:.2f}..{cls[-1] if cls else 0:.2f}s after connect()")
    F.check(prompt, f"[{label}] the trickler sent some connection's first bytes within {TIMEOUT_S / 2:g} s of its "
                    f"connect() (none did: nothing below is proved)")
    F.check(not bad_prompt, f"[{label}] each of the {len(prompt)} connections that trickled in time got one whole 408 "
                            f"({len(bad_prompt)} did not); e.g. {bad_prompt[:2]}")
    F.check(not bad_late, f"[{label}] each of the {len(late)} that sent their first bytes later got one whole 408 or "
                          f"was closed with no answer ({len(bad_late)} neither); e.g. {bad_late[:2]}")
    F.check(len(closed) == CONNS, f"[{label}] ... and all were closed by the server before the trickler gave up "
                                  f"({TIMEOUT_S:g} + 6 s) ({len(closed)}; not: {[c for c in res if c not in closed][:2]})")
    F.check(not too_early, f"[{label}] none answered before the {TIMEOUT_S} s timeout ({len(too_early)}): {too_early[:2]}")
    with Conn(s.port) as k:
        k.send(request("GET", "/health"))
        st = k.try_response()[0]
    F.check(st == 200, f"[{label}] /health still answered after the trickle")
    return why is None and st == 200, len(got408)


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
        answering, n408 = phase(s, f"{mode} head", "head")
        if answering:
            n408 += phase(s, f"{mode} body", "body")[1]
        else:
            print(f"[{mode}] the server stopped answering during the header trickle: body phase skipped")
        rc = s.stop(timeout=12)
        F.check(rc == 0, f"[{mode}] exit 0 on SIGTERM after the trickles (got {rc})\n{s.stderr()[-800:]}")
        m = [int(x) for x in re.findall(r"(\d+) timed out", s.stderr())]
        F.check(sum(m) >= n408, f"[{mode}] the drain log counts a timeout for each of the {n408} 408s ({m})")
    print(f"[{mode}] done in {time.monotonic() - t0:.1f}s", flush=True)
print(f"took {time.monotonic() - t_all:.1f}s")
F.done()
