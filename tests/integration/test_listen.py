"""The listener and the run directory a host starts with (docs/reference.md,
Flags and variables `--host`, `--port`, `--run-dir`, Exit codes;
docs/behaviour.md, Run directory and shared page).

Proves:
- `--host ::1`, `--host [::1]` and `--host ::` serve over IPv6: the listening
  line names the address in brackets with the real port (port 0 asked) and
  GET /health over IPv6 answers 200; `--host localhost` serves on 127.0.0.1
  (skipped, said so, where this machine has no IPv6 loopback).
- A port another socket holds: exit 1 and one `m0:` line naming the address,
  the port and "Address already in use", nothing served; the same under
  `--workers 2` (the supervisor binds) and with `--threads 2`.
- An address this machine does not have (192.0.2.1, TEST-NET-1): exit 1, one
  line naming it and "Cannot assign requested address".
- An address that is not one (`--host 999.1.1.1`, `--host [::1`): exit 2
  naming it, nothing bound.
- Two hosts on one `--run-dir`: the second is refused (exit 1, one line
  naming DIR/page and that another host uses the directory) and removes
  nothing: the first host's page and sockets stay, it still serves and m0pub
  still publishes through that directory (before the fix the refused host's
  exit removed the first host's page and sockets, and a third host could then
  start on the same directory); once the first host exits its files are gone
  and the directory is kept, and a new host starts there. The same with the
  refused host under `--workers 2`.
- Without `--run-dir` the private directory is made in $XDG_RUNTIME_DIR when
  it is writable, else in $TMPDIR, and removed at exit; one that cannot be
  made (XDG_RUNTIME_DIR=/proc, which root may write to but where no directory
  can be made) is exit 1 naming /proc (skipped when not root).
About 10 s.
"""
import os
import shutil
import socket
import tempfile

from harness import Failures, Prefork, Server, m0pub, run, wait_for
from rawhttp import Conn, request

F = Failures()


def have_v6():
    try:
        s = socket.socket(socket.AF_INET6)
        s.bind(("::1", 0))
        s.close()
        return True
    except OSError:
        return False


def get(family, addr, port, path="/health"):
    """(status line, body) of one request on a fresh connection, or (None, why)."""
    try:
        s = socket.socket(family)
        s.settimeout(5)
        s.connect((addr, port))
        s.sendall(request("GET", path, headers=[("Connection", "close")]))
        data = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
        s.close()
    except OSError as e:
        return None, str(e)
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(errors="replace"), body


def m0_lines(err):
    return [l for l in err.splitlines() if l.startswith("m0:")]


def addresses():
    if not have_v6():
        print("SKIP: the IPv6 cases: this machine cannot bind ::1")
    else:
        for host, shown in (("::1", "[::1]"), ("[::1]", "[::1]"), ("::", "[::]")):
            with Server("host_check", "--host", host, "--port", "0") as s:
                err = s.stderr()
                F.check(f"listening on http://{shown}:{s.port} " in err and s.port > 0,
                        f"--host {host}: the listening line names {shown} and the real port ({m0_lines(err)[:1]})")
                line, body = get(socket.AF_INET6, "::1", s.port)
                F.check(line == "HTTP/1.1 200 OK" and body == b'{"status":"ok"}',
                        f"--host {host}: GET /health over IPv6 (::1) -> 200 ({line!r}, {body!r})")
                F.check(s.stop() == 0, f"--host {host}: exit 0 after SIGTERM")
    with Server("host_check", "--host", "localhost", "--port", "0") as s:
        line, body = get(socket.AF_INET, "127.0.0.1", s.port)
        F.check(line == "HTTP/1.1 200 OK", f"--host localhost: served on 127.0.0.1 ({line!r})")
        F.check(s.stop() == 0, "--host localhost: exit 0")


def refused_bind():
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    try:
        for args in ([], ["--workers", "2"], ["--threads", "2"]):
            rc, out, err = run("host_check", "--port", str(port), *args, timeout=20)
            lines = m0_lines(err)
            F.check(rc == 1, f"port {port} in use {args}: exit 1 (got {rc}): {err.strip()[-300:]}")
            F.check(len(lines) == 1 and f"cannot bind 127.0.0.1 port {port}: Address already in use" in lines[0],
                    f"port {port} in use {args}: one m0: line naming the address, the port and why: {lines}")
            F.check("listening on" not in err, f"port {port} in use {args}: nothing served")
    finally:
        holder.close()
    probe = socket.socket()
    try:
        probe.bind(("192.0.2.1", 0))
        print("SKIP: 192.0.2.1 is an address of this machine")
    except OSError:
        rc, out, err = run("host_check", "--host", "192.0.2.1", "--port", "0")
        lines = m0_lines(err)
        F.check(rc == 1 and len(lines) == 1 and "cannot bind 192.0.2.1 port 0: Cannot assign requested address" in lines[0],
                f"--host 192.0.2.1 (not this machine's): exit 1 naming it (rc {rc}, {lines})")
    finally:
        probe.close()
    for bad in ("999.1.1.1", "[::1"):
        rc, out, err = run("host_check", "--host", bad, "--port", "0")
        lines = m0_lines(err)
        F.check(rc == 2 and len(lines) == 1 and f"'{bad}'" in lines[0] and "listening on" not in err,
                f"--host {bad}: exit 2 naming it (rc {rc}, {lines})")


def ours(d):
    return sorted(n for n in os.listdir(d) if n in ("page", "app-page") or n.endswith(".sock"))


def shared_run_dir():
    d = tempfile.mkdtemp(prefix="m0-listen-")  # 0700
    try:
        with open(os.path.join(d, "notes.txt"), "w") as f:
            f.write("the user's own file\n")
        for second in ([], ["--workers", "2"]):
            with Server("host_check", "--port", "0", "--run-dir", d) as first:
                before = ours(d)
                F.check("page" in before and "loop.0.sock" in before, f"the first host's files are in {d}: {before}")
                rc, out, err = run("host_check", "--port", "0", "--run-dir", d, *second, timeout=20)
                lines = m0_lines(err)
                F.check(rc == 1, f"a second host {second} on the run directory in use: exit 1 (got {rc})")
                F.check(len(lines) == 1 and f"{d}/page" in lines[0] and "another host uses this run directory" in lines[0],
                        f"... one m0: line naming {d}/page and why: {lines}")
                F.check("listening on" not in err, f"... the second host served nothing")
                F.check(ours(d) == before, f"... and removed nothing of the first host's: {ours(d)} (was {before})")
                line, body = get(socket.AF_INET, "127.0.0.1", first.port)
                F.check(line == "HTTP/1.1 200 OK", f"... the first host still serves ({line!r})")
                rc, out, err = m0pub("--run-dir", d, "--event", "note", "still-here")
                F.check(rc == 0 and out.strip().isdigit(), f"... m0pub still publishes through {d} (rc {rc}, {err.strip()})")
                F.check(first.stop() == 0, "the first host: exit 0")
            F.check(ours(d) == [] and os.path.isdir(d) and os.path.exists(os.path.join(d, "notes.txt")),
                    f"the first host's exit removed its own files only, the directory is kept: {os.listdir(d)}")
        with Prefork("host_check", "--port", "0", "--run-dir", d, "--workers", "2") as again:
            line, body = get(socket.AF_INET, "127.0.0.1", again.port)
            F.check(line == "HTTP/1.1 200 OK", f"a new host starts on the directory once it is free ({line!r})")
            F.check(again.stop() == 0, "the new host: exit 0")
        F.check(ours(d) == [], f"... and leaves nothing of its own behind: {os.listdir(d)}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def page_dir(pid):
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            t = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if os.path.basename(t) == "page":
            return os.path.dirname(t)
    return None


def private_run_dir():
    xdg, tmp = tempfile.mkdtemp(prefix="m0-xdg-"), tempfile.mkdtemp(prefix="m0-tmp-")
    try:
        for env, base in (({"XDG_RUNTIME_DIR": xdg, "TMPDIR": tmp}, xdg),
                          ({"XDG_RUNTIME_DIR": os.path.join(xdg, "missing"), "TMPDIR": tmp}, tmp)):
            with Server("host_check", "--port", "0", env=env) as s:
                d = page_dir(s.proc.pid)
                F.check(d is not None and os.path.dirname(d) == base and os.path.basename(d).startswith("m0-"),
                        f"XDG_RUNTIME_DIR={env['XDG_RUNTIME_DIR']}: the private run directory is made in {base} ({d})")
                F.check(s.stop() == 0, "... exit 0")
            F.check(d is not None and not os.path.exists(d), f"... and removed at exit ({d})")
    finally:
        shutil.rmtree(xdg, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
    if os.getuid() != 0 or not os.access("/proc", os.W_OK | os.X_OK):
        print("SKIP: a private run directory that cannot be made: needs root (XDG_RUNTIME_DIR=/proc)")
        return
    rc, out, err = run("host_check", "--port", "0", env={"XDG_RUNTIME_DIR": "/proc"})
    lines = m0_lines(err)
    F.check(rc == 1 and len(lines) == 1 and "cannot make a private run directory in /proc" in lines[0],
            f"XDG_RUNTIME_DIR=/proc: exit 1 naming it (rc {rc}, {lines})")


addresses()
refused_bind()
shared_run_dir()
private_run_dir()
F.done()
