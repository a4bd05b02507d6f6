"""Arrays read once per node and mapped read-only by every rank of it (MPI shared memory).

A dataset of 60,000 images is 47 MB as uint8; held by each of 64 ranks of a
node it would be 3 GB. :func:`node_shared` has the node's first rank (of the
shared-memory split of the communicator, ``MPI_COMM_TYPE_SHARED``) run the
loader, allocates one ``MPI_Win_allocate_shared`` window per array on that
rank, copies the arrays in, and gives every rank of the node numpy views of
the windows (``MPI_Win_shared_query``), marked read-only. The windows are
freed before ``MPI_Finalize`` (:mod:`hpcbench.runtime.finalize`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping

import numpy as np

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["node_shared"]

_WINDOWS: list = []   # every window this process holds, freed once before MPI finalizes


def _free_windows() -> None:
    while _WINDOWS:
        _WINDOWS.pop().Free()


def node_shared(comm: MPI.Comm | None, load: Callable[[], Mapping[str, np.ndarray]],
                errors: tuple[type[BaseException], ...] = (ValueError, OSError)) -> dict[str, np.ndarray]:
    """``load()``'s arrays, loaded by one rank per node and shared by the node's ranks.

    Collective over ``comm`` (every rank must call it with the same loader).

    Parameters
    ----------
    comm : mpi4py.MPI.Comm or None
        None or one rank: ``load()`` is simply called.
    load : callable
        ``load() -> {name: ndarray}`` (numeric dtypes; any shapes).
    errors : tuple of exception types
        What ``load`` may raise for bad input: the node's other ranks raise
        the same type with the same message (any other type is raised there
        as ``ValueError``).

    Returns
    -------
    dict of str to ndarray
        The arrays; on a multi-rank ``comm``, read-only views of node-shared memory.

    Raises
    ------
    Exception
        What ``load`` raised, on every rank of the node.
    """
    if comm is None or comm.size == 1:
        return dict(load())
    from mpi4py import MPI

    from hpcbench.runtime.finalize import before_finalize
    from hpcbench.runtime.wait import Backoff, sleep_barrier, sleep_bcast

    backoff = Backoff(first_s=1e-3, max_s=5e-2)
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    arrays = error = None
    if node.rank == 0:
        try:
            arrays = {k: np.ascontiguousarray(v) for k, v in load().items()}
        except Exception as exc:  # every rank of the node must leave the broadcast, then raise
            error = exc
    meta = None if arrays is None else [(k, v.shape, v.dtype.str) for k, v in arrays.items()]
    message = None if error is None else (type(error).__name__, str(error))
    meta, message = sleep_bcast(node, (meta, message), backoff=backoff)
    if message is not None:
        node.Free()
        if error is not None:
            raise error
        kind = next((e for e in errors if e.__name__ == message[0]), ValueError)
        raise kind(message[1])
    if not _WINDOWS:
        before_finalize(_free_windows)
    out = {}
    for name, shape, dtype in meta:
        dt = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        win = MPI.Win.Allocate_shared(max(nbytes, 1) if node.rank == 0 else 0, 1, comm=node)
        _WINDOWS.append(win)
        buf, _ = win.Shared_query(0)
        view = np.frombuffer(buf, dtype=np.uint8, count=nbytes).view(dt).reshape(shape)
        if node.rank == 0:
            view[...] = arrays[name]
        out[name] = view
    del arrays
    sleep_barrier(node, backoff)   # the node's first rank has written every window
    for view in out.values():
        view.flags.writeable = False
    node.Free()
    return out
