"""Binary-tree allreduce: reduce to rank 0 along a binary tree, then broadcast.

Rank ``i`` has children ``2i+1`` and ``2i+2``; both phases are pipelined by
segments. Cost about ``2 log2(n) (alpha + bytes/beta)`` without pipelining,
``2 (log2(n) alpha' + bytes/beta)`` with it for long messages. Contributions are
combined in a fixed order at each node, and the root's bytes are broadcast.
"""

from __future__ import annotations

from hpcbench.collectives._core import start_allreduce
from hpcbench.collectives.algorithms import register
from hpcbench.collectives.algorithms._shapes import reduce_then_bcast, tree_bcast, tree_reduce

__all__ = ["tree_allreduce"]


@register("tree", deterministic=True,
          description="binary tree reduce to rank 0 then binary tree broadcast")
def tree_allreduce(tr, tag, src, dst, red, ctx, **_):
    """Binary-tree allreduce of ``src`` into ``dst`` (see module docstring)."""
    if start_allreduce(tr, src, dst, red):
        return
    yield from reduce_then_bcast(tr, tag, dst, red, ctx, tree_reduce, tree_bcast)
