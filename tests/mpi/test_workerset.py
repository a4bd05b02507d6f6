"""The warm pool and the spawn path of the elastic worker set, in this MPI job (any world size 1..4)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI

from hpcbench.runtime.workerset import WorkerSet

CHILD = Path(__file__).with_name("workerset_child.py")


def _state(rank: int) -> np.ndarray:
    """Rank ``rank``'s state bytes (distinct per old rank, so the tests see who sent what)."""
    return np.full(1000, rank + 1, dtype=np.uint8)


def test_grow_shrink_and_close_move_state_from_the_old_workers(comm):
    """1 -> p: new rank r gets old rank 0's state; p -> 1: ranks 1.. return to the pool; 1 -> p again, then close:
    every rank leaves the pool. Header from rank 0; bytes counted on the senders."""
    p = comm.size
    if p < 2:
        pytest.skip("a grow needs at least 2 ranks (the warm pool is the ranks mpiexec started)")
    ws = WorkerSet(comm, 1)
    for _ in range(2):
        if comm.rank == 0:
            ph = ws.resize(p, {"step": 7}, _state(0))
            assert ph.kind == "grow" and ph.bytes_moved >= (p - 1) * 1000 and ws.comm.size == p
            assert ws.resize(1).kind == "shrink" and ws.comm.size == 1
        else:
            act = ws.wait()
            assert act.header == {"step": 7} and act.comm.size == p and act.comm.rank == comm.rank
            np.testing.assert_array_equal(act.state, _state(0))
            assert ws.resize(1).kind == "shrink" and not ws.active and ws.comm == MPI.COMM_NULL
    if comm.rank == 0:
        with pytest.raises(ValueError, match="need 1..%d" % p):
            ws.resize(p + 1)
        ws.close()
    else:
        assert ws.wait() is None
        ws.close()


def test_a_grow_from_two_takes_each_new_state_from_a_distinct_old_worker(comm):
    """2 -> p: new rank r receives old rank (r - 2) mod 2's bytes."""
    p = comm.size
    if p < 3:
        pytest.skip("needs 3 ranks (2 old workers and a new one)")
    ws = WorkerSet(comm, 2)
    if comm.rank < 2:
        ws.resize(p, None, _state(comm.rank))
    else:
        act = ws.wait()
        np.testing.assert_array_equal(act.state, _state((comm.rank - 2) % 2))
    ws.close()


@pytest.mark.skipif(not any(k in os.environ for k in ("PMI_RANK", "PMI_FD", "PMIX_RANK")),
                    reason="a singleton MPI process (pytest without mpiexec) has no process manager to start a "
                           "spawned child: MPI_Comm_spawn then waits for ever; runs under mpiexec -n 1..4")
def test_spawn_grow_starts_a_process_that_receives_the_state(comm):
    """MPI_Comm_spawn of one child (the PyPI mpich wheel's Hydra supports it): it joins the merged set as rank p,
    receives old rank 0's state and returns its sum; phases and bytes recorded."""
    from hpcbench.runtime.spawnpool import spawn_grow

    inter, merged, ph = spawn_grow(comm, 1, [str(CHILD)], {"hello": 1}, _state(comm.rank))
    try:
        assert merged.size == comm.size + 1 and merged.rank == comm.rank
        assert ph.process_start_s > 0 and ph.extra["imports_s"] >= 0 and ph.kind == "grow"
        total = merged.bcast(None, root=comm.size)        # the child's sum of what it received
        assert total == 1000 * 1
        assert ph.bytes_moved == (1000 if comm.rank == 0 else 0)
    finally:
        merged.Free()
        inter.Disconnect()


if __name__ == "__main__":      # pragma: no cover
    sys.exit("run under pytest")
