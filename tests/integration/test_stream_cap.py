"""A stream whose client stops reading is capped at 64 KiB of queued frames:
beyond it frames are dropped for that stream alone and counted
(m0_stream_frames_dropped_total), while a stream that reads, on the same
loop, receives every frame with contiguous ids."""
import os
import re
import socket
import subprocess
import tempfile
import urllib.request

from harness import BIN, Failures, Server, wait_for
from test_streams import Stream

F = Failures()
run_dir = tempfile.mkdtemp()
os.chmod(run_dir, 0o700)
N = 200
with Server("host_check", "--port", "0", "--run-dir", run_dir, "--metrics-path", "/metrics",
            env={"M0_HOSTCHECK_PERIOD_MS": "100000"}) as s:
    stuck = socket.socket()
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stuck.connect(("127.0.0.1", s.port))
    stuck.sendall(b"GET /events HTTP/1.1\r\nHost: t\r\n\r\n")
    # Its head read (the loop made it a stream before writing the head), then never read again.
    stuck.settimeout(5)
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = stuck.recv(1)
        if not chunk:
            break
        head += chunk
    F.check(head.startswith(b"HTTP/1.1 200"), f"the stream that stops reading was opened ({head[:60]!r})")
    reader = Stream(s.port, "/events")  # its head is read too: both are streams before the publish
    # One frame at a time, the next only when the reading stream has this
    # one: the cap is two 30-KB frames, so a reader slower than the publisher
    # (a loaded machine, a sanitized host) would meet it too if the frames
    # came all at once. The stream that stops reading meets it either way.
    line = "x" * 30000
    pub = subprocess.Popen([os.path.join(BIN, "m0pub"), "--run-dir", run_dir, "--event", "big"],
                           stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    def got():
        return len([f for f in list(reader.frames) if "big" in f.raw])
    for i in range(N):
        pub.stdin.write(f"{i}{line}\n")
        pub.stdin.flush()
        if not wait_for(lambda: got() > i, 30):
            break
    pub.stdin.close()
    err = pub.stderr.read()
    rc = pub.wait(timeout=30)
    F.check(rc == 0, f"m0pub published {N} frames of 30 KB ({err[-200:]})")
    ids = [f.id for f in reader.frames if "big" in f.raw]
    F.check(len(ids) == N and ids == list(range(ids[0], ids[0] + N)) if ids else False,
            f"the reading stream got all {N} frames, ids contiguous (got {len(ids)})")
    text = urllib.request.urlopen(s.url("/metrics"), timeout=5).read().decode()
    dropped = sum(int(v) for v in re.findall(r'^m0_stream_frames_dropped_total\{[^}]*\} (\d+)', text, re.M))
    F.check(dropped > 0, f"frames for the stream that stopped reading were dropped and counted ({dropped}; the kernel's socket buffers took the rest)")
    reader.close()
    stuck.close()
    F.check(s.stop() == 0, "exit 0")
F.done()
