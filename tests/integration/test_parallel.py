"""OpenMP inside a view, in every execution mode (docs/behaviour.md, Modes;
docs/apps.md, parallel).

Workers are spawned (fork then exec), so an OpenMP runtime works in them; and
under --threads each loop's request gets its own OpenMP team.

Proves, for `parallel` single, under `--threads 2` and under `--workers 2`:
- /par answers 200 within 10 s with the same `sum` as /ser (and items 64,
  mode "par", threads >= 1);
- four /par at once on four connections (landing on both loops / workers)
  all answer 200 within 10 s with that same sum: concurrent OpenMP teams do
  not hang or corrupt each other;
- /health still answers, then SIGTERM exits 0.
"""
import http.client
import json
import threading
import time

from harness import Failures, Server

F = Failures()


def get(port, path, timeout=10.0, conn=None):
    c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t0 = time.monotonic()
    try:
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        return r.status, body, time.monotonic() - t0
    finally:
        if conn is None:
            c.close()


def mode(label, *args):
    with Server("parallel", *args, "--port", "0") as s:
        try:
            st, body, took = get(s.port, "/ser")
            ser = json.loads(body)
            F.check(st == 200 and ser.get("mode") == "ser" and ser.get("items") == 64, f"{label}: /ser answers ({st} {body!r})")
            st, body, took = get(s.port, "/par")
            par = json.loads(body)
            print(f"{label}: /par {body.decode()} in {took:.2f}s", flush=True)
            F.check(st == 200 and took < 10, f"{label}: /par 200 within 10 s ({st}, {took:.2f}s)")
            F.check(par.get("mode") == "par" and par.get("items") == 64 and par.get("threads", 0) >= 1,
                    f"{label}: /par body ({body!r})")
            F.check(par.get("sum") == ser.get("sum"), f"{label}: /par sum {par.get('sum')} == /ser sum {ser.get('sum')}")
        except (OSError, ValueError, http.client.HTTPException) as e:
            F.check(False, f"{label}: /ser and /par answered ({e!r}):\n{s.stderr()}")
            ser = {}

        # Four at once, connections opened first so they spread over the loops/workers.
        conns = [http.client.HTTPConnection("127.0.0.1", s.port, timeout=10) for _ in range(4)]
        for c in conns:
            c.connect()
        out, errors = [None] * 4, []

        def one(i):
            try:
                out[i] = get(s.port, "/par", conn=conns[i])
            except Exception as e:
                errors.append(f"{i}: {e!r}")

        ts = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(4)]
        t0 = time.monotonic()
        for t in ts:
            t.start()
        for t in ts:
            t.join(timeout=15)
        took = time.monotonic() - t0
        F.check(not errors and all(o is not None for o in out) and took < 10,
                f"{label}: four concurrent /par answered within 10 s ({took:.2f}s, {errors})")
        sums = [json.loads(o[1]).get("sum") if o and o[0] == 200 else None for o in out]
        F.check(all(x == ser.get("sum") and x is not None for x in sums),
                f"{label}: every concurrent /par has the serial sum ({sums} vs {ser.get('sum')})")
        for c in conns:
            c.close()
        st, body, _ = get(s.port, "/health")
        F.check(st == 200 and body == b'{"status":"ok"}', f"{label}: /health ({st} {body!r})")
        rc = s.stop()
        F.check(rc == 0, f"{label}: SIGTERM -> exit 0 (rc {rc}):\n{s.stderr()}")


mode("single")
mode("--threads 2", "--threads", "2")
mode("--workers 2", "--workers", "2")
F.done()
