"""Weighted-shard allreduce: direct reduce-scatter then direct allgather, shard sizes set per rank, pipelined.

The buffer is split into chunks of about :data:`CHUNK_BYTES`, and every chunk
into one shard per rank, rank ``r``'s shard holding a fraction ``weights[r]``
of the chunk's elements. Reduce-scatter: every rank sends each shard of
every chunk straight to its owner (``p - 1`` messages per chunk, the
pairwise exchange of Thakur, Rabenseifner and Gropp, "Optimization of
collective communication operations in MPICH", IJHPCA 19(1), 2005);
the owner adds the contributions in a fixed order (its own first,
then those of ranks ``r - 1, r - 2, ...``, mod ``p``), finalizes, and sends
the reduced shard straight to every other rank (allgather). Chunks
pipeline: a shard's allgather leaves as soon as its chunk's contributions
are in, while later chunks are still being sent.

Why: in the link model (:mod:`hpcbench.collectives.linkmodel`) each rank's
outgoing link serialises its messages. Rank ``r`` sends ``(1 - w_r) m``
bytes in the reduce-scatter and ``(p - 1) w_r m`` in the allgather, so its
link is busy ``m beta_r (1 + (p - 2) w_r)``. Every rank must send at least
``m`` bytes (the others cannot know its contribution otherwise), so
``max_r m beta_r`` bounds any allreduce from below; a rank whose shard is
empty (``w_r = 0``) sends exactly ``m``. With a slow link on rank ``s``,
:func:`shard_weights` gives ``s`` no shard and spreads the others so their
links finish no later, and the allreduce approaches that bound (KungFu's
interference strategy reaches for the same by moving the star's root off
the slow rank, ``adaptiveStrategies.go``; there the root's link still
sends ``p - 1`` copies). With equal weights (the default) every link sends
``2 (p - 1) / p m``, the ring's bandwidth optimum, in ``2 (p - 1)``
messages per chunk instead of the ring's ``2 (p - 1)`` latency-bound steps
in sequence.

Each element is reduced at exactly one rank, in an order fixed by the
ranks, and copied to the others: results are bitwise identical on every
rank (``deterministic``). Scratch: ``(p - 1)`` times this rank's shards.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
from pydantic import Field, field_validator

from hpcbench.collectives._core import partition, scratch_view, start_allreduce
from hpcbench.collectives.algorithms.registry import (register, register_cost, register_links_cost,
                                                      register_links_options, register_schedule)
from hpcbench.collectives.persistent import Span, Step
from hpcbench.runtime.config import StrategyConfig

__all__ = ["weighted_shards_allreduce", "weighted_shards_schedule", "weighted_shards_cost",
           "weighted_shards_links_cost", "links_options", "Config", "check", "shard_weights", "shard_fractions", "shard_bounds", "CHUNK_BYTES"]

#: target chunk of the pipeline in bytes (at least the persistent plans' largest buffer, so a planned
#: call is one chunk and its schedule's messages are the generator's)
CHUNK_BYTES = 1 << 22


def shard_fractions(weights, world_size: int) -> np.ndarray:
    """``weights`` (one relative shard size per rank) normalised to sum 1, float64 shape ``(world_size,)``; equal for
    None. Raises ValueError naming ``weights`` when they are not ``world_size`` finite numbers >= 0 with a positive
    sum."""
    if weights is None:
        return np.full(world_size, 1.0 / world_size)
    try:
        w = np.asarray(weights, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"weights: expected {world_size} numbers, got {weights!r}") from None
    if w.size != world_size or not np.all(np.isfinite(w)) or np.any(w < 0) or not w.sum() > 0:
        raise ValueError(f"weights: expected {world_size} finite numbers >= 0 (one per rank) with a positive sum, "
                         f"got {weights!r}")
    return w / w.sum()


def _chunks(count: int, itemsize: int) -> int:
    return max(1, -(-count * itemsize // CHUNK_BYTES))


def shard_bounds(count: int, itemsize: int, world_size: int, weights=None) -> list[list[int]]:
    """Element offsets of every chunk's shards.

    Parameters
    ----------
    count, itemsize : int
        Elements of the buffer and bytes per element.
    world_size : int
        Ranks.
    weights : sequence of float, optional
        Relative shard size of each rank (see :func:`shard_fractions`); None: equal.

    Returns
    -------
    list of list of int
        One list of ``world_size + 1`` increasing offsets per chunk: rank ``r`` owns
        ``[b[r], b[r + 1])`` of the chunk. Chunks are :func:`partition` of
        ``count`` into ``ceil(count * itemsize / CHUNK_BYTES)``; within a
        chunk of ``n`` elements, ``b[r] = lo + floor(n * sum(w[:r]))``
        (the last is ``lo + n``), computed alike on every rank.

    Raises
    ------
    ValueError
        Bad ``weights``.
    """
    f = shard_fractions(weights, world_size)
    cum = np.concatenate([[0.0], np.cumsum(f)[:-1]])
    out = []
    offs = partition(count, _chunks(count, itemsize))
    for lo, hi in zip(offs[:-1], offs[1:]):
        n = hi - lo
        b = [lo + min(n, int(math.floor(n * c))) for c in cum] + [hi]
        out.append(b)
    return out


class Config(StrategyConfig):
    """Options of ``weighted_shards``."""

    weights: Optional[tuple[float, ...]] = Field(None, description=(
        "each rank's relative shard size (one per rank, >= 0, a positive sum; None: equal shards), e.g. "
        "shard_weights(betas) for links of different speeds"))

    @field_validator("weights", mode="before")
    @classmethod
    def _floats(cls, v):
        return v if v is None else tuple(float(w) for w in v)


def check(world_size: int, weights=None) -> None:
    """Refuse ``weights`` that are not ``world_size`` finite numbers >= 0 with a positive sum (``ValueError``)."""
    shard_fractions(weights, world_size)


@register("weighted_shards", deterministic=True,
          description="direct reduce-scatter + allgather with per-rank shard weights, pipelined in chunks "
                      "(pairwise exchange, Thakur et al. 2005)", options=Config, check=check)
def weighted_shards_allreduce(tr, tag, src, dst, red, ctx, weights=None, **_):
    """Weighted-shard allreduce of ``src`` into ``dst`` (module docstring).

    ``weights``: one relative shard size per rank (>= 0, positive sum), the
    same on every rank; None gives equal shards. Raises ValueError for bad
    ``weights``.
    """
    n = tr.world_size
    if weights is not None:
        shard_fractions(weights, n)          # refuse bad weights before any message
    if start_allreduce(tr, src, dst, red):
        return
    r = tr.rank
    chunks = shard_bounds(dst.size, dst.itemsize, n, weights)
    mine = [(b[r], b[r + 1]) for b in chunks]
    at = np.cumsum([0] + [hi - lo for lo, hi in mine]).tolist()     # chunk c's place in a scratch row
    own = at[-1]
    tmpbuf = ctx.borrow(max(1, (n - 1) * own) * dst.itemsize)
    try:
        tmp = scratch_view(tmpbuf, dst.dtype, (n - 1) * own)
        # every message is posted, empty ones too, so that per pair of ranks the messages are the schedule's
        recvs = [[tr.irecv(tmp[(k - 1) * own + at[c]:(k - 1) * own + at[c + 1]], (r - k) % n, tag)
                  for k in range(1, n)] for c in range(len(chunks))]    # chunk c's contribution of rank r - k
        rs_sends = {}       # (chunk, owner) -> request: dst[shard] is not received into before it has left
        for c, b in enumerate(chunks):
            for k in range(1, n):
                d = (r + k) % n
                rs_sends[(c, d)] = tr.isend(dst[b[d]:b[d + 1]], d, tag)
        ag_recvs, ag_sends = [], []
        next_chunk = {(r + k) % n: 0 for k in range(1, n)}      # per owner: its next allgather receive to post

        def post_ready(wait: bool):
            """Post the allgather receives (in chunk order per owner) whose shard has left this rank."""
            for j in next_chunk:
                while next_chunk[j] < len(chunks):
                    c = next_chunk[j]
                    q = rs_sends[(c, j)]
                    if not q.test():
                        if not wait:
                            break
                        yield [q]
                    b = chunks[c]
                    ag_recvs.append(tr.irecv(dst[b[j]:b[j + 1]], j, tag))
                    next_chunk[j] += 1

        for c, (lo, hi) in enumerate(mine):
            d = dst[lo:hi]
            for q in recvs[c]:
                if not q.test():
                    yield [q]
            for k in range(1, n):
                base = (k - 1) * own + at[c]
                red.reduce(d, d, tmp[base:base + hi - lo])
            red.finalize(d)
            ag_sends.extend(tr.isend(d, (r + k) % n, tag) for k in range(1, n))
            yield from post_ready(wait=False)
        yield from post_ready(wait=True)
        pending = [q for q in (*ag_recvs, *ag_sends, *rs_sends.values()) if not q.test()]
        if pending:
            yield pending
    finally:
        ctx.give(tmpbuf)


@register_schedule("weighted_shards")
def weighted_shards_schedule(n: int, rank: int, count: int, itemsize: int, inplace: bool,
                             weights=None) -> list[Step] | None:
    """Schedule of :func:`weighted_shards_allreduce` for a buffer of one chunk (the persistent plans').

    ``n - 1`` reduce-scatter steps (step ``k`` sends the shard of rank
    ``r + k`` to it and receives rank ``r - k``'s contribution to this
    rank's shard into the scratch, then adds it: the generator's order), the
    last finalizing the shard; then ``n - 1`` allgather steps (step ``k``
    sends the reduced shard to ``r + k`` and receives rank ``r - k``'s).
    Per pair of ranks the generator's messages in the generator's order;
    out of place the first step reads ``src`` (which spares the opening
    copy). Empty shards are sent as empty messages, as the generator does.

    Returns
    -------
    list of Step, or None
        None when the buffer is more than one chunk (the generator runs).
    """
    if _chunks(count, itemsize) > 1:
        return None
    b = shard_bounds(count, itemsize, n, weights)[0]
    lo, hi = b[rank], b[rank + 1]
    mine = Span("dst", lo, hi)
    steps: list[Step] = []
    for k in range(1, n):
        d, s = (rank + k) % n, (rank - k) % n
        have = "src" if (k == 1 and not inplace) else "dst"
        got = Span("tmp", 0, hi - lo)
        # the first step reduces src's shard with the received one straight into dst
        red = (mine, Span(have, lo, hi), got)
        sbuf = "src" if not inplace else "dst"      # shards other than this rank's are never written before
        steps.append(Step(d, Span(sbuf, b[d], b[d + 1]), s, got, red, mine if k == n - 1 else None))
    for k in range(1, n):
        d, s = (rank + k) % n, (rank - k) % n
        steps.append(Step(d, mine, s, Span("dst", b[s], b[s + 1])))
    return steps


@register_links_cost("weighted_shards")
def weighted_shards_links_cost(nbytes, alpha, betas, weights=None, gamma=0.0) -> float:
    """Seconds of the pipelined weighted-shard allreduce over links of different speeds.

    Every rank posts its reduce-scatter sends first, so the last
    contributions are in at ``T_rs = max_r (1 - w_r) m beta_r``; owner ``j``'s
    link then sends its shards as their chunks complete, and is done at
    ``max(m beta_j (1 + (p - 2) w_j), T_rs + (p - 1) w_j m beta_j / C)``:
    busy throughout, or idle until the last chunk's contributions came and
    then sending that chunk's shard (``C`` chunks of :data:`CHUNK_BYTES`).
    With the owner's ``p - 1`` additions to its shard,
    ``T = 2 alpha + max_j (that) + (p - 1) max_j w_j m gamma``. Equal links:
    ``2 alpha + 2 (p - 1)/p m beta`` (the links are never idle); one slow
    rank without a shard: its ``m`` at its rate, then the last chunk's
    allgather.

    Parameters
    ----------
    nbytes : int
        Bytes per rank.
    alpha : float
        Per-message latency, s.
    betas : array_like of float, shape (p,)
        Each rank's outgoing link, s/byte.
    weights : array_like of float, shape (p,), optional
        Shard weights (None: :func:`shard_weights` of ``betas``, the choice the cost is meant to price).
    gamma : float
        Seconds per reduced byte.
    """
    b = np.asarray(betas, dtype=np.float64).reshape(-1)
    p = b.size
    if p <= 1 or nbytes <= 0:
        return 0.0
    f = shard_weights(b) if weights is None else shard_fractions(weights, p)
    m = float(nbytes)
    chunks = _chunks(int(nbytes), 1)
    t_rs = float(np.max((1.0 - f) * m * b))
    done = np.maximum(m * b * (1.0 + (p - 2) * f), t_rs + (p - 1) * f * m * b / chunks)
    return float(2 * alpha + done.max() + (p - 1) * f.max() * m * gamma)


@register_cost("weighted_shards")
def weighted_shards_cost(nbytes, p, alpha, beta, gamma=0.0, local_size=None):
    """Equal links and equal shards: ``2 alpha + 2 (p - 1)/p m beta + (p - 1)/p m gamma``
    (:func:`weighted_shards_links_cost`)."""
    return weighted_shards_links_cost(nbytes, alpha, np.full(int(p), float(beta)), None, gamma)


def shard_weights(betas) -> np.ndarray:
    """Shard fractions that minimise the busiest link of :func:`weighted_shards_allreduce` for the given links.

    Rank ``r``'s link is busy ``m beta_r (1 + (p - 2) w_r)``; every link is
    busy at least ``m beta_r``. Water filling: the ranks that get a shard
    all finish at ``T = m (p - 2 + |A|) / sum_{r in A} 1 / beta_r`` with
    ``w_r = (T / (m beta_r) - 1) / (p - 2)``; a rank whose ``m beta_r`` is
    at least ``T`` gets none. For ``p = 2`` every link sends ``m`` whatever
    the weights, and ``w_r`` is proportional to ``1 / beta_r`` (the last
    chunk's allgather then takes the least).

    Parameters
    ----------
    betas : array_like of float, shape (p,)
        Seconds per byte of each rank's link (> 0, finite).

    Returns
    -------
    numpy.ndarray of float64, shape (p,)
        Fractions >= 0 summing to 1; equal for equal links.

    Raises
    ------
    ValueError
        ``betas`` empty, not finite or not > 0.

    Examples
    --------
    >>> shard_weights([4.0, 1.0, 1.0, 1.0]).round(4).tolist()     # the slow rank owns nothing
    [0.0, 0.3333, 0.3333, 0.3333]
    >>> shard_weights([1.0, 1.0, 1.0]).round(4).tolist()
    [0.3333, 0.3333, 0.3333]
    """
    b = np.asarray(betas, dtype=np.float64).reshape(-1)
    if b.size == 0 or not np.all(np.isfinite(b)) or np.any(b <= 0):
        raise ValueError(f"betas: must be one finite number > 0 per rank, got {betas!r}")
    p = b.size
    if p <= 2:
        return (1.0 / b) / np.sum(1.0 / b)
    active = np.ones(p, dtype=bool)
    while True:
        t = (p - 2 + active.sum()) / np.sum(1.0 / b[active])      # in units of m
        drop = active & (b >= t)
        if not drop.any():
            break
        active &= ~drop
    f = np.where(active, (t / b - 1.0) / (p - 2), 0.0)
    return f / f.sum()


@register_links_options("weighted_shards")
def links_options(betas) -> dict:
    """The options for links of ``betas`` s/byte: ``{"weights": shard_weights(betas)}`` as a tuple of floats."""
    return {"weights": tuple(float(w) for w in shard_weights(betas))}
