"""m0pub: publishing into a running host's streams from outside
(docs/behaviour.md, Streams and the bus: outside publishers and the one shared counter; Run
directory and shared page; docs/apps.md, m0pub).

Proves, with host_check started with `--run-dir DIR` (a private 0700 dir):
- `m0pub --run-dir DIR --event note hello` exits 0 and prints an id; a stream
  on "beats" receives `event: note` / `data: hello` with `id:` first and that
  very id, which lies between the beats' ids (beats before it smaller, after
  it larger) and continues the one contiguous sequence (shared counter).
- Several DATA arguments are joined by spaces; with no DATA each line of
  standard input is one frame (two lines: two printed ids, two frames);
  without --event the frame has no event field; M0_RUN_DIR stands in for
  --run-dir.
- `--threads 2` and `--workers 2`: streams spanning both loops / workers (or
  the check fails as vacuous) all receive the frame with the same id.
- Refusals: `--run-dir /nonexistent` exits 78; `--bogus` exits 2; a reserved
  channel (`--channel m0.x`) exits 1; data with a newline exits 1; none of
  them puts a frame on the stream.
- Frame integrity: an event type containing a newline cannot smuggle a field
  (a second `id:` line) into the frame: m0pub refuses it (exit 1 or 2) and no
  frame on the stream carries more than one `id:` line.
"""
import shutil

from harness import Failures, Prefork, Server, m0pub, private_dir, wait_for
from test_streams import Stream, children, contiguous, reap_seen

F = Failures()


def frames_with(st, pred):
    return [f for f in list(st.frames) if not f.comment and pred(f)]


def single():
    label = "single"
    d = private_dir()
    try:
        with Server("host_check", "--port", "0", "--run-dir", d) as s:
            st = Stream(s.port, "/events")
            F.check(st.wait_frames(2, 2), f"{label}: the stream beats before the publish ({st.ids()})")
            rc, out, err = m0pub("--run-dir", d, "--event", "note", "hello")
            F.check(rc == 0 and out.strip().isdigit(), f"{label}: m0pub --event note hello -> exit 0 and an id "
                                                       f"(rc {rc}, {out!r}, {err!r})")
            printed = int(out.strip()) if out.strip().isdigit() else None
            notes = wait_for(lambda: frames_with(st, lambda f: f.event == "note"), 2)
            F.check(len(notes or []) == 1, f"{label}: the stream receives one `event: note` frame ({notes})")
            wait_for(lambda: notes and len([x for x in st.ids() if x > notes[0].id]) >= 2, 2)
            if notes:
                n = notes[0]
                F.check(n.data == "hello" and n.lines[1:] == ["event: note", "data: hello"],
                        f"{label}: the frame is `event: note` / `data: hello` ({n!r})")
                F.check(n.id_first and n.id == printed, f"{label}: `id:` first, the id m0pub printed ({n!r}, {printed})")
                beats = st.ids()
                lower = [x for x in beats if x < n.id]
                higher = [x for x in beats if x > n.id]
                F.check(lower and higher and n.id not in beats,
                        f"{label}: the note's id {n.id} lies between the beats' ({beats})")
                seq = [f.id for f in st.frames if not f.comment]
                F.check(contiguous(seq), f"{label}: beats and the note number from one counter: ids contiguous "
                                         f"({seq})")
            # DATA joined by spaces; no --event; M0_RUN_DIR.
            rc, out, err = m0pub("a", "b", "c", env={"M0_RUN_DIR": d})
            F.check(rc == 0 and out.strip().isdigit(), f"{label}: M0_RUN_DIR=DIR m0pub a b c -> 0 ({rc}, {out!r}, {err!r})")
            got = wait_for(lambda: frames_with(st, lambda f: f.data == "a b c"), 2)
            F.check(got and got[0].event is None and str(got[0].id) == out.strip(),
                    f"{label}: arguments joined by spaces, no event field without --event, the printed id ({got})")
            # Lines of standard input.
            rc, out, err = m0pub("--run-dir", d, "--event", "line", stdin=b"one\ntwo\n")
            ids = out.split()
            F.check(rc == 0 and len(ids) == 2, f"{label}: two stdin lines -> exit 0, two ids ({rc}, {out!r}, {err!r})")
            got = wait_for(lambda: len(frames_with(st, lambda f: f.event == "line")) == 2 and
                           frames_with(st, lambda f: f.event == "line"), 2)
            F.check(got and [f.data for f in got] == ["one", "two"] and [str(f.id) for f in got] == ids,
                    f"{label}: each stdin line is one frame, with the printed ids ({got}, {ids})")
            # Refusals put nothing on the stream.
            n0 = len(st.frames)
            rc, out, err = m0pub("--run-dir", "/nonexistent", "x")
            F.check(rc == 78, f"{label}: --run-dir /nonexistent -> 78 ({rc}, {err!r})")
            rc, out, err = m0pub("--bogus")
            F.check(rc == 2 and "usage" in err, f"{label}: --bogus -> 2 with the usage ({rc}, {err!r})")
            rc, out, err = m0pub("--run-dir", d, "--channel", "m0.x", "reserved")
            F.check(rc == 1, f"{label}: --channel m0.x (reserved) -> 1 ({rc}, {out!r}, {err!r})")
            rc, out, err = m0pub("--run-dir", d, "two\nlines")
            F.check(rc == 1, f"{label}: data with a newline -> 1 ({rc}, {out!r}, {err!r})")
            rc, out, err = m0pub("--run-dir", d, "--event", "note\nid: 999999", "smuggled")
            F.check(rc in (1, 2), f"{label}: an event type with a newline (`note\\nid: 999999`) is refused, exit 1 "
                                  f"or 2 (rc {rc}, {out!r}, {err!r})")
            b0 = len(st.beats())
            # A frame published after the refusals, awaited: anything they had sent was sent before it.
            rc, out, err = m0pub("--run-dir", d, "--event", "mark", "after-refusals")
            F.check(rc == 0 and wait_for(lambda: frames_with(st, lambda f: f.event == "mark"), 10),
                    f"{label}: a frame published after the refusals reaches the stream ({rc}, {err!r})")
            later = list(st.frames)[n0:]
            F.check(not [f for f in later if f.data in ("x", "reserved", "two", "lines")],
                    f"{label}: no refused frame reached the stream ({[f for f in later if not f.event == 'beat']})")
            forged = [f for f in st.frames if sum(k == "id" for k, _ in f.fields) > 1]
            F.check(not forged, f"{label}: no frame on the stream carries a second `id:` line ({forged})")
            wait_for(lambda: len(st.beats()) > max(5, b0) or st.eof, 10)
            F.check(len(st.beats()) > max(5, b0) and not st.eof,
                    f"{label}: the stream still beats (a beat after the refusals; {b0} -> {len(st.beats())})")
            st.close()
            F.check(s.stop() == 0, f"{label}: SIGTERM -> exit 0")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def spread(mode, cls, *args):
    label = mode
    d = private_dir()
    try:
        with cls("host_check", "--port", "0", "--run-dir", d, *args) as s:
            if cls is Prefork:
                wait_for(lambda: len(children(s.proc.pid)) == 2, 5)
            streams = [Stream(s.port, "/events") for _ in range(4)]
            workers = [st.worker for st in streams]
            F.check(set(workers) == {"0", "1"},
                    f"{label}: the streams span both loops, else this proves nothing (x-worker {workers})")
            F.check(all(st.wait_frames(2, 2) for st in streams), f"{label}: every stream beats")
            rc, out, err = m0pub("--run-dir", d, "--event", "note", "to", "all")
            F.check(rc == 0 and out.strip().isdigit(), f"{label}: m0pub -> 0 and an id ({rc}, {out!r}, {err!r})")
            got = [wait_for(lambda: frames_with(st, lambda f: f.event == "note"), 2) for st in streams]
            F.check(all(g and len(g) == 1 and g[0].data == "to all" and str(g[0].id) == out.strip() and g[0].id_first
                        for g in got),
                    f"{label}: every stream (x-worker {workers}) gets the note once, with the printed id {out.strip()} "
                    f"({got})")
            for i, st in enumerate(streams):
                wait_for(lambda: got[i] and [x for x in st.ids() if x > got[i][0].id], 2)
                seq = [f.id for f in st.frames if not f.comment]
                F.check(contiguous(seq) and got[i] and min(seq) < got[i][0].id < max(seq),
                        f"{label}: stream {i}: the note sits inside one contiguous sequence ({seq})")
                st.close()
            F.check(s.stop() == 0, f"{label}: SIGTERM -> exit 0:\n{s.stderr()}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


try:
    single()
    spread("threads 2", Server, "--threads", "2")
    spread("workers 2", Prefork, "--workers", "2")
finally:
    reap_seen()
F.done()
