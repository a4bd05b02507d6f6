"""Rank 0 hears of a failure on any rank before the job ends (a small failure-notification message).

Only rank 0 holds the results file, so only it can mark the file ``failed``;
but ``MPI_Abort`` from another rank kills rank 0 at once (MPICH's ``mpiexec``
sends SIGTERM and SIGKILL back to back). So a failing rank first tells rank 0:
:meth:`FailureChannel.notify` sends its exit status and message on a
communicator of its own and waits (at most ``timeout_s``) for rank 0's
acknowledgement; rank 0 listens from a thread (a posted receive polled every
:data:`POLL_S` seconds, so it hears even while its main thread computes or
waits in a blocking MPI call), runs its ``on_failure`` callback (the
lifecycle marks the file failed and flushes it) and acknowledges. Only then
does the failing rank end the job. The cost while nothing fails: one posted
receive on rank 0 and a test of it a few times a second.

How the job then ends depends on the launcher (``stop_all``): under MPICH's
``mpiexec`` the failing rank calls ``MPI_Abort(status)``, whose status
``mpiexec`` returns. Under ``srun`` ``MPI_Abort`` has every task killed
(SIGKILL: status 137, whatever the failure), so there the failing rank sends
a stop notice to every other rank instead and leaves with its own status;
every rank listens for it (``stop_all=True``) and leaves with status 1, so
``srun`` reports the failing rank's status (1, or 2 for an input error).

A rank that vanishes without running Python (SIGKILL, the out-of-memory
killer, a native crash) cannot notify; its file keeps ``running`` and the
heartbeat tells it apart (:mod:`hpcbench.results.status`).
"""

from __future__ import annotations

import os
import struct
import sys
import threading
import time
from typing import Callable

__all__ = ["FailureChannel", "POLL_S", "ACK_TIMEOUT_S"]

#: seconds between two tests of a listener's posted receives
POLL_S = 0.05
#: how long a failing rank waits for rank 0's acknowledgement before ending the job anyway
ACK_TIMEOUT_S = 2.0
_NOTICE, _ACK, _STOP = 1, 2, 3
_MAX_BYTES = 4096


def _leave(status: int) -> None:
    """End this process with ``status`` now (stdio flushed; no MPI call: the job is failing)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    os._exit(status)


class FailureChannel:
    """Failure notices from any rank to rank 0, and stop notices to every rank (collective to create).

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        The job's communicator (duplicated); must be called by all its ranks.
    on_failure : callable, optional
        Rank 0: ``on_failure(rank, status, message)``, run on the listening
        thread for each failure notice before it is acknowledged (exceptions
        are swallowed).
    stop_all : bool
        Every rank also listens for stop notices (:meth:`stop_others`) and
        leaves with status 1 on one (the ``srun`` path; rank 0 runs
        ``on_failure`` first). Otherwise only rank 0 listens.
    """

    def __init__(self, comm, on_failure: Callable[[int, int, str], None] | None = None,
                 stop_all: bool = False) -> None:
        self.comm = comm.Dup()
        self.rank = comm.rank
        self.on_failure = on_failure
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._reqs: dict = {}
        self._bufs: dict = {}
        tags = ([_NOTICE] if self.rank == 0 else []) + ([_STOP] if stop_all else [])
        if comm.size > 1 and tags:
            for tag in tags:
                self._post(tag)
            self._thread = threading.Thread(target=self._listen, name="hpcbench-failure-listener", daemon=True)
            self._thread.start()

    def _post(self, tag: int) -> None:
        from mpi4py import MPI

        buf = self._bufs.setdefault(tag, bytearray(_MAX_BYTES))
        self._reqs[tag] = self.comm.Irecv([buf, MPI.BYTE], source=MPI.ANY_SOURCE, tag=tag)

    def _listen(self) -> None:
        from mpi4py import MPI

        status = MPI.Status()
        while not self._stop.is_set():
            heard = False
            for tag in list(self._reqs):
                if not self._reqs[tag].Test(status):
                    continue
                heard = True
                source, count = status.Get_source(), status.Get_count(MPI.BYTE)
                data = bytes(self._bufs[tag][:count])
                code = struct.unpack("<i", data[:4])[0] if count >= 4 else 1
                text = data[4:].decode("utf-8", "replace")
                if self.on_failure is not None and self.rank == 0:
                    try:
                        self.on_failure(source, code, text)
                    except Exception:  # noqa: BLE001 - the acknowledgement matters more
                        pass
                if tag == _STOP:
                    _leave(1)
                self.comm.Send([b"\x01", MPI.BYTE], dest=source, tag=_ACK)
                self._post(tag)
            if not heard:
                self._stop.wait(POLL_S)

    @staticmethod
    def _payload(status: int, message: str) -> bytes:
        return struct.pack("<i", int(status)) + message.encode("utf-8", "replace")[:_MAX_BYTES - 4]

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

        send = self.comm.Isend([self._payload(status, message), MPI.BYTE], dest=0, tag=_NOTICE)
        ack = bytearray(1)
        recv = self.comm.Irecv([ack, MPI.BYTE], source=0, tag=_ACK)
        deadline = time.monotonic() + timeout_s
        while not recv.Test():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        send.Wait()
        return True

    def stop_others(self, status: int, message: str) -> None:
        """Send every other rank a stop notice (each leaves with status 1; rank 0 marks its file first).

        Waits until the notices have left this process (eager sends: at once).
        """
        from mpi4py import MPI

        payload = self._payload(status, message)
        sends = [self.comm.Isend([payload, MPI.BYTE], dest=r, tag=_STOP)
                 for r in range(self.comm.size) if r != self.rank]
        deadline = time.monotonic() + 2.0
        while not MPI.Request.Testall(sends) and time.monotonic() < deadline:
            time.sleep(0.005)

    def close(self) -> None:
        """Stop listening (the thread ends, posted receives are cancelled); idempotent.

        Call before ``MPI_Finalize`` (the lifecycle does; also registered with
        :func:`hpcbench.runtime.finalize.before_finalize`).
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        for req in self._reqs.values():
            req.Cancel()
            req.Wait()
        self._reqs.clear()
