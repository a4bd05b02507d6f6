"""Binary-tree allreduce: reduce to rank 0 along a binary tree, then broadcast.

Rank ``i`` has children ``2i+1`` and ``2i+2``; both phases are pipelined by
segments. Cost about ``2 log2(n) (alpha + bytes/beta)`` without pipelining,
``2 (log2(n) alpha' + bytes/beta)`` with it for long messages. Contributions are
combined in a fixed order at each node, and the root's bytes are broadcast.
"""

from __future__ import annotations

import numpy as np

from hpcbench.collectives._core import start_allreduce
from hpcbench.collectives.algorithms.registry import register, register_cost, register_links_cost
from hpcbench.collectives.algorithms._shapes import (reduce_then_bcast, tree_bcast, tree_bcast_cost,
                                                     tree_reduce, tree_reduce_cost)

__all__ = ["tree_allreduce", "tree_cost", "tree_links_cost"]


@register("tree", deterministic=True,
          description="binary tree reduce to rank 0 then binary tree broadcast")
def tree_allreduce(tr, tag, src, dst, red, ctx, **_):
    """Binary-tree allreduce of ``src`` into ``dst`` (see module docstring)."""
    if start_allreduce(tr, src, dst, red):
        return
    yield from reduce_then_bcast(tr, tag, dst, red, ctx, tree_reduce, tree_bcast)


@register_cost("tree")
def tree_cost(nbytes, p, alpha, beta, gamma=0.0, local_size=None):
    """Reduce then broadcast along the pipelined binary tree (256 KiB segments):
    :func:`~hpcbench.collectives.algorithms._shapes.tree_reduce_cost` plus
    :func:`~hpcbench.collectives.algorithms._shapes.tree_bcast_cost`; for one
    segment and ``p = 2``, ``2 (alpha + m beta) + m gamma``."""
    return (tree_reduce_cost(nbytes, p, alpha, beta, gamma)
            + tree_bcast_cost(nbytes, p, alpha, beta, gamma))


@register_links_cost("tree")
def tree_links_cost(nbytes: int, alpha: float, betas: np.ndarray) -> float:
    """Seconds over links of different speeds, ``betas[r]`` s/byte of rank ``r``'s outgoing link
    (:mod:`hpcbench.collectives.linkcost`)."""
    p = betas.size
    inner = [i for i in range(p) if 2 * i + 1 < p]      # the positions with children (the tree of _shapes)
    return (tree_reduce_cost(nbytes, p, alpha, float(betas[1:].max()))
            + tree_bcast_cost(nbytes, p, alpha, float(betas[inner].max())))
