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

from hpcbench.collectives._core import start_allreduce
from hpcbench.collectives.algorithms import register
from hpcbench.collectives.algorithms.rabenseifner import fold_in, fold_out, fold_setup, real_rank

__all__ = ["recursive_doubling_allreduce"]


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
