"""systemd: readiness (READY=1 once every loop serves, STOPPING=1 at the
drain) on $NOTIFY_SOCKET, in single, threads and prefork mode; and socket
activation: a listener handed over as descriptor 3 with LISTEN_PID/LISTEN_FDS
is served instead of binding (the flag's port is never bound)."""
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

import harness
from harness import BIN, Failures, Server

f = Failures()


def notify_run(args):
    d = tempfile.mkdtemp()
    path = os.path.join(d, "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(10)
    with Server("host_check", "--port", "0", *args, env={"NOTIFY_SOCKET": path}) as s:
        got = sock.recv(64)
        # READY comes after the listening line, when every loop serves.
        ok = urllib.request.urlopen(s.url("/health"), timeout=5).status == 200
        f.check(got == b"READY=1" and ok, f"{args}: READY=1 once serving (got {got!r})")
        s.signal(signal.SIGTERM)
        got = sock.recv(64)
        f.check(got == b"STOPPING=1", f"{args}: STOPPING=1 at the drain (got {got!r})")
        f.check(s.wait(10) == 0, f"{args}: exit 0")
    sock.close()


for args in ([], ["--threads", "2"], ["--workers", "2"]):
    notify_run(args)

# Socket activation: we bind, the server serves it as fd 3.
lsock = socket.socket()
lsock.bind(("127.0.0.1", 0))
lsock.listen(16)
port = lsock.getsockname()[1]
unused = socket.socket()
unused.bind(("127.0.0.1", 0))
flag_port = unused.getsockname()[1]
unused.close()


for args in ([], ["--workers", "2"]):
    err = harness.log_file()
    env = dict(os.environ, LISTEN_FDS="1")
    # LISTEN_PID must be the server's own pid: set in the child before exec.
    p = subprocess.Popen(["/bin/sh", "-c", 'export LISTEN_PID=$$; exec "$0" "$@"', os.path.join(BIN, "host_check"),
                          "--port", str(flag_port), *args], env=env, stderr=err, pass_fds=(lsock.fileno(), 3),
                         preexec_fn=lambda: os.dup2(lsock.fileno(), 3))
    body = None
    deadline = time.monotonic() + 10
    while body is None and time.monotonic() < deadline and p.poll() is None:
        try:
            body = urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
        except OSError:
            time.sleep(0.05)
    f.check(body == b'{"status":"ok"}', f"{args}: the activated listener is served")
    probe = socket.socket()
    probe.settimeout(2)
    f.check(probe.connect_ex(("127.0.0.1", flag_port)) != 0, f"{args}: the flag's port was not bound")
    probe.close()
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = None
    f.check(rc == 0, f"{args}: exit 0 after SIGTERM (rc={rc}) {harness.read_log(err)[-300:]}")

f.done()
