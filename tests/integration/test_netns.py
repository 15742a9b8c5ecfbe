"""Across machines on one host (docs/topology.md, Across machines: the same
topology with tcp:// URLs, tested between network namespaces).

Two network namespaces A and B joined by a veth pair (10.77.0.1/24 in A,
10.77.0.2/24 in B; both ends and both `lo` up). host_check runs in B with a
threads-2 topology file whose loops' mailboxes listen on tcp://10.77.0.2:<port>
(coordinator and producer on tcp://127.0.0.1 inside B; the loops' links listed
in the file's `plain_tcp`, without which plain tcp off loopback is refused), `--run-dir DIR
--host 10.77.0.2 --port 0`, beat period 100 ms.

Proves:
- The doctor accepts the file and prints exactly its tcp URLs.
- In B the host listens on each actor's tcp port (loops on 10.77.0.2) and
  holds established TCP connections to both loops' ports: the bus runs over
  tcp://, not inproc.
- From A (a client process inside namespace A, so every byte crosses the
  veth; its local address is 10.77.0.1), four GET
  http://10.77.0.2:P/events streams span both loops (x-worker 0 and 1, else
  the check fails as vacuous) and the producer's beats, sent to the loops over
  the tcp:// URLs, reach every stream with contiguous ids, the very same ids
  on each (>= 10: the note and the ten after it).
- `m0pub --run-dir DIR --event note ...` run inside A (it dials the run dir's
  ipc sockets, which a filesystem path reaches from any namespace) puts its
  frame on every stream with the id it printed, inside the one contiguous
  sequence.
- SIGTERM -> exit 0.
If namespaces cannot be made here (not root, no iproute2, no permission, no
veth), it prints `SKIP: <reason>` and exits 0. Namespaces are deleted in a
finally block, whatever happened.
"""
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import harness
from harness import BIN, Failures, wait_for
from netns import Netns, sh
from test_streams import contiguous

F = Failures()
NET = Netns("m0", "10.77.0")
NS_A, NS_B, ADDR_A, ADDR_B = NET.a, NET.b, NET.addr_a, NET.addr_b

# Runs inside namespace A: opens n streams one after another, reads each until
# it holds an `event: note` and 10 beats after it (at most `seconds`), prints
# one JSON object. Standard library only.
CLIENT = r'''
import json, socket, sys, threading, time
host, port, n, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
out = []
def head(sock):
    buf = b""
    deadline = time.monotonic() + 5
    while b"\r\n\r\n" not in buf and time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        c = sock.recv(65536)
        if not c:
            break
        buf += c
    h, _, rest = buf.partition(b"\r\n\r\n")
    return h.decode("latin-1"), rest
streams = []
for i in range(n):
    s = socket.create_connection((host, port), timeout=5)
    s.sendall(f"GET /events HTTP/1.1\r\nHost: {host}\r\nAccept: text/event-stream\r\n\r\n".encode())
    h, rest = head(s)
    lines = h.split("\r\n")
    hdr = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        hdr.setdefault(k.strip().lower(), v.strip())
    streams.append({"sock": s, "status": lines[0], "worker": hdr.get("x-worker"),
                    "ctype": hdr.get("content-type"), "local": s.getsockname()[0], "buf": rest})
print("OPEN", flush=True)
def read(st):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        st["sock"].settimeout(max(0.01, min(0.1, end - time.monotonic())))
        try:
            c = st["sock"].recv(65536)
        except (socket.timeout, TimeoutError):
            continue
        except OSError:
            break
        if not c:
            break
        st["buf"] += c
        at = st["buf"].find(b"event: note")
        if at >= 0 and st["buf"].count(b"event: beat", at) >= 10:
            break  # the note, then 10 beats: every stream shares the note and the 10 ids after it
ts = [threading.Thread(target=read, args=(st,)) for st in streams]
for t in ts: t.start()
for t in ts: t.join()
res = []
for st in streams:
    frames = []
    for text in st["buf"].replace(b"\r\n", b"\n").decode("utf-8", "replace").split("\n\n"):
        if not text.strip() or text.startswith(":"):
            continue
        f = {}
        first = text.split("\n")[0]
        for line in text.split("\n"):
            k, _, v = line.partition(": ")
            f.setdefault(k, v)
        f["id_first"] = first.startswith("id: ")
        frames.append(f)
    st["sock"].close()
    res.append({"status": st["status"], "worker": st["worker"], "ctype": st["ctype"], "local": st["local"],
                "frames": frames})
print(json.dumps(res), flush=True)
'''


def main():
    NET.prerequisites()
    tmp = tempfile.mkdtemp(prefix="m0-netns-")
    run_dir = os.path.join(tmp, "run")
    os.mkdir(run_dir, 0o700)
    os.chmod(run_dir, 0o700)
    host = client = None
    try:
        NET.setup()
        base = 20000 + (os.getpid() % 20000)
        names = ["coordinator", "producer", "loop.0", "loop.1"]
        urls = [f"tcp://127.0.0.1:{base}", f"tcp://127.0.0.1:{base + 1}", f"tcp://{ADDR_B}:{base + 2}",
                f"tcp://{ADDR_B}:{base + 3}"]
        topo = {"mode": "threads", "loops": 2, "handler_threads": 0, "connections_per_loop": 1024,
                "accept_sharing": True, "transport": "tcp",
                "actors": [{"name": n, "url": u} for n, u in zip(names, urls)],
                # plain tcp off loopback is refused unless the file says so, link by link
                "plain_tcp": urls[2:]}
        path = os.path.join(tmp, "topology.json")
        with open(path, "w") as f:
            json.dump(topo, f, indent=2)
        hc = os.path.join(BIN, "host_check")
        rc, out, err = sh("ip", "netns", "exec", NS_B, hc, "--doctor", "--topology", path)
        try:
            d = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            d = {}
        F.check(rc == 0 and d.get("ok") is True, f"doctor in B: the tcp topology is accepted ({rc}, {err})")
        F.check(d.get("topology", {}).get("actors") == topo["actors"],
                f"doctor in B: its actors are the file's tcp URLs ({d.get('topology', {}).get('actors')})")

        errf = open(os.path.join(tmp, "host.err"), "w+b")
        env = dict(os.environ, M0_HOSTCHECK_PERIOD_MS="100")
        host = subprocess.Popen(["ip", "netns", "exec", NS_B, hc, "--topology", path, "--run-dir", run_dir,
                                 "--host", ADDR_B, "--port", "0"], stdout=subprocess.DEVNULL, stderr=errf, env=env)

        def herr():
            return harness.read_log(errf)

        m = wait_for(lambda: re.search(rf"listening on http://{re.escape(ADDR_B)}:(\d+) ", herr())
                     or host.poll() is not None, 10)
        m = re.search(rf"listening on http://{re.escape(ADDR_B)}:(\d+) ", herr())
        F.check(m is not None, f"host in B: listens on http://{ADDR_B}:P (rc {host.poll()}):\n{herr()}")
        if not m:
            return
        port = int(m.group(1))
        try:
            comm = open(f"/proc/{host.pid}/comm").read().strip()
        except OSError:
            comm = None
        F.check(comm == "host_check", f"host in B: `ip netns exec` ran host_check as pid {host.pid} ({comm})")
        F.check("(threads, 2 loops" in herr(), f"host in B: threads, 2 loops ({herr()[:200]})")

        # The bus runs over tcp:// inside B.
        socks = NET.tcp(NS_B, host.pid)
        for n, u in zip(names, urls):
            ip, p = u[len("tcp://"):].rsplit(":", 1)
            F.check(any(l == (ip, int(p)) and st == "0A" for l, r, st in socks),
                    f"host in B: {n} listens on {ip}:{p} ({socks})")
        for n, u in zip(names[2:], urls[2:]):
            ip, p = u[len("tcp://"):].rsplit(":", 1)
            F.check(any(r == (ip, int(p)) and st == "01" for l, r, st in socks),
                    f"host in B: established TCP connections to {n} at {ip}:{p} ({socks})")

        # The client in A.
        client = subprocess.Popen(["ip", "netns", "exec", NS_A, sys.executable, "-c", CLIENT, ADDR_B, str(port), "4",
                                   "15"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        ready, _, _ = select.select([client.stdout], [], [], 10)
        line = client.stdout.readline().decode() if ready else ""
        F.check(line.strip() == "OPEN", f"client in A: four streams opened ({line!r})")  # their heads read
        rc, out, err = sh("ip", "netns", "exec", NS_A, os.path.join(BIN, "m0pub"), "--run-dir", run_dir, "--event",
                          "note", "across", "namespaces")
        F.check(rc == 0 and out.strip().isdigit(), f"m0pub in A: exit 0 and an id ({rc}, {out!r}, {err!r})")
        note_id = int(out.strip()) if out.strip().isdigit() else None
        try:
            cout, cerr = client.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            client.kill()
            cout, cerr = client.communicate(timeout=5)
        try:
            res = json.loads(cout.decode().strip().splitlines()[-1])
        except (ValueError, IndexError):
            res = None
        F.check(isinstance(res, list) and len(res) == 4, f"client in A: a result for four streams "
                                                         f"({cout[-300:]!r}, {cerr[-300:]!r})")
        if not res:
            return
        label = "from A"
        F.check(all(r["status"].split(" ")[1:2] == ["200"] and (r["ctype"] or "").startswith("text/event-stream")
                    for r in res), f"{label}: four 200 text/event-stream answers ({[r['status'] for r in res]})")
        F.check(all(r["local"] == ADDR_A for r in res),
                f"{label}: the client's address is {ADDR_A}: it crossed the veth ({[r['local'] for r in res]})")
        workers = [r["worker"] for r in res]
        F.check(set(workers) == {"0", "1"},
                f"{label}: the streams span both loops, else this proves nothing (x-worker {workers})")
        beats = [[int(f["id"]) for f in r["frames"] if f.get("event") == "beat"] for r in res]
        allids = [[int(f["id"]) for f in r["frames"] if "id" in f] for r in res]
        for i, (b, a) in enumerate(zip(beats, allids)):
            F.check(len(b) >= 10, f"{label}: stream {i} (x-worker {workers[i]}) got >= 10 beats over tcp "
                                  f"({len(b)})")
            F.check(contiguous(a), f"{label}: stream {i}: ids (beats and the note) contiguous ({a})")
            F.check(all(f["id_first"] for f in res[i]["frames"]), f"{label}: stream {i}: `id:` first in every frame")
        if all(allids):
            lo, hi = max(l[0] for l in allids), min(l[-1] for l in allids)
            want = list(range(lo, hi + 1))
            F.check(len(want) >= 10, f"{label}: the streams share >= 10 ids ({lo}..{hi})")
            F.check(all([x for x in l if lo <= x <= hi] == want for l in allids),
                    f"{label}: every stream carries every id {lo}..{hi} exactly once ({allids})")
        notes = [[f for f in r["frames"] if f.get("event") == "note"] for r in res]
        F.check(note_id is not None and all(len(n) == 1 and int(n[0]["id"]) == note_id
                                            and n[0].get("data") == "across namespaces" for n in notes),
                f"{label}: m0pub's note reached every stream once with its id {note_id} ({notes})")

        t0 = time.monotonic()
        os.kill(host.pid, signal.SIGTERM)
        try:
            rc = host.wait(timeout=8)
        except subprocess.TimeoutExpired:
            rc = None
        F.check(rc == 0, f"host in B: SIGTERM -> exit 0 ({rc}, {time.monotonic() - t0:.2f}s):\n{herr()[-600:]}")
    finally:
        for p in (client, host):
            if p and p.poll() is None:
                p.kill()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
        NET.teardown(F)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
    F.done()
