"""An external actor instance in a second language, written from docs/wire.md
alone (issue 39, item 6): tests/integration/node_actor.js, Node's standard
library only, speaking nng's SP pair1 framing itself over a unix socket and
TCP (docs/wire.md, SP framing, without nng).

host_check --threads 2 with its actor `echo` placed external, served by the
node instance alone, over the default ipc:// URL and over plain tcp:// with
a key file (the instance answers HELLO's challenge):

- GET and POST /actor/echo are answered 200 by the node instance (its pid,
  "lang":"node", the method, path, query and body it decoded);
- m0_call through /msg/call is answered with the instance's RETURN (its
  pid, the type and data it was sent), m0_send through /msg/send is sent;
- a frame the instance PUBLISHes (from 0) reaches a client of /events;
- nothing it sent is refused (m0_refused_total for echo: none);
- SIGHUP: the instance hears the reload's STOP, redials, and serves the
  next generation (the same pid); SIGTERM: the host stops, the instance
  hears the STOP that ends it and exits 0.

Skipped (exit 77, which ctest counts as a skip: tests/CMakeLists.txt) only
when node is not installed (Debian package nodejs; ./dev installs it).
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

import harness
from harness import Failures, sanitizer_report, Server, private_dir, run_parts, wait_for, with_free_port, write_json

NODE = shutil.which("node") or shutil.which("nodejs")
if not NODE:
    print("SKIP: node is not installed (Debian package nodejs: ./dev installs it); "
          "the node instance of test_node_actor did not run", flush=True)
    sys.exit(77)

F = Failures()
HERE = os.path.dirname(os.path.abspath(__file__))
JS = os.path.join(HERE, "node_actor.js")
TMP = tempfile.mkdtemp(prefix="m0-node-")
SERVING = re.compile(r"^m0: reload: generation (\d+) serving", re.M)
PROGRAMS = []


def fetch(port, path, data=None):
    """(status, body) of one request, or (None, error)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", data=data, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError as e:
        return None, repr(e).encode()


def node_answer(port, pid, path="/actor/echo", data=None):
    """The JSON the node instance (pid) answered path with, or None."""
    st, body = fetch(port, path, data)
    j = harness.as_json(body) if st == 200 else None
    return j if j and j.get("lang") == "node" and j.get("pid") == pid else None


def node(url, label, secret):
    log = open(os.path.join(TMP, label + ".log"), "w+")
    env = dict(os.environ)
    env.pop("M0_ACTOR_SECRET_FILE", None)
    if secret:
        env["M0_ACTOR_SECRET_FILE"] = secret
    p = subprocess.Popen([NODE, JS, url, "0"], stdout=log, stderr=subprocess.STDOUT, env=env)
    p.log = log.name
    PROGRAMS.append(p)
    return p


def said(p, text):
    with open(p.log) as f:
        return f.read().count(text)


def refused(port):
    st, body = fetch(port, "/metrics")
    return re.findall(r'^m0_refused_total\{actor="echo",reason="([^"]+)"\} ([1-9]\d*)$',
                      body.decode(errors="replace"), re.M) if st == 200 else ["no /metrics"]


def serves(s, p, label):
    """GET, POST, /msg/call, /msg/send and a published frame, each once."""
    got = {}

    def answered():
        got["j"] = node_answer(s.port, p.pid, "/actor/echo?a=1")
        return got["j"] is not None
    F.check(wait_for(answered, 15),
            f"{label}: GET /actor/echo is answered 200 by the node instance:\n{open(p.log).read()[-800:]}\n"
            f"{s.stderr()[-800:]}")
    j = got.get("j") or {}
    F.check((j.get("actor"), j.get("method"), j.get("path"), j.get("query")) == ("echo", "GET", "/actor/echo", "a=1"),
            f"{label}: it decoded the request ({j})")
    j = node_answer(s.port, p.pid, data=b"hello from a client") or {}
    F.check((j.get("method"), j.get("body")) == ("POST", "hello from a client"), f"{label}: POST's body ({j})")
    st, body = fetch(s.port, "/msg/call?to=echo&type=7&data=ping")
    j = harness.as_json(body) or {}
    F.check(st == 200 and j.get("answer") == {"lang": "node", "pid": p.pid, "type": 7, "data": "ping"},
            f"{label}: m0_call is answered by the node instance's RETURN ({st} {body[:300]!r})")
    st, body = fetch(s.port, "/msg/send?to=echo")
    F.check(st == 200 and (harness.as_json(body) or {}).get("sent") == 1, f"{label}: m0_send sent ({st} {body!r})")
    st = harness.EventStream(s.port)
    try:
        F.check(st.head and st.buf.startswith(b"HTTP/1.1 200"), f"{label}: /events is open ({st.buf[:80]!r})")
        node_answer(s.port, p.pid, f"/actor/echo?publish=hi-{label.replace(' ', '-')}")
        want = f"event: node\ndata: hi-{label.replace(' ', '-')}\n\n".encode()
        F.check(st.until(lambda: want in st.buf, 10),
                f"{label}: the frame the node instance published reaches /events ({st.buf[-300:]!r})")
    finally:
        st.close()
    F.check(said(p, "published 1") == 1, f"{label}: the instance published once")
    F.check(refused(s.port) == [], f"{label}: nothing the node instance sent was refused ({refused(s.port)})")


def scenario(label, actor, secret=None):
    rd = private_dir("rd-", TMP)
    path = write_json({"app_actors": [actor]}, TMP)
    url, rc, out, err = harness.doctor_url(path, "echo", rd)
    F.check(url is not None, f"{label}: the doctor names echo's url (rc {rc}): {err[-400:]}")
    if url is None:
        return
    quiet = {"M0_HOSTCHECK_PERIOD_MS": "100000"}  # the producer's beats stay out of the stream
    with Server("host_check", "--port", "0", "--threads", "2", "--metrics-path", "/metrics", "--topology", path,
                "--run-dir", rd, env=quiet) as s:
        p = node(url, label.replace(" ", "-"), secret)
        serves(s, p, label)
        if secret:
            F.check(said(p, "proved") >= 1, f"{label}: the instance answered the challenge")
        os.kill(s.proc.pid, signal.SIGHUP)
        F.check(wait_for(lambda: any(int(g) == 2 for g in SERVING.findall(s.stderr())), 20),
                f"{label}: generation 2 serves after SIGHUP:\n{s.stderr()[-1200:]}")
        F.check(wait_for(lambda: said(p, "the host reloads") == 1, 15),
                f"{label}: the instance heard the reload's STOP:\n{open(p.log).read()[-600:]}")
        F.check(wait_for(lambda: node_answer(s.port, p.pid) is not None, 15),
                f"{label}: the instance redialed and serves generation 2 (same pid):\n{open(p.log).read()[-600:]}")
        F.check(said(p, "connected") >= 2, f"{label}: it connected again ({said(p, 'connected')})")
        s.signal(signal.SIGTERM)
        F.check(s.wait(15) == 0 and not sanitizer_report(s.stderr()),
                f"{label}: the host exits 0 on SIGTERM, no sanitizer report:\n{s.stderr()[-1500:]}")
        try:
            rc = p.wait(10)
        except subprocess.TimeoutExpired:
            rc = None
        F.check(rc == 0 and said(p, "the host stops") == 1,
                f"{label}: the instance ends 0 on the STOP that ends it ({rc}):\n{open(p.log).read()[-600:]}")


def key_file(name):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(os.urandom(24).hex() + "\n")
    os.chmod(path, 0o600)
    return path


def tcp():
    key = key_file("echo.key")
    with_free_port(lambda port: scenario("tcp with a secret", {"name": "echo", "placement": "external",
                                                               "url": f"tcp://127.0.0.1:{port}", "secret": key},
                                         secret=key))


print(f"node {subprocess.run([NODE, '--version'], capture_output=True, text=True).stdout.strip()}", flush=True)
run_parts(F, [("ipc", lambda: scenario("ipc", {"name": "echo", "placement": "external"})),
              ("tcp with a secret", tcp)], PROGRAMS, TMP)
