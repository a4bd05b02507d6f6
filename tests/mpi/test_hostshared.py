"""The host's shared cell (``hpcbench.runtime.hostshared``) at any world size: exclusive, and never waiting
for a rank that is asleep outside MPI (the modelled network card of ``LinkTransport(scope="between_hosts")``)."""

from __future__ import annotations

import os
import time

from mpi4py import MPI

from hpcbench.runtime.hostshared import HostSharedFloat


def _local(comm):
    return comm.Split_type(MPI.COMM_TYPE_SHARED)


def test_read_modify_write_under_the_lock_loses_no_update(comm):
    local = _local(comm)
    cell = HostSharedFloat(local, initial=0.5)
    try:
        assert os.fstat(cell._fd).st_nlink == 0        # unlinked once every rank opened it: nothing left behind
        local.Barrier()
        for _ in range(40):
            with cell.locked() as v:
                seen = float(v[0])
                time.sleep(2e-4)                       # another rank would read the same value here without the lock
                v[0] = seen + 1.0
        local.Barrier()
        with cell.locked() as v:
            assert v[0] == 0.5 + 40 * local.size
    finally:
        cell.close()
        local.Free()


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
            for _ in range(20):
                with cell.locked() as v:
                    v[0] += 1.0
            stamp = time.monotonic()
        stamps = local.allgather(stamp)
        assert all(s < stamps[0] for s in stamps[1:]), stamps
    finally:
        cell.close()
        local.Free()
