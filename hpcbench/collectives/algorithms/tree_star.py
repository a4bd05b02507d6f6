"""Binary-tree-star allreduce (KungFu's BINARY_TREE_STAR strategy).

Ranks are grouped by host (or in contiguous blocks of ``local_size``). Within a
group every member sends to the group's lowest rank (star); the group leaders
reduce along a binary tree to rank 0 and broadcast back along it; each leader
then sends the result to its members. Mai et al., OSDI 2020.
"""

from __future__ import annotations

from hpcbench.collectives._core import start_allreduce
from hpcbench.collectives.algorithms.registry import register, register_cost
from hpcbench.collectives.algorithms._shapes import (star_bcast, star_bcast_cost, star_reduce,
                                                     star_reduce_cost, tree_bcast, tree_bcast_cost,
                                                     tree_reduce, tree_reduce_cost)

__all__ = ["binary_tree_star_allreduce", "binary_tree_star_cost", "groups"]


def groups(ctx, n: int, local_size: int | None) -> list[list[int]]:
    """The rank groups: contiguous blocks of ``local_size``, or by host when None."""
    if local_size is None:
        return ctx.host_groups()
    return [list(range(s, min(s + local_size, n))) for s in range(0, n, local_size)]


@register("binary_tree_star", deterministic=True,
          description="star inside each host, binary tree across hosts (KungFu, Mai et al. 2020)")
def binary_tree_star_allreduce(tr, tag, src, dst, red, ctx, local_size=None, **_):
    """Binary-tree-star allreduce of ``src`` into ``dst`` (see module docstring).

    Parameters
    ----------
    local_size : int, optional
        Ranks per group (contiguous blocks); by default ranks are grouped by
        host name.
    """
    if start_allreduce(tr, src, dst, red):
        return
    n = tr.world_size
    gs = groups(ctx, n, local_size)
    mine = next(g for g in gs if tr.rank in g)
    leaders = [g[0] for g in gs]
    yield from star_reduce(tr, tag, dst, red, ctx, mine)
    if tr.rank == mine[0]:
        yield from tree_reduce(tr, tag, dst, red, ctx, leaders)
        if tr.rank == leaders[0]:
            red.finalize(dst)
        yield from tree_bcast(tr, tag, dst, leaders)
    yield from star_bcast(tr, tag, dst, mine)


@register_cost("binary_tree_star")
def binary_tree_star_cost(nbytes, p, alpha, beta, gamma=0.0, local_size=None):
    """Star into each group of ``L = local_size`` ranks, pipelined binary tree over the
    ``G = ceil(p / L)`` leaders (reduce and broadcast), star out of each group:

    ``t = star_reduce(L) + tree_reduce(G) + tree_bcast(G) + star_bcast(L)``

    (see :mod:`~hpcbench.collectives.algorithms._shapes`). ``local_size=None``
    means one host, one group of ``p`` (the algorithm's default grouping by
    host name on a single node): the star.
    """
    if p <= 1 or nbytes <= 0:
        return 0.0
    size = p if local_size is None else min(int(local_size), p)
    leaders = -(-p // size)
    return (star_reduce_cost(nbytes, size, alpha, beta, gamma)
            + tree_reduce_cost(nbytes, leaders, alpha, beta, gamma)
            + tree_bcast_cost(nbytes, leaders, alpha, beta, gamma)
            + star_bcast_cost(nbytes, size, alpha, beta, gamma))
