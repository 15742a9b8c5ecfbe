"""Topology files (docs/reference.md, Flags and variables `--topology`, Checks
`topology`, The doctor's `topology` and `sources`; docs/topology.md).

Proves:
- Round trip, for threads 2 + pool 1, prefork 2 and single: the doctor's
  `topology` saved to a file and given back with `--doctor --topology FILE`
  prints an equal `topology` (exit 0, ok true), the same resolved values, and
  `sources` marks each value the topology sets (threads or workers,
  blocking-threads, max-connections, M0_ACCEPT_SHARE) as "topology" and
  `topology` itself as "flag". A flag still overrides the file
  (`--blocking-threads 2` wins, its source "flag"), and the server does what
  that doctor says (docs/reference.md, Checks: serves, or refuses with the
  doctor's line).
- Serving that file works: the listening line names the mode; /instance over
  held connections answers with x-worker spanning both loops (threads, prefork)
  or loop 0 (single), the body's worker equal to the header; under the pool
  topology every /instance is answered by pool thread 0 (so handler_threads
  was applied); SIGTERM -> exit 0.
- Broken files (a syntax error; mode single with loops 3; an unknown key;
  prefork with transport inproc; actors out of order): the doctor exits 78,
  its JSON says exit 78 and its failing check is `topology`, whose detail
  names the file, the line (the one where the problem is) and a column that
  lies on that line; the server exits 78 with ONE stderr line, exactly
  `m0: <detail> (<fix>)` of the doctor's check, and never listens.
- Three transports: the same threads-2 topology written with inproc, ipc and
  tcp actor URLs is accepted by the doctor (for tcp its actors are the file's
  tcp URLs) and served: four /events streams spanning both loops (else the
  check fails as vacuous) carry contiguous ids and the very same ids for ~1 s;
  for ipc the coordinator's and producer's sockets exist in the run dir; for
  tcp the server holds established TCP connections to each loop's port;
  SIGTERM -> exit 0.
- Application actors (`app_actors`, `routes`; docs/topology.md, Application
  actors and their routes): the doctor of host_check lists its actor kinds
  echo and silent on threads (one instance, queue 1024, no url) and the
  routes they serve (GET and POST /actor/echo, GET /actor/silent, each with
  its effective timeout_ms); that topology saved and read back prints the
  same topology (threads 2 and prefork 2). A file that re-places echo as
  external prints it so (no instances, its built URL
  ipc://<run-dir>/actor.echo.sock, the queue), silent and the routes
  unchanged, and round-trips too; the same file under prefork is refused by
  the `actors` check (exit 78, the doctor's line is the server's). A file
  route naming an actor nobody declares is refused by `actors`; broken
  `app_actors`/`routes` entries are refused by `topology` at their line.
"""
import copy
import http.client
import json
import os
import re
import shutil
import tempfile
import time

from harness import Failures, Prefork, Server, free_ports, private_dir, run, socket_inodes, wait_for
from test_streams import Stream, contiguous, reap_seen

F = Failures()
TMP = tempfile.mkdtemp(prefix="m0-topology-")

# topology key -> the config key(s) whose source it sets
TOPO_SOURCES = {
    "handler_threads": "blocking-threads",
    "connections_per_loop": "max-connections",
    "accept_sharing": "M0_ACCEPT_SHARE",
}


def doctor(*args, env=None):
    rc, out, err = run("host_check", "--doctor", *args, env=env)
    lines = out.strip().splitlines()
    try:
        d = json.loads(lines[-1]) if lines else None
    except ValueError:
        d = None
    return rc, d, out, err


def write(name, obj_or_text):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        if isinstance(obj_or_text, str):
            f.write(obj_or_text)
        else:
            json.dump(obj_or_text, f, indent=2)
            f.write("\n")
    return path


def instances(port, n=6):
    """n held keep-alive connections, one GET /instance each (all kept open
    until every answer is in, so accept sharing spreads them):
    [(x-worker, body json)]."""
    conns, out = [], []
    try:
        for _ in range(n):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/instance")
            r = c.getresponse()
            body = r.read()
            try:
                j = json.loads(body)
            except ValueError:
                j = None
            out.append((r.status, r.getheader("x-worker"), j))
            conns.append(c)
    finally:
        for c in conns:
            c.close()
    return out


def agree(label, args, d, server_cls):
    """The server does what the doctor `d` said for the same args (docs/reference.md,
    Checks: the doctor never reports as served what the server refuses): served ->
    it listens, answers /health, SIGTERM -> 0; refused -> the same exit and
    the check's line."""
    if not d:
        F.check(False, f"{label}: the doctor printed JSON")
        return
    s = server_cls("host_check", *args, "--port", "0", expect_listen=False)
    s.start()
    try:
        wait_for(lambda: "listening on" in s.stderr() or s.proc.poll() is not None, 10)
        served = "listening on" in s.stderr()
        if d.get("exit") == 0:
            F.check(served, f"{label}: the doctor says exit 0, so the server serves (rc {s.proc.poll()}):\n"
                            f"{s.stderr()[-600:]}")
            if served:
                s.port = int(re.search(r"listening on http://\S+:(\d+) ", s.stderr()).group(1))
                st = [x[0] for x in instances(s.port, 2)]
                F.check(st == [200, 200], f"{label}: it answers ({st})")
                F.check(s.stop(timeout=8) == 0, f"{label}: SIGTERM -> exit 0")
        else:
            rc = s.wait(timeout=10)
            failing = [c for c in d.get("checks", []) if not c.get("ok")]
            want = f"m0: {failing[0]['detail']} ({failing[0]['fix']})" if failing else None
            lines = [l for l in s.stderr().splitlines() if l.strip()]
            F.check(rc == d.get("exit") and lines == [want],
                    f"{label}: the doctor says exit {d.get('exit')}; the server agrees (rc {rc}, {lines}, want {want})")
    finally:
        s.kill()


def round_trip(label, args, expect_workers, server_cls=Server):
    rc, d0, out, err = doctor(*args)
    F.check(rc == 0 and d0 and d0.get("ok") is True, f"{label}: the doctor of {args} exits 0, ok ({rc}, {err})")
    if not d0:
        return
    topo = d0["topology"]
    path = write(label.replace(" ", "_") + ".json", topo)
    rc, d1, out, err = doctor("--topology", path)
    F.check(rc == 0 and d1 and d1.get("ok") is True and d1.get("exit") == 0,
            f"{label}: --doctor --topology FILE exits 0, ok (rc {rc}, {err}, {out[-400:]})")
    if not d1:
        return
    F.check(d1.get("topology") == topo, f"{label}: the file's doctor prints an equal topology\n"
                                        f"  saved  {json.dumps(topo)}\n  reread {json.dumps(d1.get('topology'))}")
    src = d1.get("sources", {})
    modekey = "workers" if topo["mode"] == "prefork" else "threads"
    for k in [modekey] + list(TOPO_SOURCES.values()):
        F.check(src.get(k) == "topology", f"{label}: sources[{k!r}] is 'topology' ({src.get(k)!r})")
    F.check(src.get("topology") == "flag", f"{label}: sources['topology'] is 'flag' ({src.get('topology')!r})")
    for k in ("workers", "threads", "blocking-threads", "max-connections", "M0_ACCEPT_SHARE"):
        F.check(d1["config"].get(k) == d0["config"].get(k),
                f"{label}: config[{k!r}] resolves as the flags did ({d1['config'].get(k)} vs {d0['config'].get(k)})")
    # A flag overrides the file.
    rc, d2, _, _ = doctor("--topology", path, "--blocking-threads", "2")
    F.check(rc == 0 and d2 and d2["topology"]["handler_threads"] == 2 and d2["sources"]["blocking-threads"] == "flag"
            and d2["sources"][modekey] == "topology",
            f"{label}: --blocking-threads 2 overrides the file (handler_threads "
            f"{d2 and d2['topology']['handler_threads']}, source {d2 and d2['sources']['blocking-threads']})")
    agree(f"{label} + --blocking-threads 2", ["--topology", path, "--blocking-threads", "2"], d2, server_cls)

    # Serve the file.
    with server_cls("host_check", "--topology", path, "--port", "0") as s:
        listen = [l for l in s.stderr().splitlines() if "listening on" in l]
        F.check(listen and f"({topo['mode']}," in listen[0],
                f"{label}: the listening line names mode {topo['mode']} ({listen})")
        seen = []
        for _ in range(5):
            seen += instances(s.port)
            if {w for _, w, _ in seen} >= set(expect_workers):
                break
        workers = {w for _, w, _ in seen}
        F.check(all(st == 200 for st, _, _ in seen), f"{label}: every /instance is 200 ({[x[0] for x in seen]})")
        F.check(workers == set(expect_workers),
                f"{label}: x-worker spans {sorted(expect_workers)} (else this proves nothing) ({sorted(workers)})")
        F.check(all(j and str(j.get("worker")) == w for _, w, j in seen),
                f"{label}: the body's worker is the x-worker header ({seen[:4]})")
        want_thread = 0 if topo["handler_threads"] > 0 else -1
        F.check(all(j and j.get("thread") == want_thread for _, _, j in seen),
                f"{label}: /instance answered by thread {want_thread} "
                f"(handler_threads {topo['handler_threads']}) ({[j and j.get('thread') for _, _, j in seen]})")
        rc = s.stop(timeout=8)
        F.check(rc == 0, f"{label}: SIGTERM -> exit 0 ({rc}):\n{s.stderr()[-800:]}")


BROKEN = [
    # label, text, allowed lines, a word the reason must contain
    ("syntax error", '{\n  "mode": "threads",\n  "loops": 2,\n  "transport" "inproc"\n}\n', {4}, None),
    ("single with 3 loops", '{\n  "mode": "single",\n  "loops": 3\n}\n', {2, 3}, "loop"),
    ("unknown key", '{\n  "mode": "threads",\n  "loops": 2,\n  "colour": "blue"\n}\n', {4}, "colour"),
    ("prefork over inproc", '{\n  "mode": "prefork",\n  "loops": 2,\n  "transport": "inproc"\n}\n', {2, 4}, "inproc"),
    ("actors out of order", """{
  "mode": "threads",
  "loops": 2,
  "handler_threads": 0,
  "transport": "inproc",
  "actors": [
    {"name": "coordinator", "url": "inproc://m0-<pid>/coordinator"},
    {"name": "producer", "url": "inproc://m0-<pid>/producer"},
    {"name": "loop.1", "url": "inproc://m0-<pid>/loop.1"},
    {"name": "loop.0", "url": "inproc://m0-<pid>/loop.0"}
  ]
}
""", set(range(6, 12)), "actors"),
    ("app_actors placement misspelt", """{
  "app_actors": [
    {"name": "a", "placement": "external"},
    {"name": "b", "placement": "threads"}
  ]
}
""", {4}, "app_actors[1].placement"),
    ("a route with a view", """{
  "routes": [
    {"method": "GET", "pattern": "/a", "actor": "a"},
    {"method": "GET", "pattern": "/b", "actor": "a",
     "view": "v"}
  ]
}
""", {5}, "routes[1] has the unknown key"),
    ("two routes of one method and pattern", """{
  "app_actors": [{"name": "a", "placement": "external"}],
  "routes": [
    {"method": "GET", "pattern": "/a", "actor": "a"},
    {"pattern": "/a", "actor": "a", "method": "GET"}
  ]
}
""", {5}, "routes[1] is GET /a again"),
]


def broken():
    for i, (label, text, lines_ok, word) in enumerate(BROKEN):
        path = write(f"broken{i}.json", text)
        file_lines = text.split("\n")
        rc, d, out, err = doctor("--topology", path)
        F.check(rc == 78, f"broken {label}: the doctor exits 78 ({rc}, {err})")
        F.check(d is not None and d.get("exit") == 78 and d.get("ok") is False,
                f"broken {label}: the doctor's JSON says exit 78, ok false ({out[-300:]})")
        failing = [c for c in (d or {}).get("checks", []) if not c.get("ok")]
        first = failing[0] if failing else {}
        F.check(first.get("name") == "topology", f"broken {label}: the first failing check is `topology` ({failing})")
        detail = first.get("detail", "")
        m = re.search(r"topology file (\S+) line (\d+) column (\d+): (.+)", detail)
        F.check(m and m.group(1) == path, f"broken {label}: the detail names the file, a line and a column ({detail!r})")
        if m:
            ln, col = int(m.group(2)), int(m.group(3))
            F.check(ln in lines_ok, f"broken {label}: the line is where the problem is ({ln}, expected one of "
                                    f"{sorted(lines_ok)}): {detail!r}")
            row = file_lines[ln - 1] if 0 < ln <= len(file_lines) else None
            F.check(row is not None and 1 <= col <= len(row) + 1,
                    f"broken {label}: column {col} lies on line {ln} ({row!r})")
            if word:
                F.check(word in m.group(4), f"broken {label}: the reason mentions {word!r} ({m.group(4)!r})")
        F.check(first.get("fix") and first.get("exit") == 78, f"broken {label}: the check carries a fix and exit 78 "
                                                              f"({first})")
        # The server: same refusal, one line, nothing bound.
        s = Server("host_check", "--topology", path, "--port", "0", expect_listen=False)
        s.start()
        try:
            rc = s.wait(timeout=10)
        finally:
            s.kill()
        lines = [l for l in s.stderr().splitlines() if l.strip()]
        F.check(rc == 78, f"broken {label}: the server exits 78 ({rc}): {lines}")
        F.check(len(lines) == 1, f"broken {label}: the server writes ONE stderr line ({lines})")
        want = f"m0: {detail} ({first.get('fix')})"
        F.check(lines and lines[0] == want, f"broken {label}: the server's line is the doctor's check\n"
                                            f"  server {lines[:1]}\n  doctor {want!r}")
        F.check("listening" not in s.stderr(), f"broken {label}: the server never listens")


def tcp_sockets(pid):
    """[(local port, remote port, state hex)] of the process's IPv4 TCP sockets."""
    mine = socket_inodes(pid)
    out = []
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            p = line.split()
            if p[9] in mine:
                out.append((int(p[1].split(":")[1], 16), int(p[2].split(":")[1], 16), p[3]))
    return out


def transports():
    rc, d0, _, err = doctor("--threads", "2")
    if not d0:
        F.check(False, f"transports: the doctor of --threads 2 prints JSON ({rc}, {err})")
        return
    base = d0["topology"]
    names = [a["name"] for a in base["actors"]]
    F.check(names == ["coordinator", "producer", "loop.0", "loop.1"], f"transports: threads-2 actors ({names})")
    for tr in ("inproc", "ipc", "tcp"):
        label = f"transport {tr}"
        if tr == "inproc":
            urls = [f"inproc://m0-<pid>/{n}" for n in names]
        elif tr == "ipc":
            urls = [f"ipc://<run-dir>/{n}.sock" for n in names]
        else:
            ports = free_ports(len(names))
            urls = [f"tcp://127.0.0.1:{p}" for p in ports]
        topo = dict(base, transport=tr, actors=[{"name": n, "url": u} for n, u in zip(names, urls)])
        path = write(f"transport-{tr}.json", topo)
        rc, d, out, err = doctor("--topology", path)
        F.check(rc == 0 and d and d.get("ok"), f"{label}: the doctor accepts the file ({rc}, {err}, {out[-300:]})")
        if d:
            F.check(d["topology"].get("transport") == tr, f"{label}: the doctor's transport ({d['topology'].get('transport')})")
            F.check(d["topology"].get("actors") == topo["actors"],
                    f"{label}: the doctor's actors are the file's URLs ({d['topology'].get('actors')})")
        rd = private_dir()
        try:
            with Server("host_check", "--topology", path, "--port", "0", "--run-dir", rd,
                        env={"M0_HOSTCHECK_PERIOD_MS": "100"}) as s:
                streams = [Stream(s.port, "/events") for _ in range(4)]
                workers = [st.worker for st in streams]
                F.check(all(st.status == 200 for st in streams), f"{label}: four /events streams are 200 "
                                                                 f"({[st.status_line for st in streams]})")
                F.check(set(workers) == {"0", "1"},
                        f"{label}: the four streams span both loops, else this proves nothing (x-worker {workers})")
                time.sleep(1.1)
                if tr == "ipc":
                    have = sorted(os.listdir(rd))
                    F.check("coordinator.sock" in have and "producer.sock" in have,
                            f"{label}: the coordinator and producer mailboxes are ipc sockets in the run dir ({have})")
                if tr == "tcp":
                    socks = tcp_sockets(s.proc.pid)
                    for n, p in zip(names, ports):
                        listening = [x for x in socks if x[0] == p and x[2] == "0A"]
                        F.check(listening, f"{label}: {n} listens on tcp port {p} ({socks})")
                    for n, p in zip(names[2:], ports[2:]):
                        est = [x for x in socks if x[1] == p and x[2] == "01"]
                        F.check(est, f"{label}: the host has established TCP connections to {n} at port {p} ({socks})")
                ids = [st.ids() for st in streams]
                for i, l in enumerate(ids):
                    F.check(len(l) >= 7, f"{label}: stream {i} (x-worker {workers[i]}) carried >= 7 beats in ~1.1 s "
                                         f"({len(l)})")
                    F.check(contiguous(l), f"{label}: stream {i}: ids contiguous ({l})")
                if all(ids):
                    lo, hi = max(l[0] for l in ids), min(l[-1] for l in ids)
                    want = list(range(lo, hi + 1))
                    F.check(len(want) >= 6, f"{label}: the streams share >= 6 ids ({lo}..{hi})")
                    for i, l in enumerate(ids):
                        F.check([x for x in l if lo <= x <= hi] == want,
                                f"{label}: stream {i} carries every id {lo}..{hi} exactly once ({l})")
                else:
                    F.check(False, f"{label}: every stream carried beats ({[len(l) for l in ids]})")
                t0 = time.monotonic()
                try:
                    rc = s.stop(timeout=5)
                except AssertionError as e:
                    rc = str(e)
                F.check(rc == 0, f"{label}: SIGTERM -> exit 0 within 5 s ({rc}, {time.monotonic() - t0:.2f}s)")
                for st in streams:
                    st.close()
        finally:
            shutil.rmtree(rd, ignore_errors=True)


def refused_by_actors(label, args, detail_has):
    """The doctor exits 78 with `actors` the first failing check, its detail
    saying detail_has; the server agrees (one line, 78, never listens)."""
    rc, d, out, err = doctor(*args)
    failing = [c for c in (d or {}).get("checks", []) if not c.get("ok")]
    first = failing[0] if failing else {}
    F.check(rc == 78 and d and d.get("exit") == 78 and first.get("name") == "actors"
            and detail_has in first.get("detail", ""),
            f"{label}: refused by the actors check, saying {detail_has!r} (rc {rc}, {failing})")
    agree(label, args, d, Server)


def app_actors():
    # Independent of host_check's own actors: a file route naming an actor
    # nobody declares.
    path = write("ghost-route.json", {"routes": [{"method": "GET", "pattern": "/ghost", "actor": "ghost"}]})
    refused_by_actors("a route naming no actor", ["--topology", path],
                      'route GET /ghost names actor "ghost", which neither the program nor app_actors declares')

    rc, d0, out, err = doctor("--threads", "2")
    topo = (d0 or {}).get("topology", {})
    acts = {a.get("name"): a for a in topo.get("app_actors", [])}
    want = {n: {"name": n, "placement": "thread", "instances": 1, "queue": 1024} for n in ("echo", "silent")}
    ok = all(acts.get(n) == a for n, a in want.items())
    F.check(rc == 0 and ok, f"app actors: host_check's doctor lists echo and silent on threads, one instance, queue "
                            f"1024 (rc {rc}, {topo.get('app_actors')})")
    routes = {(r.get("method"), r.get("pattern")): r for r in topo.get("routes", [])}
    for m, p, a in (("GET", "/actor/echo", "echo"), ("POST", "/actor/echo", "echo"), ("GET", "/actor/silent", "silent")):
        r = routes.get((m, p), {})
        F.check(r.get("actor") == a and isinstance(r.get("timeout_ms"), int) and r["timeout_ms"] >= 1,
                f"app actors: the doctor's routes hold {m} {p} served by {a} with its timeout ({topo.get('routes')})")
    if not ok:
        return  # the rest re-places echo: nothing to prove without it
    # The round trip, threads and prefork (thread placement is served under both).
    for label, args in (("threads 2", ["--threads", "2"]), ("prefork 2", ["--workers", "2"])):
        rc, d, _, _ = doctor(*args)
        t = (d or {}).get("topology")
        path = write(f"actors-{label.replace(' ', '_')}.json", t)
        rc1, d1, out1, err1 = doctor("--topology", path)
        F.check(rc == 0 and rc1 == 0 and d1 and d1.get("topology") == t,
                f"app actors {label}: the saved topology reads back the same (rc {rc}, {rc1}, {err1})\n"
                f"  saved  {json.dumps(t)}\n  reread {json.dumps((d1 or {}).get('topology'))}")
    # echo re-placed as external.
    ext = copy.deepcopy(topo)
    ext["app_actors"] = [{"name": "echo", "placement": "external"} if a["name"] == "echo" else a
                         for a in ext["app_actors"]]
    path = write("actors-echo-external.json", ext)
    rc, d1, out, err = doctor("--topology", path)
    t1 = (d1 or {}).get("topology", {})
    acts1 = {a.get("name"): a for a in t1.get("app_actors", [])}
    F.check(rc == 0 and acts1.get("echo") == {"name": "echo", "placement": "external",
                                              "url": "ipc://<run-dir>/actor.echo.sock", "queue": 1024},
            f"app actors: a file placing echo external prints it so (rc {rc}, {acts1.get('echo')}, {err})")
    F.check(acts1.get("silent") == acts.get("silent") and t1.get("routes") == topo.get("routes"),
            f"app actors: silent and the routes stay as they were ({acts1.get('silent')}, {t1.get('routes')})")
    path2 = write("actors-echo-external-reread.json", t1)
    rc2, d2, _, err2 = doctor("--topology", path2)
    F.check(rc2 == 0 and d2 and d2.get("topology") == t1,
            f"app actors: the external placement round-trips (rc {rc2}, {err2})")
    # Under prefork an external actor is served too (the supervisor relays it).
    rc, dp, _, _ = doctor("--workers", "2")
    tp = copy.deepcopy((dp or {}).get("topology", {}))
    tp["app_actors"] = [{"name": "echo", "placement": "external"} if a["name"] == "echo" else a
                        for a in tp.get("app_actors", [])]
    path = write("actors-prefork-external.json", tp)
    rc, dp2, _, err = doctor("--topology", path)
    F.check(rc == 0 and dp2 and any(a["name"] == "echo" and a["placement"] == "external"
                                    for a in dp2["topology"]["app_actors"]),
            f"app actors: echo external under prefork is served (rc {rc}, {err[-300:]})")

if __name__ == "__main__":
    try:
        round_trip("threads 2 + pool 1", ["--threads", "2", "--blocking-threads", "1"], {"0", "1"})
        round_trip("prefork 2", ["--workers", "2"], {"0", "1"}, server_cls=Prefork)
        round_trip("single", [], {"0"})
        broken()
        transports()
        app_actors()
    finally:
        reap_seen()
        shutil.rmtree(TMP, ignore_errors=True)
    F.done()
