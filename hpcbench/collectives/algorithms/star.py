"""Star allreduce (KungFu's STAR strategy): all ranks send to rank 0, which
reduces in rank order and sends the result back.

Mai et al., "KungFu: Making training in distributed machine learning adaptive",
OSDI 2020. Cost ``2 (n-1) bytes / beta`` at the root (it is the bottleneck),
``2 alpha`` latency: good for few ranks and small messages.
"""

from __future__ import annotations

import numpy as np

from hpcbench.collectives._core import start_allreduce
from hpcbench.collectives.algorithms.registry import register, register_cost, register_links_cost
from hpcbench.collectives.algorithms._shapes import (reduce_then_bcast, star_bcast, star_bcast_cost,
                                                     star_reduce, star_reduce_cost)

__all__ = ["star_allreduce", "star_cost", "star_links_cost"]


@register("star", deterministic=True,
          description="everyone to rank 0, reduce, send back (KungFu STAR, Mai et al. 2020)")
def star_allreduce(tr, tag, src, dst, red, ctx, **_):
    """Star allreduce of ``src`` into ``dst`` (see module docstring)."""
    if start_allreduce(tr, src, dst, red):
        return
    yield from reduce_then_bcast(tr, tag, dst, red, ctx, star_reduce, star_bcast)


@register_cost("star")
def star_cost(nbytes, p, alpha, beta, gamma=0.0, local_size=None):
    """Star reduce then star broadcast over the link model:
    ``t = 2 alpha + p m beta + (p-1) m gamma``. The root's incoming link is
    not modelled (the ``p-1`` contributions arrive at once), its outgoing one
    sends the ``p-1`` results one after the other; with incoming links
    modelled too it would be ``2 (p-1) m beta`` (KungFu's analysis)."""
    return (star_reduce_cost(nbytes, p, alpha, beta, gamma)
            + star_bcast_cost(nbytes, p, alpha, beta, gamma))


@register_links_cost("star")
def star_links_cost(nbytes: int, alpha: float, betas: np.ndarray) -> float:
    """Seconds over links of different speeds, ``betas[r]`` s/byte of rank ``r``'s outgoing link
    (:mod:`hpcbench.collectives.linkcost`)."""
    p = betas.size
    return star_reduce_cost(nbytes, p, alpha, float(betas[1:].max())) + star_bcast_cost(nbytes, p, alpha,
                                                                                         float(betas[0]))
