"""Metrics (`--metrics-path`: Prometheus text answered on the loop;
docs/reference.md, Metrics: hand-offs, the bus's refusals and the respawns are counted there;
docs/behaviour.md, Accept sharing: hand-offs are in the log too).

Proves:
- `--metrics-path /metrics` answers 200 `text/plain; version=0.0.4`; the text
  parses: every non-comment line is `name{labels} value` (labels `k="v"`,
  value a float), every family has exactly one `# HELP` and one `# TYPE`
  (counter, gauge or untyped) before its samples, a family's samples are
  together, no series appears twice. The families are there: m0_requests_total,
  m0_open_connections, m0_streams, m0_handoffs_total, m0_pool_queue,
  m0_stream_frames_dropped_total (each with a line per loop: loop="0" and
  loop="1" under --threads 2), m0_bus_refusals_total, m0_respawns_total,
  m0_events_published_total, and m0_nng_stat lines labelled exactly process,
  side, actor, scope, url, socket, stat: every socket named by its actor
  (mailbox or peer), the coordinator's, each loop's and the producer's
  mailbox listener by name and URL; under --workers the worker that answered
  is the process label (nng's are the one per-process family).
- Counting: 50 GET /health raise the sum of m0_requests_total by 50 + the
  earlier scrape (+ at most the current one); m0_events_published_total rises while the producer beats;
  a held keep-alive connection raises m0_open_connections by one and its close
  lowers it again (bounded wait); an open /events stream shows in m0_streams.
- `--workers 2`: m0_respawns_total is 0, a worker (a child of the supervisor)
  is SIGKILLed, it is respawned (bounded wait for a new child), and
  m0_respawns_total rises to >= 1 (bounded wait); no counter is lower after
  the respawn than before it (the killed worker's loop had answered
  requests: m0_requests_total{loop} counts on).
- Every counter rises, in every mode (`--workers 2`, `--threads 2`, single):
  while threads load the host (/health on the loop, /instance in the pool,
  /actor/echo to an actor, /nope's 404s over keep-alive connections, and
  WebSockets that echo then close 1000 or drop the socket: 1006), 20 scrapes
  over fresh connections (under --workers, more until both workers have
  answered one: bounded): every counter and every histogram's buckets, sum
  and count never decreases from one scrape to the next, every series once
  seen is in every later scrape, the families are there
  (m0_responses_total, the WebSocket counts, the actors'...), the load raised
  each of a list of series (404s as route (none) 4xx, the pool's 2xx, the
  WebSocket's 101 as 1xx, messages in and out, closes 1000 and 1006, the
  actor's ok and histogram), and promtool passes the last scrape.
- m0_responses_total by route and class, exactly: the latency run's 20
  /instance, 10 /health, 5 /actor/echo, 3 /slow are 2xx of their routes,
  the 4 404s are route (none) 4xx, nothing else.
- `promtool check metrics` (Prometheus's own linter: ./dev fetches it into
  .tools/ from Debian's promtool or, on Debian 12, prometheus package) passes on the scrape of a
  --threads 2 host and of a --workers 2 host, with nothing to say; a test
  run without promtool fails and says how to get it.
- Latency histograms (m0_request_duration_seconds{method,route},
  m0_actor_request_duration_seconds{actor}: the host's, no process label): after 20 GET
  /instance (pool), 10 /health (loop), 5 /actor/echo (an actor), 3
  /slow?ms=60 and 4 404s, each route's count and +Inf bucket are exactly its
  requests, 16 cumulative buckets from 100 us to 10 s; /slow's three are
  above 50 ms and sum to 0.15 s or more; the 404s (and the scrapes) count in
  route "(none)"; the echo actor's histogram counts its 5.
- Series keyed by what they count, not by position, across reloads
  (`--topology FILE`, SIGHUP: docs/reference.md, Metrics), under --threads 2
  and --workers 2: a file whose routes GET /a and GET /b are served by the
  echo actor and GET /x by an external actor alpha (no instance: 503s);
  12 /a, 5 /b, 4 /x; then the file rewritten with /b first and /c in /a's
  place, beta in alpha's, and SIGHUP (the old generation gone): 3 /b, 7 /c,
  2 /x; then the first file again and SIGHUP: 1 /a. Each route's
  m0_responses_total 2xx and its histogram's count are exactly its own
  requests (/b 8, not /a's 12 + 3; /c 7, not /b's 5 + 7; /a 13: its old
  row found again), alpha's and beta's no_instance outcomes likewise (4, 2,
  then alpha's 4 again), and no series seen in two scrapes is lower in the
  later one.
- Without --metrics-path, GET /metrics is 404.
- Found on the way (docs/behaviour.md, Drain): a SIGTERM to the supervisor ~1 ms after it
  respawned a SIGKILLed worker (the new worker still starting) must still be
  a drain that exits 0.
"""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

from harness import Failures, sanitizer_report, Prefork, Server, wait_for
from test_streams import Stream, children, reap_seen

F = Failures()
NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
SAMPLE_RE = re.compile(rf"^({NAME})(?:\{{(.*)\}})? (\S+)(?: -?\d+)?$")
LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(?:,|$)')
PER_LOOP = ["m0_requests_total", "m0_open_connections", "m0_streams", "m0_handoffs_total", "m0_pool_queue",
            "m0_stream_frames_dropped_total"]
GLOBAL = ["m0_bus_refusals_total", "m0_respawns_total", "m0_events_published_total"]


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read().decode(errors="replace")
    finally:
        c.close()


def parse_labels(s):
    out, pos = {}, 0
    while pos < len(s):
        m = LABEL_RE.match(s, pos)
        if not m or m.end() == pos:
            return None
        out[m.group(1)] = m.group(2)
        pos = m.end()
    return out


def family(name, types):
    """A sample's family: a histogram's _bucket, _sum and _count are its own."""
    for suffix in ("_bucket", "_sum", "_count"):
        base = name[:-len(suffix)]
        if name.endswith(suffix) and types.get(base) == "histogram":
            return base
    return name


def parse(text, label, strict=True):
    """[(name, labels dict, value)]; with strict, checks the format."""
    samples, errors = [], []
    helps, types, order = {}, {}, []
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("#"):
            p = line.split(None, 3)
            if len(p) >= 3 and p[1] in ("HELP", "TYPE"):
                d = helps if p[1] == "HELP" else types
                if p[2] in d:
                    errors.append(f"second # {p[1]} for {p[2]}")
                d[p[2]] = p[3] if len(p) > 3 else ""
                if p[2] not in order:
                    order.append(p[2])
            continue
        m = SAMPLE_RE.match(line)
        labels = parse_labels(m.group(2)) if m and m.group(2) is not None else {}
        try:
            value = float(m.group(3)) if m else None
        except ValueError:
            value = None
        if not m or labels is None or value is None:
            errors.append(f"not `name{{labels}} value`: {line!r}")
            continue
        name = m.group(1)
        if family(name, types) not in helps or family(name, types) not in types:
            errors.append(f"{name}: a sample before its # HELP and # TYPE")
        samples.append((name, labels, value))
    if strict:
        F.check(not errors, f"{label}: the text is Prometheus exposition format ({errors[:5]})")
        fams = [family(n, types) for n, _, _ in samples]
        F.check(all(n in helps and n in types for n in set(fams)), f"{label}: every family has HELP and TYPE")
        bad_types = {n: t for n, t in types.items() if t not in ("counter", "gauge", "untyped", "summary", "histogram")}
        F.check(not bad_types, f"{label}: TYPEs are known ({bad_types})")
        F.check(not [n for n in helps if not helps[n].strip()], f"{label}: every HELP has text")
        runs = [n for i, n in enumerate(fams) if i == 0 or fams[i - 1] != n]
        F.check(len(runs) == len(set(runs)), f"{label}: each family's samples are together")
        keys = [(n, tuple(sorted(l.items()))) for n, l, _ in samples]
        dup = {k for k in keys if keys.count(k) > 1}
        F.check(not dup, f"{label}: no series appears twice ({list(dup)[:3]})")
    return samples


def value(samples, name, **labels):
    v = [x for n, l, x in samples if n == name and all(l.get(k) == w for k, w in labels.items())]
    return sum(v) if v else None


def promtool_check(text, label):
    """Prometheus's own linter on one scrape: exit 0 and nothing said."""
    here = os.path.dirname(os.path.abspath(__file__))
    tool = os.environ.get("M0_PROMTOOL") or shutil.which("promtool") or os.path.join(here, "../../.tools/promtool")
    if not os.access(tool, os.X_OK):
        F.check(False, f"{label}: promtool is here (./dev setup fetches it into .tools/, or set M0_PROMTOOL)")
        return
    r = subprocess.run([tool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    F.check(r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(),
            f"{label}: promtool check metrics passes (rc {r.returncode}): {(r.stdout + r.stderr)[-800:]}")


def scrape(port):
    st, h, body = get(port, "/metrics")
    return parse(body, "scrape", strict=False) if st == 200 else []


def format_and_counts():
    label = "threads 2"
    with Server("host_check", "--port", "0", "--threads", "2", "--metrics-path", "/metrics",
                env={"M0_HOSTCHECK_PERIOD_MS": "50"}) as s:
        st, h, body = get(s.port, "/metrics")
        F.check(st == 200, f"{label}: GET /metrics -> 200 ({st})")
        F.check(h.get("content-type", "").startswith("text/plain") and "version=0.0.4" in h.get("content-type", ""),
                f"{label}: Content-Type text/plain; version=0.0.4 ({h.get('content-type')})")
        smp = parse(body, label)
        promtool_check(body, label)
        names = {n for n, _, _ in smp}
        for n in PER_LOOP:
            loops = sorted(l.get("loop") for nn, l, _ in smp if nn == n)
            F.check(loops == ["0", "1"], f"{label}: {n} has a line per loop ({loops})")
        for n in GLOBAL:
            F.check(n in names, f"{label}: {n} is there")
        nng = [l for n, l, _ in smp if n == "m0_nng_stat"]
        keys = {"process", "side", "actor", "scope", "url", "socket", "stat"}
        F.check(nng and all(set(l) == keys for l in nng),
                f"{label}: m0_nng_stat lines labelled {sorted(keys)} ({len(nng)} lines, {nng[:2]})")
        F.check(all(l.get("process") == "host" and l.get("side") in ("mailbox", "peer") and l.get("actor") for l in nng),
                f"{label}: every nng socket is named by its actor, mailbox or peer, in process host "
                f"({[l for l in nng if l.get('side') not in ('mailbox', 'peer')][:3]})")
        for a in ["coordinator", "loop.0", "loop.1", "producer"]:
            F.check(any(l.get("actor") == a and l.get("side") == "mailbox" and l.get("scope") == "listener"
                        and l.get("url", "").endswith("/" + a) for l in nng),
                    f"{label}: {a}'s mailbox listener is there by name and url")
        F.check(all(x >= 0 for n, _, x in smp if n.startswith("m0_") and n != "m0_nng_stat"),
                f"{label}: no negative count")

        # 50 requests.
        before = value(scrape(s.port), "m0_requests_total")
        ok = 0
        c = None
        for i in range(50):
            if i % 10 == 0:  # a few connections, keep-alive on each
                if c:
                    c.close()
                c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=5)
            c.request("GET", "/health")
            r = c.getresponse()
            r.read()
            ok += r.status == 200
        c.close()
        F.check(ok == 50, f"{label}: 50 GET /health answered 200 ({ok})")
        # A loop writes its figures to the shared page once a turn, after that
        # turn's I/O: a loop the scheduler paused between writing an answer
        # and the end of its turn has not counted it yet. So scrape until the
        # 50 requests and the first scrape show (bounded); every scrape after
        # the first may count itself, and nothing else may be counted.
        scrapes = []

        def counted():
            scrapes.append(value(scrape(s.port), "m0_requests_total"))
            return scrapes[-1] is not None and before is not None and scrapes[-1] - before >= 51
        wait_for(counted, 10)
        after = scrapes[-1]
        F.check(before is not None and after is not None and 51 <= after - before <= 51 + len(scrapes),
                f"{label}: m0_requests_total rose by the 50 requests + the first scrape (+ at most each later "
                f"scrape, {len(scrapes)}) ({before} -> {after})")
        e0 = value(scrape(s.port), "m0_events_published_total")
        e1 = wait_for(lambda: (lambda v: v if v is not None and e0 is not None and v >= e0 + 3 else None)(
            value(scrape(s.port), "m0_events_published_total")), 10) or value(scrape(s.port), "m0_events_published_total")
        F.check(e0 is not None and e1 is not None and e1 >= e0 + 3,
                f"{label}: m0_events_published_total rises while the producer beats every 50 ms ({e0} -> {e1})")
        F.check(s.stop() == 0, f"{label}: SIGTERM -> exit 0")


def open_connections():
    label = "single"
    with Server("host_check", "--port", "0", "--metrics-path", "/metrics") as s:
        base = value(scrape(s.port), "m0_open_connections", loop="0")
        held = http.client.HTTPConnection("127.0.0.1", s.port, timeout=5)
        held.request("GET", "/health")
        held.getresponse().read()
        with_held = value(scrape(s.port), "m0_open_connections", loop="0")
        F.check(base is not None and with_held == base + 1,
                f"{label}: a held keep-alive connection counts in m0_open_connections ({base} -> {with_held})")
        held.close()
        back = wait_for(lambda: value(scrape(s.port), "m0_open_connections", loop="0") == base, 2)
        F.check(back, f"{label}: closing it lowers m0_open_connections again "
                      f"({value(scrape(s.port), 'm0_open_connections', loop='0')}, want {base})")
        s0 = value(scrape(s.port), "m0_streams", loop="0")
        st = Stream(s.port, "/events")
        s1 = wait_for(lambda: value(scrape(s.port), "m0_streams", loop="0") == (s0 or 0) + 1, 2)
        F.check(s0 == 0 and s1, f"{label}: an open /events stream shows in m0_streams ({s0} -> "
                                f"{value(scrape(s.port), 'm0_streams', loop='0')})")
        st.close()
        F.check(s.stop() == 0, f"{label}: SIGTERM -> exit 0")


def respawns():
    label = "workers 2"
    with Prefork("host_check", "--port", "0", "--workers", "2", "--metrics-path", "/metrics") as s:
        sup = s.proc.pid
        kids = wait_for(lambda: children(sup) if len(children(sup)) == 2 else None, 5)
        F.check(kids, f"{label}: two workers under the supervisor ({children(sup)})")
        r0 = value(scrape(s.port), "m0_respawns_total")
        F.check(r0 == 0, f"{label}: m0_respawns_total starts at 0 ({r0})")
        if not kids:
            return
        # Both loops have answered requests (fresh connections, bounded), so
        # the worker killed has counts a respawn must not take back.
        def both_counted():
            get(s.port, "/health")
            smp = scrape(s.port)
            return all((value(smp, "m0_requests_total", loop=i) or 0) > 0 for i in ("0", "1"))
        F.check(wait_for(both_counted, 10), f"{label}: both workers' loops have answered requests")
        before = counters(get(s.port, "/metrics")[2])[0]
        victim = min(kids)
        os.kill(victim, signal.SIGKILL)
        new = wait_for(lambda: (lambda c: c if len(c) == 2 and victim not in c else None)(children(sup)), 5)
        F.check(new, f"{label}: the killed worker {victim} is respawned ({children(sup)})")
        # Stop only once the new worker serves (SIGTERM while it starts is checked in term_after_respawn).
        serving = wait_for(lambda: re.search(r"worker \d+ respawned \(pid \d+\), serving", s.stderr()), 5)
        F.check(serving, f"{label}: the respawned worker serves:\n{s.stderr()}")
        r1 = wait_for(lambda: (value(scrape(s.port), "m0_respawns_total") or 0) >= 1, 3)
        F.check(r1, f"{label}: m0_respawns_total rises after the SIGKILL "
                    f"({value(scrape(s.port), 'm0_respawns_total')})")
        smp = scrape(s.port)
        F.check(value(smp, "m0_respawns_total") == 1, f"{label}: by exactly one ({value(smp, 'm0_respawns_total')})")
        # The respawned worker's loop counts on from its predecessor's: no
        # counter went back, whichever worker answers (both, over 10 scrapes).
        back = []
        for _ in range(10):
            after = counters(get(s.port, "/metrics")[2])[0]
            back += [(k, before[k], after[k]) for k in before if k in after and after[k] < before[k]]
        F.check(not back, f"{label}: no counter went back over the respawn ({len(back)}: {back[:4]})")
        st, _, body = get(s.port, "/metrics")
        promtool_check(body if st == 200 else "", label)
        procs = {l.get("process") for n, l, _ in parse(body, label, strict=False) if n == "m0_nng_stat"}
        F.check(len(procs) == 1 and procs <= {"worker.0", "worker.1"},
                f"{label}: nng's lines name the worker that answered ({procs})")
        rc = s.stop()
        F.check(rc == 0, f"{label}: SIGTERM -> exit 0 ({rc}):\n{s.stderr()}")


def term_after_respawn():
    """SIGTERM to the supervisor just after it respawned a worker (the new
    worker still starting) is still a drain: exit 0 (docs/behaviour.md, Drain;
    docs/reference.md, Exit codes: exit 1 is a failure, and nothing failed).
    Tried 3 times, ~1 ms after the new child appears."""
    label = "workers 2, SIGTERM right after a respawn"
    for attempt in range(3):
        # The drain's bound is not what this checks: 30 s, so a new worker
        # that starts slowly on a loaded machine still drains within it.
        with Prefork("host_check", "--port", "0", "--workers", "2", "--drain-timeout-ms", "30000") as s:
            sup = s.proc.pid
            kids = wait_for(lambda: children(sup) if len(children(sup)) == 2 else None, 5)
            if not kids or not wait_for(lambda: s.stderr().count("serving (pid") >= 2, 5):
                F.check(False, f"{label}: two workers serve ({children(sup)}):\n{s.stderr()}")
                return
            victim = min(kids)
            os.kill(victim, signal.SIGKILL)
            new = wait_for(lambda: (lambda c: c if len(c) == 2 and victim not in c else None)(children(sup)), 5,
                           step=0.0005)
            time.sleep(0.001)
            try:
                rc = s.stop(timeout=40)
            except AssertionError as e:
                rc = str(e)
            F.check(new and rc == 0, f"{label} (attempt {attempt + 1}): exit 0 (rc {rc}; new worker seen {new}):\n"
                                     f"{s.stderr()}")
            if rc != 0:
                return


def histogram(samples, name, **labels):
    """{le: cumulative count}, sum, count of one histogram series."""
    pick = lambda n: [(l, x) for nn, l, x in samples if nn == n and all(l.get(k) == v for k, v in labels.items())]
    buckets = {l["le"]: x for l, x in pick(name + "_bucket")}
    s, c = pick(name + "_sum"), pick(name + "_count")
    return buckets, (s[0][1] if len(s) == 1 else None), (c[0][1] if len(c) == 1 else None)


def latencies():
    """Request latency histograms, by route and by application actor."""
    label = "latency histograms"
    with Server("host_check", "--port", "0", "--threads", "2", "--blocking-threads", "1",
                "--metrics-path", "/metrics") as s:
        sent = {"/instance": 20, "/health": 10, "/actor/echo": 5, "/slow?ms=60": 3, "/nope": 4}
        for path, n in sent.items():
            c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
            for _ in range(n):
                c.request("GET", path)
                c.getresponse().read()
            c.close()
        st, _, body = get(s.port, "/metrics")
        smp = parse(body, label)
        promtool_check(body, label)
        name = "m0_request_duration_seconds"
        for route, n in (("/instance", 20), ("/health", 10), ("/actor/echo", 5), ("/slow", 3)):
            b, total, count = histogram(smp, name, method="GET", route=route)
            les = sorted((float(k) for k in b if k != "+Inf"))
            cum = [b[k] for k in sorted((k for k in b if k != "+Inf"), key=float)] + [b.get("+Inf")]
            F.check(count == n and b.get("+Inf") == n, f"{label}: {route}: its {n} requests are counted "
                                                       f"(count {count}, +Inf {b.get('+Inf')})")
            F.check(len(les) == 16 and les[0] == 0.0001 and les[-1] == 10 and cum == sorted(cum),
                    f"{label}: {route}: 16 cumulative buckets from 100 us to 10 s, and +Inf ({b})")
            F.check(total is not None and total > 0, f"{label}: {route}: a sum of seconds ({total})")
        b, total, _ = histogram(smp, name, route="/slow")
        # host_check's spin ends within a millisecond of 60 (it counts whole
        # milliseconds): each took more than 50 ms, the three 150 ms or more
        # (how much more is the machine's: no upper bound is asserted).
        F.check(b.get("0.05") == 0 and b.get("+Inf") == 3 and total is not None and total >= 0.15,
                f"{label}: /slow?ms=60's three requests each took more than 50 ms: none at or below 50 ms, "
                f"sum >= 0.15 s ({b.get('0.05')}, {b.get('+Inf')}, {total})")
        _, _, none = histogram(smp, name, route="(none)")
        F.check(none is not None and none >= 4, f"{label}: requests no route answered (the 404s, the scrape) "
                                                f"are route (none) ({none})")
        b, total, count = histogram(smp, "m0_actor_request_duration_seconds", actor="echo")
        F.check(count == 5 and b.get("+Inf") == 5 and total and total > 0,
                f"{label}: the echo actor's 5 requests are in its histogram (count {count}, sum {total})")
        # Answers by route and status class: on the loop, from the pool, from
        # an actor, and the 404s as route (none) (the scrape itself is counted
        # once its answer is begun: after its own text).
        for route, method, n in (("/instance", "GET", 20), ("/health", "GET", 10), ("/actor/echo", "GET", 5),
                                 ("/slow", "GET", 3), ("(none)", "", 0)):
            got = {c: value(smp, "m0_responses_total", route=route, method=method, **{"class": c})
                   for c in ("1xx", "2xx", "3xx", "4xx", "5xx")}
            want = {"1xx": 0, "2xx": n, "3xx": 0, "4xx": 4 if route == "(none)" else 0, "5xx": 0}
            F.check(got == want, f"{label}: m0_responses_total for {route} by class is {want} ({got})")
        F.check(s.stop() == 0, f"{label}: SIGTERM -> exit 0")


# ---- every counter rises, in every mode, under load -------------------------

def ws_session(port, close):
    """One WebSocket on /ws: a text message echoed, then a close 1000 (close)
    or the socket dropped (1006). True when the echo came back."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        s.sendall(b"GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        buf = b""
        while b"\r\n\r\n" not in buf:
            c = s.recv(4096)
            if not c:
                return False
            buf += c
        head, _, buf = buf.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101"):
            return False
        key = os.urandom(4)
        s.sendall(bytes([0x81, 0x80 | 5]) + key + bytes(b ^ key[i % 4] for i, b in enumerate(b"hello")))
        # the echo: a text frame "hello" (the channel's beats may come first)
        while True:
            while len(buf) >= 2 and len(buf) >= 2 + (buf[1] & 0x7F) and (buf[1] & 0x7F) < 126:
                op, n = buf[0] & 0x0F, buf[1] & 0x7F
                payload, buf = buf[2:2 + n], buf[2 + n:]
                if op == 1 and payload == b"hello":
                    break
            else:
                if len(buf) >= 2 and (buf[1] & 0x7F) >= 126:
                    return False  # a beat is short; nothing here is this long
                c = s.recv(4096)
                if not c:
                    return False
                buf += c
                continue
            break
        if close:
            key = os.urandom(4)
            s.sendall(bytes([0x88, 0x80 | 2]) + key + bytes(b ^ key[i % 4] for i, b in enumerate(b"\x03\xe8")))
            while s.recv(4096):  # the server's close, then its EOF
                pass
        return True
    except OSError:
        return False
    finally:
        s.close()


class Load:
    """Requests until stopped, from threads: /health (loop), /instance
    (pool), /actor/echo (an application actor), /nope (404) over keep-alive
    connections, and WebSockets (echo, then a close 1000 or a dropped
    socket). Counts what it saw; errors are counted, not raised (a test
    checks them)."""

    def __init__(self, port):
        self.port, self.stop, self.lock = port, threading.Event(), threading.Lock()
        self.seen = {"2xx": 0, "404": 0, "actor": 0, "ws": 0, "errors": 0}
        self.threads = [threading.Thread(target=self.http, daemon=True) for _ in range(2)]
        self.threads.append(threading.Thread(target=self.ws, daemon=True))

    def add(self, k, n=1):
        with self.lock:
            self.seen[k] += n

    def http(self):
        while not self.stop.is_set():
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                for path in ("/health", "/instance", "/actor/echo", "/nope", "/health"):
                    c.request("GET", path)
                    r = c.getresponse()
                    r.read()
                    want = 404 if path == "/nope" else 200
                    self.add("404" if path == "/nope" else "actor" if path == "/actor/echo" else "2xx",
                             1 if r.status == want else 0)
                    if r.status != want:
                        self.add("errors")
                c.close()
            except (OSError, http.client.HTTPException):
                self.add("errors")

    def ws(self):
        n = 0
        while not self.stop.is_set():
            n += 1
            self.add("ws" if ws_session(self.port, close=n % 2 == 0) else "errors")

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(15)


def counters(text):
    """{(name, labels): value} of every counter sample and every histogram's
    buckets, sum and count; the families' types; the process that answered
    (m0_nng_stat's label)."""
    types = {}
    for line in text.splitlines():
        p = line.split()
        if len(p) == 4 and p[:2] == ["#", "TYPE"]:
            types[p[2]] = p[3]
    out, procs = {}, set()
    for name, labels, v in parse(text, "scrape", strict=False):
        fam = family(name, types)
        if name == "m0_nng_stat":
            procs.add(labels.get("process"))
        if types.get(fam) in ("counter", "histogram"):
            out[(name, tuple(sorted(labels.items())))] = v
    return out, types, procs


# Counters that must be there, by family, and one series of each that the
# load must raise between the first and the last scrape.
MUST = ["m0_responses_total", "m0_request_duration_seconds_count", "m0_actor_requests_total",
        "m0_actor_request_duration_seconds_count", "m0_websockets_opened_total",
        "m0_websocket_messages_received_total", "m0_websocket_messages_sent_total", "m0_websockets_closed_total",
        "m0_requests_total", "m0_deferred_late_total"]
RISE = [("m0_responses_total", {"route": "(none)", "class": "4xx"}),
        ("m0_responses_total", {"route": "/instance", "class": "2xx"}),
        ("m0_responses_total", {"route": "/ws", "class": "1xx"}),
        ("m0_request_duration_seconds_count", {"route": "/health"}),
        ("m0_actor_requests_total", {"actor": "echo", "outcome": "ok"}),
        ("m0_actor_request_duration_seconds_count", {"actor": "echo"}),
        ("m0_websockets_opened_total", {}), ("m0_websocket_messages_received_total", {}),
        ("m0_websocket_messages_sent_total", {}), ("m0_websockets_closed_total", {"code": "1000"}),
        ("m0_websockets_closed_total", {"code": "1006"})]


def total(ctr, name, want):
    v = [x for (n, l), x in ctr.items() if n == name and all(dict(l).get(k) == w for k, w in want.items())]
    return sum(v) if v else None


def monotonic(label, cls, *args):
    """20 scrapes over fresh connections while Load runs: every counter
    (and every histogram's buckets, sum and count) never decreases from one
    scrape to the next, and every series once seen is in every later scrape;
    under --workers the scrapes were answered by both workers (else nothing
    was tried), scraping on (bounded) until both have answered."""
    with cls("host_check", "--port", "0", "--metrics-path", "/metrics", "--blocking-threads", "1", *args,
             env={"M0_HOSTCHECK_PERIOD_MS": "50"}) as s:
        if cls is Prefork:
            F.check(wait_for(lambda: s.stderr().count("serving (pid") >= 2, 10), f"{label}: both workers serve")
        with Load(s.port) as load:
            F.check(wait_for(lambda: load.seen["ws"] >= 2 and load.seen["actor"] >= 2, 20),
                    f"{label}: the load runs ({load.seen})")
            scrapes, procs, bodies = [], [], []
            while len(scrapes) < 20 or (cls is Prefork and len(set().union(*procs)) < 2 and len(scrapes) < 80):
                st, _, body = get(s.port, "/metrics")
                if st != 200:
                    F.check(False, f"{label}: scrape {len(scrapes) + 1} -> 200 ({st})")
                    break
                ctr, types, pr = counters(body)
                scrapes.append(ctr)
                procs.append(pr)
                bodies.append(body)
        F.check(load.seen["errors"] == 0, f"{label}: every request of the load answered as expected ({load.seen})")
        who = set().union(*procs) if procs else set()
        if cls is Prefork:
            F.check(who == {"worker.0", "worker.1"}, f"{label}: both workers answered scrapes ({who})")
        first = scrapes[0] if scrapes else {}
        for fam in MUST:
            F.check(any(n == fam for n, _ in first), f"{label}: {fam} is there")
        back, gone = [], []
        for i in range(1, len(scrapes)):
            prev, cur = scrapes[i - 1], scrapes[i]
            gone += [(i + 1, k) for k in prev if k not in cur]
            back += [(i + 1, k, prev[k], cur[k]) for k in prev if k in cur and cur[k] < prev[k]]
        F.check(len(scrapes) >= 20 and not back,
                f"{label}: no counter decreased over {len(scrapes)} scrapes ({len(back)}: {back[:4]})")
        F.check(len(scrapes) >= 20 and not gone,
                f"{label}: every series once seen is in every later scrape ({len(gone)}: {gone[:4]})")
        last = scrapes[-1] if scrapes else {}
        for name, want in RISE:
            a, b = total(first, name, want), total(last, name, want)
            F.check(a is not None and b is not None and b > a,
                    f"{label}: the load raised {name}{want} across the scrapes ({a} -> {b})")
        if bodies:
            promtool_check(bodies[-1], f"{label}, under load")
        F.check(s.stop() == 0, f"{label}: SIGTERM -> exit 0:\n{s.stderr()[-2000:]}")


# ---- series keyed by identity across reloads --------------------------------

def routes_file(path, routes, actor):
    """A topology file: routes (pattern -> actor), and one external actor."""
    with open(path, "w") as f:
        f.write(json.dumps({"app_actors": [{"name": actor, "placement": "external"}],
                            "routes": [{"method": "GET", "pattern": p, "actor": a} for p, a in routes]}))


def gone(pid, timeout=30):
    """Waits (bounded) for a process that is not our child to be gone."""
    def no():
        try:
            os.kill(pid, 0)
            return False
        except ProcessLookupError:
            return True
    return wait_for(no, timeout)


def requests(port, path, n, want):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    got = []
    for _ in range(n):
        c.request("GET", path)
        r = c.getresponse()
        r.read()
        got.append(r.status)
    c.close()
    F.check(got == [want] * n, f"{path}: {n} answered {want} ({got})")


SERVING_RE = re.compile(r"^m0: reload: generation (\d+) serving \(pid (\d+)\); generation (\d+) draining$", re.M)


def reload(s, label, old_pid, gen):
    """SIGHUP to the top process old_pid; waits (bounded) for generation gen
    to serve and old_pid to be gone. The new top pid, or None."""
    os.kill(old_pid, signal.SIGHUP)
    m = wait_for(lambda: next((m for m in SERVING_RE.finditer(s.stderr()) if int(m.group(1)) == gen), None), 30)
    F.check(m, f"{label}: generation {gen} serves after the SIGHUP:\n{s.stderr()[-2000:]}")
    if not m:
        return None
    if old_pid == s.proc.pid:  # generation 1: drained, the pid goes on as the master (host/master.h)
        def title():
            try:
                with open(f"/proc/{old_pid}/cmdline", "rb") as f:
                    return f.read().split(b"\0")[0]
            except OSError:
                return b""
        F.check(wait_for(lambda: title() == b"m0: host_check master", 30) and "drained with exit" not in s.stderr(),
                f"{label}: generation {gen - 1} (pid {old_pid}) drained (exit 0) and is the master ({title()!r})")
    else:
        F.check(gone(old_pid), f"{label}: generation {gen - 1} (pid {old_pid}) drained and exited")
    return int(m.group(2))


def by_identity(label, *mode):
    """Each route's and each actor's series count its own requests over
    reloads that reorder, replace and bring back routes and actors."""
    d = tempfile.mkdtemp(prefix="m0-rows-")
    topo = os.path.join(d, "topo.json")
    first = ([("/a", "echo"), ("/b", "echo"), ("/x", "alpha")], "alpha")
    second = ([("/b", "echo"), ("/c", "echo"), ("/x", "beta")], "beta")
    routes_file(topo, *first)
    cls = Prefork if "--workers" in mode else Server
    s = cls("host_check", "--port", "0", "--topology", topo, "--metrics-path", "/metrics", "--drain-timeout-ms",
            "5000", *mode)
    top = None
    try:
        s.start()
        top = s.proc.pid
        if cls is Prefork:
            F.check(wait_for(lambda: s.stderr().count("serving (pid") >= 2, 10), f"{label}: both workers serve")
        seen = []  # every scrape's counters, in order

        def look(want, sel):
            """Scrapes until the series sel names read as want says (None:
            absent; bounded: a worker's loop may be a turn behind), then checks."""
            got = {}

            def read():
                ctr = counters(get(s.port, "/metrics")[2])[0]
                seen.append(ctr)
                got.update({k: total(ctr, *sel[k]) for k in want})
                return got == want
            wait_for(read, 10)
            F.check(got == want, f"{label}: each series counts its own requests: want {want}, got {got}")

        def series(rt):
            return {f"{rt} 2xx": ("m0_responses_total", {"route": rt, "method": "GET", "class": "2xx"}),
                    f"{rt} count": ("m0_request_duration_seconds_count", {"route": rt, "method": "GET"})}

        def actor(a):
            return {f"{a} no_instance": ("m0_actor_requests_total", {"actor": a, "outcome": "no_instance"})}

        requests(s.port, "/a", 12, 200)
        requests(s.port, "/b", 5, 200)
        requests(s.port, "/x", 4, 503)
        look({"/a 2xx": 12, "/a count": 12, "/b 2xx": 5, "/b count": 5, "alpha no_instance": 4},
             {**series("/a"), **series("/b"), **actor("alpha")})
        # /b first, /c where /a was, beta where alpha was.
        routes_file(topo, *second)
        top = reload(s, label, top, 2)
        if top is None:
            return
        requests(s.port, "/b", 3, 200)
        requests(s.port, "/c", 7, 200)
        requests(s.port, "/x", 2, 503)
        look({"/b 2xx": 8, "/b count": 8, "/c 2xx": 7, "/c count": 7, "beta no_instance": 2},
             {**series("/b"), **series("/c"), **actor("beta")})
        # The first file again: /a and alpha find their rows.
        routes_file(topo, *first)
        top = reload(s, label, top, 3)
        if top is None:
            return
        requests(s.port, "/a", 1, 200)
        look({"/a 2xx": 13, "/a count": 13, "/b 2xx": 8, "/c 2xx": None, "alpha no_instance": 4,
              "beta no_instance": None},
             {**series("/a"), "/b 2xx": series("/b")["/b 2xx"], "/c 2xx": series("/c")["/c 2xx"], **actor("alpha"),
              **actor("beta")})
        back, high = [], {}
        for ctr in seen:
            back += [(k, high[k], v) for k, v in ctr.items() if v < high.get(k, v)]
            high.update({k: max(v, high.get(k, v)) for k, v in ctr.items()})
        F.check(not back, f"{label}: no series is lower in a later scrape ({len(back)}: {back[:4]})")
        os.kill(s.proc.pid, signal.SIGTERM)  # the pid a supervisor knows: it drains the generation serving
        F.check(gone(top), f"{label}: SIGTERM -> the last generation exits")
        F.check(s.wait(30) == 0, f"{label}: SIGTERM -> the top pid exits 0")
        top = None
        bad = sanitizer_report(s.stderr())
        F.check(not bad, f"{label}: no sanitizer report from any generation ({bad})")
    finally:
        if top is not None and top != (s.proc and s.proc.pid):
            for p in children(top) + [top]:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
        s.kill()
        shutil.rmtree(d, ignore_errors=True)


def no_path():
    label = "no --metrics-path"
    with Server("host_check", "--port", "0") as s:
        st, _, body = get(s.port, "/metrics")
        F.check(st == 404, f"{label}: GET /metrics -> 404 ({st} {body[:80]!r})")
        F.check(s.stop() == 0, f"{label}: SIGTERM -> exit 0")


if __name__ == "__main__":
    try:
        format_and_counts()
        monotonic("workers 2", Prefork, "--workers", "2")
        monotonic("threads 2", Server, "--threads", "2")
        monotonic("single", Server)
        latencies()
        open_connections()
        respawns()
        term_after_respawn()
        by_identity("threads 2, reloads", "--threads", "2")
        by_identity("workers 2, reloads", "--workers", "2")
        no_path()
    finally:
        reap_seen()
    F.done()
