"""Every refusal counted and said in one line (issue 36, item 5): a value
cannot split a line; m0pub says when the loops refuse its frame and never
splits one; a reply status HTTP does not let the host pass is a 502.

Proves:
- lines: a value holding a line break, in each of M0_RUN_DIR, M0_TRACE,
  M0_TOPOLOGY, M0_TRUSTED_PROXIES, --run-dir, --trace, --topology,
  --trusted-proxies, an unknown flag's name and the topology file (an
  actor's name, an app actor's URL, a route's pattern: any of its strings),
  is refused (2 or 78) and said in lines none of which
  begins with the forged "m0: forged"; the value is shown escaped (`\\n`).
  An unknown M0_ variable whose name holds one is named escaped by a host
  that serves; m0pub's --run-dir with one is 78, said escaped.
- m0pub --id 999999 (an id the counter has not reached): exit 1, no id on
  stdout, one line on stderr, and loop.0 counts it
  (m0_refused_total{actor="loop.0",reason="frame_id"} 1).
- m0pub --id 1 after a worker of `--workers 2` was respawned (its loop
  began after id 1): exit 1, no id printed, and that loop counts it
  (reason="stale", 1 in all).
- a 70,000-byte line on m0pub's standard input between two short ones:
  exit 1, one line on stderr naming line 2, two ids printed, and the stream
  gets the two short lines' frames and no part of the long one.
- an external instance (tests/integration/wire_actor.py status:N) whose
  reply's status is 383, 299 (no status IANA's registry defines), 418
  (unused) or 305 (deprecated): the client gets 502, each counted once in
  m0_refused_total{actor="echo",reason="status"}; 429 and 308 (registered)
  reach the client as they are; 99 and 600 (a record that does not decode:
  docs/wire.md) are 502 too, counted as `batch`. A REPLY to no loop (0xffffffff) is counted
  as `address`, one whose batch head is 4 bytes as `batch`.
"""
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

import harness
from harness import Failures, Prefork, Server, children, m0pub, private_dir, run, wait_for, write_json
from hostile_actor import Pair1, replies
from rawhttp import Conn, request
from test_streams import Stream

F = Failures()
TMP = tempfile.mkdtemp(prefix="m0-refusals-")
HERE = os.path.dirname(os.path.abspath(__file__))
FORGED = "m0: forged"
ENV = struct.Struct("<IHHIIQQQI")  # runtime/envelope.h: magic kind flags from to seq trace_hi trace_lo length
MAGIC, KIND_REPLY = 0x3145306D, 13  # "m0E1"; runtime/kinds.h
APP, LOOP0 = 7 << 24, 2 << 24  # base/ids.h: an application actor's instance, loop.0


def refused(port):
    """m0_refused_total as {(actor, reason): n}."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {(a, r): int(n) for a, r, n in
            re.findall(r'^m0_refused_total\{actor="([^"]+)",reason="([^"]+)"\} (\d+)$', text, re.M)}


def reason_total(port, reason):
    return sum(n for (_, r), n in refused(port).items() if r == reason)


# ---- lines ---------------------------------------------------------------------------------------------------------

def lines():
    bad = "x\n" + FORGED + " line"
    cases = [(f"{var}", [], {var: bad}) for var in ("M0_RUN_DIR", "M0_TRACE", "M0_TOPOLOGY", "M0_TRUSTED_PROXIES")]
    cases += [(f"--{flag}", [f"--{flag}", bad], {}) for flag in ("run-dir", "trace", "topology", "trusted-proxies")]
    cases.append(("an unknown flag", ["--po\n" + FORGED], {}))
    for what, topo in (
            ("an actor's name", {"mode": "single", "actors": [{"name": "a\n" + FORGED, "url": "inproc://x"}]}),
            ("an app actor's URL", {"app_actors": [{"name": "echo", "placement": "external",
                                                     "url": "tcp://127.0.0.1:1\n" + FORGED}]}),
            ("a route's pattern", {"app_actors": [{"name": "echo", "placement": "thread"}],
                                   "routes": [{"method": "GET", "pattern": "/a\n" + FORGED, "actor": "echo"}]})):
        cases.append((f"the topology file ({what})", ["--topology", write_json(topo, TMP)], {}))
    for label, args, env in cases:
        rc, out, err = run("host_check", "--port", "0", *args, env=env)
        said = [l for l in err.splitlines() if l.startswith("m0")]
        F.check(rc in (2, 78), f"lines: {label}: refused (2 or 78: {rc})")
        F.check(said and not any(l.startswith(FORGED) for l in err.splitlines()),
                f"lines: {label}: no line of stderr is the forged one:\n{err[-600:]}")
        F.check("\\n" + FORGED in err, f"lines: {label}: the value is shown escaped:\n{err[-600:]}")
    rc, out, err = m0pub("--run-dir", "/tmp/x\n" + FORGED, "hello")
    F.check(rc == 78 and "\\n" + FORGED in err and not any(l.startswith(FORGED) for l in err.splitlines()),
            f"lines: m0pub --run-dir with a line break: 78, said escaped in one line ({rc}, {err!r})")
    # an unknown variable's name is said as a warning by a host that serves
    with Server("host_check", "--port", "0", env={"M0_X\n" + FORGED: "1"}) as srv:
        err = srv.stderr()
    F.check("M0_X\\n" + FORGED in err and not any(l.startswith(FORGED) for l in err.splitlines()),
            f"lines: an unknown variable's name is said escaped, on one line:\n{err[-600:]}")


# ---- m0pub ---------------------------------------------------------------------------------------------------------

def pub_refused():
    d = private_dir("rd-", TMP)
    with Server("host_check", "--port", "0", "--run-dir", d, "--metrics-path", "/metrics") as s:
        st = Stream(s.port, "/events")
        F.check(st.wait_frames(1, 5), f"m0pub: the stream beats ({st.ids()})")
        rc, out, err = m0pub("--run-dir", d, "--id", "999999", "ahead")
        F.check(rc == 1 and out.strip() == "" and len(err.splitlines()) == 1,
                f"m0pub --id 999999: exit 1, no id printed, one line ({rc}, {out!r}, {err!r})")
        F.check(wait_for(lambda: refused(s.port).get(("loop.0", "frame_id")) == 1, 5),
                f"m0pub --id 999999: loop.0 refused it, counted as frame_id ({refused(s.port)})")
        # a line longer than a frame holds, between two that fit
        rc, out, err = m0pub("--run-dir", d, "--event", "long", stdin=b"before\n" + b"x" * 70000 + b"\nafter\n")
        ids = out.split()
        F.check(rc == 1 and len(ids) == 2 and len(err.splitlines()) == 1 and "line 2" in err,
                f"m0pub: a 70,000-byte line is refused in one line naming it, exit 1, the two others published "
                f"({rc}, {ids}, {err!r})")
        got = wait_for(lambda: (lambda fs: fs if len(fs) >= 2 else None)(
            [f for f in list(st.frames) if f.event == "long"]), 10) or []
        F.check([f.data for f in got] == ["before", "after"],
                f"m0pub: the stream gets `before` and `after` and nothing of the long line "
                f"({[(f.id, (f.data or '')[:20]) for f in got]}; printed {ids}; the stream's last ids "
                f"{[f.id for f in list(st.frames)][-5:]}, eof {st.eof} {st.error if hasattr(st, 'error') else ''})")
        st.close()


def pub_stale():
    d = private_dir("rd-", TMP)
    with Prefork("host_check", "--port", "0", "--workers", "2", "--run-dir", d, "--metrics-path", "/metrics") as s:
        kids = wait_for(lambda: (lambda k: k if len(k) == 2 else None)(sorted(children(s.proc.pid))), 10) or []
        F.check(len(kids) == 2, f"stale: two workers ({kids})")
        st = Stream(s.port, "/events")
        F.check(st.wait_frames(2, 5), f"stale: beats go out ({st.ids()})")
        st.close()
        if not kids:
            return
        os.kill(kids[-1], signal.SIGKILL)
        F.check(wait_for(lambda: (lambda k: k if len(k) == 2 and kids[-1] not in k else None)(children(s.proc.pid)), 15),
                "stale: the killed worker is respawned")
        # id 1 went out before the new worker's loop began: that loop refuses it (the other one wrote it already).
        # Sent again until that loop has it: before its GO (first id on the page still 0) the frame is loop.0's
        # replay alone, which m0pub cannot see (exit 0), and a loop m0pub's dial has not reached is not sent to.
        seen = []

        def stale_once():
            r = m0pub("--run-dir", d, "--id", "1", "old")
            seen.append(r)
            return r[0] == 1 and "began serving" in r[2] and wait_for(lambda: reason_total(s.port, "stale") >= 1, 1)
        F.check(wait_for(stale_once, 20), f"stale: the respawned loop counts it (reason stale: {refused(s.port)})")
        F.check(seen and seen[-1][0] == 1 and seen[-1][1].strip() == "",
                f"stale: m0pub --id 1 exits 1 unprinted once that loop serves ({seen[-3:]})")


# ---- a reply's status ----------------------------------------------------------------------------------------------

def doctor_url(topo_path, rd):
    url, rc, out, err = harness.doctor_url(topo_path, "echo", rd)
    if url is None:
        F.check(False, f"the doctor names echo's url (rc {rc}): {out[-400:]} {err[-400:]}")
    return url or f"ipc://{rd}/actor.echo.sock"


def instances(port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    m = re.search(r'^m0_actor_instances\{actor="echo"\} (\d+)$', text, re.M)
    return int(m.group(1)) if m else None


def statuses():
    rd = private_dir("rd-", TMP)
    topo = write_json({"mode": "single", "app_actors": [{"name": "echo", "placement": "external"}],
                       "routes": [{"method": "GET", "pattern": "/actor/echo", "actor": "echo", "timeout_ms": 5000}]},
                      TMP)
    url = doctor_url(topo, rd)
    want = {383: 502, 299: 502, 418: 502, 305: 502, 429: 429, 308: 308, 99: 502, 600: 502}
    with Server("host_check", "--port", "0", "--metrics-path", "/metrics", "--topology", topo, "--run-dir", rd) as s:
        for status, expect in want.items():
            w = subprocess.Popen([sys.executable, os.path.join(HERE, "wire_actor.py"), url, f"status:{status}"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                F.check(wait_for(lambda: instances(s.port) == 1, 10), f"status {status}: the instance connects")
                with Conn(s.port, timeout=8) as c:
                    c.send(request("GET", "/actor/echo"))
                    got, _, _, _, line = c.try_response(timeout=8)
                F.check(got == expect, f"status {status}: the client gets {expect} ({line})")
            finally:
                w.kill()
                w.wait(5)
            wait_for(lambda: instances(s.port) == 0, 10)
        n = refused(s.port).get(("echo", "status"))
        F.check(n == 4, f"status: the four refused statuses are counted, once each (echo/status: {n})")
        n = refused(s.port).get(("echo", "batch"))
        F.check(n == 2, f"status: 99 and 600 (a record that does not decode) are counted as batch (echo/batch: {n})")
        # what an instance sends that the service or the loop cannot take: counted, by reason
        h = Pair1(url)
        try:
            F.check(wait_for(lambda: instances(s.port) == 1, 10), "misaddressed: the instance connects")
            body = replies([(1, 200, b"x")])
            h.send(ENV.pack(MAGIC, KIND_REPLY, 0, APP, 0xFFFFFFFF, 1, 0, 0, len(body)) + body)  # to no loop
            h.send(ENV.pack(MAGIC, KIND_REPLY, 0, APP, LOOP0, 2, 0, 0, 4) + b"\x01\x00\x00\x00")  # a 4-byte batch
            F.check(wait_for(lambda: refused(s.port).get(("echo", "address")) == 1 and
                             refused(s.port).get(("echo", "batch")) == 3, 5),
                    f"misaddressed: a REPLY to no loop is `address`, a bad batch head `batch`, once each "
                    f"({refused(s.port)})")
        finally:
            h.close()


try:
    for part in (lines, pub_refused, pub_stale, statuses):
        try:
            part()
        except Exception as e:  # noqa: BLE001 (one part's failure must not hide the others')
            F.check(False, f"{part.__name__}: {e!r}")
finally:
    shutil.rmtree(TMP, ignore_errors=True)
F.done()
