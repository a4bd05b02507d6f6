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

from hpcbench.collectives._core import start_allreduce
from hpcbench.collectives.algorithms.registry import register, register_cost, register_schedule
from hpcbench.collectives.algorithms.rabenseifner import (fold_cost, fold_in, fold_out, fold_setup,
                                                          real_rank)
from hpcbench.collectives.persistent import Span, Step

__all__ = ["recursive_doubling_allreduce", "recursive_doubling_schedule", "recursive_doubling_cost"]

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


@register_schedule("recursive_doubling")
def recursive_doubling_schedule(n: int, rank: int, count: int, itemsize: int,
                                inplace: bool) -> list[Step] | None:
    """Schedule of :func:`recursive_doubling_allreduce` for power-of-two worlds.

    The generator's messages and reduction expressions (lower rank's operand
    first), so its result bits; but the first step sends ``src`` itself and
    reduces straight into ``dst``, which spares the generator's opening copy.
    See :mod:`hpcbench.collectives.persistent`.

    Returns
    -------
    list of Step, or None
        ``log2 n`` steps; None when ``n`` is not a power of two (the fold of
        the other ranks is left to the generator).
    """
    if n & (n - 1):
        return None
    whole, tmp = Span("dst", 0, count), Span("tmp", 0, count)
    send = Span("src", 0, count)
    steps, d = [], 1
    while d < n:
        peer = rank ^ d
        red = (whole, tmp, send) if rank & d else (whole, send, tmp)
        d <<= 1
        steps.append(Step(peer, send, peer, tmp, red, whole if d >= n else None))
        send = whole
    return steps


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
