"""Published data is data: a reference app's page never puts a published or
requested value into the document as markup (docs/apps.md, dashboard;
OWASP's output-encoding rule).

Static, always: no page or script of a reference app (apps/*/*.html,
*.js) uses innerHTML, outerHTML, insertAdjacentHTML, document.write or
srcdoc; the dashboard serves its page.html byte for byte at GET /.

In a browser, when /usr/bin/chromium and chromedriver are there (else one
line says the part is skipped): `dashboard --run-dir D`, its page opened in
headless Chromium (tests/integration/webdriver.py). Before the page's own
script, a hook records every element added to the document and every text
that holds the marker. `m0pub --channel dash --event stats` publishes, five
times, a stats frame whose values are markup that would run:
`<img src=x onerror="document.title='pwned';new Image().src='http://127.0.0.1:P/hit'">`
(P: a listener this test holds) in the mode, the pid and each per-loop
figure. Then:
- the page drew that frame: the marker shows, as text, in its per-loop
  table and its header (the characters `<img src=x onerror=`);
- no <img> and no element with an on* attribute was ever added to the
  document, document.title is still the page's, and the listener got no
  request, once the page has drawn two of the producer's frames after the
  last hostile one (an image's error fires long before: "x" is a 404 from
  the dashboard itself);
- no script error on the page;
- SIGTERM: exit 0.
"""
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading

import webdriver
from harness import BIN, Failures, Server, get, output_dir, wait_for

F = Failures()
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MARKUP_SINKS = re.compile(r"\b(innerHTML|outerHTML|insertAdjacentHTML|document\.write(ln)?|srcdoc)\b")

HOOK = r"""
(() => {
  const seen = window.__m0_seen = {added: [], texts: [], errors: []};
  window.addEventListener("error", (e) => seen.errors.push(String(e.message)));
  const look = (n) => {
    if (n.nodeType === 1) {
      const on = [...n.attributes].filter((a) => /^on/i.test(a.name)).map((a) => a.name);
      if (n.tagName.toUpperCase() === "IMG" || on.length) seen.added.push(n.tagName + " " + on.join(","));
      n.querySelectorAll("*").forEach(look);
      const w = document.createTreeWalker(n, NodeFilter.SHOW_TEXT);
      for (let t = w.nextNode(); t; t = w.nextNode()) look(t);
    } else if (n.nodeType === 3 && n.data.includes("M0MARK")) {
      const p = n.parentElement;
      seen.texts.push({where: p ? (p.closest("[id]") || p).id : "", text: n.data});
    }
  };
  new MutationObserver((ms) => ms.forEach((m) => {
    m.addedNodes.forEach(look);
    if (m.type === "characterData") look(m.target);
  })).observe(document, {childList: true, subtree: true, characterData: true});
})();
"""

SEEN_JS = "return Object.assign({title: document.title}, window.__m0_seen || {});"
# How many stats frames the page has drawn: the hook counts them as they come.
COUNT_JS = "return window.__m0_stats || 0;"
COUNT_HOOK = r"""
(() => {
  const Native = window.EventSource;
  window.__m0_stats = 0;
  window.EventSource = class extends Native {
    constructor(url, init) { super(url, init); this.addEventListener("stats", () => { window.__m0_stats++; }); }
  };
})();
"""


def static():
    files = sorted(glob.glob(os.path.join(ROOT, "apps", "*", "*.html")) +
                   glob.glob(os.path.join(ROOT, "apps", "*", "*.js")))
    F.check(any(f.endswith("dashboard/page.html") for f in files), f"static: the dashboard's page is among {files}")
    for f in files:
        with open(f, encoding="utf-8") as h:
            bad = [f"{k}: {m.group(0)}" for k, line in enumerate(h, 1) for m in [MARKUP_SINKS.search(line.split("//")[0])]
                   if m]
        F.check(not bad, f"static: {os.path.relpath(f, ROOT)} puts no value in as markup (lines {bad}): "
                         f"build elements, set textContent")
    with open(os.path.join(ROOT, "apps", "dashboard", "page.html"), "rb") as h:
        page = h.read()
    with Server("dashboard", "--port", "0") as s:
        status, body = get(s.port, "/")
        F.check(status == 200 and body == page, f"static: GET / is apps/dashboard/page.html as it is ({status}, "
                                                f"{len(body)} bytes of {len(page)})")
        F.check(s.stop() == 0, "static: SIGTERM -> exit 0")


class Listener:
    """Counts the requests (connections that sent something) made to it."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.hits = []
        self.sock.settimeout(0.2)
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.halt.is_set():
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            with c:
                c.settimeout(2)
                try:
                    self.hits.append(c.recv(1024).split(b"\r\n", 1)[0].decode(errors="replace"))
                    c.sendall(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
                except OSError:
                    self.hits.append("(a connection)")

    def close(self):
        self.halt.set()
        self.thread.join(5)
        self.sock.close()


def browser(out):
    label = "chromium: dashboard"
    if not webdriver.available():
        print(f"test: SKIP the browser part: no {webdriver.CHROMIUM} and {webdriver.CHROMEDRIVER} "
              f"(apt-get install chromium chromium-driver)", flush=True)
        return
    run = tempfile.mkdtemp(prefix="m0-markup-")
    os.chmod(run, 0o700)
    lis = Listener()
    hostile = (f"M0MARK <img src=x onerror=\"document.title='pwned';"
               f"new Image().src='http://127.0.0.1:{lis.port}/hit'\">")
    stats = {"t": 1, "mode": hostile, "pid": hostile,
             "loops": [{"rps": 1, "requests": 1, "open": hostile, "streams": hostile, "handoffs": hostile,
                        "queued": hostile, "dropped": hostile}]}
    try:
        with Server("dashboard", "--port", "0", "--run-dir", run) as s, webdriver.Driver(out) as d:
            d.start()
            d.on_new_document(HOOK)
            d.on_new_document(COUNT_HOOK)
            d.go(s.url("/"))
            title = d.session("GET", "/title")
            F.check(title.startswith("m0"), f"{label}: the page loaded (title {title!r})")
            F.check(wait_for(lambda: d.js(COUNT_JS) >= 1, 5), f"{label}: the page draws the producer's stats")
            for _ in range(5):
                p = subprocess.run([os.path.join(BIN, "m0pub"), "--run-dir", run, "--channel", "dash", "--event",
                                    "stats", json.dumps(stats)], capture_output=True, text=True, timeout=10)
                F.check(p.returncode == 0, f"{label}: m0pub published the hostile stats ({p.returncode}, "
                                           f"{p.stderr.strip()!r})")
            after = d.js(COUNT_JS)
            F.check(wait_for(lambda: d.js(COUNT_JS) >= after + 2, 5),
                    f"{label}: the page drew two of the producer's frames after the hostile ones")
            seen = d.js(SEEN_JS)
            where = {t["where"] for t in seen["texts"]}
            F.check("rows" in where and "mode" in where,
                    f"{label}: the hostile value shows as text in the per-loop table and the header ({where})")
            F.check(any("<img src=x onerror=" in t["text"] for t in seen["texts"]),
                    f"{label}: as the characters it is ({[t['text'][:60] for t in seen['texts']][:3]})")
            F.check(not seen["added"], f"{label}: no <img> or on* element was ever added ({seen['added'][:5]})")
            F.check(seen["title"] == title, f"{label}: document.title is still {title!r} ({seen['title']!r})")
            F.check(not lis.hits, f"{label}: the listener got no request ({lis.hits[:3]})")
            F.check(not seen["errors"], f"{label}: no script error on the page ({seen['errors'][:3]})")
            F.check(s.stop() == 0, f"{label}: SIGTERM -> exit 0")
        F.check(not d.left, f"{label}: no chromium process left ({d.left})")
    finally:
        lis.close()
        shutil.rmtree(run, ignore_errors=True)


static()
browser(output_dir("test_published_markup"))
F.done()
