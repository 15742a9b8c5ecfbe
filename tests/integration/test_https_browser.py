#!/usr/bin/env python3
"""Headless Chromium over HTTPS (--certfile / --keyfile; docs/behaviour.md,
HTTPS and HTTP/2) in every mode, with a CA and a leaf for 127.0.0.1 and
localhost this test makes with `openssl`.

The browser is told to accept exactly the test's leaf key
(--ignore-certificate-errors-spki-list=<base64 SHA-256 of the leaf's
SubjectPublicKeyInfo>): nothing is installed in a trust store, and no other
certificate error is ignored. One browser session visits, one after another:

- host_check without --http2: the navigation and the fetch went over
  "http/1.1" (performance entries' nextHopProtocol);
- host_check --http2, single, --threads 2, --workers 2 (Prefork), and
  --blocking-threads 1 (the pool: /instance runs on a pool thread there):
  "h2" for the navigation and the fetch (Chromium offers h2 by ALPN).

Then todo --http2 --blocking-threads 1 (its pool): the page POSTs a todo
(JSON), reads it back with GET /todos?tag=h2, and fetches a 300,000-byte
static file (m0_respond_file, past HTTP/2's first flow-control window),
whose SHA-256 the page computes (crypto.subtle) and the test compares.

Each time the page is the server's own GET /health over https (so its
script runs with the server's origin); the script fetches the JSON routes
/instance (a view; its pid is the server's, or a worker's under
--workers) and /actor/echo (an application actor's reply), and
opens an EventSource on /events until 2 `beat` events came (their data
JSON with the server's pid); it writes what it saw into document.title and
a DOM element, which the test reads (the EventSource over HTTP/2 too: an
SSE stream on an h2 stream). Chromium absent: "skipped: ..." and
exit 0 (this test does not install it; test_browser_streams does).
"""
import base64
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time

from harness import Failures, Prefork, Server, descendants, output_dir
from webdriver import CHROMEDRIVER, CHROMIUM, Driver, available, poll

F = Failures()
NAME = "test_https_browser"
TMP = tempfile.mkdtemp(prefix="m0-https-browser-")

# Run on the server's /health page: fetches /instance, then opens an
# EventSource on /events until 2 beats; writes the outcome into the page.
PAGE_JS = r"""
const r = window.__m0 = {instance: null, actor: null, beats: [], errors: [], done: false};
document.documentElement.innerHTML = '<head><title>m0 https: running</title></head><body><pre id="out"></pre></body>';
const show = () => {
  document.getElementById("out").textContent = JSON.stringify(r);
  if (r.done) document.title = r.errors.length ? "m0 https: failed" : "m0 https: ok";
};
fetch("/instance", {cache: "no-store"}).then((a) => a.json()).then((j) => {
  r.instance = j;
  return fetch("/actor/echo", {cache: "no-store"}).then((a) => a.json());
}).then((j) => {
  r.actor = j;
  const es = new EventSource("/events");
  es.addEventListener("beat", (e) => {
    r.beats.push(JSON.parse(e.data));
    if (r.beats.length >= 2) { es.close(); r.done = true; }
    show();
  });
  es.onerror = () => { r.errors.push("EventSource error, readyState " + es.readyState); es.close(); r.done = true; show(); };
}).catch((e) => { r.errors.push(String(e)); r.done = true; show(); });
show();
"""

# Run on todo's /health page: POSTs a todo and reads it back (JSON both
# ways), then fetches a static file (m0_respond_file, larger than HTTP/2's
# first window) and hashes it.
FILES_JS = r"""
const r = window.__m0 = {posted: null, listed: null, file: null, errors: [], done: false};
document.documentElement.innerHTML = '<head><title>m0 https: running</title></head><body><pre id="out"></pre></body>';
const show = () => {
  document.getElementById("out").textContent = JSON.stringify(r);
  if (r.done) document.title = r.errors.length ? "m0 https: failed" : "m0 https: ok";
};
const hex = (b) => Array.from(new Uint8Array(b)).map((x) => x.toString(16).padStart(2, "0")).join("");
fetch("/todos", {method: "POST", headers: {"Content-Type": "application/json"},
                 body: JSON.stringify({title: "from chromium \u2713", tags: ["h2"]})})
  .then((a) => a.json().then((j) => { r.posted = {status: a.status, body: j}; return fetch("/todos?tag=h2"); }))
  .then((a) => a.json()).then((j) => { r.listed = j; return fetch("/static/big.bin"); })
  .then((a) => a.arrayBuffer().then((b) => crypto.subtle.digest("SHA-256", b).then((d) => {
    r.file = {status: a.status, length: b.byteLength, sha256: hex(d)};
  })))
  .catch((e) => { r.errors.push(String(e)); })
  .finally(() => { r.done = true; show(); });
show();
"""

# What the page did, and the protocols of its navigation and of the fetch.
STATE_JS = r"""
const nav = performance.getEntriesByType("navigation")[0] || {};
const res = performance.getEntriesByType("resource").filter((e) => e.name.endsWith("/instance"));
return {title: document.title, out: (document.getElementById("out") || {}).textContent || "",
        origin: location.origin, nav: nav.nextHopProtocol, fetch: res.length ? res[0].nextHopProtocol : null};
"""


def openssl(*args, stdin=None):
    p = subprocess.run(["openssl", *args], capture_output=True, input=stdin, timeout=20)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return p.stdout


def path(name):
    return os.path.join(TMP, name)


def make_certs():
    """A CA and a leaf for 127.0.0.1 and localhost signed by it; returns the
    leaf's SPKI pin (base64 of the SHA-256 of its DER SubjectPublicKeyInfo)."""
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
            path("ca.key"), "-out", path("ca.crt"), "-days", "30", "-subj", "/CN=m0 browser test CA",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", path("leaf.key"),
            "-out", path("leaf.csr"), "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1")
    openssl("x509", "-req", "-in", path("leaf.csr"), "-CA", path("ca.crt"), "-CAkey", path("ca.key"),
            "-CAcreateserial", "-out", path("leaf.crt"), "-days", "30", "-copy_extensions", "copy")
    pub = openssl("x509", "-in", path("leaf.crt"), "-pubkey", "-noout")
    der = openssl("pkey", "-pubin", "-outform", "der", stdin=pub)
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


def pids_of(s):
    """The server's pid and, under --workers, its workers'."""
    return {s.proc.pid} | descendants(s.proc.pid)


def visit(d, s, label, want, pool):
    """The page over https from server s; its fetch and EventSource; the
    protocol the browser used for both is `want`."""
    d.go(f"https://127.0.0.1:{s.port}/health?t={time.monotonic_ns()}")
    st = d.js(STATE_JS)
    ours = st["origin"] == f"https://127.0.0.1:{s.port}"
    F.check(ours, f"{label}: the page is the server's (its certificate accepted by the pin), origin {st}")
    if not ours:
        return
    d.js(PAGE_JS)
    done = poll(lambda: d.js(STATE_JS)["title"] in ("m0 https: ok", "m0 https: failed"), 8)
    st = d.js(STATE_JS)
    print(f"test: {label}: {st}", flush=True)
    F.check(done and st["title"] == "m0 https: ok", f"{label}: the page's script finished without error ({st})")
    F.check(st["nav"] == want and st["fetch"] == want,
            f"{label}: the navigation and the fetch went over {want!r} (nextHopProtocol: {st['nav']!r}, "
            f"{st['fetch']!r})")
    try:
        r = json.loads(st["out"])
    except ValueError:
        r = {}
    pids = pids_of(s)
    inst = r.get("instance") or {}
    F.check(inst.get("pid") in pids, f"{label}: fetch /instance: JSON naming a serving pid {sorted(pids)} ({inst})")
    F.check(isinstance(inst.get("thread"), int) and (inst["thread"] >= 0) == pool,
            f"{label}: /instance ran {'on a pool thread (thread >= 0)' if pool else 'on the loop (thread -1)'} ({inst})")
    actor = r.get("actor") or {}
    F.check(actor.get("actor") == "echo" and actor.get("pid") in pids,
            f"{label}: fetch /actor/echo: the application actor's JSON reply ({actor})")
    beats = r.get("beats") or []
    F.check(len(beats) >= 2 and all(b.get("pid") in pids for b in beats) and beats[1]["beat"] == beats[0]["beat"] + 1,
            f"{label}: EventSource /events: 2 beats in a row from a serving pid ({beats})")


def visit_files(d, s, label, data):
    """todo's JSON routes both ways and a static file, byte-exact, over h2."""
    d.go(f"https://127.0.0.1:{s.port}/health?t={time.monotonic_ns()}")
    st = d.js(STATE_JS)
    ours = st["origin"] == f"https://127.0.0.1:{s.port}"
    F.check(ours, f"{label}: the page is the server's (its certificate accepted by the pin), origin {st}")
    if not ours:
        return
    d.js(FILES_JS)
    done = poll(lambda: d.js(STATE_JS)["title"] in ("m0 https: ok", "m0 https: failed"), 8)
    st = d.js(STATE_JS)
    print(f"test: {label}: {st}", flush=True)
    F.check(done and st["title"] == "m0 https: ok", f"{label}: the page's script finished without error ({st})")
    F.check(st["nav"] == "h2", f"{label}: the navigation went over h2 ({st['nav']!r})")
    try:
        r = json.loads(st["out"])
    except ValueError:
        r = {}
    posted, listed, got = r.get("posted") or {}, r.get("listed") or {}, r.get("file") or {}
    F.check(posted.get("status") == 201 and (posted.get("body") or {}).get("title") == "from chromium \u2713",
            f"{label}: POST /todos (a JSON body): 201 and the todo ({posted})")
    F.check([t.get("title") for t in listed.get("todos") or []] == ["from chromium \u2713"],
            f"{label}: GET /todos?tag=h2: the todo posted ({listed})")
    F.check(got.get("status") == 200 and got.get("length") == len(data)
            and got.get("sha256") == hashlib.sha256(data).hexdigest(),
            f"{label}: GET /static/big.bin: {len(data)} bytes, byte-exact (SHA-256 in the page) ({got})")


def browser():
    if not available():
        print(f"skipped: no {CHROMIUM} and {CHROMEDRIVER} (apt-get install chromium chromium-driver)", flush=True)
        return
    pin = make_certs()
    tls = ["--certfile", path("leaf.crt"), "--keyfile", path("leaf.key")]
    modes = [
        ("single, HTTP/1.1", Server, [], "http/1.1", False),
        ("single", Server, ["--http2"], "h2", False),
        ("--threads 2", Server, ["--http2", "--threads", "2"], "h2", False),
        ("--workers 2", Prefork, ["--http2", "--workers", "2"], "h2", False),
        ("--blocking-threads 1 (pool)", Server, ["--http2", "--blocking-threads", "1"], "h2", True),
    ]
    t0 = time.monotonic()
    with Driver(output_dir(NAME)) as d:
        caps = d.start(extra=[f"--ignore-certificate-errors-spki-list={pin}"])
        print(f"test: {caps.get('browserName')} {caps.get('browserVersion')} session in "
              f"{time.monotonic() - t0:.1f}s; leaf pin {pin}", flush=True)
        for label, kind, args, want, pool in modes:
            with kind("host_check", "--port", "0", *tls, *args) as s:
                visit(d, s, f"chromium: host_check {label}", want, pool)
                F.check(s.stop() == 0, f"{label}: drained and exited 0\n{s.stderr()[-800:]}")
        static = path("static")
        os.makedirs(static)
        data = bytes((i * 7 + i // 251) % 256 for i in range(300000))  # past HTTP/2's first 64 KiB window
        with open(os.path.join(static, "big.bin"), "wb") as f:
            f.write(data)
        with Server("todo", "--port", "0", *tls, "--http2", "--blocking-threads", "1",
                    env={"M0_TODO_STATIC": static}) as s:
            visit_files(d, s, "chromium: todo --blocking-threads 1", data)
            F.check(s.stop() == 0, f"todo: drained and exited 0\n{s.stderr()[-800:]}")
    F.check(not d.left, f"no chromium process left after stopping chromedriver ({d.left})")
    print(f"test: took {time.monotonic() - t0:.1f}s", flush=True)


try:
    browser()
finally:
    shutil.rmtree(TMP, ignore_errors=True)
F.done()
