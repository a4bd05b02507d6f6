"""Point-to-point transfers split into eager-sized messages.

An MPI library sends a message no larger than its *eager limit* at once and
completes the send locally; a larger one goes by *rendezvous*: the sender
announces it, waits for the receiver to match it, and only then moves the
data, so both ranks must call into MPI at each step of that handshake. On an
oversubscribed node where waiting ranks sleep between polls
(:mod:`hpcbench.runtime.wait`), every handshake step costs up to one poll
interval plus a trip through the scheduler's run queue. Splitting a buffer
into messages below the eager limit removes the handshake: the sender's
requests complete without the receiver, and the receiver finds the whole
buffer already there when it next polls.

Eager limits differ by library and transport. With the ``mpich`` 5.0 wheel's
shared-memory path we measured 8,100-byte messages sent eagerly and
8,150-byte ones by rendezvous; Open MPI's shared-memory transport uses 4 KiB.
The default chunk, 8,000 bytes, is set with ``HPCBENCH_EAGER_BYTES``; a chunk
above the library's limit is still correct, only slower.

A buffer of more than :data:`MAX_PIECES` pieces goes as one message instead:
its receiver is already waiting for it (a round's block of client updates),
and past a few hundred pieces posting and testing them costs more than the
handshake saves. 12.5 MB between two ranks on one node took 15 ms as 1,563
eager pieces against 3.3 ms as one message (MPICH 5.0.2's shared memory,
with the receiver's polls already costing O(1) each,
:func:`hpcbench.runtime.wait.sleep_wait_streams`), and the receiver spent
another 15 ms posting the 1,563 receives.
"""

from __future__ import annotations

import os

import numpy as np
from mpi4py import MPI

__all__ = ["MAX_PIECES", "eager_bytes", "isend_chunked", "irecv_chunked"]

_DEFAULT_EAGER_BYTES = 8000

#: most eager-sized pieces of one transfer; a larger buffer (with the default chunk) goes as one message
MAX_PIECES = 64


def eager_bytes() -> int:
    """Chunk size in bytes: ``HPCBENCH_EAGER_BYTES`` or 8,000.

    Raises
    ------
    ValueError
        ``HPCBENCH_EAGER_BYTES`` is not a positive integer.
    """
    raw = os.environ.get("HPCBENCH_EAGER_BYTES")
    if raw is None:
        return _DEFAULT_EAGER_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"HPCBENCH_EAGER_BYTES must be a positive integer, got {raw!r}")
    return value


def _pieces(buf: np.ndarray, chunk: int | None):
    if not buf.flags.c_contiguous:
        raise ValueError("chunked transfers need a C-contiguous buffer")
    view = buf.reshape(-1).view(np.uint8)
    step = chunk or eager_bytes()
    if chunk is None and view.nbytes > MAX_PIECES * step:
        step = view.nbytes
    return [view[lo:lo + step] for lo in range(0, max(view.nbytes, 1), step)]


def isend_chunked(comm: MPI.Comm, buf: np.ndarray, dest: int, tag: int,
                  chunk: int | None = None) -> list[MPI.Request]:
    """Send ``buf`` as consecutive messages of at most ``chunk`` bytes.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
    buf : ndarray, any dtype, C-contiguous
        Not to be modified until every returned request completes.
    dest, tag : int
        As for ``Isend``; every piece carries the same tag.
    chunk : int, optional
        Bytes per message (default :func:`eager_bytes`, or the whole buffer
        when that would make more than :data:`MAX_PIECES` pieces).

    Returns
    -------
    list of mpi4py.MPI.Request
        One request per piece (one empty message for an empty buffer), in
        order: they complete front to back (wait with
        :func:`hpcbench.runtime.wait.sleep_wait_streams`).

    Notes
    -----
    MPI's non-overtaking rule (messages between one pair of ranks on one
    communicator and tag are matched in the order sent) puts the pieces back
    in order when the receiver posts :func:`irecv_chunked` with the same
    ``chunk``.
    """
    return [comm.Isend(piece, dest=dest, tag=tag) for piece in _pieces(buf, chunk)]


def irecv_chunked(comm: MPI.Comm, buf: np.ndarray, source: int, tag: int,
                  chunk: int | None = None) -> list[MPI.Request]:
    """Receive into ``buf`` what :func:`isend_chunked` sent with the same ``chunk``.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
    buf : ndarray, C-contiguous
        Same byte length as the sender's buffer.
    source, tag : int
    chunk : int, optional

    Returns
    -------
    list of mpi4py.MPI.Request
    """
    return [comm.Irecv(piece, source=source, tag=tag) for piece in _pieces(buf, chunk)]
