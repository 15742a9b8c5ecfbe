#!/usr/bin/env python3
"""A misbehaving external instance of an application actor, for
test_actors: it dials URL with an nng pair1 socket (the system's
libnng.so.1 through ctypes) and speaks the wire of service/wire.h and
runtime/envelope.h itself, written from those headers alone (not on
python/m0actor.py, so a mistake shared by that module and the host cannot
hide here).

    wire_actor.py URL MODE

MODE
  silent    takes every REQUEST and never sends a REPLY: its requests wait
            until their route's timeout (504), or 502 when it dies first
  status99  answers each request of a REQUEST with a reply record of
            status 99, which the host refuses ("does not decode": 502)
  status:N  the same with status N (test_refusals: a status the host does
            not pass is 502, one it passes reaches the client)
  publish-bad  once connected, sends a PUBLISH whose frame would end its
            event early ("data: x\n\nid: 5"), prints "published", then is
            silent
  forge:ID  once connected, sends a REPLY answering request ID (which it
            was never given: another instance's) 200 to loop.0, prints
            "forged", then is silent
  stream-bad  answers each request as a reply in pieces (STREAM, kind 21)
            with the mistakes the host must drop and count: DATA before its
            OPEN, the OPEN (200, body "hello "), a second OPEN, DATA
            "world", END, then DATA after the END: the client gets
            "hello world", and three STREAMs are dropped
  stream-short  answers each request in pieces with a STREAM too short
            for its op and id among them: OPEN ("hello "), DATA "wor", a
            4-byte STREAM (an END's op alone), DATA "ld", END: the short one
            is dropped and counted (refused), the client gets "hello world"
  stream-over  answers each request with an OPEN whose first bytes are one
            past the 256 KiB window: the host answers 502 (bad_reply) and
            tells it GONE
  mirror    answers each request 200 with headers `Content-Type:
            text/plain` and `X-Wire: mirror`, and a body that is the request
            as its record carried it: `METHOD TARGET HTTP/1.m` and its path
            length, each header `name: value` in the record's order, a blank
            line, then the body (test_split: a request cut anywhere on its
            way in must reach an actor byte for byte as when sent whole)

It prints "connected" once its dial has succeeded, then one line
"got ID" per request record it takes, and "credit OP ID BYTES" per CREDIT
(stdout, flushed), so the test waits on what it has really received. SIGTERM ends it (the default action); it is
meant to be SIGKILLed by the test.
"""
import ctypes
import struct
import sys

MAGIC = 0x3145306D  # "m0E1" little-endian (M0__ENV_MAGIC)
KIND_STOP, KIND_REQUEST, KIND_REPLY, KIND_PUBLISH = 4, 12, 13, 15  # runtime/kinds.h, READY = 1
KIND_STREAM, KIND_CREDIT = 21, 22
WINDOW = 256 << 10  # M0__STREAM_WINDOW
LOOP0 = 2 << 24  # base/ids.h: loop.0
ENV = struct.Struct("<IHHIIQQQI")  # magic kind flags from to seq trace_hi trace_lo payload-length
BATCH = struct.Struct("<HHI")  # version (1) flags (0) count
REQ = struct.Struct("<QQQIIIIHBBI")  # id trace_hi trace_lo method target path body nheaders nparams vminor reserved
REPLY = struct.Struct("<QHHI")  # id status nheaders body
NNG_FLAG_ALLOC = 1


class Sock(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint32)]


def request_records(payload):
    """A REQUEST batch's records, every variable field read: a list of
    dicts (id, method, target, path, headers [(name, value)], params, body,
    minor), all bytes. Raises ValueError on a batch docs/wire.md refuses."""
    version, flags, count = BATCH.unpack_from(payload, 0)
    if version != 1 or flags != 0:
        raise ValueError(f"batch version {version} flags {flags}")
    at, out = BATCH.size, []

    def take(n):
        nonlocal at
        if at + n > len(payload):
            raise ValueError(f"a length past the payload's end ({at} + {n} > {len(payload)})")
        at += n
        return payload[at - n:at]

    for _ in range(count):
        rid, _hi, _lo, mlen, tlen, plen, blen, nh, np_, vm, res = REQ.unpack_from(payload, at)
        at += REQ.size
        if nh > 100 or np_ > 8 or vm > 1 or res != 0 or plen > tlen:
            raise ValueError(f"record {rid}: nheaders {nh} nparams {np_} minor {vm} reserved {res} path {plen}/{tlen}")
        r = {"id": rid, "method": take(mlen), "target": take(tlen), "path": plen, "minor": vm}
        r["headers"] = []
        for _ in range(nh):
            n, v = struct.unpack_from("<II", take(8))
            r["headers"].append((take(n), take(v)))
        r["params"] = [take(struct.unpack_from("<I", take(4))[0]) for _ in range(np_)]
        r["body"] = take(blen)
        out.append(r)
    if at != len(payload):
        raise ValueError(f"{len(payload) - at} bytes after the last record")
    return out


def request_ids(payload):
    """The ids of a REQUEST batch's records, walking every variable field."""
    return [r["id"] for r in request_records(payload)]


def mirror(r):
    """A reply record (docs/wire.md) answering request record r with r itself."""
    text = b"%s %s HTTP/1.%d path %d\n" % (r["method"], r["target"], r["minor"], r["path"])
    text += b"".join(b"%s: %s\n" % hv for hv in r["headers"]) + b"\n" + r["body"]
    hdrs = [(b"Content-Type", b"text/plain"), (b"X-Wire", b"mirror")]
    head = REPLY.pack(r["id"], 200, len(hdrs), len(text))
    return head + b"".join(struct.pack("<II", len(n), len(v)) + n + v for n, v in hdrs) + text


def stream_bad(rid):
    """The STREAM payloads of mode stream-bad, in order (service/wire.h)."""
    def op(o, rest=b""):
        return struct.pack("<IQ", o, rid) + rest
    opening = struct.pack("<I", 1) + REPLY.pack(rid, 200, 1, 6) + struct.pack("<II", 12, 10) + \
        b"Content-Typetext/plain" + b"hello "
    return [op(2, b"early"), opening, opening, op(2, b"world"), op(3), op(2, b"late")]


def stream_open(rid, body):
    """An OPEN (200 text/plain) with body as its first bytes."""
    return struct.pack("<I", 1) + REPLY.pack(rid, 200, 1, len(body)) + struct.pack("<II", 12, 10) + \
        b"Content-Typetext/plain" + body


def stream_short(rid):
    """The STREAM payloads of mode stream-short, in order."""
    def op(o, rest=b""):
        return struct.pack("<IQ", o, rid) + rest
    return [stream_open(rid, b"hello "), op(2, b"wor"), struct.pack("<I", 3), op(2, b"ld"), op(3)]


def main(argv):
    streams = {"stream-bad": stream_bad, "stream-short": stream_short,
               "stream-over": lambda rid: [stream_open(rid, b"x" * (WINDOW + 1))]}
    if len(argv) != 3 or not (argv[2] in ("silent", "status99", "publish-bad", "mirror") or argv[2] in streams or
                              argv[2].startswith(("forge:", "status:"))):
        print("usage: wire_actor.py URL silent|status99|status:N|publish-bad|forge:ID|mirror|stream-bad|stream-short|"
              "stream-over", file=sys.stderr)
        return 2
    url, mode = argv[1], argv[2]
    status = int(mode[7:]) if mode.startswith("status:") else 99
    lib = ctypes.CDLL("libnng.so.1")
    lib.nng_pair1_open.argtypes = [ctypes.POINTER(Sock)]
    lib.nng_dial.argtypes = [Sock, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
    lib.nng_recv.argtypes = [Sock, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t), ctypes.c_int]
    lib.nng_send.argtypes = [Sock, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
    lib.nng_free.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    lib.nng_free.restype = None
    sock = Sock()
    if lib.nng_pair1_open(ctypes.byref(sock)) != 0:
        print("wire_actor: nng_pair1_open failed", file=sys.stderr)
        return 1
    rv = lib.nng_dial(sock, url.encode(), None, 0)
    if rv != 0:
        print(f"wire_actor: cannot dial {url}: nng error {rv}", file=sys.stderr)
        return 1
    print("connected", flush=True)
    buf, size, seq = ctypes.c_void_p(), ctypes.c_size_t(), 0
    if mode.startswith("forge:"):
        payload = BATCH.pack(1, 0, 1) + REPLY.pack(int(mode[6:]), 200, 0, 0)
        out = ENV.pack(MAGIC, KIND_REPLY, 0, 7 << 24, LOOP0, 1, 0, 0, len(payload)) + payload
        rv = lib.nng_send(sock, out, len(out), 0)
        print("forged" if rv == 0 else f"forge failed: nng error {rv}", flush=True)
        mode = "silent"
    if mode == "publish-bad":
        frame = b"data: x\n\nid: 5"
        payload = struct.pack("<QH", 0, 5) + b"beats" + frame
        out = ENV.pack(MAGIC, KIND_PUBLISH, 0, 7 << 24, 0, 1, 0, 0, len(payload)) + payload
        rv = lib.nng_send(sock, out, len(out), 0)
        print("published" if rv == 0 else f"publish failed: nng error {rv}", flush=True)
        mode = "silent"
    while True:
        rv = lib.nng_recv(sock, ctypes.byref(buf), ctypes.byref(size), NNG_FLAG_ALLOC)
        if rv != 0:
            print(f"wire_actor: receive: nng error {rv}", file=sys.stderr)
            return 1
        msg = ctypes.string_at(buf, size.value)
        lib.nng_free(buf, size)
        magic, kind, _flags, frm, to, _seq, hi, lo, plen = ENV.unpack_from(msg, 0)
        if magic != MAGIC or plen != len(msg) - ENV.size:
            print(f"wire_actor: a malformed message of {len(msg)} bytes", file=sys.stderr)
            continue
        if kind == KIND_STOP:
            return 0
        if kind == KIND_CREDIT and plen == 16:
            op, cid, nbytes = struct.unpack_from("<IQI", msg, ENV.size)
            print(f"credit {op} {cid} {nbytes}", flush=True)
            continue
        if kind != KIND_REQUEST:
            continue
        recs = request_records(msg[ENV.size:])
        ids = [r["id"] for r in recs]
        for rid in ids:
            print(f"got {rid}", flush=True)
        if mode == "silent":
            continue
        if mode in streams:
            for rid in ids:
                for payload in streams[mode](rid):
                    seq += 1
                    out = ENV.pack(MAGIC, KIND_STREAM, 0, to, frm, seq, hi, lo, len(payload)) + payload
                    lib.nng_send(sock, out, len(out), 0)
            payload = BATCH.pack(1, 0, 0)  # the batch's REPLY, none of it answered whole
        if mode == "mirror":
            payload = BATCH.pack(1, 0, len(recs)) + b"".join(mirror(r) for r in recs)
        elif mode not in streams:
            payload = BATCH.pack(1, 0, len(ids)) + b"".join(REPLY.pack(rid, status, 0, 0) for rid in ids)
        seq += 1
        out = ENV.pack(MAGIC, KIND_REPLY, 0, to, frm, seq, hi, lo, len(payload)) + payload
        lib.nng_send(sock, out, len(out), 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
