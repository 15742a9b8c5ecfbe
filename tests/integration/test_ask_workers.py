"""An ask from a thread instance to a process or external actor under
--workers (service/relay.h, the book): host_check's `relay`, a thread
actor, answers GET /actor/relay by asking `echo` (m0_ask) and wrapping its
answer ({"relay":PID,"echo":<echo's answer>}).

Proves, under --workers 2 (a topology file: mode prefork, loops 2):
- echo placed as a process (a child of the supervisor, relayed to both
  workers' doors): 24 GET /actor/relay on fresh connections, 8 at a time,
  all answer 200 with echo's own answer (actor echo, path /actor/relay, the
  pid of the one echo child, which is no worker), each wrapped by a worker;
  then rounds of 8 keep-alive connections held at once, each asking
  /instance (its worker's pid) then /actor/relay, until the relay's pid
  was each of the two workers: every answer 200, wrapped by the very
  worker that took the connection (the answer went back to the asker's
  own worker, though relay.0 has the same id in both).
- echo placed as external (the C echo_actor dialing the URL the doctor
  names): the same, echo's pid the echo_actor's.
- The same file in mode threads (loops 2): 8 concurrent /actor/relay all
  200, wrapped and answered as before (the relay is the host's pid).
- The doctor's `names`: for each actor, the instances its name reaches
  (echo.0, echo.1 for two process instances), and that under prefork a
  thread actor's name reaches the asking worker's own instances.
- The relay placed as a process too, under threads and prefork: its
  m0_ask goes over its own link as a call (service/remote.c): 8 concurrent
  /actor/relay all 200, wrapped by the relay's process (a child of the
  host, not echo's) around echo's answer.
Before any of this, each host waits (bounded) until /actor/echo answers on
connections of both workers (the relay's legs are up).
"""
import http.client
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time

from harness import BIN, Failures, Prefork, Server, children, doctor_url, private_dir, run_parts, wait_for, write_json
from harness import as_json, run

F = Failures()
TMP = tempfile.mkdtemp(prefix="m0-askw-")
PROGRAMS = []


def topo(mode, placement, relay="thread"):
    return {"mode": mode, "loops": 2,
            "app_actors": [{"name": "echo", "placement": placement}, {"name": "relay", "placement": relay}]}


def host(t, rd, cls):
    return cls("host_check", "--port", "0", "--run-dir", rd, "--topology", write_json(t, TMP, indent=2))


def held(port, path, n=8):
    """n keep-alive connections held at once, each asking /instance (the
    pid of the process that serves it) then path: [(pid, status, json)]."""
    conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=8) for _ in range(n)]
    out = []
    try:
        for c in conns:
            c.request("GET", "/instance")
            r = c.getresponse()
            out.append([(as_json(r.read()) or {}).get("pid")])
        for c, o in zip(conns, out):
            c.request("GET", path)
            r = c.getresponse()
            o += [r.status, as_json(r.read())]
    except (OSError, http.client.HTTPException) as x:
        out.append([None, str(x), None])
    finally:
        for c in conns:
            c.close()
    return [tuple(o) if len(o) == 3 else (o[0], "no answer", None) for o in out]


def legs_up(port, nprocs, within=15):
    """Waits until a round of held connections on nprocs serving processes
    all answer /actor/echo 200 (503 only meanwhile): those pids, else
    (set(), what came)."""
    deadline, got = time.monotonic() + within, []
    while time.monotonic() < deadline:
        got = held(port, "/actor/echo")
        if all(st == 200 for _, st, _ in got) and len({p for p, _, _ in got}) == nprocs:
            return {p for p, _, _ in got}, got
        if any(st not in (200, 503) for _, st, _ in got):
            return set(), got
        time.sleep(0.05)
    return set(), got


def fresh(port, n=8):
    """n GET /actor/relay at once, each on a fresh connection: [(status, json)]."""
    out, lock = [], threading.Lock()

    def one():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=8)
        try:
            c.request("GET", "/actor/relay")
            r = c.getresponse()
            got = (r.status, as_json(r.read()))
        except (OSError, http.client.HTTPException) as x:
            got = (str(x), None)
        finally:
            c.close()
        with lock:
            out.append(got)
    ts = [threading.Thread(target=one) for _ in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(20)
    return out


def wrapped(j, relays, echo_pid):
    """j is the relay's answer, by one of relays, holding echo's own answer from echo_pid."""
    e = (j or {}).get("echo") or {}
    return (j or {}).get("relay") in relays and e.get("actor") == "echo" and e.get("path") == "/actor/relay" \
        and e.get("pid") == echo_pid


def asks_both_workers(label, port, workers, echo_pid):
    got = []
    for _ in range(3):
        got += fresh(port)
    F.check(len(got) == 24 and all(st == 200 and wrapped(j, workers, echo_pid) for st, j in got),
            f"{label}: 24 /actor/relay on fresh connections all 200, echo's answer (pid {echo_pid}) wrapped by a "
            f"worker of {workers} ({[(st, j) for st, j in got if st != 200 or not wrapped(j, workers, echo_pid)][:3]})")
    seen, bad, deadline = set(), [], time.monotonic() + 15
    while seen != workers and not bad and time.monotonic() < deadline:
        for pid, st, j in held(port, "/actor/relay"):
            if st == 200 and pid in workers and wrapped(j, {pid}, echo_pid):
                seen.add(pid)
            else:
                bad.append((pid, st, j))
    F.check(seen == workers and not bad,
            f"{label}: held connections on both workers ({seen} of {workers}) each get /actor/relay 200 wrapped "
            f"by their own worker ({bad[:3]})")


def prefork_process():
    rd = private_dir("rd-", TMP)
    with host(topo("prefork", "process"), rd, Prefork) as s:
        workers, got = legs_up(s.port, 2)
        F.check(len(workers) == 2, f"prefork, echo a process: /actor/echo answers on both workers ({got[:4]})")
        kids = children(s.proc.pid) - workers
        st, j = (fresh(s.port, 1) or [(None, None)])[0]
        echo_pid = ((j or {}).get("echo") or {}).get("pid")
        F.check(st == 200 and echo_pid in kids,
                f"prefork, echo a process: the echo that answers is the supervisor's child, no worker "
                f"({st} {j}, children {kids}, workers {workers})")
        asks_both_workers("prefork, echo a process", s.port, workers, echo_pid)


def prefork_external():
    rd = private_dir("rd-", TMP)
    t = topo("prefork", "external")
    url, rc, out, err = doctor_url(write_json(t, TMP, indent=2), "echo", rd)
    F.check(url is not None, f"the doctor names echo's url (rc {rc}): {out[-400:]} {err[-400:]}")
    with host(t, rd, Prefork) as s:
        a = subprocess.Popen([os.path.join(BIN, "echo_actor"), url or "", "0"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
        PROGRAMS.append(a)
        workers, got = legs_up(s.port, 2)
        F.check(len(workers) == 2, f"prefork, echo external: /actor/echo answers on both workers ({got[:4]})")
        asks_both_workers("prefork, echo external", s.port, workers, a.pid)


def threads_process():
    rd = private_dir("rd-", TMP)
    with host(topo("threads", "process"), rd, Prefork) as s:
        pids, got = legs_up(s.port, 1)
        F.check(pids == {s.proc.pid}, f"threads, echo a process: /actor/echo answers ({got[:4]})")
        got = fresh(s.port)
        kids = children(s.proc.pid)
        echo_pid = ((got[0][1] if got else None) or {}).get("echo", {}).get("pid")
        F.check(echo_pid in kids and all(st == 200 and wrapped(j, {s.proc.pid}, echo_pid) for st, j in got),
                f"threads, echo a process: 8 /actor/relay at once all 200, echo's answer from the host's child "
                f"({kids}) wrapped by the host ({got[:3]})")


def relay_process():
    for mode in ("threads", "prefork"):
        rd = private_dir("rd-", TMP)
        with host(topo(mode, "process", "process"), rd, Prefork) as s:
            _, got = legs_up(s.port, 1 if mode == "threads" else 2)
            F.check(got and all(st == 200 for _, st, _ in got), f"{mode}, relay a process: /actor/echo answers ({got[:4]})")
            # the relay is a process of its own too: up once it answers (503 only meanwhile)
            F.check(wait_for(lambda: all(st == 200 for st, _ in fresh(s.port, 2)), 30, step=0.05),
                    f"{mode}, relay a process: /actor/relay answers once its process is up")
            got = fresh(s.port)
            kids = children(s.proc.pid)
            j0 = (got[0][1] if got else None) or {}
            relay_pid, echo_pid = j0.get("relay"), (j0.get("echo") or {}).get("pid")
            F.check(relay_pid in kids and echo_pid in kids and relay_pid != echo_pid and
                    all(st == 200 and wrapped(j, {relay_pid}, echo_pid) for st, j in got),
                    f"{mode}, relay a process: 8 /actor/relay at once all 200, echo's answer (a child) wrapped by "
                    f"the relay's own process (another child of {kids}) ({got[:3]})")


def names_in_doctor():
    for mode in ("threads", "prefork"):
        t = topo(mode, "process")
        t["app_actors"][0]["instances"] = 2
        rc, out, err = run("host_check", "--doctor", "--topology", write_json(t, TMP, indent=2))
        names = (as_json(out.strip().splitlines()[-1].encode()) if out.strip() else None) or {}
        names = names.get("names") or {}
        echo, relay = names.get("echo") or {}, names.get("relay") or {}
        F.check(rc == 0 and echo.get("instances") == ["echo.0", "echo.1"] and relay.get("instances") == ["relay.0"],
                f"{mode}: the doctor names what each actor's name reaches (rc {rc}, {names})")
        F.check(("each worker" in (relay.get("reaches") or "")) == (mode == "prefork"),
                f"{mode}: a thread actor's name reaches each worker's own instances only under prefork ({relay})")


run_parts(F, [(p.__name__, p) for p in (prefork_process, prefork_external, threads_process, relay_process,
                                        names_in_doctor)], PROGRAMS, TMP)
