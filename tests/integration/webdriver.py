"""Headless Chromium through chromedriver (W3C WebDriver over HTTP, standard
library only), for tests that look at a page as a browser runs it.

    if not webdriver.available(): print("skip: ..."); ...
    with webdriver.Driver(out_dir) as d:
        d.start()
        d.on_new_document(js)   # runs before the page's own scripts
        d.go(url); d.js("return document.title")

Every call is bounded; chromedriver and the browser are stopped by process
group, then each process that names the session's private HOME by pid
(chrome_crashpad_handler leaves the group). install() apt-gets Chromium
when it is missing (test_dashboard_browser and test_browser_streams call it
and fail when it fails); any other test using this module says in one line
that it skips the browser part when it is absent. poll() waits for what a
page shows; png_size() reads a screenshot's size.
"""
import http.client
import json
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import time

from harness import descendants, free_port, wait_for

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
PACKAGES = ["chromium", "chromium-driver"]
INSTALL_TIMEOUT = 600.0  # the whole install, apt-get update included


def available():
    return all(os.access(p, os.X_OK) for p in (CHROMIUM, CHROMEDRIVER))


class WebDriverError(Exception):
    pass


def run_bounded(cmd, timeout):
    """Runs cmd in its own process group; on timeout kills the group.
    Returns (exit code or None on timeout, output)."""
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=max(1.0, timeout))
        return p.returncode, out.decode(errors="replace")
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return None, out.decode(errors="replace") + f"\n(killed after {timeout:.0f}s)"


def install():
    """apt-get install chromium chromium-driver (through `sudo -n` when not
    root); when that fails, apt-get update and once more. All within
    INSTALL_TIMEOUT. Returns what apt-get said when the browser is still
    missing, else None."""
    pre = ([] if os.geteuid() == 0 else ["sudo", "-n"]) + ["env", "DEBIAN_FRONTEND=noninteractive"]
    get = pre + ["apt-get", "-q", "-o", "DPkg::Lock::Timeout=120"]
    deadline = time.monotonic() + INSTALL_TIMEOUT
    said = []
    for cmd in (get + ["install", "-y", "--no-install-recommends"] + PACKAGES, get + ["update"],
                get + ["install", "-y", "--no-install-recommends"] + PACKAGES):
        left = deadline - time.monotonic()
        if left <= 0:
            said.append(f"(no time left of {INSTALL_TIMEOUT:.0f}s)")
            break
        print("test: " + " ".join(cmd), flush=True)
        try:
            rc, out = run_bounded(cmd, left)
        except OSError as e:
            rc, out = -1, str(e)
        said.append(f"$ {' '.join(cmd)} -> {rc}\n{out[-1500:]}")
        if rc is None:
            break
        if "install" in cmd and rc == 0 and available():
            return None
    return "\n".join(said)


def poll(fn, timeout):
    """wait_for with a longer step: each look at a page is a round trip
    through chromedriver to the browser."""
    return wait_for(fn, timeout, step=0.05)


def png_size(data):
    """(width, height) of a PNG, None if data is not one."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", data[16:24])


class Driver:
    def __init__(self, out):
        self.port = free_port()
        self.sid = None
        self.proc = None
        self.home = tempfile.mkdtemp(prefix="m0-chromium-")
        self.log = os.path.join(out, "chromedriver.log")
        self.left = []

    def __enter__(self):
        env = dict(os.environ, HOME=self.home, XDG_CONFIG_HOME=os.path.join(self.home, "config"),
                   XDG_CACHE_HOME=os.path.join(self.home, "cache"))

        def ready():
            try:
                return (self.call("GET", "/status", timeout=2) or {}).get("ready")
            except (OSError, WebDriverError, ValueError):
                return self.proc.poll() is not None and "exited"

        # chromedriver binds the port it is given: another program may take a
        # free port between its pick and that bind (seen with two test runs
        # side by side), and chromedriver then exits. A new port, three times.
        for _ in range(3):
            self.proc = subprocess.Popen([CHROMEDRIVER, f"--port={self.port}", f"--log-path={self.log}"],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, start_new_session=True, env=env)
            if poll(ready, 10) is True or self.proc.poll() is None:
                break
            with open(self.log, errors="replace") as f:
                if "Address already in use" not in f.read():
                    break
            self.port = free_port()
        if poll(ready, 1) is not True:
            raise AssertionError(f"chromedriver did not answer /status within 10 s (exit {self.proc.poll()}); "
                                 f"its log: {self.log}")
        return self

    def __exit__(self, *exc):
        self.stop()

    def call(self, method, path, body=None, timeout=30):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            c.request(method, path, body=data, headers={"Content-Type": "application/json; charset=utf-8"})
            r = c.getresponse()
            raw = r.read()
        finally:
            c.close()
        j = json.loads(raw or b"null")
        value = j.get("value") if isinstance(j, dict) else None
        if r.status != 200:
            v = value if isinstance(value, dict) else {}
            raise WebDriverError(f"{method} {path} -> {r.status} {v.get('error')}: {str(v.get('message'))[:600]}")
        return value

    def session(self, method, path, body=None, timeout=30):
        return self.call(method, f"/session/{self.sid}{path}", body, timeout)

    def start(self, width=1280, height=900, extra=()):
        """extra: more command-line switches for the browser (a test's
        --ignore-certificate-errors-spki-list, say)."""
        # --remote-debugging-pipe: no DevTools socket on "localhost" (a
        # minbase chroot has no /etc/hosts).
        args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--remote-debugging-pipe",
                f"--window-size={width},{height}", f"--user-data-dir={os.path.join(self.home, 'profile')}",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update", "--disable-sync", *extra]
        caps = {"capabilities": {"alwaysMatch": {
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
            "timeouts": {"script": 5000, "pageLoad": 15000, "implicit": 0}}}}
        v = self.call("POST", "/session", caps, timeout=30)
        self.sid = v["sessionId"]
        return v.get("capabilities", {})

    def on_new_document(self, source):
        self.session("POST", "/goog/cdp/execute", {"cmd": "Page.addScriptToEvaluateOnNewDocument",
                                                   "params": {"source": source}})

    def go(self, url):
        self.session("POST", "/url", {"url": url}, timeout=20)

    def js(self, script, *args):
        return self.session("POST", "/execute/sync", {"script": script, "args": list(args)}, timeout=10)

    def stop(self):
        if self.proc is None:
            return
        pids = descendants(self.proc.pid)
        if self.sid:
            try:
                self.session("DELETE", "", timeout=10)
            except (OSError, WebDriverError, ValueError) as e:
                print(f"test: deleting the session: {e}")
            self.sid = None
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)
        for pid in pids | self.mine():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc = None
        self.left = [] if poll(lambda: not self.mine(), 5) else sorted(self.mine())
        shutil.rmtree(self.home, ignore_errors=True)

    def mine(self):
        """The live (not zombie) processes whose command line names self.home."""
        out = set()
        for d in os.listdir("/proc"):
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if self.home.encode() not in f.read():
                        continue
                with open(f"/proc/{d}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                        out.add(int(d))
            except (OSError, ValueError, IndexError):
                pass
        return out
