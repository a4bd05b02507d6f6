"""Recursive doubling allreduce: ``log2(p')`` full-vector exchanges.

Thakur, Rabenseifner and Gropp (2005), section 4.5: at distance ``d = 1, 2,
..., p'/2`` every rank exchanges its whole vector with rank ``r XOR d`` and
reduces. Cost ``log2(p') (alpha + bytes/beta)``: the latency optimum, used for
small messages. Non-powers of two are folded as in
:mod:`~hpcbench.collectives.algorithms.rabenseifner`.

Both partners evaluate the same expression (lower-rank operand first), so
results are bitwise identical on all ranks, but each rank reduces on its own:
the registry marks it not deterministic in the strict sense of
``deterministic=True`` (reduce once, copy bytes).
"""

from __future__ import annotations

import math

from hpcbench.collectives._core import inline_backoff, start_allreduce, wait_inline
from hpcbench.collectives.algorithms import register, register_cost, register_inline
from hpcbench.collectives.algorithms.rabenseifner import (fold_cost, fold_in, fold_out, fold_setup,
                                                          real_rank)
from hpcbench.collectives.transport import Transport
from hpcbench.collectives.waiting import wait_mpi

__all__ = ["recursive_doubling_allreduce", "recursive_doubling_inline", "recursive_doubling_cost"]

@register("recursive_doubling", deterministic=False,
          description="recursive doubling, full vector each step (Thakur et al. 2005)")
def recursive_doubling_allreduce(tr, tag, src, dst, red, ctx, **_):
    """Recursive doubling allreduce of ``src`` into ``dst`` (see module docstring)."""
    if start_allreduce(tr, src, dst, red):
        return
    p2, rem, newrank, tmpbuf, tmp = fold_setup(tr, dst, ctx)
    try:
        yield from fold_in(tr, tag, dst, red, tmp, rem)
        if newrank >= 0:
            d = 1
            while d < p2:
                peer = real_rank(newrank ^ d, rem)
                rq = tr.irecv(tmp, peer, tag)
                sq = tr.isend(dst, peer, tag)
                if not (rq.test() and sq.test()):
                    yield [rq, sq]
                if newrank & d:
                    red.reduce(dst, tmp, dst)
                else:
                    red.reduce(dst, dst, tmp)
                d *= 2
            red.finalize(dst)
        yield from fold_out(tr, tag, dst, rem)
    finally:
        ctx.give(tmpbuf)


@register_inline("recursive_doubling")
def recursive_doubling_inline(tr, ctx, name, src, dst, uf) -> bool:
    """Inline form of :func:`recursive_doubling_allreduce` for power-of-two worlds.

    Same tag, messages and reduction expressions (lower rank's operand first),
    so the result bits are those of the generator; but the first step sends
    ``src`` itself and reduces straight into ``dst`` (no copy), the receive
    scratch is cached per (communicator, dtype, count), and with the plain
    :class:`~hpcbench.collectives.transport.Transport` the requests go straight
    to MPI (its counters still kept) and are waited for by
    :func:`~hpcbench.collectives.waiting.wait_mpi` (other transports:
    :func:`~hpcbench.collectives._core.wait_inline`; both two-phase).

    Parameters
    ----------
    src, dst : 1-D numpy arrays, same dtype and length
        ``dst`` may be ``src`` (in place).
    uf : numpy ufunc
        ``np.add``, ``np.maximum`` or ``np.minimum`` (``avg`` is finished by the caller).

    Returns
    -------
    bool
        False (nothing done) when the world size is not a power of two.
    """
    n = tr.size
    if n & (n - 1):                 # non-powers of two fold first: the generator does that
        return False
    tag = ctx.tag(name)
    if n == 1:
        if dst is not src:
            dst[...] = src
        return True
    r = tr.rank
    tmp = ctx.take_scratch(src.dtype, src.size)
    direct = type(tr) is Transport
    bo = None if direct else inline_backoff()
    send = src
    try:
        d = 1
        while d < n:
            peer = r ^ d
            if direct:
                wait_mpi(tr.exchange_raw(send, peer, tmp, peer, tag))
            else:
                rq = tr.irecv(tmp, peer, tag)
                sq = tr.isend(send, peer, tag)
                wait_inline((rq, sq), bo)
            if r & d:                   # lower rank's operand first, as the generator
                uf(tmp, send, out=dst)
            else:
                uf(send, tmp, out=dst)
            send = dst
            d <<= 1
    finally:
        ctx.keep_scratch(tmp)
    return True


@register_cost("recursive_doubling")
def recursive_doubling_cost(nbytes, p, alpha, beta, gamma=0.0, local_size=None):
    """Recursive doubling time (Thakur, Rabenseifner and Gropp 2005, section 4.5).

    ``log2 p'`` exchanges of the whole vector, each reduced:
    ``t = log2(p') (alpha + m beta + m gamma)``, plus the fold of
    :func:`~hpcbench.collectives.algorithms.rabenseifner.fold_cost` when ``p``
    is not a power of two.
    """
    if p <= 1 or nbytes <= 0:
        return 0.0
    p2, fold = fold_cost(nbytes, p, alpha, beta, gamma)
    return math.log2(p2) * (alpha + nbytes * beta + nbytes * gamma) + fold
