"""Helpers for the tests of clients that stop reading or go away: the server's
side of a client's connection as the kernel sees it (/proc/net/tcp), a
process's resident memory (/proc/PID/status), a byte-exact reader of
pipelined responses for a socket that receives in small pieces, and the proof
that a loop has turned.

The proof (`turns`): two requests answered one after the other on another
connection of the same loop. The second is read by a loop iteration that
began after the first was answered, so after an iteration that began after
anything sent before the first request had arrived: a connection whose
reading is on has had its waiting input read by then (libuv watches it level-
triggered). No sleeping, no timing: if the server's socket still holds input
after that, the server has stopped reading it.
"""
import fcntl
import socket
import struct
import termios
import time

from harness import socket_inodes

PATTERN = bytes(range(251))


def pattern(n, at=0):
    """Bytes [at, at+n) of handle_echo's /big pattern: byte i is i % 251."""
    reps = (at % 251 + n) // 251 + 1
    return (PATTERN * reps)[at % 251:at % 251 + n]


def vm_rss(pid):
    """The resident memory of pid in bytes (VmRSS)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def _hexaddr(addr):
    ip, port = addr[:2]
    return "%02X%02X%02X%02X:%04X" % tuple([int(x) for x in reversed(ip.split("."))] + [port])


def ends(client):
    """(server address, client address) of a connected client socket."""
    return client.getpeername(), client.getsockname()


def server_queue(pid, client):
    """(tx_queue, rx_queue) in bytes of the server-side socket (owned by pid)
    of the connection `client` (a socket, or its ends()) is the other end of;
    None if there is none. rx_queue: what the client sent that the server has
    not read."""
    server, me = client if isinstance(client, tuple) else ends(client)
    local, remote = _hexaddr(server), _hexaddr(me)
    mine = socket_inodes(pid)
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            p = line.split()
            if p[1] == local and p[2] == remote and p[9] in mine:
                tx, rx = p[4].split(":")
                return int(tx, 16), int(rx, 16)
    return None


def unread(sock):
    """Bytes waiting in sock's own receive buffer (FIONREAD)."""
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]


def small_socket(port, rcvbuf=4096, sndbuf=None):
    """A connected client whose receive buffer is small (set before connect,
    so the window it offers stays small)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    if sndbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def reset(sock):
    """Closes with SO_LINGER 0: the kernel sends a reset, not a FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    sock.close()


class Reader:
    """Reads whole responses (Content-Length bodies) from a socket into a
    bytearray: cheap when the socket gives a few KiB per recv."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()

    def _fill(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no whole response within the bound ({len(self.buf)} bytes buffered)")
        self.sock.settimeout(left)
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError(f"closed with {len(self.buf)} bytes buffered")
        self.buf += chunk

    def response(self, timeout=30, head=False):
        """(status, {header: value}, body)."""
        deadline = time.monotonic() + timeout
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end >= 0:
                break
            self._fill(deadline)
        lines = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
        del self.buf[:end + 4]
        if not lines[0].startswith("HTTP/1.1 "):
            raise ValueError(f"not a status line: {lines[0][:80]!r}")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        n = 0 if head else int(headers.get("content-length", "0"))
        while len(self.buf) < n:
            self._fill(deadline)
        body = bytes(self.buf[:n])
        del self.buf[:n]
        return status, headers, body


def get(path, extra=""):
    return f"GET {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n".encode()


class Turns:
    """A keep-alive connection to the loop for the proof that it turned."""

    def __init__(self, port, path="/x"):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.reader = Reader(self.sock)
        self.path = path

    def __call__(self, n=2):
        """n requests answered one after the other; True if each was a 200."""
        ok = True
        for _ in range(n):
            self.sock.sendall(get(self.path))
            ok = self.reader.response(timeout=20)[0] == 200 and ok
        return ok

    def close(self):
        self.sock.close()


class Metrics:
    """m0's --metrics-path over one keep-alive connection, so every reading
    counts that connection once (m0_open_connections) and no other metrics
    connection of ours is still closing: m("open_connections") is the sum of
    m0_open_connections over the loops."""

    def __init__(self, port, path="/metrics"):
        self.port, self.path = port, path
        self._connect()

    def _connect(self):
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        self.reader = Reader(self.sock)

    def __call__(self, name):
        self.sock.sendall(get(self.path))
        st, h, body = self.reader.response(timeout=20)
        if h.get("connection") == "close":  # --max-keepalive-requests: the next reading on a new one
            self.sock.close()
            self._connect()
        if st != 200:
            raise AssertionError(f"{self.path} answered {st}")
        return sum(int(line.rsplit(" ", 1)[1]) for line in body.decode().splitlines()
                   if line.startswith(f"m0_{name}{{") or line.startswith(f"m0_{name} "))

    def close(self):
        self.sock.close()
