"""Hierarchical allreduce: reduce-scatter inside each host, allreduce of the shards across hosts, allgather inside.

Horovod's ``HOROVOD_HIERARCHICAL_ALLREDUCE`` (Sergeev and Del Balso, 2018;
NCCL does the same across nodes): the ranks of a host first reduce-scatter
the buffer among themselves (shared memory), so each holds the host's sum of
one shard; the ranks holding the same shard on different hosts allreduce it
across hosts (the network), each sending ``(G-1)/G`` of a shard instead of
the whole buffer; then each host allgathers its shards. Per rank only
``m / L`` bytes cross the slow inter-host links (``L`` ranks per host); the
``L`` ranks of a host send them at the same time through the host's one
network card, which so carries ``2 (G-1)/G m`` per allreduce
(:func:`hierarchical_levels_cost`).

Ranks are grouped by host (or in contiguous blocks of ``local_size``). The
buffer is cut into ``S`` shards, ``S`` the smallest group's size, and the
first ``S`` ranks of every group own one shard each (with hosts of equal
size every rank owns one, as in Horovod; a host with more ranks than ``S``
has members that only send and receive). Every phase is *direct*: a rank
sends each piece straight to its owner, and each owner reduces the pieces
it receives in group order after its own, so every element is reduced at
one rank in an order fixed by the ranks, and the result bits are the same
on every rank and in every run (``deterministic``).
"""

from __future__ import annotations

from hpcbench.collectives._core import partition, scratch_view, start_allreduce
from hpcbench.collectives.algorithms.registry import register, register_cost
from hpcbench.collectives.algorithms.tree_star import groups

__all__ = ["hierarchical_allreduce", "hierarchical_cost", "hierarchical_levels_cost", "direct_reduce_scatter",
           "direct_allgather"]


def _pending(reqs):
    return [q for q in reqs if not q.test()]


def direct_reduce_scatter(tr, tag, buf, red, ctx, ranks, bounds, owners):
    """Reduce-scatter of ``buf`` over ``ranks``: block ``k`` (``bounds``) is reduced on ``owners[k]``.

    Every rank of ``ranks`` sends each block it does not own to that block's
    owner; an owner reduces the blocks it receives into its own, in the
    order of ``ranks`` (its own contribution first). Leaves the owned block
    of ``buf`` reduced (not finalized); other blocks are unchanged.

    Parameters
    ----------
    buf : numpy.ndarray
        1-D, this rank's contribution, reduced in place.
    ranks : list of int
        The ranks taking part (this rank among them).
    bounds : list of int
        ``len(owners) + 1`` element offsets of the blocks.
    owners : list of int
        Owner of each block, a subset of ``ranks``, at most one block each.
    """
    me = tr.rank
    sends = [tr.isend(buf[bounds[k]:bounds[k + 1]], o, tag) for k, o in enumerate(owners) if o != me]
    if me in owners:
        k = owners.index(me)
        lo, hi = bounds[k], bounds[k + 1]
        others = [r for r in ranks if r != me]
        count = hi - lo
        if others and count:
            tmpbuf = ctx.borrow(len(others) * count * buf.itemsize)
            try:
                tmp = scratch_view(tmpbuf, buf.dtype, len(others) * count)
                recvs = [tr.irecv(tmp[c * count:(c + 1) * count], r, tag) for c, r in enumerate(others)]
                mine = buf[lo:hi]
                for c, q in enumerate(recvs):
                    if not q.test():
                        yield [q]
                    red.reduce(mine, mine, tmp[c * count:(c + 1) * count])
            finally:
                ctx.give(tmpbuf)
        elif others:                            # an empty block: the messages still pair up
            recvs = [tr.irecv(buf[lo:hi], r, tag) for r in others]
            p = _pending(recvs)
            if p:
                yield p
    p = _pending(sends)
    if p:
        yield p


def direct_allgather(tr, tag, buf, ranks, bounds, owners):
    """Allgather over ``ranks``: each owner sends its block of ``buf`` to every other rank of ``ranks``.

    Parameters as :func:`direct_reduce_scatter`; afterwards every rank of
    ``ranks`` holds every owner's block.
    """
    me = tr.rank
    reqs = []
    if me in owners:
        k = owners.index(me)
        reqs += [tr.isend(buf[bounds[k]:bounds[k + 1]], r, tag) for r in ranks if r != me]
    reqs += [tr.irecv(buf[bounds[k]:bounds[k + 1]], o, tag) for k, o in enumerate(owners) if o != me]
    p = _pending(reqs)
    if p:
        yield p


@register("hierarchical", deterministic=True,
          description="reduce-scatter inside each host, shards allreduced across hosts, allgather inside "
                      "(Horovod's hierarchical allreduce)")
def hierarchical_allreduce(tr, tag, src, dst, red, ctx, local_size=None, **_):
    """Hierarchical allreduce of ``src`` into ``dst`` (see module docstring).

    Parameters
    ----------
    local_size : int, optional
        Ranks per group (contiguous blocks); by default ranks are grouped by
        host name (one shared allgather of host names per communicator).
    """
    if start_allreduce(tr, src, dst, red):
        return
    gs = groups(ctx, tr.world_size, local_size)
    mine = next(g for g in gs if tr.rank in g)
    nshards = min(len(g) for g in gs)
    shards = partition(dst.size, nshards)
    # 1. inside the host: shard k summed on the host's k-th rank
    yield from direct_reduce_scatter(tr, tag, dst, red, ctx, mine, shards, mine[:nshards])
    k = mine.index(tr.rank)
    if k < nshards:
        # 2. across hosts: shard k allreduced among the k-th ranks of every host
        peers = [g[k] for g in gs]
        lo, hi = shards[k], shards[k + 1]
        shard = dst[lo:hi]
        if len(peers) > 1:
            pieces = partition(hi - lo, len(peers))
            yield from direct_reduce_scatter(tr, tag, shard, red, ctx, peers, pieces, peers)
            j = peers.index(tr.rank)
            red.finalize(shard[pieces[j]:pieces[j + 1]])
            yield from direct_allgather(tr, tag, shard, peers, pieces, peers)
        else:
            red.finalize(shard)
    # 3. inside the host: every shard to every rank
    yield from direct_allgather(tr, tag, dst, mine, shards, mine[:nshards])


def hierarchical_levels_cost(nbytes, ranks_per_host, alpha_intra, beta_intra, alpha_inter, beta_inter,
                             gamma=0.0, *, shared_card=True):
    """Seconds of :func:`hierarchical_allreduce` over two link levels.

    With ``m`` bytes, ``G`` hosts, ``S`` shards (the smallest host's ranks),
    ``L`` the largest host's ranks, each rank's link inside a host sending its
    messages one after the other, and each *host's* link to the others (its
    network card) shared by its ranks, sending the messages of all of them
    one after the other (latencies overlap, as in
    :mod:`~hpcbench.collectives.linkmodel`):

    * reduce-scatter inside: a rank sends ``S - 1`` shards (``S`` when it
      owns none): ``a_i + S' m/S b_i``, ``S' = S - 1`` or ``S`` where
      ``L > S``; the owner reduces ``L - 1`` shards: ``(L-1) m/S gamma``;
    * across hosts: a reduce-scatter and an allgather of a shard among
      ``G`` ranks, each sending ``(G-1)`` pieces of ``m/(S G)``. The ``S``
      shard owners of a host do this *at the same time* (every host has
      ``S`` owners), so the host's card carries ``S`` ranks' pieces, ``S``
      times the bytes of one rank: ``2 (a_e + S (G-1)/G m/S b_e)
      = 2 (a_e + (G-1)/G m b_e)``, plus ``(G-1)/G m/S gamma`` for the
      reduction (each owner reduces its own shard, in parallel). With one
      owner per host (``S = 1``: a host of one rank, as 3+1 or 4x1) only
      that rank crosses and the term is the per-rank one;
    * allgather inside: an owner sends its shard to ``L - 1`` ranks:
      ``a_i + (L-1) m/S b_i``.

    A rank's own link, as if the ``S`` owners had a card each, would give
    ``(G-1)/G m/S b_e`` per phase: ``S`` times too little. Measured over a
    shaped link at 2x2 emulated hosts (``docs/measured/hierarchical-netem.json``)
    the per-rank form was 2.7x below the time at 4 MiB and 100 Mbit/s.

    Parameters
    ----------
    nbytes : int
        Bytes of each rank's buffer.
    ranks_per_host : sequence of int
        Ranks of each host (each >= 1).
    alpha_intra, beta_intra, alpha_inter, beta_inter : float
        Latency (s) and seconds per byte inside a host and between hosts.
    gamma : float
        Reduction seconds per byte.
    shared_card : bool
        True (the two-level model): a host's ranks share its link to the other
        hosts, as above. False: every rank has a link of its own (the one-level
        model, :func:`hierarchical_cost`, where every message takes its
        sender's own link): the inter term is ``2 (a_e + (G-1)/G m/S b_e)``.

    Returns
    -------
    float
        Seconds; 0 for one rank or an empty buffer.

    Examples
    --------
    >>> b = 8e-9                                          # 1 Gbit/s between hosts, free inside
    >>> round(hierarchical_levels_cost(10**6, (2, 2), 0, 0, 0, b) * 1e3, 6)       # 2 x 1/2 x 1 MB
    8.0
    >>> round(hierarchical_levels_cost(10**6, (2, 2), 0, 0, 0, b, shared_card=False) * 1e3, 6)
    4.0
    >>> round(hierarchical_levels_cost(10**6, (3, 1), 0, 0, 0, b) * 1e3, 6)       # one owner per host
    8.0
    """
    sizes = [int(k) for k in ranks_per_host]
    p = sum(sizes)
    if p <= 1 or nbytes <= 0:
        return 0.0
    nhosts, nshards, most = len(sizes), min(sizes), max(sizes)
    shard = nbytes / nshards
    t = 0.0
    if most > 1:
        sent = nshards if most > nshards else nshards - 1
        t += alpha_intra + sent * shard * beta_intra + (most - 1) * shard * gamma
        t += alpha_intra + (most - 1) * shard * beta_intra
    if nhosts > 1:
        frac = (nhosts - 1) / nhosts
        # the host's S owners send across at once through the host's one card: S x one owner's bytes
        senders = nshards if shared_card else 1
        t += 2 * (alpha_inter + senders * frac * shard * beta_inter) + frac * shard * gamma
    return t


@register_cost("hierarchical")
def hierarchical_cost(nbytes, p, alpha, beta, gamma=0.0, local_size=None):
    """:func:`hierarchical_levels_cost` with every link alike, one per rank (``shared_card=False``), and hosts of
    ``local_size`` ranks (``None``: one host of ``p``)."""
    size = p if local_size is None else min(int(local_size), p)
    sizes = [size] * (p // size) + ([p % size] if p % size else [])
    return hierarchical_levels_cost(nbytes, sizes, alpha, beta, alpha, beta, gamma, shared_card=False)
