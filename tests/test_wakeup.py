"""Signal wake-ups between ranks of one node (``hpcbench.runtime.wakeup``)."""

from __future__ import annotations

import sys
import time

import pytest

from mpitools import run_mpi

pytestmark = pytest.mark.mpi

SCRIPT = r"""
import sys, time
from hpcbench.runtime.wakeup import block_wake_signal
block_wake_signal()
from mpi4py import MPI
import numpy as np
from hpcbench.runtime.wakeup import Waker

comm = MPI.COMM_WORLD
waker = Waker(comm)
assert waker.enabled, "waker disabled although the signal was blocked before mpi4py"
assert waker.can_wake(1 - comm.rank)
buf = np.zeros(1, np.int64)
comm.Barrier()
if comm.rank == 1:
    req = comm.Irecv(buf, source=0, tag=5)
    t0 = time.perf_counter()
    waited = 0
    while not req.Test():
        waker.sleep(600.0)  # longer than the launch's time limit: only the signal can end it in time
        waited += 1
    print(f"WOKE {time.perf_counter() - t0:.3f} {waited}", flush=True)
else:
    time.sleep(0.3)
    comm.Send(np.array([42], np.int64), dest=1, tag=5)
    waker.wake(1)
comm.Barrier()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sigtimedwait and /proc are Linux features")
def test_signal_cuts_a_long_sleep_short(tmp_path):
    script = tmp_path / "wake.py"
    script.write_text(SCRIPT)
    proc = run_mpi(2, [str(script)], timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("WOKE"))
    elapsed = float(line.split()[1])
    # woken after the sender's 0.3 s; not by the 600 s timeout, or the launch (limit 120 s) would have failed: no
    # bound on wall time is needed
    assert 0.25 <= elapsed, line


def test_waker_disables_itself_when_threads_do_not_block_the_signal():
    """mpi4py imported first (its thread does not block the signal): plain sleeps, no wake-ups."""
    from mpi4py import MPI

    from hpcbench.runtime.wakeup import Waker

    w = Waker(MPI.COMM_SELF)
    assert not w.can_wake(0)
    t0 = time.perf_counter()
    w.sleep(0.02)
    assert time.perf_counter() - t0 >= 0.015
