"""python/m0actor.py beyond serving requests: publishing, the kinds it does
not handle, and where `cmake --install` puts it (docs/wire.md, PUBLISH and
Reference instances; docs/building.md, Installing).

- The wire alone, with no host (a pair1 listener here, through the same
  libnng.so.1): an Instance's serve() ignores messages of kinds it does not
  handle (20, 21 and 999 are not refused as malformed) and still answers
  the REQUEST after them; a MESSAGE that calls is answered by a RETURN
  with on_message's answer, a send by an empty one (code 1), each to the
  MESSAGE's `from`; Instance.publish() sends one PUBLISH whose `from`
  is 0 and whose payload is encode_frame's (id 0, the channel, the lines);
  a STOP ends serve() with 0. encode_frame refuses what the host refuses
  (a blank line, an id line, CR, a channel beginning "m0.").
- An external instance that only publishes (Instance.serve without a
  receive on a thread, publish from the main one) into host_check's
  channel "beats": a client on /events (subscribed once its head came)
  gets each frame, numbered by the host, with the `from` left 0 — over the
  default ipc URL, and over plain tcp:// with a secret, where publish()
  waits for the proof (no frame dropped as unproved). Nothing is refused
  (m0_refused_total{actor="echo"} has no address or proof line). A request
  routed to that instance is answered 503 by it.
- Messages (docs/wire.md, Messages) to python/echo_actor.py placed
  external: host_check's /msg/call (m0_call from a thread of its own) is
  answered with echo's type-2 JSON (the data, the instance, its pid); five
  /msg/send (m0_send, each waiting for its RETURN) are all sent, and a call
  of type 4 says it counted five; a call of type 5 has no answer (ENODATA).
- `cmake --install` with DESTDIR under this test's output folder puts
  m0actor.py and echo_actor.py in the folder `pkg-config --variable=pythondir
  m0` (the installed m0.pc) and find_package(m0)'s m0_PYTHONDIR name, and
  Python imports m0actor from there.
"""
import ctypes
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading

import harness
from harness import BIN, Failures, Server, metric, private_dir, wait_for, with_free_port, write_json

F = Failures()
TMP = tempfile.mkdtemp(prefix="m0-m0actor-")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PYDIR = os.path.join(ROOT, "python")
sys.path.insert(0, PYDIR)
import m0actor  # noqa: E402

PUBLISHER = r"""
import sys, threading
sys.path.insert(0, sys.argv[1])
import m0actor
actor = m0actor.Instance(sys.argv[2])
threading.Thread(target=actor.serve, daemon=True).start()
for line in sys.stdin:
    ok = actor.publish("beats", "event: py\ndata: " + line.strip(), timeout=10)
    print("published" if ok else "not published", flush=True)
actor.stop()
"""


# ---- the wire alone ------------------------------------------------------------------------------------------


def wire_alone():
    lib = m0actor._nng()
    lib.nng_listen.argtypes = [m0actor._Socket, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
    lib.nng_listen.restype = ctypes.c_int
    host = m0actor._Socket()
    F.check(lib.nng_pair1_open(ctypes.byref(host)) == 0, "wire: a pair1 socket opens")
    lib.m0_set_ms(host, b"recv-timeout", 10000)
    url = f"ipc://{TMP}/wire.sock"
    F.check(lib.nng_listen(host, url.encode(), None, 0) == 0, f"wire: listening at {url}")
    actor = m0actor.Instance(url)
    seen = []
    served = []
    t = threading.Thread(target=lambda: served.append(actor.serve(lambda req: seen.append(req.path) or
                                                                   (200, [], b"ok"),
                                                                   on_message=lambda ty, d: (ty + 1, d[::-1]))),
                         daemon=True)
    t.start()

    def send(kind, payload=b"", frm=0x02000000, to=0x07000000):
        out = m0actor.encode_envelope(m0actor.Envelope(kind, frm, to, 1), payload)
        return lib.nng_send(host, out, len(out), 0)

    def recv():
        nmsg = ctypes.c_void_p()
        if lib.nng_recvmsg(host, ctypes.byref(nmsg), 0) != 0:
            return None, None
        try:
            msg = ctypes.string_at(lib.nng_msg_body(nmsg), lib.nng_msg_len(nmsg))
        finally:
            lib.nng_msg_free(nmsg)
        return m0actor.decode_envelope(msg)

    F.check(wait_for(lambda: actor._ready.is_set(), 10), "wire: the instance connects")
    for kind in (20, 21, 999):  # RETURN (the host never sends one), and kinds no wire has yet
        send(kind, b"\x01\x02\x03")
    req = m0actor.Request(id=7, method="GET", target="/after-unknown")
    send(m0actor.KIND_REQUEST, m0actor.encode_requests([req]))
    env, payload = recv()
    replies = m0actor.decode_replies(payload) if env and env.kind == m0actor.KIND_REPLY else []
    F.check(env is not None and env.kind == m0actor.KIND_REPLY and [(r.id, r.status) for r in replies] == [(7, 200)]
            and seen == ["/after-unknown"],
            f"wire: kinds 20, 21 and 999 are ignored and the REQUEST after them answered ({env}, {replies}, {seen})")
    # a call, then a send: each answered by one RETURN to its from
    caller = 0x08000003
    for call, want in ((9, (9, 2, m0actor.RETURN_ANSWERED, b"cba")), (0, (0, 0, m0actor.RETURN_NONE, b""))):
        send(m0actor.KIND_MESSAGE, struct.pack("<QIH", call, 1, 0) + b"abc", frm=caller, to=0x07000002)
        env, payload = recv()
        got = (struct.unpack_from("<QII", payload) + (payload[16:],)) if env and len(payload) >= 16 else None
        F.check(env is not None and env.kind == m0actor.KIND_RETURN and env.to == caller and env.frm == 0x07000002
                and got == want, f"wire: a MESSAGE (call {call}) is answered by one RETURN ({env}, {got})")
    F.check(actor.publish("news", "event: a\ndata: 1", timeout=5), "wire: publish() says it sent")
    env, payload = recv()
    F.check(env is not None and env.kind == m0actor.KIND_PUBLISH and env.frm == 0
            and payload == m0actor.encode_frame("news", "event: a\ndata: 1")
            and payload[:10] == b"\0" * 8 + b"\x04\0" and payload[10:] == b"newsevent: a\ndata: 1",
            f"wire: one PUBLISH from 0, id 0, channel then lines ({env}, {payload!r})")
    for ch, fr in (("news", "data: a\n\ndata: b"), ("news", "id: 5\ndata: x"), ("news", "data: a\r"),
                   ("news", "data: a\n"), ("m0.graph", "data: x"), ("two words", "data: x"), ("", "data: x")):
        try:
            m0actor.encode_frame(ch, fr)
            F.check(False, f"wire: encode_frame refuses channel {ch!r} frame {fr!r}")
        except ValueError:
            F.check(True, "")
    send(m0actor.KIND_STOP)
    t.join(10)
    F.check(not t.is_alive() and served == [0], f"wire: STOP ends serve() with 0 ({served})")
    F.check(not actor.publish("news", "data: late", timeout=0.2), "wire: publish() after serve() ended is False")
    lib.m0_close(host)


# ---- an instance that only publishes -------------------------------------------------------------------------


class Stream(harness.EventStream):
    """GET /events on a raw socket, its head read: subscribed to "beats"."""

    def frames(self):
        return [(int(m.group(1)), m.group(2).decode()) for m in
                re.finditer(rb"id: (\d+)\nevent: py\ndata: ([^\n]*)\n\n", self.buf)]


def publish_only(label, actor, secret=None):
    rd = private_dir("rd-", TMP)
    topo = {"mode": "single", "app_actors": [actor]}
    path = write_json(topo, TMP)
    url, rc, out, err = harness.doctor_url(path, "echo", rd)
    F.check(url is not None, f"{label}: the doctor names echo's url (rc {rc}): {err[-400:]}")
    if url is None:
        return
    quiet = {"M0_HOSTCHECK_PERIOD_MS": "100000"}  # the producer's one beat at GO, then none
    with Server("host_check", "--port", "0", "--metrics-path", "/metrics", "--topology", path, "--run-dir", rd,
                env=quiet) as s:
        st = Stream(s.port)
        F.check(st.head and st.buf.startswith(b"HTTP/1.1 200"), f"{label}: /events is open ({st.buf[:80]!r})")
        env = dict(os.environ)
        env.pop("M0_ACTOR_SECRET_FILE", None)
        if secret:
            env["M0_ACTOR_SECRET_FILE"] = secret
        p = subprocess.Popen([sys.executable, "-c", PUBLISHER, PYDIR, url], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            said = []
            for i in range(3):
                p.stdin.write(f"py-{i}\n")
                p.stdin.flush()
                said.append(readline(p, 15))
            F.check(said == ["published"] * 3, f"{label}: publish() says each frame went ({said})")
            F.check(st.until(lambda: len(st.frames()) >= 3, 10), f"{label}: the stream gets three frames")
            got = st.frames()
            ids = [i for i, _ in got]
            F.check([d for _, d in got] == ["py-0", "py-1", "py-2"] and ids == sorted(set(ids))
                    and ids[-1] == metric(s.port, "m0_events_published_total"),
                    f"{label}: a publish-only instance's frames (from 0) reach the subscriber in order, numbered "
                    f"by the host: {got}")
            for reason in ("address", "proof", "frame"):
                n = metric(s.port, f'm0_refused_total{{actor="echo",reason="{reason}"}}')
                F.check(not n, f"{label}: nothing of it refused as {reason} ({n})")
            code = get_status(s.port, "/actor/echo")
            F.check(code == 503, f"{label}: a request routed to the publish-only instance is answered 503 ({code})")
            p.stdin.close()
            rc = p.wait(10)
            F.check(rc == 0, f"{label}: the publisher exits 0 once its input ends ({rc}): {p.stderr.read()[-600:]}")
        finally:
            if p.poll() is None:
                p.kill()
                p.wait(5)
            st.close()


def readline(p, timeout):
    got = []
    t = threading.Thread(target=lambda: got.append(p.stdout.readline().strip()), daemon=True)
    t.start()
    t.join(timeout)
    return got[0] if got else None


def get_status(port, path):
    import urllib.error
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def key_file(name):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write("0123456789abcdef0123456789abcdef\n")
    os.chmod(path, 0o600)
    return path


# ---- messages ----------------------------------------------------------------------------------------------


def messages():
    import json
    rd = private_dir("rd-", TMP)
    path = write_json({"mode": "single", "app_actors": [{"name": "echo", "placement": "external"}]}, TMP)
    url, rc, out, err = harness.doctor_url(path, "echo", rd)
    if url is None:
        F.check(False, f"messages: the doctor names echo's url (rc {rc}): {err[-400:]}")
        return
    with Server("host_check", "--port", "0", "--metrics-path", "/metrics", "--topology", path, "--run-dir", rd) as s:
        p = subprocess.Popen([sys.executable, os.path.join(PYDIR, "echo_actor.py"), url, "2"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            F.check(wait_for(lambda: metric(s.port, 'm0_actor_instances{actor="echo"}') == 1, 10),
                    "messages: echo_actor.py connects")

            def call(query):
                code, body = get_body(s.port, "/msg/" + query)
                try:
                    return code, json.loads(body)
                except ValueError:
                    return code, body
            code, j = call("call?to=echo&data=hello")
            F.check(code == 200 and isinstance(j, dict) and j.get("type") == 2 and j.get("answer") ==
                    {"instance": 2, "actor": "echo", "pid": p.pid, "data": "hello"},
                    f"messages: m0_call is answered by the Python instance ({code} {j})")
            code, j = call("send?to=echo&n=5")
            F.check(code == 200 and j == {"sent": 5}, f"messages: five m0_send are sent ({code} {j})")
            code, j = call("call?to=echo&type=4")
            F.check(code == 200 and isinstance(j, dict) and j.get("answer") == {"instance": 2, "counted": 5},
                    f"messages: the instance counted the five sends ({code} {j})")
            code, j = call("call?to=echo&type=5")
            F.check(code == 502 and j == {"errno": "ENODATA"}, f"messages: a call with no answer ({code} {j})")
        finally:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)


def get_body(port, path):
    import urllib.error
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=15) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return None, str(e)


# ---- installed -----------------------------------------------------------------------------------------------


def installed():
    build_dir = os.path.dirname(BIN)
    out = harness.output_dir("test_m0actor")
    dest = os.path.join(out, "destdir")
    shutil.rmtree(dest, ignore_errors=True)
    prefix = "/opt/m0-test"
    p = subprocess.run(["cmake", "--install", build_dir, "--prefix", prefix], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, DESTDIR=dest))
    F.check(p.returncode == 0, f"install: cmake --install with DESTDIR ({(p.stdout + p.stderr)[-400:]})")
    root = dest + prefix
    pcs = [os.path.join(d, "m0.pc") for d, _, names in os.walk(root) if "m0.pc" in names]
    F.check(len(pcs) == 1, f"install: one m0.pc ({pcs})")
    if len(pcs) != 1:
        return
    p = subprocess.run(["pkg-config", "--variable=pythondir", "m0"], capture_output=True, text=True, timeout=10,
                       env=dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(pcs[0])))
    pydir = os.path.realpath(p.stdout.strip()) if p.returncode == 0 and p.stdout.strip() else ""
    F.check(pydir.startswith(os.path.realpath(root) + os.sep), f"install: m0.pc's pythondir is in the install "
                                                               f"({p.returncode}, {p.stdout!r} {p.stderr!r})")
    for name in ("m0actor.py", "echo_actor.py"):
        f = os.path.join(pydir, name)
        F.check(os.path.isfile(f) and open(f, "rb").read() == open(os.path.join(PYDIR, name), "rb").read(),
                f"install: {name} is in pythondir ({f})")
    F.check(os.access(os.path.join(pydir, "echo_actor.py"), os.X_OK), "install: echo_actor.py is executable")
    p = subprocess.run([sys.executable, "-s", "-c", "import m0actor; print(m0actor.__file__)"], capture_output=True,
                       text=True, timeout=10, env=dict(os.environ, PYTHONPATH=pydir), cwd=TMP)
    F.check(p.returncode == 0 and os.path.realpath(p.stdout.strip()) == os.path.join(pydir, "m0actor.py"),
            f"install: Python imports m0actor from pythondir ({p.stdout!r} {p.stderr[-300:]!r})")
    # find_package(m0) names the same folder
    cm = [d for d, _, names in os.walk(root) if "m0Config.cmake" in names]
    proj = os.path.join(out, "find-pythondir")
    shutil.rmtree(proj, ignore_errors=True)
    os.makedirs(proj)
    with open(os.path.join(proj, "CMakeLists.txt"), "w") as f:
        f.write("cmake_minimum_required(VERSION 3.18)\nproject(find_pythondir C)\nfind_package(m0 REQUIRED)\n"
                "message(STATUS \"m0_PYTHONDIR=${m0_PYTHONDIR}\")\n")
    p = subprocess.run(["cmake", "-S", proj, "-B", os.path.join(proj, "b"), f"-Dm0_DIR={cm[0] if cm else ''}"],
                       capture_output=True, text=True, timeout=120)
    m = re.search(r"m0_PYTHONDIR=(\S+)", p.stdout)
    F.check(p.returncode == 0 and m and os.path.realpath(m.group(1)) == pydir,
            f"install: find_package(m0)'s m0_PYTHONDIR is pythondir ({(p.stdout + p.stderr)[-500:]})")


# ---- main ----------------------------------------------------------------------------------------------------

wire_alone()
publish_only("ipc", {"name": "echo", "placement": "external"})
key = key_file("echo.key")
with_free_port(lambda port: publish_only("tcp with a secret", {"name": "echo", "placement": "external",
                                                               "url": f"tcp://127.0.0.1:{port}", "secret": key},
                                         secret=key))
messages()
installed()
shutil.rmtree(TMP, ignore_errors=True)
F.done()
