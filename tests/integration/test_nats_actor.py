"""An actor placed "nats" (issue 39, item 5; docs/topology.md, An actor
served through NATS): the host sends each batch of its route's requests as
a NATS request to the actor's subject, and instances anywhere subscribe in
its queue group.

Real binaries: nats-server on a port of its own choosing (-p -1, read from
its log), host_check with a topology file placing `echo` as nats, and
echo_actor (m0_actor_run) given nats://HOST:PORT/SUBJECT. Proves:

  - the doctor prints the placement and the subject (m0.actor.echo by
    default); a subject with a wildcard, or a URL that is no NATS server's,
    exits 78 with one line; a URL's password is printed as ***;
  - m0_actor_exit in an instance (echo's x-exit) ends its m0_actor_run
    with 1: it leaves the queue group;
  - GET /actor/echo is 200 over many requests, answered by both instances
    (the queue group spreads them), the host knowing neither;
  - one instance killed under load: the rest go on 200 from the other, and
    what failed is at most what was with it (504s, no more);
  - a hostile instance (a raw NATS client): a reply that does not decode
    answers that request 502 (counted bad_reply), a reply to a made-up
    token is dropped (counted unknown_id);
  - m0_call and m0_send (host_check's /msg/call, /msg/send) and m0_ask
    (the thread actor relay asks echo) reach an instance through NATS; the
    instance's m0_publish is refused (false);
  - no instance subscribed: 503 at once (NATS's no responders), not 504,
    and a call is refused EHOSTDOWN;
  - nats-server killed under load: the host keeps serving its other
    routes, the actor's route answers 502/503/504, never hangs, and a
    monitor of the actor hears each lane go down (with the reason) and come
    back up; nats-server started again on the same port: host and instance
    reconnect, 200 again;
  - under --workers 2 the same: every worker's loops send, the answers come
    back to the worker that asked.
"""
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

import harness
from harness import BIN, Failures, Prefork, Server, log_file, metric, run_parts, wait_for, write_json

F = Failures()
TMP = tempfile.mkdtemp(prefix="m0-nats-actor-")
PROGRAMS = []
SUBJECT = "m0.actor.echo"


class Nats:
    """nats-server, its port its own choice (-p -1) the first time, the same after."""

    def __init__(self):
        self.port, self.proc, self.err = None, None, log_file()

    def log(self):
        return harness.read_log(self.err)

    def start(self):
        self.err.seek(0)
        self.err.truncate()
        self.proc = subprocess.Popen(["nats-server", "-a", "127.0.0.1", "-p", str(self.port or -1)],
                                     stdout=subprocess.DEVNULL, stderr=self.err)
        PROGRAMS.append(self.proc)
        rx = re.compile(r"Listening for client connections on 127\.0\.0\.1:(\d+)")
        if not wait_for(lambda: rx.search(self.log()) and "Server is ready" in self.log(), 15):
            raise AssertionError(f"nats-server did not start:\n{self.log()}")
        self.port = int(rx.search(self.log()).group(1))
        return self

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def url(self):
        return f"nats://127.0.0.1:{self.port}"


def instance(nats, i, subject=SUBJECT):
    log = open(os.path.join(TMP, f"echo{i}.{len(PROGRAMS)}.log"), "w+")
    p = subprocess.Popen([os.path.join(BIN, "echo_actor"), f"{nats.url()}/{subject}", str(i)], stdout=log,
                         stderr=subprocess.STDOUT)
    p.log = log.name
    PROGRAMS.append(p)
    return p


def said(p, text):
    with open(p.log) as f:
        return text in f.read()


def serving(p):
    return wait_for(lambda: said(p, "serving " + SUBJECT), 15)


def get(port, path="/actor/echo", timeout=10, headers=None):
    """(status, body) of one GET; status 0 when the connection failed."""
    try:
        rq = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers or {})
        with urllib.request.urlopen(rq, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError:
        return 0, b""


def who(body):
    try:
        return json.loads(body)["instance"]
    except (ValueError, KeyError, TypeError):
        return None


def topo(nats, **extra):
    return write_json({"app_actors": [dict({"name": "echo", "placement": "nats", "url": nats.url()}, **extra)]}, TMP)


def outcome(port, name):
    return metric(port, f'm0_actor_requests_total{{actor="echo",outcome="{name}"}}') or 0


class Load(threading.Thread):
    """n clients asking GET /actor/echo until stopped: every (status, instance)."""

    def __init__(self, port, n=4):
        super().__init__(daemon=True)
        self.port, self.n, self.seen, self.stopping = port, n, [], threading.Event()

    def client(self):
        while not self.stopping.is_set():
            st, body = get(self.port)
            self.seen.append((st, who(body) if st == 200 else None))

    def run(self):
        ts = [threading.Thread(target=self.client, daemon=True) for _ in range(self.n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    def stop(self):
        self.stopping.set()
        self.join(30)
        return list(self.seen)


def doctor(nats):
    t = topo(nats)
    r = subprocess.run([os.path.join(BIN, "host_check"), "--doctor", "--topology", t], capture_output=True,
                       text=True, timeout=30)
    j = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
    e = next((x for x in j.get("topology", {}).get("app_actors", []) if x["name"] == "echo"), {})
    F.check(e.get("placement") == "nats" and e.get("subject") == SUBJECT and e.get("url") == nats.url()
            and e.get("lanes") == 2, f"the doctor prints echo's placement, subject, URL and lanes ({e})")
    for bad, what in (({"subject": "m0.*"}, "a subject with a wildcard"),
                      ({"url": "ipc:///tmp/x"}, "a URL that is no NATS server's")):
        t = topo(nats, **bad)
        r = subprocess.run([os.path.join(BIN, "host_check"), "--port", "0", "--topology", t], capture_output=True,
                           text=True, timeout=30)
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        F.check(r.returncode == 78 and len(lines) == 1 and "app_actors[0]" in r.stderr,
                f"{what}: exit 78, one line ({r.returncode}, {r.stderr!r})")
    r = subprocess.run([os.path.join(BIN, "echo_actor"), f"nats://u:s3cret@127.0.0.1:{nats.port}/m0.>"],
                       capture_output=True, text=True, timeout=30)
    F.check(r.returncode == 78, f"echo_actor with a wildcard subject: exit 78 ({r.returncode}, {r.stderr!r})")
    said_m0 = "".join(x for x in r.stderr.splitlines(True) if x.startswith("m0: "))  # (echo_actor's banner is its own)
    F.check("u:***@" in said_m0 and "s3cret" not in said_m0, f"... m0 prints its URL's password as *** ({r.stderr!r})")
    t = topo(nats, url=f"nats://u:s3cret@127.0.0.1:{nats.port}")
    r = subprocess.run([os.path.join(BIN, "host_check"), "--doctor", "--topology", t], capture_output=True,
                       text=True, timeout=30)
    F.check("s3cret" not in r.stdout + r.stderr and f"nats://u:***@127.0.0.1:{nats.port}" in r.stdout,
            "the doctor prints a NATS URL's password as ***")


def raw_nats(port, subject):
    """A NATS client of its own (the protocol's text lines): connected, subscribed to subject in its queue group."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    f = s.makefile("rb")
    f.readline()  # INFO
    s.sendall(b'CONNECT {"verbose":false,"headers":true,"no_responders":true,"protocol":1}\r\n'
              + f"SUB {subject} {subject} 1\r\nPING\r\n".encode())
    while f.readline().strip() != b"PONG":
        pass
    return s, f


def next_msg(s, f):
    """The next MSG line's fields, answering the server's PINGs on the way."""
    while True:
        line = f.readline()
        if not line:
            return []
        if line.strip() == b"PING":
            s.sendall(b"PONG\r\n")
        elif line.startswith(b"MSG ") or line.startswith(b"HMSG "):
            return line.split()


def hostile(nats, port):
    """One instance that answers each request's reply subject with garbage, then a made-up token."""
    s, f = raw_nats(nats.port, SUBJECT)
    res = {}

    def ask():
        res["status"], res["body"] = get(port)
    t = threading.Thread(target=ask, daemon=True)
    bad0, unk0 = outcome(port, "bad_reply"), metric(port, 'm0_actor_replies_dropped_total{actor="echo",reason="unknown_id"}') or 0
    t.start()
    line = next_msg(s, f)  # MSG subject sid reply len (no headers: a REQUEST)
    F.check(line[:1] == [b"MSG"] and len(line) == 5, f"the request reaches the hostile instance ({line})")
    reply, n = line[3].decode(), int(line[4])
    f.read(n + 2)
    garbage = b"\x01\x00\x00\x00\x05\x00\x00\x00not a batch"
    s.sendall(f"PUB {reply} {len(garbage)}\r\n".encode() + garbage + b"\r\n")
    t.join(15)
    F.check(res.get("status") == 502, f"a reply that does not decode: 502 ({res.get('status')})")
    F.check(wait_for(lambda: outcome(port, "bad_reply") > bad0, 5), "... counted bad_reply")
    made_up = reply.rsplit(".", 1)[0] + ".999999999"
    s.sendall(f"PUB {made_up} {len(garbage)}\r\n".encode() + garbage + b"\r\n")
    F.check(wait_for(lambda: (metric(port, 'm0_actor_replies_dropped_total{actor="echo",reason="unknown_id"}') or 0)
                     > unk0, 5), "a reply to a made-up token: dropped, counted unknown_id")
    s.close()


def calls(port):
    """m0_call, m0_send and m0_ask of the nats-placed echo, from host_check's own threads."""
    st, body = get(port, "/msg/call?to=echo&type=1&data=hi")
    j = harness.as_json(body) or {}
    F.check(st == 200 and j.get("type") == 2 and (j.get("answer") or {}).get("data") == "hi",
            f"m0_call of echo through NATS: its ECHOED answer ({st} {body!r})")
    st, body = get(port, "/msg/send?to=echo&n=3")
    F.check(st == 200 and (harness.as_json(body) or {}).get("sent") == 3, f"m0_send of echo through NATS ({st} {body!r})")
    st, body = get(port, headers={"x-publish": "news"})
    F.check(st == 200 and (harness.as_json(body) or {}).get("published") is False,
            f"an instance served through NATS: its m0_publish is refused, false ({st} {body!r})")
    st, body = get(port, "/actor/relay")
    j = harness.as_json(body) or {}
    F.check(st == 200 and (j.get("echo") or {}).get("path") == "/actor/relay",
            f"m0_ask of echo from a thread actor, through NATS ({st} {body!r})")


def single():
    nats = Nats().start()
    doctor(nats)
    with Server("host_check", "--port", "0", "--threads", "2", "--metrics-path", "/metrics", "--topology",
                topo(nats)) as h:
        F.check(wait_for(lambda: "NATS " + nats.url() + " is up" in h.stderr(), 15), "the host connects to NATS")
        st, _ = get(h.port)
        F.check(st == 503, f"no instance subscribed: 503 at once, NATS's no responders ({st})")
        x = instance(nats, 9)  # m0_actor_exit (echo's x-exit) ends it: out of the queue group, not a silent member
        F.check(serving(x), "an instance to exit subscribes")
        st, _ = get(h.port, headers={"x-exit": "bye"})
        try:
            rc = x.wait(15)
        except subprocess.TimeoutExpired:
            rc = None
        print(f"single: the request that asked for m0_actor_exit: {st}", flush=True)
        F.check(rc == 1 and said(x, "exits: bye"), f"m0_actor_exit in a nats instance: m0_actor_run returns 1 ({rc})")
        a, b = instance(nats, 0), instance(nats, 1)
        F.check(serving(a) and serving(b), "both instances subscribe")
        calls(h.port)
        load = Load(h.port)
        load.start()
        F.check(wait_for(lambda: len(load.seen) >= 200 and {i for st, i in load.seen if st == 200} >= {0, 1}, 30),
                "GET /actor/echo answered 200 by both instances (the queue group spreads them)")
        n0 = len(load.seen)
        a.kill()  # instance 0 under load
        a.wait(10)
        after = len(load.seen)
        F.check(wait_for(lambda: sum(1 for st, i in load.seen[after:] if st == 200 and i == 1) >= 100, 30),
                "after instance 0 was killed, instance 1 answers on")
        seen = load.stop()
        bad = [st for st, _ in seen[n0:] if st != 200]
        print(f"single: {len(seen)} answers, {n0} before the kill; after it, not 200: {bad}", flush=True)
        F.check(len(bad) <= load.n and set(bad) <= {504}, f"what failed was at most instance 0's in flight ({bad})")
        F.check(all(st == 200 for st, _ in seen[:n0]), "every answer before the kill was 200")
        b.kill()  # the hostile one alone in the queue group next
        b.wait(10)
        hostile(nats, h.port)
        # (the server may still hand a request to the hostile one's closing subscription: 504)
        F.check(wait_for(lambda: get(h.port)[0] == 503, 10), "the last instance gone: 503 at once again")
        st, body = get(h.port, "/msg/call?to=echo&type=1&data=hi")
        F.check(st == 502 and b"EHOSTDOWN" in body, f"no instance: a call is refused EHOSTDOWN ({st} {body!r})")
        c = instance(nats, 2)  # the one that lives through the server's restart
        F.check(serving(c), "a third instance subscribes")
        load = Load(h.port)
        load.start()
        F.check(wait_for(lambda: sum(1 for st, _ in load.seen if st == 200) >= 50, 20), "instance 2 answers")
        box = {}  # a monitor of echo (m0_monitor into host_check's mailbox w): its lanes down, then up
        mon = threading.Thread(target=lambda: box.update(r=get(h.port, "/msg/box?name=w&n=4&ms=20000&watch=echo",
                                                               timeout=30)), daemon=True)
        mon.start()
        F.check(wait_for(lambda: "host_check: w watches echo" in h.stderr(), 15), "the monitor of echo is set")
        nats.kill()  # under load
        F.check(wait_for(lambda: "is down" in h.stderr(), 15), "the host sees NATS down")
        st, _ = get(h.port, "/health")
        F.check(st == 200, f"NATS down: the host serves its other routes ({st})")
        down = len(load.seen)
        F.check(wait_for(lambda: len(load.seen) >= down + 20, 20), "NATS down: the actor's route answers on")
        nats.start()
        F.check(wait_for(lambda: open(c.log).read().count("is up") >= 2 and c.poll() is None, 15) and
                wait_for(lambda: any(st == 200 for st, _ in load.seen[down + 20:]), 20),
                "NATS back on the same port: host and instance reconnect, 200 again")
        seen = load.stop()
        mon.join(30)
        notes = [g.get("data") or {} for g in (harness.as_json(box["r"][1]) or {}).get("got", [])] \
            if box.get("r", (0,))[0] == 200 else []
        F.check([d.get("event") for d in notes] == ["down", "down", "up", "up"]
                and all(d.get("reason") == "its NATS connection is down" for d in notes[:2]),
                f"echo's monitor hears each lane go down with the reason, then up ({box.get('r')})")
        odd = sorted({st for st, _ in seen} - {200, 502, 503, 504})
        print(f"single: NATS restarted under load: {len(seen)} answers, "
              f"{sorted({st for st, _ in seen[down:]})} after it went", flush=True)
        F.check(not odd, f"NATS killed under load: every answer 200, 502, 503 or 504, none hung ({odd})")
        rc = h.stop()
        F.check(rc == 0, f"the host exits 0 ({rc}: {h.stderr()[-3000:]})")
    nats.kill()


def prefork():
    nats = Nats().start()
    a, b = instance(nats, 0), instance(nats, 1)
    F.check(serving(a) and serving(b), "prefork: both instances subscribe")
    with Prefork("host_check", "--port", "0", "--workers", "2", "--topology", topo(nats)) as h:
        F.check(wait_for(lambda: h.stderr().count("NATS " + nats.url() + " is up") >= 2, 20),
                "prefork: each worker connects to NATS")
        load = Load(h.port)
        load.start()
        F.check(wait_for(lambda: sum(1 for st, _ in load.seen if st == 200) >= 300, 30), "prefork: 300 answers")
        seen = load.stop()
        print(f"prefork: {len(seen)} answers, by instance {sorted({i for _, i in seen})}", flush=True)
        F.check(all(st == 200 for st, _ in seen), f"prefork: every answer 200 ({sorted({st for st, _ in seen})})")
        F.check({i for _, i in seen} >= {0, 1}, "prefork: both instances answered")
        F.check(h.stop() == 0, "prefork: the host exits 0")
    nats.kill()


run_parts(F, [("single", single), ("prefork", prefork)], PROGRAMS, TMP)
