"""The producer and the drain's one bound (docs/behaviour.md, The producer,
Drain): a producer whose period is 60 s leaves at once on SIGTERM (its sleep
is sliced), exit 0; a producer stuck inside a 60 s step is named on stderr when the bound passes and
the process exits anyway (exit 1), within the bound plus a margin."""
import time

from harness import Failures, Server, wait_for

F = Failures()

with Server("host_check", "--port", "0", env={"M0_HOSTCHECK_PERIOD_MS": "60000", "M0_HOSTCHECK_STEP_SAYS": "1"}) as s:
    # Its first step said so and published (the beat counted): the producer is in its 60 s sleep now.
    began = wait_for(lambda: "host_check: step 1 begins" in s.stderr(), 10)
    F.check(began, f"a 60 s period: the producer took its first step\n{s.stderr()[-400:]}")
    t0 = time.monotonic()
    rc = s.stop(timeout=10)
    took = time.monotonic() - t0
    F.check(rc == 0, f"a 60 s period: exit 0 on SIGTERM (rc {rc})\n{s.stderr()[-400:]}")
    F.check(took < 1.0, f"a 60 s period leaves at once ({took:.2f}s)")

with Server("host_check", "--port", "0", "--drain-timeout-ms", "500",
            env={"M0_HOSTCHECK_STEP_MS": "60000", "M0_HOSTCHECK_PERIOD_MS": "100", "M0_HOSTCHECK_STEP_SAYS": "1"}) as s:
    began = wait_for(lambda: "host_check: step 1 begins" in s.stderr(), 10)  # it is inside its 60 s step now
    F.check(began, f"a 60 s step: the producer began its first step\n{s.stderr()[-400:]}")
    t0 = time.monotonic()
    rc = s.stop(timeout=10)
    took = time.monotonic() - t0
    err = s.stderr()
    F.check(rc == 1, f"a step past the bound: exit 1 (rc {rc})\n{err[-400:]}")
    F.check(took < 2.5, f"... within the 500 ms bound plus a margin ({took:.2f}s)")
    F.check("producer" in err and "inside its step" in err, f"... and the producer is named inside its step:\n{err[-400:]}")
F.done()
