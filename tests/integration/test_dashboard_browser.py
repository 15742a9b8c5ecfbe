"""The dashboard in a real browser (docs/apps.md, dashboard; docs/behaviour.md,
Streams and the bus, Drain).

Proves, with `dashboard --threads 2 --blocking-threads 1` and Debian's headless `chromium` driven
through `chromedriver` (W3C WebDriver over HTTP, standard library only; both
are apt-get installed when missing, and a failed install fails the test):
- the page at GET / loads and opens an EventSource on /events that is OPEN
  (readyState 1) and receives `stats` frames with numeric ids (seen through a
  hook chromedriver adds before the page's own script: it wraps `EventSource`
  to count what each instance receives and changes nothing the page does); no
  script error on the page;
- the page draws them: its badge says "live", its header names mode threads,
  2 loops and the server's pid, its per-loop table has two rows, and its
  streams card counts the browser's own stream (>= 1);
- the observer: the page's second EventSource, on /graph (the host's own
  stream of its graph), is OPEN and receives `graph` events; the page draws
  a box per node of GET /graph and a line per edge; a click on loop.1
  selects it, and its detail is a table for people, not JSON (role, process,
  pid, thread, its figures) and its edges with their rates (loop.1 →
  pool.1.0: job, stop — N msg/s); a click on echo shows it placed thread,
  its instances live and requests, and a row for echo.0 (placement, pid,
  machine, in flight); with tracing switched on
  by a real m0trace, loop.1's recent trace records show below the graph,
  each from or to loop.1, the producer's frames among them;
- 200 GET /hello from the test: within 5 s the requests the page shows
  (summed over its per-loop rows) are at least 200 above what it showed
  before, and its requests / s card rises to 50 or more;
- a screenshot of the page, a PNG of the window's width, lands in the test's
  output directory as dashboard.png (chromedriver's log beside it);
- SIGTERM: the page's EventSource receives `m0.closing`; exit 0 within 5 s.
Chromedriver and chromium are stopped by process group, then by pid.
"""
import base64
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from harness import BIN, Failures, Server, output_dir
from webdriver import CHROMEDRIVER, CHROMIUM, PACKAGES, Driver, available, install, png_size, poll

F = Failures()
WIDTH, HEIGHT = 1280, 900
RPS = 50  # the least the requests / s card may show for a burst of 200 (it shows ~400)

# Runs in every document before its own scripts: records each EventSource the
# page makes and counts what it receives, and records script errors.
HOOK = r"""
(() => {
  const Native = window.EventSource;
  const seen = window.__m0_es = [];
  const errors = window.__m0_errors = [];
  window.addEventListener("error", (e) => errors.push(String(e.message)));
  window.addEventListener("unhandledrejection", (e) => errors.push("unhandled rejection: " + String(e.reason)));
  window.EventSource = class extends Native {
    constructor(url, init) {
      super(url, init);
      const rec = { es: this, url: this.url, events: {}, lastEventId: "" };
      seen.push(rec);
      const count = (e) => { rec.events[e.type] = (rec.events[e.type] || 0) + 1; rec.lastEventId = e.lastEventId; };
      for (const t of ["message", "stats", "graph", "m0.closing"]) this.addEventListener(t, count);
    }
  };
})();
"""

STREAMS_JS = """return (window.__m0_es || []).map((r) => ({url: r.url, readyState: r.es.readyState,
  events: r.events, lastEventId: r.lastEventId, errors: window.__m0_errors}));"""

VIEW_JS = """const $ = (id) => document.getElementById(id);
return {state: $("state").textContent, live: $("state").className, mode: $("mode").textContent,
  rps: $("rps").textContent, open: $("open").textContent, streams: $("streams").textContent,
  rows: [...document.querySelectorAll("#rows tr")].map((tr) => [...tr.cells].map((td) => td.textContent.trim())),
  errors: window.__m0_errors || []};"""

# The observer's graph as the page drew it: its boxes' names and its edges.
GRAPH_JS = """const svg = document.getElementById("graph");
return {nodes: [...svg.querySelectorAll(".node")].map((g) => g.dataset.name),
  edges: [...svg.querySelectorAll(".edge")].map((p) => [p.dataset.from, p.dataset.to]),
  selected: [...svg.querySelectorAll(".node.sel")].map((g) => g.dataset.name),
  detail: document.getElementById("detail").textContent,
  facts: Object.fromEntries([...document.querySelectorAll("#detail tr[data-fact]")].map((tr) =>
    [tr.dataset.fact, tr.cells[1].textContent]))};"""
APP_JS = """return {facts: Object.fromEntries([...document.querySelectorAll("#detail tr[data-fact]")].map((tr) =>
    [tr.dataset.fact, tr.cells[1].textContent])),
  insts: [...document.querySelectorAll("#detail table.insts tbody tr")].map((tr) => [...tr.cells].map((c) => c.textContent))};"""
RECORDS_JS = """return document.getElementById("records").textContent;"""
# Each edge's rate as drawn (a label on the line when above 0) and the
# supervision tree's boxes.
RATES_JS = """return {labels: [...document.querySelectorAll("#graph text.rate")].map((t) =>
    [t.dataset.from, t.dataset.to, t.textContent]),
  tree: [...document.querySelectorAll("#tree li[data-tree]")].map((li) => li.dataset.tree),
  root: (document.querySelector("#tree li[data-tree] .box") || {}).textContent || ""};"""
CLICK_JS = """const g = [...document.querySelectorAll("#graph .node")].find((x) => x.dataset.name === arguments[0]);
if (g) g.dispatchEvent(new MouseEvent("click", {bubbles: true})); return !!g;"""


def num(text):
    """The page's fmt() undone: "12", "3.4k", "1.2M" -> a number (None if not one)."""
    t = (text or "").strip()
    scale = {"k": 1e3, "M": 1e6}.get(t[-1:], 1)
    try:
        return float(t[:-1] if scale != 1 else t) * scale
    except ValueError:
        return None


def shown_requests(view):
    vals = [num(r[2]) if len(r) > 2 else None for r in view.get("rows", [])]
    return None if not vals or None in vals else sum(vals)


def browser():
    label = "chromium: dashboard --threads 2"
    out = output_dir("test_dashboard_browser")
    if not available():
        why = install()
        F.check(available(), f"chromium and chromedriver installed ({CHROMIUM}, {CHROMEDRIVER}): `apt-get install "
                                f"{' '.join(PACKAGES)}` failed; install them by hand (as root: apt-get install "
                                f"--no-install-recommends {' '.join(PACKAGES)}):\n{why}")
        if not available():
            return
    t0 = time.monotonic()
    run = tempfile.mkdtemp(prefix="m0-dash-run-")  # m0trace finds the host here
    with Server("dashboard", "--threads", "2", "--blocking-threads", "1", "--port", "0", "--run-dir", run) as s, \
            Driver(out) as d:
        caps = d.start(WIDTH, HEIGHT)
        print(f"test: {caps.get('browserName')} {caps.get('browserVersion')} session in "
              f"{time.monotonic() - t0:.1f}s", flush=True)
        d.session("POST", "/goog/cdp/execute", {"cmd": "Page.addScriptToEvaluateOnNewDocument",
                                                "params": {"source": HOOK}})
        d.session("POST", "/url", {"url": s.url("/")}, timeout=20)
        title = d.session("GET", "/title")
        F.check(title.startswith("m0"), f"{label}: the page loaded (title {title!r})")

        # The page's EventSource: one, on /events, OPEN, receiving stats frames.
        es = poll(lambda: [e for e in d.js(STREAMS_JS) if e["readyState"] == 1
                           and e["events"].get("stats", 0) >= 2], 5) or d.js(STREAMS_JS)
        F.check(len(es) == 1 and es[0]["url"] == s.url("/events"),
                f"{label}: the page opened one EventSource on {s.url('/events')} receiving stats ({es})")
        # The observer's: the host's own stream of its graph, once a second.
        gs = poll(lambda: [e for e in d.js(STREAMS_JS) if e["url"] == s.url("/graph") and e["readyState"] == 1
                           and e["events"].get("graph", 0) >= 2], 5) or d.js(STREAMS_JS)
        F.check(len(gs) == 1 and len(d.js(STREAMS_JS)) == 2,
                f"{label}: and one on {s.url('/graph')}, OPEN, receiving `graph` events within 5 s ({gs})")
        e = es[0] if es else {"events": {}}
        F.check(e.get("readyState") == 1, f"{label}: its readyState is 1, OPEN ({e})")
        F.check(e["events"].get("stats", 0) >= 2, f"{label}: it received `stats` frames within 5 s ({e})")
        F.check(str(e.get("lastEventId", "")).isdigit(), f"{label}: the frames carry numeric ids ({e})")

        # What the page draws from them.
        view = poll(lambda: (lambda v: v if v["state"] == "live" and len(v["rows"]) == 2 else None)(d.js(VIEW_JS)),
                    3) or d.js(VIEW_JS)
        F.check(view["state"] == "live" and view["live"] == "live", f"{label}: the badge says live ({view['state']!r})")
        F.check("threads" in view["mode"] and "2 loops" in view["mode"] and f"pid {s.proc.pid}" in view["mode"],
                f"{label}: the header names mode threads, 2 loops, pid {s.proc.pid} ({view['mode']!r})")
        F.check(len(view["rows"]) == 2, f"{label}: the per-loop table has two rows ({view['rows']})")
        F.check((num(view["streams"]) or 0) >= 1,
                f"{label}: the streams card counts the browser's own stream ({view['streams']!r})")
        before = shown_requests(view)
        F.check(before is not None, f"{label}: the rows show numeric request counts ({view['rows']})")

        # The observer: the page draws GET /graph's nodes and edges; a click
        # on an actor selects it and shows where it lives and its edges.
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=5)
        c.request("GET", "/graph")
        want = json.loads(c.getresponse().read())
        c.close()
        drawn = poll(lambda: (lambda v: v if len(v["nodes"]) == len(want["nodes"]) else None)(d.js(GRAPH_JS)), 5) \
            or d.js(GRAPH_JS)
        F.check(sorted(drawn["nodes"]) == sorted(n["name"] for n in want["nodes"]),
                f"{label}: the observer draws a box per actor of GET /graph ({sorted(drawn['nodes'])})")
        F.check(sorted(map(tuple, drawn["edges"])) == sorted((e["from"], e["to"]) for e in want["edges"]),
                f"{label}: and a line per edge ({len(drawn['edges'])} drawn, {len(want['edges'])} in the graph)")
        # Rates: the producer's frames to each loop (twice a second) carry a
        # rate, written on their line as GET /graph says it; the tree's root
        # is the host, with its pid, over echo and its instance.
        rated = poll(lambda: (lambda v: v if any(f == "producer" for f, _, _ in v["labels"]) else None)(
            d.js(RATES_JS)), 8) or d.js(RATES_JS)
        F.check(rated["labels"] and all(t.endswith("/s") and float(t[:-2]) > 0 for _, _, t in rated["labels"]) and
                any(f == "producer" and to.startswith("loop.") for f, to, _ in rated["labels"]),
                f"{label}: an edge with a rate above 0 has it written on its line (producer -> loop.i: N/s) "
                f"({rated['labels'][:6]})")
        F.check(rated["tree"] == ["host", "echo", "echo.0"] and f"pid {s.proc.pid}" in rated["root"],
                f"{label}: the supervision tree is drawn: the host, pid {s.proc.pid}, and under it echo (a thread "
                f"actor in no supervisor, its own budget) with its instance echo.0 ({rated})")
        F.check(d.js(CLICK_JS, "loop.1"), f"{label}: loop.1 has a box to click")
        sel = poll(lambda: (lambda v: v if v["selected"] == ["loop.1"] and "msg/s" in v["detail"] else None)(
            d.js(GRAPH_JS)), 5) or d.js(GRAPH_JS)
        facts = sel.get("facts", {})
        F.check(sel["selected"] == ["loop.1"] and sel["detail"].startswith("loop.1")
                and "loop.1 → pool.1.0: job, stop — " in sel["detail"] and "msg/s" in sel["detail"]
                and "{" not in sel["detail"],
                f"{label}: clicked, loop.1 is selected and its detail shows its edges with their messages per "
                f"second, no raw JSON ({sel['selected']}, {sel['detail'][:300]!r})")
        F.check(facts.get("role") == "loop" and facts.get("process") == "host" and facts.get("pid") == str(s.proc.pid)
                and facts.get("thread") == "loop.1" and num(facts.get("requests")) is not None,
                f"{label}: its detail is a table for people: role loop, process host, pid {s.proc.pid}, thread "
                f"loop.1, its requests ({facts})")
        # An application actor: its facts and a row per instance.
        F.check(d.js(CLICK_JS, "echo"), f"{label}: echo has a box to click")
        app = poll(lambda: (lambda v: v if v["facts"].get("placement") and v["insts"] else None)(
            d.js(APP_JS)), 5) or d.js(APP_JS)
        F.check(app["facts"].get("role") == "app" and app["facts"].get("placement") == "thread"
                and app["facts"].get("instances") == "1" and num(app["facts"].get("requests")) is not None
                and app["insts"] == [["echo.0", "host", "thread", str(s.proc.pid), socket.gethostname(), "0"]],
                f"{label}: echo's detail: placed thread, 1 instance live, its requests, and a row for echo.0 with "
                f"its process, placement, pid, machine and in flight ({app})")
        d.js(CLICK_JS, "loop.1")
        # Tracing switched on (m0trace): the selected actor's recent records
        # show (the producer's frames to loop.1 at least, twice a second).
        tr = subprocess.Popen([os.path.join(BIN, "m0trace"), "--run-dir", run, f"ipc://{run}/trace.sock"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            # Until a frame is among them: the first record can be the
            # tracing switch itself, before the producer's next frame.
            recs = poll(lambda: (lambda t: t if t.startswith("recent trace records of loop.1") and " frame " in t
                                 else None)(d.js(RECORDS_JS)), 8) or d.js(RECORDS_JS)
        finally:
            tr.send_signal(signal.SIGINT)
            tr.wait(timeout=10)
        lines = recs.splitlines()[1:]
        F.check(lines and all("loop.1" in x for x in lines) and any(" frame " in x for x in lines),
                f"{label}: tracing on, loop.1's recent trace records show under the graph, each from or to it, "
                f"the producer's frames among them ({recs[:400]!r})")

        # Traffic from here; the page's numbers follow.
        conns = [http.client.HTTPConnection("127.0.0.1", s.port, timeout=5) for _ in range(4)]
        ok = 0
        for i in range(200):
            c = conns[i % 4]
            c.request("GET", "/hello")
            r = c.getresponse()
            ok += r.status == 200 and r.read() == b"hello from m0\n"
        for c in conns:
            c.close()
        F.check(ok == 200, f"{label}: 200 GET /hello answered 200 ({ok})")
        want = (before or 0) + 200
        seen = {"rps": 0.0, "view": view}

        def risen():
            v = seen["view"] = d.js(VIEW_JS)
            seen["rps"] = max(seen["rps"], num(v["rps"]) or 0)
            return (shown_requests(v) or 0) >= want and seen["rps"] >= RPS

        t1 = time.monotonic()
        poll(risen, 5)
        after = seen["view"]
        F.check((shown_requests(after) or 0) >= want,
                f"{label}: within 5 s the page shows requests >= {want:.0f}, 200 above the {before} it showed "
                f"({shown_requests(after)}; rows {after['rows']})")
        F.check(seen["rps"] >= RPS and seen["rps"] > (num(view["rps"]) or 0),
                f"{label}: the requests / s card rose to {RPS} or more (from {view['rps']!r}; max {seen['rps']})")
        print(f"test: the page's numbers followed in {time.monotonic() - t1:.1f}s "
              f"(requests {before} -> {shown_requests(after)}, rps {seen['rps']})", flush=True)
        F.check(not after["errors"], f"{label}: no script error on the page ({after['errors']})")

        # The screenshot.
        png = base64.b64decode(d.session("GET", "/screenshot", timeout=15) or "")
        size = png_size(png)
        path = os.path.join(out, "dashboard.png")  # the observer's graph is on it, loop.1 selected
        with open(path, "wb") as f:
            f.write(png)
        F.check(size is not None and len(png) > 10000,
                f"{label}: the screenshot is a PNG of some size ({len(png)} bytes, {png[:8]!r})")
        F.check(size is not None and size[0] == WIDTH and size[1] >= HEIGHT // 2,
                f"{label}: the screenshot is {WIDTH} wide, the window's width ({size})")
        print(f"test: screenshot {path} ({len(png)} bytes, {size})", flush=True)

        # SIGTERM: the page's EventSource hears m0.closing; the host exits 0.
        t2 = time.monotonic()
        s.signal(signal.SIGTERM)
        closing = poll(lambda: [e for e in d.js(STREAMS_JS) if e["events"].get("m0.closing")], 5)
        F.check(closing, f"{label}: SIGTERM: the page's EventSource received m0.closing within 5 s "
                         f"({d.js(STREAMS_JS)})")
        try:
            rc = s.wait(timeout=max(0.1, 5.0 - (time.monotonic() - t2)))
        except AssertionError as err:
            rc = None
            print(err)
        F.check(rc == 0, f"{label}: SIGTERM -> exit 0 within 5 s (rc {rc}):\n{s.stderr()}")
    shutil.rmtree(run, ignore_errors=True)
    F.check(not d.left, f"{label}: no chromium process left after stopping chromedriver ({d.left})")
    print(f"test: browser part took {time.monotonic() - t0:.1f}s", flush=True)


browser()
F.done()
