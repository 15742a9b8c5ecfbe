"""The observer's graph (`m0_respond_graph`, the dashboard's GET /graph;
docs/reference.md, The observer).

Proves, for `dashboard --workers 2 --blocking-threads 2` (echo on a thread
of each worker) and `dashboard --threads 2 --blocking-threads 2` with echo
placed external by a topology file and served by a real `echo_actor`:
- the nodes are exactly the doctor's `topology.actors`, each application
  actor of `topology.app_actors`, and each instance live now (`echo.0`);
  every node names its role, process (host; supervisor, worker.i under
  prefork), thread and machine; a loop's figures are numbers and rise with
  the requests sent; the echo actor counts its live instance and, under the
  external placement, the instance is `connected` and names the machine it
  dialed from (127.0.0.1 over tcp);
- the edges are exactly the ones ARCHITECTURE.md's table of kinds gives for
  that topology, derived here from the doctor's output alone (coordinator or
  worker and loop, loop and pool, producer to loops, siblings' hand-offs
  under threads, supervisor and workers under prefork, loops and echo's
  instances);
- every edge counts its messages (on the shared page, from every process):
  the go that opened loop.0's barrier is on its edge; 20 GET /echo add 1..20
  request messages on loop -> echo.0 and as many replies on echo.0 -> loop
  (an outside instance's replies counted by the host as it takes them);
- the graph is true: every message m0trace sees while requests go through
  the actor and the loop (`m0trace --run-dir`, every kind) is on an edge of
  the graph, of a kind that edge names (but m0trace's own controls, from
  external.<pid>: a tool, no actor of the topology);
- with an external echo (--threads and --workers): the actor's recent trace
  records (/graph?records=echo, and the loops') are each from or to it, the
  request sent with a traceparent among echo's and its loop's by its id,
  none for an actor that is not; GET /graph with Accept: text/event-stream is the host's own
  stream of graph events, about one a second;
- under --workers 2 the graph (whichever worker answers) lists every
  worker's echo.0 (its process, its worker's real pid); each edge has a
  rate, above 0 on echo's edges under load and 0 once idle;
- the supervision tree is the topology file's: echo placed process under
  one_for_all (the supervisor's pid, the instances' own pids, children of
  the supervisor; one killed, both started again and counted), and nested
  supervisors with thread and process children (host_check);
- an actor placed nats (a real nats-server) shows its server, subject and
  each worker's lanes.
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

import harness
from harness import BIN, Failures, Prefork, Server, environ, get, wait_for, with_free_port

F = Failures()
TMP = tempfile.mkdtemp(prefix="m0-observer-")


def graph(port, timeout=5.0, tolerate=False):
    """GET /graph: the graph, or None. tolerate: None too when it is not
    answered within timeout (a connection handed to a stopped worker)."""
    try:
        st, body = get(port, "/graph", timeout=timeout)
    except (OSError, http.client.HTTPException):
        if tolerate:
            return None
        raise
    try:
        return json.loads(body) if st == 200 else None
    except ValueError:
        return None


def doctor(*args):
    r = subprocess.run([os.path.join(BIN, "dashboard"), "--doctor", *args], capture_output=True, text=True,
                       timeout=30)
    return json.loads(r.stdout.strip().splitlines()[-1])["topology"]


def expected_edges(topo, instances):
    """{(from, to): set of kinds} by ARCHITECTURE.md's table, from the doctor's topology."""
    prefork = topo["mode"] == "prefork"
    names = [a["name"] for a in topo["actors"]]
    loops = [n for n in names if n.startswith("loop.")]
    e = {}

    def add(a, b, kinds):
        e.setdefault((a, b), set()).update(kinds.split())
    for loop in loops:
        i = loop.split(".")[1]
        boss = f"worker.{i}" if prefork else "coordinator"
        add(boss, loop, "go stop")
        add(loop, boss, "ready failed stopped died leaving")
        if "producer" in names:
            add("producer", loop, "frame")
        for p in [n for n in names if n.startswith(f"pool.{i}.")]:
            add(loop, p, "job stop")
            add(p, loop, "result")
            add(p, boss, "ready failed died")
        if not prefork:
            for other in loops:
                if other != loop:
                    add(loop, other, "handoff")
        for inst, placement, process in instances:
            if prefork and placement == "thread" and process != f"worker.{i}":
                continue  # a worker's thread instance: its own loop's alone
            add(loop, inst, "request")
            add(inst, loop, "reply")
    if prefork:
        for w in [n for n in names if n.startswith("worker.")]:
            add("coordinator", w, "go")
            add(w, "coordinator", "ready")
    if "producer" in names:
        add("coordinator", "producer", "go stop")
        add("producer", "coordinator", "ready failed stopped")
    for inst, placement, process in instances:
        if placement != "thread":
            add(inst, inst.split(".")[0], "publish")
        else:
            add(inst, process if prefork else "coordinator", "ready failed")
    return e


def worker_pids(s):
    """{"worker.i": pid} of a Prefork's live workers (their M0__WORKER)."""
    out = {}
    for p in harness.descendants(s.proc.pid):
        w = environ(p).get(b"M0__WORKER")
        if w is not None and alive_worker(p):
            out[f"worker.{int(w)}"] = p
    return out


def alive_worker(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def check_pids(label, g, pids):
    """Every host actor names its process's pid: pids maps a process label
    (host; supervisor, worker.i) to its pid; a thread instance is its
    process's."""
    if not g:
        return
    wrong = [(n["name"], n.get("pid"), pids.get(n["process"])) for n in g["nodes"]
             if n["role"] not in ("app",) and n["process"] in pids and n.get("pid") != pids[n["process"]]]
    F.check(not wrong and pids, f"{label}: each actor names its process's pid (wrong: {wrong[:6]}; pids {pids})")


def check_graph(label, g, topo, process, placement, machine):
    F.check(g is not None, f"{label}: GET /graph answers JSON")
    if not g:
        return
    nodes = {n["name"]: n for n in g["nodes"]}
    insts = [n for n in g["nodes"] if n["role"] == "instance"]
    want = {a["name"] for a in topo["actors"]} | {a["name"] for a in topo["app_actors"]} | {"echo.0"}
    # An instance is its process's: under prefork each worker has its own
    # thread instance echo.0 (named alike, as m0trace names them).
    keys = [(n["process"], n["name"]) if n["role"] == "instance" else n["name"] for n in g["nodes"]]
    F.check(set(nodes) == want and len(set(keys)) == len(keys),
            f"{label}: the nodes are the doctor's actors, its app actors and the live instance echo.0\n"
            f"  got  {sorted(nodes)}\n  want {sorted(want)}")
    prefork = topo["mode"] == "prefork"
    workers = sorted(a["name"] for a in topo["actors"] if a["name"].startswith("worker."))
    each = prefork and placement == "thread"  # every worker's own instance
    F.check(sorted(n["process"] for n in insts) == workers if each else len(insts) == 1,
            f"{label}: the graph lists echo.0 of {'every worker ' + str(workers) if each else 'the host'}, whichever "
            f"answered ({[(n['process'], n['name']) for n in insts]})")
    F.check(g["mode"] == topo["mode"] and g["process"] == process,
            f"{label}: the graph names the mode and who answered ({g['mode']}, {g['process']})")
    for n in g["nodes"]:
        if n["role"] in ("app",):
            continue
        want_proc = ("connected" if n["role"] == "instance" and placement != "thread" else
                     n["process"] if n["role"] == "instance" and each and n["process"] in workers else
                     process if n["role"] == "instance" else
                     "host" if not prefork else
                     "supervisor" if n["role"] in ("coordinator", "producer") else
                     "worker." + n["name"].split(".")[1])
        F.check(n.get("process") == want_proc and n.get("machine") and "thread" in n,
                f"{label}: {n['name']} lives in process {want_proc}, on a thread, on a machine ({n})")
    for loop in [n for n in g["nodes"] if n["role"] == "loop"]:
        F.check(all(isinstance(loop.get(k), int) for k in ("requests", "open", "streams", "handoffs", "queued")),
                f"{label}: {loop['name']} has its figures ({loop})")
    echo = nodes.get("echo", {})
    F.check(echo.get("instances") == len(insts) and echo.get("placement") == placement,
            f"{label}: the echo actor counts its live instances ({len(insts)}), placed {placement} ({echo})")
    F.check(insts and all(i.get("placement") == placement and i.get("machine") == machine for i in insts),
            f"{label}: its instance echo.0 is {placement}, on {machine} ({insts})")
    got = {}
    for e in g["edges"]:
        got.setdefault((e["from"], e["to"]), set()).update(e["kinds"])
    F.check(all(isinstance(e.get("messages"), int) and e["messages"] >= 0 for e in g["edges"]),
            f"{label}: every edge counts its messages ({[e for e in g['edges'] if not isinstance(e.get('messages'), int)][:2]})")
    F.check(all(isinstance(e.get("rate"), (int, float)) and e["rate"] >= 0 for e in g["edges"]),
            f"{label}: every edge has its rate, messages per second ({[e for e in g['edges'] if 'rate' not in e][:2]})")
    go = [e["messages"] for e in g["edges"] if e["to"] == "loop.0" and e["from"] in ("coordinator", "worker.0")]
    F.check(go and go[0] >= 1, f"{label}: the go that opened loop.0's barrier is counted on its edge ({go})")
    want_e = expected_edges(topo, [(i["name"], i["placement"], i["process"] if each else process) for i in insts])
    F.check(got == want_e, f"{label}: the edges are those of the table of kinds for this topology\n"
                           f"  missing {sorted(set(want_e) - set(got))[:8]}\n  extra   {sorted(set(got) - set(want_e))[:8]}"
                           f"\n  kinds differ {[(k, got[k], want_e[k]) for k in got if k in want_e and got[k] != want_e[k]][:4]}")
    return got


def traffic(port, n=20):
    for path in ("/hello", "/echo", "/health"):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        for _ in range(n):
            c.request("GET", path)
            c.getresponse().read()
        c.close()


def traced_pairs(run, port, topo):
    """(from, to, kind) of every message m0trace sees while traffic goes on.
    m0trace names an application actor's instance by number (app.<actor>.<slot>,
    docs/actors.md): the doctor's order of app_actors gives its name."""
    apps = [a["name"] for a in topo["app_actors"]]

    def named(n):
        p = n.split(".")
        return f"{apps[int(p[1])]}.{p[2]}" if p[0] == "app" and len(p) == 3 and int(p[1]) < len(apps) else n
    url = f"ipc://{TMP}/t-{len(os.listdir(TMP))}.sock"
    out, err = harness.log_file(), harness.log_file()
    p = subprocess.Popen([os.path.join(BIN, "m0trace"), "--run-dir", run, url], stdout=out, stderr=err)
    try:
        if not wait_for(lambda: "listening" in harness.read_log(err) or p.poll() is not None, 5):
            return None
        def seen_both():
            # Each process starts to send its records once it has found the
            # tracer, a moment apart under load: the traffic (and the traced
            # request) goes again until the records of both kinds are in.
            traffic(port)
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/echo", headers={"traceparent": f"00-{TRACE_ID}-00f067aa0ba902b7-01"})
            c.getresponse().read()
            c.close()
            return wait_for(lambda: all(k in harness.read_log(out) for k in
                                        ('"kind":"reply"', '"kind":"request"', TRACE_ID)), 2)
        wait_for(seen_both, 10, step=0)
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGINT)
        p.wait(timeout=10)
    recs = [json.loads(l) for l in harness.read_log(out).splitlines() if l.startswith("{")]
    # Not the host's: a tool of this machine (m0trace's own controls, m0pub's
    # frames) comes from external.<pid>, no actor of the topology.
    return {(named(r["from"]), named(r["to"]), r["kind"]) for r in recs
            if r["dir"] != "serve" and not r["from"].startswith("external.")}


TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def streamed(label, port):
    """GET /graph as an EventSource asks (Accept: text/event-stream): the
    host's own stream, a `graph` event at once and about once a second
    after, each a whole graph, later than the one before (bounded reads)."""
    events = []
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sk:
        sk.sendall(b"GET /graph HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
        buf = b""
        deadline = time.monotonic() + 6
        try:
            while len(events) < 3 and time.monotonic() < deadline:
                data = sk.recv(65536)
                if not data:
                    break
                buf += data
                while b"\n\n" in buf:
                    ev, buf = buf.split(b"\n\n", 1)
                    lines = ev.decode().split("\n")
                    if "event: graph" in lines:
                        events.append(json.loads(next(x[6:] for x in lines if x.startswith("data: "))))
        except (OSError, ValueError, StopIteration) as x:
            events.append(str(x))
    head = buf if not events else b""
    ok = len(events) == 3 and all(isinstance(g, dict) and g.get("nodes") and g.get("edges") for g in events)
    F.check(ok and events[0]["t"] < events[1]["t"] < events[2]["t"],
            f"{label}: GET /graph as a stream: three `graph` events within 6 s, each a graph, each later "
            f"({[g['t'] if isinstance(g, dict) else g for g in events]} {head[:200]!r})")


def recent_records(label, port):
    """After m0trace saw traffic (tracing on, then off): /graph?records=NAME
    is that actor's last messages, the very records m0trace printed: echo's,
    and those of the loop that asked echo the traced request. Which loop
    that is, accept sharing decides (a loop may take every connection of
    the run: ties stay with the winner); its name is read from echo's
    record of that request, not assumed. Every other loop's records, if
    any, are each from or to it."""
    def records(who):
        st, body = get(port, f"/graph?records={who}")
        d = json.loads(body) if st == 200 else {}
        recs = d.get("records", [])
        mine = all(r["from"] == who or r["to"] == who or r["from"].startswith(who + ".") or r["to"].startswith(who + ".")
                   for r in recs)
        return st, d, recs, mine

    def traced(recs):
        return [r for r in recs if r["trace"] == TRACE_ID and r["kind"] in ("request", "reply")]

    # m0trace printed the traced request's records; each is put in the ring
    # right after it is batched for m0trace (runtime/trace.c): bounded wait.
    wait_for(lambda: traced(records("echo")[2]), 5)
    st, d, recs, mine = records("echo")
    F.check(st == 200 and d.get("actor") == "echo" and recs and mine and len(recs) <= 40,
            f"{label}: /graph?records=echo: its recent trace records, each from or to it, 40 at most "
            f"({st}, {len(recs)}: {recs[:2]})")
    mark = traced(recs)
    F.check(mark, f"{label}: among echo's, the traced request's messages by its id {TRACE_ID} "
                  f"({[(r['kind'], r['trace']) for r in recs][-6:]})")
    asker = next((r["from"] if r["kind"] == "request" else r["to"] for r in mark), None)
    print(f"{label}: the traced request to echo came from {asker}", flush=True)
    loops = [n["name"] for n in (graph(port) or {"nodes": []})["nodes"] if n["role"] == "loop"]
    F.check(asker in loops, f"{label}: the traced request came from a loop ({asker}; loops {loops})")
    for who in loops:
        st, d, recs, mine = records(who)
        if who == asker:
            F.check(st == 200 and d.get("actor") == who and recs and mine and len(recs) <= 40 and traced(recs),
                    f"{label}: /graph?records={who} (the loop that asked echo): its recent trace records, each "
                    f"from or to it, 40 at most, the traced request's among them ({st}, {len(recs)}: {recs[:2]})")
        else:
            F.check(st == 200 and d.get("actor") == who and mine and len(recs) <= 40,
                    f"{label}: /graph?records={who}: each from or to it, 40 at most ({st}, {len(recs)}: {recs[:2]})")
    st, body = get(port, "/graph?records=nosuch")
    F.check(st == 200 and json.loads(body) == {"actor": "nosuch", "records": []},
            f"{label}: /graph?records=nosuch: none ({st} {body[:120]})")


def messages(g, frm, to):
    """The messages counted on the edges from names matching frm to names matching to."""
    return sum(e["messages"] for e in g["edges"] if e["from"].startswith(frm) and e["to"].startswith(to))


def counted_per_message(label, port, n=20, instances=1):
    """n GET /echo: the loops' request messages to echo.0 rise by 1..n (a batch
    is one message), and its reply messages by as many. instances: how many
    echo instances the graph lists once every worker's are on the page (a
    graph that lists fewer leaves their edges out: its sums would be low)."""
    def whole(g):
        return g and sum(x["role"] == "instance" for x in g["nodes"]) >= instances

    # from a graph whose replies are all counted (one counts once handed to
    # its loop, which may have answered its client first)
    g0 = wait_for(lambda: (lambda g: g if whole(g) and messages(g, "loop.", "echo.0") ==
                           messages(g, "echo.0", "loop.") else None)(graph(port)), 10)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    for _ in range(n):
        c.request("GET", "/echo")
        c.getresponse().read()
    c.close()
    if not g0:
        F.check(False, f"{label}: the graph answers")
        return
    seen = {}

    def counted():
        # A reply is counted once handed to its loop, which may answer the
        # client first: the count follows within moments (bounded here).
        g1 = graph(port)
        if whole(g1):
            seen["req"] = messages(g1, "loop.", "echo.0") - messages(g0, "loop.", "echo.0")
            seen["rep"] = messages(g1, "echo.0", "loop.") - messages(g0, "echo.0", "loop.")
        return whole(g1) and 1 <= seen["req"] <= n and seen["rep"] == seen["req"]
    wait_for(counted, 5)
    req, rep = seen.get("req"), seen.get("rep")
    echo0 = next((n for n in g0["nodes"] if n["name"] == "echo"), {})
    echo1 = wait_for(lambda: (lambda e: e if e.get("requests", 0) >= echo0.get("requests", 0) + n else None)(
        next((x for x in (graph(port) or {"nodes": []})["nodes"] if x["name"] == "echo"), {})), 5)
    F.check(echo1 and isinstance(echo0.get("requests"), int) and isinstance(echo0.get("failed"), int) and echo1.get("failed") == echo0.get("failed"),
            f"{label}: the echo actor's requests rise by the {n} sent, none of them failed ({echo0} -> {echo1})")
    F.check(req is not None and 1 <= req <= n and rep == req,
            f"{label}: {n} GET /echo: loop -> echo.0 counts 1..{n} request messages ({req}), "
            f"echo.0 -> loop as many replies ({rep})")


def rates(label, port):
    """Each edge's rate (messages per second over the last window, the
    whole host's): under load (GET /echo in a loop, from a thread) an edge
    to an echo instance has a rate above 0; once the load stops, every edge
    to or from one comes back to 0 (bounded waits)."""
    stop = threading.Event()

    def load():
        while not stop.is_set():
            try:
                get(port, "/echo", timeout=2)
            except (OSError, http.client.HTTPException):
                pass
    t = threading.Thread(target=load, daemon=True)
    t.start()

    def echo_edges(g):
        return [e for e in g["edges"] if e["to"].startswith("echo.") or e["from"].startswith("echo.")] if g else []
    try:
        busy = wait_for(lambda: (lambda es: es if any(e["rate"] > 0 and e["to"].startswith("echo.") for e in es)
                                 else None)(echo_edges(graph(port, tolerate=True))), 10)
    finally:
        stop.set()
        t.join(timeout=10)
    F.check(busy, f"{label}: under load an edge to echo's instance carries a rate above 0 "
                  f"({[(e['from'], e['to'], e['rate']) for e in busy or []]})")
    idle = wait_for(lambda: (lambda es: es if es and all(e["rate"] == 0 for e in es) else None)(
        echo_edges(graph(port, tolerate=True))), 10)
    F.check(idle, f"{label}: the load stopped, every edge of echo's instances comes back to rate 0 "
                  f"({[(e['from'], e['to'], e['rate']) for e in echo_edges(graph(port, tolerate=True))]})")


def true_to_trace(label, edges, pairs):
    F.check(pairs, f"{label}: m0trace saw messages ({pairs})")
    if not pairs:
        return
    off = sorted(p for p in pairs if p[2] not in edges.get((p[0], p[1]), set()))
    F.check(not off, f"{label}: every message m0trace saw is on an edge of the graph, of a kind it names "
                     f"({len(pairs)} seen; off the graph: {off[:8]})")
    kinds = {k for _, _, k in pairs}
    F.check({"request", "reply"} <= kinds, f"{label}: the actor's messages were among them ({sorted(kinds)})")


def prefork():
    label = "dashboard --workers 2 --blocking-threads 2"
    run = os.path.join(TMP, "run-prefork")
    os.mkdir(run, 0o700)
    args = ["--workers", "2", "--blocking-threads", "2"]
    topo = doctor(*args, "--run-dir", run)
    with Prefork("dashboard", "--port", "0", "--run-dir", run, *args) as s:
        st, _ = get(s.port, "/echo")
        F.check(st == 200, f"{label}: GET /echo -> 200 ({st})")
        # Another worker's thread instances are on the page from its loop's
        # first sweep (at most a second after it began).
        g = wait_for(lambda: (lambda x: x if x and sum(n["role"] == "instance" for n in x["nodes"]) == 2 else None)(
            graph(s.port)), 10) or graph(s.port)  # (one that lists fewer fails below, saying so)
        proc = g["process"] if g else "worker.0"
        F.check(proc in ("worker.0", "worker.1"), f"{label}: a worker answered ({proc})")
        edges = check_graph(label, g, topo, proc, "thread", socket.gethostname())
        check_pids(label, g, {"supervisor": s.proc.pid, **worker_pids(s)})
        F.check(g and all(n.get("respawns") == 0 for n in g["nodes"] if n["role"] == "worker"),
                f"{label}: each worker counts its respawns, none yet ({g and [n for n in g['nodes'] if n['role'] == 'worker']})")
        before = sum(n.get("requests", 0) for n in (g or {"nodes": []})["nodes"])
        traffic(s.port, 10)
        g2 = wait_for(lambda: (lambda x: x if x and sum(n.get("requests", 0) for n in x["nodes"]) >= before + 30
                               else None)(graph(s.port)), 5)
        F.check(g2, f"{label}: the loops' requests rise by the 30 sent ({before} -> "
                    f"{sum(n.get('requests', 0) for n in (graph(s.port) or {'nodes': []})['nodes'])})")
        counted_per_message(label, s.port, instances=2)
        rates(label, s.port)
        if edges:
            # Under prefork each worker's echo.0 is its own: the trace's
            # instance records are on the graph's edges of its loop.
            true_to_trace(label, edges, traced_pairs(run, s.port, topo))
        waiting(label, s)
        trace_example(label, run, s.port)
        respawned(label, s)
        F.check(s.stop() == 0, f"{label}: SIGTERM -> exit 0")


def trace_example(label, run, port):
    """docs/apps.md's example, m0trace --run-dir DIR --actor echo URL, under
    prefork: the supervisor takes the control too (it knows echo's name), the
    records name echo's instance as the observer does (echo.0, not app.0.0),
    and SIGINT ends it with 0 (not 78: a control refused)."""
    url = f"ipc://{TMP}/example.sock"
    out, err = harness.log_file(), harness.log_file()
    p = subprocess.Popen([os.path.join(BIN, "m0trace"), "--run-dir", run, "--actor", "echo", url], stdout=out,
                         stderr=err)
    try:
        wait_for(lambda: "listening" in harness.read_log(err) or p.poll() is not None, 5)

        def seen():
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/echo", headers={"traceparent": f"00-{TRACE_ID}-00f067aa0ba902b7-01"})
            c.getresponse().read()
            c.close()
            return p.poll() is not None or wait_for(lambda: '"to":"echo.0"' in harness.read_log(out), 1)
        wait_for(seen, 10, step=0)
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGINT)
        rc = p.wait(timeout=10)
    recs = [json.loads(l) for l in harness.read_log(out).splitlines() if l.startswith("{")]
    names = {r["from"] for r in recs} | {r["to"] for r in recs}
    F.check(rc == 0 and recs and "echo.0" in names and not any(n.startswith("app.") for n in names),
            f"{label}: m0trace --run-dir DIR --actor echo URL (docs/apps.md) exits 0 and names echo.0 as the "
            f"observer does (exit {rc}, names {sorted(names)[:8]}, stderr {harness.read_log(err)[-300:]!r})")


def trace_unnamed():
    """m0trace --actor echo URL without --run-dir: it cannot know the
    application's names (its records say app.<actor>.<slot>) and says so on
    stderr, with what to give instead; it runs on and exits 0."""
    r = subprocess.run([os.path.join(BIN, "m0trace"), "--actor", "echo", "--seconds", "1",
                        f"ipc://{TMP}/unnamed.sock"], capture_output=True, text=True, timeout=20)
    F.check(r.returncode == 0 and "--actor echo: without --run-dir" in r.stderr and "app.<actor>" in r.stderr,
            f"m0trace --actor echo URL (no --run-dir): says its records name echo's instances app.<actor>.<slot>, "
            f"exit 0 (exit {r.returncode}, stderr {r.stderr[-300:]!r})")


def respawned(label, s):
    """Worker 1 killed: the supervisor starts another; the graph (either
    worker's) names worker.1 with its new pid and 1 respawn."""
    old = worker_pids(s).get("worker.1")
    F.check(old, f"{label}: worker 1's pid is found")
    if not old:
        return
    os.kill(old, signal.SIGKILL)

    def again():
        new = worker_pids(s).get("worker.1")
        g = graph(s.port, timeout=1.0, tolerate=True)
        w1 = next((n for n in (g or {"nodes": []})["nodes"] if n["name"] == "worker.1"), None)
        return w1 if new and new != old and w1 and w1.get("pid") == new and w1.get("respawns") == 1 else None
    w1 = wait_for(again, 10)
    F.check(w1, f"{label}: worker 1 killed and respawned: worker.1 names its new pid and 1 respawn "
                f"(old pid {old}, now {worker_pids(s)}, graph {w1})")


def waiting(label, s):
    """What waits for a receiver: worker 0 SIGSTOPped, the producer's frames
    (twice a second) pile up for loop.0, on its edge and on its node, in the
    graph worker 1 answers; SIGCONT, and loop.0 takes them: 0 again."""
    w0 = next((p for p in harness.descendants(s.proc.pid) if environ(p).get(b"M0__WORKER") == b"0"), None)
    F.check(w0, f"{label}: worker 0's pid is found ({harness.descendants(s.proc.pid)})")
    if not w0:
        return

    def piled():
        # Accept sharing may hand this connection to the stopped worker 0
        # (it looks idle: a worker is skipped only when stuck in a loop pass,
        # ARCHITECTURE.md's Accept sharing), where it waits for SIGCONT: given
        # up after 1 s and asked again on a new one, which worker 1 answers
        # (worker 0, holding the first, is the busier sibling now).
        g = graph(s.port, timeout=1.0, tolerate=True)
        if not g:
            return None
        node = next((n.get("waiting") for n in g["nodes"] if n["name"] == "loop.0"), None)
        edge = next((e.get("waiting") for e in g["edges"] if (e["from"], e["to"]) == ("producer", "loop.0")), None)
        into = sum(e.get("waiting", 0) for e in g["edges"] if e["to"] == "loop.0")
        return (node, edge, into) if node and edge and node >= 3 and edge >= 3 and node == into else None
    os.kill(w0, signal.SIGSTOP)
    try:
        got = wait_for(piled, 10)
    finally:
        os.kill(w0, signal.SIGCONT)
    F.check(got, f"{label}: worker 0 stopped: the producer's frames wait for loop.0 (3 or more on its edge and on "
                 f"its node, the node's the sum of its edges in: {got})")
    back = wait_for(lambda: (lambda g: g if g and all(n.get("waiting", 0) == 0 for n in g["nodes"]
                                                      if n["name"] == "loop.0") else None)(graph(s.port)), 10)
    F.check(back, f"{label}: worker 0 continued: loop.0 takes them, 0 waiting again")


def external(mode, machine, port):
    """An external echo_actor over tcp, under --threads 2 (it dials the host)
    or --workers 2 (it dials the supervisor, which relays it to both
    workers: service/relay.h); machine is where the graph says it is."""
    label = f"dashboard {mode} 2 --blocking-threads 2, echo external (echo_actor over tcp)"
    run = os.path.join(TMP, "run-external" + mode)
    os.makedirs(run, 0o700, exist_ok=True)
    path = os.path.join(run, "topo.json")
    with open(path, "w") as f:
        json.dump({"app_actors": [{"name": "echo", "placement": "external", "url": f"tcp://127.0.0.1:{port}",
                                   "trusted_network": True}]}, f)
    args = [mode, "2", "--blocking-threads", "2", "--topology", path]
    topo = doctor(*args, "--run-dir", run)
    with (Prefork if mode == "--workers" else Server)("dashboard", "--port", "0", "--run-dir", run, *args) as s:
        a = subprocess.Popen([os.path.join(BIN, "echo_actor"), f"tcp://127.0.0.1:{port}", "0"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            g = wait_for(lambda: (lambda x: x if x and any(n["role"] == "instance" for n in x["nodes"]) else None)(
                graph(s.port)), 10)
            edges = check_graph(label, g, topo, g["process"] if mode == "--workers" and g else "host", "external",
                                machine)
            check_pids(label, g, {"supervisor": s.proc.pid, **worker_pids(s)} if mode == "--workers" else
                       {"host": s.proc.pid})
            insts = [n for n in (g or {"nodes": []})["nodes"] if n["role"] == "instance"]
            F.check(insts and all("pid" not in n for n in insts),
                    f"{label}: an instance outside the host over tcp has no pid the host can know ({insts})")
            st, _ = get(s.port, "/echo")
            F.check(st == 200, f"{label}: GET /echo -> 200, from the outside instance ({st})")
            outside = [n for n in (g or {"nodes": []})["nodes"] if n["role"] == "instance"]
            F.check(outside and all("waiting" not in n for n in outside) and
                    all("waiting" not in e for e in g["edges"] if e["to"].startswith("echo.")) and
                    all("waiting" in n for n in g["nodes"] if n["role"] in ("loop", "coordinator")),
                    f"{label}: no figure of what waits for an instance outside (its receipts are not seen), "
                    f"one for the host's actors ({outside})")
            counted_per_message(label, s.port)
            if edges:
                true_to_trace(label, edges, traced_pairs(run, s.port, topo))
                recent_records(label, s.port)
            streamed(label, s.port)
        finally:
            a.terminate()
            a.wait(timeout=10)
        F.check(s.stop() == 0, f"{label}: SIGTERM -> exit 0")


def spawned():
    """echo placed process, two instances, under --threads 2: the host
    spawns them; each instance is placed process (not connected) and names
    its pid, a child of the host's; the host's actors name the host's."""
    label = "dashboard --threads 2, echo placed process (2 instances)"
    run = os.path.join(TMP, "run-spawned")
    os.mkdir(run, 0o700)
    path = os.path.join(run, "topo.json")
    with open(path, "w") as f:
        json.dump({"app_actors": [{"name": "echo", "placement": "process", "instances": 2}]}, f)
    with Server("dashboard", "--port", "0", "--run-dir", run, "--threads", "2", "--topology", path) as s:
        g = wait_for(lambda: (lambda x: x if x and sum(n["role"] == "instance" for n in x["nodes"]) == 2 else None)(
            graph(s.port)), 10)
        insts = [n for n in (g or {"nodes": []})["nodes"] if n["role"] == "instance"]
        kids = set(harness.children(s.proc.pid))
        pids = {n.get("pid") for n in insts}
        F.check(len(insts) == 2 and all(n.get("placement") == "process" for n in insts) and len(pids) == 2 and
                pids <= kids, f"{label}: echo.0 and echo.1 are placed process, each with its own pid, the host's "
                              f"children ({insts}; children {kids})")
        echo = next((n for n in (g or {"nodes": []})["nodes"] if n["name"] == "echo"), {})
        F.check(echo.get("placement") == "process", f"{label}: the echo actor is placed process ({echo})")
        check_pids(label, g, {"host": s.proc.pid})
        F.check(s.stop() == 0, f"{label}: SIGTERM -> exit 0")


def supervised():
    """echo placed process (2 instances) under a topology file's supervisor,
    with --workers 2: the graph's supervision tree is the file's (the
    supervisor process, its pid, the supervisor with its strategy, budget
    and on_fail, echo under it with its instances), the instances name their
    own pids, the supervisor's children (the supervisor spawned them: any
    worker's graph says them); one killed: one_for_all starts both again,
    their new pids and the supervisor's restarted count say so."""
    label = "dashboard --workers 2, echo placed process under supervisor core (one_for_all)"
    run = os.path.join(TMP, "run-supervised")
    os.mkdir(run, 0o700)
    path = os.path.join(run, "topo.json")
    sup = {"name": "core", "strategy": "one_for_all", "intensity": 4, "period_ms": 60000, "children": ["echo"],
           "on_fail": "serve_on"}
    with open(path, "w") as f:
        json.dump({"app_actors": [{"name": "echo", "placement": "process", "instances": 2}], "supervisors": [sup]}, f)
    with Prefork("dashboard", "--port", "0", "--run-dir", run, "--workers", "2", "--topology", path) as s:
        def both():
            g = graph(s.port, tolerate=True)
            insts = [n for n in (g or {"nodes": []})["nodes"] if n["role"] == "instance"]
            return g if len(insts) == 2 and all(n.get("pid") for n in insts) else None
        g = wait_for(both, 10)
        tree = (g or {}).get("supervision")
        want = {"name": "supervisor", "pid": s.proc.pid, "children": [
            {"supervisor": "core", "strategy": "one_for_all", "intensity": 4, "period_ms": 60000,
             "on_fail": "serve_on", "restarted": 0,
             "children": [{"actor": "echo", "placement": "process", "instances": 2, "live": ["echo.0", "echo.1"],
                           "restarts": 0}]}]}
        F.check(tree == want, f"{label}: the graph's supervision tree is the topology file's\n  got  {tree}\n"
                              f"  want {want}")
        insts = [n for n in (g or {"nodes": []})["nodes"] if n["role"] == "instance"]
        kids = set(harness.children(s.proc.pid))
        pids = {n.get("pid") for n in insts}
        F.check(len(pids) == 2 and pids <= kids, f"{label}: under --workers each process instance names its own "
                                                 f"pid, a child of the supervisor ({insts}; children {kids})")
        if len(pids) != 2 or not pids <= kids:
            return
        os.kill(min(pids), signal.SIGKILL)

        def again():
            g2 = both()
            t = (g2 or {}).get("supervision") or {"children": [{}]}
            now = {n.get("pid") for n in g2["nodes"] if n["role"] == "instance"} if g2 else set()
            return (g2, t) if t["children"][0].get("restarted", 0) >= 2 and not now & pids else None
        got = wait_for(again, 15)
        F.check(got, f"{label}: echo.0's process killed: one_for_all starts both again, with new pids, and the "
                     f"supervisor says 2 restarted ({got and got[1]})")
        F.check(s.stop() == 0, f"{label}: SIGTERM -> exit 0")


def nested_tree():
    """host_check --workers 2 with supervisors nested, thread and process
    children (docs/topology.md, supervisors): the graph's tree nests them as
    the file does, a top supervisor with its on_fail, the inner one's
    "parent", each actor with its placement, instances and the live ones;
    less what is live, it is the doctor's `supervision`."""
    label = "host_check --workers 2, supervisor top over inner (echo, relay: thread) and silent (process)"
    run = os.path.join(TMP, "run-nested")
    os.mkdir(run, 0o700)
    path = os.path.join(run, "topo.json")
    with open(path, "w") as f:
        json.dump({"app_actors": [{"name": "echo", "placement": "thread"}, {"name": "relay", "placement": "thread"},
                                  {"name": "silent", "placement": "process"}],
                   "supervisors": [{"name": "top", "strategy": "one_for_all", "intensity": 1, "period_ms": 60000,
                                    "children": ["inner", "silent"]},
                                   {"name": "inner", "strategy": "rest_for_one", "intensity": 2, "period_ms": 1000,
                                    "children": ["echo", "relay"]}]}, f)
    with Prefork("host_check", "--port", "0", "--run-dir", run, "--workers", "2", "--topology", path) as s:
        def up():
            t = (graph(s.port, tolerate=True) or {}).get("supervision")
            kids = t and t["children"] and t["children"][0]["children"]
            return t if kids and len(kids) == 2 and kids[1].get("live") == ["silent.0"] else None
        tree = wait_for(up, 15) or (graph(s.port, tolerate=True) or {}).get("supervision")
        actor = lambda name, placement: {"actor": name, "placement": placement, "instances": 1,
                                         "live": [f"{name}.0"], "restarts": 0}
        want = {"name": "supervisor", "pid": s.proc.pid, "children": [
            {"supervisor": "top", "strategy": "one_for_all", "intensity": 1, "period_ms": 60000, "on_fail": "exit",
             "restarted": 0, "children": [
                 {"supervisor": "inner", "strategy": "rest_for_one", "intensity": 2, "period_ms": 1000,
                  "on_fail": "parent", "restarted": 0,
                  "children": [actor("echo", "thread"), actor("relay", "thread")]},
                 actor("silent", "process")]}]}
        F.check(tree == want, f"{label}: the graph's tree nests the file's supervisors\n  got  {tree}\n  want {want}")
        # The doctor's tree is the graph's without what is live now.
        r = subprocess.run([os.path.join(BIN, "host_check"), "--doctor", "--workers", "2", "--topology", path],
                           capture_output=True, text=True, timeout=30)
        doc = json.loads(r.stdout.strip().splitlines()[-1]).get("supervision") if r.stdout.strip() else None

        def static(x):
            if isinstance(x, list):
                return [static(v) for v in x]
            return {k: static(v) for k, v in x.items() if k not in ("live", "restarts", "restarted")} \
                if isinstance(x, dict) else x
        F.check(doc and static((tree or {}).get("children")) == doc,
                f"{label}: the doctor's supervision is the graph's tree less what is live\n  doctor {doc}\n"
                f"  graph  {static((tree or {}).get('children'))}")
        F.check(s.stop() == 0, f"{label}: SIGTERM -> exit 0")


def nats_lanes():
    """echo placed nats under --workers 2 (nats-server from Debian, its own
    port): the actor says placement nats, its server and subject; what the
    loops send to are its lanes (lane true, placement nats, no pid: its
    instances are anywhere in the fleet), each worker's own."""
    label = "dashboard --workers 2, echo placed nats"
    err = harness.log_file()
    nats = subprocess.Popen(["nats-server", "-a", "127.0.0.1", "-p", "-1"], stdout=subprocess.DEVNULL, stderr=err)
    try:
        rx = re.compile(r"Listening for client connections on 127\.0\.0\.1:(\d+)")
        F.check(wait_for(lambda: rx.search(harness.read_log(err)) and "Server is ready" in harness.read_log(err), 15),
                f"{label}: nats-server starts ({harness.read_log(err)[-300:]})")
        m = rx.search(harness.read_log(err))
        if not m:
            return
        url = f"nats://127.0.0.1:{m.group(1)}"
        run = os.path.join(TMP, "run-nats")
        os.mkdir(run, 0o700)
        path = os.path.join(run, "topo.json")
        with open(path, "w") as f:
            json.dump({"app_actors": [{"name": "echo", "placement": "nats", "url": url}]}, f)
        with Prefork("dashboard", "--port", "0", "--run-dir", run, "--workers", "2", "--topology", path) as s:
            g = wait_for(lambda: (lambda x: x if x and {n["process"] for n in x["nodes"] if n["role"] == "instance"}
                                  == {"worker.0", "worker.1"} else None)(graph(s.port, tolerate=True)), 10) or \
                graph(s.port, tolerate=True) or {"nodes": []}
            echo = next((n for n in g["nodes"] if n["name"] == "echo"), {})
            lanes = [n for n in g["nodes"] if n["role"] == "instance"]
            F.check(echo.get("placement") == "nats" and echo.get("url") == url and
                    echo.get("subject") == "m0.actor.echo",
                    f"{label}: the actor is placed nats, with its server and subject ({echo})")
            F.check(lanes and all(n.get("lane") is True and n["placement"] == "nats" and "pid" not in n
                                  for n in lanes) and {n["process"] for n in lanes} == {"worker.0", "worker.1"},
                    f"{label}: its lanes are each worker's, placed nats, no pid ({lanes[:3]})")
            F.check(s.stop() == 0, f"{label}: SIGTERM -> exit 0")
    finally:
        nats.kill()
        nats.wait(timeout=10)


if __name__ == "__main__":
    try:
        trace_unnamed()
        nats_lanes()
        nested_tree()
        supervised()
        spawned()
        prefork()
        with_free_port(lambda port: external("--threads", "127.0.0.1", port))
        # A worker sees the relay's leg; the relay's introduction says where
        # the instance dialed from (service/relay.h).
        with_free_port(lambda port: external("--workers", "127.0.0.1", port))
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    F.done()
