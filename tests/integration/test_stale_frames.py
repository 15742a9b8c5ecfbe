"""Stale frames: a loop never sends its streams a frame numbered at or below
the shared counter's value when that loop began serving (docs/behaviour.md,
Streams and the bus: one shared id counter, and a loop drops a frame numbered
at or below the counter's value when it began serving; actors/loop.c
`first_id`, read from the page's counter at GO, and `loop_on_frame`).

Under `--workers 2` the only loop that begins serving after the counter has
moved is a respawned worker's, so that is where the rule is tested, with
`m0pub --id N` (a frame with a chosen id, taken from nowhere) and with the
producer quiet (`M0_HOSTCHECK_PERIOD_MS=100000`: one beat at GO, then none
for 100 s), so the counter moves only when this test publishes and its value
at every step is known exactly (m0pub prints the ids; `/metrics`
`m0_events_published_total` is the counter itself).

Proves:
- `m0pub --id` refuses what is not a decimal id 1..2^64-1 (`0`, `-3`, `2x`,
  `+5`, 2^64, no value) and `--id` without DATA (standard input), each with
  exit 2 and the usage; none of them puts a frame on a stream or takes an id
  from the counter.
- Five frames published normally take ids LOW..C from the counter (printed,
  contiguous; the counter reads C on /metrics).
- Worker 0 is SIGKILLed and respawned; nothing is published meanwhile, so
  when the replacement begins serving the counter is still exactly C (read
  again on /metrics after a stream is held on it): its first id is C.
- With a stream held on the survivor (worker 1, began serving at id <= 1)
  and one on the respawned worker 0: `m0pub --id C` (exactly the respawned
  loop's first id) and `m0pub --id LOW` (below it) exit 1, print nothing
  and name the respawned loop (m0pub reads each loop's first id on the
  page); the survivor refuses both, because from outside the host an id
  must come after the last its loop wrote (C; runtime/admit.h), and counts
  them (`m0_refused_total{actor="loop.1",reason="frame_id"}` = 2: so they did
  go out on the bus), the respawned loop counts them as `stale` (2);
  neither stream receives them.
- A frame published normally afterwards takes C+1 (the chosen ids took
  nothing from the counter) and reaches BOTH streams, and it is the first
  and only numbered frame on the respawned worker's stream (so that stream
  works: the missing stale frames are not a dead stream); no frame on it has
  an id <= C.
- SIGTERM drains both streams and exits 0.
"""
import http.client
import os
import shutil
import signal
import time

from harness import Failures, Prefork, m0pub, private_dir, wait_for
from test_streams import children, drain_check, hold_each, map_workers, reap_seen

F = Failures()
QUIET = {"M0_HOSTCHECK_PERIOD_MS": "100000"}


def metric(port, sample):
    """One sample's value from /metrics, 0 when absent, None if unreadable."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=3)
        c.request("GET", "/metrics", headers={"Connection": "close"})
        text = c.getresponse().read().decode()
        c.close()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(sample + " "):
            return int(line.rsplit(" ", 1)[1])
    return 0


def counter(port):
    """The shared event-id counter (`m0_events_published_total` on /metrics), None if unreadable."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=3.0)
    try:
        c.request("GET", "/metrics", headers={"Connection": "close"})
        r = c.getresponse()
        st, text = r.status, r.read().decode(errors="replace")
    except OSError:
        return None
    finally:
        c.close()
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        if st == 200 and k == "m0_events_published_total" and v.strip().isdigit():
            return int(v)
    return None


def numbered(st):
    return [f for f in list(st.frames) if not f.comment and f.id is not None]


def refusals(d, label):
    for bad in (["--id", "0", "x"], ["--id", "-3", "x"], ["--id", "2x", "x"], ["--id", "+5", "x"],
                ["--id", "18446744073709551616", "x"], ["--id"], ["--id", "5"]):
        rc, out, err = m0pub("--run-dir", d, *bad)
        F.check(rc == 2 and "usage" in err and not out.strip(),
                f"{label}: m0pub {' '.join(bad)} -> exit 2 with the usage, no id printed ({rc}, {out!r}, {err!r})")


def stale_after_respawn():
    label = "stale frames"
    d = private_dir()
    try:
        with Prefork("host_check", "--workers", "2", "--port", "0", "--run-dir", d, "--metrics-path", "/metrics",
                     env=QUIET) as s:
            sup = s.proc.pid
            kids = wait_for(lambda: children(sup) if len(children(sup)) == 2 else None, 5)
            F.check(kids, f"{label}: two workers under the supervisor ({children(sup)})")
            if not kids:
                return
            # The producer's one beat (at GO) has taken id 1: from here on only this test moves the counter.
            c0 = wait_for(lambda: (counter(s.port) or 0) >= 1 and counter(s.port), 3)
            F.check(c0 == 1, f"{label}: the quiet producer's one beat took id 1 ({c0})")
            refusals(d, label)
            F.check(counter(s.port) == c0, f"{label}: the refused --id calls took no id ({c0} -> {counter(s.port)})")
            rc, out, err = m0pub("--run-dir", d, "--event", "warm", stdin=b"w1\nw2\nw3\nw4\nw5\n")
            warm = [int(x) for x in out.split() if x.isdigit()]
            F.check(rc == 0 and len(warm) == 5 and warm == list(range(warm[0], warm[0] + 5)) and warm[0] >= 2,
                    f"{label}: five frames take five contiguous ids from the counter, above the producer's first "
                    f"beat ({rc}, {warm}, {err!r})")
            if len(warm) != 5:
                return
            low, c = warm[0], warm[-1]
            F.check(counter(s.port) == c, f"{label}: the counter reads {c} after them ({counter(s.port)})")
            pid_of = map_workers(F, s.port, kids, label)
            if not pid_of:
                return
            victim = pid_of["0"]
            os.kill(victim, signal.SIGKILL)

            def replaced():
                k = children(sup)
                return k if len(k) == 2 and victim not in k and "respawned" in s.stderr() else None

            F.check(wait_for(replaced, 5), f"{label}: worker 0 (pid {victim}) is respawned within 5 s "
                                           f"(children {children(sup)}):\n{s.stderr()}")
            held = hold_each(F, s.port, label)
            if not held:
                return
            new, old = held["0"], held["1"]
            first = counter(s.port)
            F.check(first == c, f"{label}: nothing was published across the respawn: the replacement began serving "
                                f"at counter {c} ({first})")
            # The stale frames: exactly the respawned loop's first id, and one below it.
            for chosen, data in ((c, "at-first-id"), (low, "below-first-id")):
                rc, out, err = m0pub("--run-dir", d, "--event", "stale", "--id", str(chosen), data)
                F.check(rc == 1 and not out.strip() and "loop 0 began serving" in err,
                        f"{label}: m0pub --id {chosen} {data} -> exit 1, nothing printed, the respawned loop named "
                        f"({rc}, {out!r}, {err!r})")
            # From outside the host, an id must come after the last the loop wrote: the survivor wrote up
            # to C already, so it refuses both (counted), where it used to write them behind C.
            sample = 'm0_refused_total{actor="loop.1",reason="frame_id"}'
            F.check(wait_for(lambda: metric(s.port, sample) == 2, 3),
                    f"{label}: the survivor refuses both chosen-id frames, counted as frame_id on loop.1, so they "
                    f"went out on the bus ({metric(s.port, sample)})")
            stale = 'm0_refused_total{actor="loop.0",reason="stale"}'
            F.check(wait_for(lambda: metric(s.port, stale) == 2, 3),
                    f"{label}: the respawned loop refuses both as stale, counted ({metric(s.port, stale)})")
            stale_old = [(f.id, f.data) for f in numbered(old) if f.event == "stale"]
            F.check(not stale_old, f"{label}: and its stream never sees them: ids do not go back ({stale_old})")
            rc, out, err = m0pub("--run-dir", d, "--event", "fresh", "after")
            F.check(rc == 0 and out.strip() == str(c + 1),
                    f"{label}: a normal frame afterwards takes {c + 1}: the chosen ids took nothing from the counter "
                    f"({rc}, {out!r}, {err!r})")
            fresh = lambda st: [f for f in numbered(st) if f.event == "fresh"]
            F.check(wait_for(lambda: fresh(new) and fresh(old), 3),
                    f"{label}: the normal frame reaches both streams (respawned {numbered(new)}, survivor "
                    f"{[f.id for f in numbered(old)]})")
            # The stale frames were published (m0pub exited) before the fresh one: arrived, it is behind them.
            got = numbered(new)
            F.check(not [f for f in got if f.event == "stale"],
                    f"{label}: the respawned worker's stream receives no frame numbered at or below its first id "
                    f"{c} ({[(f.id, f.event, f.data) for f in got]})")
            F.check([(f.id, f.event, f.data) for f in got] == [(c + 1, "fresh", "after")],
                    f"{label}: its only numbered frame is the normal one, id {c + 1} "
                    f"({[(f.id, f.event, f.data) for f in got]})")
            F.check(all(f.id > c for f in got), f"{label}: no id <= {c} on it ({[f.id for f in got]})")
            drain_check(F, s, [old, new], f"{label} drain")
    finally:
        shutil.rmtree(d, ignore_errors=True)


try:
    stale_after_respawn()
finally:
    reap_seen()
F.done()
