"""The configuration probe: every row runs twice, as `--doctor ARGS` and as
`ARGS`, and both must agree.
- served rows: the doctor exits 0 with ok true; the server serves, on the
  flag's port and not the variable's where both are given;
- refused rows: both exit 78; the server's one stderr line is exactly
  `m0: <detail> (<fix>)` of the doctor's first failing check, and it is the
  check the row names;
- usage rows: both exit 2 with the usage and one `m0:` line, and no JSON.
Also: doctoring the port a live server holds exits 0."""
import json
import os
import tempfile
import time
import urllib.request

from harness import Failures, Server, free_port, run

f = Failures()


def answers(port):
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200
    except OSError:
        return False


def doctor(args, env):
    rc, out, err = run("host_check", "--doctor", *args, env=env)
    lines = out.strip().splitlines()
    try:
        return rc, json.loads(lines[-1]) if lines else None, err
    except json.JSONDecodeError:
        return rc, None, err


tmp = tempfile.mkdtemp()
open_dir = os.path.join(tmp, "open")
os.mkdir(open_dir)
os.chmod(open_dir, 0o755)
topo_threads = os.path.join(tmp, "threads.json")
with open(topo_threads, "w") as fh:
    json.dump({"mode": "threads", "loops": 2, "handler_threads": 1, "transport": "inproc"}, fh)
topo_bad = os.path.join(tmp, "bad.json")
with open(topo_bad, "w") as fh:
    fh.write('{"mode": "single",\n "loops": 3}\n')

P1, P2 = free_port(), free_port()
SERVED = [  # (name, args, env, port that must answer, port that must not)
    ("env only", [], {"M0_PORT": str(P1)}, P1, None),
    ("flag outranks variable", ["--port", str(P2)], {"M0_PORT": str(P1)}, P2, P1),
    ("--workers=2", ["--workers=2", "--port", str(P1)], {}, P1, None),
    ("threads and a pool", ["--threads", "2", "--blocking-threads", "2", "--port", str(P1)], {}, P1, None),
    ("variables for threads", ["--port", str(P1)], {"M0_THREADS": "2", "M0_BLOCKING_THREADS": "1"}, P1, None),
    ("a topology file", ["--topology", topo_threads, "--port", str(P1)], {}, P1, None),
    ("topology by variable, flag outranks it", ["--threads", "1", "--port", str(P1)], {"M0_TOPOLOGY": topo_threads},
     P1, None),
]
REFUSED = [  # (name, args, env, the check that must fail)
    ("both modes by flags", ["--workers", "2", "--threads", "2"], {}, "workers-vs-threads"),
    ("both modes split flag/variable", ["--threads", "2"], {"M0_WORKERS": "2"}, "workers-vs-threads"),
    ("--threads 0", ["--threads", "0"], {}, "threads-count"),
    ("--workers 0", ["--workers", "0"], {}, "workers-count"),
    ("workers beyond the app", ["--workers", "2"], {"M0_HOSTCHECK_MAX_WORKERS": "1"}, "workers-vs-application"),
    ("loops beyond the app", ["--threads", "2"], {"M0_HOSTCHECK_MAX_WORKERS": "1"}, "threads-vs-application"),
    ("two failures name the first", ["--workers", "0", "--threads", "0"], {}, "workers-count"),
    ("negative pool", ["--blocking-threads", "-1"], {}, "blocking-threads-count"),
    ("unreadable M0_PORT", [], {"M0_PORT": "abc"}, "environment"),
    ("unreadable M0_WORKERS", [], {"M0_WORKERS": "2x"}, "environment"),
    ("overflowing variable", [], {"M0_THREADS": "99999999999999999999"}, "environment"),
    ("missing topology file", ["--topology", os.path.join(tmp, "none.json")], {}, "topology"),
    ("contradicting topology file", ["--topology", topo_bad], {}, "topology"),
    ("run dir readable by others", ["--run-dir", open_dir], {}, "run-dir"),
]
USAGE = [["--prot", "9"], ["--port", "abc"], ["--port", "70000"], ["--workers"], ["--doctor=1"], ["stray"]]

for name, args, env, good, bad in SERVED:
    rc, doc, err = doctor(args, env)
    f.check(rc == 0 and doc and doc["ok"] is True, f"served/{name}: doctor exit 0, ok (rc={rc}) {err[-200:]}")
    with Server("host_check", *args, env=env) as s:
        f.check(answers(good), f"served/{name}: serves on {good}")
        if bad:
            f.check(not answers(bad), f"served/{name}: nothing on the variable's port {bad}")
        f.check(s.stop() == 0, f"served/{name}: drains to exit 0")

for name, args, env, check in REFUSED:
    rc, doc, _ = doctor(args, env)
    failing = [c for c in (doc or {}).get("checks", []) if not c["ok"]]
    f.check(rc == 78 and doc and doc["ok"] is False and doc["exit"] == 78, f"refused/{name}: doctor exit 78")
    f.check(failing and failing[0]["name"] == check, f"refused/{name}: first failing check is {check} "
            f"(got {[c['name'] for c in failing]})")
    f.check(all("fix" in c and c.get("exit") == 78 for c in failing), f"refused/{name}: failures carry fix and exit")
    rc2, out2, err2 = run("host_check", "--port", "0", *args, env=env)
    want = f"m0: {failing[0]['detail']} ({failing[0]['fix']})" if failing else None
    f.check(rc2 == 78, f"refused/{name}: server exit 78 (rc={rc2})")
    f.check(want is not None and err2.strip() == want, f"refused/{name}: server says exactly the doctor's line\n"
            f"  server: {err2.strip()!r}\n  doctor: {want!r}")
    f.check("listening" not in err2, f"refused/{name}: nothing served")

for args in USAGE:
    for doc_first in (True, False):
        a = (["--doctor"] if doc_first else []) + args
        if args == ["--doctor=1"] and doc_first:
            a = args
        rc, out, err = run("host_check", *a)
        lines = [ln for ln in err.splitlines() if ln.startswith("m0:")]
        f.check(rc == 2, f"usage/{a}: exit 2 (rc={rc})")
        f.check("usage:" in err and len(lines) == 1, f"usage/{a}: usage and one m0: line")
        f.check("{" not in out, f"usage/{a}: no JSON")

# The doctor binds nothing: doctoring a port a live server holds is fine.
with Server("host_check", "--port", "0") as s:
    rc, doc, _ = doctor(["--port", str(s.port)], {})
    f.check(rc == 0 and doc["ok"], "doctor of a held port exits 0")
    f.check(answers(s.port), "the live server still serves")

f.done()
