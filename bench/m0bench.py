"""bench/m0bench.py — what bench/run_modes, run_pool, run_sse, run_lifecycle and
run_trace share: the build into their own directory and the copy of the
binaries set aside, m0 servers started and stopped the way bench/run_loop does
it (fresh per run, M0_* variables removed, the listening line read from
stderr, SIGTERM and exit 0 checked, the drained lines parsed), CPU seconds and
memory of a whole process tree from /proc, waiting for an idle machine, wrk
runs and their output, medians, ratios and the JSON file in bench/out/.

Not a script: the run_* files import it (`sys.path` is their own directory).
"""
import datetime
import hashlib
import json
import os
import platform
import re
import resource
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024
NOISY = 0.10  # a run is flagged noisy when others used > 10% of a CPU during it
UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}
LISTEN_RE = re.compile(r"m0: (\S+) listening on https?://(\S+):(\d+) \((.*?)pid (\d+)(?:, generation \d+)?\)")
DRAINED_RE = re.compile(r"m0: loop\.(\d+) drained: (\d+) requests, (\d+) connections, (\d+) refused, "
                        r"(\d+) timed out, (\d+) handed off, (\d+) taken over")
SERVING_RE = re.compile(r"m0: worker (\d+) serving \(pid (\d+)\)")


class BenchError(Exception):
    pass


_NAME = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "bench"


def log(msg):
    print(f"{_NAME}: {msg}", file=sys.stderr, flush=True)


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc)


# ---------------------------------------------------------------- build, binaries

def build_commands(build_dir, *flags):
    """The cmake commands of a Release build into build_dir (warnings as
    errors), with extra -D flags."""
    return [["cmake", "-S", ".", "-B", build_dir, "-DM0_WERROR=ON", "-DCMAKE_BUILD_TYPE=Release", *flags],
            ["cmake", "--build", build_dir, "-j2"]]


def build(build_dir, *flags):
    """cmake into build_dir (Release, warnings as errors): the bench's own
    directory, so other people's builds of build/ do not move under it."""
    for cmd in build_commands(build_dir, *flags):
        log(shlex.join(cmd))
        p = sh(cmd, cwd=ROOT)
        if p.returncode != 0:
            sys.stderr.write(p.stdout[-4000:] + p.stderr[-4000:])
            raise BenchError(f"build failed: {shlex.join(cmd)}")


def snapshot(build_dir, names, tmpdir):
    """Copies build_dir/bin/NAME aside for each name, so every run of a session
    measures the same binaries even if the build directory changes meanwhile.
    Returns ({name: copy}, {name: sha256})."""
    paths, sums = {}, {}
    for n in names:
        src = os.path.join(ROOT, build_dir, "bin", n)
        if not os.access(src, os.X_OK):
            raise BenchError(f"{src} missing (build first, or drop --no-build)")
        dst = os.path.join(tmpdir, n)
        shutil.copy2(src, dst)
        with open(dst, "rb") as f:
            sums[n] = hashlib.sha256(f.read()).hexdigest()
        paths[n] = dst
    return paths, sums


def need(*tools):
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        raise BenchError(f"missing: {' '.join(missing)} (bench/run installs what the benchmarks use: "
                         f"wrk nginx-light h2o gnuplot-nox util-linux)")


def raise_nofile(want):
    """Raises this process's descriptor limit (inherited by the servers it
    starts) to min(want, hard). Returns the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    new = min(want, hard) if hard != resource.RLIM_INFINITY else want
    if new > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# ---------------------------------------------------------------- /proc

def _stat(pid):
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    return s[s.rindex(")") + 2:].split()  # [0] is field 3 (state)


def proc_ticks(pid):
    """utime + stime of a process (the kernel sums its live and exited threads)."""
    f = _stat(pid)
    return int(f[11]) + int(f[12])


def proc_ticks_with_children(pid):
    """utime + stime + cutime + cstime: the process and its waited-for children."""
    f = _stat(pid)
    return int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])


def proc_user_sys(pid):
    f = _stat(pid)
    return int(f[11]), int(f[12])


def ppid_map():
    m = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                m[int(d)] = int(_stat(d)[1])
            except (FileNotFoundError, ProcessLookupError, PermissionError, IndexError, ValueError):
                pass
    return m


def children(pid, pm=None):
    pm = ppid_map() if pm is None else pm
    return [p for p, pp in pm.items() if pp == pid]


def tree(pid):
    """pid and every live descendant."""
    pm = ppid_map()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(c for c, pp in pm.items() if pp == p)
    return out


def tree_ticks(pid, pids=None):
    """CPU ticks of a process tree: every live process's utime + stime + cutime
    + cstime (threads, exited threads, and children already waited for).
    pids: count these processes instead of pid's tree."""
    total = 0
    for p in (tree(pid) if pids is None else pids):
        try:
            total += proc_ticks_with_children(p)
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (FileNotFoundError, PermissionError):
        pass
    return None


def tree_mem(pid, pss=True, pids=None):
    """(sum of VmRSS KiB, sum of Pss KiB or None, {pid: rss}) over a process tree
    (or over pids). RSS counts pages shared by several processes (the binary,
    libc) once per process; Pss divides them among their sharers."""
    rss, ps, per = 0, 0, {}
    for p in (tree(pid) if pids is None else pids):
        try:
            r = vm_rss_kib(p)
            per[p] = r
            rss += r
            if pss:
                x = pss_kib(p)
                ps = None if x is None or ps is None else ps + x
        except (FileNotFoundError, ProcessLookupError):
            pass
    return rss, (ps if pss else None), per


def thread_ticks(pid):
    """{tid: (comm, ticks)} for the live threads of one process."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                s = f.read()
            fl = s[s.rindex(")") + 2:].split()
            out[int(tid)] = (comm, int(fl[11]) + int(fl[12]))
        except (FileNotFoundError, ProcessLookupError):
            pass
    return out


def ctx_switches(pid):
    """Voluntary + involuntary context switches summed over a process's live threads."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def thread_breakdown(pid, before, after, seconds):
    """CPU seconds per thread between two thread_ticks() readings, named: the
    main thread, then the host's own threads in creation order (for m0: loop(s),
    pool threads, the producer — see ARCHITECTURE.md), nng's threads grouped."""
    rows, nng = [], 0.0
    for tid in sorted(after):
        comm, t1 = after[tid]
        t0 = before.get(tid, (comm, 0))[1]
        s = (t1 - t0) / CLK_TCK
        if comm.startswith("nng:"):
            nng += s
        else:
            rows.append({"tid": tid, "comm": comm, "main": tid == pid, "cpu_s": s, "util": s / seconds})
    rows.append({"tid": None, "comm": "nng:* (all)", "main": False, "cpu_s": nng, "util": nng / seconds})
    return rows


def cpu_busy_ticks():
    """Busy ticks per CPU from /proc/stat (everything but idle and iowait)."""
    busy = {}
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and line[3].isdigit():
                name, *v = line.split()
                v = [int(x) for x in v[:8]]
                busy[int(name[3:])] = sum(v) - v[3] - v[4]
    return busy


def busy_cpus(b0, b1, seconds):
    return sum(b1[c] - b0[c] for c in b1) / CLK_TCK / seconds if seconds > 0 else 0.0


def settle(max_wait, threshold=0.10, sample=0.5):
    """Waits (at most max_wait s) until the machine is quiet: busy time over all
    CPUs below `threshold` CPUs for one `sample`. Returns (waited s, last load)."""
    t0 = time.monotonic()
    while True:
        b0 = cpu_busy_ticks()
        time.sleep(sample)
        b1 = cpu_busy_ticks()
        load = busy_cpus(b0, b1, sample)
        waited = time.monotonic() - t0
        if load < threshold or waited >= max_wait:
            return waited, load


def settle_logged(max_wait):
    waited, load = settle(max_wait)
    if load >= 0.10:
        log(f"machine still busy ({load:.2f} CPUs) after {waited:.0f}s; measuring anyway")
    return {"settle_wait_s": round(waited, 2), "idle_load_before": round(load, 3)}


def cpu_set(cpu):
    """A CPU given as an int or as several (an iterable of ints): the set."""
    return {cpu} if isinstance(cpu, int) else set(cpu)


def cpu_list(cpu):
    """taskset's -c argument for an int or several CPUs: "0", "0,1"."""
    return ",".join(str(c) for c in sorted(cpu_set(cpu)))


def taskset(cpu):
    """The taskset prefix of a command pinned to cpu (an int or several), or []."""
    return ["taskset", "-c", cpu_list(cpu)] if cpu is not None else []


def check_pinned(pid, cpu, what):
    """Every thread of pid's tree may run only on cpu (an int or several CPUs);
    a thread pinned to some of them (nginx's worker_cpu_affinity) passes."""
    want = cpu_set(cpu)
    for p in tree(pid):
        for tid in os.listdir(f"/proc/{p}/task"):
            try:
                aff = os.sched_getaffinity(int(tid))
            except ProcessLookupError:
                continue
            if not aff <= want:
                raise BenchError(f"{what}: thread {tid} has affinity {sorted(aff)}, want {sorted(want)}")


def fetch(url, timeout=5.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type"), r.read()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- m0 servers

def m0_env(extra=None):
    """The environment without inherited M0_* variables, plus extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("M0_")}
    env.update(extra or {})
    return env


def stop_process(proc, name, sig, timeout, stderr):
    """Sends sig and wants exit 0 within timeout; stderr() is quoted otherwise."""
    proc.send_signal(sig)
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{name} did not exit within {timeout}s of {signal.Signals(sig).name}")
    if rc != 0:
        raise BenchError(f"{name} exited {rc} after {signal.Signals(sig).name}:\n{stderr()[-3000:]}")


class Stoppable:
    """stop_recorded() and kill_tree() for a server class with proc, stop()
    and drained()."""

    def kill_tree(self):
        """SIGKILL to the children first (a SIGKILLed master leaves its
        workers running), then to the process itself."""
        if self.proc and self.proc.poll() is None:
            for p in tree(self.proc.pid)[1:]:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.proc.kill()
            self.proc.wait(timeout=5)

    def stop_recorded(self, failures, label, timeout=15.0):
        """stop(), but a server that does not exit 0 is recorded in failures
        (with its stderr) and the session goes on: the run's figures stand."""
        try:
            return self.stop(timeout)
        except BenchError as e:
            first = str(e).splitlines()[0]
            failures.append(f"{label}: {e}")
            log(f"FAIL: {label}: {first}")
            d = self.drained()
            d["stop_error"] = first
            return d


class M0(Stoppable):
    """One m0 host: BINARY --port 0 --max-keepalive-requests 0 ARGS, optionally
    pinned with taskset. Its stderr goes to a file read for the listening,
    serving and drained lines."""

    def __init__(self, binary, args=(), env=None, cpu=None, port=0, keepalive_cap=True):
        self.binary, self.args, self.extra_env, self.cpu = binary, list(args), dict(env or {}), cpu
        self.tmp = tempfile.TemporaryDirectory(prefix="m0bench-")
        self.err_path = os.path.join(self.tmp.name, "stderr")
        self._err = open(self.err_path, "w+b")
        self.proc = None
        self.port = None
        self.pid = None
        base = [binary, "--port", str(port)] + (["--max-keepalive-requests", "0"] if keepalive_cap else [])
        self.cmd = taskset(cpu) + base + self.args
        self.t_exec = None

    def stderr(self):
        self._err.flush()
        with open(self.err_path, "rb") as f:
            return f.read().decode(errors="replace")

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def workers(self):
        for i, a in enumerate(self.args):
            if a == "--workers":
                return int(self.args[i + 1])
        return 0

    def start(self, timeout=15.0):
        self.t_exec = time.monotonic()
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=self._err, cwd=self.tmp.name,
                                     env=m0_env(self.extra_env))
        deadline = time.monotonic() + timeout
        nworkers = self.workers()
        while time.monotonic() < deadline:
            err = self.stderr()
            m = LISTEN_RE.search(err)
            if m and len(set(SERVING_RE.findall(err))) >= nworkers:
                self.port = int(m.group(3))
                self.pid = int(m.group(5))
                break
            if self.proc.poll() is not None:
                raise BenchError(f"{shlex.join(self.cmd)} exited {self.proc.returncode} before listening:\n{err}")
            time.sleep(0.01)
        else:
            raise BenchError(f"{shlex.join(self.cmd)} did not listen within {timeout}s:\n{self.stderr()}")
        if self.pid != self.proc.pid:  # taskset execs the server: same pid
            raise BenchError(f"listening line names pid {self.pid}, started {self.proc.pid}")
        if self.cpu is not None:
            check_pinned(self.pid, self.cpu, os.path.basename(self.binary))
        return self

    def stop(self, timeout=15.0):
        """SIGTERM; wants exit 0. Returns the drained lines' sums."""
        stop_process(self.proc, os.path.basename(self.binary), signal.SIGTERM, timeout, self.stderr)
        return self.drained()

    def drained(self):
        loops = [dict(zip(("loop", "requests", "connections", "refused", "timed_out", "handed_off", "taken_over"),
                          map(int, m))) for m in DRAINED_RE.findall(self.stderr())]
        sums = {k: sum(l[k] for l in loops) for k in ("requests", "connections", "refused", "timed_out",
                                                     "handed_off", "taken_over")}
        return {"loops": loops, **sums}

    def kill(self):
        self.kill_tree()
        if not self._err.closed:
            self._err.close()
        self.tmp.cleanup()


# ---------------------------------------------------------------- comparators

NOW_PATH, NOW_TYPE, NOW_BODY = "/x/now", "application/json", b'{"route":"now"}'

# Debian package of each tool the benchmarks use (bench/run installs them).
PACKAGES = {"wrk": "wrk", "nginx": "nginx-light", "h2o": "h2o", "gnuplot": "gnuplot-nox", "taskset": "util-linux"}


def find_tool(name):
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/sbin/{name}", f"/usr/bin/{name}")
                                       if os.access(p, os.X_OK)), None)


def install_missing(tools):
    """apt-get install the Debian packages of the tools that are missing (as
    root, or through sudo). Raises BenchError when one is still missing."""
    missing = [t for t in tools if not find_tool(t)]
    if not missing:
        return []
    pkgs = sorted({PACKAGES[t] for t in missing})
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    log(f"installing {' '.join(pkgs)} (apt-get)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (sudo + ["apt-get", "update", "-q"],
                sudo + ["apt-get", "install", "-y", "-q", "--no-install-recommends"] + pkgs):
        if subprocess.run(cmd, env=env, stdout=sys.stderr, timeout=900).returncode != 0:
            raise BenchError(f"failed: {shlex.join(cmd)}")
    still = [t for t in tools if not find_tool(t)]
    if still:
        raise BenchError(f"still missing after apt-get install: {' '.join(still)}")
    return pkgs


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except (FileNotFoundError, ProcessLookupError):
        return ""


def response_head(port, path, timeout=5.0):
    """The raw status line and headers of GET path (HTTP/1.1, keep-alive), and
    the body: to record what each server actually sends."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
        head, _, body = buf.partition(b"\r\n\r\n")
        n = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                n = int(v)
        while len(body) < n:
            chunk = s.recv(4096)
            if not chunk:
                break
            body += chunk
    return head.decode(errors="replace"), body


class External(Stoppable):
    """A comparator server (nginx, h2o) answering GET /x/now with the same
    15-byte JSON body as ramp, on a free port, optionally pinned. Same surface
    as M0 for measure_wrk: pid, url(), measured_pids(), stop(), kill()."""

    name = None
    stop_signal = signal.SIGTERM

    def __init__(self, cpu=None):
        self.cpu = cpu
        self.tmp = tempfile.TemporaryDirectory(prefix=f"m0bench-{self.name}-")
        self.err_path = os.path.join(self.tmp.name, "stderr")
        self._err = open(self.err_path, "w+b")
        self.proc = self.pid = self.port = self.cmd = None
        self.conf_text = None

    def stderr(self):
        self._err.flush()
        with open(self.err_path, "rb") as f:
            return f.read().decode(errors="replace") + self._extra_log()

    def _extra_log(self):
        return ""

    def url(self, path=NOW_PATH):
        return f"http://127.0.0.1:{self.port}{path}"

    def conf(self):
        raise NotImplementedError

    def argv(self, conf_path):
        raise NotImplementedError

    def ready(self):
        return True

    def spawn(self):
        """Writes the configuration for a free port and starts the server;
        returns at once (bench/run_lifecycle times what follows)."""
        self.port = free_port()
        self.conf_text = self.conf()
        conf_path = os.path.join(self.tmp.name, f"{self.name}.conf")
        with open(conf_path, "w") as f:
            f.write(self.conf_text)
        self.cmd = taskset(self.cpu) + self.argv(conf_path)
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=self._err, cwd=self.tmp.name)
        self.pid = self.proc.pid  # taskset execs the server: same pid
        return self

    def start(self, timeout=15.0, attempts=3):
        for attempt in range(attempts):
            self.spawn()
            deadline = time.monotonic() + timeout
            up = False
            while time.monotonic() < deadline and self.proc.poll() is None:
                if self.ready():
                    try:
                        with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                            up = True
                            break
                    except OSError:
                        pass
                time.sleep(0.02)
            if up:
                break
            if self.proc.poll() is None:
                self.kill_tree()
                raise BenchError(f"{self.name} did not listen within {timeout}s:\n{self.stderr()[-3000:]}")
            err = self.stderr()
            if "in use" not in err or attempt == attempts - 1:
                raise BenchError(f"{self.name} exited {self.proc.returncode} while starting:\n{err[-3000:]}")
        status, ctype, body = fetch(self.url(NOW_PATH))
        if status != 200 or body != NOW_BODY or not (ctype or "").startswith(NOW_TYPE):
            raise BenchError(f"{self.name}: GET {NOW_PATH} answered {status} {ctype!r} {body!r}")
        if self.cpu is not None:
            check_pinned(self.pid, self.cpu, self.name)
        return self

    def measured_pids(self):
        return tree(self.pid)

    def cpu_pids(self):
        """The processes whose CPU is 'the server's' in bench/run_loop."""
        return self.measured_pids()

    def stop(self, timeout=15.0):
        stop_process(self.proc, self.name, self.stop_signal, timeout, self.stderr)
        return {}

    def drained(self):
        return {}

    def kill(self):
        self.kill_tree()
        if not self._err.closed:
            self._err.close()
        self.tmp.cleanup()


NGINX_CONF = """\
# m0 bench: the nginx comparator — {workers} worker(s), keep-alive without a request cap.
worker_processes {workers};
{main_extra}pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{
    worker_connections {worker_connections};
{events_extra}}}
http {{
    access_log off;
    keepalive_requests 1000000000;
    keepalive_timeout {keepalive_timeout};
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    server {{
        listen 127.0.0.1:{port}{listen_extra};
        location = /x/now {{
            default_type application/json;
            return 200 '{{"route":"now"}}';
        }}
    }}
}}
"""


class Nginx(External):
    """nginx -c CONF -g 'daemon off;': a master and `workers` workers; stopped
    gracefully with SIGQUIT (exit 0 wanted)."""

    name = "nginx"
    stop_signal = signal.SIGQUIT

    def __init__(self, workers=1, cpu=None, worker_connections=4096, keepalive_timeout="65s", scale=False):
        self.workers, self.worker_connections, self.keepalive_timeout = workers, worker_connections, keepalive_timeout
        self.scale = scale
        super().__init__(cpu)

    def conf(self):
        return NGINX_CONF.format(tmp=self.tmp.name, port=self.port, workers=self.workers,
                                 worker_connections=self.worker_connections, keepalive_timeout=self.keepalive_timeout,
                                 **nginx_scale_extras(self.scale and self.cpu, self.workers))

    def argv(self, conf_path):
        return [find_tool("nginx"), "-p", self.tmp.name + "/", "-e", os.path.join(self.tmp.name, "error.log"),
                "-c", conf_path, "-g", "daemon off;"]

    def _extra_log(self):
        try:
            with open(os.path.join(self.tmp.name, "error.log")) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def worker_pids(self):
        return [c for c in children(self.pid) if "worker process" in cmdline(c)]

    def ready(self):
        return len(self.worker_pids()) == self.workers

    def start(self, timeout=15.0, attempts=3):
        super().start(timeout, attempts)
        w = self.worker_pids()
        if len(w) != self.workers:
            raise BenchError(f"nginx: want {self.workers} worker(s), found {[(c, cmdline(c)) for c in children(self.pid)]}")
        return self

    def cpu_pids(self):
        return self.worker_pids()


H2O_CONF = """\
# m0 bench: the h2o comparator — {threads} thread(s); /x/now is a 15-byte
# static file served as application/json, without the ETag, Last-Modified and
# Accept-Ranges headers, so its response head is the size of m0's and nginx's.
num-threads: {threads}
{user}listen:
  host: 127.0.0.1
  port: {port}
max-connections: {max_connections}
{extra}file.etag: OFF
file.mime.addtypes:
  application/json: .json
hosts:
  default:
    header.unset: accept-ranges
    paths:
      /x/now:
        file.file: {tmp}/now.json
        header.unset: last-modified
"""


def nginx_scale_extras(cpus, workers):
    """With cpus (scale=True and a pin), nginx set up as it scales best: a
    listening socket per worker (reuseport), no accept mutex, worker i pinned
    to the i-th of cpus (worker_cpu_affinity bit masks, CPU 0 rightmost).
    Without: nothing added (the configuration of the other scripts)."""
    if not cpus:
        return {"main_extra": "", "events_extra": "", "listen_extra": ""}
    cs = sorted(cpu_set(cpus))
    width = max(cs) + 1
    masks = " ".join(format(1 << cs[i % len(cs)], f"0{width}b") for i in range(workers))
    return {"main_extra": f"worker_cpu_affinity {masks};\n", "events_extra": "    accept_mutex off;\n",
            "listen_extra": " reuseport"}


def nginx_conf_doc(workers=1, worker_connections=4096, keepalive_timeout="65s", scale_cpus=None):
    """The nginx configuration as the JSON records it (TMP, PORT for the real ones)."""
    return NGINX_CONF.format(tmp="TMP", port="PORT", workers=workers, worker_connections=worker_connections,
                             keepalive_timeout=keepalive_timeout, **nginx_scale_extras(scale_cpus, workers))


def h2o_conf_doc(threads=1, max_connections=4096, extra=""):
    return H2O_CONF.format(tmp="TMP", port="PORT", threads=threads, max_connections=max_connections, extra=extra,
                           user="user: root\n" if os.geteuid() == 0 else "")


class H2o(External):
    """h2o -c CONF with num-threads N; stopped with SIGTERM (exit 0 wanted).
    h2o 2.2 also starts an idle perl child (its crash handler,
    annotate-backtrace-symbols) that reads a pipe: it is not counted as
    the server (measured_pids), but is reported apart."""

    name = "h2o"

    def __init__(self, threads=1, cpu=None, max_connections=4096, extra=""):
        self.threads, self.max_connections, self.extra = threads, max_connections, extra
        super().__init__(cpu)
        with open(os.path.join(self.tmp.name, "now.json"), "wb") as f:
            f.write(NOW_BODY)

    def conf(self):
        # As root, h2o drops to 'nobody' unless told otherwise; the files are in
        # a 0700 directory of ours.
        user = "user: root\n" if os.geteuid() == 0 else ""
        return H2O_CONF.format(tmp=self.tmp.name, port=self.port, threads=self.threads, user=user,
                               max_connections=self.max_connections, extra=self.extra)

    def argv(self, conf_path):
        return [find_tool("h2o"), "-c", conf_path]

    def ready(self):
        return "ready to serve requests" in self.stderr()

    def measured_pids(self):
        return [self.pid]

    def helper_pids(self):
        return [p for p in tree(self.pid) if p != self.pid]


# ---------------------------------------------------------------- wrk

def wrk_cmd(conns, seconds, url, cpu=None, threads=1, timeout_s=None):
    cmd = taskset(cpu) + \
          ["wrk", f"-t{threads}", f"-c{conns}", f"-d{seconds}s", "--latency"]
    if timeout_s:
        cmd.append(f"--timeout={timeout_s}s")
    return cmd + [url]


def parse_wrk(out):
    def num(pattern, default=None):
        m = re.search(pattern, out)
        return m.group(1) if m else default

    r = {}
    rps = num(r"Requests/sec:\s+([\d.]+)")
    m = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m|h),", out)
    if rps is None or m is None:
        raise BenchError(f"cannot read wrk output:\n{out}")
    r["rps"] = float(rps)
    r["requests"] = int(m.group(1))
    r["wrk_duration_s"] = float(m.group(2)) * UNITS[m.group(3)] / 1e3
    for q in ("50", "75", "90", "99"):
        mq = re.search(rf"^\s*{q}%\s+([\d.]+)(us|ms|s|m|h)\s*$", out, re.M)
        r[f"p{q}_ms"] = float(mq.group(1)) * UNITS[mq.group(2)] if mq else None
    r["non_2xx_3xx"] = int(num(r"Non-2xx or 3xx responses:\s+(\d+)", 0))
    se = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    r["socket_errors"] = dict(zip(("connect", "read", "write", "timeout"),
                                  (int(x) for x in se.groups()) if se else (0, 0, 0, 0)))
    r["errors"] = r["non_2xx_3xx"] + sum(r["socket_errors"].values())
    return r


def run_wrk(cmd, seconds):
    p = sh(cmd, timeout=seconds + 60)
    if p.returncode != 0:
        raise BenchError(f"wrk failed ({p.returncode}): {shlex.join(cmd)}\n{p.stdout}{p.stderr}")
    return p.stdout


def measure_wrk(server, url, conns, duration, warmup, wrk_cpu=None, wrk_threads=1, sample_mem=False,
                threads_of=None, extra_pids=()):
    """A warm-up wrk run (discarded), then the measured one, with the server
    tree's CPU seconds read before and after it, the machine's busy time, and
    (sample_mem) the tree's RSS/PSS sampled every 0.5 s during it (the largest
    sum is kept). threads_of=PID adds a per-thread CPU breakdown of that process.
    extra_pids: other processes of ours (e.g. m0trace) counted apart."""
    if warmup > 0:
        run_wrk(wrk_cmd(conns, warmup, url, wrk_cpu, wrk_threads), warmup)
    cmd = wrk_cmd(conns, duration, url, wrk_cpu, wrk_threads)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    me0 = resource.getrusage(resource.RUSAGE_SELF)
    pid = server.pid
    # The processes that are the server: its tree, unless the server says
    # otherwise (h2o: not its idle crash-handler child).
    pids_of = getattr(server, "measured_pids", None) or (lambda: tree(pid))
    u0 = sum(proc_user_sys(p)[0] for p in pids_of())
    t0 = tree_ticks(pid, pids_of())
    x0 = sum(proc_ticks(p) for p in extra_pids)
    th0 = thread_ticks(threads_of) if threads_of else None
    cs0 = ctx_switches(threads_of) if threads_of else None
    b0 = cpu_busy_ticks()
    w0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rss_max = pss_max = 0
    procs_max = 0
    if sample_mem:
        time.sleep(min(1.0, duration / 2))
        while p.poll() is None:
            rss, pss, per = tree_mem(pid, pids=pids_of())
            rss_max, procs_max = max(rss_max, rss), max(procs_max, len(per))
            if pss is not None:
                pss_max = max(pss_max, pss)
            try:
                p.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
    try:
        out, err = p.communicate(timeout=duration + 60)
    except subprocess.TimeoutExpired:
        p.kill()
        raise BenchError(f"wrk did not finish: {shlex.join(cmd)}")
    wall = time.monotonic() - w0
    b1 = cpu_busy_ticks()
    t1 = tree_ticks(pid, pids_of())
    u1 = sum(proc_user_sys(p_)[0] for p_ in pids_of())
    x1 = sum(proc_ticks(p_) for p_ in extra_pids)
    th1 = thread_ticks(threads_of) if threads_of else None
    cs1 = ctx_switches(threads_of) if threads_of else None
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    me1 = resource.getrusage(resource.RUSAGE_SELF)
    if p.returncode != 0:
        raise BenchError(f"wrk failed ({p.returncode}): {shlex.join(cmd)}\n{out}{err}")
    r = parse_wrk(out)
    if r["requests"] == 0:  # nothing answered at all: an error even if wrk saw none
        r["no_requests"] = True
        r["errors"] += 1
    r["cpu_s"] = (t1 - t0) / CLK_TCK
    r["cpu_user_s"] = (u1 - u0) / CLK_TCK
    r["window_s"] = wall
    r["cores"] = r["cpu_s"] / wall
    r["client_cpu_s"] = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    r["client_util"] = r["client_cpu_s"] / wall
    r["extra_cpu_s"] = (x1 - x0) / CLK_TCK
    r["bench_self_cpu_s"] = (me1.ru_utime + me1.ru_stime) - (me0.ru_utime + me0.ru_stime)
    r["busy_cpus"] = busy_cpus(b0, b1, wall)
    r["cpu_busy_s"] = {str(c): (b1[c] - b0[c]) / CLK_TCK for c in sorted(b1)}
    # Busy time that is neither the server, wrk, nor our other processes:
    # other people's processes, interrupts, kernel threads. Large = noisy.
    r["other_cpu_s"] = max(0.0, sum(r["cpu_busy_s"].values()) - r["cpu_s"] - r["client_cpu_s"] - r["extra_cpu_s"]
                            - r["bench_self_cpu_s"])
    r["noisy"] = r["other_cpu_s"] > NOISY * wall
    r["req_per_cpu_s"] = r["requests"] / r["cpu_s"] if r["cpu_s"] > 0 else None
    if sample_mem:
        r["rss_kib"] = rss_max
        r["pss_kib"] = pss_max or None
        r["processes"] = procs_max
    if threads_of:
        r["threads"] = thread_breakdown(threads_of, th0, th1, wall)
        r["ctx_switches"] = cs1 - cs0
        r["ctx_switches_per_req"] = (cs1 - cs0) / r["requests"] if r["requests"] else None
    r["wrk_command"] = shlex.join(cmd)
    r["wrk_output"] = out
    return r


# ---------------------------------------------------------------- report

def versions(binaries):
    v = {}
    p = sh(["wrk", "-v"]) if shutil.which("wrk") else None
    if p:
        v["wrk"] = (p.stdout + p.stderr).splitlines()[0].strip() if (p.stdout + p.stderr) else None
    for tool, flag in (("nginx", "-v"), ("h2o", "--version")):
        path = find_tool(tool)
        if path:
            p = sh([path, flag])
            out = (p.stdout + p.stderr).strip()
            v[tool] = out.splitlines()[0] if out else None
    some = next(iter(binaries.values()), None)
    if some:
        p = sh([some, "--version"])
        v["m0"] = (p.stdout or p.stderr).strip()
    p = sh(["git", "-C", ROOT, "rev-parse", "HEAD"])
    v["m0_commit"] = p.stdout.strip() or None
    v["m0_commit_note"] = ("HEAD when the session started; with --no-build the binaries may have been built "
                           "from an earlier tree: their sha256 says which")
    p = sh(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench"])
    # Others edit the tree while a session runs: what the built binaries
    # contained beyond the commit (their sha256 is recorded too).
    v["m0_tree_dirty_outside_bench"] = [l[3:] for l in p.stdout.splitlines()]
    return v


def machine():
    model = None
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    u = platform.uname()
    distro = None
    try:
        with open("/etc/os-release") as f:
            distro = dict(l.rstrip("\n").split("=", 1) for l in f if "=" in l).get("PRETTY_NAME", "").strip('"')
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "usable_cpus": sorted(os.sched_getaffinity(0)), "model_name": model,
            "kernel": u.release, "arch": u.machine, "os": distro, "loadavg_at_start": os.getloadavg(),
            "clk_tck": CLK_TCK, "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)}


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ratio(a, b):
    return a / b if a is not None and b else None


def paired(runs, key, rounds, a, b, **same):
    """Two arms paired by round: for each round 1..rounds, KEY of the run that
    matches the fields of `a` (a dict, e.g. {"arm": "m0"}) over KEY of the run
    that matches `b`, both also matching `same`. Returns (per_round, median).
    A round runs its arms back to back, so this leaves out the drift between
    rounds that a ratio of medians keeps."""
    def value(rnd, sel):
        want = {**same, **sel, "round": rnd}
        return next((r[key] for r in runs if all(r.get(k) == v for k, v in want.items())), None)
    per_round = []
    for rnd in range(1, rounds + 1):
        x, y = value(rnd, a), value(rnd, b)
        if x is not None and y:
            per_round.append(x / y)
    return per_round, median(per_round)


def pct(xs, q):
    """The q-th percentile (0..100) of xs, nearest rank."""
    xs = sorted(xs)
    if not xs:
        return None
    k = max(0, min(len(xs) - 1, int(round(q / 100.0 * len(xs) + 0.5)) - 1))
    return xs[k]


def target(name, value, op, bound, unit="", where=None):
    """One target judged: op is '>=', '<=', '<' or 'in' (bound = (lo, hi)).
    'by' is the margin when met and the shortfall when missed, both >= 0,
    in the unit of the value; 'text' says it in words."""
    t = {"target": name, "where": where, "value": value, "op": op, "bound": bound, "unit": unit}
    if value is None:
        t.update(met=None, by=None, text="not measured")
        return t
    if op == ">=":
        met, by = value >= bound, value - bound
    elif op == "<=":
        met, by = value <= bound, bound - value
    elif op == "<":
        met, by = value < bound, bound - value
    elif op == "in":
        lo, hi = bound
        met, by = lo <= value <= hi, min(value - lo, hi - value)
    else:
        raise ValueError(op)
    t.update(met=met, by=abs(by))
    g = ".3g" if unit in ("x", "") else ".3g"
    want = f"{bound[0]:g}-{bound[1]:g}{unit}" if op == "in" else f"{op} {bound:g}{unit}"
    side = ""
    if op == "in" and not met:
        side = " (high)" if value > bound[1] else " (low)"
    t["text"] = f"{'met' if met else 'MISSED'} by {abs(by):{g}}{unit}{side}: {value:.4g}{unit} against {want}"
    return t


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def spread(xs):
    """(min, max) / median - 1 as a percentage: how far the rounds were apart."""
    xs = [x for x in xs if x is not None]
    if len(xs) < 2:
        return None
    m = statistics.median(xs)
    return 100.0 * (max(xs) - min(xs)) / m if m else None


def write_report(out_dir, name, stamp, report):
    report["finished"] = utc_now().isoformat(timespec="seconds")
    report["ok"] = not report.get("failures")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{name}-{stamp}.json")
    with open(path, "w") as f:
        json.dump(report, f, indent=2, default=str)
        f.write("\n")
    print(f"\nwrote {os.path.relpath(path, os.getcwd())}")
    if report.get("failures"):
        print(f"FAILED ({len(report['failures'])}):", *report["failures"], sep="\n  ", file=sys.stderr)
        return 1
    return 0


def common_args(ap, rounds=3, duration=5, warmup=1, settle=20.0):
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--duration", type=int, default=duration, help=f"seconds per measured run (default {duration})")
    ap.add_argument("--warmup", type=int, default=warmup, help=f"seconds of warm-up before each run (default {warmup})")
    ap.add_argument("--settle", type=float, default=settle,
                    help=f"before each run, wait up to this many seconds for the machine to be idle (default {settle:g})")
    ap.add_argument("--build-dir", default="build-bench", help="cmake build directory (default build-bench)")
    ap.add_argument("--no-build", action="store_true", help="use BUILD_DIR/bin as it is")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "out"))


def install_signal_handlers():
    def _interrupt(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
