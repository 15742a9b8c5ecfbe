"""Hostile peers at every mailbox (issue 19; actors/admit.h, the accept lists).

Anyone who can reach a mailbox speaks nng's SP protocol to it: this test is
such a peer, written from actors/envelope.h, kinds.h, admit.h and
publisher.h alone, framing every message by hand (SP over TCP: an 8-byte
big-endian length; over a unix socket: a 0x01 byte, then that length), so
it can send what no nng library would.

For each mode — single, threads (`--threads 2`), prefork (`--workers 2`) —
and each transport — ipc (the mode's own URLs: single and threads reach
only `loop.i.sock` in the run directory, the rest is inproc; prefork every
actor's `*.sock`) and tcp (a topology file with every actor on
tcp://127.0.0.1:PORT; each loop's `loop.i.sock` is attacked too) —
`host_check` runs with one pool thread per loop, beats every 20 ms, a run
directory and /metrics, and a stream is held on each loop (x-worker 0 and 1
under threads and prefork). Then, at every reachable mailbox (coordinator or
supervisor, producer, worker.i, loop.i, pool.i.j), over one connection each:

- malformed: an empty message, junk, 43 bytes (short of the 44-byte
  header), a header whose length says more than came and one that says
  less, length fields of 16 MiB + 1 and 2^32 - 1, bad magic (m0E2, 0),
  kinds 0, 16 and 0xffff, flags 2 and 0x8000, the sealed flag with no
  trailer, 200 random bytes;
- a forged seal (flags = 1, 20 random trailer bytes; and 16 random bytes
  with the host's pid), on STOPs, a READY and (loops) a FRAME;
- every real kind the mailbox must refuse from outside: READY, FAILED, GO,
  STOP (from the coordinator's and worker.0's ids), STOPPED, DIED, LEAVING,
  HANDOFF carrying each descriptor number 0..10, JOB, RESULT and ANSWER
  carrying a made-up pointer, REQUEST, REPLY, PUBLISH, and (not a loop) FRAME;
- wrong addressee (to another actor, to 0xffffffff) and (loops) frames from
  senders that never send them from outside (pool.0.0, the coordinator,
  the producer);
- loops: frames from outside numbered counter + 1000, counter + 10^9, 2^63
  and 2^64 - 1; a replay, sent twice, of a frame m0pub published (its id
  already went out); frames whose body would inject an SSE event ("x\\n\\nid: 5"), a CR, an id
  line, a trailing newline, 70 000 bytes; a reserved channel (m0.closing),
  a channel with a space, channel lengths 0 and past the payload, a payload
  of 9 bytes;
- one real message of 5 MiB (a FRAME at a loop, a STOP elsewhere).

Proves, in every mode and transport:
- `m0_refused_total{actor,reason}` on /metrics equals exactly what was sent:
  each message counted once, by the mailbox it reached, with its reason
  (malformed, seal, kind, address, frame, frame_id) — e.g. loop.0 kind for
  STOP, loop.0 frame_id, loop.0 malformed, loop.0 seal, and over tcp the
  coordinator's, producer's, worker's and pools' kinds; nothing of the host's
  own traffic is refused (the table is empty before the attack); under prefork
  several answers of /metrics (either worker's) agree.
- m0pub's frame (from outside, the next id) is delivered once to every
  stream; on every stream no id is written twice, every id from the first
  to the last is there (nothing dropped: m0_bus_refusals_total and
  m0_stream_frames_dropped_total stay 0), the producer's beats only rise
  (m0pub's frame may cross a beat in flight: both are written as they come),
  no frame of the attack appears (no id beyond the counter as it is then, no
  forged or injected event), and beats keep coming on every loop after the
  attack.
- /health answers 200 throughout (a poller every 20 ms); the host and every
  worker keep their pids (prefork: no respawn, m0_respawns_total 0).
- stderr names refusals in the documented form (`m0: loop.0 refused a stop
  message from tcp peer 127.0.0.1:P (kind: ...`), naming this test's
  connections as the peers, every actor attacked at least once, and at most
  once per actor and peer every 10 s (a tcp peer is its address, whatever its
  port: this test's many connections from 127.0.0.1 are named once per
  actor; a flood of tens of thousands gives a line or two); no `dropped a
  malformed message` line and no `unexpected ... message` line.
- A real 17 MiB message is refused (counted malformed, or the connection
  hung up on); a connection declaring 2^62 bytes is hung up on.
- SIGTERM: every stream ends with `event: m0.closing`, exit 0 within the
  5 s drain bound; under single, the loop took over no connection (the
  forged HANDOFFs adopted nothing).

From the network and from this machine the rules differ (actors/admit.h):
- over tcp a loop takes no frame at all (every FRAME is refused as a kind:
  an instance PUBLISHes and the host numbers it), so a flood of frames
  numbered counter + 1 and + 2 over tcp writes none;
- over ipc (a program of the host's user, as m0pub is) a frame is taken when
  its id is already taken from the counter and not yet written by that loop:
  the flood writes no id twice and none not yet taken, though one may win
  its race against the producer, whose frame is then refused and named as
  the host's own (`producer of this host (pid N)`);
- a message declared at 1 GiB is hung up on at its header, the host's
  memory unchanged (every mailbox's receive limit is an envelope's);
- m0pub's frame is never lost to a beat that overtakes it;
- a refused message whose connection closed before it was read still names
  its peer (`a peer that has hung up`), never `this process`.
"""
import glob
import json
import mmap
import os
import random
import re
import shutil
import socket
import struct
import tempfile
import threading
import time
import urllib.request
from collections import Counter

from harness import Failures, Prefork, Server, alive, children, m0pub, metric, reap, wait_for
from test_streams import Stream, drain_check, hold_each, is_stream_head

F = Failures()
SEEN_PIDS = set()
TMP = tempfile.mkdtemp(prefix="m0-hostile-")
os.chmod(TMP, 0o700)
RNG = random.Random(19)

MAGIC = 0x3145306D  # "m0E1" (M0__ENV_MAGIC)
ENV = struct.Struct("<IHHIIQQQI")  # magic kind flags from to seq trace_hi trace_lo length
KINDS = "READY FAILED GO STOP STOPPED DIED LEAVING FRAME HANDOFF JOB RESULT REQUEST REPLY ANSWER PUBLISH".split()
K = {name: i + 1 for i, name in enumerate(KINDS)}  # actors/kinds.h: READY = 1 ... PUBLISH = 15
ROLES = {"coordinator": 1, "loop": 2, "pool": 3, "producer": 4, "external": 5, "worker": 6, "app": 7}
EXT = (ROLES["external"] << 24) | 4242  # an outside publisher (m0pub is external.<pid>)
APP = (ROLES["app"] << 24) | 1  # an application actor's instance
POINTER = struct.pack("<I", 1) + struct.pack("<QI", 0xDEADBEEF, 0)  # a count, then a made-up address
PERIOD_MS = 20
NAMES = {
    "single": ["coordinator", "producer", "loop.0", "pool.0.0"],
    "threads": ["coordinator", "producer", "loop.0", "loop.1", "pool.0.0", "pool.1.0"],
    "prefork": ["coordinator", "producer", "worker.0", "worker.1", "loop.0", "loop.1", "pool.0.0", "pool.1.0"],
}
LOOPS = {"single": 1, "threads": 2, "prefork": 2}
LINE_RE = re.compile(r"^m0: (\S+) refused a (\S+) message from (.+) \((malformed|seal|kind|address|frame|frame_id|reply): ",
                     re.M)


def actor_id(name):
    if name in ("coordinator", "producer"):
        return ROLES[name] << 24
    role, *idx = name.split(".")
    if role == "pool":
        return (ROLES["pool"] << 24) | (int(idx[0]) << 12) | int(idx[1])
    return (ROLES[role] << 24) | int(idx[0])


def env(kind, frm, to, payload=b"", flags=0, magic=MAGIC, length=None, trailer=b""):
    n = len(payload) if length is None else length
    return ENV.pack(magic, kind, flags, frm, to, RNG.randrange(1 << 32), 0, 0, n) + payload + trailer


def frame_payload(fid, body, channel=b"beats", chlen=None):
    return struct.pack("<QH", fid, len(channel) if chlen is None else chlen) + channel + body


def free_ports(names):
    """A distinct free port per name, every socket held until all are picked."""
    socks = []
    try:
        for _ in names:
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", 0))
        return {n: s.getsockname()[1] for n, s in zip(names, socks)}
    finally:
        for s in socks:
            s.close()


class Peer:
    """A pipeline0 push peer, nng's SP framing by hand, over TCP or a unix
    socket (nng's ipc: each message a 0x01 byte, then the 8-byte length)."""

    def __init__(self, addr):
        self.kind, where = addr
        if self.kind == "tcp":
            self.s = socket.create_connection(("127.0.0.1", where), timeout=10)
            self.peer = f"tcp peer 127.0.0.1:{self.s.getsockname()[1]}"
        else:
            self.s = socket.socket(socket.AF_UNIX)
            self.s.settimeout(10)
            self.s.connect(where)
            self.peer = f"ipc peer pid {os.getpid()}"
        self.s.sendall(b"\x00SP\x00\x00\x50\x00\x00")  # SP 0, protocol push0 (0x50)
        hello = b""
        while len(hello) < 8:
            chunk = self.s.recv(8 - len(hello))
            if not chunk:
                break
            hello += chunk
        self.ok = hello == b"\x00SP\x00\x00\x51\x00\x00"  # pull0

    def head(self, n):
        return (b"\x01" if self.kind == "ipc" else b"") + struct.pack(">Q", n)

    def send(self, body):
        self.s.sendall(self.head(len(body)) + body)

    def raw(self, data):
        self.s.sendall(data)

    def hung_up(self, timeout):
        """True once the host closes the connection (EOF or reset) within timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.s.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                if self.s.recv(1) == b"":
                    return True
            except (socket.timeout, TimeoutError):
                return False
            except OSError:
                return True
        return False

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


def refusals(port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return Counter({(a, r): int(n) for a, r, n in
                    re.findall(r'^m0_refused_total\{actor="([^"]+)",reason="([^"]+)"\} (\d+)$', text, re.M)})


def rss_kib(pids):
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as f:
                total += next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        except (OSError, StopIteration):
            pass
    return total


class Health(threading.Thread):
    """GET /health every 20 ms until stopped: every answer's status, or the error."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.halt, self.got = port, threading.Event(), []

    def run(self):
        while not self.halt.is_set():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as r:
                    self.got.append(r.status if json.loads(r.read()) == {"status": "ok"} else f"body {r.status}")
            except Exception as e:  # noqa: BLE001 (reported by the check)
                self.got.append(repr(e))
            self.halt.wait(0.02)

    def stop(self):
        self.halt.set()
        self.join(10)


class Counter64:
    """The shared counter, read from the run directory's page (slot 0): what a
    local attacker sees (a remote one reads m0_events_published)."""

    def __init__(self, d):
        fd = os.open(os.path.join(d, "page"), os.O_RDONLY)
        try:
            self.m = mmap.mmap(fd, 8, mmap.MAP_SHARED, mmap.PROT_READ)
        finally:
            os.close(fd)

    def __call__(self):
        return struct.unpack_from("<Q", self.m, 0)[0]


def battery(name, role, loops, counter, replay_id, host_pid, network=False):
    """What is sent to mailbox `name`: [(label, message bytes, the reason it is refused with)].
    From the network (a tcp address) a loop takes no frame at all: every one
    addressed to it is refused as a kind (an instance PUBLISHes and the host
    numbers it); from this machine (ipc) frames are checked one by one."""
    me = actor_id(name)
    coord, worker0, loop0 = actor_id("coordinator"), actor_id("worker.0"), actor_id("loop.0")
    other = actor_id("loop.1" if name != "loop.1" else "loop.0") if loops > 1 else actor_id("producer")
    if name == "producer":
        other = coord
    out = []
    add = lambda label, msg, why: out.append((label, msg, why))
    # not an envelope
    add("an empty message", b"", "malformed")
    add("junk", b"junk", "malformed")
    add("43 bytes (short of the header)", env(K["STOP"], coord, me)[:43], "malformed")
    add("a length that says more than came", env(K["STOP"], coord, me, b"abcde", length=10), "malformed")
    add("a length that says less than came", env(K["STOP"], coord, me, b"abcdefghij", length=4), "malformed")
    add("a length of 16 MiB + 1", env(K["STOP"], coord, me, length=(16 << 20) + 1), "malformed")
    add("a length of 2^32 - 1", env(K["STOP"], coord, me, length=0xFFFFFFFF), "malformed")
    add("bad magic m0E2", env(K["STOP"], coord, me, magic=0x3245306D), "malformed")
    add("magic 0", env(K["STOP"], coord, me, magic=0), "malformed")
    for k in (0, 16, 0xFFFF):
        add(f"kind {k}", env(k, coord, me), "malformed")
    add("flags 2", env(K["STOP"], coord, me, flags=2), "malformed")
    add("flags 0x8000", env(K["STOP"], coord, me, flags=0x8000), "malformed")
    add("sealed, no trailer", env(K["STOP"], coord, me, flags=1), "malformed")
    add("200 random bytes", b"\xff" + bytes(RNG.randrange(256) for _ in range(199)), "malformed")
    # a forged seal
    seal = lambda: bytes(RNG.randrange(256) for _ in range(20))
    add("STOP with a forged seal", env(K["STOP"], coord, me, flags=1, trailer=seal()), "seal")
    add("STOP with a forged seal (the host's pid)",
        env(K["STOP"], coord, me, flags=1, trailer=seal()[:16] + struct.pack("<I", host_pid)), "seal")
    add("READY with a forged seal (the host's pid)",
        env(K["READY"], worker0, me, flags=1, trailer=seal()[:16] + struct.pack("<I", host_pid)), "seal")
    if role == "loop":
        add("FRAME with a forged seal",
            env(K["FRAME"], actor_id("producer"), me, frame_payload(counter, b"data: sealed"), flags=1, trailer=seal()),
            "seal")
    # every kind this mailbox never takes from outside
    add("READY from loop.0", env(K["READY"], loop0, me), "kind")
    add("READY from worker.0", env(K["READY"], worker0, me), "kind")
    add("FAILED", env(K["FAILED"], loop0, me, b"forged failure"), "kind")
    add("GO from the coordinator", env(K["GO"], coord, me), "kind")
    add("STOP from the coordinator", env(K["STOP"], coord, me), "kind")
    add("STOP from worker.0", env(K["STOP"], worker0, me), "kind")
    add("STOPPED", env(K["STOPPED"], loop0, me, bytes(56)), "kind")
    add("DIED", env(K["DIED"], loop0, me, b"forged death"), "kind")
    add("LEAVING", env(K["LEAVING"], loop0, me), "kind")
    for fd in range(11):
        add(f"HANDOFF of descriptor {fd}", env(K["HANDOFF"], other if role == "loop" else loop0, me,
                                               struct.pack("<i", fd)), "kind")
    add("JOB with a made-up pointer", env(K["JOB"], loop0, me, POINTER), "kind")
    add("RESULT with a made-up pointer", env(K["RESULT"], actor_id("pool.0.0"), me, POINTER), "kind")
    add("ANSWER with a made-up pointer", env(K["ANSWER"], loop0, me, POINTER), "kind")
    add("REQUEST", env(K["REQUEST"], loop0, me, struct.pack("<HHI", 1, 0, 0)), "kind")
    add("REPLY", env(K["REPLY"], APP, me, struct.pack("<HHI", 1, 0, 0)), "kind")
    add("PUBLISH", env(K["PUBLISH"], APP, me, frame_payload(counter, b"data: p")), "kind")
    if role != "loop":
        add("FRAME", env(K["FRAME"], actor_id("producer"), me, frame_payload(counter, b"data: f")), "kind")
    # the wrong addressee, the wrong sender
    add("STOP to another actor", env(K["STOP"], coord, other), "address")
    add("STOP to 0xffffffff", env(K["STOP"], coord, 0xFFFFFFFF), "address")
    if role == "loop":
        body = b"event: forged\ndata: sender"
        for who in ("pool.0.0", "coordinator", "producer"):
            add(f"FRAME from {who}", env(K["FRAME"], actor_id(who), me, frame_payload(counter, body)), "address")
        add("FRAME to another loop", env(K["FRAME"], EXT, other, frame_payload(counter, body)), "address")
        # frames from outside: ids not taken, ids already written, bodies the bus refuses
        for fid in (counter + 1000, counter + 10 ** 9, 1 << 63, (1 << 64) - 1):
            add(f"FRAME numbered {fid}", env(K["FRAME"], EXT, me, frame_payload(fid, b"event: forged\ndata: %d" % fid)),
                "frame_id")
        replay = env(K["FRAME"], EXT, me, frame_payload(replay_id, b"event: note\ndata: hostile-valid"))
        add(f"m0pub's frame {replay_id} replayed", replay, "frame_id")
        add(f"m0pub's frame {replay_id} replayed again", replay, "frame_id")
        for label, body in (("an injected event", b"x\n\nid: 5"), ("a CR", b"data: a\rid: 7"),
                            ("an id line", b"data: x\nid: 99"), ("a trailing newline", b"data: x\n"),
                            ("70000 bytes", b"data: " + b"a" * 70000)):
            add(f"FRAME body with {label}", env(K["FRAME"], EXT, me, frame_payload(replay_id, body)), "frame")
        for label, pl in (("channel m0.closing", frame_payload(replay_id, b"data: c", b"m0.closing")),
                          ("a channel with a space", frame_payload(replay_id, b"data: c", b"be ats")),
                          ("channel length 0", frame_payload(replay_id, b"data: c", b"", 0)),
                          ("a channel length past the payload", frame_payload(replay_id, b"", b"beats", 600)),
                          ("a payload of 9 bytes", struct.pack("<QB", replay_id, 5))):
            add(f"FRAME with {label}", env(K["FRAME"], EXT, me, pl), "frame")
        add("a real 5 MiB FRAME", env(K["FRAME"], EXT, me, frame_payload(replay_id, b"data: " + b"b" * (5 << 20))),
            "frame")
    else:
        add("a real 5 MiB STOP", env(K["STOP"], coord, me, b"s" * (5 << 20)), "kind")
    if network and role == "loop":
        def from_network(label, msg, why):
            frame = len(msg) >= 6 and struct.unpack_from("<IH", msg, 0) == (MAGIC, K["FRAME"])
            return (label, msg, "kind" if frame and why in ("frame", "frame_id", "address") and
                    label != "FRAME to another loop" else why)
        out = [from_network(*x) for x in out]
    return out


def mailboxes(mode, transport, d, ports):
    """[(label, actor name, address)] of every mailbox an outsider reaches."""
    out = []
    socks = sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(d, "*.sock")))
    loops = [f"loop.{i}" for i in range(LOOPS[mode])]
    if transport == "tcp":
        out += [(f"{n} (tcp)", n, ("tcp", ports[n])) for n in NAMES[mode]]  # the network
        want = loops
    else:
        want = NAMES[mode] if mode == "prefork" else loops
    F.check(socks == sorted(want), f"{mode}/{transport}: the run directory's ipc mailboxes are exactly "
                                   f"{sorted(want)} ({socks})")
    out += [(f"{n} (ipc)", n, ("ipc", os.path.join(d, n + ".sock"))) for n in socks]
    return out


def limited(peer):
    """What a refusal line is rate-limited by, beside the actor: the peer, a
    tcp one by its address alone (a flood of fresh connections from one
    address is named once too)."""
    return peer.rsplit(":", 1)[0] if peer.startswith("tcp peer ") else peer


def check_stream(st, label, counter_now=None, note_id=None, lost=()):
    """The stream's frames: ids never repeat and, sorted, rise by exactly 1
    (every id taken from the counter written once, nothing lost); the
    producer's beats only rise (m0pub's frame may cross the producer's in
    flight: both are written as they come); no frame of the attack."""
    frames = [f for f in list(st.frames) if not f.comment]
    ids = [f.id for f in frames]
    beats = [f.id for f in frames if f.event == "beat"]
    F.check(len(set(ids)) == len(ids), f"{label}: no id is written twice ({ids})")
    F.check(all(b > a for a, b in zip(beats, beats[1:])), f"{label}: the beats' ids only rise ({beats})")
    srt = sorted(i for i in ids if i is not None)
    full = sorted(set(srt) | {i for i in lost if srt and srt[0] < i < srt[-1]})
    F.check(len(srt) == len(ids) and all(b == a + 1 for a, b in zip(full, full[1:])),
            f"{label}: every id from the first to the last is written, once (but m0pub's lost {sorted(lost)}) ({ids})")
    F.check(not [f for f in frames if f.event not in ("beat", "note")],
            f"{label}: no frame of the attack is written ({[f for f in frames if f.event not in ('beat', 'note')][:3]})")
    if counter_now is not None:
        F.check(all(i is not None and i <= counter_now for i in ids),
                f"{label}: no id beyond the counter ({counter_now}): none of the forged ones "
                f"({[i for i in ids if i is None or i > counter_now]})")
    if note_id is not None:
        notes = [f for f in frames if f.event == "note"]
        F.check(len(notes) == 1 and notes[0].id == note_id and notes[0].data == "hostile-valid",
                f"{label}: m0pub's frame is written once, with its id {note_id} ({notes})")


def attack(mode, transport):
    label = f"{mode}/{transport}"
    d = tempfile.mkdtemp(prefix=f"{mode}-{transport}-", dir=TMP)
    os.chmod(d, 0o700)
    args = ["--port", "0", "--run-dir", d, "--metrics-path", "/metrics"]
    ports = {}
    if transport == "tcp":
        ports = free_ports(NAMES[mode])
        path = os.path.join(d, "..", f"topo-{mode}.json")
        with open(path, "w") as fh:
            json.dump({"mode": mode, "loops": LOOPS[mode], "handler_threads": 1, "transport": "tcp",
                       "actors": [{"name": n, "url": f"tcp://127.0.0.1:{ports[n]}"} for n in NAMES[mode]]}, fh)
        args += ["--topology", path]
    else:
        args += {"single": [], "threads": ["--threads", "2"], "prefork": ["--workers", "2"]}[mode]
        args += ["--blocking-threads", "1"]
    cls = Prefork if mode == "prefork" else Server
    with cls("host_check", *args, env={"M0_HOSTCHECK_PERIOD_MS": str(PERIOD_MS)}) as s:
        host = s.proc.pid
        kids = set()
        if mode == "prefork":
            kids = wait_for(lambda: children(host) if len(children(host)) == 2 else None, 10) or children(host)
            SEEN_PIDS.update(kids)
            F.check(len(kids) == 2, f"{label}: two workers ({kids})")
        # a stream on every loop, beating
        if LOOPS[mode] == 1:
            st = Stream(s.port)
            F.check(is_stream_head(st), f"{label}: /events is a stream ({st.status_line})")
            streams = {"0": st}
        else:
            streams = hold_each(F, s.port, label) or {}
        for w, st in streams.items():
            F.check(st.wait_frames(3, 5), f"{label}: stream on loop {w} beats before the attack ({st.ids()})")
        health = Health(s.port)
        health.start()
        before = refusals(s.port)
        F.check(not before, f"{label}: nothing of the host's own traffic is refused ({dict(before)})")
        # a valid frame from this machine: m0pub takes the next id and is
        # delivered, even when a beat numbered after it reaches a loop first
        lost, note = [], None
        for _ in range(3):
            base = refusals(s.port)
            rc, out, err = m0pub("--run-dir", d, "--event", "note", "hostile-valid")
            note = int(out.strip()) if rc == 0 and out.strip().isdigit() else None
            F.check(note is not None, f"{label}: m0pub publishes from outside (rc {rc}, {out!r}, {err!r})")
            got_note = lambda: all(note in st.ids("note") for st in streams.values())
            refused = lambda: refusals(s.port) != base
            if note is None or wait_for(lambda: got_note() or refused(), 5, 0.02) and got_note():
                break
            wait_for(got_note, 0.5)  # (a loop that took it may not have written it yet)
            if got_note():
                break
            lost.append(note)
        F.check(not lost, f"{label}: m0pub's frame (it exits 0 and prints its id) reaches every stream: "
                          f"{lost} refused by the loops as frame_id ({dict(refusals(s.port))})")
        F.check(note is not None and got_note(), f"{label}: m0pub's frame {note} reaches every stream "
                                                 f"({ {w: st.ids('note') for w, st in streams.items()} })")
        if note is None or not got_note():
            note = None
        counter = metric(s.port, "m0_events_published")
        # the replay: an id every loop has written (m0pub's, else the last beat every stream has)
        replay_id = note or min(st.ids()[-1] for st in streams.values())
        pub_lines = refusals(s.port)
        # the attack
        boxes = mailboxes(mode, transport, d, ports)
        expect, peers, used = Counter(), [], set()
        t_first = time.monotonic()
        for box, name, addr in boxes:
            role = name.split(".")[0]
            p = Peer(addr)
            peers.append(p)
            F.check(p.ok, f"{label}: {box} answers the SP handshake as pull0")
            msgs = battery(name, role, LOOPS[mode], counter, replay_id, host, network=addr[0] == "tcp")
            try:
                for what, msg, why in msgs:
                    p.send(msg)
                    expect[(name, why)] += 1
            except OSError as e:
                F.check(False, f"{label}: {box}: the host hung up during the attack ({e!r})")
            used.add((name, p.peer))
        expect += pub_lines
        reached = lambda: refusals(s.port) == expect
        wait_for(reached, 10, 0.05)
        got = refusals(s.port)
        F.check(got == expect, f"{label}: m0_refused_total counts every message once, by mailbox and reason:\n"
                               f"  missing {dict(expect - got)}\n  extra   {dict(got - expect)}")
        for pair in [("loop.0", "kind"), ("loop.0", "frame_id"), ("loop.0", "malformed"), ("loop.0", "seal"),
                     ("loop.0", "frame"), ("loop.0", "address")] + (
                [("coordinator", "kind"), ("producer", "kind"), ("pool.0.0", "kind")] if transport == "tcp" else []) + (
                [("worker.0", "kind"), ("worker.1", "kind"), ("pool.1.0", "kind")] if mode == "prefork" else []):
            F.check(got[pair] > 0, f"{label}: m0_refused_total{{actor=\"{pair[0]}\",reason=\"{pair[1]}\"}} > 0 ({got[pair]})")
        if mode == "prefork":
            again = [refusals(s.port) for _ in range(4)]
            F.check(all(a == got for a in again), f"{label}: every answer of /metrics (either worker's) shows them all")
        for p in peers:
            p.close()
        # after it: beats still come on every loop; nothing forged was written
        marks = {w: len(st.frames) for w, st in streams.items()}
        for w, st in streams.items():
            F.check(wait_for(lambda: len(st.ids()) >= marks[w] + 3, 5),
                    f"{label}: stream on loop {w} still beats after the attack")
        now = metric(s.port, "m0_events_published")
        for w, st in streams.items():
            check_stream(st, f"{label}: stream on loop {w}", counter_now=now, note_id=note, lost=set(lost))
        for m in ("m0_bus_refusals_total", "m0_stream_frames_dropped_total", "m0_respawns_total"):
            F.check(metric(s.port, m) == 0, f"{label}: {m} stays 0 ({metric(s.port, m)})")

        # oversized: a real 17 MiB message; a connection declaring 2^62 bytes; one declaring 1 GiB
        big = env(K["FRAME"], EXT, actor_id("loop.0"), frame_payload(note or 1, b"data: " + b"c" * (17 << 20)))
        loop0 = next(a for b, n, a in boxes if n == "loop.0")
        p = Peer(loop0)
        n0 = refusals(s.port)[("loop.0", "malformed")]
        try:
            p.send(big)
            sent = True
        except OSError:
            sent = False
        outcome = wait_for(lambda: "counted" if refusals(s.port)[("loop.0", "malformed")] == n0 + 1 else
                           "hung up" if not sent or p.hung_up(0.05) else None, 10, 0.01)
        F.check(outcome, f"{label}: a real 17 MiB message is refused (counted malformed, or hung up on)")
        used.add(("loop.0", p.peer))
        p.close()
        p = Peer(loop0)
        p.raw(p.head(1 << 62))
        F.check(p.hung_up(5), f"{label}: a message declared at 2^62 bytes is hung up on")
        p.close()
        pids = [host] + sorted(kids)
        p = Peer(loop0)
        rss0 = rss_kib(pids)
        hung = False
        try:
            p.raw(p.head(1 << 30))
            hung = p.hung_up(0.5)
            for _ in range(48):
                if hung:
                    break
                p.raw(bytes(1 << 20))
        except OSError:
            hung = True
        grew = rss_kib(pids) - rss0
        F.check(hung or grew < 24 << 10,
              f"{label}: a message declared at 1 GiB is refused at its header (the host hung up: {hung}; "
              f"its memory grew {grew // 1024} MiB while 48 MiB of it came)")
        p.close()

        # the race: a flood of frames numbered just past the counter, at every loop
        page = Counter64(d)
        marks = {w: len(st.frames) for w, st in streams.items()}
        for i in range(LOOPS[mode]):
            p = Peer(next(a for b, n, a in boxes if n == f"loop.{i}"))
            me = actor_id(f"loop.{i}")
            t_end = time.monotonic() + 0.8
            try:
                while time.monotonic() < t_end:
                    c = page()
                    p.send(env(K["FRAME"], EXT, me, frame_payload(c + 1, b"event: forged\ndata: %d" % (c + 1))))
                    p.send(env(K["FRAME"], EXT, me, frame_payload(c + 2, b"event: forged\ndata: %d" % (c + 2))))
            except OSError as e:
                F.check(False, f"{label}: loop.{i}: the host hung up during the flood ({e!r})")
            used.add((f"loop.{i}", p.peer))
            p.close()
        for w, st in streams.items():
            F.check(wait_for(lambda: len(st.ids()) >= marks[w] + 3, 5), f"{label}: stream on loop {w} beats after the flood")
        for w, st in streams.items():
            frames = [f for f in list(st.frames)[marks[w]:] if not f.comment]
            ids = [f.id for f in frames]
            forged = [f for f in frames if f.event == "forged"]
            F.check(len(set(ids)) == len(ids),
                    f"{label}: stream on loop {w}: a flood of frames numbered counter + 1 and + 2 writes no id twice "
                    f"({[b for a, b in zip(ids, ids[1:]) if b <= a][:8]})")
            if transport == "tcp":  # the flood came over the network: refused whole
                F.check(not forged, f"{label}: stream on loop {w}: no frame from the network is written "
                                    f"({len(forged)}, e.g. {forged[:2]})")
            else:  # from this machine a frame whose id the host had taken may win its race, once
                F.check(all(f.id <= page() for f in forged),
                        f"{label}: stream on loop {w}: a forged frame written carries an id already taken")

        # throughout: /health, the pids, no respawn
        health.stop()
        bad = [g for g in health.got if g != 200]
        F.check(len(health.got) >= 20 and not bad, f"{label}: /health answered 200 throughout "
                                                    f"({len(health.got)} asked, not 200: {bad[:3]})")
        F.check(s.proc.poll() is None and alive(host), f"{label}: the host (pid {host}) still runs")
        if mode == "prefork":
            F.check(children(host) == kids and all(alive(k) for k in kids),
                    f"{label}: the same two workers run ({kids} -> {children(host)})")
            F.check(metric(s.port, "m0_respawns_total") == 0, f"{label}: m0_respawns_total 0")
        # stderr: named in the documented form, once per peer per 10 s in each process
        elapsed = time.monotonic() - t_first
        err = s.stderr()
        lines = LINE_RE.findall(err)
        per = Counter((a, limited(peer)) for a, _k, peer, _r in lines)
        named = {(a, peer) for a, _k, peer, _r in lines}
        bound = 1 + int(elapsed // 10)
        F.check(lines, f"{label}: refusals are named on stderr:\n{err[-800:]}")
        # (m0pub's lost frames are named too, by m0pub's pid)
        if lost:
            named = {(a, p) for a, k, p, r in lines if not (k == "frame" and r == "frame_id" and p.startswith("ipc peer pid ")
                                                           and p != f"ipc peer pid {os.getpid()}")}
        # the host's own frames a local flood displaced (its id written first) are named by their sender
        own = {(a, k, p, r) for a, k, p, r in lines if " of this host (pid " in p or p.endswith(" of this process")}
        F.check(all(k == "frame" and r == "frame_id" for _a, k, _p, r in own) and (transport == "ipc" or not own),
                f"{label}: the host's own messages are refused only as frames a local flood displaced "
                f"({sorted(own)[:4]})")
        named -= {(a, p) for a, _k, p, _r in own}
        unnamed = {(a, p) for a, p in named if p == "this process"}
        F.check(named - unnamed <= used, f"{label}: every refusal line names the actor and one of this test's "
                                         f"connections ({sorted(named - unnamed - used)})")
        F.check(not unnamed, f"{label}: a refused message whose connection closed before the mailbox read it names "
                             f"its peer, not `this process` ({sorted(unnamed)})")
        F.check({a for a, _p in used} == {a for a, _p in named},
                f"{label}: every actor attacked names its peer at least once "
                f"({sorted({a for a, _p in used} - {a for a, _p in named})})")
        F.check(all(n <= bound for n in per.values()),
                f"{label}: at most {bound} line(s) per actor and peer in {elapsed:.1f} s ({dict(per)})")
        F.check(len(lines) == err.count(" refused a "), f"{label}: every refusal line has the documented form")
        F.check("dropped a malformed message" not in err and "unexpected" not in err,
                f"{label}: no line per malformed message, no `unexpected` message:\n{err[-800:]}")
        # the drain
        drain_check(F, s, list(streams.values()), f"{label} drain")
        if mode == "single":  # (threads: accept sharing hands connections over; prefork: across processes)
            F.check("0 handed off, 0 taken over" in s.stderr(),
                    f"{label}: no connection was taken over (no HANDOFF adopted):\n{s.stderr()[-300:]}")
        if mode == "prefork":
            F.check(wait_for(lambda: not any(alive(k) for k in kids), 10), f"{label}: the workers are gone")
    reap(kids)


try:
    for mode in ("single", "threads", "prefork"):
        for transport in ("ipc", "tcp"):
            try:
                attack(mode, transport)
            except Exception as e:  # noqa: BLE001 (one configuration's failure must not hide the others')
                F.check(False, f"{mode}/{transport}: {e!r}")
finally:
    reap(SEEN_PIDS)
    shutil.rmtree(TMP, ignore_errors=True)
F.done()
