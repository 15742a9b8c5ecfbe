"""EventSource and WebSocket in a real browser against host_check (docs/http.md,
WebSocket and Streams; apps/host_check GET /events and GET /ws).

Proves, with `host_check --threads 2` and Debian's headless `chromium` driven
through `chromedriver` (W3C WebDriver over HTTP, standard library only; both
apt-get installed when missing, as test_dashboard_browser does; a failed
install fails the test). The page is the server's own GET /health, so the
scripts run with the server's origin (http://127.0.0.1:PORT) and open
`/events` and `ws://127.0.0.1:PORT/ws` same-origin; they write what they see
into the page's DOM:
- EventSource on /events?welcome=1: the first event is `welcome` (its data
  {"worker":W}, no id), then at least 5 `beat` events whose lastEventId rises
  by exactly 1 each time, whose data is {"beat":k,"pid":<the server's pid>}
  with k rising by 1; no `message` event (every frame is named); no error
  while it runs;
- WebSocket on /ws (binaryType "arraybuffer"): opens; `ws.extensions` names
  permessage-deflate (Chromium offers it; the host accepts it); at least 3
  beat messages (text, JSON with "beat" and the server's pid); "h\u00e9llo \u2713", a
  3000-character text and an ArrayBuffer of the bytes 0..255 each come back
  exactly, text as text and binary as binary; ws.close(4001) -> the close
  event says code 4001 (echoed by the server) and wasClean true;
- four sockets, one after another, each sending a 70 KB binary message
  and closing with 1000 in the same task while the host is stopped
  (SIGSTOP until ss shows the bytes queued), so it reads the close in the
  same read as the message's end: each closes cleanly with 1000 and the
  host serves /health after (that shape once freed the host's receive
  buffer under its reader; Chromium alone hit it about 1 run in 12);
- resumption, from Python (a page cannot set Last-Event-ID): the browser's
  EventSource closes at lastEventId N; while a raw watcher stream sees the
  channel reach M >= N + 3, a raw GET /events with `Last-Event-ID: N` first
  delivers N+1 .. M and on, contiguous;
- SIGTERM with both open in the page: the EventSource receives `m0.closing`,
  the WebSocket closes with 1001; the host exits 0 within 5 s;
- a screenshot of the page (the counts it wrote) lands in the output directory
  as browser_streams.png (chromedriver's log beside it).
Chromedriver and chromium are stopped by process group, then by pid.

What this test shares with test_dashboard_browser.py (install, Driver,
poll, png_size) is tests/integration/webdriver.py's.
"""
import base64
import json
import os
import signal
import socket
import subprocess
import time

from harness import Failures, Server, get, output_dir
from webdriver import CHROMEDRIVER, CHROMIUM, PACKAGES, Driver, available, install, png_size, poll

F = Failures()
WIDTH, HEIGHT = 1280, 900
NAME = "test_browser_streams"
HELLO = "h\u00e9llo \u2713"

# The page: the server's /health document, rewritten into a results table.
PAGE_JS = r"""
document.documentElement.innerHTML = '<head><title>m0 browser streams</title></head><body style="font: 16px sans-serif">'
  + '<h1>m0: EventSource and WebSocket</h1><table border="1" cellpadding="6" id="t"></table></body>';
window.__m0_errors = [];
window.addEventListener("error", (e) => window.__m0_errors.push(String(e.message)));
window.__m0_show = () => {
  const es = window.__es || {}, ws = window.__ws || {};
  const rows = [
    ["EventSource", (es.url || "") + " readyState " + (es.src ? es.src.readyState : "-")],
    ["first event", es.events && es.events.length ? es.events[0].type : "-"],
    ["beats (EventSource)", String((es.beats || []).length) + " last id " + (es.lastId || "-")],
    ["errors (EventSource)", String(es.errors || 0)],
    ["closing (EventSource)", String(es.closing || 0)],
    ["WebSocket", (ws.url || "") + (ws.open ? " open" : "")],
    ["extensions", ws.ext || "-"],
    ["beats (WebSocket)", String((ws.beats || []).length)],
    ["echoes", "text " + (ws.texts || []).length + ", binary " + (ws.bins || []).length],
    ["close", ws.close ? ws.close.code + " clean " + ws.close.wasClean : "-"],
  ];
  document.getElementById("t").innerHTML = rows.map(([k, v]) =>
    "<tr><th align=left>" + k + "</th><td id='" + k.replace(/\W+/g, "_") + "'>" + v + "</td></tr>").join("");
};
window.__m0_show();
return document.title;
"""

# Opens an EventSource on arguments[0]; closes it after arguments[1] beats
# (0: never). Records everything it receives in window.__es.
ES_JS = r"""
const [path, keep] = arguments;
const r = window.__es = {url: path, events: [], beats: [], errors: 0, closing: 0, lastId: "", messages: 0};
const es = r.src = new EventSource(path);
es.addEventListener("welcome", (e) => { r.events.push({type: "welcome", data: e.data, id: e.lastEventId}); window.__m0_show(); });
es.addEventListener("beat", (e) => {
  r.events.push({type: "beat", data: e.data, id: e.lastEventId});
  r.beats.push({data: e.data, id: e.lastEventId});
  r.lastId = e.lastEventId;
  if (keep && r.beats.length >= keep) { es.close(); r.closed = true; }
  window.__m0_show();
});
es.addEventListener("m0.closing", () => { r.closing++; window.__m0_show(); });
es.onmessage = () => { r.messages++; };
es.onerror = () => { r.errors++; window.__m0_show(); };
"""

ES_STATE = """const r = window.__es || {};
return {events: r.events, beats: r.beats, errors: r.errors, closing: r.closing, lastId: r.lastId,
  messages: r.messages, closed: !!r.closed, readyState: r.src ? r.src.readyState : null,
  pageErrors: window.__m0_errors};"""

# Opens a WebSocket on /ws; after 3 beats sends the three messages; once all
# three came back closes with 4001. With arguments[0] false it only opens and
# keeps the socket (for the drain).
WS_JS = r"""
const [exchange, hello] = arguments;
const long = Array.from({length: 3000}, (_, i) => String.fromCharCode(97 + (i * 7) % 26)).join("");
const bytes = new Uint8Array(256); for (let i = 0; i < 256; i++) bytes[i] = i;
const r = window.__ws = {url: "ws://" + location.host + "/ws", open: false, ext: null, beats: [], texts: [], bins: [],
  other: [], close: null, sent: false, errors: 0, longSent: long};
const ws = r.sock = new WebSocket(r.url);
ws.binaryType = "arraybuffer";
ws.onopen = () => { r.open = true; r.ext = ws.extensions; window.__m0_show(); };
ws.onerror = () => { r.errors++; };
ws.onmessage = (e) => {
  if (typeof e.data === "string") {
    let j = null;
    try { j = JSON.parse(e.data); } catch (err) {}
    if (j && typeof j === "object" && "beat" in j) r.beats.push(j);
    else r.texts.push(e.data);
  } else if (e.data instanceof ArrayBuffer) {
    r.bins.push(Array.from(new Uint8Array(e.data)));
  } else {
    r.other.push(String(e.data));
  }
  if (exchange && !r.sent && r.beats.length >= 3) {
    r.sent = true;
    ws.send(hello); ws.send(long); ws.send(bytes.buffer);
  }
  if (exchange && r.sent && r.texts.length >= 2 && r.bins.length >= 1 && !r.closing) {
    r.closing = true;
    ws.close(4001, "bye");
  }
  window.__m0_show();
};
ws.onclose = (e) => { r.close = {code: e.code, reason: e.reason, wasClean: e.wasClean}; window.__m0_show(); };
"""

# One socket that, once told to, sends a 70 KB binary message of random bytes
# (deflate cannot shrink it) and closes with 1000 in the same task.
WS_BURST_OPEN_JS = r"""
const r = window.__burst = {open: false, close: null, errors: 0};
const ws = r.sock = new WebSocket("ws://" + location.host + "/ws");
ws.onopen = () => { r.open = true; };
ws.onerror = () => { r.errors++; };
ws.onclose = (e) => { r.close = {code: e.code, wasClean: e.wasClean}; };
"""
WS_BURST_SEND_JS = r"""
const big = new Uint8Array(70000); crypto.getRandomValues(big.subarray(0, 65536)); crypto.getRandomValues(big.subarray(65536));
const ws = window.__burst.sock; ws.send(big); ws.close(1000, "done");
"""


WS_STATE = """const r = window.__ws || {};
return {open: r.open, ext: r.ext, beats: r.beats, texts: r.texts, bins: r.bins, other: r.other, close: r.close,
  sent: r.sent, errors: r.errors, longSent: r.longSent, readyState: r.sock ? r.sock.readyState : null,
  pageErrors: window.__m0_errors};"""


class RawStream:
    """GET path over a raw socket with extra header lines; frames parsed as
    they arrive (the host writes a stream unchunked)."""

    def __init__(self, port, path="/events", headers=()):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        req = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
        req += "".join(h + "\r\n" for h in headers) + "\r\n"
        self.sock.sendall(req.encode())
        self.sock.settimeout(0.05)
        self.buf = b""
        self.head = None
        self.frames = []  # dicts of the frame's fields

    def pump(self):
        try:
            while True:
                d = self.sock.recv(65536)
                if not d:
                    break
                self.buf += d
        except (socket.timeout, BlockingIOError):
            pass
        if self.head is None and b"\r\n\r\n" in self.buf:
            self.head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        if self.head is not None:
            while b"\n\n" in self.buf:
                raw, self.buf = self.buf.split(b"\n\n", 1)
                fr = {}
                for line in raw.decode(errors="replace").split("\n"):
                    if line and not line.startswith(":"):
                        k, _, v = line.partition(":")
                        fr[k] = v[1:] if v.startswith(" ") else v
                if fr:
                    self.frames.append(fr)
        return self

    def ids(self):
        return [int(f["id"]) for f in self.frames if f.get("event") == "beat" and f.get("id", "").isdigit()]

    def close(self):
        self.sock.close()


def contiguous(ids):
    return all(b == a + 1 for a, b in zip(ids, ids[1:]))


def beat_json(text):
    try:
        j = json.loads(text)
        return j if isinstance(j, dict) else {}
    except (TypeError, ValueError):
        return {}


def eventsource(F, d, s, label):
    d.js(ES_JS, "/events?welcome=1", 6)
    st = poll(lambda: (lambda v: v if v["closed"] else None)(d.js(ES_STATE)), 5) or d.js(ES_STATE)
    ev = st.get("events") or []
    F.check(st["closed"], f"{label}: EventSource on /events?welcome=1 received 6 beats within 5 s ({st})")
    F.check(bool(ev) and ev[0]["type"] == "welcome",
            f"{label}: EventSource: the first event is `welcome` ({ev[:2]})")
    if ev and ev[0]["type"] == "welcome":
        w = beat_json(ev[0]["data"])
        F.check(isinstance(w.get("worker"), int) and ev[0]["id"] == "",
                f"{label}: EventSource: welcome's data is {{\"worker\":W}} and it has no id ({ev[0]})")
    F.check(sum(e["type"] == "welcome" for e in ev) == 1, f"{label}: EventSource: one welcome ({ev})")
    beats = st.get("beats") or []
    ids = [int(b["id"]) if str(b["id"]).isdigit() else None for b in beats]
    F.check(len(beats) >= 5 and None not in ids and contiguous(ids),
            f"{label}: EventSource: >= 5 beats, lastEventId rising by exactly 1 ({ids})")
    data = [beat_json(b["data"]) for b in beats]
    ks = [j.get("beat") for j in data]
    F.check(len(ks) >= 5 and all(isinstance(k, int) for k in ks) and contiguous(ks),
            f"{label}: EventSource: each beat's data has \"beat\" rising by 1 ({ks})")
    F.check(data and all(j.get("pid") == s.proc.pid for j in data),
            f"{label}: EventSource: each beat's data names the server's pid {s.proc.pid} ({data[:2]})")
    F.check(st["messages"] == 0 and st["errors"] == 0,
            f"{label}: EventSource: no unnamed message, no error event ({st['messages']}, {st['errors']})")
    return ids[-1] if ids and ids[-1] is not None else None


def websocket(F, d, s, label):
    d.js(WS_JS, True, HELLO)
    st = poll(lambda: (lambda v: v if v["close"] else None)(d.js(WS_STATE)), 8) or d.js(WS_STATE)
    F.check(st["open"], f"{label}: WebSocket on /ws opened ({ {k: st[k] for k in ('open', 'readyState', 'errors')} })")
    F.check("permessage-deflate" in (st["ext"] or ""),
            f"{label}: WebSocket: ws.extensions names permessage-deflate ({st['ext']!r})")
    F.check(len(st["beats"]) >= 3 and all(isinstance(b.get("beat"), int) and b.get("pid") == s.proc.pid
                                          for b in st["beats"]),
            f"{label}: WebSocket: >= 3 beat messages with \"beat\" and the server's pid ({st['beats'][:4]})")
    ks = [b.get("beat") for b in st["beats"]]
    F.check(contiguous(ks), f"{label}: WebSocket: the beats come in order, none missed ({ks})")
    F.check(st["sent"], f"{label}: WebSocket: the page sent its three messages")
    texts = st["texts"] or []
    F.check(HELLO in texts, f"{label}: WebSocket: {HELLO!r} came back exactly ({[t[:40] for t in texts]})")
    F.check(st["longSent"] in texts and len(st["longSent"]) == 3000,
            f"{label}: WebSocket: the 3000-character text came back exactly "
            f"({[len(t) for t in texts]})")
    F.check(texts == [HELLO, st["longSent"]], f"{label}: WebSocket: the text echoes, in order, and nothing else "
                                              f"({[t[:20] for t in texts]})")
    F.check(st["bins"] == [list(range(256))] and not st["other"],
            f"{label}: WebSocket: the ArrayBuffer 0..255 came back as one binary message, exactly "
            f"({[len(b) for b in st['bins']]}, {st['other']})")
    c = st["close"] or {}
    F.check(c.get("code") == 4001 and c.get("wasClean") is True,
            f"{label}: WebSocket: close(4001) -> the close event says 4001, wasClean true ({c})")
    F.check(st["errors"] == 0, f"{label}: WebSocket: no error event ({st['errors']})")


def recv_queue(port):
    """Bytes waiting in the server's end of its established connections on port (ss's Recv-Q)."""
    out = subprocess.run(["ss", "-tnH", "state", "established", f"( sport = :{port} )"], capture_output=True,
                         text=True, timeout=5).stdout
    return sum(int(line.split()[0]) for line in out.splitlines() if line.split())


def burst(F, d, s, label, rounds=4):
    """A large message with the close right behind it, from the browser, read
    by the host in one go: the host is stopped (SIGSTOP) while the browser
    sends, so the message's last read holds the close too (the shape that
    freed the host's receive buffer under its reader; Chromium alone hit it
    about 1 run in 12)."""
    clean = 0
    for k in range(rounds):
        d.js(WS_BURST_OPEN_JS)
        if not poll(lambda: d.js("return window.__burst.open;"), 5):
            break
        s.signal(signal.SIGSTOP)
        try:
            d.js(WS_BURST_SEND_JS)
            queued = poll(lambda: recv_queue(s.port) >= 70000, 5)
        finally:
            s.signal(signal.SIGCONT)
        st = poll(lambda: d.js("return window.__burst.close;"), 10)
        print(f"test: burst {k}: {'all queued' if queued else 'not all queued'} while stopped, close {st}",
              flush=True)
        clean += bool(st and st["code"] == 1000 and st["wasClean"])
    F.check(clean == rounds, f"{label}: {rounds} sockets each sent 70 KB and closed 1000 at once, read in one go: "
                             f"all closed cleanly with 1000 ({clean})")
    F.check(s.proc.poll() is None and get(s.port, "/health")[0] == 200,
            f"{label}: the host serves after them (exit {s.proc.poll()}):\n{s.stderr()[-2000:]}")


def resume(F, s, n, label):
    """Last-Event-ID: n on a raw stream first replays the held beats after n."""
    if n is None:
        F.check(False, f"{label}: resume: no lastEventId from the browser to resume from")
        return
    watch = RawStream(s.port)
    seen = poll(lambda: [i for i in watch.pump().ids() if i >= n + 3], 3)
    m = max(watch.ids() or [0])
    watch.close()
    F.check(seen, f"{label}: resume: a watcher saw the channel reach {n} + 3 within 3 s (it saw {watch.ids()})")
    r = RawStream(s.port, headers=[f"Last-Event-ID: {n}"])
    got = poll(lambda: [i for i in r.pump().ids() if i >= m], 3)
    ids = r.ids()
    status = (r.head or b"").split(b"\r\n", 1)[0]
    r.close()
    print(f"test: resume from {n} (the channel at {m} when it connected): ids {ids[:12]}", flush=True)
    F.check(status.startswith(b"HTTP/1.1 200"), f"{label}: resume: GET /events with Last-Event-ID: 200 ({status})")
    F.check(got and ids[:1] == [n + 1] and contiguous(ids),
            f"{label}: resume: Last-Event-ID: {n} first delivers {n + 1} .. {m} (published before it "
            f"connected) and on, contiguous ({ids})")


def drain(F, d, s, label):
    """SIGTERM with an EventSource and a WebSocket open in the page."""
    d.js(ES_JS, "/events", 0)
    d.js(WS_JS, False, HELLO)
    up = poll(lambda: (lambda e, w: e["beats"] and w["beats"])(d.js(ES_STATE), d.js(WS_STATE)), 5)
    F.check(up, f"{label}: drain: a new EventSource and WebSocket receive beats within 5 s")
    t = time.monotonic()
    s.signal(signal.SIGTERM)
    done = poll(lambda: (lambda e, w: e["closing"] and w["close"])(d.js(ES_STATE), d.js(WS_STATE)), 5)
    e, w = d.js(ES_STATE), d.js(WS_STATE)
    F.check(done and e["closing"] >= 1, f"{label}: drain: the EventSource received m0.closing within 5 s "
                                        f"({e['closing']}, {e['errors']} errors)")
    F.check((w["close"] or {}).get("code") == 1001,
            f"{label}: drain: the WebSocket closed with 1001 ({w['close']})")
    try:
        rc = s.wait(timeout=max(0.1, 5.0 - (time.monotonic() - t)))
    except AssertionError as err:
        rc = None
        print(err)
    F.check(rc == 0, f"{label}: SIGTERM -> exit 0 within 5 s (rc {rc}):\n{s.stderr()[-2000:]}")


def browser():
    label = "chromium: host_check --threads 2"
    out = output_dir(NAME)
    if not available():
        why = install()
        F.check(available(), f"chromium and chromedriver installed ({CHROMIUM}, {CHROMEDRIVER}): `apt-get install "
                                f"{' '.join(PACKAGES)}` failed; install them by hand (as root: apt-get install "
                                f"--no-install-recommends {' '.join(PACKAGES)}):\n{why}")
        if not available():
            return
    t0 = time.monotonic()
    with Server("host_check", "--threads", "2", "--port", "0") as s, Driver(out) as d:
        caps = d.start(WIDTH, HEIGHT)
        print(f"test: {caps.get('browserName')} {caps.get('browserVersion')} session in "
              f"{time.monotonic() - t0:.1f}s", flush=True)
        d.session("POST", "/url", {"url": s.url("/health")}, timeout=20)
        origin = d.js("return location.origin;")
        F.check(origin == f"http://127.0.0.1:{s.port}", f"{label}: the page's origin is the server's ({origin})")
        F.check(d.js(PAGE_JS) == "m0 browser streams", f"{label}: the results page is drawn")

        n = eventsource(F, d, s, label)
        websocket(F, d, s, label)
        burst(F, d, s, label)
        resume(F, s, n, label)
        errs = d.js("return window.__m0_errors;")
        F.check(not errs, f"{label}: no script error on the page ({errs})")

        # The screenshot, of the counts the page wrote.
        d.js("window.__m0_show();")
        shown = d.js("return document.getElementById('t').innerText;")
        png = base64.b64decode(d.session("GET", "/screenshot", timeout=15) or "")
        size = png_size(png)
        path = os.path.join(out, "browser_streams.png")
        with open(path, "wb") as f:
            f.write(png)
        F.check(size is not None and size[0] == WIDTH and len(png) > 5000,
                f"{label}: the screenshot is a PNG {WIDTH} wide ({len(png)} bytes, {size})")
        F.check("permessage-deflate" in shown and "4001 clean true" in shown,
                f"{label}: the page shows the extension and the close ({shown!r})")
        print(f"test: screenshot {path} ({len(png)} bytes, {size}); the page says:\n{shown}", flush=True)

        drain(F, d, s, label)
    F.check(not d.left, f"{label}: no chromium process left after stopping chromedriver ({d.left})")
    print(f"test: browser part took {time.monotonic() - t0:.1f}s", flush=True)


browser()
F.done()
