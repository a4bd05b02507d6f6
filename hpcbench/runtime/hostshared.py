"""One float64 shared by the ranks of a host, updated under an operating-system file lock.

The modelled network card of :class:`hpcbench.collectives.linkmodel.LinkTransport`
(``scope="between_hosts"``) keeps the time its host's link is free next in
such a cell: every rank of the host that sends across reads and advances it
under the lock. An MPI passive-target lock (``MPI_Win_lock`` on a shared
window) would do the same, but MPICH grants it only when the window's owner
enters the MPI library: a sleeping owner (waiting ranks sleep here, see
:mod:`hpcbench.runtime.wait`) delays every other rank's lock by up to its
sleep (measured here with two ranks, the owner sleeping in steps of 4 ms
between MPI calls: 5 ms a lock; sleeping 2 s without MPI calls: 2 s for the
first lock). ``fcntl.flock`` needs no progress from the other ranks; a
thread lock beside it keeps out a second thread of the same rank (``flock``
locks belong to the open file, which a rank's threads share).

The cell is a small file created by the host's first rank in a node-local
directory (``/dev/shm`` where it exists), mapped by every rank of the host
and unlinked once all have opened it, so nothing is left behind even when a
rank is killed. Linux and macOS (``fcntl``, ``mmap``).
"""

from __future__ import annotations

import fcntl
import mmap
import os
import struct
import tempfile
import threading
from contextlib import contextmanager

__all__ = ["HostSharedFloat"]

_DOUBLE = struct.Struct("=d")


def _node_local_dir() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()


class HostSharedFloat:
    """A float64 that the ranks of one host read and write under an exclusive lock.

    Collective over ``local``, the communicator of the host's ranks (every
    rank on the same host, e.g. ``comm.Split_type(MPI.COMM_TYPE_SHARED)`` or a
    split by host name). Every rank of ``local`` either has the cell or
    raises: a failure on one rank (the file cannot be created, opened or
    mapped) is agreed before any rank returns.

    Parameters
    ----------
    local : mpi4py.MPI.Comm
        The ranks of one host.
    initial : float, default 0.0
        The value before any rank writes it.

    Raises
    ------
    RuntimeError
        On every rank of ``local`` when a rank cannot create, open or map the
        cell (the message names the file or directory).

    Examples
    --------
    >>> cell = HostSharedFloat(local)                     # doctest: +SKIP
    >>> with cell.locked():                               # doctest: +SKIP
    ...     cell.write(max(cell.read(), now) + tx)
    """

    def __init__(self, local, initial: float = 0.0) -> None:
        self._fd = -1
        self._map = None
        self._thread_lock = threading.Lock()
        path, err = None, None
        if local.rank == 0:
            try:
                self._fd, path = tempfile.mkstemp(prefix="hpcbench-host-", dir=_node_local_dir())
                os.ftruncate(self._fd, _DOUBLE.size)
                os.pwrite(self._fd, _DOUBLE.pack(float(initial)), 0)
            except OSError as exc:
                err = f"cannot create the host's shared cell in {_node_local_dir()}: {exc}"
        path, first_err = local.bcast((path, err), root=0)
        if first_err is None:
            try:
                if local.rank != 0:
                    self._fd = os.open(path, os.O_RDWR)
                self._map = mmap.mmap(self._fd, _DOUBLE.size)
            except (OSError, ValueError) as exc:
                err = f"cannot open the host's shared cell {path} (are these ranks on one host?): {exc}"
        errors = [e for e in local.allgather(err) if e]
        if local.rank == 0 and path is not None:
            try:
                os.unlink(path)         # every rank has it open (or failed): no file outlives the job
            except OSError:
                pass
        local.Barrier()                 # and none returns before it is unlinked
        if errors:
            self.close()
            raise RuntimeError(errors[0])

    @contextmanager
    def locked(self):
        """Hold the host's exclusive lock (against the host's other ranks and this rank's other threads)."""
        with self._thread_lock:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                yield self
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def read(self) -> float:
        """The value (hold :meth:`locked` to read it consistently with a write)."""
        return _DOUBLE.unpack_from(self._map, 0)[0]

    def write(self, value: float) -> None:
        """Set the value (under :meth:`locked`)."""
        _DOUBLE.pack_into(self._map, 0, float(value))

    def close(self) -> None:
        """Unmap and close (local, idempotent); :meth:`read` and :meth:`write` raise ``ValueError`` after."""
        if self._map is not None:
            self._map.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
