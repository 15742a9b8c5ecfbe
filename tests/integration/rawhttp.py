"""Raw-socket HTTP/1.1 helpers for the integration tests: send exact bytes,
read responses one at a time (status line, headers, Content-Length body), and
tell whether the server closed the connection within a bound.

Every read has a deadline; nothing here can hang a test.

Split sending (issue 35.2): the same bytes can reach the server whole, one
byte per write, or cut at random places, so a parser that only ever saw
whole requests in one read is tried at every boundary.

    sp = Splits()                       # the run's seed: M0_TEST_SEED, else drawn (printed)
    for mode in sp.modes("GET", 4):     # whole, bytes, lines, then 4 random cuttings
        with Conn(port) as k:
            k.send_split([req1, req2], mode, fin=True)  # FIN right behind the last byte
            data = k.read_until_closed()

A random cutting never cuts exactly between two messages: the end of one
and the start of the next always go out in the same write (and the FIN,
`shutdown(SHUT_WR)`, right behind the last write). Each cutting has a seed
of its own, derived from the run's seed and its label, printed in
`str(mode)`: `M0_TEST_SEED=S` replays the run. `M0_TEST_SPLIT=bytes` (or
`lines`, `random`) makes every plain `Conn.send` of any test split that way
too.
"""
import os
import random
import re
import socket
import struct
import time

SEED_ENV = "M0_TEST_SEED"
SPLIT_ENV = "M0_TEST_SPLIT"


class Closed(Exception):
    """The peer closed (or reset) before a whole response arrived."""


class Conn:
    def __init__(self, port, timeout=5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.buf = b""
        self.split = env_mode()  # None unless M0_TEST_SPLIT asks every send to be split

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, data):
        if isinstance(data, str):
            data = data.encode("latin-1")
        if self.split is None:
            self.sock.sendall(data)
            return
        for piece, gap in self.split.writes([data]):
            self.sock.sendall(piece)
            if gap:
                time.sleep(gap)

    def send_split(self, messages, mode, fin=False):
        """Sends `messages` (bytes, or a list of them: requests pipelined in
        this order) cut as `mode` says, then, with fin, half-closes
        (shutdown(SHUT_WR)) right behind the last write. True when every byte
        went out; False when the server closed or reset first (it refused
        what it had read: the test reads its answer)."""
        if isinstance(messages, (bytes, bytearray)):
            messages = [bytes(messages)]
        try:
            for piece, gap in mode.writes(messages):
                self.sock.sendall(piece)
                if gap:
                    time.sleep(gap)
            if fin:
                self.sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError, OSError):  # ENOTCONN: shutdown after a reset
            return False
        return True

    def wait_until(self, cond, timeout=None):
        """True once cond(what the server sent, left in the buffer) holds,
        False when it closed or the bound passed first."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while not cond(self.buf):
            try:
                self._fill(deadline)
            except (Closed, TimeoutError, socket.timeout, OSError):
                return bool(cond(self.buf))
        return True

    def wait_bytes(self, marker, timeout=None):
        """True once `marker` is in what the server sent (left in the
        buffer), False when it closed or the bound passed first."""
        return self.wait_until(lambda b: marker in b, timeout)

    def read_until_closed(self, timeout=None):
        """Everything the server sends until it closes (EOF or reset), with
        what was buffered before: (bytes, closed). closed is False when the
        bound passed first."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            try:
                self._fill(deadline)
            except Closed:
                out, self.buf = self.buf, b""
                return out, True
            except (TimeoutError, socket.timeout):
                out, self.buf = self.buf, b""
                return out, False

    def read_responses(self, n, heads=(), timeout=None, keep=False):
        """The next n final responses (see parse_responses; interim 1xx
        ones come along in the list, not counted in n), taken from the
        buffer (left there with keep): (responses, None), or (what was
        whole, why not) when the server closed, the bound passed or the
        bytes are no response."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            try:
                got, rest = parse_responses(self.buf, heads, limit=n)
            except ValueError as e:
                return [], f"not a response: {e}"
            if sum(1 for r in got if r.status >= 200) >= n:
                if not keep:
                    self.buf = rest
                return got, None
            try:
                self._fill(deadline)
            except (Closed, TimeoutError, socket.timeout, OSError) as e:
                return got, f"{type(e).__name__}: {e}"

    def _fill(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no response within the bound")
        self.sock.settimeout(left)
        try:
            chunk = self.sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            raise Closed(f"closed with {len(self.buf)} unparsed bytes: {self.buf[:200]!r}")
        self.buf += chunk

    def read_response(self, timeout=None, head=False):
        """One response: (status, reason, headers{lower: value}, body, raw_head).
        Bodies are read by Content-Length (or none for HEAD/1xx/204/304)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while b"\r\n\r\n" not in self.buf:
            self._fill(deadline)
        raw_head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = raw_head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        # Strict: bytes left over from the previous answer (a HEAD that sent
        # a body) must not pass for the next status line.
        if not re.fullmatch(r"HTTP/1\.[01] \d{3}( .*)?", lines[0]):
            raise ValueError(f"not a status line: {lines[0][:80]!r}")
        status = int(parts[1])
        reason = parts[2] if len(parts) > 2 else ""
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers.setdefault(k.strip().lower(), v.strip())
        n = 0
        if not (head or status < 200 or status in (204, 304)):
            n = int(headers.get("content-length", "0"))
        while len(self.buf) < n:
            self._fill(deadline)
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, reason, headers, body, lines[0]

    def try_response(self, timeout=None, head=False):
        """Like read_response, but never raises: on a close or a timeout it
        returns (None, "", {}, b"", "<what happened>") so a check can fail."""
        try:
            return self.read_response(timeout, head)
        except (Closed, TimeoutError, OSError, ValueError, IndexError) as e:
            return None, "", {}, b"", f"no response: {type(e).__name__}: {e}"

    def closed_within(self, seconds):
        """True if the server closes the connection (EOF or reset) within
        `seconds`, discarding anything it still sends; False if it stays open."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                return True
            except (socket.timeout, TimeoutError):
                return False
            if not chunk:
                return True
            self.buf += chunk


def ws_frames(buf):
    """The whole server frames (unmasked) at the start of buf: ([(opcode,
    payload)], the bytes of a frame not whole yet)."""
    out = []
    while len(buf) >= 2:
        n, at = buf[1] & 0x7F, 2
        if n == 126:
            if len(buf) < 4:
                break
            n, at = struct.unpack(">H", buf[2:4])[0], 4
        elif n == 127:
            if len(buf) < 10:
                break
            n, at = struct.unpack(">Q", buf[2:10])[0], 10
        if len(buf) < at + n:
            break
        out.append((buf[0] & 0x0F, buf[at:at + n]))
        buf = buf[at + n:]
    return out, buf


def request(method, path, headers=(), body=b"", version="HTTP/1.1", host=True):
    """Builds exact request bytes. `headers` is a list of (name, value)."""
    lines = [f"{method} {path} {version}"]
    if host:
        lines.append("Host: t")
    lines += [f"{k}: {v}" for k, v in headers]
    if isinstance(body, str):
        body = body.encode()
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


# ---- whole responses from a byte stream ------------------------------------

class Response:
    """One response as it came: `status`, `head` (the status line and header
    lines, as text), `body` (raw: a chunked body keeps its chunk lines)."""

    def __init__(self, status, head, body):
        self.status, self.head, self.body = status, head, body

    def header(self, name):
        for line in self.head[1:]:
            k, _, v = line.partition(":")
            if k.strip().lower() == name:
                return v.strip()
        return None

    def __repr__(self):
        return f"Response({self.head[0]!r}, {len(self.head) - 1} headers, {self.body[:60]!r})"


def _chunked_end(data, at):
    """Where a chunked body starting at `at` ends (after its trailers), or
    None when it is not all there. Raises ValueError on a bad chunk line."""
    while True:
        eol = data.find(b"\r\n", at)
        if eol < 0:
            return None
        size = int(data[at:eol].split(b";", 1)[0].strip() or b"x", 16)
        at = eol + 2
        if size == 0:
            end = data.find(b"\r\n\r\n", at - 2)
            return None if end < 0 else end + 4
        if len(data) < at + size + 2:
            return None
        if data[at + size:at + size + 2] != b"\r\n":
            raise ValueError(f"chunk of {size} bytes not followed by CRLF")
        at += size + 2


def parse_responses(data, heads=(), limit=None):
    """The whole responses at the start of `data`, and the bytes after them:
    ([Response], rest). Framing as a client reads it: no body for a HEAD
    (heads[i] true for the i-th request), a 1xx, 204 or 304; chunked; else
    Content-Length, else (a 1.1 server closing) the rest. Interim 1xx
    responses do not count as an answer. Stops after `limit` final ones.
    Raises ValueError on bytes that are no status line."""
    out, at, i = [], 0, 0
    while at < len(data) and (limit is None or i < limit):
        end = data.find(b"\r\n\r\n", at)
        if end < 0:
            start = data[at:at + 9]  # a head still coming: at least it must begin as one
            if not (b"HTTP/1.1 ".startswith(start) or b"HTTP/1.0 ".startswith(start) or
                    re.match(rb"HTTP/1\.[01] \d", data[at:at + 10])):
                raise ValueError(f"not a status line: {data[at:at + 60]!r}")
            break
        lines = data[at:end].decode("latin-1").split("\r\n")
        if not re.fullmatch(r"HTTP/1\.[01] \d{3}( .*)?", lines[0]):
            raise ValueError(f"not a status line: {lines[0][:80]!r}")
        status = int(lines[0].split(" ")[1])
        r = Response(status, lines, b"")
        body_at = end + 4
        head = i < len(heads) and heads[i]
        if head or status < 200 or status in (204, 304):
            body_end = body_at
        elif (r.header("transfer-encoding") or "").lower() == "chunked":
            body_end = _chunked_end(data, body_at)
        elif r.header("content-length") is not None:
            body_end = body_at + int(r.header("content-length"))
            if body_end > len(data):
                body_end = None
        else:
            body_end = None  # to the close: only what read_until_closed gave is whole
        if body_end is None:
            break
        r.body = data[body_at:body_end]
        out.append(r)
        at = body_end
        if status >= 200:
            i += 1
    return out, data[at:]


# ---- split sending -----------------------------------------------------------

class Mode:
    """How bytes go out: `whole` (one write), `bytes` (one write per byte,
    back to back: the server reads runs of them), `lines` (cut after every
    CR, LF and ':', never exactly between two messages), `random` (cut where
    a seeded generator says, never exactly between two messages). `lines`
    and `random` leave about a millisecond between writes, so that each
    piece is a read of its own at the server."""

    GAP = 0.001

    def __init__(self, kind, seed=None, root=None):
        assert kind in ("whole", "bytes", "lines", "random")
        self.kind, self.seed, self.root = kind, seed, root

    def __str__(self):
        if self.kind != "random":
            return self.kind
        return f"random cuts (seed {self.seed}; replay: {SEED_ENV}={self.root})"

    def pieces(self, messages):
        """The writes, as bytes, for `messages` sent back to back."""
        return [p for p, _ in self.writes(messages)]

    def writes(self, messages):
        data = b"".join(messages)
        if self.kind == "whole" or len(data) < 2:
            return [(data, 0)]
        if self.kind == "bytes":
            return [(data[i:i + 1], 0) for i in range(len(data))]
        ends, at = set(), 0
        for m in messages[:-1]:
            at += len(m)
            ends.add(at)
        if self.kind == "lines":
            cuts = {i + 1 for i, b in enumerate(data[:-1]) if b in b"\r\n:"} - ends
            edges = [0] + sorted(cuts) + [len(data)]
            return [(data[a:b], self.GAP if b < len(data) else 0) for a, b in zip(edges, edges[1:])]
        rng = random.Random(self.seed)
        # Half the cuts fall near where parsers keep state: around CR, LF,
        # ':' and SP, and around the ends of messages (never on them).
        hot = [i for i, b in enumerate(data) if b in b"\r\n: "] + [e + d for e in ends for d in (-2, -1, 1, 2)]
        want = rng.randint(1, min(24, len(data) - 1))
        cuts = set()
        for _ in range(8 * want):
            if len(cuts) >= want:
                break
            c = rng.choice(hot) + rng.randint(0, 1) if hot and rng.random() < 0.5 else rng.randint(1, len(data) - 1)
            if 0 < c < len(data) and c not in ends:
                cuts.add(c)
        edges = [0] + sorted(cuts) + [len(data)]
        return [(data[a:b], self.GAP if b < len(data) else 0) for a, b in zip(edges, edges[1:])]


class Splits:
    """The run's cuttings. Its seed is M0_TEST_SEED when set, else drawn;
    it is printed once, here, and each random Mode names it too."""

    def __init__(self, quiet=False):
        env = os.environ.get(SEED_ENV, "")
        self.root = int(env) if env.strip() else random.SystemRandom().randrange(1, 10 ** 9)
        if not quiet:
            print(f"split seed {self.root} (replay: {SEED_ENV}={self.root})", flush=True)

    def random(self, label):
        return Mode("random", f"{self.root}/{label}", self.root)

    def modes(self, label, n_random):
        """whole, bytes, lines, then n_random random cuttings, each seeded by label."""
        return [Mode("whole"), Mode("bytes"), Mode("lines")] + [self.random(f"{label}/{i}") for i in range(n_random)]


def env_mode(_state={}):  # noqa: B006 (one Splits and one counter per process, made on first use)
    """The Mode M0_TEST_SPLIT asks of every plain Conn.send (`bytes`, or
    `random`: a cutting per connection, seeded by the run's seed and the
    connection's number), or None."""
    kind = os.environ.get(SPLIT_ENV, "")
    if kind in ("", "whole"):
        return None
    if kind in ("bytes", "lines"):
        return Mode(kind)
    if kind != "random":
        raise ValueError(f"{SPLIT_ENV}={kind}: whole, bytes, lines or random")
    if "splits" not in _state:
        _state["splits"], _state["n"] = Splits(), 0
    _state["n"] += 1
    return _state["splits"].random(f"conn{_state['n']}")
