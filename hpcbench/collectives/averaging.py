"""Decentralised model averaging on a flat parameter buffer (as in KungFu).

* Pair averaging (AD-PSGD, Lian et al., "Asynchronous decentralized parallel
  stochastic gradient descent", ICML 2018): at each step every rank averages
  its parameters with one peer. Peers come from a random perfect matching
  drawn from ``numpy.random.default_rng([seed, step])``; every rank draws the
  same matching, so pairs always agree. With an odd world size one rank per
  step sits out.
* Synchronous model averaging (SMA): all ranks average their models with an
  allreduce (``op="avg"``).
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from hpcbench.collectives._core import as_work, reducer, scratch_view
from hpcbench.collectives.api import _resolve, allreduce
from hpcbench.collectives.progress import Request, submit
from hpcbench.collectives.transport import Transport

__all__ = ["pair_schedule", "pair_average", "ipair_average", "sma_average"]


def pair_schedule(step: int, world_size: int, seed: int = 0) -> np.ndarray:
    """Partner of every rank at ``step`` (its own rank when it sits out).

    Parameters
    ----------
    step : int
        Training step (any non-negative int); different steps give different
        matchings.
    world_size : int
        World size.
    seed : int
        Seed shared by all ranks.

    Returns
    -------
    numpy.ndarray of int64, shape (world_size,)
        ``partner[partner[r]] == r`` for every ``r``.
    """
    if world_size < 1:
        raise ValueError(f"world_size: must be >= 1, got {world_size!r}")
    if step < 0:
        raise ValueError(f"step: must be >= 0, got {step!r}")
    perm = np.random.default_rng([int(seed), int(step)]).permutation(world_size)
    partner = np.arange(world_size, dtype=np.int64)
    for i in range(0, world_size - 1, 2):
        a, b = perm[i], perm[i + 1]
        partner[a], partner[b] = b, a
    return partner


def _pair_gen(params, step, seed, comm, transport, name):
    ctx, tr = _resolve(comm, transport)
    w = as_work(params, "params", writable=True)
    if w.kind == "int64":
        raise TypeError("params: pair averaging needs a float dtype, got int64")
    peer = int(pair_schedule(step, tr.world_size, seed)[tr.rank])
    tag = ctx.tag(name if name is not None else "__pair_average")
    red = reducer(w.kind, "avg", 2)

    def gen():
        if peer == tr.rank or w.arr.size == 0:
            return
        a = w.arr
        buf = ctx.borrow(a.nbytes)
        try:
            tmp = scratch_view(buf, a.dtype, a.size)
            reqs = [tr.irecv(tmp, peer, tag), tr.isend(a, peer, tag)]
            yield reqs
            if peer < tr.rank:       # same expression on both sides: bitwise equal result
                red.reduce(a, tmp, a)
            else:
                red.reduce(a, a, tmp)
            red.finalize(a)
        finally:
            ctx.give(buf)
    return gen(), peer


def pair_average(params, step: int, *, seed: int = 0, comm: MPI.Comm | None = None,
                 transport: Transport | None = None, name: str | None = None) -> int:
    """Average ``params`` in place with this step's peer (AD-PSGD pair averaging).

    Must be called by all ranks of ``comm`` with the same ``step``, ``seed``,
    count and dtype (ranks sitting out return at once).

    Parameters
    ----------
    params : numpy.ndarray or torch.Tensor, float32/float64/bfloat16
        Flat (or any shape, contiguous) parameter buffer, overwritten with
        ``(params + peer_params) / 2``.
    step : int
        Step number selecting the matching (:func:`pair_schedule`).
    seed : int
        Matching seed, the same on all ranks.

    Returns
    -------
    int
        The peer's rank (this rank's own when it sat out).

    Raises
    ------
    TypeError
        Integer or unsupported dtype.
    ValueError
        Negative ``step``, non-contiguous buffer.
    """
    gen, peer = _pair_gen(params, step, seed, comm, transport, name)
    from hpcbench.collectives._core import run_inline
    run_inline(gen)
    return peer


def ipair_average(params, step: int, *, seed: int = 0, comm: MPI.Comm | None = None,
                  transport: Transport | None = None, name: str | None = None) -> Request:
    """Nonblocking :func:`pair_average`; ``Request.result`` is ``params``.

    Must be called by all ranks of ``comm``.
    """
    gen, _peer = _pair_gen(params, step, seed, comm, transport, name)
    return submit(Request(gen, params, name))


def sma_average(params, *, comm: MPI.Comm | None = None, transport: Transport | None = None,
                algorithm: str = "auto", deterministic: bool = True, name: str | None = None):
    """Synchronous model averaging: ``params`` becomes the mean over all ranks, in place.

    Must be called by all ranks of ``comm``. An ``allreduce(op="avg")`` of the
    flat buffer; deterministic by default so every replica stays bitwise equal.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        ``params``.
    """
    w = as_work(params, "params", writable=True)
    if w.kind == "int64":
        raise TypeError("params: model averaging needs a float dtype, got int64")
    return allreduce(params, params, op="avg", algorithm=algorithm, deterministic=deterministic,
                     comm=comm, transport=transport, name=name)
