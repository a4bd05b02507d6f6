"""Waiting on MPI requests without spinning.

MPICH's blocking calls busy-poll: on an oversubscribed node (64 ranks on 2
cores) every waiting rank burns a core's share that the computing ranks need.
The helpers here poll ``Request.Test`` and sleep between polls with an
exponentially growing interval, so that a waiting rank costs almost no CPU.
"""

from __future__ import annotations

import time
from typing import Sequence

from mpi4py import MPI

__all__ = ["Backoff", "sleep_wait", "sleep_waitall", "sleep_wait_streams", "sleep_barrier", "sleep_bcast",
           "sleep_gather", "sleep_allgather"]


class Backoff:
    """Growing sleep between polls.

    Parameters
    ----------
    spin : int, default 0
        Number of polls made back to back before the first sleep (keeps
        small-message latency low when a core is free).
    spin_s : float, default 0.0
        Also poll back to back until this many seconds have passed since the
        first pause (a spin bounded in time, whatever a poll costs); the
        spin ends when both ``spin`` polls and ``spin_s`` seconds are used.
    first_s : float, default 5e-5
        First sleep in seconds.
    max_s : float, default 2e-3
        Longest sleep in seconds; the interval doubles up to this value.
    sleep : callable, optional
        ``sleep(seconds)``; default ``time.sleep``. A
        :meth:`hpcbench.runtime.wakeup.Waker.sleep` lets a peer on the same
        node cut the sleep short.
    """

    __slots__ = ("spin", "spin_s", "first_s", "max_s", "_polls", "_sleep_s", "_sleep", "_t0")

    def __init__(self, spin: int = 0, first_s: float = 5e-5, max_s: float = 2e-3, sleep=None,
                 spin_s: float = 0.0) -> None:
        if spin < 0:
            raise ValueError(f"spin must be >= 0, got {spin!r}")
        if not 0.0 <= spin_s < 1.0:
            raise ValueError(f"spin_s must be in [0, 1) seconds, got {spin_s!r}")
        if not 0 < first_s <= max_s:
            raise ValueError(f"need 0 < first_s <= max_s, got first_s={first_s!r}, max_s={max_s!r}")
        self.spin = spin
        self.spin_s = spin_s
        self.first_s = first_s
        self.max_s = max_s
        self._sleep = sleep or time.sleep
        self.reset()

    def reset(self) -> None:
        """Start again from the shortest interval."""
        self._polls = 0
        self._sleep_s = self.first_s
        self._t0 = None

    def pause(self) -> None:
        """Wait once: nothing during the spin phase, then sleep and grow the interval."""
        self._polls += 1
        if self._polls <= self.spin:
            return
        if self.spin_s:
            now = time.perf_counter()
            if self._t0 is None:
                self._t0 = now
            if now - self._t0 < self.spin_s:
                return
        self._sleep(self._sleep_s)
        self._sleep_s = min(self._sleep_s * 2.0, self.max_s)


def sleep_wait(request: MPI.Request, backoff: Backoff | None = None,
               status: MPI.Status | None = None) -> None:
    """Complete ``request`` by polling ``Test`` and sleeping between polls.

    Parameters
    ----------
    request : mpi4py.MPI.Request
        Any nonblocking MPI request (``Isend``, ``Irecv``, ``Ibcast``, ``Ibarrier``...).
    backoff : Backoff, optional
        Sleep schedule; a fresh default one when omitted.
    status : mpi4py.MPI.Status, optional
        Filled in with the completed request's status.
    """
    backoff = backoff or Backoff()
    while not request.Test(status):
        backoff.pause()


def sleep_waitall(requests: Sequence[MPI.Request], backoff: Backoff | None = None) -> None:
    """Complete every request of ``requests``, sleeping between polls.

    A poll that completes some requests is followed at once by another (and
    the sleep interval starts again from the shortest): an MPI progress call
    drains only part of a burst of incoming messages, so sleeping while
    messages keep arriving would stretch the burst over many intervals.
    """
    backoff = backoff or Backoff()
    pending = [r for r in requests if r != MPI.REQUEST_NULL]
    while pending:
        done = MPI.Request.Testsome(pending)
        if done is None:  # MPI_UNDEFINED: no active request left
            return
        if done:  # Testsome sets the completed requests to REQUEST_NULL in place
            pending = [r for r in pending if r != MPI.REQUEST_NULL]
            backoff.reset()
            continue
        backoff.pause()


def sleep_wait_streams(streams: Sequence[Sequence[MPI.Request]], backoff: Backoff | None = None) -> None:
    """Complete every request of ``streams``, each a sequence that completes in order, sleeping between polls.

    A stream is the pieces of one transfer (:func:`hpcbench.runtime.chunked.isend_chunked`,
    :func:`~hpcbench.runtime.chunked.irecv_chunked`): MPI matches messages
    between two ranks on one tag in the order sent, so its pieces complete
    front to back. Each poll tests the first unfinished request of every
    stream and moves on while they complete, so a poll costs
    ``O(len(streams) + completed)``, where :func:`sleep_waitall` tests every
    pending request: with thousands of eager-sized pieces in flight (a
    1,300-client round's updates, 12.5 MB per executor in 8,000-byte pieces)
    its polls cost ``O(n)`` each and the transfer ``O(n^2)`` (248 ms against
    15 ms for 12.5 MB between two ranks). Any ``Test`` drives MPI's
    progress for every request, so the pieces behind a stream's head keep
    arriving while the head is tested. Correct whatever the completion order
    (a request completed out of order is found when its stream reaches it);
    the backoff starts again whenever a stream moves.
    """
    backoff = backoff or Backoff()
    heads = [[s, 0] for s in streams if len(s)]
    while heads:
        moved = False
        for head in heads:
            stream, i = head
            while i < len(stream) and stream[i].Test():
                i += 1
            moved |= i != head[1]
            head[1] = i
        heads = [h for h in heads if h[1] < len(h[0])]
        if moved:
            backoff.reset()
        elif heads:
            backoff.pause()


def sleep_barrier(comm: MPI.Comm, backoff: Backoff | None = None) -> None:
    """Barrier that sleeps while waiting (``Ibarrier`` plus polling).

    Must be called by all ranks of ``comm``.
    """
    sleep_wait(comm.Ibarrier(), backoff)


def sleep_bcast(comm: MPI.Comm, obj=None, root: int = 0, backoff: Backoff | None = None):
    """Broadcast a picklable object from ``root`` without spinning.

    The payload is pickled on ``root``; its byte length goes first through an
    ``Ibcast``, then the bytes. Must be called by all ranks of ``comm``.

    Returns
    -------
    object
        The root's object on every rank.
    """
    import pickle

    import numpy as np

    if comm.size == 1:
        return obj
    if comm.rank == root:
        data = np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), dtype=np.uint8)
        n = np.array([data.size], dtype=np.int64)
    else:
        n = np.zeros(1, dtype=np.int64)
    sleep_wait(comm.Ibcast(n, root=root), backoff)
    if comm.rank != root:
        data = np.empty(int(n[0]), dtype=np.uint8)
    sleep_wait(comm.Ibcast(data, root=root), backoff)
    if comm.rank == root:
        return obj
    return pickle.loads(data.tobytes())


def sleep_gather(comm: MPI.Comm, vec, root: int = 0, backoff: Backoff | None = None):
    """Gather every rank's float64 vector (same length everywhere) to ``root``, sleeping while it waits.

    Must be called by all ranks of ``comm``.

    Parameters
    ----------
    vec : ndarray of shape (k,), float64
        This rank's numbers.

    Returns
    -------
    ndarray of shape (comm.size, k), float64, or None
        Row ``r`` is rank ``r``'s vector, on ``root``; None elsewhere.
    """
    import numpy as np

    out = np.empty((comm.size, vec.size)) if comm.rank == root else None
    sleep_wait(comm.Igather([vec, MPI.DOUBLE], [out, MPI.DOUBLE] if out is not None else None, root=root), backoff)
    return out


def sleep_allgather(comm: MPI.Comm, vec, backoff: Backoff | None = None):
    """Every rank's float64 vector (same length everywhere) on every rank, sleeping while it waits.

    Must be called by all ranks of ``comm``.

    Returns
    -------
    ndarray of shape (comm.size, k), float64
        Row ``r`` is rank ``r``'s vector.
    """
    import numpy as np

    out = np.empty((comm.size, vec.size))
    sleep_wait(comm.Iallgather([vec, MPI.DOUBLE], [out, MPI.DOUBLE]), backoff)
    return out
