"""Allreduce time over links of different speeds: the alpha-beta model with one ``beta`` per rank.

:func:`hpcbench.collectives.cost.predict_allreduce` prices an algorithm on
links that are all alike. With one slow link (KungFu's interference, the
link model's :class:`~hpcbench.collectives.linkmodel.SlowLink`) the
algorithms differ in how much the slow rank sends, and this module prices
each from the cost over such links that the algorithm registers
(``register_links_cost``: its phase costs, ``algorithms/_shapes.py``, with the
``beta`` of the links that carry each phase). In the link model each rank's
*outgoing* link serialises its messages and incoming links are free, so
with ``beta_r`` rank ``r``'s seconds per byte:

==================  ==================================================================
star                reduce: the members send at once, the slowest member's link paces
                    it (``max_{r != 0} beta_r``); broadcast: the root's link sends
                    ``p - 1`` copies (``beta_0``)
tree                reduce: every non-root rank sends its segments up, the slowest
                    of them paces the pipeline; broadcast: the inner nodes send down,
                    the slowest inner node paces it
weighted_shards     the busiest link, ``m beta_r (1 + (p - 2) w_r)``, or, where later,
                    the last contributions' arrival plus the last chunk's
                    allgather, with the shard weights ``w`` that
                    :func:`allreduce_options` gives for these links (its registered
                    ``links_options``; a slow rank
                    owns no shard and sends ``m``, the least any allreduce can)
every other         the registered model at ``max_r beta_r``: in ring, Rabenseifner
                    and recursive doubling every rank sends the same bytes in each
                    step and a step waits for its slowest message, so the slowest
                    link paces every step (exact); for binary-tree-star it is an
                    upper bound
==================  ==================================================================
"""

from __future__ import annotations

import math

import numpy as np

from hpcbench.collectives import algorithms as _alg
from hpcbench.collectives.cost import predict_allreduce

__all__ = ["predict_allreduce_links", "fastest_allreduce", "allreduce_options"]


def allreduce_options(algorithm: str, betas) -> dict:
    """The options of ``algorithm`` for links of ``betas`` s/byte, as :func:`predict_allreduce_links` priced it.

    Parameters
    ----------
    algorithm : str
        A registered algorithm.
    betas : array_like of float, shape (p,)
        Seconds per byte of each rank's outgoing link (> 0 where an algorithm tunes to them).

    Returns
    -------
    dict
        ``{"weights": (w_0, ..., w_{p-1})}`` for ``weighted_shards``
        (:func:`~hpcbench.collectives.algorithms.weighted_shards.shard_weights`);
        empty for algorithms without options.

    Examples
    --------
    >>> allreduce_options("weighted_shards", [4e-9, 1e-9, 1e-9])["weights"]
    (0.0, 0.5, 0.5)
    >>> allreduce_options("ring", [4e-9, 1e-9])
    {}
    """
    make = _alg.get(algorithm).links_options
    return make(betas) if make is not None else {}


def predict_allreduce_links(algorithm: str, nbytes: int, alpha_s: float, betas) -> float:
    """Predicted seconds of one allreduce of ``nbytes`` per rank when rank ``r``'s link takes ``betas[r]`` s/byte.

    Parameters
    ----------
    algorithm : str
        A registered algorithm with a cost model (not ``"auto"``).
    nbytes : int
        Bytes of each rank's buffer (>= 0).
    alpha_s : float
        Per-message latency in seconds (>= 0), the same on every link.
    betas : array_like of float, shape (p,)
        Seconds per byte of each rank's outgoing link (>= 0, finite).

    Returns
    -------
    float
        Seconds (module docstring); equal to
        :func:`~hpcbench.collectives.cost.predict_allreduce` when every
        ``betas[r]`` is the same. Reductions are taken as free (``gamma = 0``).

    Raises
    ------
    ValueError
        Unknown algorithm or one without a cost model, or a bad argument.

    Examples
    --------
    >>> b = [4e-9, 1e-9, 1e-9, 1e-9]          # rank 0's link 4x slower; m beta = 1 ms for 1e6 bytes
    >>> round(predict_allreduce_links("star", 10**6, 0.0, b) * 1e3, 6)   # 1 ms reduce + 3 x 4 ms broadcast
    13.0
    >>> round(predict_allreduce_links("ring", 10**6, 0.0, b) * 1e3, 6)   # 2 (p-1)/p m 4 beta
    6.0
    """
    b = np.asarray(betas, dtype=np.float64).reshape(-1)
    if b.size == 0 or not np.all(np.isfinite(b)) or np.any(b < 0):
        raise ValueError(f"betas: must be one finite number >= 0 per rank, got {betas!r}")
    if not (alpha_s >= 0 and math.isfinite(alpha_s)):
        raise ValueError(f"alpha_s: must be a finite number >= 0, got {alpha_s!r}")
    _alg.get(algorithm)       # unknown names: the registry's error, listing the algorithms
    if b.size == 1 or nbytes <= 0:
        return 0.0
    per_link = _alg.get(algorithm).links_cost
    if per_link is not None:
        return float(per_link(int(nbytes), float(alpha_s), b))
    return predict_allreduce(algorithm, int(nbytes), int(b.size), float(alpha_s), float(b.max()))


def fastest_allreduce(candidates, message_bytes, alpha_s: float, betas) -> tuple[str, dict]:
    """The candidate algorithm with the least predicted time for a step's messages, and every candidate's time.

    Parameters
    ----------
    candidates : sequence of str
        Registered algorithms with cost models; ties go to the earlier one.
    message_bytes : sequence of int
        Bytes of each message (bucket) a step reduces; the step's time is the sum of theirs.
    alpha_s, betas
        As :func:`predict_allreduce_links`.

    Returns
    -------
    (str, dict of str to float)
        The fastest candidate, and each candidate's predicted seconds per step.

    Raises
    ------
    ValueError
        No candidate, or as :func:`predict_allreduce_links`.
    """
    if not candidates:
        raise ValueError("candidates: give at least one algorithm")
    times = {a: sum(predict_allreduce_links(a, int(m), alpha_s, betas) for m in message_bytes) for a in candidates}
    best = min(candidates, key=lambda a: times[a])
    return best, times
