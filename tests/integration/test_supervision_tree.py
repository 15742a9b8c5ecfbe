"""Thread instances restarted, m0_actor_exit, and supervisors in a tree
(docs/topology.md, supervisors; docs/actors.md, Ending an instance).
host_check's echo ends its instance when a request says `x-exit: REASON`
(m0_actor_exit, the request unanswered).

Proves:
- a thread actor's instance that exits is made again (a fresh make, its
  old state given to free) and answers; the request that ended it got 502;
  a monitor (host_check's /msg/box, m0_monitor) hears down with the reason,
  exited (restarted) and up; past its `restart` budget it stays down (503)
  and the host serves on; a make that refuses at a restart counts as one
  more end;
- a process instance's m0_actor_exit ends its process (status 1), which
  is spawned again;
- a supervisor with a thread child and a process child (one_for_all): the
  thread one exits, the process one is taken down and up with it;
- serve_on past the budget: thread children taken down stay down (503)
  beside the process one, the host serves on;
- nested: inner (one_for_one over echo and relay, threads) under top
  (one_for_all over inner and silent, a process): inner restarts echo
  alone; inner past its budget fails to top, which restarts inner's
  subtree and silent; top past its budget stops the host, exit 1, the line
  naming top and the chain of reasons, no instance left behind;
- the doctor prints the tree (`supervision`);
- under --workers 2 a worker restarts its own thread instance, and its
  top supervisor past its budget stops that worker alone, respawned;
- a cycle, an unknown child, a tree deeper than 8 and an external child
  are refused by the doctor, 78, one line each.
"""
import json
import signal
import tempfile
import threading
import time

from harness import (Failures, sanitizer_report, Prefork, Server, actor_pids, alive, get, reap, run, run_parts, wait_for,
                     write_json)

F = Failures()
TMP = tempfile.mkdtemp(prefix="m0-suptree-")
SEEN = set()


def topology(doc):
    return write_json(doc, TMP)


def pids(host):
    """{actor: pid} of the host's live process instances."""
    return actor_pids(host, SEEN)


def exit_echo(s, why):
    """GET /actor/echo with x-exit: the request that ends the instance."""
    return get(s.port, "/actor/echo", {"x-exit": why}, timeout=10)[0]


def answers(s, path="/actor/echo"):
    return wait_for(lambda: get(s.port, path)[0] == 200, 15)


def said(s, line, n=1):
    return wait_for(lambda: s.stderr().count(line) >= n, 15)


def ended(label, s, rc):
    """The host stopped (SIGTERM unless rc is 1: it stops itself) exits rc,
    and no sanitizer report is on its stderr."""
    if rc == 0:
        s.signal(signal.SIGTERM)
    got = s.wait(30)
    err = s.stderr()
    F.check(got == rc, f"{label}: the host exits {rc} ({got})\n{err}")
    F.check(not sanitizer_report(err), f"{label}: no sanitizer report\n{sanitizer_report(err)}")
    return err


def monitor(s, n):
    """A thread taking n notes of echo's monitor; its result in box["notes"]."""
    box = {}

    def take():
        r = get(s.port, f"/msg/box?name=w&n={n}&ms=15000&watch=echo", timeout=30)
        box["notes"] = [g["data"] for g in json.loads(r[1])["got"]] if r[0] == 200 else r

    t = threading.Thread(target=take)
    t.start()
    F.check(wait_for(lambda: "host_check: w watches echo" in s.stderr(), 15), "the monitor is set")
    return t, box


def thread_restart():
    label = "thread, own budget"
    doc = {"app_actors": [{"name": "echo", "placement": "thread", "restart": {"intensity": 2, "period_ms": 60000}}]}
    s = Server("host_check", "--port", "0", "--topology", topology(doc), env={"M0_ECHO_STOP_MS": "1"})
    with s:
        t, box = monitor(s, 3)
        F.check(exit_echo(s, "boom one") == 502, f"{label}: the request that ended it got 502")
        t.join(30)
        notes = box.get("notes") or []
        events = [(d.get("event"), d.get("reason"), d.get("restarted")) for d in notes if isinstance(d, dict)]
        F.check(events[:3] == [("down", "boom one", None), ("exited", "boom one", True), ("up", None, None)],
                f"{label}: the monitor got down (the reason), exited (restarted) and up ({notes})")
        F.check(answers(s), f"{label}: /actor/echo answers again\n{s.stderr()}")
        F.check("m0: actor echo: instance 0 ended (boom one); started again" in s.stderr(), f"{label}: the line")
        F.check(s.stderr().count("echo: instance 0 (pid") and said(s, " made", 2) and "stopped" in s.stderr(),
                f"{label}: its state freed (free) and made again (make)\n{s.stderr()}")
        F.check(exit_echo(s, "boom two") == 502 and answers(s), f"{label}: the second end within the budget")
        F.check(exit_echo(s, "boom three") == 502, f"{label}: the third end")
        F.check(said(s, "instance 0 ended (boom three) after 2 restarts within 60000 ms, its budget; it stays down"),
                f"{label}: past its budget it stays down, said\n{s.stderr()}")
        F.check(wait_for(lambda: get(s.port, "/actor/echo")[0] == 503, 10), f"{label}: /actor/echo 503")
        F.check(get(s.port, "/health")[0] == 200, f"{label}: the host serves on")
        ended(label, s, 0)


def left_over():
    """What an ended thread instance left in its mailbox is let go, as an
    Erlang process's mailbox goes with it: sends that reached echo.0 while
    it slept before its exit are not counted by the instance made again."""
    label = "thread, its mailbox at its end"
    doc = {"app_actors": [{"name": "echo", "placement": "thread", "restart": {"intensity": 5, "period_ms": 60000}}],
           "routes": [{"method": "GET", "pattern": "/actor/echo", "actor": "echo", "timeout_ms": 10000}]}
    with Server("host_check", "--port", "0", "--topology", topology(doc)) as s:
        done = {}

        def ending():
            done["exit"] = get(s.port, "/actor/echo", {"x-exit": "full", "x-sleep-ms": "1500"}, timeout=30)[0]
            done["exit_t"] = time.monotonic()
        t = threading.Thread(target=ending)
        t.start()
        sent = get(s.port, "/msg/send?to=echo.0&type=3&n=20", timeout=30)
        sent_t = time.monotonic()
        t.join(30)
        F.check(done.get("exit") == 502 and sent[0] == 200,
                f"{label}: the ending request 502, the sends sent ({done}, {sent})")
        F.check(answers(s), f"{label}: echo answers again")
        got = get(s.port, "/msg/call?to=echo.0&type=4", timeout=10)
        try:
            counted = json.loads(got[1])["answer"]["counted"]
        except (ValueError, KeyError, TypeError):
            counted = None
        if sent_t < done.get("exit_t", 0):  # the sends were in its mailbox before it ended
            F.check(counted == 0,
                    f"{label}: the instance made again counted none of the sends its predecessor left ({got})")
        else:
            print(f"{label}: the sends came after the end (a loaded machine): nothing to check")
        ended(label, s, 0)


def remake_refused():
    """A make that refuses at a restart counts as one more end."""
    label = "make refused at a restart"
    doc = {"app_actors": [{"name": "echo", "placement": "thread", "restart": {"intensity": 2, "period_ms": 60000}}]}
    s = Server("host_check", "--port", "0", "--topology", topology(doc), env={"M0_ECHO_REMAKE_FAILS": "1"})
    with s:
        F.check(answers(s), f"{label}: the first make serves")
        F.check(exit_echo(s, "once") == 502, f"{label}: the request that ended it got 502")
        why = "its make refused: echo: a make after the first refused (M0_ECHO_REMAKE_FAILS)"
        F.check(said(s, f"m0: actor echo: instance 0 ended ({why}); started again") and
                said(s, f"instance 0 ended ({why}) after 2 restarts within 60000 ms, its budget; it stays down"),
                f"{label}: each refusal counted, then down\n{s.stderr()}")
        F.check(wait_for(lambda: get(s.port, "/actor/echo")[0] == 503, 10), f"{label}: /actor/echo 503")
        ended(label, s, 0)


def process_exit():
    label = "process, m0_actor_exit"
    s = Server("host_check", "--port", "0", "--topology",
               topology({"app_actors": [{"name": "echo", "placement": "process"}]}))
    with s:
        k = wait_for(lambda: pids(s.proc.pid).get("echo"), 15)
        F.check(answers(s), f"{label}: the instance answers (it has dialed the host)")
        F.check(exit_echo(s, "bye") == 502, f"{label}: the request that ended it got 502")
        F.check(said(s, "m0: actor echo: instance 0 exits: bye") and said(s, "instance 0 ended (status 1); started again"),
                f"{label}: its process exits 1 and is spawned again\n{s.stderr()}")
        n = wait_for(lambda: (lambda p: p if p and p != k else None)(pids(s.proc.pid).get("echo")), 15)
        F.check(n and answers(s), f"{label}: a new process answers ({k} -> {n})")
        ended(label, s, 0)


def mixed_children():
    label = "a thread child beside a process child, one_for_all"
    doc = {"app_actors": [{"name": "echo", "placement": "thread"}, {"name": "silent", "placement": "process"}],
           "supervisors": [{"name": "core", "strategy": "one_for_all", "children": ["echo", "silent"]}]}
    s = Server("host_check", "--port", "0", "--topology", topology(doc))
    with s:
        k = wait_for(lambda: pids(s.proc.pid).get("silent"), 15)
        F.check(exit_echo(s, "crash") == 502, f"{label}: the request that ended it got 502")
        F.check(said(s, "m0: supervisor core: actor echo instance 0 ended (crash); one_for_all: started again"),
                f"{label}: the supervisor's line\n{s.stderr()}")
        n = wait_for(lambda: (lambda p: p if p and p != k else None)(pids(s.proc.pid).get("silent")), 15)
        F.check(n, f"{label}: silent was taken down and up with echo ({k} -> {n})\n{s.stderr()}")
        F.check(answers(s), f"{label}: echo answers again")
        ended(label, s, 0)


def serve_on():
    """A top supervisor past its budget with serve_on: its thread and
    process children stay down, the host serves on."""
    label = "serve_on, thread children"
    doc = {"app_actors": [{"name": "echo", "placement": "thread"}, {"name": "relay", "placement": "thread"},
                          {"name": "silent", "placement": "process"}],
           "supervisors": [{"name": "core", "intensity": 0, "on_fail": "serve_on",
                            "children": ["echo", "relay", "silent"]}]}
    s = Server("host_check", "--port", "0", "--topology", topology(doc))
    with s:
        k = wait_for(lambda: pids(s.proc.pid).get("silent"), 15)
        F.check(answers(s, "/actor/relay"), f"{label}: relay answers")
        F.check(exit_echo(s, "gone") == 502, f"{label}: the request that ended it got 502")
        F.check(said(s, "its children stay down (on_fail serve_on) (actor echo instance 0 ended (gone))"),
                f"{label}: the line\n{s.stderr()}")
        F.check(wait_for(lambda: get(s.port, "/actor/relay")[0] == 503 and get(s.port, "/actor/echo")[0] == 503, 10),
                f"{label}: echo and relay (taken down, not made again) answer 503")
        F.check(wait_for(lambda: k and not alive(k) and not pids(s.proc.pid), 15), f"{label}: silent stopped too")
        F.check(get(s.port, "/health")[0] == 200, f"{label}: the host serves on")
        ended(label, s, 0)


NESTED = {"app_actors": [{"name": "echo", "placement": "thread"}, {"name": "relay", "placement": "thread"},
                         {"name": "silent", "placement": "process"}],
          "supervisors": [{"name": "top", "strategy": "one_for_all", "intensity": 1, "period_ms": 60000,
                           "children": ["inner", "silent"]},
                          {"name": "inner", "intensity": 1, "period_ms": 60000, "children": ["echo", "relay"]}]}


def doctor():
    """The doctor's `supervision`: the tree, top first, actors as leaves."""
    rc, out, err = run("host_check", "--port", "0", "--topology", topology(NESTED), "--doctor")
    tree = json.loads(out).get("supervision") if rc == 0 else None
    leaf = lambda a, p: {"actor": a, "placement": p, "instances": 1}
    want = [{"supervisor": "top", "strategy": "one_for_all", "intensity": 1, "period_ms": 60000, "on_fail": "exit",
             "children": [{"supervisor": "inner", "strategy": "one_for_one", "intensity": 1, "period_ms": 60000,
                           "on_fail": "parent", "children": [leaf("echo", "thread"), leaf("relay", "thread")]},
                          leaf("silent", "process")]}]
    F.check(tree == want, f"the doctor prints the tree ({rc}, {tree})\n{err}")


def nested():
    label = "nested"
    doc = NESTED
    s = Server("host_check", "--port", "0", "--topology", topology(doc))
    with s:
        k = wait_for(lambda: pids(s.proc.pid).get("silent"), 15)
        F.check(exit_echo(s, "boom-1") == 502 and answers(s), f"{label}: echo made again")
        F.check(said(s, "m0: supervisor inner: actor echo instance 0 ended (boom-1); one_for_one: started again"),
                f"{label}: inner restarts echo alone\n{s.stderr()}")
        F.check(pids(s.proc.pid).get("silent") == k, f"{label}: silent kept its pid")
        F.check(exit_echo(s, "boom-2") == 502, f"{label}: echo ends again")
        F.check(said(s, "m0: supervisor inner: 2 restarts within 60000 ms, past its budget of 1; it fails to "
                        "supervisor top"), f"{label}: inner fails to top\n{s.stderr()}")
        F.check(said(s, "m0: supervisor top: supervisor inner past its budget of 1 <- actor echo instance 0 ended "
                        "(boom-2); one_for_all: started again"), f"{label}: top restarts\n{s.stderr()}")
        n = wait_for(lambda: (lambda p: p if p and p != k else None)(pids(s.proc.pid).get("silent")), 15)
        F.check(n, f"{label}: top's one_for_all took silent down and up ({k} -> {n})")
        F.check(answers(s) and answers(s, "/actor/relay"), f"{label}: inner's subtree serves again")
        # inner came back with a fresh budget: one end is its own restart
        F.check(exit_echo(s, "boom-3") == 502 and said(s, "actor echo instance 0 ended (boom-3); one_for_one"),
                f"{label}: inner's budget is fresh after its restart\n{s.stderr()}")
        F.check(answers(s), f"{label}: echo answers")
        exit_echo(s, "boom-4")
        err = ended(f"{label}: top past its budget", s, 1)
        F.check("m0: supervisor top: 2 restarts within 60000 ms, past its budget of 1; the host stops (supervisor "
                "inner past its budget of 1 <- actor echo instance 0 ended (boom-4))" in err,
                f"{label}: the line names top and the chain of reasons\n{err}")
        F.check(wait_for(lambda: not any(alive(p) for p in SEEN), 10), f"{label}: no instance outlives the host")


def workers():
    """Under --workers 2 each worker restarts its own thread instances; its
    top supervisor past its budget stops that worker alone, which the
    supervisor process respawns."""
    label = "--workers 2"
    doc = {"app_actors": [{"name": "echo", "placement": "thread"}],
           "supervisors": [{"name": "core", "intensity": 1, "period_ms": 60000, "children": ["echo"]}]}
    s = Prefork("host_check", "--port", "0", "--workers", "2", "--topology", topology(doc))
    with s:
        F.check(answers(s), f"{label}: echo answers")
        F.check(exit_echo(s, "w-1") == 502, f"{label}: the request that ended it got 502")
        F.check(said(s, "m0: supervisor core: actor echo instance 0 ended (w-1); one_for_one: started again"),
                f"{label}: a worker's supervisor restarts its thread instance\n{s.stderr()}")
        # the same worker's second end (or the other's first): one of them passes its budget
        for i in range(2, 6):
            if "the worker stops" in s.stderr():
                break
            exit_echo(s, f"w-{i}")
            said(s, f"(w-{i})")
        F.check(said(s, "past its budget of 1; the worker stops (actor echo instance 0 ended (w-"),
                f"{label}: past its budget the worker stops\n{s.stderr()}")
        F.check(said(s, "respawned"), f"{label}: the supervisor process respawns it\n{s.stderr()}")
        F.check(answers(s) and s.proc.poll() is None, f"{label}: the host serves on")
        ended(label, s, 0)


def refused():
    actors = [{"name": "echo", "placement": "thread"}, {"name": "silent", "placement": "process"},
              {"name": "ext", "placement": "external"}]
    deep = [{"name": f"s{i}", "children": [f"s{i + 1}" if i < 8 else "echo"]} for i in range(9)]
    cases = [
        ("a cycle", [{"name": "a", "children": ["b"]}, {"name": "b", "children": ["a", "echo"]}],
         'supervisors[0] "a" is a child of its own child'),
        ("an unknown child", [{"name": "a", "children": ["echo", "nobody"]}],
         'supervisors[0].children[1] "nobody" is no actor of app_actors and no supervisor'),
        ("nine deep", deep, "nests 9 supervisors deep, past the bound of 8"),
        ("an external child", [{"name": "a", "children": ["ext"]}],
         'supervisors[0].children[0] "ext" is placed external: a supervisor restarts only what the host runs'),
    ]
    for label, sups, line in cases:
        rc, out, err = run("host_check", "--port", "0", "--topology",
                           topology({"app_actors": actors, "supervisors": sups}), "--doctor")
        bad = [c["detail"] for c in json.loads(out)["checks"] if not c["ok"]] if out.startswith("{") else []
        F.check(rc == 78 and len(bad) == 1 and line in bad[0], f"{label}: 78 and the line ({rc}, {bad})\n{err}")


try:
    run_parts(F, [("thread restart", thread_restart), ("left over", left_over), ("make refused", remake_refused),
                  ("process exit", process_exit),
                  ("mixed children", mixed_children), ("serve_on", serve_on), ("nested", nested), ("doctor", doctor), ("workers", workers),
                  ("refused", refused)], tmp=TMP)
finally:
    reap(SEEN)
