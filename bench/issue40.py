"""bench/issue40.py — issue 40's targets, item by item, judged from one bench/run session.

Used by bench/run (not run by itself). scorecard(reports, results_text) takes
the scripts' JSON reports of a session ({"loop": ..., "callgrind": ...,
"scale": ..., "actors": ..., "streams": ..., "lifecycle": ...}) and returns one
row per target of issue 40's "Deliver" list:

  item 1  one loop >= 1.25x nginx's requests per server-CPU-second at 16 and
          256 connections, paired by round (bench/run_loop, depth 1), for every
          m0 arm of the run (m0: ramp's default I/O path; m0-uring when the
          script has that arm); <= 3,700 user-space instructions per request
          (bench/profile_callgrind, m0's default path). Floor: run_loop's
          floor-epoll and floor-uring arms against nginx, when they ran.
  item 2  per-core efficiency at N loops >= 0.95x one loop's, --threads N and
          --workers N, paired (bench/run_scale), and m0/nginx at N >= 1.25x
          (item 1's lead, held at N). Floor: run_scale's floor arm (bench/
          floor_http.c as N SO_REUSEPORT processes), when it ran: its own
          N-over-1 efficiency beside m0's, m0 against it at N, and its own
          lead over nginx at N; nginx's own N-over-1 efficiency beside it
          either way.
  item 3  external actor over ipc >= 2x nginx proxy_pass's requests per
          CPU-second of every process, p99 <= nginx's, at 16 and 256
          connections; thread actor >= 0.8x the on-loop route (requests/s and
          per CPU-second), paired (bench/run_actors).
  item 4  SSE and WebSocket CPU per frame <= 1.1x the one-write floor, p99
          <= 1.1x the floor's, idle memory per subscriber < 2 KiB
          (bench/run_streams; the floor arms are the comparator).
  item 5  --workers 2 start < 20 ms, exec to first answer, median, for each
          app run; RSS per idle keep-alive connection < 2 KiB
          (bench/run_lifecycle).

Every figure is computed from the scripts' per-run records where they have
them (arm, conns, round ...), so that a script's own summary changing shape
moves nothing here; anything absent is "not measured", never an exception.
A row: mb.target()'s fields plus item, floor (text: what the script measured
under it in the same session, or "no floor measured") and tried (the
hand-written section of RESULTS.md that says what was tried: the first
"## " heading after the generated part naming "issue 40, item K", else the
first naming the item's script or its topic, TOPICS; the sections are
newest first).
"""
import re

import m0bench as mb

ITEMS = {
    1: ("One loop past the epoll floor", ["run_loop", "profile_callgrind"]),
    2: ("Loops that scale", ["run_scale"]),
    3: ("Actor routes", ["run_actors"]),
    4: ("Fan-out at the floor", ["run_streams"]),
    5: ("Memory and start", ["run_lifecycle"]),
}
# What a hand-written heading on an item says when it names neither the item nor its script.
TOPICS = {1: r"io_uring|epoll|one loop", 2: r"loops that scale", 3: r"actor route", 4: r"fan-out",
          5: r"\bstart\b"}
NO_FLOOR = "no floor measured"


def _num(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _value(runs, key, sel):
    vals = [r.get(key) for r in runs if all(r.get(k) == v for k, v in sel.items())]
    vals = [v for v in vals if _num(v) is not None]
    return vals[0] if vals else None


def paired(runs, key, a, b, **same):
    """Median over rounds of (KEY of the run matching a) / (KEY of the run
    matching b), both also matching same; None when no round has both."""
    rounds = sorted({r.get("round") for r in runs if isinstance(r.get("round"), int)})
    per = []
    for rnd in rounds:
        x = _value(runs, key, {**same, **a, "round": rnd})
        y = _value(runs, key, {**same, **b, "round": rnd})
        if x is not None and y:
            per.append(x / y)
    return mb.median(per)


def _median_of(runs, key, **sel):
    return mb.median([r.get(key) for r in runs if all(r.get(k) == v for k, v in sel.items())
                      and _num(r.get(key)) is not None])


def _fmt(x, spec=".3g"):
    return "–" if x is None else format(x, spec)


def _row(item, name, value, op, bound, unit, where, floor=None):
    t = mb.target(name, value, op, bound, unit, where)
    t.update(item=item, floor=floor)
    return t


def _unmeasured(item, name, why):
    t = mb.target(name, None, ">=", 0, "", None)
    t.update(item=item, floor=None, text=f"not measured ({why})")
    return t


# ---------------------------------------------------------------- item by item

def item1(loop, cg):
    rows = []
    name = "one loop >= 1.25x nginx's requests per server-CPU-second (paired by round)"
    runs = (loop or {}).get("runs") or []
    if not runs:
        rows.append(_unmeasured(1, name, "bench/run_loop did not run" if loop is None else "no run of bench/run_loop"))
    else:
        conns = sorted({r.get("conns") for r in runs if r.get("depth") == 1 and isinstance(r.get("conns"), int)})
        m0_arms = sorted({r.get("arm") for r in runs if str(r.get("arm", "")).startswith("m0")},
                         key=lambda a: (a != "m0", a))
        floors = sorted({r.get("arm") for r in runs if str(r.get("arm", "")).startswith("floor-")})
        for c in conns:
            fl = [f"{f} {_fmt(paired(runs, 'req_per_cpu_s', {'arm': f}, {'arm': 'nginx'}, conns=c, depth=1))}x nginx"
                  for f in floors]
            floor = ("same session, paired: " + ", ".join(fl)) if fl else \
                f"{NO_FLOOR} (run_loop ran without its floor-epoll/floor-uring arms)"
            for arm in m0_arms:
                label = "m0, ramp's default I/O path" if arm == "m0" else arm
                v = paired(runs, "req_per_cpu_s", {"arm": arm}, {"arm": "nginx"}, conns=c, depth=1)
                mine, ng = (_median_of(runs, "req_per_cpu_s", arm=a, conns=c, depth=1) for a in (arm, "nginx"))
                where = (f"{label}: /x/now, {c} connections, depth 1; absolute {_fmt(mine, ',.0f')} vs nginx "
                         f"{_fmt(ng, ',.0f')} req/CPU-s")
                rows.append(_row(1, name, v, ">=", 1.25, "x", where, floor))
            if "m0-uring" in m0_arms and "m0" in m0_arms:
                v = paired(runs, "req_per_cpu_s", {"arm": "m0-uring"}, {"arm": "m0"}, conns=c, depth=1)
                rows.append(dict(_row(1, "m0-uring / m0's default path, requests per server-CPU-second (paired; "
                                         "no bound: which path to make the default)", v, ">=", 0, "x",
                                      f"/x/now, {c} connections, depth 1"), met=None, info=True,
                                 text=f"{_fmt(v, '.3f')}x" if v is not None else "not measured"))
    return rows + item1_ir(cg)


def item1_ir(cg):
    """Item 1's instructions per request: the default path judged, io_uring's beside it."""
    rows = []
    name = "<= 3,700 user-space instructions per request (bench/profile_callgrind, m0's default path)"
    m0 = ((cg or {}).get("profiles") or {}).get("m0") or {}
    ng = ((cg or {}).get("profiles") or {}).get("nginx") or {}
    if _num(m0.get("ir_per_req")) is None:
        rows.append(_unmeasured(1, name, "bench/profile_callgrind did not run" if cg is None else
                                "no Ir per request in profile_callgrind's output"))
    else:
        where = (f"ramp GET /x/now, {m0.get('requests')} requests over {(cg.get('settings') or {}).get('conns')} "
                 f"connections; nginx {_fmt(_num(ng.get('ir_per_req')), ',.0f')} Ir/request (comparator)")
        rows.append(_row(1, name, m0["ir_per_req"], "<=", 3700, " Ir", where, NO_FLOOR))
    ur = ((cg or {}).get("profiles") or {}).get("m0-uring") or {}
    if _num(ur.get("ir_per_req")) is not None:
        rows.append(dict(_row(1, "m0 --io uring: user-space instructions per request (bench/profile_callgrind "
                                 "IO=uring; no bound: the default path is judged)", ur["ir_per_req"], ">=", 0, " Ir",
                              f"ramp GET /x/now, {ur.get('requests')} requests"), met=None, info=True,
                         text=f"{ur['ir_per_req']:,.0f} Ir"))
    return rows


def _scale_floor(runs, arm, n, c):
    """The floor under item 2's rows at N (run_scale's floor arm, paired by
    round): (under the efficiency, under the lead) texts, or None without it."""
    if not any(r.get("arm") == "floor" and r.get("n") == n and r.get("conns") == c for r in runs):
        return None
    fe = paired(runs, "req_per_cpu_s", {"arm": "floor", "n": n}, {"arm": "floor", "n": 1}, conns=c)
    mine = paired(runs, "req_per_cpu_s", {"arm": arm, "n": n}, {"arm": "threads", "n": 1}, conns=c)
    mf = paired(runs, "req_per_cpu_s", {"arm": arm, "n": n}, {"arm": "floor", "n": n}, conns=c)
    mf1 = paired(runs, "req_per_cpu_s", {"arm": "threads", "n": 1}, {"arm": "floor", "n": 1}, conns=c)
    fn = paired(runs, "req_per_cpu_s", {"arm": "floor", "n": n}, {"arm": "nginx", "n": n}, conns=c)
    fn1 = paired(runs, "req_per_cpu_s", {"arm": "floor", "n": 1}, {"arm": "nginx", "n": 1}, conns=c)
    what = f"same session, paired: the floor (bench/floor_http.c, {n} SO_REUSEPORT processes, pinned as nginx's)"
    vs = f"--{arm} {n} / floor {n} {_fmt(mf, '.3f')}x (at N = 1: {_fmt(mf1, '.3f')}x)"
    return (f"{what} {n} over 1: {_fmt(fe, '.3f')}x per CPU-second, beside m0's {_fmt(mine, '.3f')}x; {vs}",
            f"{what} / nginx {n} workers {_fmt(fn, '.3f')}x (at N = 1: {_fmt(fn1, '.3f')}x); {vs}")


def item2(scale):
    runs = (scale or {}).get("runs") or []
    eff = "per-core efficiency at N loops >= 0.95x one loop's (paired by round)"
    lead = "m0/nginx at N loops >= 1.25x requests per server-CPU-second (item 1's lead, held at N; paired)"
    if not runs:
        why = "bench/run_scale did not run" if scale is None else "no run of bench/run_scale"
        return [_unmeasured(2, eff, why), _unmeasured(2, lead, why)]
    rows = []
    ns = sorted({r.get("n") for r in runs if isinstance(r.get("n"), int)})
    conns = sorted({r.get("conns") for r in runs if isinstance(r.get("conns"), int)})
    absent = f"{NO_FLOOR} (run_scale ran without its floor arm)"
    for c in conns:
        for n in [x for x in ns if x > 1]:
            shares = any(r.get("client_shares_server") for r in runs if r.get("n") == n)
            note = " (wrk on a server CPU: no CPU to spare)" if shares else ""
            ng = paired(runs, "req_per_cpu_s", {"arm": "nginx", "n": n}, {"arm": "nginx", "n": 1}, conns=c)
            for arm in ("threads", "workers"):
                fl = _scale_floor(runs, arm, n, c)
                floor = f"{fl[0] if fl else absent}; nginx's own efficiency at N = {n} over 1: {_fmt(ng, '.3f')}x " \
                        f"(same session)"
                v = paired(runs, "req_per_cpu_s", {"arm": arm, "n": n}, {"arm": "threads", "n": 1}, conns=c)
                rows.append(_row(2, eff, v, ">=", 0.95, "x", f"--{arm} {n}, /x/now, {c} connections{note}", floor))
        for n in [x for x in ns if x > 1]:
            for arm in ("threads", "workers"):
                fl = _scale_floor(runs, arm, n, c)
                v = paired(runs, "req_per_cpu_s", {"arm": arm, "n": n}, {"arm": "nginx", "n": n}, conns=c)
                one = paired(runs, "req_per_cpu_s", {"arm": "threads", "n": 1}, {"arm": "nginx", "n": 1}, conns=c)
                rows.append(_row(2, lead, v, ">=", 1.25, "x",
                                 f"--{arm} {n} vs nginx {n} workers, {c} connections (at N = 1: {_fmt(one, '.3f')}x)",
                                 fl[1] if fl else absent))
    if not rows:
        rows = [_unmeasured(2, eff, "bench/run_scale ran N = 1 only"), _unmeasured(2, lead, "N = 1 only")]
    return rows


def _floors_named(report):
    """Whatever a script reports under a key naming a floor (top level or in
    its summary), as 'key: numbers' text; None when it reports none."""
    found = []

    def leaves(x, path, out):
        if len(out) >= 6:
            return
        if _num(x) is not None:
            out.append(f"{path} {_fmt(x, '.4g')}")
        elif isinstance(x, dict):
            for k, v in x.items():
                leaves(v, f"{path}.{k}" if path else str(k), out)

    for where in (report or {}, (report or {}).get("summary") or {}):
        if not isinstance(where, dict):
            continue
        for k, v in where.items():
            if "floor" in str(k).lower() and k not in ("floors_vs_nginx",):
                out = []
                leaves(v, str(k), out)
                if out:
                    found.append(", ".join(out))
    return "; ".join(found) or None


def item3(actors):
    runs = (actors or {}).get("runs") or []
    names = ("external actor over ipc >= 2x nginx proxy_pass's requests per CPU-second of every process (paired)",
             "external actor's p99 <= nginx proxy_pass's (paired)",
             "thread actor >= 0.8x the on-loop route (paired)")
    if not runs:
        why = "bench/run_actors did not run" if actors is None else "no run of bench/run_actors"
        return [_unmeasured(3, n, why) for n in names]
    st = actors.get("settings") or {}
    comp2 = st.get("part2_comparator") or "nginx-loop"
    comp1 = st.get("part1_comparator") or "loop"
    generic = _floors_named(actors)
    generic = f"same session: {generic}" if generic else NO_FLOOR

    def floor(arm, c):
        """run_actors' switch floor for this arm and count, else whatever it names a floor."""
        sw = (actors.get("switch_costs") or {}).get(f"{arm}_c{c}")
        if not isinstance(sw, dict) or _num(sw.get("switch_us_per_req")) is None:
            return generic
        return (f"same session: its {_fmt(_num(sw.get('switches_per_req')), '.3g')} context switches per request "
                f"alone cost {_fmt(sw['switch_us_per_req'], '.3g')} us of CPU (one switch "
                f"{_fmt(_num(actors.get('switch_us')), '.3g')} us, bin/m0_wake_floor) of its "
                f"{_fmt(_num(sw.get('us_per_req')), '.3g')} us/request; the target allows "
                f"{_fmt(_num(sw.get('target_us_per_req')), '.3g')} us/request")

    rows = []
    conns = sorted({r.get("conns") for r in runs if isinstance(r.get("conns"), int)})
    for c in conns:
        if any(r.get("arm") == "ext" and r.get("conns") == c for r in runs):
            where = f"GET /actor/echo, {c} connections, ext vs {comp2}"
            rows.append(_row(3, names[0], paired(runs, "req_per_cpu_s", {"arm": "ext"}, {"arm": comp2}, conns=c, part=2),
                             ">=", 2.0, "x", where, floor("ext", c)))
            rows.append(_row(3, names[1], paired(runs, "p99_ms", {"arm": "ext"}, {"arm": comp2}, conns=c, part=2),
                             "<=", 1.0, "x", where, NO_FLOOR))
        if any(r.get("arm") == "actor" and r.get("conns") == c for r in runs):
            for key, what in (("rps", "requests/s"), ("req_per_cpu_s", "requests per CPU-second")):
                rows.append(_row(3, names[2], paired(runs, key, {"arm": "actor"}, {"arm": comp1}, conns=c, part=1),
                                 ">=", 0.8, "x", f"{what}: /actor/echo vs /{comp1}/echo on the loop, {c} connections",
                                 floor("actor", c)))
    have = {r["target"] for r in rows}
    rows += [_unmeasured(3, n, "its part did not run") for n in names if n not in have]
    return rows


def item4(streams):
    sm = (streams or {}).get("summary") or {}
    arms, ratios = sm.get("arms") or {}, sm.get("ratios") or {}
    st = (streams or {}).get("settings") or {}
    rows = []
    for proto, floor_arm in (("sse", "floor-sse"), ("ws", "floor-ws")):
        m0 = f"m0-{proto}"
        q = ratios.get(f"{m0}/{floor_arm}") or {}
        a, fa = arms.get(m0) or {}, arms.get(floor_arm) or {}
        label = "SSE" if proto == "sse" else "WebSocket"
        where = f"{label}, {st.get('subscribers', '?')} subscribers, every {st.get('period_ms', '?')} ms"
        if fa.get("rounds"):
            floor = (f"same session: {floor_arm} {_fmt(_num(fa.get('cpu_s_per_million')), '.3g')} CPU-s per million "
                     f"frames, p99 {_fmt(_num(fa.get('p99_ms')), '.3g')} ms, idle "
                     f"{_fmt(_num(fa.get('idle_bytes_per_conn')), '.0f')} B/subscriber")
            others = [f"{k} {_fmt(_num(v.get('cpu_s_per_million')), '.3g')}" for k, v in sorted(arms.items())
                      if k.startswith(floor_arm + "-") and isinstance(v, dict) and v.get("rounds")]
            if others:
                floor += f" (other floors, CPU-s per million frames: {', '.join(others)})"
        else:
            floor = f"{NO_FLOOR} ({floor_arm} did not run)"
        why = "bench/run_streams did not run" if streams is None else f"no {m0}/{floor_arm} pair in this session"
        for key, name, unit in (("cpu_per_million", f"{label}: CPU per frame <= 1.1x the one-write floor (paired)", "x"),
                                ("p99", f"{label}: p99 <= 1.1x the floor's (paired)", "x")):
            v = _num(q.get(key))
            rows.append(_row(4, name, v, "<=", 1.1, unit, where, floor) if v is not None or q else
                        _unmeasured(4, name, why))
        name = f"{label}: idle memory per subscriber < 2 KiB"
        v = _num(a.get("idle_bytes_per_conn"))
        rows.append(_row(4, name, v, "<", 2048, " B", where, floor) if v is not None else
                    _unmeasured(4, name, "bench/run_streams did not run" if streams is None else f"{m0} did not run"))
    return rows


def start_floor(sf):
    """run_lifecycle's floor under the start: /bin/true's exec, bench/floor_http.c's
    start, the single loop's; None when it measured none."""
    if not isinstance(sf, dict):
        return None
    med = lambda x: _num((x or {}).get("median")) if isinstance(x, dict) else None  # noqa: E731
    parts = []
    if med(sf.get("exec_true_ms")) is not None:
        parts.append(f"Python starting /bin/true {_fmt(med(sf.get('exec_true_ms')), '.1f')} ms")
    if med(sf.get("floor_http_ms")) is not None:
        parts.append(f"m0_floor_http (one process, one socket) to its first answer "
                     f"{_fmt(med(sf.get('floor_http_ms')), '.1f')} ms")
    single = sf.get("single_ms") if isinstance(sf.get("single_ms"), dict) else {}
    if single:
        parts.append("one loop: " + ", ".join(f"{a} {_fmt(_num(v), '.1f')} ms" for a, v in sorted(single.items())))
    return "; ".join(parts) or None


def item5(lc):
    sm = (lc or {}).get("summary") or {}
    start = sm.get("start") or {}
    name = "--workers 2 start < 20 ms (exec to first answer, median)"
    floor = start_floor(sm.get("start_floor")) or _floors_named(lc)
    floor = f"same session: {floor}" if floor else NO_FLOOR
    rows = []
    for k, v in start.items():
        app, _, mode = str(k).partition(" ")
        if mode != "workers2" or app in ("nginx", "h2o"):
            continue
        single = _num(((start.get(f"{app} single") or {}).get("answer") or {}).get("median"))
        rows.append(_row(5, name, _num(((v or {}).get("answer") or {}).get("median")), "<", 20.0, " ms",
                         f"{app} --workers 2 (one loop: {_fmt(single, '.1f')} ms)", floor))
    if not rows:
        rows.append(_unmeasured(5, name, "bench/run_lifecycle did not run" if lc is None else "no --workers 2 start"))
    name = "RSS per idle keep-alive connection < 2 KiB"
    ka = _num((sm.get("keepalive") or {}).get("per_conn_bytes_median"))
    ng = _num(((sm.get("keepalive_comparators") or {}).get("nginx") or {}).get("per_conn_bytes_median"))
    if ka is None:
        rows.append(_unmeasured(5, name, "bench/run_lifecycle did not run" if lc is None else "not in its report"))
    else:
        n = (lc.get("settings") or {}).get("idle_conns")
        rows.append(_row(5, name, ka, "<", 2048, " B", f"ramp, one loop, {n} connections; nginx {_fmt(ng, '.0f')} B",
                         NO_FLOOR))
    return rows


# ---------------------------------------------------------------- the pointer to what was tried

def slug(heading):
    """GitHub's anchor for a heading (test_docs.py's)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")


def tried(results_text, item, scripts, end_marker, item_topic=True):
    """The hand-written section of RESULTS.md on this item: (heading, anchor)
    or None. The anchor counts the headings of the same name before it, as
    GitHub (and test_docs) do; the generated part's headings are its own."""
    text = results_text or ""
    before, after = "", text
    if end_marker in text:
        after = text.split(end_marker, 1)[1]
        before = text.split("<!-- BEGIN bench/run", 1)[0]
    heads, seen, code = [], {}, False
    for line in (before + "\n" + after).splitlines():
        if line.startswith("```"):
            code = not code
        if code or not line.startswith("#"):
            continue
        a = slug(line.lstrip("#"))
        n = seen.get(a, 0)
        seen[a] = n + 1
        if line.startswith("## "):
            heads.append((line[3:].strip(), a if n == 0 else f"{a}-{n}"))
    pat = re.compile(rf"issue 40,? item {item}\b", re.I)
    for h in heads:
        if pat.search(h[0]):
            return h
    topic = re.compile(TOPICS.get(item, r"$^"), re.I)
    for h in heads:  # the newest (the first) that names the script or the topic
        if any(f"bench/{s}" in h[0] for s in scripts) or (item_topic and topic.search(h[0])):
            return h
    return None


def scorecard(reports, results_text, end_marker):
    """Every target of issue 40, item by item; never raises on a report's shape."""
    makers = {1: lambda: item1(reports.get("loop"), reports.get("callgrind")),
              2: lambda: item2(reports.get("scale")), 3: lambda: item3(reports.get("actors")),
              4: lambda: item4(reports.get("streams")), 5: lambda: item5(reports.get("lifecycle"))}
    rows = []
    for item, make in makers.items():
        title, scripts = ITEMS[item]
        try:
            got = make()
        except Exception as e:  # a report of an unexpected shape: said, never a crash
            got = [_unmeasured(item, f"item {item}'s targets", f"bench/run could not read the report: "
                                                                 f"{type(e).__name__}: {e}")]
        for r in got:
            # item 1's Ir target is profile_callgrind's; every other row its item's script's
            script = scripts[-1] if "profile_callgrind" in r["target"] else scripts[0]
            ptr = tried(results_text, item, [script], end_marker, script != "profile_callgrind")
            r.update(item_title=title, script=script, tried={"heading": ptr[0], "anchor": ptr[1]} if ptr else None)
        rows += got
    return rows


def item_status(rows, item):
    rs = [r for r in rows if r["item"] == item and not r.get("info")]
    met = sum(1 for r in rs if r.get("met"))
    unknown = sum(1 for r in rs if r.get("met") is None)
    word = "met" if rs and met == len(rs) else "MISSED" if met + unknown < len(rs) else "not all measured"
    return f"{word} ({met} of {len(rs)} met" + (f", {unknown} not measured" if unknown else "") + ")"


def lines(rows):
    """The plain-text card bench/run prints at the end of a session."""
    out = []
    for item, (title, _) in ITEMS.items():
        rs = [r for r in rows if r["item"] == item]
        out.append(f"  item {item}, {title}: {item_status(rows, item)}")
        for r in rs:
            out.append(f"    {r['target']}" + (f" [{r['where']}]" if r.get("where") else "") + f": {r['text']}")
            if r.get("met") is False:
                t = r.get("tried")
                out.append(f"      floor: {r.get('floor') or NO_FLOOR}")
                out.append("      tried: " + (f"bench/RESULTS.md, \"{t['heading']}\"" if t else
                                              "no hand-written section of bench/RESULTS.md names it yet"))
    return out


def markdown(rows):
    """The item-by-item table of RESULTS.md's generated part."""
    L = ["| item | target | where | result | floor, same session | what was tried |", "|---|---|---|---|---|---|"]
    for item, (title, _) in ITEMS.items():
        for r in [r for r in rows if r["item"] == item]:
            missed = r.get("met") is False
            t = r.get("tried")
            tr = f"[{t['heading']}](#{t['anchor']})" if t and missed else ("none written yet" if missed else "")
            res = f"**{r['text']}**" if missed else r["text"]
            fl = r.get("floor") or (NO_FLOOR if missed else "")
            L.append(f"| {item}. {title} | {r['target']} | {r.get('where') or ''} | {res} | {fl} | {tr} |")
    L.append("")
    L.append("; ".join(f"item {i}: {item_status(rows, i)}" for i in ITEMS) + ".")
    return L
