"""Rank 0 hears of a failure on any rank before the job is aborted (a small failure-notification message).

Only rank 0 holds the results file, so only it can mark the file ``failed``;
but ``MPI_Abort`` from another rank kills rank 0 at once (MPICH's ``mpiexec``
sends SIGTERM and SIGKILL back to back). So a failing rank first tells rank 0:
:meth:`FailureChannel.notify` sends its exit status and message on a
communicator of its own and waits (at most ``timeout_s``) for rank 0's
acknowledgement; rank 0 listens from a thread (a posted receive polled every
:data:`POLL_S` seconds, so it hears even while its main thread computes or
waits in a blocking MPI call), runs its ``on_failure`` callback (the
lifecycle marks the file failed and flushes it) and acknowledges. Only then
does the failing rank abort. The cost while nothing fails: one posted
receive on rank 0 and a test of it a few times a second.

A rank that vanishes without running Python (SIGKILL, the out-of-memory
killer, a native crash) cannot notify; its file keeps ``running`` and the
heartbeat tells it apart (:mod:`hpcbench.results.status`).
"""

from __future__ import annotations

import struct
import threading
import time
from typing import Callable

__all__ = ["FailureChannel", "POLL_S", "ACK_TIMEOUT_S"]

#: seconds between two tests of rank 0's posted receive
POLL_S = 0.05
#: how long a failing rank waits for rank 0's acknowledgement before aborting anyway
ACK_TIMEOUT_S = 5.0
_NOTICE, _ACK = 1, 2
_MAX_BYTES = 4096


class FailureChannel:
    """Failure notices from any rank to rank 0 (collective to create: duplicates ``comm``).

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        The job's communicator; must be called by all its ranks.
    on_failure : callable, optional
        Rank 0: ``on_failure(rank, status, message)``, run on the listening
        thread for each notice before it is acknowledged (exceptions are swallowed).
    """

    def __init__(self, comm, on_failure: Callable[[int, int, str], None] | None = None) -> None:
        self.comm = comm.Dup()
        self.rank = comm.rank
        self.on_failure = on_failure
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._req = None
        if self.rank == 0 and comm.size > 1:
            self._buf = bytearray(_MAX_BYTES)
            self._post()
            self._thread = threading.Thread(target=self._listen, name="hpcbench-failure-listener", daemon=True)
            self._thread.start()

    def _post(self) -> None:
        from mpi4py import MPI

        self._req = self.comm.Irecv([self._buf, MPI.BYTE], source=MPI.ANY_SOURCE, tag=_NOTICE)

    def _listen(self) -> None:
        from mpi4py import MPI

        status = MPI.Status()
        while not self._stop.is_set():
            if not self._req.Test(status):
                self._stop.wait(POLL_S)
                continue
            source, count = status.Get_source(), status.Get_count(MPI.BYTE)
            data = bytes(self._buf[:count])
            code = struct.unpack("<i", data[:4])[0] if count >= 4 else 1
            text = data[4:].decode("utf-8", "replace")
            if self.on_failure is not None:
                try:
                    self.on_failure(source, code, text)
                except Exception:  # noqa: BLE001 - the acknowledgement matters more
                    pass
            self.comm.Send([b"\x01", MPI.BYTE], dest=source, tag=_ACK)
            self._post()

    def notify(self, status: int, message: str, timeout_s: float = ACK_TIMEOUT_S) -> bool:
        """Tell rank 0 that this rank fails with exit ``status``; wait for its acknowledgement.

        Returns
        -------
        bool
            True when rank 0 acknowledged within ``timeout_s`` seconds (its
            callback has run), False otherwise (or on rank 0 itself).
        """
        if self.rank == 0 or self.comm.size == 1:
            return False
        from mpi4py import MPI

        payload = struct.pack("<i", int(status)) + message.encode("utf-8", "replace")[:_MAX_BYTES - 4]
        send = self.comm.Isend([payload, MPI.BYTE], dest=0, tag=_NOTICE)
        ack = bytearray(1)
        recv = self.comm.Irecv([ack, MPI.BYTE], source=0, tag=_ACK)
        deadline = time.monotonic() + timeout_s
        while not recv.Test():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        send.Wait()
        return True

    def close(self) -> None:
        """Stop listening (rank 0: the thread ends and the posted receive is cancelled); idempotent.

        Call before ``MPI_Finalize`` (the lifecycle does; also registered with
        :func:`hpcbench.runtime.finalize.before_finalize`).
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._req is not None:
            self._req.Cancel()
            self._req.Wait()
            self._req = None
