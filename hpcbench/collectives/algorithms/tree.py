"""Binary-tree allreduce: reduce to rank 0 along a binary tree, then broadcast.

Rank ``i`` has children ``2i+1`` and ``2i+2``; both phases are pipelined by
segments. Cost about ``2 log2(n) (alpha + bytes/beta)`` without pipelining,
``2 (log2(n) alpha' + bytes/beta)`` with it for long messages. Contributions are
combined in a fixed order at each node, and the root's bytes are broadcast.
"""

from __future__ import annotations

from hpcbench.collectives._core import is_inplace
from hpcbench.collectives.algorithms import register
from hpcbench.collectives.algorithms._shapes import tree_bcast, tree_reduce

__all__ = ["tree_allreduce"]


@register("tree", deterministic=True,
          description="binary tree reduce to rank 0 then binary tree broadcast")
def tree_allreduce(tr, tag, src, dst, red, ctx, **_):
    """Binary-tree allreduce of ``src`` into ``dst`` (see module docstring)."""
    if not is_inplace(src, dst):
        dst[...] = src
    if tr.size == 1 or dst.size == 0:
        red.finalize(dst)
        return
    ranks = list(range(tr.size))
    yield from tree_reduce(tr, tag, dst, red, ctx, ranks)
    if tr.rank == 0:
        red.finalize(dst)
    yield from tree_bcast(tr, tag, dst, ranks)
