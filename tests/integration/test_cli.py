"""Command line, refusals, exit codes and the doctor (docs/reference.md:
Reading the command line, Exit codes, Checks, The doctor).

Proves: --help and --version exit 0; unreadable command lines (--prot 9,
--port abc, --port 70000, --workers with no value, --doctor=1, a stray
argument) exit 2 with the usage and exactly one `m0: <reason>` line, binding
nothing; M0_PORT=abc is a 78 naming `M0_PORT=abc`; notes refuses --threads 2
and --workers 2 with 78 and one line; a failing `make`
(M0_HOSTCHECK_MAKE_FAILS=1) exits 78 promptly with its message, says it is
listening nowhere and answers no request; a port already in use exits 1 with a message;
--doctor prints one JSON object last on stdout (ok true, exit 0, binds
nothing even on a busy port) and for every refusal the doctor says ok false,
exit 78, and its failing check's `m0: <detail> (<fix>)` is exactly the line
the server prints; a usage error under --doctor is 2 with no JSON; --run-dir
on a 0755 directory is a 78 naming the run-dir.
"""
import json
import os
import socket
import subprocess
import tempfile
import time

from harness import BIN, Failures, free_port, run

F = Failures()


def m0_lines(err):
    return [l for l in err.splitlines() if l.startswith("m0:")]


def run_b(app, *args, env=None, timeout=10.0):
    """run() that turns a hang into a failed check instead of a crash."""
    try:
        return run(app, *args, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "", f"(did not exit within {timeout}s)"


def usage_errors():
    for args in (["--prot", "9"], ["--port", "abc"], ["--port", "70000"], ["--workers"], ["--doctor=1"],
                 ["stray"], ["--port", "0", "--doctor", "--prot", "9"]):
        rc, out, err = run_b("ramp", *args)
        lines = m0_lines(err)
        F.check(rc == 2, f"ramp {' '.join(args)} -> exit 2 (got {rc})")
        F.check("usage" in err.lower() and "--port" in err, f"ramp {' '.join(args)}: usage on stderr")
        F.check(len(lines) == 1, f"ramp {' '.join(args)}: exactly one m0: line ({lines})")
        F.check("{" not in out, f"ramp {' '.join(args)}: no JSON / nothing on stdout ({out[:80]!r})")
    rc, _, err = run_b("ramp", "--port", "70000")
    F.check("70000" in err, "the --port 70000 reason quotes the bad value")
    rc, _, err = run_b("ramp", "--prot", "9")
    F.check("--prot" in "".join(m0_lines(err)), "the unknown-flag reason names --prot")


def help_version():
    rc, out, err = run_b("ramp", "--help")
    F.check(rc == 0 and "usage" in (out + err).lower() and "--max-body-bytes" in out + err, f"--help exit 0 with usage ({rc})")
    rc, out, err = run_b("ramp", "--version")
    F.check(rc == 0 and "0." in out + err, f"--version exit 0 with a version ({rc} {out!r})")


def doctor_json(out):
    try:
        return json.loads(out.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {}


def refusal(app, args, env, what, must_name):
    """A 78 with one line, and the doctor agrees with it word for word."""
    rc, out, err = run_b(app, *args, "--port", "0", env=env)
    lines = m0_lines(err)
    F.check(rc == 78, f"{what} -> exit 78 (got {rc}: {err.strip()[:200]})")
    F.check(len(lines) == 1 and "listening" not in err, f"{what}: exactly one m0: line, nothing served ({lines})")
    F.check(bool(lines) and must_name in lines[0], f"{what}: the line names {must_name!r} ({lines})")
    rc_d, out_d, _ = run_b(app, *args, "--port", "0", "--doctor", env=env)
    doc = doctor_json(out_d)
    failing = [c for c in doc.get("checks", []) if not c.get("ok")]
    F.check(rc_d == 78 and doc.get("ok") is False and doc.get("exit") == 78,
            f"{what} --doctor: ok false, exit 78 (rc {rc_d}, ok {doc.get('ok')}, exit {doc.get('exit')})")
    if failing and lines:
        c = failing[0]
        said = f"m0: {c.get('detail')} ({c.get('fix')})"
        F.check(said == lines[0], f"{what}: doctor's first failing check {c.get('name')!r} == server's line\n"
                                  f"  doctor: {said}\n  server: {lines[0]}")
        F.check(c.get("exit") == 78 and c.get("fix"), f"{what}: failing check carries fix and exit 78")
    else:
        F.check(False, f"{what}: doctor lists a failing check ({failing})")
    return failing[0].get("name") if failing else None


def refusals():
    refusal("ramp", [], {"M0_PORT": "abc"}, "M0_PORT=abc", "M0_PORT=abc")
    refusal("notes", ["--threads", "2"], None, "notes --threads 2", "2")
    name = refusal("notes", ["--workers", "2"], None, "notes --workers 2", "2")
    F.check(name == "workers-vs-application", f"notes --workers 2 fails workers-vs-application first ({name})")
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o755)
        name = refusal("ramp", ["--run-dir", d], None, "--run-dir on a 0755 dir", d)
        F.check(name == "run-dir", f"a 0755 run dir fails the run-dir check ({name})")


def make_fails(attempts=5):
    """A failing make is a 78 with its message, promptly, every time, serving nothing."""
    for i in range(attempts):
        port = free_port()  # for the server to (not) take
        env = dict(os.environ, M0_HOSTCHECK_MAKE_FAILS="1")
        p = subprocess.Popen([os.path.join(BIN, "host_check"), "--port", str(port)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        t0, served = time.monotonic(), b""
        while p.poll() is None and time.monotonic() - t0 < 8:
            try:  # a TCP accept by the kernel is not serving; an HTTP answer is
                with socket.create_connection(("127.0.0.1", port), timeout=0.3) as c:
                    c.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
                    served = served or c.recv(100)
            except OSError:
                pass
            time.sleep(0.05)
        took = time.monotonic() - t0
        if p.poll() is None:
            p.kill()
        rc = p.wait(5)
        err = p.stderr.read().decode(errors="replace")
        lines = m0_lines(err)
        F.check(rc == 78, f"make fails (run {i + 1}): exit 78 (got {rc} after {took:.1f}s; stderr {lines})")
        F.check(took < 2, f"make fails (run {i + 1}): exits promptly, not after a drain bound ({took:.2f}s)")
        F.check(not served and "listening" not in err, f"make fails (run {i + 1}): serves nothing ({served[:40]!r})")
        F.check(any("make" in l and "M0_HOSTCHECK_MAKE_FAILS" in l for l in lines), f"make fails: its message ({lines})")
        F.check(not any("did not" in l for l in lines), f"make fails: no spurious drain/stop failure lines ({lines})")


def port_in_use():
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    rc, _, err = run_b("ramp", "--port", str(port))
    F.check(rc == 1, f"port {port} in use -> exit 1 (got {rc}: {err.strip()})")
    F.check(str(port) in err and "m0:" in err, f"the bind failure names the port ({err.strip()})")
    rc, out, _ = run_b("ramp", "--port", str(port), "--doctor")
    F.check(rc == 0 and doctor_json(out).get("ok") is True, f"--doctor binds nothing: ok on a busy port (rc {rc})")
    holder.close()


def doctor_ok():
    rc, out, err = run_b("ramp", "--doctor", "--port", "0", "--max-body-bytes", "123")
    doc = doctor_json(out)
    F.check(rc == 0 and doc.get("ok") is True and doc.get("exit") == 0, f"ramp --doctor: ok true, exit 0 (rc {rc})")
    F.check(all(c.get("ok") for c in doc.get("checks", [])) and len(doc.get("checks", [])) >= 9,
            "every doctor check passes, at least the 9 documented ones")
    names = [c.get("name") for c in doc.get("checks", [])]
    order = ["workers-count", "workers-vs-application", "threads-count", "workers-vs-threads",
             "threads-vs-application", "blocking-threads-count", "environment", "topology", "run-dir"]
    F.check([n for n in names if n in order] == order, f"checks in the documented order ({names})")
    F.check(doc.get("config", {}).get("max-body-bytes") == 123 and doc.get("sources", {}).get("max-body-bytes") == "flag",
            "doctor shows a flag's value and its source")
    F.check(doc.get("application", {}).get("name") == "ramp", "doctor names the application")


help_version()
usage_errors()
refusals()
doctor_ok()
port_in_use()
make_fails()
F.done()
