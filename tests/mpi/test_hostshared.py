"""The host's shared cell (``hpcbench.runtime.hostshared``) at any world size: exclusive across ranks and threads,
and never waiting for a rank that is asleep outside MPI (the modelled network card of
``LinkTransport(scope="between_hosts")``)."""

from __future__ import annotations

import os
import threading
import time

import pytest
from mpi4py import MPI

from hpcbench.runtime.hostshared import HostSharedFloat


def _local(comm):
    return comm.Split_type(MPI.COMM_TYPE_SHARED)


def _add_ones(cell, times):
    for _ in range(times):
        with cell.locked():
            seen = cell.read()
            time.sleep(2e-4)                       # another rank or thread would read the same value here unlocked
            cell.write(seen + 1.0)


def test_read_modify_write_under_the_lock_loses_no_update(comm):
    """Every rank of the host, each from two threads at once, adds 1 forty times: nothing is lost."""
    local = _local(comm)
    cell = HostSharedFloat(local, initial=0.5)
    try:
        assert os.fstat(cell._fd).st_nlink == 0        # unlinked once every rank opened it: nothing left behind
        local.Barrier()
        other = threading.Thread(target=_add_ones, args=(cell, 20))
        other.start()
        _add_ones(cell, 20)
        other.join()
        local.Barrier()
        with cell.locked():
            assert cell.read() == 0.5 + 40 * local.size
    finally:
        cell.close()
        local.Free()
    with pytest.raises(ValueError):
        cell.read()


def test_the_lock_does_not_wait_for_a_sleeping_rank(comm):
    """The host's first rank sleeps 1 s outside MPI; the others take the lock 20 times meanwhile and finish
    before it wakes (an MPI window lock on that rank's window would wait for it to enter MPI)."""
    local = _local(comm)
    cell = HostSharedFloat(local)
    try:
        local.Barrier()
        if local.rank == 0:
            time.sleep(1.0)
            stamp = time.monotonic()
        else:
            _add_ones(cell, 20)
            stamp = time.monotonic()
        stamps = local.allgather(stamp)
        assert all(s < stamps[0] for s in stamps[1:]), stamps
    finally:
        cell.close()
        local.Free()
