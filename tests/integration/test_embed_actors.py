"""The reference app for messages (apps/embed, docs/apps.md): a program that
embeds a host and whose main sends to, calls and monitors actors in all
three placements, as apps/embed/topology.json places them (echo as "local"
on a thread, "worker" a process the host spawns, "remote" an echo_actor
this test starts, dialing the URL the run dir gives).

Proves, from outside (HTTP to embed's routes):
- GET /calls: main's last m0_call answered from each placement: local from
  embed's own pid, worker from a child of embed (the embedded host spawned
  it: this program again), remote from the echo_actor's pid; main's
  m0_sends to each counted as sent.
- POST /send/worker: main sends now and calls for echo's count, which has
  grown (the sends arrived); POST /send/nope is 404.
- SIGKILL to the worker's process: GET /notes shows (m0_monitor's notes,
  into main's mailbox) worker.0's down, its exit (that pid, signal 9,
  restarted) and a later up; /calls answers from the new pid.
- SIGTERM to the echo_actor: /notes shows remote.0's down, and /calls says
  EHOSTDOWN for remote.
- SIGINT: embed stops its host and exits 0 (no sanitizer report on its
  stderr, the spawned worker's included); the worker's process is gone.
"""
import json
import os
import signal
import subprocess
import tempfile
import urllib.request

from harness import BIN, Failures, sanitizer_report, Server, children, private_dir, wait_for

F = Failures()
TMP = tempfile.mkdtemp(prefix="m0-embed-actors-")
TOPOLOGY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "apps", "embed", "topology.json")


def get(port, path, method="GET"):
    """(status, JSON body or None) of one request; (error, None) on a failure."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.loads(e.read() or b"null")
        except ValueError:
            return e.code, None
    except (OSError, ValueError) as e:
        return repr(e), None


def answer(calls, actor):
    """The answer of main's last call to actor in a /calls body, or {}."""
    call = ((calls or {}).get(actor) or {}).get("call") or {}
    return call.get("answer") or {}


def notes(port):
    st, body = get(port, "/notes")
    return body.get("notes", []) if st == 200 and body else []


def note(ns, event, instance=None, after=0, **kw):
    """The first note of `event` (for `instance`, with these fields) whose n is
    past `after`, or None."""
    for n in ns:
        if n.get("event") == event and n.get("n", 0) > after and (instance is None or n.get("instance") == instance) \
                and all(n.get(k) == v for k, v in kw.items()):
            return n
    return None


def all_answer(port, remote_pid):
    st, calls = get(port, "/calls")
    ok = st == 200 and all(answer(calls, a).get("data", "").startswith("round ") for a in ("local", "worker", "remote"))
    return calls if ok and answer(calls, "remote").get("pid") == remote_pid else None


def main():
    rd = private_dir("rd-", TMP)
    with Server("embed", "--port", "0", "--run-dir", rd, "--topology", TOPOLOGY) as s:
        ext = subprocess.Popen([os.path.join(BIN, "echo_actor"), f"ipc://{rd}/actor.remote.sock", "0"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            placements(s, ext)
        finally:
            if ext.poll() is None:
                ext.kill()
                ext.wait(5)
        stopped(s)


def placements(s, ext):
    calls = wait_for(lambda: all_answer(s.port, ext.pid), 20)
    F.check(calls is not None, f"/calls: main's call answered by local, worker and remote (the echo_actor) within 20 s "
                               f"({get(s.port, '/calls')})")
    if not calls:
        return
    kids = children(s.proc.pid)
    worker = answer(calls, "worker").get("pid")
    F.check(answer(calls, "local").get("pid") == s.proc.pid, f"local answers from embed's own pid {s.proc.pid} ({calls})")
    F.check(worker in kids and worker != s.proc.pid, f"worker answers from a child of embed {kids} ({calls})")
    F.check(all(calls[a]["sent"] >= 1 for a in ("local", "worker", "remote")),
            f"main's sends to each placement counted as sent ({calls})")
    st, sent = get(s.port, "/send/worker", "POST")
    counted = ((sent or {}).get("counted") or {}).get("answer") or {}
    F.check(st == 200 and sent.get("sent") is True and counted.get("counted", 0) >= 1,
            f"POST /send/worker: sent, and echo counted main's sends ({st}, {sent})")
    st, _ = get(s.port, "/send/nope", "POST")
    F.check(st == 404, f"POST /send/nope is 404 ({st})")
    killed(s, worker)
    remote_down(s, ext)


def killed(s, worker):
    last = max((n.get("n", 0) for n in notes(s.port)), default=0)
    os.kill(worker, signal.SIGKILL)

    def seen():
        ns = notes(s.port)
        down = note(ns, "down", "worker.0", last)
        ex = note(ns, "exited", None, last, actor="worker", pid=worker, restarted=True)
        up = ex and note(ns, "up", "worker.0", ex["n"])
        return (down, ex, up) if down and ex and up else None

    got = wait_for(seen, 20)
    F.check(got is not None, f"/notes after SIGKILL to worker {worker}: its down, its exit (pid, restarted), a later up "
                             f"({notes(s.port)})")
    if got:
        F.check(got[1].get("status") == "signal 9", f"the exit note says signal 9 ({got[1]})")
    calls = wait_for(lambda: (lambda c: c if answer(c[1], "worker").get("pid") not in (None, worker) else None)(
        get(s.port, "/calls")), 20)
    new = answer(calls[1], "worker").get("pid") if calls else None
    F.check(new in children(s.proc.pid), f"worker answers again, from a new child of embed ({new}, was {worker})")


def remote_down(s, ext):
    last = max((n.get("n", 0) for n in notes(s.port)), default=0)
    ext.terminate()
    ext.wait(10)
    got = wait_for(lambda: note(notes(s.port), "down", "remote.0", last), 20)
    F.check(got is not None, f"/notes after the echo_actor's stop: remote.0's down ({notes(s.port)})")
    calls = wait_for(lambda: (lambda c: c if ((c[1] or {}).get("remote") or {}).get("call", {}).get("errno")
                              == "EHOSTDOWN" else None)(get(s.port, "/calls")), 20)
    F.check(calls is not None, f"/calls: main's call to remote is EHOSTDOWN once it left ({get(s.port, '/calls')})")


def stopped(s):
    kids = children(s.proc.pid)
    s.signal(signal.SIGINT)
    try:
        rc = s.wait(timeout=15.0)
    except AssertionError as e:
        rc = repr(e)
    F.check(rc == 0, f"SIGINT: embed exits 0 ({rc}):\n{s.stderr()[-2000:]}")
    F.check("host stopped with 0" in s.stderr(), f"embed says its host stopped with 0:\n{s.stderr()[-1000:]}")
    F.check(not sanitizer_report(s.stderr()), f"no sanitizer report:\n{sanitizer_report(s.stderr())}")
    left = [k for k in kids if wait_for(lambda k=k: not os.path.exists(f"/proc/{k}"), 5) is False]
    F.check(not left, f"the worker's process is gone after the stop ({left} of {kids})")


if __name__ == "__main__":
    main()
    F.done()
