"""An external instance sends, calls and monitors by name over the wire
(issue 39, item 6; docs/wire.md, Messages and Monitors): python/m0actor.py's
Instance.send, Instance.call and Instance.monitor.

host_check --threads 2 with `echo` and `silent` both placed external: a
driver (a Python program on m0actor) serves `silent` and takes commands on
its stdin; python/echo_actor.py serves `echo`.

- monitor("echo") is taken before echo has an instance; monitor("nosuch")
  raises ENOENT; the driver's on_message then gets NOTE_UP when echo's
  instance comes and NOTE_DOWN when it leaves (m0_monitor's JSON: actor,
  instance "echo.0", event);
- call("echo", ECHO, "hello") from the driver's main thread is answered with
  echo's ECHOED (its pid, the data); two send("echo", COUNT) are counted
  (COUNTED says 2); call("nosuch") raises ENOENT;
- ask("echo", GET /asked) (an m0_ask over the wire: a call of type
  MSG_ASK) is answered by the Python echo's receive; ask("relay") by the
  host's thread relay (its receive, which asks echo in turn);
- a call from the driver's receive (serve()'s own thread: GET
  /actor/silent?to=echo&data=D) is answered too, and the request gets it;
  ?to=nosuch gets the errno (502, ENOENT).
"""
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading

import harness
from harness import Failures, sanitizer_report, Server, private_dir, run_parts, wait_for, write_json

F = Failures()
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PYDIR = os.path.join(ROOT, "python")
TMP = tempfile.mkdtemp(prefix="m0-calls-")
PROGRAMS = []
NOTE_UP, NOTE_DOWN = 0xFF000001, 0xFF000002
ENOENT = 2

DRIVER = r"""
import json, sys, threading
sys.path.insert(0, sys.argv[1])
import m0actor

actor = m0actor.Instance(sys.argv[2])
lock = threading.Lock()


def out(*a):
    with lock:
        print(json.dumps(a), flush=True)


def on_message(mtype, data):
    if mtype in (m0actor.NOTE_UP, m0actor.NOTE_DOWN, m0actor.NOTE_EXITED):
        out("note", mtype, json.loads(data))
    return None


def receive(req):  # a call from serve()'s own thread
    q = dict(p.split("=", 1) for p in req.query.split("&") if "=" in p)
    try:
        got = actor.call(q["to"], 1, q.get("data", ""), timeout=10)
        return 200, [("Content-Type", "application/json")], got[1] if got else b"null"
    except OSError as e:
        return 502, [], str(e.errno)


threading.Thread(target=actor.serve, kwargs=dict(receive=receive, on_message=on_message), daemon=True).start()
for line in sys.stdin:
    cmd, *args = line.split()
    try:
        if cmd == "monitor":
            actor.monitor(args[0], timeout=10)
            out("monitor", "ok")
        elif cmd == "call":
            got = actor.call(args[0], int(args[1]), args[2] if len(args) > 2 else "", timeout=10)
            out("call", [got[0], got[1].decode()] if got else None)
        elif cmd == "send":
            out("send", actor.send(args[0], int(args[1]), "", timeout=10))
        elif cmd == "ask":
            rep = actor.ask(args[0], "GET", args[1], timeout=10)
            out("ask", [rep.status, rep.body.decode()] if rep else None)
    except OSError as e:
        out(cmd, "errno", e.errno)
    except TimeoutError:
        out(cmd, "timeout")
actor.stop()
"""


class Driver:
    def __init__(self, url):
        self.p = subprocess.Popen([sys.executable, "-c", DRIVER, PYDIR, url], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        PROGRAMS.append(self.p)
        self.lines, self.notes = queue.Queue(), queue.Queue()
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for line in self.p.stdout:
            try:
                got = json.loads(line)
            except ValueError:
                continue
            (self.notes if got[0] == "note" else self.lines).put(got)

    def ask(self, cmd, timeout=20):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def note(self, timeout=15):
        try:
            return self.notes.get(timeout=timeout)
        except queue.Empty:
            return None


def scenario():
    rd = private_dir("rd-", TMP)
    path = write_json({"app_actors": [{"name": "echo", "placement": "external"},
                                      {"name": "silent", "placement": "external"}]}, TMP)
    echo_url, rc, _, err = harness.doctor_url(path, "echo", rd)
    silent_url, _, _, _ = harness.doctor_url(path, "silent", rd)
    F.check(echo_url and silent_url, f"the doctor names both urls (rc {rc}): {err[-400:]}")
    if not (echo_url and silent_url):
        return
    with Server("host_check", "--port", "0", "--threads", "2", "--topology", path, "--run-dir", rd) as s:
        d = Driver(silent_url)
        F.check(d.ask("monitor echo") == ["monitor", "ok"], "monitor(echo) is taken before echo has an instance")
        F.check(d.ask("monitor nosuch") == ["monitor", "errno", ENOENT], "monitor(nosuch) raises ENOENT")
        echo = subprocess.Popen([sys.executable, os.path.join(PYDIR, "echo_actor.py"), echo_url, "0"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        PROGRAMS.append(echo)
        n = d.note()
        F.check(n is not None and n[1] == NOTE_UP and n[2].get("actor") == "echo"
                and n[2].get("instance") == "echo.0" and n[2].get("event") == "up",
                f"the driver hears echo.0 come (NOTE_UP): {n}")
        got = d.ask("call echo 1 hello")
        ans = harness.as_json(got[1][1]) if got and got[0] == "call" and got[1] else None
        F.check(got and got[1][0] == 2 and ans and ans.get("pid") == echo.pid and ans.get("data") == "hello",
                f"call(echo, ECHO, hello) from the driver's main thread is answered ECHOED by echo: {got}")
        F.check(d.ask("send echo 3") == ["send", True] and d.ask("send echo 3") == ["send", True],
                "send(echo, COUNT) twice")
        counted = {}

        def two():
            got = d.ask("call echo 4")
            counted["last"] = got
            return got and got[1] and (harness.as_json(got[1][1]) or {}).get("counted") == 2
        F.check(wait_for(two, 10, step=0.1), f"echo counted the two sends: {counted.get('last')}")
        F.check(d.ask("call nosuch 1") == ["call", "errno", ENOENT], "call(nosuch) raises ENOENT")
        got = d.ask("ask echo /asked?x=1")
        ans = harness.as_json(got[1][1].encode()) if got and got[0] == "ask" and got[1] else None
        F.check(got and got[1][0] == 200 and ans and ans.get("pid") == echo.pid and ans.get("path") == "/asked",
                f"ask(echo, GET /asked) (m0_ask over the wire, answered by the Python echo's receive): {got}")
        F.check(d.ask("call relay %d junk" % 0xFF000010) == ["call", None],
                "an ask whose request batch does not decode is answered none at once (not left to time out)")
        got = d.ask("ask relay /relayed")
        ans = harness.as_json(got[1][1].encode()) if got and got[0] == "ask" and got[1] else None
        F.check(got and got[1][0] == 200 and ans and ans.get("relay") == s.proc.pid
                and (ans.get("echo") or {}).get("pid") == echo.pid,
                f"ask(relay) is answered by the host's thread relay, which asked the Python echo in turn: {got}")
        st, body = harness.get(s.port, "/actor/silent?to=echo&data=viaserve", timeout=15)
        ans = harness.as_json(body) or {}
        F.check(st == 200 and ans.get("pid") == echo.pid and ans.get("data") == "viaserve",
                f"a call from receive (serve()'s thread) is answered by echo: {st} {body[:300]!r}")
        st, body = harness.get(s.port, "/actor/silent?to=nosuch", timeout=15)
        F.check((st, body) == (502, str(ENOENT).encode()), f"and one to nosuch gets ENOENT: {st} {body!r}")
        echo.send_signal(signal.SIGTERM)
        F.check(echo.wait(10) == 0, "echo's instance ends on SIGTERM")
        n = d.note()
        F.check(n is not None and n[1] == NOTE_DOWN and n[2].get("instance") == "echo.0"
                and n[2].get("event") == "down", f"the driver hears echo.0 leave (NOTE_DOWN): {n}")
        d.p.stdin.close()
        F.check(d.p.wait(10) == 0, "the driver ends once its input does")
        s.signal(signal.SIGTERM)
        F.check(s.wait(15) == 0 and not sanitizer_report(s.stderr()),
                f"the host exits 0 on SIGTERM, no sanitizer report:\n{s.stderr()[-1500:]}")


run_parts(F, [("calls and monitors", scenario)], PROGRAMS, TMP)
