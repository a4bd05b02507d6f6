"""Star allreduce (KungFu's STAR strategy): all ranks send to rank 0, which
reduces in rank order and sends the result back.

Mai et al., "KungFu: Making training in distributed machine learning adaptive",
OSDI 2020. Cost ``2 (n-1) bytes / beta`` at the root (it is the bottleneck),
``2 alpha`` latency: good for few ranks and small messages.
"""

from __future__ import annotations

from hpcbench.collectives._core import is_inplace
from hpcbench.collectives.algorithms import register
from hpcbench.collectives.algorithms._shapes import star_bcast, star_reduce

__all__ = ["star_allreduce"]


@register("star", deterministic=True,
          description="everyone to rank 0, reduce, send back (KungFu STAR, Mai et al. 2020)")
def star_allreduce(tr, tag, src, dst, red, ctx, **_):
    """Star allreduce of ``src`` into ``dst`` (see module docstring)."""
    if not is_inplace(src, dst):
        dst[...] = src
    if tr.size == 1 or dst.size == 0:
        red.finalize(dst)
        return
    ranks = list(range(tr.size))
    yield from star_reduce(tr, tag, dst, red, ctx, ranks)
    if tr.rank == 0:
        red.finalize(dst)
    yield from star_bcast(tr, tag, dst, ranks)
