"""The run directory is private and no secret leaks (docs/reference.md, Flags and
variables --run-dir "a private 0700 dir", Checks `run-dir`, The doctor: "no
secret kept in the environment is ever printed"; docs/behaviour.md, Run
directory and shared page).

Part 1, the run directory (host_check --workers 2, so the ipc sockets
exist), twice: without --run-dir (the host makes its own; it is found from
the supervisor's /proc/<pid>/fd link to its `page` file) and with
--run-dir D (a fresh 0700 directory made here). Proves:
  - the directory is mode 0700 and owned by the server's uid (its Uid line in
    /proc/<pid>/status); the page file in it is 0600 and the ipc sockets
    (loop.0.sock, loop.1.sock, ...) are in it;
  - another user (uid/gid of `nobody`, no supplementary groups, through
    `setpriv --reuid --regid --clear-groups` or `runuser -u nobody`) running a
    tiny Python script cannot open the page file (read or read-write), cannot
    list the directory and cannot connect to any of the ipc sockets: each is
    EACCES (not ENOENT: the paths are right). The same script CAN connect to
    the HTTP port and get /health 200, so its failures are the permissions'.
    If no way to run as nobody works here, this part prints SKIP with the
    reason (the rest still runs).
  - defence in depth: with D made traversable by others (0711) while the
    server runs, the page file is still refused to nobody (it is 0600);
  - --run-dir on a directory open to others (0755) is refused: exit 78, one
    `m0:` line naming the directory's mode, nothing served.
Part 2, secrets: with M0_API_KEY=<secret> (an M0_ variable the host does not
know) and TEST_R_SERVICE_PASSWORD=<another secret> in the environment, the
values appear nowhere in `--doctor` output (stdout and stderr; single and
--workers 2), nor in what a served host prints (its log on stderr, its
`--trace -` records on stderr, its `--access-log` on stdout) in single and
--workers 2 after some requests and a SIGTERM; nor does a bearer token
sent in the requests' Authorization header. The trace and log are checked
to be non-empty, so the search is not vacuous.
About 6 s in all.
"""
import errno
import json
import os
import pwd
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

from harness import BIN, Failures, Server, run
from rawhttp import Conn, request

F = Failures()
SECRET_M0 = "sekrit123-m0-4f9a"
SECRET_ENV = "sekrit456-env-7c2e"
SECRET_HDR = "sekrit789-hdr-b31d"

PROBE = r"""
import errno, json, os, socket, sys
a = json.loads(sys.argv[1])
out = {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups()}
def tryit(name, f):
    try:
        f()
        out[name] = "ok"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))
def unix(p):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(p)
    finally:
        s.close()
def http():
    s = socket.create_connection(("127.0.0.1", a["port"]), timeout=3)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        d = s.recv(4096)
        if not d:
            break
        data += d
    s.close()
    if not data.startswith(b"HTTP/1.1 200"):
        raise OSError(errno.EPROTO, "no 200")
if a.get("page"):
    tryit("page:r", lambda: os.close(os.open(a["page"], os.O_RDONLY)))
    tryit("page:rw", lambda: os.close(os.open(a["page"], os.O_RDWR)))
if a.get("dir"):
    tryit("listdir", lambda: os.listdir(a["dir"]))
for p in a.get("socks", []):
    tryit("sock:" + os.path.basename(p), lambda p=p: unix(p))
if a.get("port"):
    tryit("http", http)
print(json.dumps(out))
"""


def nobody_ids():
    try:
        pw = pwd.getpwnam("nobody")
        return pw.pw_uid, pw.pw_gid
    except KeyError:
        return 65534, 65534


def find_runner():
    """A command prefix that runs a Python script as nobody, or (None, why)."""
    uid, gid = nobody_ids()
    pythons = [p for p in (sys.executable, "/usr/bin/python3", shutil.which("python3")) if p]
    prefixes = []
    if shutil.which("setpriv"):
        prefixes.append([shutil.which("setpriv"), f"--reuid={uid}", f"--regid={gid}", "--clear-groups"])
    if shutil.which("runuser"):
        prefixes.append([shutil.which("runuser"), "-u", "nobody", "--"])
    if not prefixes:
        return None, "neither setpriv nor runuser is installed"
    if os.getuid() != 0:
        return None, "not running as root: cannot switch to nobody"
    why = []
    for pre in prefixes:
        for py in dict.fromkeys(pythons):
            try:
                p = subprocess.run(pre + [py, "-c", "import os; print(os.getuid(), os.getgroups())"],
                                   capture_output=True, text=True, timeout=10, cwd="/")
            except (OSError, subprocess.TimeoutExpired) as e:
                why.append(f"{pre[0]} {py}: {e}")
                continue
            if p.returncode == 0 and p.stdout.split()[:1] == [str(uid)]:
                return pre + [py], None
            why.append(f"{os.path.basename(pre[0])} {py}: exit {p.returncode} {p.stderr.strip()[:100]}")
    return None, "; ".join(why)


RUNNER, RUNNER_WHY = find_runner()


def as_nobody(args):
    p = subprocess.run(RUNNER + ["-c", PROBE, json.dumps(args)], capture_output=True, text=True, timeout=20, cwd="/")
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": f"exit {p.returncode}: {p.stdout[-300:]} {p.stderr[-300:]}"}


def server_uid(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Uid:"):
                return int(line.split()[2])  # effective
    return None


def page_of(pid):
    """The run directory's page file, from the process's open descriptors."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if os.path.basename(target) == "page" and target.startswith("/"):
            return target
    return None


def check_rundir(label, s, given=None):
    pid = s.proc.pid
    page = page_of(pid)
    F.check(page is not None, f"[{label}] the server holds its run directory's page file open")
    if page is None:
        return
    d = os.path.dirname(page)
    if given:
        F.check(os.path.realpath(d) == os.path.realpath(given), f"[{label}] the page file is in --run-dir ({d})")
    st = os.stat(d)
    uid = server_uid(pid)
    F.check(stat.S_IMODE(st.st_mode) == 0o700, f"[{label}] run directory {d} is mode 0700 ({oct(stat.S_IMODE(st.st_mode))})")
    F.check(st.st_uid == uid, f"[{label}] run directory is owned by the server's uid {uid} (owner {st.st_uid})")
    pm = stat.S_IMODE(os.stat(page).st_mode)
    F.check(pm & 0o077 == 0, f"[{label}] the page file gives nothing to group or others ({oct(pm)})")
    socks = sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".sock"))
    names = [os.path.basename(p) for p in socks]
    F.check("loop.0.sock" in names and "loop.1.sock" in names, f"[{label}] the ipc sockets are in it: {names}")
    if RUNNER is None:
        print(f"SKIP: [{label}] the other-user part: {RUNNER_WHY}")
        return
    got = as_nobody({"page": page, "dir": d, "socks": socks, "port": s.port})
    print(f"[{label}] as nobody: {got}")
    F.check(got.get("uid") == nobody_ids()[0] and got.get("groups") == [], f"[{label}] the probe ran as nobody, no groups")
    F.check(got.get("http") == "ok", f"[{label}] control: nobody CAN reach the HTTP port ({got.get('http')})")
    F.check(got.get("page:r") == "EACCES" and got.get("page:rw") == "EACCES",
            f"[{label}] nobody cannot open the page file: EACCES (r {got.get('page:r')}, rw {got.get('page:rw')})")
    F.check(got.get("listdir") == "EACCES", f"[{label}] nobody cannot list the run directory ({got.get('listdir')})")
    bad = {k: v for k, v in got.items() if k.startswith("sock:") and v != "EACCES"}
    F.check(len([k for k in got if k.startswith("sock:")]) == len(socks) and not bad,
            f"[{label}] nobody cannot connect to any ipc socket: EACCES for all {len(socks)} ({bad})")
    if given:
        os.chmod(given, 0o711)  # others may now traverse: the page file alone must still refuse them
        try:
            got = as_nobody({"page": page})
        finally:
            os.chmod(given, 0o700)
        F.check(got.get("page:r") == "EACCES" and got.get("page:rw") == "EACCES",
                f"[{label}] with the directory made 0711, the page file still refuses nobody ({got})")


def part_rundir():
    with Server("host_check", "--port", "0", "--workers", "2") as s:
        check_rundir("private run dir", s)
        F.check(s.stop() == 0, "private run dir: exit 0")
    d = tempfile.mkdtemp(prefix="m0-r-perm-")  # 0700
    try:
        with Server("host_check", "--port", "0", "--workers", "2", "--run-dir", d) as s:
            check_rundir("--run-dir", s, given=d)
            F.check(s.stop() == 0, "--run-dir: exit 0")
        os.chmod(d, 0o755)
        rc, out, err = run("host_check", "--port", "0", "--run-dir", d, timeout=10)
        lines = [l for l in err.splitlines() if l.startswith("m0:")]
        F.check(rc == 78, f"--run-dir open to others (0755) is refused with 78 (got {rc}): {err.strip()[:300]}")
        F.check(len(lines) == 1 and "0755" in lines[0] and "listening" not in err,
                f"... with one m0: line naming the mode, nothing served: {lines}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def part_secrets():
    env = {"M0_API_KEY": SECRET_M0, "TEST_R_SERVICE_PASSWORD": SECRET_ENV}
    for args in ([], ["--workers", "2"]):
        rc, out, err = run("host_check", "--doctor", *args, env=env)
        F.check(rc == 0 and out.strip().endswith("}"), f"doctor {args} runs with the secrets set (exit {rc})")
        for sec in (SECRET_M0, SECRET_ENV):
            F.check(sec not in out and sec not in err, f"doctor {args}: {sec[:10]}... appears nowhere in its output")
    for args in ([], ["--workers", "2"]):
        with Server("host_check", "--port", "0", "--trace", "-", "--access-log", *args, env=env) as s:
            for path in ("/health", "/instance", "/pid", "/slow?ms=5", "/nope"):
                with Conn(s.port) as k:
                    k.send(request("GET", path, headers=[("Authorization", f"Bearer {SECRET_HDR}")]))
                    k.try_response()
            with Conn(s.port) as k:
                k.send(request("GET", "/events"))
                k.try_response(timeout=2)  # the stream's head and its beats for 2 s; every log line is in at the exit
            rc = s.stop()
            err, out = s.stderr(), s.stdout()
            trace_lines = [l for l in err.splitlines() if l.startswith("{")]
            F.check(rc == 0, f"served {args} with --trace - --access-log: exit 0 (got {rc})")
            F.check(len(trace_lines) >= 10 and "listening" in err, f"served {args}: the log and the trace were written "
                    f"({len(trace_lines)} trace lines)")
            F.check(out.count("\n") >= 5, f"served {args}: the access log was written ({out.count(chr(10))} lines)")
            for sec in (SECRET_M0, SECRET_ENV, SECRET_HDR):
                F.check(sec not in err and sec not in out,
                        f"served {args}: {sec[:10]}... appears nowhere in the log, trace or access log")


t0 = time.monotonic()
if RUNNER is None:
    print(f"SKIP (other-user checks only): cannot run a script as nobody: {RUNNER_WHY}")
part_rundir()
part_secrets()
print(f"took {time.monotonic() - t0:.1f}s")
F.done()
