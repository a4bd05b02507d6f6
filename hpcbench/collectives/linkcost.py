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

Two link levels, inside a host and between hosts (:class:`HostLinks`,
:func:`predict_allreduce_hosts`), price the host-aware algorithms
(``hierarchical``, ``binary_tree_star``) phase by phase at the level each
phase runs on, a host's ranks sharing its one link to the other hosts
(messages its ranks send across at once take turns on it); :meth:`HostLinks.betas` gives the per-rank view the
policies take (the slow links are the ones between hosts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hpcbench.collectives import algorithms as _alg
from hpcbench.collectives.algorithms._shapes import (star_bcast_cost, star_reduce_cost, tree_bcast_cost,
                                                     tree_reduce_cost)
from hpcbench.collectives.cost import predict_allreduce

__all__ = ["predict_allreduce_links", "fastest_allreduce", "allreduce_options", "HostLinks",
           "predict_allreduce_hosts", "fastest_allreduce_hosts"]


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


@dataclass(frozen=True)
class HostLinks:
    """Two link levels: inside a host (shared memory) and between hosts (the network), with the ranks per host.

    Attributes
    ----------
    ranks_per_host : tuple of int
        Ranks of each host in rank order (hosts hold contiguous ranks), each >= 1.
    intra_alpha_s, intra_beta : float
        Latency (s) and seconds per byte of a message between two ranks of one host.
    inter_alpha_s, inter_beta : float
        The same between ranks of different hosts (``link_beta(1e9)`` for 1 Gbit/s): the link of a *host*
        (its network card), shared by its ranks (:func:`predict_allreduce_hosts`).
    """

    ranks_per_host: tuple
    intra_alpha_s: float
    intra_beta: float
    inter_alpha_s: float
    inter_beta: float

    def __post_init__(self) -> None:
        sizes = tuple(int(k) for k in self.ranks_per_host)
        if not sizes or min(sizes) < 1:
            raise ValueError(f"ranks_per_host: one count >= 1 per host, got {self.ranks_per_host!r}")
        object.__setattr__(self, "ranks_per_host", sizes)
        for key in ("intra_alpha_s", "intra_beta", "inter_alpha_s", "inter_beta"):
            v = getattr(self, key)
            if not (v >= 0 and math.isfinite(v)):
                raise ValueError(f"{key}: must be a finite number >= 0, got {v!r}")

    @property
    def ranks(self) -> int:
        """World size."""
        return sum(self.ranks_per_host)

    def betas(self) -> np.ndarray:
        """Each rank's slowest outgoing link, s/byte (the inter-host one once there are several hosts): what
        :func:`predict_allreduce_links` and the policies take."""
        b = self.inter_beta if len(self.ranks_per_host) > 1 else self.intra_beta
        return np.full(self.ranks, max(b, self.intra_beta))


#: algorithms whose steps send across hosts from at most one rank per host (contiguous hosts)
_ONE_CROSSING_PER_HOST = frozenset({"ring"})
#: algorithms priced step by step from their registered schedule where it exists (power-of-two worlds)
_PRICED_BY_SCHEDULE = ("recursive_doubling", "rabenseifner")


def _scheduled_hosts(algorithm: str, nbytes: int, links: HostLinks, gamma: float) -> float | None:
    """Seconds of ``algorithm`` from its schedule, step by step over the two levels; None without a schedule.

    Every rank's step ``k`` is taken to run together (the schedule's ranks
    wait for each step's receive and send before the next): a step lasts its
    slowest part, the longest message inside a host (``a_i + b b_i``) or the
    busiest card (``a_e + B b_e``, ``B`` the bytes the host's ranks send
    across in that step, one after the other), plus its longest reduction
    (``gamma`` per byte reduced).
    """
    sched = _alg.get(algorithm).schedule
    p = links.ranks
    if sched is None:
        return None
    steps = [sched(p, r, int(nbytes), 1, False) for r in range(p)]      # one-byte elements: spans in bytes
    if any(s is None for s in steps) or len({len(s) for s in steps}) != 1:
        return None
    host = np.repeat(np.arange(len(links.ranks_per_host)), links.ranks_per_host)
    a_i, b_i, a_e, b_e = links.intra_alpha_s, links.intra_beta, links.inter_alpha_s, links.inter_beta
    total = 0.0
    for k in range(len(steps[0])):
        card = np.zeros(len(links.ranks_per_host))
        crossing = np.zeros(len(links.ranks_per_host), dtype=bool)
        inside = reduced = 0.0
        for r in range(p):
            st = steps[r][k]
            size = st.send.hi - st.send.lo
            if host[st.dest] == host[r]:
                inside = max(inside, a_i + size * b_i)
            else:
                card[host[r]] += size
                crossing[host[r]] = True
            if st.reduce is not None:
                reduced = max(reduced, (st.reduce[0].hi - st.reduce[0].lo) * gamma)
        across = float(np.max(np.where(crossing, a_e + card * b_e, 0.0)))
        total += max(inside, across) + reduced
    return total


def _tree_star_hosts(nbytes: int, links: HostLinks, gamma: float) -> float:
    local, hosts = max(links.ranks_per_host), len(links.ranks_per_host)
    a_i, b_i, a_e, b_e = links.intra_alpha_s, links.intra_beta, links.inter_alpha_s, links.inter_beta
    return (star_reduce_cost(nbytes, local, a_i, b_i, gamma) + tree_reduce_cost(nbytes, hosts, a_e, b_e, gamma)
            + tree_bcast_cost(nbytes, hosts, a_e, b_e, gamma) + star_bcast_cost(nbytes, local, a_i, b_i, gamma))


def predict_allreduce_hosts(algorithm: str, nbytes: int, links: HostLinks, gamma_s_per_byte: float = 0.0) -> float:
    """Predicted seconds of one allreduce of ``nbytes`` per rank over two link levels.

    A host's ranks share one link to the other hosts (its network card):
    messages that several ranks of a host send across at the same time take
    turns on it, so a phase in which ``k`` ranks of a host each send ``b``
    bytes across costs ``k b beta_inter``, not ``b beta_inter``. Per
    algorithm, from how it sends (``L`` the largest host's ranks):

    ==================  ==============================================================
    hierarchical        reduce-scatter and allgather inside the hosts at the intra
                        link, the shards' allreduce at the inter link; the ``S``
                        shard owners of a host (``S`` the smallest host's ranks)
                        cross at once, so the card carries ``S`` times one
                        owner's bytes: ``2 (a_e + (G-1)/G m b_e)``
                        (:func:`~hpcbench.collectives.algorithms.hierarchical.hierarchical_levels_cost`)
    binary_tree_star    the stars inside the hosts at the intra link, the tree over
                        the host leaders at the inter link: one rank per host
                        crosses, the card is not shared
    ring                the registered model at the slower level's link: hosts hold
                        contiguous ranks, so in every step only the last rank of
                        each host sends across (one crossing per card) and the step
                        waits for it; exact
    recursive_doubling, from the registered schedule (power-of-two worlds), step by
    rabenseifner        step: a step lasts its longest message inside a host or its
                        busiest card (the bytes its ranks send across in that step,
                        one after the other), plus its longest reduction; exact in
                        the model where every step runs together. Other worlds
                        (the fold): as below
    every other         the registered model at the slower level's latency and
                        ``L`` times its seconds per byte: in star's reduce the
                        members of a host send to the root at once; in tree and
                        weighted_shards a step can pair every rank of a host with a
                        rank of another host, so up to ``L`` ranks share the card;
                        an upper bound (steps with fewer crossings, or inside a
                        host, are priced as if ``L`` shared it)
    ==================  ==============================================================

    Parameters
    ----------
    algorithm : str
        A registered algorithm with a cost model, or ``"auto"`` (what
        :func:`hpcbench.collectives.choose_algorithm` picks for this layout).
    nbytes : int
        Bytes of each rank's buffer (>= 0).
    links : HostLinks
        The hosts and both levels' links.
    gamma_s_per_byte : float
        Reduction seconds per byte (>= 0).

    Returns
    -------
    float
        Seconds; 0 for one rank or an empty buffer.

    Raises
    ------
    ValueError
        Unknown algorithm or one without a cost model, or a bad argument.

    Examples
    --------
    >>> from hpcbench.collectives.cost import link_beta
    >>> two = HostLinks((2, 2), 0.0, 0.0, 0.0, link_beta(1e9))      # free inside, 1 Gbit/s between
    >>> round(predict_allreduce_hosts("hierarchical", 10**6, two) * 1e3, 6)   # 2 x 1/2 x (2 x 0.5 MB) at 8 ns/B
    8.0
    >>> round(predict_allreduce_hosts("ring", 10**6, two) * 1e3, 6)           # 2 x 3/4 x 1 MB at 8 ns/B
    12.0
    >>> round(predict_allreduce_hosts("recursive_doubling", 10**6, two) * 1e3, 6)  # inside, then 2 x 1 MB on a card
    16.0
    """
    if not (nbytes >= 0 and gamma_s_per_byte >= 0 and math.isfinite(gamma_s_per_byte)):
        raise ValueError(f"nbytes and gamma_s_per_byte must be >= 0, got {nbytes!r}, {gamma_s_per_byte!r}")
    if not isinstance(links, HostLinks):
        raise TypeError(f"links: expected a HostLinks, got {type(links).__name__}")
    p = links.ranks
    if algorithm == "auto":
        from hpcbench.collectives.api import choose_algorithm
        algorithm = choose_algorithm(int(nbytes), p, hosts=links.ranks_per_host)
    _alg.get(algorithm)
    if p <= 1 or nbytes <= 0:
        return 0.0
    if algorithm == "hierarchical":
        from hpcbench.collectives.algorithms.hierarchical import hierarchical_levels_cost
        return float(hierarchical_levels_cost(int(nbytes), links.ranks_per_host, links.intra_alpha_s,
                                              links.intra_beta, links.inter_alpha_s, links.inter_beta,
                                              gamma_s_per_byte))
    if algorithm == "binary_tree_star":
        return float(_tree_star_hosts(int(nbytes), links, gamma_s_per_byte))
    several = len(links.ranks_per_host) > 1
    if several and algorithm in _PRICED_BY_SCHEDULE:
        t = _scheduled_hosts(algorithm, int(nbytes), links, gamma_s_per_byte)
        if t is not None:
            return t
    alpha = max(links.intra_alpha_s, links.inter_alpha_s) if several else links.intra_alpha_s
    beta = max(links.intra_beta, links.inter_beta) if several else links.intra_beta
    if several and algorithm not in _ONE_CROSSING_PER_HOST:
        beta = max(links.intra_beta, max(links.ranks_per_host) * links.inter_beta)
    return predict_allreduce(algorithm, int(nbytes), p, alpha, beta, gamma_s_per_byte)


def fastest_allreduce_hosts(candidates, message_bytes, links: HostLinks) -> tuple[str, dict]:
    """:func:`fastest_allreduce` over two link levels (:func:`predict_allreduce_hosts`): the candidate with the
    least predicted time for a step's messages, and every candidate's time (ties to the earlier one).

    Raises
    ------
    ValueError
        No candidate, or as :func:`predict_allreduce_hosts`.
    """
    if not candidates:
        raise ValueError("candidates: give at least one algorithm")
    times = {a: sum(predict_allreduce_hosts(a, int(m), links) for m in message_bytes) for a in candidates}
    return min(candidates, key=lambda a: times[a]), times
