"""Alpha-beta-gamma cost model of the allreduce algorithms.

Hockney's model as Thakur, Rabenseifner and Gropp use it ("Optimization of
collective communication operations in MPICH", IJHPCA 19(1), 2005): a message
of ``n`` bytes between two ranks takes ``alpha + n beta``; reducing ``n``
bytes takes ``n gamma``. The per-algorithm formulas live beside each
algorithm's code (its registered cost model,
:func:`hpcbench.collectives.algorithms.register_cost`) and follow its real step
structure and the semantics of the link model
(:mod:`hpcbench.collectives.linkmodel`): each rank's *outgoing* link
serialises its messages (``n beta`` each, one after the other) while the
latency ``alpha`` of back-to-back messages overlaps; incoming links are not
modelled. With ``m`` bytes per rank and ``p`` ranks (``p'`` the largest power
of two <= ``p``):

====================  ===========================================================
ring                  ``(2(p-1)-1) T + S s beta + alpha + (p-1)/p m gamma``,
                      ``T = max(S s beta, alpha + s beta)``, ``S`` segments of
                      ``s`` bytes per block of ``m/p`` (Patarasuk and Yuan 2009;
                      ``2(p-1)(alpha + m/p beta)`` for one segment)
rabenseifner          ``2 log2 p' alpha + 2 (p'-1)/p' m beta + (p'-1)/p' m gamma``
recursive_doubling    ``log2 p' (alpha + m beta + m gamma)``
tree                  pipelined binary tree reduce + broadcast
star                  ``2 alpha + p m beta + (p-1) m gamma``
binary_tree_star      star in groups, tree over group leaders
hierarchical          direct reduce-scatter in groups, shards allreduced across
                      groups, allgather in groups (two link levels:
                      :func:`hpcbench.collectives.linkcost.predict_allreduce_hosts`)
====================  ===========================================================

plus ``2 alpha + 2 m beta + m gamma`` for the fold of non-powers of two
(recursive doubling, Rabenseifner). See each function for the derivation.
"""

from __future__ import annotations

import math

from hpcbench.collectives import algorithms as _alg

__all__ = ["predict_allreduce", "link_beta"]


def link_beta(bits_per_s: float) -> float:
    """Seconds per byte of a link of ``bits_per_s`` bit/s: ``8 / bits_per_s``."""
    if not (bits_per_s > 0 and math.isfinite(bits_per_s)):
        raise ValueError(f"bits_per_s must be a positive finite rate, got {bits_per_s!r}")
    return 8.0 / bits_per_s


def predict_allreduce(algorithm: str, nbytes: int, world_size: int, alpha_s: float,
                      beta_s_per_byte: float, gamma_s_per_byte: float = 0.0, *,
                      local_size: int | None = None) -> float:
    """Predicted time of one allreduce, in seconds.

    Parameters
    ----------
    algorithm : str
        A registered algorithm (``ring``, ``rabenseifner``,
        ``recursive_doubling``, ``tree``, ``star``, ``binary_tree_star``) or
        ``"auto"`` (what :func:`hpcbench.collectives.choose_algorithm` picks
        for ``nbytes`` and ``world_size``).
    nbytes : int
        Bytes of each rank's buffer (>= 0).
    world_size : int
        Number of ranks (>= 1).
    alpha_s : float
        Per-message latency in seconds (>= 0).
    beta_s_per_byte : float
        Transfer time per byte in seconds (>= 0), e.g. ``link_beta(10e9)``
        = 8e-10 for 10 Gbit/s.
    gamma_s_per_byte : float, default 0.0
        Reduction time per byte (>= 0); 0 when the reduction is free next to
        the link (as over a modelled link with a CPU to spare).
    local_size : int, optional
        ``binary_tree_star`` and ``hierarchical`` only: ranks per group (default: one group, one host).

    Returns
    -------
    float
        Seconds; 0 for ``world_size == 1`` or an empty buffer.

    Raises
    ------
    ValueError
        Unknown algorithm, or a negative or non-finite argument.

    Examples
    --------
    >>> round(predict_allreduce("recursive_doubling", 1000, 4, 1e-5, 1e-9), 12)  # 2 (1e-5 + 1e-6)
    2.2e-05
    """
    for key, v in (("nbytes", nbytes), ("alpha_s", alpha_s), ("beta_s_per_byte", beta_s_per_byte),
                   ("gamma_s_per_byte", gamma_s_per_byte)):
        if not (v >= 0 and math.isfinite(v)):
            raise ValueError(f"{key}: must be a finite number >= 0, got {v!r}")
    if not (isinstance(world_size, int) and world_size >= 1):
        raise ValueError(f"world_size: must be an int >= 1, got {world_size!r}")
    if local_size is not None and not (isinstance(local_size, int) and local_size >= 1):
        raise ValueError(f"local_size: must be a positive int, got {local_size!r}")
    if algorithm == "auto":
        from hpcbench.collectives.api import choose_algorithm
        algorithm = choose_algorithm(int(nbytes), world_size)
    cost = _alg.get(algorithm).cost
    if cost is None:
        raise ValueError(f"algorithm: {algorithm!r} has no cost model")
    return float(cost(nbytes, world_size, alpha_s, beta_s_per_byte, gamma_s_per_byte,
                      local_size=local_size))
