"""Raw-socket HTTP/1.1 helpers for the integration tests: send exact bytes,
read responses one at a time (status line, headers, Content-Length body), and
tell whether the server closed the connection within a bound.

Every read has a deadline; nothing here can hang a test.
"""
import re
import socket
import time


class Closed(Exception):
    """The peer closed (or reset) before a whole response arrived."""


class Conn:
    def __init__(self, port, timeout=5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.buf = b""

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
        self.sock.sendall(data)

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


def request(method, path, headers=(), body=b"", version="HTTP/1.1", host=True):
    """Builds exact request bytes. `headers` is a list of (name, value)."""
    lines = [f"{method} {path} {version}"]
    if host:
        lines.append("Host: t")
    lines += [f"{k}: {v}" for k, v in headers]
    if isinstance(body, str):
        body = body.encode()
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
