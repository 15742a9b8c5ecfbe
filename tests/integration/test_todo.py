"""apps/todo, the reference application of m0's request and response API
(docs/apps.md, todo), end to end with curl, http.client and raw sockets.
One check (or a few) per API point it uses:

1. path and query: repeated `tag` keys through m0_query_init/next, `q`
   form-decoded (%20 and '+' are spaces), a bad escape 400; the path
   parameter of /todos/{id}; a dot-segment refused 400 by the host before
   before_request ran (curl --path-as-is: no X-Request-Id, the counter not
   moved);
2. cookies: POST /login sets `sid` with exactly Path=/; Max-Age=3600;
   HttpOnly; SameSite=Lax, /me reads it from curl's jar (401 without),
   /logout deletes it (Max-Age=0, gone from the jar, the session gone);
3. the peer: /whoami's peer and port are the socket's, its client the peer
   even with X-Forwarded-For, and the forwarded address under
   --trusted-proxies 127.0.0.1;
4. owned bodies: every JSON answer is whole (its Content-Length, valid
   JSON), HEAD gets the length and no body;
5. files under M0_TODO_STATIC: whole, ETag/If-None-Match 304,
   Last-Modified/If-Modified-Since 304, Range 206 + Content-Range, 416,
   HEAD, a missing, a hidden and an encoded-slash name 404, 404 without the
   variable;
6. the chunked writer: the export is chunked NDJSON matching the list, a
   keep-alive connection goes on after it, a client that leaves mid-export
   is counted by on_gone;
7. headers: X-Request-Id and Cache-Control: no-store on loop and pool
   routes (--blocking-threads 2), /static/ replaces Cache-Control, /health
   removes X-Request-Id and reports the host's -1 for a Content-Length;
8. M0_NEEDS_POOL: without a pool exit 78 with one line naming the route and
   the fix; with one, /report answers;
9. one store for the process: under --threads 2 --blocking-threads 2 todos
   POSTed on many connections are all seen by every GET (both loops served),
   and --workers 2 is refused (78);
and the statuses: 201, 204 without a body, 404 and 400 as JSON errors.
"""
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse

from harness import Failures, Server, run, wait_for
from rawhttp import Conn, request

F = Failures()
POOL = ("--blocking-threads", "2")
TMP = tempfile.mkdtemp(prefix="test_todo.")


def curl(*args, timeout=10):
    """curl with its answer's head in a file: (status, [(name, value)], body).
    The last head read counts (curl prints one per response it follows)."""
    hf, bf = os.path.join(TMP, "h"), os.path.join(TMP, "b")
    for f in (hf, bf):
        if os.path.exists(f):
            os.unlink(f)
    p = subprocess.run(["curl", "-sS", "--max-time", str(timeout), "-D", hf, "-o", bf] + list(args),
                       capture_output=True, timeout=timeout + 5)
    if p.returncode != 0 or not os.path.exists(hf):
        return None, [], p.stderr.decode(errors="replace").encode()
    heads = open(hf, "rb").read().decode("latin-1").split("\r\n\r\n")
    heads = [h for h in heads if h.strip()]
    lines = heads[-1].split("\r\n") if heads else [""]
    m = re.match(r"HTTP/1\.[01] (\d{3})", lines[0])
    hdrs = [(k.strip().lower(), v.strip()) for k, _, v in (l.partition(":") for l in lines[1:])]
    body = open(bf, "rb").read() if os.path.exists(bf) else b""
    return (int(m.group(1)) if m else None), hdrs, body


def one(hdrs, name):
    """The values of header `name` in a curl head."""
    return [v for k, v in hdrs if k == name]


def jbody(body):
    try:
        return json.loads(body)
    except (ValueError, TypeError):
        return None


def call(port, method, path, body=None, headers=None):
    """One request on its own http.client connection: (status, headers, body)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, r.getheaders(), r.read()
    finally:
        c.close()


def add(port, title, tags=()):
    st, _, b = call(port, "POST", "/todos", json.dumps({"title": title, "tags": list(tags)}),
                    {"Content-Type": "application/json"})
    doc = jbody(b) or {}
    F.check(st == 201 and doc.get("title") == title and doc.get("tags") == list(tags) and doc.get("done") is False,
            f"POST /todos {title!r} -> 201 with the todo ({st} {b[:120]!r})")
    return doc.get("id")


def hdr(hs, name):
    return [v for k, v in hs if k.lower() == name]


def path_and_query(s):
    base = s.url("")
    a = add(s.port, "buy milk and eggs", ["a", "b"])
    add(s.port, "milk and eggs for the cat", ["a"])
    add(s.port, "call mum", ["a", "b"])
    for q in ("milk%20and%20eggs", "milk+and+eggs", "milk%20and+eggs"):
        st, h, b = curl(f"{base}/todos?tag=a&tag=b&q={q}")
        doc = jbody(b) or {}
        F.check(st == 200 and doc.get("filter") == {"tags": ["a", "b"], "q": "milk and eggs"},
                f"?tag=a&tag=b&q={q}: both tags, q decoded to 'milk and eggs' ({st} {b[:200]!r})")
        F.check([t.get("id") for t in doc.get("todos", [])] == [a],
                f"?tag=a&tag=b&q={q}: only the todo with both tags and that title ({b[:200]!r})")
    st, _, b = curl(f"{base}/todos?tag=a&x=1&t%61g=b&tag=a")
    F.check(st == 200 and (jbody(b) or {}).get("filter", {}).get("tags") == ["a", "b", "a"],
            f"repeated tag keys in order, an encoded key decoded, other keys skipped ({b[:200]!r})")
    st, _, b = curl(f"{base}/todos")
    doc = jbody(b) or {}
    F.check(st == 200 and len(doc.get("todos", [])) == 3 and doc.get("filter") == {"tags": [], "q": None},
            f"no filter: every todo ({b[:200]!r})")
    st, _, b = curl(f"{base}/todos?q=%zz")
    F.check(st == 400 and "error" in (jbody(b) or {}), f"q=%zz -> 400 JSON error ({st} {b!r})")
    st, _, b = curl(f"{base}/todos/{a}")
    F.check(st == 200 and (jbody(b) or {}).get("id") == a, f"GET /todos/{a} -> that todo ({st} {b!r})")
    for bad in ("999", "abc"):
        st, h, b = curl(f"{base}/todos/{bad}")
        F.check(st == 404 and (jbody(b) or {}).get("error") == "no such todo" and
                one(h, "content-type") == ["application/json"], f"GET /todos/{bad} -> 404 JSON ({st} {b!r})")
    # A dot-segment is the host's refusal: before_request never ran.
    _, h0, _ = curl(f"{base}/todos/1")
    for path in ("/todos/../health", "/static/../todos", "/static/%2e%2e/x"):
        st, h, b = curl("--path-as-is", base + path)
        F.check(st == 400 and not one(h, "x-request-id"), f"GET {path} (--path-as-is) -> 400 by the host, no "
                f"X-Request-Id ({st} {h})")
    _, h1, _ = curl(f"{base}/todos/1")
    ids = [int(x) for x in one(h0, "x-request-id") + one(h1, "x-request-id")]
    F.check(len(ids) == 2 and ids[1] == ids[0] + 1, f"the refused requests never reached before_request ({ids})")


SID_SET = re.compile(r"sid=([0-9a-f]{32}); Path=/; Max-Age=3600; HttpOnly; SameSite=Lax")


def cookies(s):
    base = s.url("")
    jar = os.path.join(TMP, "jar")
    st, h, b = curl("-c", jar, "-d", "user=alice+smith", f"{base}/login")
    sc = one(h, "set-cookie")
    m = SID_SET.fullmatch(sc[0]) if len(sc) == 1 else None
    F.check(st == 200 and (jbody(b) or {}).get("user") == "alice smith", f"POST /login user=alice+smith -> "
            f"{{'user':'alice smith'}} (form-decoded) ({st} {b!r})")
    F.check(m is not None, f"Set-Cookie is exactly sid=<token>; Path=/; Max-Age=3600; HttpOnly; SameSite=Lax ({sc})")
    token = m.group(1) if m else "none"
    st, _, b = curl("-b", jar, f"{base}/me")
    F.check(st == 200 and jbody(b) == {"user": "alice smith"}, f"GET /me with curl's jar -> the user ({st} {b!r})")
    st, _, b = curl(f"{base}/me")
    F.check(st == 401 and (jbody(b) or {}).get("error") == "not logged in", f"GET /me without -> 401 ({st} {b!r})")
    st, _, b = curl("-H", "Cookie: theme=dark; sid=0123456789abcdef0123456789abcdef", f"{base}/me")
    F.check(st == 401, f"GET /me with a sid no login made -> 401 ({st})")
    st, _, b = curl("-H", f"Cookie: theme=dark; sid=\"{token}\"", f"{base}/me")
    F.check(st == 200, f"GET /me with sid among other cookies, DQUOTEd -> 200 ({st} {b!r})")
    st, _, b = curl("-d", "name=bob", f"{base}/login")
    F.check(st == 400 and "error" in (jbody(b) or {}), f"POST /login without user= -> 400 ({st} {b!r})")
    st, h, b = curl("-b", jar, "-c", jar, "-X", "POST", f"{base}/logout")
    F.check(st == 204 and b == b"" and not one(h, "content-length"), f"POST /logout -> 204, no body ({st} {h})")
    F.check(one(h, "set-cookie") == ["sid=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax"],
            f"logout deletes the cookie: Max-Age=0, same Path ({one(h, 'set-cookie')})")
    F.check(token not in open(jar).read(), "curl's jar no longer holds the session")
    st, _, _ = curl("-H", f"Cookie: sid={token}", f"{base}/me")
    F.check(st == 401, f"the old token after logout -> 401: the session is gone too ({st})")


def whoami(s, trusted):
    with Conn(s.port) as k:
        mine = k.sock.getsockname()[1]
        k.send(request("GET", "/whoami", [("X-Forwarded-For", "203.0.113.7")]))
        st, _, h, b, line = k.try_response()
    doc = jbody(b) or {}
    want = "203.0.113.7" if trusted else "127.0.0.1"
    F.check(st == 200 and doc.get("peer") == "127.0.0.1" and doc.get("port") == mine,
            f"/whoami: peer and port are the socket's (port {mine}; {b!r})")
    F.check(doc.get("client") == want, f"/whoami with X-Forwarded-For, {'trusted' if trusted else 'no'} proxy: "
            f"client {want} ({b!r})")


def owned_bodies(s):
    """Every JSON answer arrives whole: its Content-Length, valid JSON. A
    HEAD gets the length and no body (the owned body is dropped)."""
    for method, path, body in [("GET", "/todos", None), ("GET", "/todos/1", None), ("GET", "/todos/77", None),
                               ("POST", "/todos", "[1,"), ("GET", "/health", None), ("GET", "/whoami", None),
                               ("GET", "/report", None), ("GET", "/me", None)]:
        with Conn(s.port) as k:
            hs = [("Content-Length", str(len(body)))] if body else []
            k.send(request(method, path, hs, body or b""))
            st, _, h, b, line = k.try_response()
            F.check(st is not None and h.get("content-type") == "application/json" and
                    int(h.get("content-length", -1)) == len(b) and jbody(b) is not None,
                    f"{method} {path}: a whole JSON body ({line} {b[:100]!r})")
            if method == "GET":
                k.send(request("HEAD", path))
                st2, _, h2, b2, _ = k.try_response(head=True)
                F.check(st2 == st and h2.get("content-length") == str(len(b)), f"HEAD {path}: same status and "
                        f"length, no body ({st2} {h2.get('content-length')})")
                k.send(request("GET", "/health"))
                F.check(k.try_response()[0] == 200, f"HEAD {path}: no body bytes were left on the connection")


def files():
    d = os.path.join(TMP, "static")
    os.makedirs(d)
    data = bytes(range(256)) * 4
    with open(os.path.join(d, "app.js"), "wb") as f:
        f.write(data)
    with open(os.path.join(d, ".secret"), "w") as f:
        f.write("no")
    with Server("todo", "--port", "0", *POOL, env={"M0_TODO_STATIC": d}) as s:
        u = s.url("/static/app.js")
        st, h, b = curl(u)
        F.check(st == 200 and b == data and one(h, "content-type") == ["text/javascript"],
                f"/static/app.js: the whole file, its type ({st} {len(b)} bytes {one(h, 'content-type')})")
        F.check(one(h, "cache-control") == ["public, max-age=60"], f"/static/: Cache-Control replaced, once "
                f"({one(h, 'cache-control')})")
        etag, lm = one(h, "etag"), one(h, "last-modified")
        F.check(len(etag) == 1 and len(lm) == 1 and one(h, "accept-ranges") == ["bytes"],
                f"/static/: ETag, Last-Modified, Accept-Ranges ({h})")
        st, h, b = curl("-H", f"If-None-Match: {etag[0] if etag else 'x'}", u)
        F.check(st == 304 and b == b"", f"If-None-Match: its ETag -> 304, no body ({st})")
        st, h, b = curl("-H", 'If-None-Match: "other"', u)
        F.check(st == 200 and b == data, f"If-None-Match: another ETag -> 200 ({st})")
        st, h, b = curl("-H", f"If-Modified-Since: {lm[0] if lm else 'x'}", u)
        F.check(st == 304 and b == b"", f"If-Modified-Since: its Last-Modified -> 304 ({st})")
        st, h, b = curl("-r", "10-19", u)
        F.check(st == 206 and b == data[10:20] and one(h, "content-range") == [f"bytes 10-19/{len(data)}"],
                f"Range 10-19 -> 206, those bytes, Content-Range ({st} {one(h, 'content-range')})")
        st, h, b = curl("-r", "5000-", u)
        F.check(st == 416 and one(h, "content-range") == [f"bytes */{len(data)}"], f"Range past the end -> 416 ({st} {h})")
        st, h, b = curl("-I", u)  # curl -I writes the head as its output
        F.check(st == 200 and one(h, "content-length") == [str(len(data))] and one(h, "etag") == etag,
                f"curl -I: the head with the file's length and ETag ({st} {one(h, 'content-length')})")
        with Conn(s.port) as k:
            k.send(request("HEAD", "/static/app.js") + request("GET", "/health"))
            st, _, h, _, line = k.try_response(head=True)
            F.check(st == 200 and h.get("content-length") == str(len(data)), f"HEAD: the head ({line})")
            F.check(k.try_response()[0] == 200, "HEAD: no body bytes before the next answer")
        for name in ("missing.js", ".secret", "a%2Fb", "%2esecret"):
            st, h, b = curl(s.url(f"/static/{name}"))
            F.check(st == 404 and (jbody(b) or {}).get("error") == "no such file" and
                    one(h, "cache-control") == ["no-store"], f"/static/{name} -> 404 JSON, no-store ({st} {b!r} {h})")
        F.check(s.stop() == 0, "todo exits 0")
    with Server("todo", "--port", "0", *POOL) as s:
        st, _, b = curl(s.url("/static/app.js"))
        F.check(st == 404 and "M0_TODO_STATIC" in (jbody(b) or {}).get("error", ""),
                f"without M0_TODO_STATIC: 404 that says so ({st} {b!r})")


def export(s):
    base = s.url("")
    st, h, b = curl(f"{base}/todos")
    todos = (jbody(b) or {}).get("todos", [])
    st, h, b = curl(f"{base}/todos/export")
    lines = b.decode().splitlines()
    docs = [jbody(l) for l in lines]
    F.check(st == 200 and one(h, "transfer-encoding") == ["chunked"] and not one(h, "content-length") and
            one(h, "content-type") == ["application/x-ndjson"], f"/todos/export: chunked NDJSON ({st} {h})")
    F.check(len(todos) > 0 and docs == todos and b.endswith(b"\n"), f"/todos/export: one JSON line per todo, the "
            f"list's ({len(docs)} lines, {len(todos)} todos)")
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
    try:
        c.request("GET", "/todos/export")
        r = c.getresponse()
        body = r.read()
        sock, port = c.sock, c.sock.getsockname()[1] if c.sock else None
        F.check(r.status == 200 and r.chunked and [jbody(l) for l in body.decode().splitlines()] == todos,
                "http.client reads the chunked export whole")
        c.request("GET", "/whoami")
        r = c.getresponse()
        doc = jbody(r.read()) or {}
        F.check(r.status == 200 and c.sock is sock and doc.get("port") == port,
                f"the same keep-alive connection answers after the export ({r.status} {doc} port {port})")
    except (OSError, http.client.HTTPException) as e:
        F.check(False, f"http.client: the export, then a request on the same connection ({type(e).__name__}: {e})")
    c.close()


def export_gone(s):
    """A client that leaves mid-export: on_gone counts it (the export is
    ~2 MB to a client whose receive buffer is 4 KiB, so it cannot all be
    written before the close)."""
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
    for i in range(500):
        c.request("POST", "/todos", json.dumps({"title": f"{i:04d}" + "x" * 4000, "tags": ["bulk"]}))
        r = c.getresponse()
        r.read()
        if r.status != 201:
            F.check(False, f"bulk POST {i} -> 201 ({r.status})")
            break
    c.close()
    before = (jbody(call(s.port, "GET", "/report")[2]) or {}).get("exports_abandoned")
    k = socket.socket()
    k.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    k.settimeout(10)
    k.connect(("127.0.0.1", s.port))
    k.sendall(request("GET", "/todos/export"))
    got = k.recv(4096)
    k.close()
    F.check(got.startswith(b"HTTP/1.1 200"), f"the export began ({got[:40]!r})")
    after = wait_for(lambda: (jbody(call(s.port, "GET", "/report")[2]) or {}).get("exports_abandoned") == before + 1,
                     10, 0.05)
    F.check(before == 0 and after, f"the client that left is counted by on_gone ({before} then "
            f"{call(s.port, 'GET', '/report')[2]!r})")
    st, _, b = curl(s.url("/todos/export"))
    F.check(st == 200 and len(b.splitlines()) >= 500, f"the next export is whole ({st}, {len(b.splitlines())} lines)")


def headers(s):
    """before_request's headers on loop routes and pool routes alike."""
    seen = []
    for path, on_loop in [("/whoami", True), ("/todos/export", True), ("/todos", False), ("/todos/1", False),
                          ("/me", False), ("/report", False), ("/todos/404", False)]:
        st, h, b = curl(s.url(path))
        rid = one(h, "x-request-id")
        F.check(len(rid) == 1 and rid[0].isdigit() and one(h, "cache-control") == ["no-store"],
                f"{path} ({'loop' if on_loop else 'pool'}, {st}): X-Request-Id and Cache-Control: no-store, once "
                f"each ({rid} {one(h, 'cache-control')})")
        seen += rid
    F.check(len(set(seen)) == len(seen), f"request ids differ ({seen})")
    st, h, b = curl(s.url("/health"))
    doc = jbody(b) or {}
    F.check(st == 200 and not one(h, "x-request-id") and one(h, "cache-control") == ["no-store"],
            f"/health: X-Request-Id removed, Cache-Control kept ({h})")
    F.check(doc.get("content_length_header") == -1 and one(h, "content-length") == [str(len(b))],
            f"/health: m0_response_header refused Content-Length (-1), the host's framing stands ({b!r} {h})")


def statuses(s):
    st, h, b = curl("-X", "POST", "-d", '{"title": "x",', s.url("/todos"))
    F.check(st == 400 and "not JSON" in (jbody(b) or {}).get("error", ""), f"POST bad JSON -> 400 JSON error ({st} {b!r})")
    st, h, b = curl("-X", "POST", "-d", '{"tags": []}', s.url("/todos"))
    F.check(st == 400 and "title" in (jbody(b) or {}).get("error", ""), f"POST without a title -> 400 ({st} {b!r})")
    tid = add(s.port, "to delete")
    st, h, b = curl("-X", "DELETE", s.url(f"/todos/{tid}"))
    F.check(st == 204 and b == b"" and not one(h, "content-length") and not one(h, "content-type"),
            f"DELETE /todos/{tid} -> 204, no body ({st} {h})")
    st, h, b = curl("-X", "DELETE", s.url(f"/todos/{tid}"))
    F.check(st == 404 and (jbody(b) or {}).get("error") == "no such todo", f"DELETE it again -> 404 ({st} {b!r})")
    st, h, b = curl(s.url(f"/todos/{tid}"))
    F.check(st == 404, f"GET it -> 404 ({st})")


def needs_pool():
    try:
        rc, out, err = run("todo", "--port", "0")
    except subprocess.TimeoutExpired:
        rc, err = None, "still serving after 10 s"
    lines = [l for l in err.splitlines() if "/report" in l]
    F.check(rc == 78 and len(lines) == 1 and "GET /report" in lines[0] and "M0_NEEDS_POOL" in lines[0] and
            "--blocking-threads 1 or more" in lines[0], f"todo without a pool: exit 78, one line naming GET /report "
            f"and the fix ({rc} {err!r})")
    with Server("todo", "--port", "0", "--blocking-threads", "2") as s:
        st, _, b = curl(s.url("/report"))
        doc = jbody(b) or {}
        F.check(st == 200 and doc.get("todos") == 0 and doc.get("done") == 0, f"with a pool /report answers ({st} {b!r})")
        F.check(s.stop() == 0, "todo exits 0")


def shared_store():
    rc, _, err = run("todo", "--port", "0", "--workers", "2", *POOL)
    F.check(rc == 78, f"--workers 2 is refused: one store is one process ({rc} {err[-200:]!r})")
    with Server("todo", "--port", "0", "--threads", "2", *POOL, "--metrics-path", "/metrics") as s:
        titles = [f"shared {i}" for i in range(24)]
        errs = []

        def poster(chunk):
            try:
                c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
                for t in chunk:
                    c.request("POST", "/todos", json.dumps({"title": t}))
                    r = c.getresponse()
                    r.read()
                    if r.status != 201:
                        errs.append((t, r.status))
                c.close()
            except OSError as e:
                errs.append(str(e))
        ts = [threading.Thread(target=poster, args=(titles[i::8],)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(30)
        F.check(not errs, f"24 POSTs on 8 connections at once -> 201 ({errs})")
        ids = set()
        for i in range(16):  # fresh connections: spread over both loops and all four pool threads
            st, _, b = call(s.port, "GET", "/todos")
            got = [t.get("title") for t in (jbody(b) or {}).get("todos", [])]
            ids |= {t.get("id") for t in (jbody(b) or {}).get("todos", [])}
            F.check(st == 200 and sorted(got) == sorted(titles), f"GET /todos #{i} sees every todo ({len(got)} of 24)")
        F.check(len(ids) == 24, f"24 distinct ids ({len(ids)})")
        text = call(s.port, "GET", "/metrics")[2].decode()
        per = [int(n) for n in re.findall(r'^m0_requests_total\{loop="\d+"\} (\d+)$', text, re.M)]
        F.check(len(per) == 2 and all(n > 0 for n in per), f"both loops answered some of them ({per})")
        F.check(s.stop() == 0, "todo --threads 2 exits 0")


try:
    needs_pool()
    with Server("todo", "--port", "0", *POOL) as s:
        path_and_query(s)
        cookies(s)
        whoami(s, trusted=False)
        owned_bodies(s)
        export(s)
        headers(s)
        statuses(s)
        F.check(s.stop() == 0, "todo exits 0")
    with Server("todo", "--port", "0", *POOL, "--trusted-proxies", "127.0.0.1") as s:
        whoami(s, trusted=True)
    files()
    shared_store()
    with Server("todo", "--port", "0", "--threads", "2", *POOL) as s:
        export_gone(s)
        F.check(s.stop() == 0, "todo exits 0 after an abandoned export")
finally:
    shutil.rmtree(TMP, ignore_errors=True)
F.done()
