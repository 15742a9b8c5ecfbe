"""A frame reaches only the streams of its own channel: with a host_check
stream open on "beats", a frame published by m0pub on channel "elsewhere"
never shows up on it, while one published on "beats" does."""
import os
import subprocess
import tempfile

from harness import BIN, Failures, Server, wait_for
from test_streams import Stream

F = Failures()
run_dir = tempfile.mkdtemp()
os.chmod(run_dir, 0o700)
with Server("host_check", "--port", "0", "--run-dir", run_dir, env={"M0_HOSTCHECK_PERIOD_MS": "100000"}) as s:
    st = Stream(s.port, "/events")  # returns once the head is read: the loop holds the stream on "beats"

    def pub(channel, data):
        p = subprocess.run([os.path.join(BIN, "m0pub"), "--run-dir", run_dir, "--channel", channel, "--event", "note",
                            data], capture_output=True, text=True, timeout=10)
        return p.returncode

    F.check(pub("elsewhere", "not-for-beats") == 0, "published on elsewhere")
    F.check(pub("beats", "for-beats") == 0, "published on beats")
    # m0pub returns once the loop took its frame, so the elsewhere frame was handled before the beats one:
    # had it been sent to this stream it would be there, ahead of the beats frame, once that one arrives.
    wait_for(lambda: any("for-beats" in f.raw and "not-for-beats" not in f.raw for f in list(st.frames)), 10)
    raw = "\n".join(f.raw for f in st.frames)
    F.check("for-beats" in raw, f"the beats stream got the beats frame ({raw[-200:]!r})")
    F.check("not-for-beats" not in raw, f"the beats stream never got the elsewhere frame ({raw[-200:]!r})")
    st.close()
    F.check(s.stop() == 0, "exit 0")
F.done()
