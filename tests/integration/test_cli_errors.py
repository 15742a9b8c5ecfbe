"""What an operator sees when something is wrong, through the real binaries
(docs/reference.md: Reading the command line, Exit codes, Checks, The doctor;
docs/topology.md, Errors; docs/behaviour.md on mailboxes).

Proves:
- Command lines that cannot be read (a host that is a name, a boolean that is
  not one, an empty or overflowing number, `--`, `-x`, a value too long, a
  flag without its value) exit 2 with the usage and ONE `m0:` line that names
  the flag and the value, print nothing on stdout and bind nothing.
- Variables that cannot be read exit 78 with ONE line naming the variable and
  its value and the fix; the first of the table is the one named; a flag for
  the same option does not rescue it; the doctor says the same.
- Each check refuses what it should, with the doctor's first failing check
  being that check and its `m0: <detail> (<fix>)` exactly the server's line:
  recycling or a watchdog without workers, a watchdog under a second, a
  --trace that is no destination or one nng cannot dial (it was served
  untraced in silence), a run dir that is a file, another user's, or too long
  for its sockets (a 95-byte one serves, a 96-byte one is refused: it was
  doctored ok and then exited 1 naming an inproc URL), more loops or pool
  threads than a topology holds (doctored ok with no actors).
- A topology file with each kind of error (a list, empty, a syntax error, a
  duplicate or unknown key, every key of the wrong type or out of range, a
  prefork over inproc, every way `actors` can be wrong; missing, a directory,
  over 1 MiB; named by --topology or M0_TOPOLOGY) is refused: the doctor and
  the server both 78, the one line names the file, the line where the
  problem is, a column on it, and the key or actor.
- A binary told it is a worker (M0__WORKER) without a supervisor, or without
  what the supervisor passes, exits 1 with one line saying which, and never
  listens.
- Malformed envelopes from a peer on a loop's and the coordinator's ipc
  mailbox (short, empty, bad magic, wrong version, kind 0 or unknown, flags
  set, a length that is not the bytes, a length over the limit, a forged
  RESULT carrying a pointer, a forged JOB) are each refused and counted with
  one line; a well-formed but unexpected kind and a malformed frame are named;
  the host never crashes, keeps answering (its pool too) and drains to 0.
"""
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import time
import urllib.request

from harness import Failures, SPPeer, Server, run, wait_for

F = Failures()
TMP = tempfile.mkdtemp(prefix="m0-cli-errors-")
os.chmod(TMP, 0o711)


def m0_lines(err):
    return [l for l in err.splitlines() if l.startswith("m0:")]


def run_b(app, *args, env=None, timeout=10.0):
    try:
        return run(app, *args, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "", f"(did not exit within {timeout}s)"


def doctor(app, *args, env=None):
    rc, out, err = run_b(app, "--doctor", *args, env=env)
    try:
        return rc, json.loads(out.strip().splitlines()[-1]), err
    except (IndexError, ValueError):
        return rc, None, err


def usage_errors():
    long_value = "x" * 2000
    rows = [
        (["--host", "example.com"], "m0: --host cannot take 'example.com' (an IPv4 or IPv6 address, localhost, or [::1]; "
                                    "no DNS)"),
        (["--access-log=maybe"], "m0: --access-log cannot take 'maybe' (1, true, yes, on or 0, false, no, off)"),
        (["--port="], "m0: --port wants a whole number from 0 to 65535, not ''"),
        (["--port", "-1"], "m0: --port wants a whole number from 0 to 65535, not '-1'"),
        (["--port", "99999999999999999999"], "m0: --port wants a whole number from 0 to 65535, not "
                                             "'99999999999999999999'"),
        (["--max-uri-bytes", "10"], "m0: --max-uri-bytes wants a whole number from 256 to 1048576, not '10'"),
        (["--"], "m0: unexpected argument '--'"),
        (["-x"], "m0: unexpected argument '-x'"),
        (["--trace"], "m0: --trace needs a value"),
        (["--metrics-path", long_value], "m0: --metrics-path takes at most 1023 bytes, not 2000"),
    ]
    for args, want in rows:
        label = " ".join(a if len(a) < 40 else a[:10] + "..." for a in args)
        rc, out, err = run_b("host_check", "--port", "0", *args)
        lines = m0_lines(err)
        F.check(rc == 2, f"usage {label}: exit 2 (got {rc})")
        F.check(lines == [want], f"usage {label}: one line, naming the flag and the value\n  got  {lines}\n  want {want!r}")
        F.check("usage: " in err and "--max-body-bytes" in err, f"usage {label}: the usage is printed")
        F.check(out == "" and "listening" not in err, f"usage {label}: nothing on stdout, nothing served ({out[:80]!r})")
        rc, out, err = run_b("host_check", "--doctor", *args)
        F.check(rc == 2 and "{" not in out and m0_lines(err) == [want], f"usage {label} --doctor: 2, no JSON ({rc})")


def variables():
    # The fix says what the variable accepts, as a flag's refusal does (it
    # said "set it to a valid value (see --help)").
    boolean = "a boolean (1, true, yes, on or 0, false, no, off)"
    for var, value, accepts in [("M0_ACCESS_LOG", "maybe", boolean), ("M0_PORT", "", "a whole number from 0 to 65535"),
                                ("M0_HOST", "example.com", "an IPv4 or IPv6 address, localhost, or [::1]; no DNS"),
                                ("M0_MAX_BODY_BYTES", "-1", "a whole number from 0 to 1073741824"),
                                ("M0_KEEPALIVE_TIMEOUT_MS", "1h", "a whole number from 1 to 3600000"),
                                ("M0_ACCEPT_SHARE", "2", boolean),
                                ("M0_THREADS", "2x", "a whole number from 1 to 4096")]:
        want = f"m0: cannot read the variable {var}={value} (set {var} to {accepts}, or unset it)"
        rc, out, err = run_b("host_check", "--port", "0", env={var: value})
        F.check(rc == 78 and m0_lines(err) == [want],
                f"{var}={value!r}: exit 78, one line naming it and its range\n  got  {rc} {m0_lines(err)}\n  want {want!r}")
        rc_d, d, _ = doctor("host_check", env={var: value})
        env = [c for c in (d or {}).get("checks", []) if c["name"] == "environment"]
        F.check(rc_d == 78 and env and not env[0]["ok"] and f"m0: {env[0]['detail']} ({env[0]['fix']})" == want,
                f"{var}={value!r}: the doctor's environment check says the same ({rc_d}, {env})")
    # the first of the table is named; a flag does not rescue it
    rc, _, err = run_b("host_check", "--port", "0", "--threads", "2", env={"M0_PORT": "abc", "M0_THREADS": "x"})
    F.check(rc == 78 and m0_lines(err) == ["m0: cannot read the variable M0_PORT=abc (set M0_PORT to a whole number "
                                           "from 0 to 65535, or unset it)"],
            f"two bad variables: M0_PORT (first in the table) is named ({rc}, {m0_lines(err)})")


def refusal(label, args, check, words, env=None, app="host_check", serve=True):
    """The doctor's first failing check is `check`; the server (when `serve`)
    exits 78 with exactly that check's line; the line says each of words."""
    rc_d, d, err_d = doctor(app, *args, env=env)
    failing = [c for c in (d or {}).get("checks", []) if not c.get("ok")]
    F.check(rc_d == 78 and d and d.get("exit") == 78 and failing and failing[0]["name"] == check,
            f"{label}: the doctor exits 78 with {check} failing first ({rc_d}, {[c['name'] for c in failing]} {err_d})")
    if not failing:
        return
    line = f"m0: {failing[0]['detail']} ({failing[0]['fix']})"
    for w in words:
        F.check(w in line, f"{label}: the refusal says {w!r} ({line})")
    if serve:
        rc, out, err = run_b(app, "--port", "0", *args, env=env)
        F.check(rc == 78 and m0_lines(err) == [line] and "listening" not in err,
                f"{label}: the server exits 78 with the doctor's line\n  got  {rc} {m0_lines(err)}\n  want {line!r}")


def checks():
    refusal("--max-requests without workers", ["--max-requests", "5"], "supervision",
            ["--max-requests asks the supervisor to replace workers", "workers is 1", "--workers 2"])
    refusal("--max-requests-jitter without workers", ["--max-requests-jitter", "3"], "supervision",
            ["--max-requests-jitter"])
    refusal("--worker-timeout-ms without workers", ["--worker-timeout-ms", "5000"], "supervision", ["--worker-timeout-ms"])
    refusal("--worker-timeout-ms 500", ["--workers", "2", "--worker-timeout-ms", "500"], "supervision",
            ["--worker-timeout-ms 500 is shorter than a loop's quietest turn", "1000 or more"])
    refusal("--trace to a file name", ["--trace", "/tmp/trace.log"], "trace",
            ["trace destination /tmp/trace.log is neither - nor an nng URL", "--trace -"])
    for url, why in [("tcp://127.0.0.1", "tcp://HOST:PORT"), ("tcp://127.0.0.1:7x", "a port from 1 to 65535"),
                     ("ipc://", "an ipc URL needs a path"), ("tcp://[::1", "nng cannot parse it")]:
        refusal(f"--trace {url}", ["--trace", url], "trace", [f"trace destination {url} cannot be dialed", why])
        refusal(f"M0_TRACE={url}", [], "trace", [f"trace destination {url} cannot be dialed"], env={"M0_TRACE": url})
    # counts beyond what a topology holds: the doctor only (the server would
    # start that many threads if the check let them through)
    for flag, check in [("--threads", "threads-count"), ("--workers", "workers-count"),
                        ("--blocking-threads", "blocking-threads-count")]:
        refusal(f"{flag} 4097", [flag, "4097"], check, [f"{flag[2:]} is 4097", "4096"], serve=False)
        rc, d, _ = doctor("host_check", flag, "4097")
        if d:
            F.check(len(d["topology"]["actors"]) == 0,
                    f"{flag} 4097: the doctor lists no actors it could not give ids ({len(d['topology']['actors'])})")
    # run dirs
    f = os.path.join(TMP, "a-file")
    open(f, "w").close()
    refusal("--run-dir a file", ["--run-dir", f], "run-dir", [f"run directory {f} is not a directory"])
    if os.geteuid() == 0:
        other = os.path.join(TMP, "other")
        os.mkdir(other, 0o700)
        os.chown(other, 65534, 65534)
        refusal("--run-dir another user's", ["--run-dir", other], "run-dir", ["belongs to uid 65534, not this user"])
    else:
        print("SKIP: --run-dir of another user (needs root to make one)")
    base = os.path.join(TMP, "d")
    d95, d96 = base + "9" * (95 - len(base)), base + "9" * (96 - len(base))
    for d in (d95, d96):
        os.mkdir(d, 0o700)
    refusal("--run-dir of 96 bytes", ["--run-dir", d96], "run-dir",
            [f"run directory {d96} is too long for its sockets: the path of its loop.0.sock would be 108 bytes, "
             "a socket's has room for 107", "at most 95 bytes"])
    with Server("host_check", "--port", "0", "--run-dir", d95) as s:  # the limit is the kernel's, not a guess
        ok = urllib.request.urlopen(s.url("/health"), timeout=3).status
        F.check(ok == 200 and os.path.exists(os.path.join(d95, "loop.0.sock")),
                f"--run-dir of 95 bytes: serves, its loop.0.sock (107 bytes) is there ({ok})")
        F.check(s.stop() == 0, "--run-dir of 95 bytes: drains to 0")
    refusal("prefork --run-dir of 95 bytes", ["--run-dir", d95, "--workers", "2"], "run-dir",
            [f"{d95} is too long for its sockets: the path of its coordinator.sock would be 112 bytes"])
    # an app with handle: the application check says so
    rc, d, _ = doctor("handle_echo")
    app = [c for c in (d or {}).get("checks", []) if c["name"] == "application"]
    F.check(rc == 0 and app and app[0]["ok"] and app[0]["detail"] == "handle_echo answers with a handler",
            f"handle_echo --doctor: the application check says it answers with a handler ({rc}, {app})")


A = lambda n, u: f'{{"name": "{n}", "url": "{u}"}}'  # noqa: E731

TOPOLOGIES = [
    # label, text, the line the error is on (None: any), words the reason says
    ("a list", '[\n  {"mode": "threads"}\n]\n', 1, ["not a JSON object"]),
    ("empty", "", 1, ["expected"]),
    ("a syntax error", '{\n  "mode": "threads",\n  "loops": 2,\n}\n', 4, []),
    ("a duplicate key", '{\n  "loops": 2,\n  "mode": "threads",\n  "loops": 3\n}\n', 4, ["duplicate", "loops"]),
    ("an unknown key", '{\n  "mode": "threads",\n  "workers": 2\n}\n', 3, ['unknown key "workers"']),
    ("mode a number", '{\n  "mode": 1\n}\n', 2, ['mode must be "single", "threads" or "prefork"']),
    ("mode unknown", '{\n  "loops": 1,\n  "mode": "cluster"\n}\n', 3, ["mode must be"]),
    ("loops a string", '{\n  "mode": "threads",\n  "loops": "2"\n}\n', 3, ["loops must be a whole number from 1 to 4096"]),
    ("loops 0", '{\n  "mode": "threads",\n  "loops": 0\n}\n', 3, ["loops must be"]),
    ("loops 4097", '{\n  "mode": "threads",\n  "loops": 4097\n}\n', 3, ["from 1 to 4096"]),
    ("single with 2 loops", '{\n  "mode": "single",\n  "loops": 2\n}\n', 3, ['mode "single" has one loop']),
    ("transport unknown", '{\n  "transport": "udp"\n}\n', 2, ['transport must be "inproc", "ipc" or "tcp"']),
    ("prefork over inproc", '{\n  "mode": "prefork",\n  "loops": 2,\n  "transport": "inproc"\n}\n', 4,
     ["mode prefork crosses processes", "use ipc or tcp"]),
    ("handler_threads -1", '{\n  "handler_threads": -1\n}\n', 2, ["handler_threads must be a whole number from 0 to 4096"]),
    ("handler_threads 4097", '{\n\n  "handler_threads": 4097\n}\n', 3, ["handler_threads must be"]),
    ("handler_threads a string", '{\n  "handler_threads": "1"\n}\n', 2, ["handler_threads must be"]),
    ("connections_per_loop 0", '{\n  "connections_per_loop": 0\n}\n', 2, ["connections_per_loop must be from 1 to 1000000"]),
    ("connections_per_loop 1e6+1", '{\n  "connections_per_loop": 1000001\n}\n', 2, ["connections_per_loop must be"]),
    ("accept_sharing a string", '{\n  "accept_sharing": "no"\n}\n', 2, ["accept_sharing must be true or false"]),
    ("actors an object", '{\n  "actors": {"coordinator": "inproc://a"}\n}\n', 2,
     ['actors must be a list of {"name", "url"}']),
    ("an actor without url", '{\n  "actors": [\n    ' + A("coordinator", "inproc://a") + ',\n    {"name": "producer"},\n    '
     + A("loop.0", "inproc://c") + '\n  ]\n}\n', 4, ['actors[1] has no "name" or no "url"', '"producer"']),
    ("actors out of order", '{\n  "mode": "threads",\n  "loops": 2,\n  "actors": [\n    ' + A("coordinator", "inproc://a")
     + ',\n    ' + A("producer", "inproc://b") + ',\n    ' + A("loop.1", "inproc://c") + ',\n    '
     + A("loop.0", "inproc://d") + '\n  ]\n}\n', 7, ['actors[2] is "loop.1" where the topology has "loop.0"']),
    ("a url of another transport", '{\n  "transport": "tcp",\n  "actors": [\n    ' + A("coordinator", "tcp://127.0.0.1:1")
     + ',\n    ' + A("producer", "inproc://b") + ',\n    ' + A("loop.0", "tcp://127.0.0.1:3") + '\n  ]\n}\n', 5,
     ['actors[1] (producer) has the URL "inproc://b", not a tcp:// one']),
    ("two actors at one address", '{\n  "actors": [\n    ' + A("coordinator", "inproc://a") + ',\n    '
     + A("producer", "inproc://b") + ',\n    ' + A("loop.0", "inproc://b") + '\n  ]\n}\n', 5,
     ["actors[2] (loop.0) has the URL of actors[1] (producer)"]),
    ("a url too long", '{\n  "actors": [\n    ' + A("coordinator", "inproc://" + "u" * 300) + ',\n    '
     + A("producer", "inproc://b") + ',\n    ' + A("loop.0", "inproc://c") + '\n  ]\n}\n', 3,
     ["actors[0] (coordinator) has a URL of 309 bytes, longer than 255"]),
    ("an actor missing", '{\n  "mode": "threads",\n  "loops": 2,\n  "actors": [\n    ' + A("coordinator", "inproc://a")
     + ',\n    ' + A("producer", "inproc://b") + ',\n    ' + A("loop.0", "inproc://c") + '\n  ]\n}\n', 4,
     ['actors lists 3 of the 4 actors the file declares: "loop.1" is missing']),
    ("an actor too many", '{\n  "actors": [\n    ' + A("coordinator", "inproc://a") + ',\n    '
     + A("producer", "inproc://b") + ',\n    ' + A("loop.0", "inproc://c") + ',\n    ' + A("loop.1", "inproc://d")
     + '\n  ]\n}\n', 6, ["actors lists 4 actors, the file declares 3: actors[3] (loop.1) is one too many"]),
]


def topology_refused(label, path, line, words, env=None, args=None):
    args = ["--topology", path] if args is None else args
    rc, d, err = doctor("host_check", *args, env=env)
    failing = [c for c in (d or {}).get("checks", []) if not c.get("ok")]
    first = failing[0] if failing else {}
    F.check(rc == 78 and d and d.get("exit") == 78 and first.get("name") == "topology",
            f"topology {label}: the doctor exits 78 with the topology check failing ({rc}, {failing}, {err})")
    detail = first.get("detail", "")
    if line is None:
        F.check(detail.startswith(f"topology file {path} "), f"topology {label}: the detail names the file ({detail!r})")
    else:
        m = re.match(r"topology file (\S+) line (\d+) column (\d+): ", detail)
        F.check(m and m.group(1) == path and int(m.group(2)) == line,
                f"topology {label}: the detail names the file and line {line} ({detail!r})")
        if m:
            rows = open(path).read().split("\n")
            col = int(m.group(3))
            F.check(0 <= col <= len(rows[line - 1]) + 1, f"topology {label}: column {col} lies on line {line}")
    for w in words:
        F.check(w in detail, f"topology {label}: the reason says {w!r} ({detail[:300]!r})")
    rc, out, err = run_b("host_check", "--port", "0", *args, env=env)
    want = f"m0: {detail} ({first.get('fix')})"
    F.check(rc == 78 and m0_lines(err) == [want] and "listening" not in err,
            f"topology {label}: the server exits 78 with the doctor's one line\n  got  {rc} {m0_lines(err)[:2]}\n"
            f"  want {want[:300]!r}")


def topologies():
    for i, (label, text, line, words) in enumerate(TOPOLOGIES):
        path = os.path.join(TMP, f"topo{i}.json")
        with open(path, "w") as fh:
            fh.write(text)
        topology_refused(label, path, line, words)
    missing = os.path.join(TMP, "none.json")
    topology_refused("missing", missing, None, [f"{missing} cannot be read: No such file or directory"])
    topology_refused("a directory", TMP, None, [f"{TMP} is not a regular file (a directory)"])
    big = os.path.join(TMP, "big.json")
    with open(big, "w") as fh:  # valid JSON, padded past 1 MiB: was cut and read as a syntax error at the cut
        fh.write('{"mode": "threads",' + " " * (1 << 20) + '"loops": 2}\n')
    topology_refused("over 1 MiB", big, None, ["is larger than 1048576 bytes: not a topology file"])
    bad = os.path.join(TMP, "topo4.json")  # the unknown key, named by the variable instead
    topology_refused("by M0_TOPOLOGY", bad, 3, ['unknown key "workers"'], env={"M0_TOPOLOGY": bad}, args=[])


def worker_without_supervisor():
    rd = os.path.join(TMP, "wrd")
    os.mkdir(rd, 0o700)
    me = str(os.getpid())  # the binary's parent: what a real supervisor would be
    gone = "m0: worker {}: the supervisor is gone; exiting"
    without = "m0: a worker was started without what the supervisor passes (M0__FDS, M0__RUN_DIR)"
    rows = [
        ("no M0__SUPERVISOR", {"M0__WORKER": "0"}, gone.format(0)),
        ("a supervisor that is not its parent", {"M0__WORKER": "0", "M0__SUPERVISOR": "1"}, gone.format(0)),
        ("no M0__FDS", {"M0__WORKER": "0", "M0__SUPERVISOR": me, "M0__RUN_DIR": rd}, without),
        ("M0__FDS not numbers", {"M0__WORKER": "0", "M0__SUPERVISOR": me, "M0__RUN_DIR": rd, "M0__FDS": "x,y"}, without),
        ("too few descriptors", {"M0__WORKER": "0", "M0__SUPERVISOR": me, "M0__RUN_DIR": rd, "M0__FDS": "3,4,5,6"},
         without),
        ("no M0__RUN_DIR", {"M0__WORKER": "0", "M0__SUPERVISOR": me, "M0__FDS": "3,4,5,6,7"}, without),
        ("an index past the workers", {"M0__WORKER": "1", "M0__SUPERVISOR": me, "M0__RUN_DIR": rd,
                                       "M0__FDS": "3,4,5,6,7"}, without),
        ("a negative index", {"M0__WORKER": "-1", "M0__SUPERVISOR": me, "M0__RUN_DIR": rd, "M0__FDS": "3,4,5,6,7"},
         without),
        ("more descriptors, an index past", {"M0__WORKER": "2", "M0__SUPERVISOR": me, "M0__RUN_DIR": rd,
                                             "M0__FDS": "3,4,5,6,7,8,9,10"}, without),
    ]
    for i, (label, env, want) in enumerate(rows):
        rc, out, err = run_b("host_check", "--port", "0", *(["--access-log"] if i % 2 else []), env=env)
        F.check(rc == 1 and m0_lines(err) == [want] and "listening" not in err,
                f"a worker with {label}: exit 1, one line saying so\n  got  {rc} {m0_lines(err)}\n  want {want!r}")


MAGIC = 0x3145306D
K = {"ready": 1, "go": 3, "frame": 8, "job": 10, "result": 11}
POOL0, LOOP0, EXTERNAL = 3 << 24, 2 << 24, 5 << 24


def header(kind=K["ready"], flags=0, frm=EXTERNAL, to=LOOP0, length=0, magic=MAGIC):
    return struct.pack("<IHHIIQQQI", magic, kind, flags, frm, to, 1, 0, 0, length)



def malformed(to):
    """(what, bytes): every one must be refused as malformed by the mailbox."""
    bogus = struct.pack("<I", 1) + struct.pack("<QI", 0xDEADBEEF, 0)  # one answer for the connection at 0xdeadbeef
    return [
        ("short", b"m0E1"),
        ("empty", b""),
        ("bad magic", header(magic=0x12345678)),
        ("wrong version (m0E0)", header(magic=0x3045306D)),
        ("kind 0", header(kind=0)),
        ("an unknown kind", header(kind=99)),
        ("flags set", header(flags=1)),
        ("a length that is not the bytes", header(length=5) + b"abc"),
        ("a length over the limit", header(length=(16 << 20) + 1)),
        ("a forged RESULT", header(kind=K["result"], frm=POOL0, to=to, length=len(bogus)) + bogus),
        ("a forged JOB", header(kind=K["job"], frm=to, to=POOL0, length=len(bogus)) + bogus),
    ]


def refused(s, actor):
    """The sum of m0_refused_total{actor=...} over its reasons, from /metrics."""
    with urllib.request.urlopen(s.url("/metrics"), timeout=3) as r:
        text = r.read().decode()
    return sum(int(l.rsplit(" ", 1)[1]) for l in text.splitlines()
               if l.startswith(f'm0_refused_total{{actor="{actor}",'))


def peers():
    rd = tempfile.mkdtemp(prefix="m0-peer-")
    os.chmod(rd, 0o700)
    topo = os.path.join(TMP, "ipc.json")
    with open(topo, "w") as fh:  # ipc: the coordinator's mailbox is in the run dir too
        json.dump({"mode": "threads", "loops": 1, "handler_threads": 1, "transport": "ipc"}, fh)
    try:
        with Server("host_check", "--port", "0", "--run-dir", rd, "--topology", topo, "--metrics-path", "/metrics") as s:
            for actor, sock in [("loop.0", "loop.0.sock"), ("coordinator", "coordinator.sock")]:
                p = SPPeer(("ipc", os.path.join(rd, sock)), timeout=5)
                F.check(p.ok, f"{actor}: its mailbox answers the SP handshake as pull0")
                to = LOOP0 if actor == "loop.0" else 1 << 24
                msgs = malformed(to)
                for _, body in msgs:
                    p.send(body)
                if actor == "loop.0":
                    msgs += [("ready", header(kind=K["ready"]))]  # well-formed, but not a loop's to receive
                    msgs += [("short frame", header(kind=K["frame"], frm=EXTERNAL, length=3) + b"xyz")]
                    for _, body in msgs[-2:]:
                        p.send(body)
                wait_for(lambda: refused(s, actor) >= len(msgs), 5)
                F.check(refused(s, actor) == len(msgs),
                        f"{actor}: each of the {len(msgs)} malformed or forged messages is refused and counted in "
                        f"m0_refused_total ({refused(s, actor)}: {[w for w, _ in msgs]})")
                line = f"m0: {actor} refused a "
                F.check(s.stderr().count(line) == 1,
                        f"{actor}: named once for its peer, not once per message ({s.stderr().count(line)} lines)")
                F.check(s.proc.poll() is None, f"{actor}: the host is still running after them (rc {s.proc.poll()})")
                p.close()
            st = []
            for path in ("/health", "/instance"):  # on the loop, and through the pool
                with urllib.request.urlopen(s.url(path), timeout=3) as r:
                    st.append((r.status, json.loads(r.read()).get("thread") if path == "/instance" else None))
            F.check(st == [(200, None), (200, 0)], f"the host still answers, on the loop and in its pool ({st})")
            rc = s.stop()
            F.check(rc == 0 and "m0: drained, exit 0" in s.stderr(), f"and drains to exit 0 ({rc}):\n{s.stderr()[-400:]}")
    finally:
        shutil.rmtree(rd, ignore_errors=True)


if __name__ == "__main__":
    try:
        usage_errors()
        variables()
        checks()
        topologies()
        worker_without_supervisor()
        peers()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    F.done()
