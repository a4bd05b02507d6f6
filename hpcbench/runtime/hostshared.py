"""One float64 shared by the ranks of a host, updated under an operating-system file lock.

The modelled network card of :class:`hpcbench.collectives.linkmodel.LinkTransport`
(``scope="between_hosts"``) keeps the time its host's link is free next in
such a cell: every rank of the host that sends across reads and advances it
under the lock. An MPI passive-target lock (``MPI_Win_lock`` on a shared
window) would do the same, but MPICH grants it only when the window's owner
enters the MPI library: a sleeping owner (waiting ranks sleep here, see
:mod:`hpcbench.runtime.wait`) delays every other rank's lock by up to its
sleep, 5 ms per lock measured with a 4 ms sleep. ``fcntl.flock`` needs no
progress from the other ranks.

The cell is a small file created by the host's first rank in a node-local
directory (``/dev/shm`` where it exists), mapped by every rank of the host
and unlinked once all have opened it, so nothing is left behind even when a
rank is killed. Linux and macOS (``fcntl``, ``mmap``).
"""

from __future__ import annotations

import fcntl
import mmap
import os
import tempfile
from contextlib import contextmanager

import numpy as np

__all__ = ["HostSharedFloat"]


def _node_local_dir() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()


class HostSharedFloat:
    """A float64 that the ranks of one host read and write under an exclusive lock.

    Collective over ``local``, the communicator of the host's ranks (every
    rank on the same host, e.g. ``comm.Split_type(MPI.COMM_TYPE_SHARED)`` or a
    split by host name).

    Parameters
    ----------
    local : mpi4py.MPI.Comm
        The ranks of one host.
    initial : float, default 0.0
        The value before any rank writes it.

    Raises
    ------
    RuntimeError
        On every rank of ``local`` when the first rank cannot create the cell
        or another cannot open it (the message names the directory).

    Examples
    --------
    >>> cell = HostSharedFloat(local)                     # doctest: +SKIP
    >>> with cell.locked() as v:                          # doctest: +SKIP
    ...     v[0] = max(v[0], now) + tx
    """

    def __init__(self, local, initial: float = 0.0) -> None:
        self._fd = -1
        self._map = None
        path, err = None, None
        if local.rank == 0:
            try:
                fd, path = tempfile.mkstemp(prefix="hpcbench-host-", dir=_node_local_dir())
                os.ftruncate(fd, 8)
                os.pwrite(fd, np.float64(initial).tobytes(), 0)
                self._fd = fd
            except OSError as exc:
                err = f"cannot create the host's shared cell in {_node_local_dir()}: {exc}"
        path, err = local.bcast((path, err), root=0)
        if err is None and local.rank != 0:
            try:
                self._fd = os.open(path, os.O_RDWR)
            except OSError as exc:
                err = f"cannot open the host's shared cell {path} (are these ranks on one host?): {exc}"
        errors = [e for e in local.allgather(err) if e]
        if local.rank == 0 and path is not None:
            os.unlink(path)             # every rank has it open (or failed): no file outlives the job
        local.Barrier()                 # and none returns before it is unlinked
        if errors:
            self.close()
            raise RuntimeError(errors[0])
        self._map = mmap.mmap(self._fd, 8)
        self._value = np.ndarray((1,), dtype=np.float64, buffer=self._map)

    @contextmanager
    def locked(self):
        """Hold the host's exclusive lock; yields the cell as a (1,) float64 array to read and write."""
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            yield self._value
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Unmap and close (local, idempotent)."""
        if self._map is not None:
            self._value = None
            self._map.close()
            self._map = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
