"""WebSocket conformance, written from RFC 6455 and RFC 7692, covering what
Autobahn|Testsuite's sections 1-7, 9, 10, 12 and 13 check, against
host_check's GET /ws (an echo; its "beats" are made rare and skipped).

Each case is a list of client frames and what must come back: the echoed
messages and pongs in order, then the server's close frame with one of the
codes the case allows, then the server closing TCP. Every server frame is
checked too: unmasked, no reserved bit but RSV1 on a compressed message's
first frame, control frames whole and short, lengths in their shortest form,
text valid UTF-8, a close payload never 1 byte long.

  1  framing: text and binary of 0, 125, 126, 127, 128, 65535, 65536 bytes
  2  pings: empty, 125 bytes, 126 (1002), binary, unsolicited pongs, ten pings
  3  reserved bits on data, control and after a good message (1002)
  4  reserved opcodes 3-7 and 11-15, alone and after a good message (1002)
  5  fragmentation: control frames fragmented, continuations with no
     message, a new message inside one, pings between fragments
  6  UTF-8: valid text whole and one byte per fragment, every prefix, the
     Kuhn test file's invalid forms (overlong, surrogates, past U+10FFFF,
     5/6-byte, lone and missing continuation bytes), invalid sequences split
     between two fragments at every byte, and fail-fast: the server closes
     1007 at the fragment that cannot be UTF-8, without the message's end
  7  close: after a message, twice, followed by a ping or a message, inside
     a fragmented message, empty, one byte, reasons up to 123 bytes and 124,
     a reason that is not UTF-8, every valid code echoed, invalid ones 1002
  9  limits (scaled: up to the 1 MiB --ws-max-message, one byte past it is
     1009), fragments of 64 B .. 64 KiB, 200 messages in one write
 10  a 64 KiB message auto-fragmented at 1300 bytes
 12, 13  permessage-deflate with each parameter set the RFC lets a client
     offer (server_max_window_bits 8, 9, 15, client_max_window_bits with
     and without a value, client_no_context_takeover, several offers): the
     response's parameters, messages of 16 B .. 128 KiB compressed by the
     client with the window and context it offered, whole and fragmented;
     every compressed echo inflates with a fresh inflater (the server said
     server_no_context_takeover) held to the server window it accepted, and
     a message longer than that window comes back uncompressed. A declined
     offer, RSV1 on a control frame or a continuation, data that is not
     deflate, and a message that inflates past the bound are refused.

Split and interleave (issue 35.2): each case's bytes go whole, one byte per
write (cases up to 4 KiB on the wire) and cut at seeded random places
(rawhttp's Splits: M0_TEST_SEED replays a run; a cut never falls exactly
between two frames, so the end of one and the start of the next, the close
included, share a write). Messages of 70 KB and 256 KiB (text and binary,
plain and compressed) are followed by a close in ONE write and in 997-byte
writes, the last write (the end of the message and the close) a read of its
own: the shapes that crashed the host (issue 35.1). A ping 50 ms after the
close that follows a 256 KiB message must not cut the echo short (the
server lingers: a socket closed with bytes unread resets the connection).

After every case the host answers GET /health (and no worker was
replaced). Modes: single loop (every case, every cutting), --threads 2 and
--workers 2 (every case whole and one random cutting, the crash shapes).
M0_WS_ONLY=<part of a case's name> runs only those cases.
python3-websockets sends 70 KB then closes, three runs per mode (with and
without compression). A frame published on the socket's channel (m0pub),
longer than 256 bytes, reaches a socket that said server_max_window_bits=8
uncompressed and one that said nothing compressed.
"""
import asyncio
import functools
import os
import random
import shutil
import socket
import struct
import sys
import tempfile
import time
import zlib

try:
    import websockets
except ImportError:  # Debian's package, when the tests run under another python3 of the same version
    sys.path.append("/usr/lib/python3/dist-packages")
    import websockets

from harness import Failures, Prefork, Server, children, get, m0pub, wait_for
from rawhttp import Mode, Splits

F = Failures()
SP = Splits()
F.replay = f"M0_TEST_SEED={SP.root}"
MAX = 1 << 20  # --ws-max-message
KEY = b"dGhlIHNhbXBsZSBub25jZQ=="
TAIL = b"\x00\x00\xff\xff"
CLOSE_WAIT = 10.0  # bound on one case's answer (large echoes under a loaded machine)


# ---- frames ------------------------------------------------------------------

def frame(op, payload=b"", fin=True, rsv=0, mask=True, rng=None):
    """A client frame: rsv is the RSV bits as a number 0-7 (4 = RSV1)."""
    if isinstance(payload, str):
        payload = payload.encode()
    b0 = (0x80 if fin else 0) | (rsv & 7) << 4 | op
    n = len(payload)
    m = 0x80 if mask else 0
    if n < 126:
        hdr = bytes([b0, m | n])
    elif n < 65536:
        hdr = bytes([b0, m | 126]) + struct.pack(">H", n)
    else:
        hdr = bytes([b0, m | 127]) + struct.pack(">Q", n)
    if not mask:
        return hdr + payload
    key = bytes((rng or random).randrange(256) for _ in range(4))
    k = (key * (n // 4 + 1))[:n]
    return hdr + key + (int.from_bytes(payload, "big") ^ int.from_bytes(k, "big")).to_bytes(n, "big")


def close_payload(code, reason=b""):
    return struct.pack(">H", code) + reason


class Chunked:
    """Fixed-size writes back to back, the last one (the end of the last
    message and what follows it in the same write) sent after a pause, so it
    is a read of its own at the server."""

    def __init__(self, size):
        self.size = size

    def __str__(self):
        return f"{self.size}-byte writes"

    def writes(self, messages):
        data = b"".join(messages)
        tail = min(len(data) - 1, max(self.size, len(messages[-1]) + 1))
        cut = len(data) - tail
        out = [(data[i:min(i + self.size, cut)], 0) for i in range(0, cut, self.size)]
        if out:
            out[-1] = (out[-1][0], 0.002)
        return out + [(data[cut:], 0)]


class Late:
    """Every frame but the last in one write, the last one 50 ms later: it
    comes after the server has handled what was before it (a ping after
    the close handshake, while the end of a large echo is still on its way)."""

    def __str__(self):
        return "the last frame late"

    def writes(self, messages):
        return [(b"".join(messages[:-1]), 0.05), (messages[-1], 0)]


# ---- the client --------------------------------------------------------------

class Pmd:
    """The negotiated permessage-deflate parameters, from the response."""

    def __init__(self, ext):
        self.server_bits, self.client_bits, self.client_no_context = 15, 15, False
        self.server_no_context = False
        self.params = {}
        for part in ext.split(";")[1:]:
            k, _, v = part.strip().partition("=")
            self.params[k] = v.strip('"') if v else None
        if "server_max_window_bits" in self.params:
            self.server_bits = int(self.params["server_max_window_bits"])
        if self.params.get("client_max_window_bits"):
            self.client_bits = int(self.params["client_max_window_bits"])
        self.client_no_context = "client_no_context_takeover" in self.params
        self.server_no_context = "server_no_context_takeover" in self.params
        self._z = None

    def compress(self, data):
        """One message as the client sends it: with the window it offered
        (zlib makes 8 into 9: its distances stay below 256), its context
        kept unless it agreed to client_no_context_takeover."""
        if self._z is None or self.client_no_context:
            self._z = zlib.compressobj(6, zlib.DEFLATED, -max(9, self.client_bits))
        out = self._z.compress(data) + self._z.flush(zlib.Z_SYNC_FLUSH)
        return out[:-4] if out.endswith(TAIL) else out

    def inflate(self, data):
        """A server message, with a fresh inflater (server_no_context_takeover)
        of the window the server accepted, 64 bytes of output at a time:
        zlib checks distances against its window only outside the current
        output buffer, so this holds the stream to the window. None if it
        is not a deflate stream within that window."""
        d = zlib.decompressobj(-self.server_bits)
        out, left = [], data + TAIL
        try:
            while left:
                out.append(d.decompress(left, 64))
                left = d.unconsumed_tail
            return b"".join(out)
        except zlib.error:
            return None


class Client:
    def __init__(self, port, offer=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=CLOSE_WAIT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        req = (b"GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               b"Sec-WebSocket-Key: " + KEY + b"\r\nSec-WebSocket-Version: 13\r\n")
        if offer is not None:
            req += b"Sec-WebSocket-Extensions: " + offer.encode() + b"\r\n"
        self.sock.sendall(req + b"\r\n")
        buf = b""
        deadline = time.monotonic() + CLOSE_WAIT
        while b"\r\n\r\n" not in buf and time.monotonic() < deadline:
            c = self.sock.recv(65536)
            if not c:
                break
            buf += c
        head, _, self.buf = buf.partition(b"\r\n\r\n")
        self.head = head.decode("latin-1")
        self.ok = self.head.startswith("HTTP/1.1 101")
        self.ext = None
        for line in self.head.split("\r\n")[1:]:
            k, _, v = line.partition(":")
            if k.strip().lower() == "sec-websocket-extensions":
                self.ext = v.strip()
        self.pmd = Pmd(self.ext) if self.ext else None

    def send(self, frames, mode):
        """Every frame as `mode` cuts them; False when the server closed first."""
        try:
            for piece, gap in mode.writes(frames):
                self.sock.sendall(piece)
                if gap:
                    time.sleep(gap)
        except (BrokenPipeError, ConnectionResetError, OSError):
            return False
        return True

    def read_to_eof(self, timeout=CLOSE_WAIT):
        """Everything until the server closes: (bytes, eof)."""
        buf, deadline = self.buf, time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                c = self.sock.recv(1 << 20)
            except socket.timeout:
                break
            except (ConnectionResetError, OSError):
                return buf, True
            if not c:
                return buf, True
            buf += c
        return buf, False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def parse_server(data, pmd):
    """The server's frames as events: ([(kind, payload, compressed)], close
    code or None when no close frame came, [what was wrong])."""
    events, errs, close, cur = [], [], None, None
    at = 0
    while at < len(data):
        if len(data) - at < 2:
            errs.append(f"{len(data) - at} stray bytes at the end")
            break
        b0, b1 = data[at], data[at + 1]
        fin, rsv, op, n, h = b0 & 0x80, (b0 >> 4) & 7, b0 & 0x0F, b1 & 0x7F, 2
        if b1 & 0x80:
            errs.append("a masked server frame")
        if n == 126:
            n, h = struct.unpack(">H", data[at + 2:at + 4])[0], 4
            if n < 126:
                errs.append("a 16-bit length under 126")
        elif n == 127:
            n, h = struct.unpack(">Q", data[at + 2:at + 10])[0], 10
            if n < 65536:
                errs.append("a 64-bit length under 65536")
        if len(data) - at < h + n:
            errs.append(f"a frame cut short ({len(data) - at - h} of {n} bytes)")
            break
        p = data[at + h:at + h + n]
        at += h + n
        if close is not None:
            errs.append(f"a frame (opcode {op}) after the close frame")
            continue
        if op >= 8:
            if not fin or n > 125 or rsv:
                errs.append(f"a bad control frame (opcode {op}, fin {bool(fin)}, {n} bytes, rsv {rsv})")
            if op == 8:
                if n == 1:
                    errs.append("a close payload of one byte")
                close = struct.unpack(">H", p[:2])[0] if n >= 2 else 1005
                try:
                    p[2:].decode()
                except UnicodeDecodeError:
                    errs.append("a close reason that is not UTF-8")
            elif op == 10:
                events.append(("pong", p, False))
            elif op != 9:  # the server's own pings (heartbeat) are not the case's
                errs.append(f"opcode {op} from the server")
            continue
        if op not in (0, 1, 2):
            errs.append(f"opcode {op} from the server")
            continue
        if rsv & 3 or (rsv & 4 and (op == 0 or pmd is None)):
            errs.append(f"reserved bits {rsv} on a data frame (opcode {op})")
        if op == 0:
            if cur is None:
                errs.append("a continuation with no message")
                continue
            cur[2].append(p)
        else:
            if cur is not None:
                errs.append("a new message inside a fragmented one")
            cur = (op, bool(rsv & 4), [p])
        if fin:
            kind, z, parts = cur
            cur = None
            payload = b"".join(parts)
            if z:
                payload = pmd.inflate(payload)
                if payload is None:
                    errs.append(f"a compressed message that does not inflate within {pmd.server_bits} bits")
                    continue
            if kind == 1:
                try:
                    payload.decode()
                except UnicodeDecodeError:
                    errs.append("a text message that is not UTF-8")
                if payload.startswith(b'{"beat":'):
                    continue  # the channel's, not the case's
            events.append(("text" if kind == 1 else "binary", payload, z))
    return events, close, errs


# ---- cases -------------------------------------------------------------------

class Case:
    """build(pmd, rng) -> the frames (or, with expect None, the frames and
    what to expect: messages made for what was negotiated); expect:
    [(kind, payload)]; close: the codes the server may close with (1005: an
    empty close payload). offer/ext: the extension offered and the
    response's parameters required (None: no extension)."""

    def __init__(self, name, frames, expect=(), close=(1000,), offer=None, ext=None):
        self.name, self.frames, self.close = name, frames, set(close)
        self.expect = None if expect is None else list(expect)
        self.offer, self.ext = offer, ext

    def build(self, pmd, rng):
        return self.frames(pmd, rng) if callable(self.frames) else [frame(*f[:2], **f[2], rng=rng) if len(f) > 2
                                                                   else frame(*f, rng=rng) for f in self.frames]

    def wire_size(self):
        return sum(len(f[1]) + 14 for f in self.frames) if not callable(self.frames) else 1 << 30


CLOSE = (8, close_payload(1000))


def T(p, fin=True, rsv=0):
    return (1, p.encode() if isinstance(p, str) else p, {"fin": fin, "rsv": rsv})


def B(p, fin=True, rsv=0):
    return (2, p, {"fin": fin, "rsv": rsv})


def C(p, fin=True, rsv=0):
    return (0, p.encode() if isinstance(p, str) else p, {"fin": fin, "rsv": rsv})


def echo(kind, p):
    return (kind, p.encode() if isinstance(p, str) else p)


def section1():
    out = []
    for n in (0, 125, 126, 127, 128, 65535, 65536):
        out.append(Case(f"1.1 text {n}", [T("*" * n), CLOSE], [echo("text", "*" * n)]))
        out.append(Case(f"1.2 binary {n}", [B(b"\xfe" * n), CLOSE], [echo("binary", b"\xfe" * n)]))
    return out


def section2():
    return [
        Case("2.1 ping empty", [(9, b""), CLOSE], [("pong", b"")]),
        Case("2.2 ping text", [(9, b"Hello, world!"), CLOSE], [("pong", b"Hello, world!")]),
        Case("2.3 ping binary", [(9, b"\x00\xff\xfe\xfd\xfc\xfb\x00\xff"), CLOSE],
             [("pong", b"\x00\xff\xfe\xfd\xfc\xfb\x00\xff")]),
        Case("2.4 ping 125", [(9, b"\xfe" * 125), CLOSE], [("pong", b"\xfe" * 125)]),
        Case("2.5 ping 126", [(9, b"\xfe" * 126), CLOSE], [], (1002,)),
        Case("2.7 unsolicited pong", [(10, b""), CLOSE], []),
        Case("2.8 unsolicited pong, payload", [(10, b"unsolicited pong payload"), CLOSE], []),
        Case("2.9 pong then ping", [(10, b"unsolicited pong payload"), (9, b"ping payload"), CLOSE],
             [("pong", b"ping payload")]),
        Case("2.10 ten pings", [(9, b"payload-%d" % i) for i in range(10)] + [CLOSE],
             [("pong", b"payload-%d" % i) for i in range(10)]),
    ]


def section3():
    return [
        Case("3.1 text rsv 1", [T("Hello, world!", rsv=1), CLOSE], [], (1002,)),
        Case("3.2 echo then text rsv 2", [T("Hello, world!"), T("Hello, world!", rsv=2), (9, b"")],
             [echo("text", "Hello, world!")], (1002,)),
        Case("3.4 echo then text rsv 4 (no extension)", [T("Hello, world!"), T("Hello, world!", rsv=4), (9, b"")],
             [echo("text", "Hello, world!")], (1002,)),
        Case("3.5 binary rsv 5", [B(b"\x00\xff" * 4, rsv=5), CLOSE], [], (1002,)),
        Case("3.6 ping rsv 6", [(9, b"ping", {"rsv": 6}), CLOSE], [], (1002,)),
        Case("3.7 close rsv 7", [(8, close_payload(1000), {"rsv": 7})], [], (1002,)),
        Case("an unmasked frame (RFC 6455 5.1)", [(1, b"Hello, world!", {"mask": False}), CLOSE], [], (1002,)),
    ]


def section4():
    out = []
    for op in (3, 4, 5, 6, 7, 11, 12, 13, 14, 15):
        out.append(Case(f"4 opcode {op}", [(op, b""), CLOSE], [], (1002,)))
        out.append(Case(f"4 opcode {op} after a message", [T("Hello, world!"), (op, b"reserved"), (9, b"")],
                        [echo("text", "Hello, world!")], (1002,)))
    return out


def section5():
    pings = [T("fragment1", fin=False), C("fragment2", fin=False), (9, b"ping payload"),
             C("fragment3", fin=False), (9, b"ping payload 2"), C("fragment4", fin=False), C("fragment5")]
    return [
        Case("5.1 ping fragmented", [(9, b"fragment1", {"fin": False}), C("fragment2"), CLOSE], [], (1002,)),
        Case("5.2 pong fragmented", [(10, b"fragment1", {"fin": False}), C("fragment2"), CLOSE], [], (1002,)),
        Case("5.3 text in two", [T("fragment1", fin=False), C("fragment2"), CLOSE],
             [echo("text", "fragment1fragment2")]),
        Case("5.6 ping between fragments", [T("fragment1", fin=False), (9, b"ping payload"), C("fragment2"), CLOSE],
             [("pong", b"ping payload"), echo("text", "fragment1fragment2")]),
        Case("5.9 continuation, no message", [C("non-continuation payload"), T("Hello, world!"), CLOSE], [], (1002,)),
        Case("5.12 continuation fin=0, no message", [C("non-continuation payload", fin=False), T("Hello, world!"),
                                                     CLOSE], [], (1002,)),
        Case("5.15 a message, then continuations with none", [T("fragment1", fin=False), C("fragment2"),
                                                              C("fragment3", fin=False), T("fragment4"), CLOSE],
             [echo("text", "fragment1fragment2")], (1002,)),
        Case("5.16 continuations only", [C("fragment1", fin=False), T("fragment2"), C("fragment3"),
                                         C("fragment1", fin=False), T("fragment2"), C("fragment3"), CLOSE],
             [], (1002,)),
        Case("5.18 a new message inside one", [T("fragment1", fin=False), T("fragment2"), CLOSE], [], (1002,)),
        Case("5.19 pings between five fragments", pings + [CLOSE],
             [("pong", b"ping payload"), ("pong", b"ping payload 2"),
              echo("text", "fragment1fragment2fragment3fragment4fragment5")]),
        Case("5 binary fragments, empty ones", [B(b"", fin=False), C(b"\x00\x01", fin=False), C(b""), CLOSE],
             [echo("binary", b"\x00\x01")]),
    ]


KOSME = "κόσμε".encode()
VALID = [KOSME, b"Hello-\xc2\xb5@\xc3\x9f\xc3\xb6\xc3\xa4\xc3\xbc\xc3\xa0\xc3\xa1-UTF-8!!",
         b"\x00", b"\xc2\x80", b"\xe0\xa0\x80", b"\xf0\x90\x80\x80",  # first of each length
         b"\x7f", b"\xdf\xbf", b"\xef\xbf\xbf", b"\xf4\x8f\xbf\xbf",  # last
         b"\xed\x9f\xbf", b"\xee\x80\x80", b"\xef\xbf\xbd", b"\xef\xbf\xbe",  # around the surrogates, U+FFFD/E
         b"\xf0\x9f\x98\x80 \xe2\x9c\x93"]
INVALID = [
    b"\xf8\x88\x80\x80\x80", b"\xfc\x84\x80\x80\x80\x80", b"\xfb\xbf\xbf\xbf\xbf", b"\xfd\xbf\xbf\xbf\xbf\xbf",
    b"\xf4\x90\x80\x80", b"\xf7\xbf\xbf\xbf",  # past U+10FFFF
    b"\x80", b"\xbf", b"\x80\xbf", b"\x80\xbf\x80", b"\xc0 ", b"\xe0 ", b"\xf0 ", b"\xc2",  # lone / missing
    b"\xe0\x80", b"\xf0\x80\x80", b"\xdf", b"\xef\xbf", b"\xf3\xbf\xbf", b"\xe0\x80\xaf",
    b"\xfe", b"\xff", b"\xfe\xfe\xff\xff",
    b"\xc0\xaf", b"\xc1\xbf", b"\xe0\x9f\xbf", b"\xf0\x8f\xbf\xbf", b"\xc0\x80", b"\xe0\x80\x80",  # overlong
    b"\xed\xa0\x80", b"\xed\xad\xbf", b"\xed\xae\x80", b"\xed\xaf\xbf", b"\xed\xb0\x80", b"\xed\xbe\x80",
    b"\xed\xbf\xbf", b"\xed\xa0\x80\xed\xb0\x80",  # surrogates
    KOSME + b"\xed\xa0\x80edited",
]


def section6():
    out = [
        Case("6.1.1 empty text", [T(""), CLOSE], [echo("text", "")]),
        Case("6.1.2 empty fragments", [T("", fin=False), C("", fin=False), C(""), CLOSE], [echo("text", "")]),
        Case("6.1.3 empty, middle, empty", [T("", fin=False), C("middle", fin=False), C(""), CLOSE],
             [echo("text", "middle")]),
    ]
    for i, v in enumerate(VALID):
        out.append(Case(f"6.2 valid #{i} whole", [T(v), CLOSE], [echo("text", v)]))
        if len(v) > 1:  # one byte per fragment: every character split between fragments
            fr = [T(v[:1], fin=False)] + [C(v[j:j + 1], fin=False) for j in range(1, len(v) - 1)] + [C(v[-1:])]
            out.append(Case(f"6.2 valid #{i} a byte per fragment", fr + [CLOSE], [echo("text", v)]))
    for j in range(1, len(KOSME) + 1):  # every prefix: whole characters echo, a cut one is 1007
        p = KOSME[:j]
        ok = True
        try:
            p.decode()
        except UnicodeDecodeError:
            ok = False
        out.append(Case(f"6.6 prefix {j}", [T(p), CLOSE], [echo("text", p)] if ok else [], (1000,) if ok else (1007,)))
    for i, v in enumerate(INVALID):
        out.append(Case(f"6.x invalid #{i} whole", [T(v), CLOSE], [], (1007,)))
        out.append(Case(f"6.x invalid #{i} in a binary message is fine", [B(v), CLOSE], [echo("binary", v)]))
        w = b"ok " + v + b" end"
        for cut in range(3, 3 + len(v) + 1):  # split between two fragments at every byte of the sequence
            out.append(Case(f"6.x invalid #{i} split at {cut}", [T(w[:cut], fin=False), C(w[cut:]), CLOSE], [],
                            (1007,)))
    # Fail fast (6.4): the fragment that cannot be UTF-8 closes the socket; the message's end never comes.
    out += [
        Case("6.4.1 fail fast: a fragment past U+10FFFF", [T(KOSME, fin=False), C(b"\xf4\x90\x80\x80", fin=False)],
             [], (1007,)),
        Case("6.4.2 fail fast: the bad byte in the next fragment", [T(KOSME + b"\xf4", fin=False),
                                                                    C(b"\x90\x80\x80", fin=False)],
             [], (1007,)),
        Case("6.4 fail fast: a surrogate in the first fragment", [T(b"ok \xed\xa0\x80", fin=False)], [], (1007,)),
        Case("6.x a message ending inside a character", [T(b"ok \xe2\x9c", fin=False), C(b""), CLOSE], [], (1007,)),
    ]
    return out


def section7():
    big = "Hello, world! " * 18725  # 262150 bytes
    out = [
        Case("7.1.1 echo then close", [T("Hello World!"), CLOSE], [echo("text", "Hello World!")]),
        Case("7.1.2 close twice", [CLOSE, CLOSE], []),
        Case("7.1.3 close then ping", [CLOSE, (9, b"Hello World!")], []),
        Case("7.1.4 close then text", [CLOSE, T("Hello World!")], []),
        Case("7.1.5 close inside a fragmented message", [T("fragment1", fin=False), CLOSE, C("fragment2")], []),
        Case("7.1.6 256 KiB, close, then a ping", [T(big), CLOSE, (9, b"Hello World!")], [echo("text", big)]),
        Case("7.3.1 close empty", [(8, b"")], [], (1005, 1000)),
        Case("7.3.2 close of one byte", [(8, b"\x03")], [], (1002,)),
        Case("7.3.3 close 1000", [(8, close_payload(1000))], []),
        Case("7.3.4 close 1000 with a reason", [(8, close_payload(1000, b"Hello World!"))], []),
        Case("7.3.5 close with a 123-byte reason", [(8, close_payload(1000, b"*" * 123))], []),
        Case("7.3.6 close with a 124-byte reason", [(8, close_payload(1000, b"*" * 124))], [], (1002,)),
        Case("7.5.1 close reason not UTF-8", [(8, close_payload(1000, KOSME + b"\xed\xa0\x80edited"))], [], (1007,)),
    ]
    for code in (1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999, 4000, 4999):
        out.append(Case(f"7.7 close {code} echoed", [(8, close_payload(code))], [], (code,)))
    for code in (0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535):
        out.append(Case(f"7.9 close {code} refused", [(8, close_payload(code))], [], (1002,)))
    return out


@functools.lru_cache(maxsize=None)
def data(seed, n, text):
    """Messages that compress like real ones: JSON-ish lines, or random
    bytes with runs of zeros (made once per seed, size and kind)."""
    rng = random.Random(f"{seed}/{n}/{text}")
    if text:
        words = ["alpha", "beta", "gamma", "δέλτα", "epsilon", "✓", "42", "beat", "stream", "m0"]
        s, parts = 0, []
        while s < n:
            w = f'{{"k":"{rng.choice(words)}","v":{rng.randrange(1000)}}}\n'.encode()
            parts.append(w)
            s += len(w)
        b = b"".join(parts)[:n]
        while True:  # never cut inside a character
            try:
                b.decode()
                return b
            except UnicodeDecodeError:
                b = b[:-1] + b"."
    b = bytearray(rng.randbytes(n))
    for i in range(0, n, 64):
        b[i:i + 24] = bytes(len(b[i:i + 24]))
    return bytes(b)


def section9_10():
    def frag(kind, msg, size):
        op = 1 if kind == "text" else 2
        parts = [msg[i:i + size] for i in range(0, len(msg), size)] or [b""]
        return [(op if i == 0 else 0, p, {"fin": i == len(parts) - 1}) for i, p in enumerate(parts)]

    out = []
    for n in (65536, 262144, MAX):
        for kind in ("text", "binary"):
            m = data(9, n, kind == "text")
            out.append(Case(f"9.{1 if kind == 'text' else 2} {kind} {n}", [(1 if kind == "text" else 2, m), CLOSE],
                            [(kind, m)]))
    for size in (64, 256, 1024, 4096, 16384, 65536):
        for kind in ("text", "binary"):
            m = data(size, 262144, kind == "text")
            out.append(Case(f"9.{3 if kind == 'text' else 4} {kind} 256 KiB in fragments of {size}",
                            frag(kind, m, size) + [CLOSE], [(kind, m)]))
    out.append(Case("9 one byte past --ws-max-message", [B(b"\x01" * (MAX + 1)), CLOSE], [], (1009,)))
    out.append(Case("9 fragments past --ws-max-message", frag("binary", b"\x01" * (MAX + 1), 65536) + [CLOSE],
                    [], (1009,)))
    msgs = [data(i, 64, True) for i in range(200)]
    out.append(Case("9.7 200 text messages in one write", [T(m) for m in msgs] + [CLOSE],
                    [("text", m) for m in msgs]))
    bins = [data(i, 64, False) for i in range(200)]
    out.append(Case("9.8 200 binary messages in one write", [B(m) for m in bins] + [CLOSE],
                    [("binary", m) for m in bins]))
    m = data(10, 65536, True)
    out.append(Case("10.1.1 64 KiB auto-fragmented at 1300", frag("text", m, 1300) + [CLOSE], [("text", m)]))
    return out


# ---- permessage-deflate (sections 12 and 13) ---------------------------------

# (offer, the response's parameters required)
PMD_SETS = [
    ("permessage-deflate", {"server_no_context_takeover": None}),
    ("permessage-deflate; client_max_window_bits", {"server_no_context_takeover": None,
                                                    "client_max_window_bits": "15"}),
    ("permessage-deflate; client_no_context_takeover; client_max_window_bits",
     {"server_no_context_takeover": None, "client_no_context_takeover": None, "client_max_window_bits": "15"}),
    ("permessage-deflate; server_max_window_bits=9; client_max_window_bits",
     {"server_no_context_takeover": None, "server_max_window_bits": "9", "client_max_window_bits": "15"}),
    ("permessage-deflate; server_max_window_bits=15; client_max_window_bits",
     {"server_no_context_takeover": None, "server_max_window_bits": "15", "client_max_window_bits": "15"}),
    ("permessage-deflate; client_no_context_takeover; server_max_window_bits=9; client_max_window_bits",
     {"server_no_context_takeover": None, "client_no_context_takeover": None, "server_max_window_bits": "9",
      "client_max_window_bits": "15"}),
    ("permessage-deflate; client_no_context_takeover; server_max_window_bits=15; client_max_window_bits",
     {"server_no_context_takeover": None, "client_no_context_takeover": None, "server_max_window_bits": "15",
      "client_max_window_bits": "15"}),
    ("permessage-deflate; client_no_context_takeover; server_max_window_bits=9; client_max_window_bits, "
     "permessage-deflate; client_no_context_takeover; client_max_window_bits, "
     "permessage-deflate; client_max_window_bits",
     {"server_no_context_takeover": None, "client_no_context_takeover": None, "server_max_window_bits": "9",
      "client_max_window_bits": "15"}),
    ("permessage-deflate; server_max_window_bits=8", {"server_no_context_takeover": None,
                                                      "server_max_window_bits": "8"}),
    ("permessage-deflate; server_max_window_bits=12; server_no_context_takeover",
     {"server_no_context_takeover": None, "server_max_window_bits": "12"}),
    ("permessage-deflate; client_max_window_bits=8", {"server_no_context_takeover": None,
                                                      "client_max_window_bits": "8"}),
    ("permessage-deflate; client_max_window_bits=10; server_max_window_bits=10",
     {"server_no_context_takeover": None, "server_max_window_bits": "10", "client_max_window_bits": "10"}),
    ("x-webkit-deflate-frame, permessage-deflate; server_max_window_bits=16, permessage-deflate; "
     "server_max_window_bits=11", {"server_no_context_takeover": None, "server_max_window_bits": "11"}),
]
PMD_SIZES = (16, 64, 256, 1024, 4096, 16384, 65536, 131072)


def pmd_cases():
    out = []
    for si, (offer, ext) in enumerate(PMD_SETS):
        for frag_size in (0, 256, 4096):
            def build(pmd, rng, frag_size=frag_size, si=si):
                frames, expect = [], []
                for n in PMD_SIZES if frag_size != 256 else PMD_SIZES[:5]:
                    for kind in ("text", "binary"):
                        m = data(f"{si}/{frag_size}", n, kind == "text")
                        z = pmd.compress(m)
                        op = 1 if kind == "text" else 2
                        parts = [z[i:i + frag_size] for i in range(0, len(z), frag_size)] if frag_size else [z]
                        for i, p in enumerate(parts or [b""]):
                            frames.append(frame(op if i == 0 else 0, p, fin=i == len(parts) - 1,
                                                rsv=4 if i == 0 else 0, rng=rng))
                        expect.append((kind, m))
                frames.append(frame(8, close_payload(1000), rng=rng))
                return frames, expect
            out.append(Case(f"13.{si + 1} fragments of {frag_size or 'none'}: {offer}", build, None, offer=offer,
                            ext=ext))
    # an uncompressed message on a pmd socket, both kinds in one write
    out.append(Case("12 uncompressed message on a pmd socket", [T("plain"), B(b"\x00plain"), CLOSE],
                    [echo("text", "plain"), echo("binary", b"\x00plain")], offer="permessage-deflate",
                    ext=PMD_SETS[0][1]))
    refused = [
        ("RSV1 on a ping", lambda pmd, rng: [frame(9, b"x", rsv=4, rng=rng), frame(8, close_payload(1000), rng=rng)],
         (1002,)),
        ("RSV1 on a continuation", lambda pmd, rng: [frame(1, pmd.compress(b"ab"), fin=False, rsv=4, rng=rng),
                                                     frame(0, b"", rsv=4, rng=rng)], (1002,)),
        ("data that is not deflate", lambda pmd, rng: [frame(2, b"\xff\xff\xff\xff", rsv=4, rng=rng),
                                                       frame(8, close_payload(1000), rng=rng)], (1002,)),
        ("compressed text that is not UTF-8",
         lambda pmd, rng: [frame(1, pmd.compress(b"ok \xed\xa0\x80"), rsv=4, rng=rng)], (1007,)),
        ("a message that inflates past the bound",
         lambda pmd, rng: [frame(2, pmd.compress(b"\x00" * (MAX + 1)), rsv=4, rng=rng)], (1009,)),
    ]
    for name, build, codes in refused:
        out.append(Case(f"12 refused: {name}", build, [], codes, offer="permessage-deflate", ext=PMD_SETS[0][1]))
    for offer in ("permessage-deflate; server_max_window_bits=7", "permessage-deflate; client_max_window_bits=16",
                  "permessage-deflate; server_max_window_bits", "permessage-deflate; foo",
                  "permessage-deflate; client_no_context_takeover; client_no_context_takeover"):
        out.append(Case(f"13 declined, then RSV1 is refused: {offer}",
                        lambda pmd, rng: [frame(1, zlib.compress(b"x")[2:-4], rsv=4, rng=rng)], [], (1002,),
                        offer=offer, ext=None))
    return out


def large_shapes():
    """The crash shapes: 70 KB and 256 KiB, then a close, plain and compressed."""
    out = []
    for n in (70000, 262144):
        for kind in ("text", "binary"):
            op = 1 if kind == "text" else 2
            m = data(35, n, kind == "text")
            out.append(Case(f"crash shape: {kind} {n} then close", [(op, m), CLOSE], [(kind, m)]))

            def build(pmd, rng, m=m, op=op, kind=kind):
                return [frame(op, pmd.compress(m), rsv=4, rng=rng), frame(8, close_payload(1000), rng=rng)], [(kind, m)]
            out.append(Case(f"crash shape: compressed {kind} {n} then close", build, None,
                            offer="permessage-deflate; client_max_window_bits", ext=PMD_SETS[1][1]))
    return out


# ---- running -----------------------------------------------------------------

def run_case(srv, case, mode, where, rng, kids):
    label = f"{where}, {case.name}, {mode}"
    c = Client(srv.port, case.offer)
    try:
        if not c.ok:
            F.check(False, f"{label}: handshake ({c.head.splitlines()[:1]})")
            return
        if case.offer is not None:
            got = c.pmd.params if c.pmd else None
            if got != case.ext:
                F.check(False, f"{label}: Sec-WebSocket-Extensions {c.ext!r}, want {case.ext}")
                return
        frames = case.build(c.pmd, rng)
        expect = case.expect
        if expect is None:  # a case whose messages depend on what was negotiated
            frames, expect = frames
        c.send(frames, mode)
        data_, eof = c.read_to_eof()
    finally:
        c.close()
    events, close, errs = parse_server(data_, c.pmd)
    got = [(k, p) for k, p, _ in events]
    ok = not errs and got == expect and close in case.close and eof
    if not ok:
        def short(ev):
            return [(k, p if len(p) <= 40 else f"{len(p)} bytes") for k, p in ev]
        F.check(False, f"{label}: got {short(got)[:6]} close {close} eof {eof} {errs[:3]}; "
                       f"want {short(expect)[:6]} close {sorted(case.close)}")
    else:
        F.check(True, "")
    if c.pmd is not None and c.pmd.server_bits < 15:  # a message longer than the server's window never comes compressed
        big = [len(p) for k, p, z in events if z and len(p) > 1 << c.pmd.server_bits]
        F.check(not big, f"{label}: compressed past the {c.pmd.server_bits}-bit window: {big[:4]}")
    alive(srv, label, kids)


def alive(srv, label, kids):
    try:
        st, _ = get(srv.port, "/health", timeout=CLOSE_WAIT)
    except OSError as e:
        st = repr(e)
    ok = st == 200 and srv.proc.poll() is None and (kids is None or children(srv.proc.pid) == kids)
    if not ok:
        F.check(False, f"{label}: the host still serves (/health {st}, exit {srv.proc.poll()}, workers "
                       f"{kids} -> {children(srv.proc.pid) if kids else None})")
        F.done()  # exits: the cases after this one would say the same
    F.check(True, "")


def modes_for(case, where):
    """Every case whole; single loop: byte by byte (small cases) and two
    random cuttings; the other modes one random cutting. The crash shapes
    also in 997-byte writes everywhere; 7.1.6 with its ping late too."""
    small = case.wire_size() <= 4096
    ms = [Mode("whole")]
    if case.name.startswith("crash shape"):
        return ms + [Chunked(997), SP.random(f"{where}/{case.name}")]
    if case.name.startswith("7.1.6"):
        ms.append(Late())
    if where == "single":
        if small:
            ms.append(Mode("bytes"))
        ms += [SP.random(f"{where}/{case.name}/{i}") for i in range(2)]
    else:
        ms.append(SP.random(f"{where}/{case.name}"))
    return ms


def channel_frame(srv, run_dir, where, kids):
    """A published frame longer than a small server window: a socket that
    said server_max_window_bits=8 gets it uncompressed (the channel's one
    compressed form has a 15-bit window), one that said nothing compressed;
    both as published."""
    offers = {8: "permessage-deflate; server_max_window_bits=8", 15: "permessage-deflate"}
    socks = {bits: Client(srv.port, offer) for bits, offer in offers.items()}
    try:
        for bits, c in socks.items():
            F.check(c.ok and c.pmd is not None and c.pmd.server_bits == bits, f"{where}: channel, {offers[bits]}: "
                                                                                f"negotiated ({c.ext!r})")
        # Both sockets are subscribed once their 101 came; the frame is published after.
        body = ('{"note":"' + "published on beats, longer than 256 bytes; " * 20 + '"}').encode()
        rc, out, err = m0pub("--run-dir", run_dir, "--event", "note", body.decode())
        F.check(rc == 0, f"{where}: m0pub exits 0 ({rc}, {err.strip()})")
        for bits, c in socks.items():
            def arrived(c=c):
                c.sock.settimeout(0.05)
                try:
                    d = c.sock.recv(1 << 16)
                    c.buf += d
                except socket.timeout:
                    pass
                return any(k == "text" for k, _, _ in parse_server(c.buf, c.pmd)[0])
            wait_for(arrived, CLOSE_WAIT)
            c.send([frame(8, close_payload(1000))], Mode("whole"))
            d, eof = c.read_to_eof()
            events, close, errs = parse_server(d, c.pmd)
            got = [(k, p, z) for k, p, z in events if k == "text"]
            want_z = bits == 15
            F.check(not errs and [(k, p) for k, p, _ in got] == [("text", body)] and got[0][2] == want_z and
                    close == 1000, f"{where}: channel frame to a {bits}-bit server window: "
                                   f"{'compressed' if want_z else 'plain'} and whole "
                                   f"({[(k, len(p), z) for k, p, z in got]}, close {close}, {errs[:2]})")
    finally:
        for c in socks.values():
            c.close()
    alive(srv, f"{where}: channel frame", kids)


async def websockets_runs(port, where):
    """python3-websockets sends 70 KB then closes normally (issue 35.1's repro)."""
    msg = "x" * 70000
    for compression in ("deflate", None):
        for i in range(3):
            try:
                async with websockets.connect(f"ws://127.0.0.1:{port}/ws", compression=compression,
                                              max_size=None) as ws:
                    await ws.send(msg)
                    got = None
                    while got != msg:
                        got = await asyncio.wait_for(ws.recv(), CLOSE_WAIT)
                    await ws.close()
                    code = ws.close_code
            except Exception as e:  # noqa: BLE001 (what failed is the finding)
                code = repr(e)
            F.check(code == 1000, f"{where}: websockets ({compression}) run {i}: 70 KB echoed, close 1000 ({code})")


def main():
    cases = (section1() + section2() + section3() + section4() + section5() + section6() + section7() +
             section9_10() + pmd_cases() + large_shapes())
    modes = [("single", [], Server), ("--threads 2", ["--threads", "2"], Server),
             ("--workers 2", ["--workers", "2"], Prefork)]
    only = os.environ.get("M0_WS_ONLY")  # a substring of the cases' names: only those (debugging)
    if only:
        cases = [c for c in cases if only in c.name]
    t0 = time.monotonic()
    run_dir = tempfile.mkdtemp(prefix="m0-wsconf-")
    os.chmod(run_dir, 0o700)
    for where, args, cls in modes:
        with cls("host_check", "--port", "0", "--ws-max-message", str(MAX), "--run-dir", run_dir, *args,
                 env={"M0_HOSTCHECK_PERIOD_MS": "3600000"}) as srv:
            kids = None
            if cls is Prefork:
                kids = wait_for(lambda: len(children(srv.proc.pid)) == 2 and children(srv.proc.pid), 10)
                F.check(bool(kids), f"{where}: two workers")
            rng = random.Random(f"{SP.root}/{where}")
            n = 0
            for case in cases:
                for mode in modes_for(case, where):
                    run_case(srv, case, mode, where, rng, kids)
                    n += 1
            channel_frame(srv, run_dir, where, kids)
            asyncio.run(websockets_runs(srv.port, where))
            alive(srv, f"{where}: after websockets", kids)
            F.check(srv.stop() == 0, f"{where}: exit 0 after {n} runs")
            print(f"{where}: {n} case runs, {time.monotonic() - t0:.1f} s so far", flush=True)
    shutil.rmtree(run_dir, ignore_errors=True)
    F.done()


if __name__ == "__main__":
    main()
