"""The family's seal proves its message and is never taken twice
(runtime/seal.h; docs/wire.md, The seal), and a handed-over descriptor is
checked before a loop adopts it (transport/handoff.h).

An attacker as the issue's: root on this machine, reading loopback. With a
topology file whose every actor listens on tcp://127.0.0.1:PORT, a packet
socket on `lo` captures the host's own sealed envelopes on their way to
loop.0's mailbox; the test then sends them back, over nng's SP framing, to
the mailbox they were meant for:
- single mode: the coordinator's sealed GO, replayed as it was, is refused
  and counted (`m0_refused_total{actor="loop.0",reason="replay"} 1`) and
  named in one line (`m0: loop.0 refused a go message from tcp peer ...
  (replay: `); the same GO with its kind made STOP and its seal kept is
  refused as a seal that is not this message's (`reason="seal"`); the host
  still answers /health, still listens on its port, and drains to exit 0
  (before the seal was bound to its message, a STOP made this way closed
  the listener without a word).
- prefork (`--workers 2 --max-requests 20`): the STOP worker 0's
  coordinator sent its loop when it recycled is captured; replayed to the
  worker that replaced it (a fresh mailbox at the same address, which never
  heard the old worker), it is refused as a replay, counted, and that
  worker still serves.
- prefork: through the descriptor-passing socket of loop 1 (its sending end
  taken from a worker with pidfd_getfd), a descriptor that is no socket (a
  pipe) is handed over: loop.1 refuses it
  (`m0_refused_total{actor="loop.1",reason="unexpected"}`), says so once,
  nothing aborts, and every worker still serves (before the check, a
  HANDOFF naming the page file aborted the host).

Skipped (exit 0, `SKIP:`) where a packet socket or pidfd_getfd is refused
(not root, an old kernel).
"""
import ctypes
import json
import os
import re
import signal
import socket
import struct
import sys
import tempfile
import threading
import urllib.request

from harness import Failures, Prefork, SPPeer, Server, children, get, listens, port_map, wait_for

F = Failures()
TMP = tempfile.mkdtemp(prefix="m0-seal-")
MAGIC = b"m0E1"  # 0x3145306d, little-endian (runtime/envelope.h)
K_GO, K_STOP = 3, 4  # runtime/kinds.h
LOOP0 = 2 << 24
SINGLE = ["coordinator", "producer", "loop.0"]
PREFORK = ["coordinator", "producer", "worker.0", "worker.1", "loop.0", "loop.1"]


def skip(reason):
    print(f"SKIP: {reason}", flush=True)
    sys.exit(0)


def topology(names, mode, loops, ports):
    path = os.path.join(TMP, f"topo-{mode}.json")
    with open(path, "w") as fh:
        json.dump({"mode": mode, "loops": loops, "transport": "tcp",
                   "actors": [{"name": n, "url": f"tcp://127.0.0.1:{ports[n]}"} for n in names]}, fh)
    return path


class Sniffer:
    """Every envelope seen on loopback on its way to TCP port `port`: a
    packet socket on `lo` (root only), SP frames found by the envelope's
    magic after their 8-byte length."""

    def __init__(self, port):
        self.port = port
        self.bodies = []
        self.lock = threading.Lock()
        self.halt = threading.Event()
        self.s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(0x0003))
        # Only this port's segments, kept in the kernel's queue while the
        # thread is slow: a loaded machine's loopback carries other tests'
        # traffic, which filled the queue and lost the GO once.
        self.s.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE
        prog = [(0x28, 0, 0, 12), (0x15, 0, 8, 0x800),  # IPv4
                (0x30, 0, 0, 23), (0x15, 0, 6, 6),  # TCP
                (0x28, 0, 0, 20), (0x45, 4, 0, 0x1FFF),  # not a fragment
                (0xB1, 0, 0, 14), (0x48, 0, 0, 16), (0x15, 0, 1, port),  # destination port
                (0x06, 0, 0, 0x40000), (0x06, 0, 0, 0)]
        self.prog = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *ins) for ins in prog))
        self.s.setsockopt(socket.SOL_SOCKET, 26,  # SO_ATTACH_FILTER: struct sock_fprog
                          struct.pack("HxxxxxxQ", len(prog), ctypes.addressof(self.prog)))
        self.s.bind(("lo", 0))
        self.s.settimeout(0.1)
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.halt.is_set():
            try:
                pkt, addr = self.s.recvfrom(65536)
            except OSError:
                continue
            if addr[2] == socket.PACKET_OUTGOING or len(pkt) < 54 or pkt[12:14] != b"\x08\x00":
                continue  # each loopback packet is seen twice; IPv4 only
            ip = pkt[14:]
            ihl, total = (ip[0] & 15) * 4, struct.unpack(">H", ip[2:4])[0]
            if ip[9] != 6:
                continue
            tcp = ip[ihl:total]
            if struct.unpack(">H", tcp[2:4])[0] != self.port:
                continue
            data = tcp[(tcp[12] >> 4) * 4:]
            at = data.find(MAGIC, 8)
            while at >= 8:
                n = int.from_bytes(data[at - 8:at], "big")
                if len(data) - at >= n:
                    with self.lock:
                        self.bodies.append(bytes(data[at:at + n]))
                at = data.find(MAGIC, at + 4)

    def sealed(self, kind):
        """The sealed envelopes of `kind` seen so far."""
        with self.lock:
            return [b for b in self.bodies if len(b) >= 44 and struct.unpack("<HH", b[4:8]) == (kind, 1)]

    def close(self):
        self.halt.set()
        self.t.join(timeout=5)
        self.s.close()



def replay(port, body, label):
    p = SPPeer(("tcp", port), timeout=5)
    F.check(p.ok, f"{label}: the mailbox answers the SP handshake")
    p.send(body)
    return p


def refused(port):
    """m0_refused_total's samples on /metrics: {(actor, reason): n}."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {(a, r): int(n) for a, r, n in
            re.findall(r'^m0_refused_total\{actor="([^"]+)",reason="([^"]+)"\} (\d+)$', text, re.M)}


def health(port):
    try:
        return get(port, "/health")[0] == 200
    except OSError:
        return False


def single():
    label = "single"
    ports = port_map(SINGLE)
    sniff = Sniffer(ports["loop.0"])
    try:
        with Server("host_check", "--port", "0", "--topology", topology(SINGLE, "single", 1, ports),
                    "--metrics-path", "/metrics") as s:
            gos = wait_for(lambda: sniff.sealed(K_GO), 10)
            F.check(gos, f"{label}: the coordinator's sealed GO to loop.0 was seen on loopback")
            if not gos:
                return
            go = gos[0]
            F.check(refused(s.port) == {}, f"{label}: nothing refused before the replay ({refused(s.port)})")
            peer = replay(ports["loop.0"], go, f"{label}, GO replayed")
            F.check(wait_for(lambda: refused(s.port).get(("loop.0", "replay")) == 1, 10),
                    f"{label}: the GO replayed is refused as a replay and counted ({refused(s.port)})")
            # the same seal on a STOP: the silent outage
            stop = go[:4] + struct.pack("<H", K_STOP) + go[6:]
            peer.send(stop)
            F.check(wait_for(lambda: refused(s.port).get(("loop.0", "seal")) == 1, 10),
                    f"{label}: a STOP under the GO's seal is refused as not the seal's message ({refused(s.port)})")
            peer.close()
            F.check(re.search(r"^m0: loop\.0 refused a go message from tcp peer 127\.0\.0\.1:\d+ \(replay: ",
                              s.stderr(), re.M), f"{label}: the replay is named in one line:\n{s.stderr()}")
            F.check(health(s.port) and listens(s.proc.pid, s.port),
                    f"{label}: the host still answers and listens on {s.port}:\n{s.stderr()}")
            F.check(set(refused(s.port)) == {("loop.0", "replay"), ("loop.0", "seal")},
                    f"{label}: nothing else refused ({refused(s.port)})")
            F.check(s.stop() == 0, f"{label}: exit 0 at SIGTERM:\n{s.stderr()}")
    finally:
        sniff.close()


def recycled_stop():
    label = "prefork, a recycled worker's STOP"
    ports = port_map(PREFORK)
    sniff = Sniffer(ports["loop.0"])
    try:
        with Prefork("host_check", "--workers", "2", "--port", "0", "--max-requests", "20",
                     "--max-requests-jitter", "0", "--topology", topology(PREFORK, "prefork", 2, ports),
                     "--metrics-path", "/metrics") as s:
            F.check(wait_for(lambda: s.stderr().count(" serving (pid") == 2, 10),
                    f"{label}: two workers serving:\n{s.stderr()}")
            # requests until worker 0 recycled (its coordinator STOPs its loop
            # over loopback) and its replacement serves
            def worker0_back():
                for _ in range(5):
                    health(s.port)
                return sniff.sealed(K_STOP) and re.search(r"^m0: worker 0 .*respawned \(pid", s.stderr(), re.M)
            F.check(wait_for(worker0_back, 30, step=0.02),
                    f"{label}: worker 0 recycled, its STOP was seen, a fresh one serves:\n{s.stderr()}")
            stops = [b for b in sniff.sealed(K_STOP) if struct.unpack("<I", b[12:16])[0] == LOOP0]
            if not stops:
                F.check(False, f"{label}: a sealed STOP to loop.0 was seen")
                return
            before = refused(s.port).get(("loop.0", "replay"), 0)
            peer = replay(ports["loop.0"], stops[0], label)
            F.check(wait_for(lambda: refused(s.port).get(("loop.0", "replay"), 0) == before + 1, 10),
                    f"{label}: replayed to the fresh worker, refused as a replay and counted ({refused(s.port)})")
            peer.close()
            F.check(wait_for(lambda: all(health(s.port) for _ in range(8)), 5),
                    f"{label}: every worker still serves:\n{s.stderr()}")
            F.check(s.stop() == 0, f"{label}: exit 0 at SIGTERM:\n{s.stderr()}")
    finally:
        sniff.close()


def pidfd_getfd(pid, fd):
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    try:
        got = libc.syscall(438, pidfd, fd, 0)  # SYS_pidfd_getfd (x86-64, arm64)
        if got < 0:
            raise OSError(ctypes.get_errno(), "pidfd_getfd")
        return got
    finally:
        os.close(pidfd)


def dgram_fds(pid):
    """pid's unix datagram socket descriptors, in order."""
    dgram = set()
    with open("/proc/net/unix") as fh:
        for row in fh.readlines()[1:]:
            f = row.split()
            if len(f) >= 7 and f[4] == "0002":
                dgram.add(f[6])
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:[") and link[8:-1] in dgram:
            out.append(int(fd))
    return sorted(out)


def handoff_pipe():
    label = "prefork, a pipe handed over"
    with Prefork("host_check", "--workers", "2", "--port", "0", "--metrics-path", "/metrics") as s:
        F.check(wait_for(lambda: s.stderr().count(" serving (pid") == 2, 10),
                f"{label}: two workers serving:\n{s.stderr()}")
        kids = sorted(children(s.proc.pid))
        # The supervisor made one datagram socketpair per loop before any
        # worker (transport/handoff.c), inherited by each: its unix datagram
        # descriptors in order are loop 0's receiving and sending ends, then
        # loop 1's.
        send_end = None
        try:
            pairs = dgram_fds(s.proc.pid)
            if len(pairs) == 4:
                send_end = pidfd_getfd(s.proc.pid, pairs[3])
        except (OSError, AttributeError) as e:
            skip(f"pidfd_getfd is refused here ({e})")
        F.check(send_end is not None, f"{label}: the supervisor holds two handoff pairs ({dgram_fds(s.proc.pid)})")
        if send_end is None:
            return
        r, w = os.pipe()
        try:
            sk = socket.socket(fileno=send_end)
            sk.sendmsg([b"h"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", r))])
            sk.close()
        finally:
            os.close(r)
            os.close(w)
        F.check(wait_for(lambda: refused(s.port).get(("loop.1", "unexpected")) == 1, 10),
                f"{label}: loop.1 refuses it, counted ({refused(s.port)})")
        F.check(re.search(r"^m0: loop\.1 refused a handoff message from .* \(unexpected: ", s.stderr(), re.M),
                f"{label}: said in one line:\n{s.stderr()}")
        F.check(all(p in children(s.proc.pid) for p in kids) and wait_for(lambda: all(health(s.port) for _ in range(8)), 5),
                f"{label}: no worker died, every one serves:\n{s.stderr()}")
        F.check(s.stop() == 0, f"{label}: exit 0 at SIGTERM:\n{s.stderr()}")


def main():
    try:
        socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(0x0003)).close()
    except (OSError, AttributeError) as e:
        skip(f"a packet socket is refused here ({e})")
    single()
    recycled_stop()
    handoff_pipe()
    F.done()


if __name__ == "__main__":
    main()
