"""Request bodies on a real notes server (docs/behaviour.md, HTTP: chunked
bodies, and Limits and timeouts: the 4 MiB --max-body-bytes limit;
docs/apps.md, notes).

Proves: POST /notes with Content-Length stores the exact text (201 {"id":N},
GET /notes/{id} and GET /notes give it back); a chunked body of several chunks,
with chunk extensions and a trailer, is reassembled; bodies that arrive in
several TCP reads (the body after the head, a chunked body piece by piece) are
reassembled byte for byte; `Expect: 100-continue` gets `HTTP/1.1 100 Continue`
before the body is sent and the final 201 after it; a body at exactly
--max-body-bytes is accepted, one byte over is 413 and the connection closes,
both announced by Content-Length and grown by chunks; curl's own chunked
upload works.
"""
import http.client
import json
import subprocess
import time

from harness import Failures, Server, run
from rawhttp import Conn, request

F = Failures()
LIMIT = 1000


def chunked(pieces, ext="", trailer=False):
    """A chunked body; `ext` is a chunk-extension format, e.g. ";n={i}"."""
    out = b""
    for i, p in enumerate(pieces):
        e = ext.format(i=i)
        out += f"{len(p):x}{e}\r\n".encode() + p + b"\r\n"
    return out + b"0\r\n" + (b"X-Trailer: yes\r\n" if trailer else b"") + b"\r\n"


def llhttp_major():
    """The major version of the llhttp this build parses with, from the
    doctor's build object: 8 (Debian 12's node-llhttp) or 9 (Debian 13)."""
    rc, out, err = run("notes", "--doctor")
    doc = json.loads(out.strip().splitlines()[-1])
    return int(doc["build"]["llhttp"].split(".")[0])


def post_raw(k, body, headers):
    k.send(request("POST", "/notes", headers) + body)
    return k.try_response()


def note(port, nid):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", f"/notes/{nid}")
    r = c.getresponse()
    doc = json.loads(r.read()) if r.status == 200 else None
    c.close()
    return doc.get("text") if doc else None


def created_id(resp, what):
    st, _, _, body, line = resp
    ok = st == 201
    doc = json.loads(body) if ok else {}
    F.check(ok and isinstance(doc.get("id"), int), f"{what}: 201 {{\"id\":N}} ({line!r} {body!r})")
    return doc.get("id")


def content_length(port, texts):
    # Head and body in ONE send: this checks storage, not reassembly (split_bodies does that).
    with Conn(port) as k:
        for t in ["plain note", 'quotes " and \\ backslash', "line one\nline two", "ünïcödé ✓"]:
            b = t.encode()
            nid = created_id(post_raw(k, b, [("Content-Length", str(len(b)))]), f"POST {t!r} (keep-alive)")
            F.check(note(port, nid) == t, f"GET /notes/{nid} gives back {t!r} exactly")
            texts.append(t)


def chunked_bodies(port, texts):
    with Conn(port) as k:
        pieces = [b"chunk-one ", b"chunk-two ", b"x" * 300, b" end"]
        nid = created_id(post_raw(k, chunked(pieces), [("Transfer-Encoding", "chunked")]), "chunked, 4 chunks, one send")
        F.check(note(port, nid) == b"".join(pieces).decode(), "chunked body reassembled exactly")
        texts.append(b"".join(pieces).decode())
        data = b"5;flag\r\nwith \r\nb;n=1\r\nextensions \r\nd\r\nand a trailer\r\n0\r\nX-Trailer: yes\r\n\r\n"
        nid = created_id(post_raw(k, data, [("Transfer-Encoding", "chunked")]),
                         "chunked with one extension per chunk + trailer (same connection)")
        F.check(note(port, nid) == "with extensions and a trailer", "chunk extensions are not part of the body")
        texts.append("with extensions and a trailer")
    with Conn(port) as k:
        # RFC 9112 7.1.1 allows several extensions per chunk (5;n=0;flag).
        # llhttp 9 (Debian 13) reads them; Debian 12's llhttp 8.1.0 refuses a
        # name after a name=value pair, and m0 built on it must still answer
        # such a body cleanly: 400 and a close, never a hang or a crash
        # (README, HTTP).
        pieces = [b"several ", b"extensions"]
        resp = post_raw(k, chunked(pieces, ext=";n={i};flag"), [("Transfer-Encoding", "chunked")])
        major = llhttp_major()
        if major >= 9:
            nid = created_id(resp, f"multi-extension chunk (llhttp {major}): 201")
            F.check(note(port, nid) == "several extensions", "multi-extension chunk: the body without its extensions")
            texts.append("several extensions")
        else:
            st, _, _, _, line = resp
            F.check(st == 400, f"multi-extension chunk (llhttp {major} limit): 400, got {line!r}")
            F.check(k.closed_within(3), "multi-extension chunk: closed after the 400")


def split_bodies(port):
    """The head in one read and the body in later reads, as real clients send them."""
    with Conn(port) as k:
        body = b"0123456789abcdefghij"
        k.send(request("POST", "/notes", [("Content-Length", str(len(body)))]))
        time.sleep(0.1)
        k.send(body[:7]); time.sleep(0.1); k.send(body[7:])
        try:
            nid = created_id(k.read_response(), "Content-Length body after the head, in two sends")
            F.check(note(port, nid) == body.decode(), f"split Content-Length body intact (got {note(port, nid)!r})")
        except Exception as e:
            F.check(False, f"split Content-Length body: no answer ({e})")
    with Conn(port) as k:
        data = chunked([b"alpha-", b"bravo-", b"charlie"], ext=";n={i}")
        k.send(request("POST", "/notes", [("Transfer-Encoding", "chunked")]))
        for i in range(0, len(data), 5):  # 5-byte pieces cut through sizes, extensions and CRLFs
            k.send(data[i:i + 5]); time.sleep(0.01)
        try:
            nid = created_id(k.read_response(), "chunked body in 5-byte sends")
            F.check(note(port, nid) == "alpha-bravo-charlie", f"5-byte-split chunked body intact ({note(port, nid)!r})")
        except Exception as e:
            F.check(False, f"chunked body in 5-byte sends: no answer ({e})")


def expect_continue(port, texts):
    with Conn(port) as k:
        body = b"sent after 100 Continue"
        k.send(request("POST", "/notes", [("Content-Length", str(len(body))), ("Expect", "100-continue")]))
        try:
            st, _, _, _, line = k.read_response(timeout=3)
        except Exception as e:
            st, line = None, repr(e)
        F.check(st == 100 and line == "HTTP/1.1 100 Continue", f"Expect: 100-continue -> interim 100 first ({line!r})")
        k.send(body)
        try:
            nid = created_id(k.read_response(), "final answer after 100 Continue")
            F.check(note(port, nid) == body.decode(), f"body sent after 100 Continue stored intact ({note(port, nid)!r})")
            texts.append(body.decode())
        except Exception as e:
            F.check(False, f"final answer after 100 Continue never came ({e})")


def over_limit(port):
    with Conn(port) as k:
        body = b"L" * LIMIT
        nid = created_id(post_raw(k, body, [("Content-Length", str(LIMIT))]), f"body of exactly {LIMIT} bytes")
        F.check(note(port, nid) == body.decode(), "body at the limit stored whole")
    with Conn(port) as k:  # announced: refused from the head alone, before any body byte is sent
        k.send(request("POST", "/notes", [("Content-Length", str(LIMIT + 1))]))
        st, _, h, _, line = k.try_response()
        F.check(st == 413, f"Content-Length {LIMIT + 1} > --max-body-bytes {LIMIT} -> 413 ({line!r})")
        F.check(k.closed_within(3), "413 by Content-Length: server closes the connection")
    with Conn(port) as k:  # grown: each chunk is small, their sum passes the limit
        st = None
        try:  # one send, so this checks the limit alone, not reads split mid-body (split_bodies does that)
            k.send(request("POST", "/notes", [("Transfer-Encoding", "chunked")]) + b"".join(b"64\r\n" + b"c" * 100 + b"\r\n" for _ in range(12)) + b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            st, _, _, _, line = k.read_response()
        except Exception as e:
            line = repr(e)
        F.check(st == 413, f"chunked body growing past {LIMIT} bytes -> 413 ({line!r})")
        F.check(k.closed_within(3), "413 by chunked growth: server closes the connection")


def with_curl(port, texts):
    t = "from curl, chunked " * 20
    out = subprocess.run(["curl", "-sS", "--max-time", "10", "-H", "Transfer-Encoding: chunked",
                          "-H", "Content-Type: text/plain", "--data-binary", "@-", f"http://127.0.0.1:{port}/notes",
                          "-w", "\n%{http_code}"], input=t, capture_output=True, text=True, timeout=20)
    F.check(out.stdout.endswith("\n201") and '"id"' in out.stdout, f"curl chunked POST -> 201 ({out.stdout!r} {out.stderr!r})")
    texts.append(t)


with Server("notes", "--port", "0", "--max-body-bytes", str(LIMIT)) as s:
    texts = []
    content_length(s.port, texts)
    chunked_bodies(s.port, texts)
    expect_continue(s.port, texts)
    split_bodies(s.port)
    with_curl(s.port, texts)
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=5)
    c.request("GET", "/notes")
    r = c.getresponse()
    listed = [n.get("text") for n in json.loads(r.read()).get("notes", [])]
    F.check(r.status == 200, "GET /notes -> 200")
    missing = [t for t in texts if t not in listed]
    F.check(not missing, f"GET /notes lists every stored text (missing {missing})")
    over_limit(s.port)
    F.check(s.stop() == 0, "notes exits 0 on SIGTERM")

with Server("notes", "--port", "0") as s:  # the default 4 MiB limit takes a 2 MiB body
    big = b"B" * (2 << 20)
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
    try:
        c.request("POST", "/notes", body=big)
        r = c.getresponse()
        doc = json.loads(r.read())
        F.check(r.status == 201, f"2 MiB body under the default limit -> 201 ({r.status})")
        F.check(len(note(s.port, doc.get("id")) or "") == len(big), "2 MiB body stored whole")
    except OSError as e:
        F.check(False, f"2 MiB body under the default limit: {e!r}")
    c.close()
F.done()
