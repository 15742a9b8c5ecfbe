#!/usr/bin/env python3
"""bench/ws_resume_browser.py — a real browser's WebSocket across reloads
(issue 37.5): headless Chromium (Debian's chromium + chromedriver, driven
through tests/integration/webdriver.py) runs docs/http.md's
resume client (subprotocol m0.events, ?last_event_id=N on each reconnect, 200
ms after a close) against host_check's GET /ws while this script sends
SIGHUP RELOADS times, each after the one before has drained. Prints ids
received, connections, ids missing, ids twice, holes, and holes with an
m0.gap between their sides.

    bench/ws_resume_browser.py --bin build/bin [--reloads 10] [--args "--workers 2"]
"""
import argparse
import os
import re
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
ap = argparse.ArgumentParser()
ap.add_argument("--bin", default=os.path.join(HERE, "..", "build", "bin"))
ap.add_argument("--reloads", type=int, default=10)
ap.add_argument("--args", default="")
A, _ = ap.parse_known_args()
sys.argv = [sys.argv[0], "--bin", A.bin]
from harness import Server  # noqa: E402 (harness reads sys.argv's --bin)
from webdriver import Driver, poll  # noqa: E402

CLIENT = """
window.__log = []; window.__opens = 0; let last = 0;
function open() {
  const q = last ? `?last_event_id=${last}` : "";
  const ws = new WebSocket(`ws://${location.host}/ws${q}`, "m0.events");
  ws.onopen = () => { window.__opens++; window.__log.push(["open", last, ws.protocol]); };
  ws.onmessage = (m) => {
    const lines = m.data.split("\\n");
    const id = lines.find((l) => l.startsWith("id: "));
    if (id) { last = Number(id.slice(4)); window.__log.push(["id", last]); }
    if (lines.includes("event: m0.gap")) window.__log.push(["gap", m.data]);
  };
  ws.onclose = (e) => { window.__log.push(["close", e.code]); setTimeout(open, 200); };
}
open();
return 1;
"""


def main():
    s = Server("host_check", "--port", "0", "--drain-timeout-ms", "3000", *A.args.split(),
               env={"M0_HOSTCHECK_PERIOD_MS": "100"})
    s.start()
    out = tempfile.mkdtemp(prefix="m0-ws-browser-")
    try:
        with Driver(out) as d:
            d.start()
            d.session("POST", "/url", {"url": f"http://127.0.0.1:{s.port}/health"}, timeout=20)
            d.js(CLIENT)
            poll(lambda: len([e for e in d.js("return window.__log;") if e[0] == "id"]) >= 3, 10)
            for i in range(A.reloads):
                opens = d.js("return window.__opens;")
                s.signal(signal.SIGHUP)
                poll(lambda: s.stderr().count("drained, exit 0") >= i + 1, 20)
                poll(lambda: d.js("return window.__opens;") > opens and d.js("return window.__log;")[-1][0] == "id",
                     15)
            time.sleep(0.5)
            log = d.js("return window.__log;")
    finally:
        s.signal(signal.SIGTERM)
        try:
            s.wait(20)
        except AssertionError:
            s.kill()
    ids = [e[1] for e in log if e[0] == "id"]
    twice = len(ids) - len(set(ids))
    holes = told = 0
    prev, gap = None, False
    for e in log:
        if e[0] == "gap":
            gap = True
        elif e[0] == "id":
            if prev is not None and e[1] != prev + 1:
                holes += 1
                told += gap
            prev, gap = e[1], False
    missing = (max(ids) - min(ids) + 1 - len(set(ids))) if ids else 0
    protos = {e[2] for e in log if e[0] == "open"}
    print(f"{A.reloads} reloads ({A.args or 'single'}), Chromium: {len(ids)} ids, "
          f"{sum(e[0] == 'open' for e in log)} connections (protocol {protos}), {missing} ids missing, "
          f"{twice} twice, {holes} holes, {told} of them with an m0.gap between")


main()
