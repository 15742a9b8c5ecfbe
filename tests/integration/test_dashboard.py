"""The dashboard, the README's demo (docs/apps.md, dashboard;
docs/behaviour.md, The producer, Streams and the bus, Drain).

Proves, with `dashboard --threads 2`:
- GET / is 200 `text/html` and the page opens an `EventSource`.
- GET /events is a stream of `event: stats` frames, `id:` first, about two a
  second (median gap 0.3..0.8 s); each frame's JSON has "t", "mode"
  ("threads"), "pid" (the server's) and "loops": 2 entries, each with rps,
  requests, open, streams, handoffs, queued, dropped as numbers; the open
  stream itself shows (summed streams >= 1).
- 200 GET /hello (four keep-alive connections held at once) all answer 200;
  a later frame's summed `requests` is at least 200 above the frame before
  them, both loops' counters rose, and some frame shows rps > 0.
- GET /health is 200 {"status":"ok"}.
- SIGTERM: the stream ends with `event: m0.closing` + `retry:`, EOF, exit 0
  within 5 s.
"""
import http.client
import json
import statistics
import time

from harness import Failures, Server, wait_for
from test_streams import Stream, drain_check, is_stream_head

F = Failures()
KEYS = ("rps", "requests", "open", "streams", "handoffs", "queued", "dropped")


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.getheader("content-type", ""), r.read()
    finally:
        c.close()


def stats(st):
    out = []
    for f in list(st.frames):
        if f.event == "stats":
            j = f.json()
            out.append((f, j if isinstance(j, dict) else None))
    return out


def total(j, key):
    return sum(l.get(key, 0) for l in j.get("loops", []))


def dashboard():
    label = "dashboard --threads 2"
    with Server("dashboard", "--threads", "2", "--port", "0") as s:
        st_, ct, body = get(s.port, "/")
        F.check(st_ == 200 and ct.startswith("text/html"), f"{label}: GET / -> 200 text/html ({st_}, {ct!r})")
        F.check(b"EventSource" in body, f"{label}: the page opens an EventSource ({len(body)} bytes)")
        st_, ct, body = get(s.port, "/health")
        F.check(st_ == 200 and json.loads(body or b"null") == {"status": "ok"},
                f"{label}: GET /health -> 200 {{\"status\":\"ok\"}} ({st_}, {body!r})")

        ev = Stream(s.port, "/events")
        F.check(is_stream_head(ev), f"{label}: GET /events -> 200 text/event-stream ({ev.status_line}, {ev.headers})")
        first = wait_for(lambda: stats(ev), 3)
        F.check(first, f"{label}: a `stats` frame within 3 s ({ev.frames[:2]})")
        if not first:
            return
        f, j = first[0]
        F.check(f.id_first, f"{label}: `id:` first in the frame ({f!r})")
        F.check(j is not None and {"t", "mode", "pid", "loops"} <= set(j),
                f"{label}: the data is JSON with t, mode, pid, loops ({f.data!r})")
        j = j or {}
        loops = j.get("loops") or []
        F.check(len(loops) == 2, f"{label}: two loops in the stats ({loops})")
        F.check(all(isinstance(l, dict) and all(isinstance(l.get(k), (int, float)) for k in KEYS) for l in loops),
                f"{label}: each loop has {', '.join(KEYS)} as numbers ({loops})")
        F.check(j.get("mode") == "threads" and j.get("pid") == s.proc.pid,
                f"{label}: mode threads, the server's pid ({j.get('mode')}, {j.get('pid')} vs {s.proc.pid})")
        # Cadence: about two frames a second.
        wait_for(lambda: len(stats(ev)) >= 5, 4)
        ts = [f.t for f, _ in stats(ev)]
        gaps = [b - a for a, b in zip(ts, ts[1:])]
        F.check(len(gaps) >= 3 and 0.3 <= statistics.median(gaps) <= 0.8,
                f"{label}: frames about twice a second (gaps {[round(g, 2) for g in gaps]})")
        last = stats(ev)[-1][1] or {}
        F.check(total(last, "streams") >= 1 and total(last, "open") >= 1,
                f"{label}: the open stream is counted (streams {total(last, 'streams')}, open {total(last, 'open')})")

        # 200 requests on four keep-alive connections held at once.
        before = stats(ev)[-1][1] or {}
        conns = [http.client.HTTPConnection("127.0.0.1", s.port, timeout=5) for _ in range(4)]
        for c in conns:
            c.connect()
        ok = 0
        for i in range(200):
            c = conns[i % 4]
            c.request("GET", "/hello")
            r = c.getresponse()
            b = r.read()
            ok += r.status == 200 and b == b"hello from m0\n"
        for c in conns:
            c.close()
        F.check(ok == 200, f"{label}: 200 GET /hello answered 200 `hello from m0` ({ok})")
        t_done = time.monotonic()
        want = total(before, "requests") + 200
        later = wait_for(lambda: [j for f, j in stats(ev) if f.t > t_done and j and total(j, "requests") >= want], 3)
        F.check(later, f"{label}: a later frame's summed requests >= {want} (200 above the frame before; last "
                       f"{[total(j or {}, 'requests') for _, j in stats(ev)[-3:]]})")
        F.check(total(later[0] if later else {}, "requests") >= 200, f"{label}: summed requests >= 200")
        if later:
            rose = [a.get("requests", 0) > b.get("requests", 0) for a, b in zip(later[0]["loops"], before["loops"])]
            F.check(len(rose) == 2 and all(rose), f"{label}: both loops' requests rose ({before['loops']} -> "
                                                  f"{later[0]['loops']})")
        F.check(any(total(j or {}, "rps") > 0 for f, j in stats(ev) if f.t > t_done - 1),
                f"{label}: some frame shows rps > 0 after the burst")
        drain_check(F, s, [ev], f"{label} drain")


dashboard()
F.done()
