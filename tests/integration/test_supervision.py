"""Supervision as data (docs/topology.md, supervisors): host_check's echo and
silent actors placed process, two children of one supervisor "core" in that
order; the test SIGKILLs an instance (found among the host's children by its
M0__ACTOR) and watches, by pids and stderr lines, what the strategy does.

Proves:
- one_for_one: echo killed, echo comes back with a new pid, silent keeps its
  own, and /actor/echo answers 200 from the new one;
- one_for_all: silent killed, echo is stopped and started again with it,
  and a monitor of echo (m0_monitor) gets its exit note, restarted true;
- rest_for_one: silent (the last child) killed, echo keeps its pid; echo
  (the first) killed, silent is started again with it;
- past the budget, on_fail left out ("exit"): the host names the supervisor
  and its budget on stderr, drains and exits 1, leaving no instance behind;
- past the budget with "serve_on": its children are stopped and stay down
  (/actor/echo 503), the host serves on (/health 200);
- under --workers 2 (the supervisor process spawns them): one_for_all, then
  past the budget, exit 1;
- the doctor prints the supervisors, and its topology object read back
  prints itself;
- a file whose supervisor names an external actor is refused by the
  doctor, 78, one line naming the key and the fix (thread children, nested
  supervisors: test_supervision_tree.py).
"""
import json
import os
import signal
import tempfile
import threading

from harness import Failures, sanitizer_report, Prefork, Server, actor_pids, alive, get, reap, run, wait_for

F = Failures()
TMP = tempfile.mkdtemp(prefix="m0-supervision-")
SEEN = set()
ACTORS = [{"name": "echo", "placement": "process"}, {"name": "silent", "placement": "process"},
          {"name": "relay", "placement": "thread"}]


def topology(sup):
    fd, path = tempfile.mkstemp(prefix="topo-", suffix=".json", dir=TMP)
    with os.fdopen(fd, "w") as f:
        json.dump({"app_actors": ACTORS, "supervisors": [dict({"name": "core", "children": ["echo", "silent"]}, **sup)]},
                  f)
    return path


def pids(host):
    """{actor: pid} of the host's live process instances."""
    return actor_pids(host, SEEN)


def both(host):
    k = pids(host)
    return k if len(k) == 2 else None


def start(label, sup, args=(), cls=Server):
    s = cls("host_check", "--port", "0", "--topology", topology(sup), *args)
    s.start()
    k = wait_for(lambda: both(s.proc.pid), 15)
    F.check(k, f"{label}: echo and silent spawned ({pids(s.proc.pid)})\n{s.stderr()}")
    return s, k or {}


def stopped(label, s, rc=0, sig=signal.SIGTERM):
    """The host ends with rc (stopped by sig, or by itself when sig is None)
    and no sanitizer report on its stderr."""
    if sig:
        s.signal(sig)
    got = s.wait(30)
    err = s.stderr()
    F.check(got == rc, f"{label}: the host exits {rc} ({got})\n{err}")
    F.check(not sanitizer_report(err), f"{label}: no sanitizer report\n{sanitizer_report(err)}")
    return err


def after_kill(label, s, before, victim, lines):
    """SIGKILLs victim's instance; waits until both actors run and the
    supervisor said `lines` more restarts than before; the new {actor: pid}."""
    said = s.stderr().count("started again")
    os.kill(before[victim], signal.SIGKILL)
    now = wait_for(lambda: (lambda k: k if k and k[victim] != before[victim] and
                            s.stderr().count("started again") >= said + lines else None)(both(s.proc.pid)), 20)
    F.check(now, f"{label}: {victim} started again ({pids(s.proc.pid)})\n{s.stderr()}")
    return now or {}


def strategies():
    label = "one_for_one"
    s, k = start(label, {"strategy": "one_for_one"})
    with s:
        if k:
            n = after_kill(label, s, k, "echo", 1)
            F.check(n.get("silent") == k["silent"], f"{label}: silent kept its pid ({k} -> {n})\n{s.stderr()}")
            st = wait_for(lambda: (lambda r: r if r[0] == 200 else None)(get(s.port, "/actor/echo")), 10)
            F.check(st, f"{label}: /actor/echo answers from the new instance ({get(s.port, '/actor/echo')})")
        stopped(label, s)
    label = "one_for_all"
    s, k = start(label, {"strategy": "one_for_all"})
    with s:
        if k:
            # A monitor of echo (host_check's /msg/box, m0_monitor) hears of
            # the sibling taken down: its down, exited (restarted) and up.
            box = {}
            t = threading.Thread(target=lambda: box.update(r=get(s.port, "/msg/box?name=w&n=3&ms=15000&watch=echo",
                                                                   timeout=30)))
            t.start()
            F.check(wait_for(lambda: "host_check: w watches echo" in s.stderr(), 15), f"{label}: the monitor is set")
            n = after_kill(label, s, k, "silent", 2)
            t.join(30)
            notes = [g["data"] for g in json.loads(box["r"][1])["got"]] if box.get("r", (0,))[0] == 200 else []
            F.check(any(d.get("event") == "exited" and d.get("pid") == k["echo"] and d.get("restarted") is True
                        for d in notes), f"{label}: echo's monitor got its exit, restarted ({box.get('r')})")
            F.check(n.get("echo") and n["echo"] != k["echo"], f"{label}: echo restarted with silent ({k} -> {n})")
            F.check("actor echo instance 0 stopped with it (one_for_all)" in s.stderr(),
                    f"{label}: the line names echo taken down\n{s.stderr()}")
        stopped(label, s)
    label = "rest_for_one"
    s, k = start(label, {"strategy": "rest_for_one"})
    with s:
        if k:
            n = after_kill(label, s, k, "silent", 1)
            F.check(n.get("echo") == k["echo"], f"{label}: silent (last) killed, echo kept its pid ({k} -> {n})")
            m = after_kill(label, s, n, "echo", 2) if n else {}
            F.check(m.get("silent") and m["silent"] != n["silent"],
                    f"{label}: echo (first) killed, silent after it restarted too ({n} -> {m})\n{s.stderr()}")
        stopped(label, s)


def budget_exit(label, args=(), cls=Server):
    s, k = start(label, {"strategy": "one_for_all", "intensity": 1, "period_ms": 60000}, args, cls)
    with s:
        if not k:
            return
        n = after_kill(label, s, k, "echo", 2)
        F.check(n.get("silent") and n["silent"] != k["silent"], f"{label}: one_for_all restarted silent ({k} -> {n})")
        if n:
            os.kill(n["echo"], signal.SIGKILL)
        err = stopped(f"{label}: past its budget", s, 1, None)
        F.check("m0: supervisor core: 2 restarts within 60000 ms, past its budget of 1; the host stops" in err,
                f"{label}: the line names the supervisor and its budget\n{err}")
        F.check(wait_for(lambda: not any(alive(p) for p in SEEN), 10), f"{label}: no instance outlives the host")


def serve_on():
    label = "serve_on"
    s, k = start(label, {"intensity": 0, "on_fail": "serve_on"})
    with s:
        if not k:
            return
        os.kill(k["echo"], signal.SIGKILL)
        F.check(wait_for(lambda: "its children stay down (on_fail serve_on)" in s.stderr(), 15),
                f"{label}: the supervisor gives up, said\n{s.stderr()}")
        F.check(wait_for(lambda: not alive(k["silent"]) and not pids(s.proc.pid), 15),
                f"{label}: silent stopped too, nothing started again ({pids(s.proc.pid)})\n{s.stderr()}")
        st = wait_for(lambda: (lambda r: r if r[0] == 503 else None)(get(s.port, "/actor/echo")), 10)
        F.check(st, f"{label}: /actor/echo answers 503 ({get(s.port, '/actor/echo')})")
        F.check(get(s.port, "/health")[0] == 200 and s.proc.poll() is None, f"{label}: the host serves on")
        stopped(label, s)


def doctor():
    """The doctor prints the supervisors, defaults filled in, and its
    topology object read back prints itself."""
    rc, out, err = run("host_check", "--port", "0", "--topology", topology({"strategy": "rest_for_one"}), "--doctor")
    topo = json.loads(out)["topology"] if rc == 0 else {}
    want = [{"name": "core", "strategy": "rest_for_one", "intensity": 5, "period_ms": 10000,
             "children": ["echo", "silent"], "on_fail": "exit"}]
    F.check(topo.get("supervisors") == want, f"the doctor prints the supervisor ({rc}, {topo.get('supervisors')})\n{err}")
    path = os.path.join(TMP, "round.json")
    with open(path, "w") as f:
        json.dump(topo, f)
    rc2, out2, err2 = run("host_check", "--port", "0", "--topology", path, "--doctor")
    F.check(rc2 == 0 and json.loads(out2)["topology"] == topo, f"the round trip prints itself ({rc2})\n{err2}")


def refused():
    path = os.path.join(TMP, "bad.json")
    with open(path, "w") as f:
        json.dump({"app_actors": ACTORS + [{"name": "ext", "placement": "external"}],
                   "supervisors": [{"name": "core", "children": ["echo", "ext"]}]}, f)
    rc, out, err = run("host_check", "--port", "0", "--topology", path, "--doctor")
    bad = [c["detail"] for c in json.loads(out)["checks"] if not c["ok"]] if out.startswith("{") else []
    F.check(rc == 78 and len(bad) == 1 and 'supervisors[0].children[1] "ext" is placed external: a supervisor '
            'restarts only what the host runs (place it "process" or "thread"' in bad[0],
            f"an external actor as a child is refused, 78, one line naming the key and the fix ({rc}, {bad})\n{err}")


try:
    strategies()
    budget_exit("budget, threads")
    budget_exit("budget, --workers 2", ("--workers", "2"), Prefork)
    serve_on()
    doctor()
    refused()
finally:
    reap(SEEN)
F.done()
