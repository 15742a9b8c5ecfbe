"""A WebSocket resumes as a stream does (docs/http.md, WebSocket: With ids,
and resuming): the subprotocol m0.events carries each published frame as
the SSE event text with its id, and `?last_event_id=N` (or Last-Event-ID)
on the upgrade gets the held frames after N, or an m0.gap first
(http/stream.c, m0__stream_replay; http/response.c, m0__last_event_id).
host_check's GET /ws subscribes to the producer's "beats" (the only frames
published: their ids follow each other), python3-websockets as the client.

Proves:
- a client offering m0.events gets it (Sec-WebSocket-Protocol), and every
  message is `id: N` then the beat's lines, ids going up by one;
- resume: after closing at id L and beats published past it, a socket with
  ?last_event_id=L gets L+1, L+2, ... first (the held ones), then the live
  ones, no gap, nothing twice; the same with a Last-Event-ID header;
- a resume past what the history holds (--stream-history 4): the first
  message is `event: m0.gap` with data {"after":L}; a plain socket (no
  m0.events) asking the same is closed with 1013;
- a resume past every id the host gave (a client of an earlier run: ids
  begin at 1 again after a restart; 10^12 and 2^64-1): m0.gap {"after":N}
  first, then this run's frames (before, nothing at all: every frame was
  held back as one the client already had);
- the upgrade's query is read whatever the read boundaries: the request
  sent whole, a byte per write, cut at every line end and colon, and in
  random cuts, the first frame is id L+1 (rawhttp's splits);
- across 10 reloads (SIGHUP, single and --workers 2) under beats every
  50 ms, a client that reconnects with its last id after each close: no id
  twice, ids only go up, and every hole in them has an m0.gap message
  between its two sides (counts printed): the old generation's producer
  numbered it for its own loops alone, and the next generation's loops tell
  their streams of what it numbered after they began (actors/producer.c,
  the hold on the ids; actors/loop.c, loop_hole).
"""
import asyncio
import base64
import os
import re
import signal
import socket
import sys
import time

try:
    import websockets
except ImportError:  # Debian's package, when the tests run under another python3 of the same version
    sys.path.append("/usr/lib/python3/dist-packages")
    import websockets

from harness import Failures, Prefork, Server, descendants, reap, wait_for
from rawhttp import Mode, Splits, ws_frames

F = Failures()
SP = Splits()
SEEN = set()
PERIOD = {"M0_HOSTCHECK_PERIOD_MS": "50"}


def parse(text):
    """(id or None, event or None, data) of one m0.events message."""
    fid, ev, data = None, None, []
    for line in text.split("\n"):
        k, _, v = line.partition(": ")
        if k == "id":
            fid = int(v)
        elif k == "event":
            ev = v
        elif k == "data":
            data.append(v)
    return fid, ev, "\n".join(data)


# websockets 14 (Debian 13's) connects with its new client, which names the
# extra request headers additional_headers; 10 (Debian 12's) extra_headers.
HEADERS_KW = "additional_headers" if int(websockets.__version__.split(".")[0]) >= 14 else "extra_headers"


def url(port, last=None):
    return f"ws://127.0.0.1:{port}/ws" + (f"?last_event_id={last}" if last is not None else "")


async def read(port, n, last=None, headers=None, sub=True, timeout=10):
    """n messages of a socket (fewer if it closes): ([text], subprotocol, close code or None)."""
    out, code = [], None
    async with websockets.connect(url(port, last), subprotocols=["m0.events"] if sub else None,
                                  open_timeout=timeout, **{HEADERS_KW: headers or {}}) as ws:
        proto = ws.subprotocol
        try:
            while len(out) < n:
                out.append(await asyncio.wait_for(ws.recv(), timeout))
        except websockets.ConnectionClosed:
            code = ws.close_code
    return out, proto, code


def ids(msgs):
    return [parse(m)[0] for m in msgs]


def basics():
    with Server("host_check", "--port", "0", env=PERIOD) as s:
        msgs, proto, _ = asyncio.run(read(s.port, 5))
        F.check(proto == "m0.events", f"the host chose m0.events ({proto})")
        got = [parse(m) for m in msgs]
        F.check(len(got) == 5 and all(i and e == "beat" and d for i, e, d in got)
                and all(b[0] == a[0] + 1 for a, b in zip(got, got[1:])),
                f"every message is `id: N` and the beat, ids going up by one ({msgs})")
        last = got[-1][0] if got and got[-1][0] else 0
        # beats published past it (seen by another socket: a resume past every id given is another run's), then
        # the resume
        asyncio.run(read(s.port, 4))
        later, _, _ = asyncio.run(read(s.port, 4, last=last + 3))
        F.check(ids(later)[:1] == [last + 4], f"a socket resumed at {last + 3} starts at {last + 4} ({ids(later)})")
        for how, kw in (("?last_event_id", {"last": last}), ("Last-Event-ID", {"headers": {"Last-Event-ID": str(last)}})):
            res, _, _ = asyncio.run(read(s.port, 6, **kw))
            F.check(ids(res) == list(range(last + 1, last + 7)) and all(parse(m)[1] == "beat" for m in res),
                    f"{how}: resumed at {last}, the held frames {last + 1}.. then the live ones, no gap, nothing "
                    f"twice ({res})")
        splits(s.port, last)
        plain, proto, _ = asyncio.run(read(s.port, 2, sub=False))
        F.check(proto is None and all(not m.startswith("id:") for m in plain),
                f"a plain socket gets the data alone ({proto} {plain})")


def splits(port, last):
    """The upgrade request with ?last_event_id=last cut in every way."""
    key = base64.b64encode(os.urandom(16)).decode()
    req = (f"GET /ws?last_event_id={last} HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: m0.events\r\n\r\n").encode()
    for mode in SP.modes("ws-resume", 3):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sk:
            for piece, gap in mode.writes([req]):
                sk.sendall(piece)
                if gap:
                    time.sleep(gap)
            buf, deadline = b"", time.monotonic() + 10
            while time.monotonic() < deadline:
                head, sep, rest = buf.partition(b"\r\n\r\n")
                frames, _ = ws_frames(rest) if sep else ([], b"")
                if frames:
                    break
                chunk = sk.recv(65536)
                if not chunk:
                    break
                buf += chunk
            head, _, rest = buf.partition(b"\r\n\r\n")
            frames, _ = ws_frames(rest)
            first = frames[0][1].decode(errors="replace") if frames else ""
            F.check(head.startswith(b"HTTP/1.1 101") and b"Sec-WebSocket-Protocol: m0.events" in head
                    and first.startswith(f"id: {last + 1}\n"),
                    f"split {mode}: the upgrade with ?last_event_id={last} is answered 101 m0.events and the first "
                    f"message is id {last + 1} ({head[:40]!r} {first[:40]!r})")


def gap():
    with Server("host_check", "--port", "0", "--stream-history", "4", env=PERIOD) as s:
        msgs, _, _ = asyncio.run(read(s.port, 1))
        last = parse(msgs[0])[0] if msgs else 0
        asyncio.run(read(s.port, 9))  # 9 more published: the history (4) let them go
        res, _, _ = asyncio.run(read(s.port, 3, last=last))
        first = parse(res[0]) if res else (None, None, "")
        F.check(first[1] == "m0.gap" and first[2] == f'{{"after":{last}}}' and first[0] is None
                and all(i and i > last for i in ids(res[1:])),
                f"a resume past the history: m0.gap {{after:{last}}} first, then newer ids ({res})")
        plain, _, code = asyncio.run(read(s.port, 5, last=last, sub=False))
        F.check(code == 1013, f"a plain socket resumed past the history is closed with 1013 ({code}, {plain})")
        # Ids past every id this host gave: a client of an earlier run (ids begin at 1 again after a
        # restart). Told m0.gap and given this run's frames, not held silent until the counter reaches them.
        for past in (10**12, 2**64 - 1):
            try:
                res, _, _ = asyncio.run(read(s.port, 3, last=past, timeout=5))
            except asyncio.TimeoutError:
                res = ["(nothing within 5 s)"]
            first = parse(res[0]) if res else (None, None, "")
            F.check(first[1] == "m0.gap" and first[2] == f'{{"after":{past}}}' and len(res) == 3
                    and all(i and i < past for i in ids(res[1:])),
                    f"a resume past every id given ({past}): m0.gap first, then this run's frames ({res})")


async def follow(port, log, stop):
    """Reads the socket, reconnecting with the last id after each close, until stop is set:
    log gets ("id", N), ("gap", text) and ("open", last)."""
    last = None
    while not stop.is_set():
        try:
            async with websockets.connect(url(port, last), subprotocols=["m0.events"], open_timeout=5) as ws:
                log.append(("open", last))
                while not stop.is_set():
                    try:
                        m = await asyncio.wait_for(ws.recv(), 0.5)
                    except asyncio.TimeoutError:
                        continue
                    fid, ev, data = parse(m)
                    if ev == "m0.gap":
                        log.append(("gap", data))
                    elif fid:
                        log.append(("id", fid, data))
                        last = fid
        except (websockets.ConnectionClosed, OSError, asyncio.TimeoutError, websockets.InvalidHandshake):
            await asyncio.sleep(0.05)


def check_log(label, log):
    """No id twice, ids only go up, every hole has an m0.gap between its sides."""
    seen, prev, gap_since, holes, told, twice, silent = set(), None, False, 0, 0, [], []
    for at, (kind, v, *rest) in enumerate(log):
        if kind == "gap":
            gap_since = True
            told += 1
        elif kind == "id":
            if v in seen:
                twice.append(v)
            seen.add(v)
            if prev is not None and v != prev + 1:
                holes += 1

                F.check(v > prev, f"{label}: ids go up ({prev} -> {v})")
                if not gap_since:
                    silent.append(f"{prev} -> {v}: {log[max(0, at - 4):at + 2]}")
            prev, gap_since = v, False
    F.check(not twice, f"{label}: no id twice ({twice[:10]})")
    F.check(not silent, f"{label}: every hole in the ids has an m0.gap between its sides ({silent})")
    opens = sum(1 for k, *_ in log if k == "open")
    print(f"{label}: {len(seen)} ids, {opens} connections, {holes} holes, {told} m0.gap messages", flush=True)
    return opens


def reloads(label, args, cls):
    s = cls("host_check", "--port", "0", "--drain-timeout-ms", "3000", *args, env=PERIOD)
    s.start()

    async def run():
        log, stop = [], asyncio.Event()
        task = asyncio.create_task(follow(s.port, log, stop))

        async def until(cond, t):
            end = time.monotonic() + t
            while time.monotonic() < end and not cond():
                await asyncio.sleep(0.02)
            return cond()

        async def hup(gen):
            # A HUP refused because the generation before still drains (its
            # `drained` line comes just before its exit) is sent again.
            end = time.monotonic() + 20
            serving = lambda: f"generation {gen} serving" in s.stderr()
            while time.monotonic() < end:
                refused = s.stderr().count("SIGHUP is refused")
                s.signal(signal.SIGHUP)
                await until(lambda: serving() or s.stderr().count("SIGHUP is refused") > refused,
                            end - time.monotonic())
                if serving():
                    return True
                await asyncio.sleep(0.05)
            return serving()
        ok = await until(lambda: sum(e[0] == "id" for e in log) >= 3, 10)
        t0 = time.monotonic()
        for gen in range(2, 12):
            # one reload at a time: the one before has drained (each drain ends `drained, exit 0`)
            drained = await until(lambda: s.stderr().count("drained, exit 0") >= gen - 2, 20)
            SEEN.update(descendants(s.proc.pid))
            opens = sum(e[0] == "open" for e in log)
            served = await hup(gen)
            # reconnected to it, and read from it
            read = await until(lambda: sum(e[0] == "open" for e in log) > opens and log[-1][0] == "id", 15)
            ok = ok and drained and served and read
            # where a slow run spends its time (a run past ctest's bound says nothing else)
            print(f"{label}: generation {gen}: drained before {drained}, serving {served}, read {read}, "
                  f"at {time.monotonic() - t0:.1f}s", flush=True)
        F.check(ok, f"{label}: every reload served and the client read again after it\n{s.stderr()[-3000:]}")
        stop.set()
        await task
        return log
    try:
        log = asyncio.run(run())
        check_log(label, log)
    finally:
        SEEN.update(descendants(s.proc.pid))
        if s.proc.poll() is None:
            s.signal(signal.SIGTERM)
            if not wait_for(lambda: s.proc.poll() is not None, 20):
                print(f"note: {label}: the host did not exit within 20 s of SIGTERM; killed", flush=True)
                s.kill()
        reap(SEEN)


try:
    basics()
    gap()
    reloads("single, 10 reloads", [], Server)
    reloads("--workers 2, 10 reloads", ["--workers", "2"], Prefork)
finally:
    reap(SEEN)
F.done()
