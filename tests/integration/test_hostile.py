"""Hostile peers at every mailbox (issue 19; runtime/admit.h, the accept lists).

Anyone who can reach a mailbox speaks nng's SP protocol to it: this test is
such a peer, written from runtime/envelope.h, kinds.h, admit.h and
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
  kinds 0, one past the last and 0xffff, flags 2 and 0x8000, the sealed flag with no
  trailer, 200 random bytes;
- a forged seal (flags = 1, 20 random trailer bytes; and 16 random bytes
  with the host's pid), on STOPs, a READY and (loops) a FRAME;
- every real kind the mailbox must refuse from outside: READY, FAILED, GO,
  STOP (from the coordinator's and worker.0's ids), STOPPED, DIED, LEAVING,
  HANDOFF carrying each descriptor number 0..10, JOB, RESULT and ANSWER
  carrying a made-up pointer, REQUEST, REPLY, PUBLISH, (not a loop) FRAME
  and (neither a loop nor the coordinator) TRACE;
- (loops) tracing controls the tracer refuses (reason control): not JSON, a
  list, an unknown member, no actor's name, no kind, an undialable "to",
  "on" with nowhere to send records; and one from the coordinator's id;
  (the coordinator) one that is not JSON, and one from its own id;
- wrong addressee (to another actor, to 0xffffffff) and (loops) frames from
  senders that never send them from outside (pool.0.0, the coordinator,
  the producer);
- loops: frames from outside numbered counter + 1000, counter + 10^9, 2^63
  and 2^64 - 1; a replay, sent twice, of a frame m0pub published (its id
  already went out); frames whose body would inject an SSE event ("x\\n\\nid: 5"), a CR, an id
  line, a trailing newline, 65,537 bytes (past a frame's bound, within the
  loop's receive limit); a reserved channel (m0.closing),
  a channel with a space, channel lengths 0 and past the payload, a payload
  of 9 bytes;
- (not a loop) a real STOP of 60 KiB, within a control mailbox's receive
  limit (a larger message is hung up on: the oversized cases below).

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

From the network and from this machine the rules differ (runtime/admit.h):
- over tcp a loop takes no frame and no tracing control at all (every FRAME
  and TRACE is refused as a kind: an instance PUBLISHes and the host numbers
  it; m0trace runs on the host's machine), so a flood of frames
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

An application actor's own socket (`app_socket`: single and threads, ipc —
the default `ipc://<run-dir>/actor.echo.sock` — and tcp — a topology's
`tcp://127.0.0.1:PORT` for echo): host_check with `echo` placed external
(POST /actor/echo's timeout 5000 ms, beats every 100 ms, /metrics), one
`echo_actor URL 0` connected. A pair1 peer (hostile_actor.py: the system's
libnng.so.1 through ctypes) dials the actor's URL and is taken as a second
instance; it is given one request (read from its REQUEST: it answers it
itself at the end, then answers it again) while echo_actor holds another
(`x-sleep-ms: 1500`). While 20 POSTs go through echo_actor one after another,
it sends again and again (two rounds at least, ~1.5 s): malformed envelopes
(empty, junk, 43 bytes, lengths that are not the bytes, 16 MiB + 1 and
2^32 - 1, bad magic, kinds 0, one past the last and 0xffff, flags 2 and 0x8000, the sealed
flag without a trailer, random bytes); forged seals (on REPLY and PUBLISH,
with and without the host's pid); every kind the socket never takes (READY,
FAILED, GO, STOP, STOPPED, DIED, LEAVING, FRAME, HANDOFF of descriptors
0..10, JOB, RESULT and ANSWER with a made-up pointer, REQUEST); REPLY and
PUBLISH from actors that are no instance (loop.0, the coordinator, the
producer, an outside publisher, 0xffffffff); REPLYs to no loop (0xffffffff,
a loop that does not exist, echo.0, echo's socket, the coordinator); REPLYs
with a bad batch head (4 bytes, version 2 and 0, flags 1, count 65537 and
2^32 - 1); REPLYs for ids it was never given: made up (0, 1, 2^64 - 1, an
m0_ask's, another loop's), and every plausible id of a request in flight
with echo_actor at each loop (48 generations of 4 table places: the held one's and the 20's among them);
REPLY batches whose count says more than is there, with bytes after the
last record, a record that does not decode or is cut; PUBLISHes whose frame
would inject an event ("x\n\nid: 5"), with a CR, an `id:` line (first, last,
bare), a trailing newline, a blank line, 70 000 bytes; channels m0.x,
m0.closing, with a space, a NUL or a newline, of 65 bytes, of length 0 or
past the payload; payloads of 9 and 0 bytes. Then one valid PUBLISH.

Proves, in each:
- every one of the 20 POSTs, the held request (after its 1.5 s: not a forged
  reply for its id) and the warm-up are echo_actor's 200 (its pid, its body);
  the hostile instance's own request is answered by its reply (a REPLY from
  that pipe is taken: the refusals are not of everything it sends), and the
  id it was given is of the shape of the forged ones;
- m0_refused_total{actor="echo"} counts each message once, by reason, exactly
  as sent (malformed, seal, kind, address at m0__recv; frame, and address
  for a REPLY to no loop, at the service; batch for a bad batch head, and
  reply, at the loop: an id not in flight with that instance, its own
  answered already, or a record it cannot read); m0_actor_replies_dropped_total
  unknown_id and refused likewise (docs/wire.md);
  m0_actor_requests_total is 23 ok and nothing else, none left in flight;
- on every /events stream each id once, each the last + 1, nothing but beats
  and the valid PUBLISH, which is there once, numbered from the host's counter
  (m0_events_published_total before < its id <= after); m0_bus_refusals_total and
  m0_stream_frames_dropped_total stay 0; beats go on;
- /health 200 throughout; the host and echo_actor keep running;
- the refusal lines name the actor `echo`, and as peers only this test's
  connection (at the socket: `ipc peer pid P` / `tcp peer 127.0.0.1:P`) and
  its slot (at the loop: `echo.1`), each at most once per 10 s;
- when the hostile instance leaves, m0_actor_instances is 1; SIGTERM: the
  streams end with m0.closing, exit 0; echo_actor, told STOP, exits 0.

- an ask cannot be answered by an instance it was not sent to
  (`stolen_ask`): while relay's m0_ask of echo is with echo_actor, the
  hostile instance sends REPLYs to relay.0 naming every likely ask id; the
  client gets echo_actor's answer, and the forged REPLYs are refused and
  counted at relay.0 (`m0_refused_total{actor="relay.0",reason="reply"}`),
  named as from the hostile slot.
"""
import glob
import json
import mmap
import os
import random
import re
import shutil
import struct
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections import Counter

import harness
from harness import (BIN, Failures, Prefork, SPPeer, Server, alive, children, m0pub, metric, port_map, reap,
                     wait_for)
from hostile_actor import Pair1, replies, request_ids
from rawhttp import Conn, request
from test_streams import Stream, drain_check, hold_each, is_stream_head

F = Failures()
SEEN_PIDS = set()
ECHOES = []  # every echo_actor started: killed at the end if a failed run left one
TMP = tempfile.mkdtemp(prefix="m0-hostile-")
os.chmod(TMP, 0o700)
RNG = random.Random(19)

MAGIC = 0x3145306D  # "m0E1" (M0__ENV_MAGIC)
ENV = struct.Struct("<IHHIIQQQI")  # magic kind flags from to seq trace_hi trace_lo length
# The kinds, from the one list (runtime/kinds.h: READY = 1 ... in order).
with open(os.path.join(os.path.dirname(__file__), "..", "..", "runtime", "kinds.h")) as _f:
    KINDS = tuple(re.findall(r"^\s*X\((\w+),", _f.read(), re.M))
K = {name: i + 1 for i, name in enumerate(KINDS)}
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
# Every reason a refusal line may give: the one list (runtime/admit.h's
# M0__REFUSALS), read from the source so a new reason is a documented one.
with open(os.path.join(os.path.dirname(__file__), "..", "..", "runtime", "admit.h")) as _f:
    REASONS = re.findall(r'^\s*X\([A-Z_]+, "([a-z_]+)"\)', _f.read(), re.M)
LINE_RE = re.compile(r"^m0: (\S+) refused a (\S+) message from (.+) \((" + "|".join(REASONS) + r"): ", re.M)


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
    local attacker sees (a remote one reads m0_events_published_total)."""

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
    for k in (0, len(KINDS) + 1, 0xFFFF):  # no kind, one past the last, the widest
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
    add("CHUNK with a made-up writer", env(K["CHUNK"], loop0, me, struct.pack("<QB", 0xDEADBEEF, 1) + b"x"), "kind")
    add("REQUEST", env(K["REQUEST"], loop0, me, struct.pack("<HHI", 1, 0, 0)), "kind")
    add("REPLY", env(K["REPLY"], APP, me, struct.pack("<HHI", 1, 0, 0)), "kind")
    add("PUBLISH", env(K["PUBLISH"], APP, me, frame_payload(counter, b"data: p")), "kind")
    if role != "loop":
        add("FRAME", env(K["FRAME"], actor_id("producer"), me, frame_payload(counter, b"data: f")), "kind")
    if role not in ("loop", "coordinator"):
        add("TRACE", env(K["TRACE"], EXT, me, b'{"on":false}'), "kind")
    if role == "coordinator":  # its process's tracer, as a loop's (the prefork supervisor has no loop)
        add("TRACE from the coordinator", env(K["TRACE"], coord, me, b'{"on":false}'), "address")
        add("TRACE with a control that is not JSON", env(K["TRACE"], EXT, me, b"not json"), "control")
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
                            ("65,537 bytes", b"data: " + b"a" * 65531)):  # one past a frame's, within the loop's receive limit
            add(f"FRAME body with {label}", env(K["FRAME"], EXT, me, frame_payload(replay_id, body)), "frame")
        for label, pl in (("channel m0.closing", frame_payload(replay_id, b"data: c", b"m0.closing")),
                          ("a channel with a space", frame_payload(replay_id, b"data: c", b"be ats")),
                          ("channel length 0", frame_payload(replay_id, b"data: c", b"", 0)),
                          ("a channel length past the payload", frame_payload(replay_id, b"", b"beats", 600)),
                          ("a payload of 9 bytes", struct.pack("<QB", replay_id, 5))):
            add(f"FRAME with {label}", env(K["FRAME"], EXT, me, pl), "frame")
        # tracing controls (m0trace's kind): only from this machine, and only
        # ones the tracer takes (none of these switches anything)
        add("TRACE from the coordinator", env(K["TRACE"], coord, me, b'{"on":false}'), "address")
        for label, control in (("not JSON", b"not json"), ("a list", b"[]"), ("an unknown member", b'{"off":1}'),
                               ("no actor's name", b'{"actors":["nobody"]}'), ("no kind", b'{"kinds":["jobs"]}'),
                               ("an undialable to", b'{"to":"http://x"}'), ("on with nowhere to go", b'{"on":true}')):
            add(f"TRACE with {label}", env(K["TRACE"], EXT, me, control), "control")
    else:  # within a control mailbox's receive limit (64 KiB: runtime/bounds.h); past it nng hangs up, below
        add("a real 60 KiB STOP", env(K["STOP"], coord, me, b"s" * (60 << 10)), "kind")
    if network and role in ("loop", "coordinator"):
        def from_network(label, msg, why):
            frame = len(msg) >= 6 and struct.unpack_from("<IH", msg, 0) in ((MAGIC, K["FRAME"]), (MAGIC, K["TRACE"]))
            return (label, msg, "kind" if frame and why in ("frame", "frame_id", "address", "control") and
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


def check_stream(st, label, counter_now=None, note_id=None, lost=(), frames=None):
    """The stream's frames (`frames`: those it had when counter_now was read,
    so none came after it): ids never repeat and, sorted, rise by exactly 1
    (every id taken from the counter written once, nothing lost); the
    producer's beats only rise (m0pub's frame may cross the producer's in
    flight: both are written as they come); no frame of the attack."""
    frames = [f for f in list(st.frames if frames is None else frames) if not f.comment]
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
        ports = port_map(NAMES[mode])
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
        counter = metric(s.port, "m0_events_published_total")
        # the replay: an id every loop has written (m0pub's, else the last beat every stream has)
        replay_id = note or min(st.ids()[-1] for st in streams.values())
        pub_lines = refusals(s.port)
        # the attack
        boxes = mailboxes(mode, transport, d, ports)
        expect, peers, used = Counter(), [], set()
        t_first = time.monotonic()
        for box, name, addr in boxes:
            role = name.split(".")[0]
            p = SPPeer(addr)
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
        seen = {w: list(st.frames) for w, st in streams.items()}  # before the counter: a beat may come between
        now = metric(s.port, "m0_events_published_total")
        for w, st in streams.items():
            check_stream(st, f"{label}: stream on loop {w}", counter_now=now, note_id=note, lost=set(lost),
                         frames=seen[w])
        for m in ("m0_bus_refusals_total", "m0_stream_frames_dropped_total", "m0_respawns_total"):
            F.check(metric(s.port, m) == 0, f"{label}: {m} stays 0 ({metric(s.port, m)})")

        # oversized: a real 17 MiB message; a connection declaring 2^62 bytes; one declaring 1 GiB
        big = env(K["FRAME"], EXT, actor_id("loop.0"), frame_payload(note or 1, b"data: " + b"c" * (17 << 20)))
        loop0 = next(a for b, n, a in boxes if n == "loop.0")
        p = SPPeer(loop0)
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
        p = SPPeer(loop0)
        p.raw(p.head(1 << 62))
        F.check(p.hung_up(5), f"{label}: a message declared at 2^62 bytes is hung up on")
        p.close()
        pids = [host] + sorted(kids)
        p = SPPeer(loop0)
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
            p = SPPeer(next(a for b, n, a in boxes if n == f"loop.{i}"))
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
        hung = {(a, p) for a, p in named if p.startswith("a peer that has hung up")}  # one of ours, closed first
        F.check(named - unnamed - hung <= used, f"{label}: every refusal line names the actor and one of this test's "
                                         f"connections ({sorted(named - unnamed - used)})")
        F.check(not unnamed, f"{label}: a refused message whose connection closed before the mailbox read it names "
                             f"its peer, not `this process` ({sorted(unnamed)})")
        F.check({a for a, _p in used} == {a for a, _p in named},
                f"{label}: every actor attacked names its peer at least once "
                f"({sorted({a for a, _p in used} - {a for a, _p in named})})")
        F.check(all(n <= bound for n in per.values()),
                f"{label}: at most {bound} line(s) per actor and peer in {elapsed:.1f} s ({dict(per)})")
        F.check(len(lines) == err.count(" refused a "), f"{label}: every refusal line has the documented form "
                f"({[x for x in err.splitlines() if ' refused a ' in x and not LINE_RE.match(x)][:4]})")
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


# ---- an application actor's own socket ---------------------------------------------------------------------------

ECHO_INDEX = 0  # echo is host_check's first actor kind (the doctor lists it first)
SOCKET_ID = (ROLES["app"] << 24) | (ECHO_INDEX << 12) | 0xFFF  # the actor's own socket (service/service.c)
HELD_MS = 1500  # x-sleep-ms: the request echo_actor holds while the attack runs
ROUTE_MS = 5000  # POST /actor/echo's timeout: the held request and the whole attack fit in it
APP_PERIOD_MS = 100  # the producer's beats: the streams stay busy, every id on them
GENS, PLACES = 48, 4  # the plausible ids forged, per loop: entry generations 1..GENS x table places 0..PLACES-1
ASK_TOP = 0xFFFF << 48  # ids no loop gives (a loop's names the loop in its top 16 bits)
ROUNDS_MIN, ATTACK_S = 2, 2.5  # the battery is sent again and again while the legitimate traffic runs
ACTOR_RE = re.compile(r'^(m0_actor_[a-z_]+)\{actor="echo"(?:,(?:outcome|reason)="([a-z_]+)")?\} (\d+)$', re.M)


def echo_figures(port):
    """echo's m0_actor_* figures on /metrics: {(name, outcome or reason or None): value}."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {(n, why or None): int(v) for n, why, v in ACTOR_RE.findall(text)}


def echo_live(port):
    return echo_figures(port).get(("m0_actor_instances", None))


class Post(threading.Thread):
    """POST /actor/echo `body` on a fresh connection, in the background:
    result = (status, body bytes, seconds) or (None, the error, seconds)."""

    def __init__(self, port, body, headers=()):
        super().__init__(daemon=True)
        self.port, self.body, self.headers, self.result = port, body, list(headers), None
        self.start()

    def run(self):
        t0 = time.monotonic()
        try:
            with Conn(self.port, timeout=ROUTE_MS / 1000 + 5) as c:
                c.send(request("POST", "/actor/echo", headers=self.headers + [("Content-Length", str(len(self.body)))],
                               body=self.body))
                st, _, _, b, _ = c.read_response()
            self.result = (st, b, time.monotonic() - t0)
        except Exception as e:  # noqa: BLE001 (reported by the check)
            self.result = (None, repr(e), time.monotonic() - t0)

    def answer(self, timeout):
        self.join(timeout)
        return self.result or (None, "no answer", timeout)


def echoed(result, pid, body):
    """The POST was answered 200 by echo_actor `pid`, its body echoed."""
    st, b, _ = result
    try:
        j = json.loads(b) if st == 200 else None
    except ValueError:
        j = None
    return isinstance(j, dict) and j.get("actor") == "echo" and j.get("pid") == pid and j.get("body") == body.decode()


def plausible(loop):
    """The ids loop `loop` plausibly gives its requests now: an id is the
    loop's place among the process's loops << 48 | the entry's generation << 24
    | its place in the loop's table (actors/asks.c), and this test keeps a few
    entries in use a few dozen times."""
    return [(loop << 48) | (g << 24) | i for g in range(1, GENS + 1) for i in range(PLACES)]


def socket_battery(loops, host_pid, own):
    """What the hostile instance sends echo's socket, one round:
    [(label, message, effects)], effects a Counter of what /metrics must
    count for it: ("echo", reason) in m0_refused_total, ("dropped", reason) in
    m0_actor_replies_dropped_total. `own`: the ids given to the hostile
    instance itself (never among the forged ones). m0__recv's order at the
    socket: envelope (malformed), seal, then the accept list (kind; address: a
    REPLY or PUBLISH whose sender is not an instance); the service's thread
    counts each of those dropped (refused) too. Then the service: a PUBLISH
    whose frame the bus would refuse is `frame`; a REPLY whose `to` is no loop
    is `address` and dropped (refused); a loop: a bad batch head is `batch`
    and dropped (refused), a record naming no request in flight with this instance is
    `reply` and dropped (unknown_id), bytes it cannot read as a record are
    `reply` and dropped (refused)."""
    out = []

    def add(label, msg, refused=(), unknown=0, dropped=0):
        eff = Counter({("echo", r): n for r, n in Counter(refused).items()})
        eff[("dropped", "unknown_id")] += unknown
        eff[("dropped", "refused")] += dropped
        out.append((label, msg, +eff))

    at_door = lambda label, msg, why: add(label, msg, [why], dropped=1)
    loop0, coord = actor_id("loop.0"), actor_id("coordinator")
    forged = b'{"forged":true}'
    reply = lambda payload, to=loop0, frm=APP, **kw: env(K["REPLY"], frm, to, payload, **kw)
    publish = lambda payload, frm=APP, **kw: env(K["PUBLISH"], frm, SOCKET_ID, payload, **kw)
    good_frame = frame_payload(0, b"event: forged\ndata: admitted")
    empty = replies([])
    # not an envelope (each one, with the envelope's checks skipped, an empty REPLY the loop would take)
    at_door("an empty message", b"", "malformed")
    at_door("junk", b"junk", "malformed")
    at_door("43 bytes (short of the header)", reply(empty)[:43], "malformed")
    at_door("a length that says more than came", reply(empty, length=20), "malformed")
    at_door("a length that says less than came", reply(empty, length=4), "malformed")
    at_door("a length of 16 MiB + 1", reply(empty, length=(16 << 20) + 1), "malformed")
    at_door("a length of 2^32 - 1", reply(empty, length=0xFFFFFFFF), "malformed")
    at_door("bad magic m0E2", reply(empty, magic=0x3245306D), "malformed")
    at_door("magic 0", reply(empty, magic=0), "malformed")
    for k in (0, len(KINDS) + 1, 0xFFFF):  # no kind, one past the last, the widest
        at_door(f"kind {k}", env(k, APP, loop0, empty), "malformed")
    at_door("flags 2", reply(empty, flags=2), "malformed")
    at_door("flags 0x8000", reply(empty, flags=0x8000), "malformed")
    at_door("sealed, no trailer", reply(empty, flags=1), "malformed")
    at_door("a PUBLISH sealed, no trailer", publish(good_frame, flags=1), "malformed")
    at_door("200 random bytes", b"\xff" + bytes(RNG.randrange(256) for _ in range(199)), "malformed")
    # a forged seal
    seal = lambda: bytes(RNG.randrange(256) for _ in range(20))
    at_door("REPLY with a forged seal", reply(empty, flags=1, trailer=seal()), "seal")
    at_door("REPLY with a forged seal (the host's pid)",
            reply(empty, flags=1, trailer=seal()[:16] + struct.pack("<I", host_pid)), "seal")
    at_door("PUBLISH with a forged seal (the host's pid)",
            publish(good_frame, flags=1, trailer=seal()[:16] + struct.pack("<I", host_pid)), "seal")
    # every kind the socket never takes
    at_door("READY", env(K["READY"], APP, SOCKET_ID), "kind")
    at_door("READY from loop.0", env(K["READY"], loop0, SOCKET_ID), "kind")
    at_door("FAILED", env(K["FAILED"], APP, SOCKET_ID, b"forged failure"), "kind")
    at_door("GO from the coordinator", env(K["GO"], coord, SOCKET_ID), "kind")
    at_door("STOP from the coordinator", env(K["STOP"], coord, SOCKET_ID), "kind")
    at_door("STOP from an instance", env(K["STOP"], APP, SOCKET_ID), "kind")
    at_door("STOPPED", env(K["STOPPED"], loop0, SOCKET_ID, bytes(56)), "kind")
    at_door("DIED", env(K["DIED"], APP, SOCKET_ID, b"forged death"), "kind")
    at_door("LEAVING", env(K["LEAVING"], loop0, SOCKET_ID), "kind")
    at_door("FRAME", env(K["FRAME"], APP, loop0, good_frame), "kind")
    at_door("FRAME from the producer", env(K["FRAME"], actor_id("producer"), loop0, good_frame), "kind")
    for fd in range(11):
        at_door(f"HANDOFF of descriptor {fd}", env(K["HANDOFF"], loop0, SOCKET_ID, struct.pack("<i", fd)), "kind")
    at_door("JOB with a made-up pointer", env(K["JOB"], loop0, SOCKET_ID, POINTER), "kind")
    at_door("RESULT with a made-up pointer", env(K["RESULT"], actor_id("pool.0.0"), loop0, POINTER), "kind")
    at_door("ANSWER with a made-up pointer", env(K["ANSWER"], APP, loop0, POINTER), "kind")
    at_door("CHUNK with a made-up writer", env(K["CHUNK"], APP, loop0, struct.pack("<QB", 0xDEADBEEF, 1)), "kind")
    at_door("ANSWER with a reply batch", env(K["ANSWER"], APP, loop0, replies([(1, 200, forged)])), "kind")
    at_door("REQUEST", env(K["REQUEST"], loop0, APP, empty), "kind")
    # a REPLY or PUBLISH from an actor that is not an instance
    for who in ("loop.0", "coordinator", "producer"):
        at_door(f"REPLY from {who}", reply(replies([(1, 200, forged)]), frm=actor_id(who)), "address")
        at_door(f"PUBLISH from {who}", publish(good_frame, frm=actor_id(who)), "address")
    at_door("REPLY from an outside publisher", reply(empty, frm=EXT), "address")
    at_door("REPLY from 0xffffffff", reply(empty, frm=0xFFFFFFFF), "address")
    # a REPLY the service has nowhere to put: its `to` is no loop of the host
    for label, to in (("0xffffffff", 0xFFFFFFFF), (f"loop.{loops} (no such loop)", actor_id(f"loop.{loops}")),
                      ("echo.0 (an instance, not a loop)", (ROLES["app"] << 24) | (ECHO_INDEX << 12)),
                      ("echo's own socket", SOCKET_ID), ("the coordinator", coord)):
        add(f"REPLY to {label}", reply(replies([(1, 200, forged)]), to=to), ["address"], dropped=1)
    # a REPLY whose batch head is wrong: dropped whole
    for label, pl in (("a 4-byte batch", b"\x01\x00\x00\x00"),
                      ("batch version 2", replies([(1, 200, forged)], version=2)),
                      ("batch version 0", replies([], version=0)),
                      ("batch flags 1", replies([(1, 200, forged)], flags=1)),
                      ("count 65537", replies([(1, 200, forged)], count=65537)),
                      ("count 2^32 - 1", replies([], count=0xFFFFFFFF))):
        add(f"REPLY with {label}", reply(pl), ["batch"], dropped=1)
    # replies to ids never given to this instance
    made_up = [(1 << 64) - 1, 0, 1, 1 << 47, (loops + 3) << 48, ASK_TOP | 1, ASK_TOP | 2]
    for rid in made_up:
        add(f"REPLY for the made-up id {rid:#x}", reply(replies([(rid, 200, forged)])), ["reply"], unknown=1)
    add("REPLY for 7 made-up ids at once", reply(replies([(rid, 299, forged) for rid in made_up])), ["reply"] * 7,
        unknown=7)
    for l in range(loops):  # every plausible id of a request in flight with the other instance, at each loop
        ids = [i for i in plausible(l) if i not in own]
        add(f"REPLY for {len(ids)} plausible ids at loop.{l}", reply(replies([(i, 299, forged) for i in ids]),
                                                                      to=actor_id(f"loop.{l}")),
            ["reply"] * len(ids), unknown=len(ids))
    add("REPLY with count 3 and one record", reply(replies([(1, 200, forged)], count=3)), ["reply"] * 2,
        unknown=1, dropped=1)
    add("REPLY with bytes after the last record", reply(replies([(1, 200, forged)], tail=b"xyz")), ["reply"] * 2,
        unknown=1, dropped=1)
    add("REPLY with count 0 and 20 bytes after", reply(replies([], tail=bytes(20))), ["reply"], dropped=1)
    add("REPLY whose record does not decode (status 99)", reply(replies([(1, 99, forged)])), ["reply"], unknown=1)
    add("REPLY whose record is cut after its id", reply(replies([], count=1, tail=struct.pack("<QH", 5, 200))),
        ["reply"], unknown=1)
    add("REPLY whose record is cut inside its id", reply(replies([], count=1, tail=b"\x05\x00\x00")), ["reply"],
        dropped=1)
    # frames the bus would refuse
    for label, body in (("an injected event", b"x\n\nid: 5"), ("a CR", b"event: forged\ndata: a\rid: 7"),
                        ("an id line", b"event: forged\ndata: x\nid: 99"), ("an id line first", b"id: 99\ndata: x"),
                        ("a bare id line", b"event: forged\ndata: x\nid"), ("a trailing newline", b"data: x\n"),
                        ("a blank line", b"event: forged\n\ndata: x"), ("70000 bytes", b"data: " + b"a" * 70000)):
        add(f"PUBLISH with {label}", publish(frame_payload(0, body)), ["frame"])
    for label, pl in (("channel m0.x", frame_payload(0, b"data: c", b"m0.x")),
                      ("channel m0.closing", frame_payload(0, b"event: forged\ndata: c", b"m0.closing")),
                      ("a channel with a space", frame_payload(0, b"data: c", b"be ats")),
                      ("a channel with a NUL", frame_payload(0, b"data: c", b"beats\0")),
                      ("a channel with a newline", frame_payload(0, b"data: c", b"beats\n")),
                      ("a channel of 65 bytes", frame_payload(0, b"data: c", b"b" * 65)),
                      ("channel length 0", frame_payload(0, b"data: c", b"", 0)),
                      ("a channel length past the payload", frame_payload(0, b"", b"beats", 600)),
                      ("a payload of 9 bytes", struct.pack("<QB", 0, 5)), ("an empty payload", b"")):
        add(f"PUBLISH with {label}", publish(pl), ["frame"])
    return out


def app_socket(mode, transport, port=None):
    """The hostile instance at echo's own socket (module docstring, last part);
    over tcp at port."""
    label = f"app socket {mode}/{transport}"
    loops = LOOPS[mode]
    d = tempfile.mkdtemp(prefix=f"app-{mode}-{transport}-", dir=TMP)
    os.chmod(d, 0o700)
    actor = {"name": "echo", "placement": "external"}
    if transport == "tcp":
        actor["url"] = f"tcp://127.0.0.1:{port}"
        actor["trusted_network"] = True  # what is attacked here is the admission table, not the proof (test_instance_proof)
    path = os.path.join(TMP, f"topo-app-{mode}-{transport}.json")
    with open(path, "w") as fh:
        route = {"method": "POST", "pattern": "/actor/echo", "actor": "echo", "timeout_ms": ROUTE_MS}
        json.dump({"mode": mode, "loops": loops, "app_actors": [actor], "routes": [route]}, fh)
    url = actor.get("url", f"ipc://{d}/actor.echo.sock")
    said, rc, _, err = harness.doctor_url(path, "echo", d)
    F.check(rc == 0 and said == url, f"{label}: the doctor says echo listens at {url} (rc {rc}, {said}):\n{err}")
    with Server("host_check", "--port", "0", "--run-dir", d, "--metrics-path", "/metrics", "--topology", path,
                env={"M0_HOSTCHECK_PERIOD_MS": str(APP_PERIOD_MS)}) as s:
        host = s.proc.pid
        echo_err = tempfile.TemporaryFile(dir=TMP)
        echo = subprocess.Popen([os.path.join(BIN, "echo_actor"), url, "0"], stdout=subprocess.DEVNULL, stderr=echo_err)
        ECHOES.append(echo)
        F.check(wait_for(lambda: echo_live(s.port) == 1, 10), f"{label}: echo_actor (pid {echo.pid}) connects "
                                                                f"(m0_actor_instances {echo_live(s.port)})")
        if loops == 1:
            st = Stream(s.port)
            F.check(is_stream_head(st), f"{label}: /events is a stream ({st.status_line})")
            streams = {"0": st}
        else:
            streams = hold_each(F, s.port, label) or {}
        for w, st in streams.items():
            F.check(st.wait_frames(2, 5), f"{label}: stream on loop {w} beats before the attack ({st.ids()})")
        health = Health(s.port)
        health.start()
        F.check(not refusals(s.port), f"{label}: nothing is refused before the attack ({dict(refusals(s.port))})")
        fig0 = echo_figures(s.port)
        warm = Post(s.port, b"warm-up").answer(10)
        F.check(echoed(warm, echo.pid, b"warm-up"), f"{label}: POST /actor/echo is echo_actor's 200 ({warm})")
        try:
            hostile = Pair1(url)
        except OSError as e:
            F.check(False, f"{label}: a pair1 socket dials {url} ({e})")
            return
        try:
            F.check(wait_for(lambda: echo_live(s.port) == 2, 10),
                    f"{label}: the hostile pair1 peer connects as a second instance (m0_actor_instances "
                    f"{echo_live(s.port)})")
            # a request held by echo_actor (in flight with the legitimate instance while the attack runs) ...
            held = Post(s.port, b"held", [("x-sleep-ms", str(HELD_MS))])
            F.check(wait_for(lambda: echo_figures(s.port).get(("m0_actor_in_flight", None)) == 1, 3),
                    f"{label}: the x-sleep-ms request is in flight with echo_actor ({echo_figures(s.port)})")
            # ... and one given to the hostile instance (the fewest in flight): what an instance is really sent
            given = Post(s.port, b"given")
            got = hostile.recv(5)
            kind = frm = to = None
            own = []
            try:
                _m, kind, _f, frm, to, _s, _h, _l, n = ENV.unpack_from(got, 0)
                own = request_ids(got[ENV.size:]) if n == len(got) - ENV.size else []
            except (TypeError, struct.error, ValueError):
                pass
            slot = to & 0xFFF if to is not None else None
            F.check(kind == K["REQUEST"] and len(own) == 1 and frm is not None and frm >> 24 == ROLES["loop"]
                    and to >> 24 == ROLES["app"] and slot not in (None, 0),
                    f"{label}: the hostile instance is given a REQUEST of one request, from a loop, to its own "
                    f"slot (kind {kind}, from {frm}, to {to}, ids {own})")
            slot_name = f"echo.{slot}"
            F.check(own and any(own[0] in plausible(l) for l in range(loops)),
                    f"{label}: the id the hostile instance was given is among the plausible ones forged for the "
                    f"other instance's ({own})")
            # meanwhile, 20 requests through echo_actor, one after another
            traffic = {"sent": 0, "got": []}

            def legitimate():
                for i in range(20):
                    traffic["sent"] += 1
                    body = b"during-%d" % i
                    traffic["got"].append((body, Post(s.port, body).answer(ROUTE_MS / 1000 + 5)))
            during = threading.Thread(target=legitimate, daemon=True)
            during.start()
            # the attack: the battery again and again while they run (the first round while the held one waits)
            battery = socket_battery(loops, host, set(own))
            expect, rounds = Counter(), 0
            t_first = time.monotonic()
            try:
                while rounds < ROUNDS_MIN or (during.is_alive() and time.monotonic() - t_first < ATTACK_S):
                    for what, msg, eff in battery:
                        hostile.send(msg)
                        expect += eff
                    rounds += 1
                    time.sleep(0.05)
            except OSError as e:
                F.check(False, f"{label}: the host took every message of round {rounds + 1} ({e})")
            # the hostile instance's own request: answered by it (taken), then once more (refused: answered already)
            answer = env(K["REPLY"], APP, frm or 0, replies([(own[0] if own else 0, 200, b"hostile-own")]))
            hostile.send(answer)
            hostile.send(answer)
            expect += Counter({("echo", "reply"): 1, ("dropped", "unknown_id"): 1})
            # one valid PUBLISH: numbered by the host, on every stream once
            c0 = metric(s.port, "m0_events_published_total")
            hostile.send(env(K["PUBLISH"], APP, SOCKET_ID, frame_payload(0, b"event: hostile\ndata: valid")))
            for w, st in streams.items():
                F.check(st.wait_frames(1, 5, "hostile"), f"{label}: the valid PUBLISH reaches the stream on loop {w}")
            during.join(ROUTE_MS / 1000 * 3)
            h_res, g_res = held.answer(ROUTE_MS / 1000 + 5), given.answer(ROUTE_MS / 1000 + 5)
            t_attack = time.monotonic() - t_first
            print(f"{label}: {rounds} rounds of {len(battery)} messages in {t_attack:.2f} s", flush=True)

            # the legitimate instance's requests: none lost, none answered by the hostile one
            bad = [(b, r) for b, r in traffic["got"] if not echoed(r, echo.pid, b)]
            F.check(traffic["sent"] == 20 and len(traffic["got"]) == 20 and not bad,
                    f"{label}: 20 POSTs during the attack, every one echo_actor's 200 (pid {echo.pid}): "
                    f"{len(traffic['got'])} answered, wrong {bad[:3]}")
            F.check(echoed(h_res, echo.pid, b"held") and h_res[2] >= HELD_MS / 1000 * 0.99,
                    f"{label}: the request held by echo_actor is its 200 after {HELD_MS} ms, not a forged reply "
                    f"of the plausible ids ({h_res})")
            F.check(g_res[0] == 200 and g_res[1] == b"hostile-own",
                    f"{label}: the hostile instance's own request is answered by its reply ({g_res})")
            # the counts: by reason, exactly what was sent
            want = Counter({k: n for k, n in expect.items() if k[0] == "echo"})
            wait_for(lambda: refusals(s.port) == want, 10, 0.05)
            got_r = refusals(s.port)
            F.check(got_r == want, f"{label}: m0_refused_total counts every message once, by reason:\n"
                                   f"  missing {dict(want - got_r)}\n  extra   {dict(got_r - want)}")
            F.check(all(got_r[("echo", r)] > 0 for r in ("malformed", "seal", "kind", "address", "frame", "reply",
                                                          "batch")),
                    f"{label}: every reason is among them ({dict(got_r)})")
            fig = echo_figures(s.port)
            for why in ("unknown_id", "refused"):
                key = ("m0_actor_replies_dropped_total", why)
                n = fig.get(key, 0) - fig0.get(key, 0)
                F.check(n == expect[("dropped", why)],
                        f"{label}: m0_actor_replies_dropped_total{{reason=\"{why}\"}} {n}, as sent "
                        f"({expect[('dropped', why)]})")
            outcomes = {o: fig.get(("m0_actor_requests_total", o), 0) - fig0.get(("m0_actor_requests_total", o), 0)
                        for o in ("ok", "timeout", "bad_reply", "instance_died", "no_instance", "queue_full")}
            F.check(outcomes == {"ok": 23, "timeout": 0, "bad_reply": 0, "instance_died": 0, "no_instance": 0,
                                 "queue_full": 0},
                    f"{label}: m0_actor_requests_total: 23 ok (warm-up, held, 20, the hostile's own), nothing else "
                    f"({outcomes})")
            F.check(fig.get(("m0_actor_in_flight", None)) == 0, f"{label}: nothing is left in flight ({fig})")
            # the streams: every id once, in order, nothing forged; the valid PUBLISH once, numbered by the counter
            marks = {w: len(st.frames) for w, st in streams.items()}
            for w, st in streams.items():
                F.check(wait_for(lambda: len(st.frames) >= marks[w] + 2, 5),
                        f"{label}: stream on loop {w} still beats after the attack")
            seen = {w: list(st.frames) for w, st in streams.items()}  # before the counter: a beat may come between
            c1 = metric(s.port, "m0_events_published_total")
            for w, st in streams.items():
                frames = [f for f in seen[w] if not f.comment]
                ids = [f.id for f in frames]
                odd = [f for f in frames if f.event not in ("beat", "hostile")]
                valid = [f for f in frames if f.event == "hostile"]
                F.check(None not in ids and len(set(ids)) == len(ids) and ids == sorted(ids)
                        and all(b == a + 1 for a, b in zip(ids, ids[1:])),
                        f"{label}: stream on loop {w}: every id once, each the last + 1 ({ids})")
                F.check(not odd, f"{label}: stream on loop {w}: no forged frame ({odd[:3]})")
                F.check(len(valid) == 1 and valid[0].data == "valid" and c0 < valid[0].id <= c1,
                        f"{label}: stream on loop {w}: the valid PUBLISH once, numbered from the host's counter "
                        f"(after {c0}, by {c1}: {valid})")
                F.check(ids and ids[-1] <= c1,
                        f"{label}: stream on loop {w}: no id beyond the counter {c1} ({ids[-3:]})")
            for m in ("m0_bus_refusals_total", "m0_stream_frames_dropped_total"):
                F.check(metric(s.port, m) == 0, f"{label}: {m} stays 0 ({metric(s.port, m)})")
            stolen_ask(s, hostile, echo, label)
            health.stop()
            bad = [g for g in health.got if g != 200]
            F.check(len(health.got) >= 20 and not bad,
                    f"{label}: /health answered 200 throughout ({len(health.got)} asked, not 200: {bad[:3]})")
            F.check(s.proc.poll() is None and alive(host) and echo.poll() is None,
                    f"{label}: the host (pid {host}) and echo_actor (pid {echo.pid}) still run")
            # stderr: named as the actor echo, this peer at most once per 10 s
            elapsed = time.monotonic() - t_first
            text = s.stderr()
            lines = LINE_RE.findall(text)
            me = f"ipc peer pid {os.getpid()}" if transport == "ipc" else "tcp peer 127.0.0.1"
            per = Counter((a, limited(p)) for a, _k, p, _r in lines)
            bound = 1 + int(elapsed // 10)
            F.check({a for a, _k, _p, _r in lines} == {"echo", "relay.0"},
                    f"{label}: every refusal line names the actor echo, or relay.0 for the stolen ask ({sorted(per)})")
            F.check(set(per) == {("echo", me), ("echo", slot_name), ("relay.0", slot_name)},
                    f"{label}: the peers named are this test's {me} (at the socket) and its slot {slot_name} "
                    f"(at the loop, and at relay.0) ({sorted(per)})")
            F.check(all(n <= bound for n in per.values()),
                    f"{label}: at most {bound} line(s) per peer in {elapsed:.1f} s ({dict(per)})")
            F.check(len(lines) == text.count(" refused a ") and "unexpected" not in text,
                    f"{label}: every refusal line has the documented form:\n{text[-800:]}")
        finally:
            hostile.close()
        F.check(wait_for(lambda: echo_live(s.port) == 1, 5),
                f"{label}: the hostile instance leaves (m0_actor_instances {echo_live(s.port)})")
        drain_check(F, s, list(streams.values()), f"{label} drain")
        try:
            rc = echo.wait(5)
        except subprocess.TimeoutExpired:
            rc = None
        F.check(rc == 0, f"{label}: echo_actor, told STOP, exits 0 ({rc}): {harness.read_log(echo_err)[-300:]!r}")


def stolen_ask(s, hostile, echo, label):
    """An ask is answered only by the instance it went to: a REPLY whose `to`
    is a thread instance's slot goes to the caller acting for that instance
    while it waits (service/callers.h), and the caller takes it only from the
    slot it asked, while that slot holds the instance it asked
    (service/post.c). A call's id is its host's counter, from 1, and this is
    the host's first: the hostile instance names the first eight."""
    relay = (ROLES["app"] << 24) | (2 << 12)  # relay.0: host_check's third actor kind, on a thread
    sample = 'm0_refused_total{actor="relay.0",reason="reply"}'
    n0 = metric(s.port, sample) or 0
    with Conn(s.port, timeout=5) as c:
        c.send(request("GET", "/actor/relay", headers=[("x-sleep-ms", "400")]))
        # the ask is with echo_actor (held 400 ms) before the forged answers go
        F.check(wait_for(lambda: (metric(s.port, 'm0_actor_in_flight{actor="echo"}') or 0) >= 1, 3, 0.005),
                f"{label}: relay's ask of echo is in flight")
        for n in range(1, 9):
            hostile.send(env(K["REPLY"], APP, relay, replies([(n, 299, b'{"forged":true}')])))
        st, _, _, b, _ = c.try_response(timeout=5)
    try:
        j = json.loads(b)
    except (TypeError, ValueError):
        j = None
    F.check(st == 200 and isinstance(j, dict) and isinstance(j.get("echo"), dict) and j["echo"].get("pid") == echo.pid,
            f"{label}: relay's m0_ask of echo is answered by echo_actor (pid {echo.pid}), not by the "
            f"hostile instance's forged REPLY to relay.0 ({st} {b!r})")
    F.check(wait_for(lambda: metric(s.port, sample) == n0 + 8, 3),
            f"{label}: the eight forged answers are refused and counted at relay.0 ({metric(s.port, sample)})")

try:
    for mode in ("single", "threads", "prefork"):
        for transport in ("ipc", "tcp"):
            try:
                attack(mode, transport)
            except Exception as e:  # noqa: BLE001 (one configuration's failure must not hide the others')
                F.check(False, f"{mode}/{transport}: {e!r}")
    for mode in ("single", "threads"):
        for transport in ("ipc", "tcp"):
            try:
                if transport == "tcp":
                    harness.with_free_port(lambda port, mode=mode: app_socket(mode, "tcp", port))
                else:
                    app_socket(mode, transport)
            except Exception as e:  # noqa: BLE001 (as above)
                F.check(False, f"app socket {mode}/{transport}: {e!r}")
finally:
    for p in ECHOES:
        if p.poll() is None:
            p.kill()
            p.wait(5)
    reap(SEEN_PIDS)
    shutil.rmtree(TMP, ignore_errors=True)
F.done()
