"""An m0 application actor instance in Python: the standard library alone,
over the system's nng (libnng.so.1) through ctypes.

The host listens at the actor's URL (the doctor prints it under
topology.app_actors[].url); an instance dials it with a pair1 socket,
receives REQUEST messages (a batch of requests) and answers each with
exactly one REPLY message (a batch of replies, possibly empty). STOP, SIGTERM
or SIGINT ends it; a STOP that says the host reloads (its payload the one
byte 1) does not: the connection is closed and nng redials the same URL,
where the host's next generation listens. docs/wire.md is the byte layout this module implements;
service/wire.c is the host's side of it, and every decoder here refuses what
that one refuses (ValueError).

    import m0actor

    def receive(req):
        return 200, [("Content-Type", "text/plain")], b"hello " + req.body

    raise SystemExit(m0actor.run("ipc:///run/m0/actor.hello.sock", receive))

An instance also publishes: Instance(url).publish(channel, frame) puts a
frame (SSE event lines, without id) on every stream of that channel, from
any thread, whenever it likes, while the Instance's serve() runs (run() is
Instance(url).serve(receive)). One that only publishes serves on a thread
of its own, without a receive:

    actor = m0actor.Instance("ipc:///run/m0/actor.news.sock")
    threading.Thread(target=actor.serve, daemon=True).start()
    actor.publish("news", "event: headline\ndata: hello")

A receive may answer in pieces (server-sent events, a long body):
w = req.writer(200, "text/event-stream") sends the head, receive returns
None, and a thread of its own goes on with w.write(data) (which waits for
the host's room: docs/wire.md, Replies that stream), then w.end().

The whole API: run, Instance (serve, publish, send, call, monitor, stop),
Request.writer (Writer: write, end, abort),
and the codecs below (envelope, request and reply batches, frames,
messages). An instance answers m0_send and m0_call too: serve(...,
on_message=f) (run too) calls f(type, data) for each MESSAGE, and a call's
answer is what f returns, (type, data), or none. It sends and calls actors
by name itself, from any thread, its receive and on_message included:
Instance.send(actor, type, data), Instance.call(actor, type, data,
timeout) -> (type, data); and Instance.monitor(actor) has the host send
this actor a note (NOTE_UP, NOTE_DOWN, NOTE_EXITED) through on_message
each time an instance of actor comes, leaves or exits. A message of a kind this module does not handle is
ignored (said once on stderr), so a host that speaks a newer wire does not
break it.

cmake --install puts this file (and echo_actor.py) in the folder
`pkg-config --variable=pythondir m0` names (docs/building.md, Installing):
PYTHONPATH=$(pkg-config --variable=pythondir m0) python3 my_actor.py.

A tls+tcp:// URL is dialed with TLS, both ends presenting a certificate
(docs/actors.md, Outside the host): this instance's certificate, its key and
the CA that signs the host's are the PEM files M0_TLS_CERT, M0_TLS_KEY and
M0_TLS_CA name (all three), and the host's certificate must name the URL's
host.

Over plain tcp:// the host asks each instance to prove it holds the actor's
secret (docs/wire.md, Proving who you are): a HELLO with a nonce, answered
with HMAC-SHA256(secret, the HELLO's payload). The secret is the one line of
the key file M0_ACTOR_SECRET_FILE names (mode 600, this user's), or
run(..., secret_file=PATH); an instance the host spawned finds it in
M0__ACTOR_SECRET.

Strings (method, target, path, query, header names and values, path
parameters) are decoded as ISO-8859-1, which maps every byte to one
character, so nothing a client sent is lost or refused; encode them back
with .encode("latin-1") for the bytes. Reply header names and values given as
str are encoded the same way (bytes are taken as they are); a reply body
given as str is encoded as UTF-8.

Works on Python 3.11 and later (Debian 12 and 13, nng 1.5.2 and 1.10.1).
"""

import collections
import ctypes
import errno
import hashlib
import hmac
import itertools
import os
import signal
import struct
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse

__all__ = [
    "Envelope", "Request", "Reply", "ReplyError",
    "encode_envelope", "decode_envelope",
    "encode_requests", "decode_requests", "iter_requests",
    "encode_replies", "decode_replies", "iter_replies",
    "header_ok", "channel_ok", "frame_ok", "encode_frame",
    "decode_message", "encode_return", "encode_message", "decode_return",
    "NOTE_UP", "NOTE_DOWN", "NOTE_EXITED", "MONITOR",
    "Instance", "Writer", "run", "read_secret", "prove",
]

# ---- the layout (docs/wire.md; runtime/envelope.h, service/wire.h) ---------

MAGIC = 0x3145306D  # "m0E1" in little-endian bytes
ENV_HEADER = 44
MAX_PAYLOAD = 16 << 20
# Kind numbers: the place in runtime/kinds.h's list, READY = 1.
KIND_STOP = 4
KIND_REQUEST = 12
KIND_REPLY = 13
KIND_PUBLISH = 15  # a frame for the host's streams
KIND_HELLO = 18  # the host's challenge, and this instance's proof (docs/wire.md, Proving who you are)
KIND_MESSAGE = 19  # a send or a call (docs/wire.md, Messages)
KIND_RETURN = 20  # the answer to a MESSAGE
KIND_STREAM = 21  # a reply in pieces (docs/wire.md, Replies that stream)
KIND_CREDIT = 22  # the host's room for a stream, or its client gone
STREAM_OPEN, STREAM_DATA, STREAM_END, STREAM_ABORT = 1, 2, 3, 4
CREDIT_MORE, CREDIT_GONE = 1, 2
STREAM_WINDOW = 256 << 10  # bytes sent and not yet granted back
RETURN_ANSWERED, RETURN_NONE = 0, 1  # a RETURN's code: data is the answer; no answer
RETURN_REFUSED = 2  # the host could not pass this instance's call on: data is a u32 errno
NOTE_UP, NOTE_DOWN, NOTE_EXITED = 0xFF000001, 0xFF000002, 0xFF000003  # a monitor's notes (m0.h's M0_MSG_*)
MSG_ASK = 0xFF000010  # an ask (m0_ask) as a call: a one-record request batch, answered by receive (docs/wire.md)
MONITOR = "m0.monitor"  # the name a MESSAGE gives to have the host monitor an actor (docs/wire.md, Monitors)
NAME_MAX = 64  # bytes of a MESSAGE's name
SECRET_MIN, SECRET_MAX = 16, 4096

WIRE_VERSION = 1
BATCH_HEAD = 8
MAX_COUNT = 65536  # records in one batch
MAX_HEADERS = 100  # headers in one request or reply
MAX_PARAMS = 8  # path parameters in one request
MAX_NAME = 256  # bytes of a reply header's name
MAX_VALUE = 8192  # bytes of a reply header's value
CHANNEL_MAX = 64  # bytes of a channel's name (base/limits.h)
FRAME_MAX = 64 * 1024  # bytes of a frame's event lines

_ENV = struct.Struct("<IHHIIQQQI")  # magic kind flags from to seq trace_hi trace_lo length
_BATCH = struct.Struct("<HHI")  # version flags count
_REQ = struct.Struct("<QQQIIIIHBBI")  # id trace_hi trace_lo method target path body nheaders nparams vminor reserved
_REPLY = struct.Struct("<QHHI")  # id status nheaders body
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_MESSAGE = struct.Struct("<QIH")  # call type name-length
_RETURN = struct.Struct("<QII")  # call type code
_FRAME = struct.Struct("<QH")  # a PUBLISH payload's id (0: the host numbers it) and channel length
_PAIR = struct.Struct("<II")  # a header's name and value lengths
assert _ENV.size == ENV_HEADER and _BATCH.size == BATCH_HEAD and _REQ.size == 48 and _REPLY.size == 16

_TCHAR = frozenset(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_FRAMING = (b"content-length", b"transfer-encoding", b"connection")


# ---- the envelope -------------------------------------------------------

class Envelope:
    """The 44-byte header of every message (runtime/envelope.h)."""

    __slots__ = ("kind", "frm", "to", "seq", "trace_hi", "trace_lo")

    def __init__(self, kind, frm=0, to=0, seq=0, trace_hi=0, trace_lo=0):
        self.kind, self.frm, self.to, self.seq = kind, frm, to, seq
        self.trace_hi, self.trace_lo = trace_hi, trace_lo

    def __eq__(self, other):
        return isinstance(other, Envelope) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    def __repr__(self):
        return "Envelope(%s)" % ", ".join("%s=%r" % (k, getattr(self, k)) for k in self.__slots__)


def encode_envelope(env, payload=b""):
    """One whole message: env's header, then payload."""
    if len(payload) > MAX_PAYLOAD:
        raise ValueError("payload of %d bytes is over the %d-byte limit" % (len(payload), MAX_PAYLOAD))
    return _ENV.pack(MAGIC, env.kind, 0, env.frm, env.to, env.seq, env.trace_hi, env.trace_lo, len(payload)) + bytes(
        payload)


def decode_envelope(msg):
    """(Envelope, payload) of one whole message, with m0__env_read's checks:
    at least 44 bytes, the magic, a kind other than 0, flags 0, a payload
    length of at most 16 MiB that is exactly the bytes after the header. A
    kind this module does not know is not refused here (the wire gains
    kinds; Instance ignores those it does not handle)."""
    msg = memoryview(msg).cast("B")
    if len(msg) < ENV_HEADER:
        raise ValueError("a message of %d bytes is shorter than the 44-byte envelope" % len(msg))
    magic, kind, flags, frm, to, seq, hi, lo, plen = _ENV.unpack_from(msg)
    if magic != MAGIC:
        raise ValueError("bad magic 0x%08x" % magic)
    if kind == 0:
        raise ValueError("kind 0")
    if flags != 0:
        raise ValueError("flags 0x%04x set" % flags)
    if plen > MAX_PAYLOAD:
        raise ValueError("payload length %d over the limit" % plen)
    if plen != len(msg) - ENV_HEADER:
        raise ValueError("payload length %d, but %d bytes follow the header" % (plen, len(msg) - ENV_HEADER))
    return Envelope(kind, frm, to, seq, hi, lo), bytes(msg[ENV_HEADER:])


# ---- records ------------------------------------------------------------

def _s(b):
    return bytes(b).decode("latin-1")


def _b(v, what):
    if isinstance(v, str):
        return v.encode("latin-1")
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    raise ValueError("%s must be str or bytes, not %s" % (what, type(v).__name__))


class Request:
    """One request as the host sent it. Strings are ISO-8859-1 decoded."""

    __slots__ = ("id", "method", "target", "path", "query", "headers", "params", "body", "trace_hi", "trace_lo",
                 "version_minor")

    def __init__(self, id=0, method="GET", target="/", path=None, headers=(), params=(), body=b"", trace_hi=0,
                 trace_lo=0, version_minor=1, query=None):
        self.id = id
        self.method = method
        self.target = target
        if path is None:  # the target before '?'
            path = target.split("?", 1)[0]
        self.path = path
        if query is None:  # after '?', without it; empty when none (as wire.c derives it)
            rest = target[len(path):]
            query = rest[1:] if rest.startswith("?") else ""
        self.query = query
        self.headers = [(n, v) for n, v in headers]
        self.params = list(params)
        self.body = bytes(body)
        self.trace_hi = trace_hi
        self.trace_lo = trace_lo
        self.version_minor = version_minor

    def writer(self, status=200, content_type=None, headers=()):
        """Answers this request in pieces (docs/actors.md, Replies that
        stream): the head (status, content_type, headers as receive's) is
        sent now and a Writer returned; receive then returns None, and the
        Writer's write(), end() and abort() go on from any thread, after
        receive has returned too. ValueError for what the host would
        refuse; RuntimeError outside serve()."""
        if getattr(_serving, "req", None) is not self:
            raise RuntimeError("writer(): only in receive, for the request serve() gave it")
        hdrs = list(headers) + ([("Content-Type", content_type)] if content_type else [])
        return _serving.open(self.id, status, hdrs)

    def header(self, name, default=None):
        """The first header of that name (case-insensitive), or default."""
        low = name.lower()
        for n, v in self.headers:
            if n.lower() == low:
                return v
        return default

    def __eq__(self, other):
        return isinstance(other, Request) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    def __repr__(self):
        return "Request(%s)" % ", ".join("%s=%r" % (k, getattr(self, k)) for k in self.__slots__)


class Reply:
    """One reply record: id, status, headers [(name, value) str pairs], body."""

    __slots__ = ("id", "status", "headers", "body")

    def __init__(self, id, status, headers=(), body=b""):
        self.id, self.status, self.headers, self.body = id, status, list(headers), bytes(body)

    def __eq__(self, other):
        return isinstance(other, Reply) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    def __repr__(self):
        return "Reply(id=%r, status=%r, headers=%r, body=%r)" % (self.id, self.status, self.headers, self.body)


class ReplyError(ValueError):
    """A reply batch that does not decode. id is the failing record's id when
    it could be read (the host answers that request 502), else None."""

    def __init__(self, msg, id=None):
        super().__init__(msg)
        self.id = id


def header_ok(name, value):
    """Whether the host takes a reply header (m0__wire_header_ok): a name of
    1..256 token characters that is not Content-Length, Transfer-Encoding or
    Connection (any case), a value of at most 8192 bytes without CR, LF or
    NUL. name and value are bytes."""
    name, value = bytes(name), bytes(value)
    if not 0 < len(name) <= MAX_NAME or len(value) > MAX_VALUE:
        return False
    if any(c not in _TCHAR for c in name):
        return False
    if b"\r" in value or b"\n" in value or b"\0" in value:
        return False
    return name.lower() not in _FRAMING


class _Reader:
    __slots__ = ("buf", "at", "left")

    def __init__(self, payload):
        buf = memoryview(payload).cast("B")
        if len(buf) < BATCH_HEAD:
            raise ValueError("a batch of %d bytes is shorter than its 8-byte head" % len(buf))
        version, flags, count = _BATCH.unpack_from(buf)
        if version != WIRE_VERSION:
            raise ValueError("batch version %d, not %d" % (version, WIRE_VERSION))
        if flags != 0:
            raise ValueError("batch flags 0x%04x set" % flags)
        if count > MAX_COUNT:
            raise ValueError("a count of %d records is over the limit of %d" % (count, MAX_COUNT))
        self.buf, self.at, self.left = buf, BATCH_HEAD, count

    def take(self, n, what):
        if len(self.buf) - self.at < n:
            raise ValueError("%s: %d bytes wanted, %d left" % (what, n, len(self.buf) - self.at))
        b = self.buf[self.at:self.at + n]
        self.at += n
        return b

    def header(self, what):
        nlen, vlen = _PAIR.unpack(self.take(8, what + " lengths"))
        return self.take(nlen, what + " name"), self.take(vlen, what + " value")

    def end(self):
        if self.at != len(self.buf):
            raise ValueError("%d bytes after the last record" % (len(self.buf) - self.at))


def iter_requests(payload):
    """The requests of a REQUEST payload, one at a time; ValueError at the
    first thing m0__wire_next_request refuses (those before it were good)."""
    r = _Reader(payload)
    while r.left:
        r.left -= 1
        (rid, hi, lo, mlen, tlen, plen, blen, nh, np_, vminor, reserved) = _REQ.unpack(r.take(48, "request record"))
        if nh > MAX_HEADERS:
            raise ValueError("request %d: %d headers, over the limit of %d" % (rid, nh, MAX_HEADERS))
        if np_ > MAX_PARAMS:
            raise ValueError("request %d: %d path parameters, over the limit of %d" % (rid, np_, MAX_PARAMS))
        if vminor > 1:
            raise ValueError("request %d: HTTP/1.%d" % (rid, vminor))
        if reserved != 0:
            raise ValueError("request %d: reserved field 0x%08x set" % (rid, reserved))
        method = _s(r.take(mlen, "method"))
        target = r.take(tlen, "target")
        if plen > tlen:
            raise ValueError("request %d: path of %d bytes longer than its %d-byte target" % (rid, plen, tlen))
        headers = []
        for _ in range(nh):
            n, v = r.header("request header")
            headers.append((_s(n), _s(v)))
        params = []
        for _ in range(np_):
            (n,) = _U32.unpack(r.take(4, "parameter length"))
            params.append(_s(r.take(n, "parameter")))
        body = bytes(r.take(blen, "body"))
        path = target[:plen]
        rest = target[plen:]
        query = rest[1:] if len(rest) and rest[0] == 0x3F else b""  # '?'
        yield Request(rid, method, _s(target), _s(path), headers, params, body, hi, lo, vminor, _s(query))
    r.end()


def decode_requests(payload):
    """Every request of a REQUEST payload (a list), or ValueError."""
    return list(iter_requests(payload))


def encode_requests(requests):
    """A REQUEST payload (what the host sends) from Request objects; the
    query is not on the wire (it is the target after path and '?')."""
    requests = list(requests)
    if len(requests) > MAX_COUNT:
        raise ValueError("%d records, over the limit of %d" % (len(requests), MAX_COUNT))
    out = [_BATCH.pack(WIRE_VERSION, 0, len(requests))]
    size = BATCH_HEAD
    for q in requests:
        method, target, path = _b(q.method, "method"), _b(q.target, "target"), _b(q.path, "path")
        if not target.startswith(path):
            raise ValueError("request %d: path %r is not a prefix of target %r" % (q.id, path, target))
        if len(q.headers) > MAX_HEADERS or len(q.params) > MAX_PARAMS:
            raise ValueError("request %d: too many headers or parameters" % q.id)
        if q.version_minor not in (0, 1):
            raise ValueError("request %d: HTTP/1.%r" % (q.id, q.version_minor))
        body = bytes(q.body)
        parts = [_REQ.pack(q.id, q.trace_hi, q.trace_lo, len(method), len(target), len(path), len(body),
                           len(q.headers), len(q.params), q.version_minor, 0), method, target]
        for n, v in q.headers:
            n, v = _b(n, "header name"), _b(v, "header value")
            parts += [_PAIR.pack(len(n), len(v)), n, v]
        for p in q.params:
            p = _b(p, "parameter")
            parts += [_U32.pack(len(p)), p]
        parts.append(body)
        rec = b"".join(parts)
        size += len(rec)
        if size > MAX_PAYLOAD:
            raise ValueError("the batch is over the %d-byte payload limit" % MAX_PAYLOAD)
        out.append(rec)
    return b"".join(out)


def iter_replies(payload):
    """The replies of a REPLY payload, one at a time, with the host's checks
    (m0__wire_next_reply); ReplyError at the first refusal, its id set when
    the failing record's id could be read."""
    try:
        r = _Reader(payload)
    except ValueError as e:
        raise ReplyError(str(e)) from None
    while r.left:
        r.left -= 1
        if len(r.buf) - r.at < 16:
            rid = _U64.unpack_from(r.buf, r.at)[0] if len(r.buf) - r.at >= 8 else None
            raise ReplyError("reply record cut short: %d of its 16 fixed bytes" % (len(r.buf) - r.at), rid)
        rid, status, nh, blen = _REPLY.unpack(r.take(16, "reply record"))
        if nh > MAX_HEADERS:
            raise ReplyError("reply %d: %d headers, over the limit of %d" % (rid, nh, MAX_HEADERS), rid)
        if not 200 <= status <= 599:
            raise ReplyError("reply %d: status %d is not 200..599" % (rid, status), rid)
        headers = []
        for _ in range(nh):
            try:
                n, v = r.header("reply header")
            except ValueError as e:
                raise ReplyError("reply %d: %s" % (rid, e), rid) from None
            if not header_ok(n, v):
                raise ReplyError("reply %d: header %r: %r refused" % (rid, bytes(n), bytes(v)), rid)
            headers.append((_s(n), _s(v)))
        try:
            body = bytes(r.take(blen, "body"))
        except ValueError as e:
            raise ReplyError("reply %d: %s" % (rid, e), rid) from None
        yield Reply(rid, status, headers, body)
    try:
        r.end()
    except ValueError as e:
        raise ReplyError(str(e)) from None


def decode_replies(payload):
    """Every reply of a REPLY payload (a list of Reply), or ReplyError."""
    return list(iter_replies(payload))


def _reply_record(rid, status, headers, body):
    if not isinstance(status, int) or not 200 <= status <= 599:
        raise ValueError("status %r is not 200..599" % (status,))
    headers = list(headers)
    if len(headers) > MAX_HEADERS:
        raise ValueError("%d headers, over the limit of %d" % (len(headers), MAX_HEADERS))
    if isinstance(body, str):
        body = body.encode("utf-8")
    body = _b(body, "body")
    parts = [_REPLY.pack(rid, status, len(headers), len(body))]
    for n, v in headers:
        n, v = _b(n, "header name"), _b(v, "header value")
        if not header_ok(n, v):
            raise ValueError("header %r: %r is refused by the host" % (n, v))
        parts += [_PAIR.pack(len(n), len(v)), n, v]
    parts.append(body)
    return b"".join(parts)


def encode_replies(replies):
    """A REPLY payload from Reply objects or (id, status, headers, body)
    tuples. ValueError for anything the host would answer 502 for."""
    recs = []
    size = BATCH_HEAD
    for x in replies:
        if isinstance(x, Reply):
            x = (x.id, x.status, x.headers, x.body)
        rec = _reply_record(*x)
        size += len(rec)
        if size > MAX_PAYLOAD:
            raise ValueError("the batch is over the %d-byte payload limit" % MAX_PAYLOAD)
        recs.append(rec)
    if len(recs) > MAX_COUNT:
        raise ValueError("%d records, over the limit of %d" % (len(recs), MAX_COUNT))
    return _BATCH.pack(WIRE_VERSION, 0, len(recs)) + b"".join(recs)


# ---- frames (PUBLISH) ----------------------------------------------------

def channel_ok(channel):
    """Whether the host takes a channel's name (m0__channel_ok_n): 1..64
    bytes, none a space, a control character or DEL, not beginning "m0."
    (the host's own). channel is bytes."""
    channel = bytes(channel)
    if not 0 < len(channel) <= CHANNEL_MAX or channel.startswith(b"m0."):
        return False
    return all(c > 0x20 and c != 0x7F for c in channel)


def frame_ok(frame):
    """Whether the host takes a frame (m0__frame_ok): event lines of at most
    64 KiB without the id, no CR, no blank line (it would end the event
    early), no newline at the end, and no line that is an id field of its
    own ("id", "id:..."): the host writes "id: N" first. frame is bytes."""
    frame = bytes(frame)
    if len(frame) > FRAME_MAX or b"\r" in frame or frame.endswith(b"\n") or b"\n\n" in frame:
        return False
    return not any(line == b"id" or line.startswith(b"id:") for line in frame.split(b"\n"))


def encode_frame(channel, frame):
    """A PUBLISH payload: id 0 (the host numbers the frame from its own
    counter), the channel, then the frame's event lines, e.g.
    "event: tick\ndata: {...}". channel and frame are str (as UTF-8) or
    bytes. ValueError for what the host would refuse (counted there as
    m0_refused_total{reason="frame"} and dropped)."""
    ch = channel.encode("utf-8") if isinstance(channel, str) else _b(channel, "channel")
    fr = frame.encode("utf-8") if isinstance(frame, str) else _b(frame, "frame")
    if not channel_ok(ch):
        raise ValueError("channel %r is refused by the host (1..64 bytes, no space or control character, not "
                         "m0.*)" % (ch,))
    if not frame_ok(fr):
        raise ValueError("frame %r is refused by the host (at most 64 KiB, no CR, no blank line or newline at the "
                         "end, no id line)" % (fr[:80],))
    return _FRAME.pack(0, len(ch)) + ch + fr


# ---- messages (MESSAGE, RETURN) --------------------------------------------

def decode_message(payload):
    """(call, type, name, data) of a MESSAGE payload (m0__wire_message_read):
    call 0 for a send; name bytes (empty when the envelope's `to` names the
    instance); data the rest. ValueError when it is shorter than its 14
    fixed bytes or its name is over 64 bytes or past the end."""
    payload = bytes(payload)
    if len(payload) < _MESSAGE.size:
        raise ValueError("a MESSAGE of %d bytes is shorter than its %d fixed bytes" % (len(payload), _MESSAGE.size))
    call, mtype, nn = _MESSAGE.unpack_from(payload)
    if nn > NAME_MAX or nn > len(payload) - _MESSAGE.size:
        raise ValueError("a MESSAGE's name of %d bytes (%d left, at most %d)" % (nn, len(payload) - _MESSAGE.size,
                                                                               NAME_MAX))
    at = _MESSAGE.size
    return call, mtype, payload[at:at + nn], payload[at + nn:]


def encode_return(call, type, code, data=b""):
    """A RETURN payload: the MESSAGE's call, the answer's type tag, code
    RETURN_ANSWERED (data is the answer) or RETURN_NONE, data (str as
    UTF-8, or bytes)."""
    if code not in (RETURN_ANSWERED, RETURN_NONE):
        raise ValueError("a RETURN's code is 0 or 1, not %r" % (code,))
    data = data.encode("utf-8") if isinstance(data, str) else _b(data, "data")
    if _RETURN.size + len(data) > MAX_PAYLOAD:
        raise ValueError("an answer of %d bytes is over the payload limit" % len(data))
    return _RETURN.pack(call, type, code) + data


def encode_message(call, type, name, data=b""):
    """A MESSAGE payload from this instance to its host: call (0 for a
    send, else this instance's own id for the call), type, the name of the
    actor or mailbox it goes to ("echo", "echo.1", "jobs", MONITOR), data
    (str as UTF-8, or bytes). ValueError for a name of 0 or over 64 bytes,
    or data over the payload limit."""
    name = name.encode("utf-8") if isinstance(name, str) else _b(name, "name")
    data = data.encode("utf-8") if isinstance(data, str) else _b(data, "data")
    if not 0 < len(name) <= NAME_MAX:
        raise ValueError("a MESSAGE's name is 1..%d bytes, not %d" % (NAME_MAX, len(name)))
    if _MESSAGE.size + len(name) + len(data) > MAX_PAYLOAD:
        raise ValueError("a message of %d bytes is over the payload limit" % len(data))
    return _MESSAGE.pack(call, type, len(name)) + name + data


def decode_return(payload):
    """(call, type, code, data) of a RETURN payload. ValueError when it is
    shorter than its 16 fixed bytes."""
    payload = bytes(payload)
    if len(payload) < _RETURN.size:
        raise ValueError("a RETURN of %d bytes is shorter than its %d fixed bytes" % (len(payload), _RETURN.size))
    call, rtype, code = _RETURN.unpack_from(payload)
    return call, rtype, code, payload[_RETURN.size:]


# ---- nng, through ctypes -------------------------------------------------

class _Socket(ctypes.Structure):  # nng_socket: a struct of one uint32, passed by value
    _fields_ = [("id", ctypes.c_uint32)]


class _Pipe(ctypes.Structure):  # nng_pipe
    _fields_ = [("id", ctypes.c_uint32)]


class _Dialer(ctypes.Structure):  # nng_dialer
    _fields_ = [("id", ctypes.c_uint32)]


_PIPE_CB = ctypes.CFUNCTYPE(None, _Pipe, ctypes.c_int, ctypes.c_void_p)
NNG_FLAG_ALLOC = 1
NNG_FLAG_NONBLOCK = 2
NNG_ETIMEDOUT = 5
NNG_ECLOSED = 7
NNG_PIPE_EV_ADD_POST = 1
NNG_PIPE_EV_REM_POST = 2
REJOIN_S = 2.0  # a reload's STOP, and no connection since this long: the socket is made again
NNG_OPT_TLS_CA_FILE = b"tls-ca-file"
NNG_OPT_TLS_CERT_KEY_FILE = b"tls-cert-key-file"  # the certificate and its key in one file
NNG_OPT_TLS_AUTH_MODE = b"tls-authmode"
NNG_OPT_TLS_SERVER_NAME = b"tls-server-name"
NNG_TLS_AUTH_MODE_REQUIRED = 2
TLS_VARS = ("M0_TLS_CERT", "M0_TLS_KEY", "M0_TLS_CA")
RECV_TIMEOUT_MS = 200  # how soon a SIGTERM is noticed while idle
SEND_TIMEOUT_MS = 5000  # a REPLY that cannot be queued this long is dropped (its requests time out)

_lib = None


def _nng():
    global _lib
    if _lib is not None:
        return _lib
    lib = ctypes.CDLL("libnng.so.1")
    S = _Socket
    lib.nng_pair1_open.argtypes = [ctypes.POINTER(S)]
    lib.nng_dial.argtypes = [S, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
    lib.nng_recv.argtypes = [S, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t), ctypes.c_int]
    lib.nng_send.argtypes = [S, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
    lib.nng_free.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    lib.nng_free.restype = None
    lib.nng_strerror.argtypes = [ctypes.c_int]
    lib.nng_strerror.restype = ctypes.c_char_p
    lib.nng_pipe_notify.argtypes = [S, ctypes.c_int, _PIPE_CB, ctypes.c_void_p]
    lib.nng_recvmsg.argtypes = [S, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
    lib.nng_msg_body.argtypes = [ctypes.c_void_p]
    lib.nng_msg_body.restype = ctypes.c_void_p
    lib.nng_msg_len.argtypes = [ctypes.c_void_p]
    lib.nng_msg_len.restype = ctypes.c_size_t
    lib.nng_msg_free.argtypes = [ctypes.c_void_p]
    lib.nng_msg_free.restype = None
    lib.nng_msg_get_pipe.argtypes = [ctypes.c_void_p]
    lib.nng_msg_get_pipe.restype = _Pipe
    lib.nng_pipe_close.argtypes = [_Pipe]
    D = _Dialer
    lib.nng_dialer_create.argtypes = [ctypes.POINTER(D), S, ctypes.c_char_p]
    lib.nng_dialer_set_string.argtypes = [D, ctypes.c_char_p, ctypes.c_char_p]
    lib.nng_dialer_set_int.argtypes = [D, ctypes.c_char_p, ctypes.c_int]
    lib.nng_dialer_start.argtypes = [D, ctypes.c_int]
    lib.nng_dialer_close.argtypes = [D]
    # nng 1.10 names it nng_socket_close (nng_close is to go); 1.5 has nng_close alone.
    lib.m0_close = getattr(lib, "nng_socket_close", None) or lib.nng_close
    lib.m0_close.argtypes = [S]
    # nng_socket_set_ms since nng 1.2; nng_setopt_ms is the older name.
    lib.m0_set_ms = getattr(lib, "nng_socket_set_ms", None) or lib.nng_setopt_ms
    lib.m0_set_ms.argtypes = [S, ctypes.c_char_p, ctypes.c_int32]
    for f in (lib.nng_pair1_open, lib.nng_dial, lib.nng_recvmsg, lib.nng_send, lib.nng_pipe_notify, lib.m0_close,
              lib.nng_pipe_close,
              lib.m0_set_ms, lib.nng_dialer_create, lib.nng_dialer_set_string, lib.nng_dialer_set_int,
              lib.nng_dialer_start, lib.nng_dialer_close):
        f.restype = ctypes.c_int
    _lib = lib
    return lib


def _err(rv):
    return _nng().nng_strerror(rv).decode("utf-8", "replace")


def _say(instance, text):
    print("m0actor: instance %d: %s" % (instance, text), file=sys.stderr, flush=True)


class _Tls:
    """This instance's identity for a tls+tcp:// URL, from M0_TLS_CERT,
    M0_TLS_KEY and M0_TLS_CA: nng's dialer options take the CA's file and
    one file holding the certificate and its key, so the two are written
    into a private temporary file (removed by close())."""

    def __init__(self, url):
        got = {v: os.environ.get(v) or None for v in TLS_VARS}
        missing = [v for v in TLS_VARS if not got[v]]
        if missing:
            raise ValueError("a tls+tcp:// link needs this program's certificate: set M0_TLS_CERT, M0_TLS_KEY and "
                             "M0_TLS_CA (%s not set)" % ", ".join(missing))
        self.ca = got["M0_TLS_CA"]
        self.host = urllib.parse.urlsplit(url).hostname or ""
        parts = []
        for v in ("M0_TLS_CERT", "M0_TLS_KEY"):
            try:
                with open(got[v], "rb") as f:
                    parts.append(f.read())
            except OSError as e:
                raise ValueError("%s %s cannot be read: %s" % (v, got[v], e.strerror)) from None
        fd, self.certkey = tempfile.mkstemp(prefix="m0actor-", suffix=".pem")  # mode 0600
        with os.fdopen(fd, "wb") as f:
            f.write(parts[0] + b"\n" + parts[1])
        self.cert, self.key = got["M0_TLS_CERT"], got["M0_TLS_KEY"]

    def close(self):
        try:
            os.unlink(self.certkey)
        except OSError:
            pass


def _dial(lib, sock, url, flags, tls):
    """nng_dial, or for tls+tcp:// a dialer with this instance's identity,
    the peer's certificate required (signed by the CA, naming the URL's
    host): 0 or nng's error, and what it was about ("" when the dial).
    (nng's TLS dialer already requires the peer's certificate and names the
    URL's host on its own configuration; both are said here all the same,
    so neither rests on a default.)"""
    burl = url.encode()
    if tls is None:
        return lib.nng_dial(sock, burl, None, flags), ""
    d = _Dialer()
    rv = lib.nng_dialer_create(ctypes.byref(d), sock, burl)
    if rv != 0:
        return rv, ""
    what = ""
    for name, value, about in ((NNG_OPT_TLS_CA_FILE, tls.ca, "M0_TLS_CA " + tls.ca),
                               (NNG_OPT_TLS_CERT_KEY_FILE, tls.certkey,
                                "M0_TLS_CERT %s with M0_TLS_KEY %s" % (tls.cert, tls.key)),
                               (NNG_OPT_TLS_SERVER_NAME, tls.host, "the server name " + tls.host)):
        rv = lib.nng_dialer_set_string(d, name, value.encode())
        if rv != 0:
            what = about
            break
    if rv == 0:
        rv = lib.nng_dialer_set_int(d, NNG_OPT_TLS_AUTH_MODE, NNG_TLS_AUTH_MODE_REQUIRED)
    if rv == 0:
        rv = lib.nng_dialer_start(d, flags)
    if rv != 0:
        lib.nng_dialer_close(d)  # as nng_dial does
    return rv, what


def _answer(receive, req, instance):
    """One reply record for req, or None (receive gave no reply). A receive
    that raises, or returns what the host would refuse, is answered 500."""
    try:
        got = receive(req)
        if got is None:
            return None
        status, headers, body = got
        return _reply_record(req.id, status, headers, body)
    except Exception:
        _say(instance, "request %d (%s %s) answered 500:\n%s" % (req.id, req.method, req.target,
                                                                 traceback.format_exc().rstrip()))
        return _reply_record(req.id, 500, (), b"")


_serving = threading.local()  # the request receive has in hand, and how its stream opens (Request.writer)


def _reply_payload(env, payload, receive, instance, opener=None):
    recs = []
    size = BATCH_HEAD
    try:
        for req in iter_requests(payload):
            if opener is not None:  # Request.writer's, while receive has req
                _serving.req, _serving.open = req, lambda rid, status, hdrs: opener(env, rid, status, hdrs)
            try:
                rec = _answer(receive, req, instance)
            finally:
                _serving.req = _serving.open = None
            if rec is None:
                continue
            if size + len(rec) > MAX_PAYLOAD:  # the batch's replies must fit one message
                _say(instance, "request %d: reply over the batch's 16 MiB, answered 500" % req.id)
                rec = _reply_record(req.id, 500, (), b"")
                if size + len(rec) > MAX_PAYLOAD:
                    continue
            size += len(rec)
            recs.append(rec)
    except ValueError as e:  # the host sent what wire.c would refuse: answer what was read
        _say(instance, "REQUEST seq %d from 0x%08x did not decode: %s" % (env.seq, env.frm, e))
    return _BATCH.pack(WIRE_VERSION, 0, len(recs)) + b"".join(recs)


def read_secret(path):
    """The secret in key file path (docs/wire.md, Proving who you are): its
    one line of 16 to 4096 printable characters, the newline left out. The
    file must be a regular file of this user that neither group nor others
    may read or write. ValueError (naming the fix) otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not (st.st_mode & 0o170000) == 0o100000:
            raise ValueError("the key file %s is not a regular file" % path)
        if st.st_uid != os.geteuid() or st.st_mode & 0o077:
            raise ValueError("the key file %s may be read by others or is not this user's (chmod 600 %s)" % (path, path))
        data = os.read(fd, SECRET_MAX + 3)
    finally:
        os.close(fd)
    if data.endswith(b"\n"):
        data = data[:-1]
    if data.endswith(b"\r"):
        data = data[:-1]
    if not SECRET_MIN <= len(data) <= SECRET_MAX or any(b <= 0x20 or b >= 0x7F for b in data):
        raise ValueError("the key file %s does not hold one line of %d to %d printable characters" %
                         (path, SECRET_MIN, SECRET_MAX))
    return data


def prove(secret, challenge):
    """The proof of a HELLO's payload: HMAC-SHA256(secret, nonce || context)."""
    return hmac.new(secret, challenge, hashlib.sha256).digest()


def _secret(secret_file):
    given = os.environ.pop("M0__ACTOR_SECRET", None)  # a spawned instance's; its own children never see it
    if given:
        return given.encode("latin-1")
    path = secret_file or os.environ.get("M0_ACTOR_SECRET_FILE")
    return read_secret(path) if path else None


def run(url, receive, instance=0, on_connect=None, secret_file=None, on_message=None):
    """Serves as one instance of an actor: Instance(url, instance,
    secret_file).serve(receive, on_connect, on_message) (its docstring says
    the rest)."""
    return Instance(url, instance, secret_file).serve(receive, on_connect, on_message)


def _unserved(req):
    return 503, [("Content-Type", "text/plain")], b"this instance serves no requests\n"


class Instance:
    """One instance's connection to its host. serve() is its receive loop:
    it dials, proves the secret when the host asks, answers REQUESTs and
    ends at STOP; publish() puts frames on the host's streams from any
    thread while serve() runs.

    An instance that only publishes runs serve() without a receive (the
    host's REQUESTs, should a route name the actor, are answered 503) on a
    thread of its own, and publishes from its main thread:

        actor = m0actor.Instance(url)
        threading.Thread(target=actor.serve, daemon=True).start()
        actor.publish("news", "event: headline\ndata: m0 1.0")
        ...
        actor.stop()

    A kind this module does not handle is said once on stderr and ignored.
    (The receive loop is a table of handlers by kind: _HANDLERS.)"""

    def __init__(self, url, instance=0, secret_file=None):
        self.url, self.instance, self.secret_file = url, instance, secret_file
        self._mu = threading.Lock()  # the socket publish() sends on (a reload's rejoin swaps it)
        self._sock = None
        self._ready = threading.Event()  # connected, and proved where the host asks for it
        self._stopping = []
        self._seq = itertools.count(1)
        self._said = set()  # kinds said once on stderr
        # serve()'s, for its handlers:
        self._receive, self._on_connect, self._message, self._secret, self._proves = _unserved, None, None, None, False
        self._announced, self._moving = False, None
        # call()'s: a call's id -> [an Event, its RETURN (type, code, data)]
        self._calls, self._calls_mu, self._call_ids = {}, threading.Lock(), itertools.count(1)
        self._pending = collections.deque()  # what a call on serve()'s thread received meanwhile: handled after
        self._loop = None  # serve()'s thread
        self._streams, self._streams_cv = {}, threading.Condition()  # (loop, id) -> Writer

    def stop(self):
        """Makes serve() return 0 within RECV_TIMEOUT_MS (from any thread)."""
        self._stopping.append("stop")

    def publish(self, channel, frame, timeout=5.0):
        """Sends frame (event lines, str as UTF-8 or bytes: encode_frame says
        what the host takes) to every stream of channel; the host numbers it.
        Waits at most timeout seconds for serve() to be connected (over
        plain tcp:// with a secret, to have answered the host's challenge:
        a frame before the proof is dropped). True once nng took it; False
        when not connected in time or nng refused it (said on stderr).
        ValueError, at once, for a channel or frame the host would refuse.
        Thread safety: any thread."""
        payload = encode_frame(channel, frame)
        if not self._ready.wait(timeout):
            return False
        # from 0: the host knows this instance by its connection (docs/wire.md, PUBLISH)
        out = encode_envelope(Envelope(KIND_PUBLISH, 0, 0, next(self._seq)), payload)
        with self._mu:
            rv = _nng().nng_send(self._sock, out, len(out), 0) if self._sock is not None else NNG_ECLOSED
        if rv != 0:
            _say(self.instance, "PUBLISH to %r dropped: %s" % (channel, _err(rv)))
        return rv == 0

    def send(self, actor, type, data=b"", timeout=5.0):
        """Sends actor (a name as m0_send takes it: "echo", "echo.1", a
        mailbox) a message: type, data (str as UTF-8, or bytes). Fire and
        forget: the host passes it on, and a refusal there is not said back.
        Waits at most timeout seconds for serve() to be connected (proved,
        over plain tcp:// with a secret). True once nng took it; False when
        not connected in time or nng refused it (said on stderr). ValueError,
        at once, for a name or data the wire refuses.
        Thread safety: any thread, receive and on_message included."""
        return self._message_out(actor, type, data, 0, timeout)

    def call(self, actor, type, data=b"", timeout=5.0):
        """Calls actor (as send() names it) and waits at most timeout
        seconds for its answer: (type, data bytes), or None when it answered
        nothing. TimeoutError when no answer came in time (or serve() was
        not connected); OSError with the errno when the host could not pass
        the call on (ENOENT: no such actor or mailbox; ENODATA: none of its
        instances is up; EOPNOTSUPP: under --workers, where the supervisor
        passes nothing on; EAGAIN ...). From receive or on_message (serve()'s
        own thread) it receives there until its answer comes, and what else
        comes meanwhile is handled after.
        Thread safety: any thread."""
        cid = next(self._call_ids)
        waiter = [threading.Event(), None]
        deadline = time.monotonic() + timeout
        with self._calls_mu:
            self._calls[cid] = waiter
        try:
            if self._message_out(actor, type, data, cid, timeout):
                if threading.current_thread() is self._loop:
                    self._await_here(waiter, deadline)
                else:
                    waiter[0].wait(max(0.0, deadline - time.monotonic()))
        finally:
            with self._calls_mu:
                self._calls.pop(cid, None)
        if waiter[1] is None:
            raise TimeoutError("no answer from %r within %.1f s" % (actor, timeout))
        rtype, code, data = waiter[1]
        if code == RETURN_REFUSED:
            err = _U32.unpack_from(data)[0] if len(data) >= 4 else errno.EIO
            raise OSError(err, "the host could not pass the call to %r on: %s" % (actor, os.strerror(err)))
        return None if code == RETURN_NONE else (rtype, data)

    def monitor(self, actor, timeout=5.0):
        """Has the host monitor actor for this instance's own actor (as
        m0_monitor(host, actor, this actor's name)): each time an instance of
        actor comes, leaves or, spawned, exits, this actor is sent a note
        (one of its instances, load-spread, as any send): on_message gets
        type NOTE_UP, NOTE_DOWN or NOTE_EXITED and data m0_monitor's JSON
        ({"actor":..,"instance":"echo.0","event":"up",..}). Returns once the
        host took it (asking twice is one monitor); raises as call() does
        (OSError ENOENT: no such actor). The monitor is the host's: after a
        reload (a STOP that says so) the next generation has none, so ask
        again. Thread safety: any thread."""
        self.call(MONITOR, 0, actor, timeout)

    def ask(self, actor, method="GET", target="/", headers=(), body=b"", timeout=5.0):
        """Asks actor (as send() names it) with an HTTP request, answered by
        its receive (m0_ask): a Reply, or None when it gave no reply. Raises
        as call() does. Thread safety: any thread."""
        path = target.split("?", 1)[0]
        got = self.call(actor, MSG_ASK, encode_requests([Request(1, method, target, path, headers, (), body)]),
                        timeout)
        if got is None or got[0] != MSG_ASK:
            return None
        reps = decode_replies(got[1])
        return reps[0] if len(reps) == 1 and reps[0].id == 1 else None

    def _message_out(self, name, mtype, data, call, timeout):
        payload = encode_message(call, mtype, name, data)
        if not self._ready.wait(timeout):
            return False
        # from 0: the host knows this instance by its connection (docs/wire.md, Messages)
        out = encode_envelope(Envelope(KIND_MESSAGE, 0, 0, next(self._seq)), payload)
        with self._mu:
            rv = _nng().nng_send(self._sock, out, len(out), 0) if self._sock is not None else NNG_ECLOSED
        if rv != 0:
            _say(self.instance, "MESSAGE to %r dropped: %s" % (name, _err(rv)))
        return rv == 0

    def _await_here(self, waiter, deadline):
        """call() on serve()'s thread: receives here until its RETURN came
        (waiter[1]) or deadline, keeping every other message for serve()."""
        lib, nmsg = _nng(), ctypes.c_void_p()
        while waiter[1] is None and time.monotonic() < deadline:
            with self._mu:
                sock = self._sock
            if sock is None:  # serve() is ending
                return
            if lib.nng_recvmsg(sock, ctypes.byref(nmsg), 0) != 0:
                continue  # the receive's own timeout (RECV_TIMEOUT_MS) paces this
            msg, pipe = _take(lib, nmsg)
            try:
                env, payload = decode_envelope(msg)
            except ValueError:
                env = None
            if env is not None and env.kind == KIND_RETURN:
                self._on_return(lib, sock, env, payload, pipe)
            else:
                self._pending.append((msg, pipe))

    def serve(self, receive=None, on_connect=None, on_message=None):
        """Dials url and, for each REQUEST, calls receive(req) on each of
        its requests (a Request) and sends one REPLY. receive returns None
        (no reply: the host answers 504 at the route's timeout) or (status,
        [(name, value), ...], body); without one, every request is answered
        503. For each MESSAGE (m0_send, m0_call) it calls on_message(type,
        data) (data bytes) and sends one RETURN: a call's answer when it
        returns (type, data) (data str as UTF-8, or bytes), else none
        (RETURN_NONE; a send's answer is never asked for); without
        on_message every MESSAGE is answered none. on_connect(url), if
        given, is called once the dial has connected. Returns 0 after STOP,
        stop(), SIGTERM or SIGINT (the batch in hand is answered first; the
        signals are caught only when serve() runs on the main thread), 1
        when the socket cannot be opened
        or url cannot be dialed, 78 when a tls+tcp:// url has no identity
        in M0_TLS_* or nng refuses one of its files, or the key file
        (secret_file, else M0_ACTOR_SECRET_FILE) is no key (each said on
        stderr). Over plain tcp:// the host's challenge is answered with
        that key's secret (docs/wire.md, Proving who you are)."""
        try:
            secret = _secret(self.secret_file)
        except (OSError, ValueError) as e:
            _say(self.instance, "M0_ACTOR_SECRET_FILE: %s" % e)
            return 78
        tls = None
        if self.url.startswith("tls+tcp://"):
            try:
                tls = _Tls(self.url)
            except ValueError as e:
                _say(self.instance, "cannot dial %s: %s" % (self.url, e))
                return 78
        self._receive = receive or _unserved
        self._loop = threading.current_thread()
        self._on_connect = on_connect
        self._message = on_message
        self._secret = secret
        # Over plain tcp:// with a secret the host asks for the proof first:
        # ready once it is answered, not once connected.
        self._proves = secret is not None and self.url.startswith("tcp://")
        try:
            return self._serve(tls)
        finally:
            self._ready.clear()
            if tls is not None:
                tls.close()

    # ---- the receive loop ----

    def _serve(self, tls):
        lib = _nng()
        sock = _Socket()
        rv = lib.nng_pair1_open(ctypes.byref(sock))
        if rv != 0:
            _say(self.instance, "nng_pair1_open: %s" % _err(rv))
            return 1
        url, instance = self.url, self.instance
        connected = threading.Event()
        pipes = [0]  # connections up now (nng's pipe events)

        @_PIPE_CB
        def on_pipe(pipe, ev, arg):
            if ev == NNG_PIPE_EV_ADD_POST:
                pipes[0] += 1
                connected.set()
                if not self._proves:
                    self._ready.set()
            else:
                pipes[0] -= 1
                if pipes[0] <= 0:
                    self._ready.clear()

        def options(s):
            lib.nng_pipe_notify(s, NNG_PIPE_EV_ADD_POST, on_pipe, None)
            lib.nng_pipe_notify(s, NNG_PIPE_EV_REM_POST, on_pipe, None)
            lib.m0_set_ms(s, b"recv-timeout", RECV_TIMEOUT_MS)
            lib.m0_set_ms(s, b"send-timeout", SEND_TIMEOUT_MS)
            # Redialed soon after a reload closes the connection (docs/wire.md).
            lib.m0_set_ms(s, b"reconnect-time-min", 10)
            lib.m0_set_ms(s, b"reconnect-time-max", 100)

        def reopen():
            """No connection REJOIN_S after a reload's STOP: nng 1.5.2's dialer
            now and then stops redialing, so the socket is made again and
            dialed. The new socket, or None (the old one kept)."""
            fresh = _Socket()
            if lib.nng_pair1_open(ctypes.byref(fresh)) != 0:
                return None
            pipes[0] = 0
            options(fresh)
            if _dial(lib, fresh, url, NNG_FLAG_NONBLOCK, tls)[0] != 0:
                lib.m0_close(fresh)
                return None
            return fresh

        old = {}

        def on_signal(signum, frame):
            self._stopping.append(signum)

        with self._mu:
            self._sock = sock
        try:
            options(sock)
            rv, what = _dial(lib, sock, url, 0, tls)
            if rv == 0:
                connected.set()
            elif what:  # a file or name nng refused: no redial mends that
                _say(instance, "cannot dial %s: %s: %s" % (url, what, _err(rv)))
                return 78
            else:
                # Not listening yet (the host starts later, or restarts): nng
                # redials in the background until it is.
                first = rv
                rv, what = _dial(lib, sock, url, NNG_FLAG_NONBLOCK, tls)
                if rv != 0:
                    _say(instance, "cannot dial %s: %s%s" % (url, what + ": " if what else "", _err(rv)))
                    return 78 if what else 1
                _say(instance, "%s: %s; redialing until the host listens" % (url, _err(first)))
            if threading.current_thread() is threading.main_thread():
                for s in (signal.SIGTERM, signal.SIGINT):
                    old[s] = signal.signal(s, on_signal)
            self._announced = False
            self._moving = None  # a reload's STOP came then, and no connection has lasted since
            nmsg = ctypes.c_void_p()
            while not self._stopping:
                # One up 0.3 s after it is the next generation's (the old one
                # closes a redial at once).
                if self._moving is not None and pipes[0] > 0 and time.monotonic() - self._moving >= 0.3:
                    self._moving = None
                if self._moving is not None and time.monotonic() - self._moving >= REJOIN_S:
                    _say(instance, "no connection %.0f s after the reload; dialing %s again" % (REJOIN_S, url))
                    fresh = reopen()
                    if fresh is not None:
                        with self._mu:
                            self._sock = fresh
                        _close_bounded(lib, sock, instance)
                        sock = fresh
                    self._moving = time.monotonic()
                if connected.is_set():
                    self._announce()
                if self._pending:  # what a call() on this thread received meanwhile
                    msg, pipe = self._pending.popleft()
                else:
                    rv = lib.nng_recvmsg(sock, ctypes.byref(nmsg), 0)
                    if rv == NNG_ETIMEDOUT:
                        continue
                    if rv != 0:
                        _say(instance, "receive: %s" % _err(rv))
                        return 1
                    msg, pipe = _take(lib, nmsg)
                try:
                    env, payload = decode_envelope(msg)
                except ValueError as e:
                    _say(instance, "a message of %d bytes dropped: %s" % (len(msg), e))
                    continue
                self._announce()
                handler = self._HANDLERS.get(env.kind)
                if handler is None:
                    self._ignored(env)
                elif handler(self, lib, sock, env, payload, pipe):
                    return 0
            return 0
        finally:
            for s, h in old.items():
                signal.signal(s, h)
            with self._mu:
                self._sock = None
            _close_bounded(lib, sock, instance)

    def _announce(self):
        if not self._announced:
            self._announced = True
            if self._on_connect:
                self._on_connect(self.url)

    def _send(self, lib, sock, out, what):
        rv = lib.nng_send(sock, out, len(out), 0)
        if rv != 0:
            _say(self.instance, "%s dropped: %s" % (what, _err(rv)))
        return rv == 0

    # Each handler takes (lib, sock, env, payload, pipe) and returns True
    # when serve() ends. A kind the wire adds is one method and one entry.

    def _on_stop(self, lib, sock, env, payload, pipe):
        if payload != b"\x01":
            return True  # the host stops
        _say(self.instance, "the host reloads; redialing %s" % self.url)
        lib.nng_pipe_close(pipe)  # nng's dialer dials again
        self._moving = time.monotonic()
        return False

    def _on_hello(self, lib, sock, env, payload, pipe):
        if self._secret is None:
            if KIND_HELLO not in self._said:
                _say(self.instance, "the host asks this instance to prove it holds the actor's secret, and it "
                                    "has none (give its key file in M0_ACTOR_SECRET_FILE)")
            self._said.add(KIND_HELLO)
            return False
        out = encode_envelope(Envelope(KIND_HELLO, env.to, env.frm), prove(self._secret, payload))
        if self._send(lib, sock, out, "the proof"):
            self._ready.set()  # what this pipe sends next, the host reads after the proof
        return False

    def _on_request(self, lib, sock, env, payload, pipe):
        out = encode_envelope(Envelope(KIND_REPLY, env.to, env.frm, next(self._seq), env.trace_hi, env.trace_lo),
                              _reply_payload(env, payload, self._receive, self.instance,
                                             self._open_stream if env.frm >> 24 == 2 else None))  # a loop's: a stream
        self._send(lib, sock, out, "REPLY to seq %d" % env.seq)
        return False

    def _on_message(self, lib, sock, env, payload, pipe):
        try:
            call, mtype, _name, data = decode_message(payload)
        except ValueError as e:
            _say(self.instance, "a MESSAGE from 0x%08x did not decode: %s" % (env.frm, e))
            return False
        ret = encode_return(call, 0, RETURN_NONE)
        try:
            if mtype == MSG_ASK and call != 0:  # an ask: receive answers its one request
                reqs = decode_requests(data)
                rec = _answer(self._receive, reqs[0], self.instance) if len(reqs) == 1 else None
                if rec is not None:
                    ret = encode_return(call, MSG_ASK, RETURN_ANSWERED, _BATCH.pack(WIRE_VERSION, 0, 1) + rec)
                got = None
            else:
                got = self._message(mtype, data) if self._message else None
            if got is not None and call != 0:
                ret = encode_return(call, got[0], RETURN_ANSWERED, got[1])
        except Exception:  # the caller gets no answer; this instance goes on
            _say(self.instance, "message type %d: no answer:\n%s" % (mtype, traceback.format_exc().rstrip()))
        # Every MESSAGE is answered: the host sends the next only after it (docs/wire.md, Messages).
        out = encode_envelope(Envelope(KIND_RETURN, env.to, env.frm, next(self._seq), env.trace_hi, env.trace_lo), ret)
        self._send(lib, sock, out, "RETURN of call %d" % call)
        return False

    def _on_return(self, lib, sock, env, payload, pipe):
        try:
            call, rtype, code, data = decode_return(payload)
        except ValueError as e:
            _say(self.instance, "a RETURN from 0x%08x did not decode: %s" % (env.frm, e))
            return False
        with self._calls_mu:
            waiter = self._calls.get(call)
        if waiter is not None:  # else a call given up on: dropped
            waiter[1] = (rtype, code, data)
            waiter[0].set()
        return False

    def _stream_out(self, frm, to, payload):
        out = encode_envelope(Envelope(KIND_STREAM, frm, to, next(self._seq)), payload)
        with self._mu:
            return _nng().nng_send(self._sock, out, len(out), 0) == 0 if self._sock is not None else False

    def _open_stream(self, env, rid, status, hdrs):
        if status in (204, 205, 304):
            raise ValueError("status %d has no body to stream" % status)
        w = Writer(self, env.to, env.frm, rid)
        with self._streams_cv:
            self._streams[(env.frm, rid)] = w
        if not self._stream_out(env.to, env.frm, _U32.pack(STREAM_OPEN) + _reply_record(rid, status, hdrs, b"")):
            w.gone = True
        return w

    def _on_credit(self, lib, sock, env, payload, pipe):
        if len(payload) != 16:
            return False
        op, rid, n = struct.unpack("<IQI", payload)
        with self._streams_cv:
            w = self._streams.get((env.frm, rid))
            if w is not None:
                if op == CREDIT_GONE:
                    w.gone = True
                elif (n - w.granted) % (1 << 32) < (1 << 31):  # the room in all, mod 2^32: an old one is none
                    w.granted += (n - w.granted) % (1 << 32)
                self._streams_cv.notify_all()
        return False

    def _ignored(self, env):
        if env.kind not in self._said:
            self._said.add(env.kind)
            _say(self.instance, "messages of kind %d (from 0x%08x) are not handled here: ignored" % (env.kind,
                                                                                                   env.frm))

    _HANDLERS = {KIND_STOP: _on_stop, KIND_HELLO: _on_hello, KIND_REQUEST: _on_request, KIND_MESSAGE: _on_message,
                 KIND_RETURN: _on_return, KIND_CREDIT: _on_credit}


class Writer:
    """A reply in pieces (Request.writer). write(data) sends data (str as
    UTF-8, or bytes), waiting up to timeout seconds for room: at most
    STREAM_WINDOW bytes are sent and not yet taken by the client. The room
    comes through serve()'s thread, so write a long stream from a thread of
    your own: on serve()'s thread a write past the window raises
    BlockingIOError at once. BrokenPipeError once the client has left
    (stop, and end()); TimeoutError when no room came in time. end() ends
    the body (the client gets it whole); abort() cuts it (the connection
    closes). Call one of them once, gone or not. Thread safety: one thread
    at a time per Writer."""

    def __init__(self, inst, frm, to, rid):
        self._inst, self._frm, self._to, self._id = inst, frm, to, rid
        self.sent, self.granted, self.gone = 0, STREAM_WINDOW, False

    def write(self, data, timeout=10.0):
        data = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        cv, deadline = self._inst._streams_cv, time.monotonic() + timeout
        for at in range(0, len(data), STREAM_WINDOW):
            piece = data[at:at + STREAM_WINDOW]
            with cv:
                while not self.gone and self.sent + len(piece) > self.granted:
                    if threading.current_thread() is self._inst._loop:
                        raise BlockingIOError("no room on serve()'s own thread: write from another")
                    if not cv.wait(max(0.0, deadline - time.monotonic())) and time.monotonic() >= deadline:
                        raise TimeoutError("no room for the stream within %.1f s" % timeout)
                if self.gone:
                    raise BrokenPipeError("the client left")
                self.sent += len(piece)
            if not self._inst._stream_out(self._frm, self._to, struct.pack("<IQ", STREAM_DATA, self._id) + piece):
                raise BrokenPipeError("the host's connection is gone")

    def _finish(self, op):
        with self._inst._streams_cv:
            self._inst._streams.pop((self._to, self._id), None)
        return self._inst._stream_out(self._frm, self._to, struct.pack("<IQ", op, self._id)) and not self.gone

    def end(self):
        """The last piece: True, or False when the client had left."""
        return self._finish(STREAM_END)

    def abort(self):
        """Cuts the body: the connection closes without its last chunk."""
        return self._finish(STREAM_ABORT)


def _take(lib, nmsg):
    """The bytes and the pipe of a received nng message, which is freed."""
    try:
        return ctypes.string_at(lib.nng_msg_body(nmsg), lib.nng_msg_len(nmsg)), lib.nng_msg_get_pipe(nmsg)
    finally:
        lib.nng_msg_free(nmsg)


def _close_bounded(lib, sock, instance):
    # nng 1.5.2's close of this dialer now and then hangs right after the
    # host's STOP (as the C instance's did): closed on a thread, waited
    # for 100 ms, then left behind (the process is about to exit).
    closer = threading.Thread(target=lib.m0_close, args=(sock,), daemon=True)
    closer.start()
    closer.join(0.1)
    if closer.is_alive():
        _say(instance, "nng did not close the socket within 100 ms (nng 1.5.2's close hang); leaving it")
