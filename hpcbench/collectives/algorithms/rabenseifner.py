"""Recursive halving and doubling allreduce (Rabenseifner's algorithm).

Thakur, Rabenseifner and Gropp, "Optimization of collective communication
operations in MPICH", IJHPCA 19(1), 2005. A reduce-scatter by recursive vector
halving (distance ``p'/2, p'/4, ..., 1``) leaves block ``i`` of the vector
reduced on rank ``i``; an allgather by recursive doubling (distance
``1, 2, ..., p'/2``) copies it everywhere. Cost
``2 log2(p') alpha + 2 (p'-1)/p' * bytes / beta`` plus the fold.

Non-powers of two: with ``p'`` the largest power of two <= ``n`` and
``rem = n - p'``, ranks ``2i`` (``i < rem``) first send their whole vector to
rank ``2i + 1``, which reduces it and takes part for both; at the end it sends
the result back.
"""

from __future__ import annotations

import math

from hpcbench.collectives._core import partition, scratch_view, start_allreduce
from hpcbench.collectives.algorithms.registry import register, register_cost, register_schedule
from hpcbench.collectives.persistent import Span, Step

__all__ = ["rabenseifner_allreduce", "rabenseifner_schedule", "rabenseifner_cost", "fold_in",
           "fold_out", "fold_layout", "fold_cost"]


def fold_layout(n: int, r: int):
    """``(p2, rem, newrank)`` of the fold; ``newrank`` is -1 for a folded-out rank."""
    p2 = 1 << (n.bit_length() - 1)
    rem = n - p2
    if r < 2 * rem:
        newrank = -1 if r % 2 == 0 else r // 2
    else:
        newrank = r - rem
    return p2, rem, newrank


def fold_setup(tr, dst, ctx):
    """``(p2, rem, newrank, tmpbuf, tmp)``: the fold layout and a borrowed scratch vector like ``dst``."""
    p2, rem, newrank = fold_layout(tr.world_size, tr.rank)
    tmpbuf = ctx.borrow(dst.size * dst.dtype.itemsize)
    return p2, rem, newrank, tmpbuf, scratch_view(tmpbuf, dst.dtype, dst.size)


def real_rank(newrank: int, rem: int) -> int:
    """World rank of a rank of the power-of-two group."""
    return 2 * newrank + 1 if newrank < rem else newrank + rem


def fold_in(tr, tag, dst, red, tmp, rem):
    """Extra ranks hand their vector to their odd neighbour, which reduces it."""
    r = tr.rank
    if r < 2 * rem:
        if r % 2 == 0:
            req = tr.isend(dst, r + 1, tag)
            if not req.test():
                yield [req]
        else:
            req = tr.irecv(tmp, r - 1, tag)
            if not req.test():
                yield [req]
            red.reduce(dst, tmp, dst)  # lower rank's contribution first


def fold_out(tr, tag, dst, rem):
    """The odd neighbours send the final vector back to the extra ranks."""
    r = tr.rank
    if r < 2 * rem:
        if r % 2 == 0:
            req = tr.irecv(dst, r + 1, tag)
        else:
            req = tr.isend(dst, r - 1, tag)
        if not req.test():
            yield [req]


@register("rabenseifner", deterministic=True,
          description="recursive halving reduce-scatter + recursive doubling allgather "
                      "(Rabenseifner; Thakur, Rabenseifner & Gropp 2005)")
def rabenseifner_allreduce(tr, tag, src, dst, red, ctx, **_):
    """Rabenseifner allreduce of ``src`` into ``dst`` (see module docstring)."""
    if start_allreduce(tr, src, dst, red):
        return
    count = dst.size
    p2, rem, newrank, tmpbuf, tmp = fold_setup(tr, dst, ctx)
    try:
        yield from fold_in(tr, tag, dst, red, tmp, rem)
        if newrank >= 0:
            offs = partition(count, p2)
            lo, hi = 0, p2          # block range this rank is responsible for
            d = p2 // 2
            while d >= 1:
                peer = real_rank(newrank ^ d, rem)
                mid = (lo + hi) // 2
                if newrank & d:
                    keep, give = (mid, hi), (lo, mid)
                else:
                    keep, give = (lo, mid), (mid, hi)
                klo, khi = offs[keep[0]], offs[keep[1]]
                glo, ghi = offs[give[0]], offs[give[1]]
                t = tmp[:khi - klo]
                reqs = [tr.irecv(t, peer, tag), tr.isend(dst[glo:ghi], peer, tag)]
                yield reqs
                seg = dst[klo:khi]
                if newrank & d:
                    red.reduce(seg, t, seg)   # partner has the lower rank: its data first
                else:
                    red.reduce(seg, seg, t)
                lo, hi = keep
                d //= 2
            red.finalize(dst[offs[lo]:offs[hi]])
            d = 1
            while d < p2:
                peer = real_rank(newrank ^ d, rem)
                size = hi - lo
                plo = lo + size if (newrank & d) == 0 else lo - size
                phi = plo + size
                reqs = [tr.irecv(dst[offs[plo]:offs[phi]], peer, tag),
                        tr.isend(dst[offs[lo]:offs[hi]], peer, tag)]
                yield reqs
                lo, hi = min(lo, plo), max(hi, phi)
                d *= 2
        yield from fold_out(tr, tag, dst, rem)
    finally:
        ctx.give(tmpbuf)


@register_schedule("rabenseifner")
def rabenseifner_schedule(n: int, rank: int, count: int, itemsize: int,
                          inplace: bool) -> list[Step] | None:
    """Schedule of :func:`rabenseifner_allreduce` for power-of-two worlds.

    ``log2 n`` halving steps: at distance ``d = n/2, ..., 1`` send the half of
    this rank's block range that the partner keeps, receive the other half of
    the partner's into the scratch, and reduce it into ``dst`` (the lower
    rank's operand first, as the generator); the last of them finalizes the
    block this rank owns. Then ``log2 n`` doubling steps (``d = 1, ..., n/2``)
    send the range gathered so far and receive the partner's beside it. The
    generator's messages, receive targets and reduction expressions, so its
    result bits; but the first step sends ``src`` and reduces ``src`` with the
    received half straight into ``dst``, which spares the generator's opening
    copy (every element of ``dst`` is written by a reduction or a receive
    before it is read or sent). See :mod:`hpcbench.collectives.persistent`.

    Returns
    -------
    list of Step, or None
        ``2 log2 n`` steps; None when ``n`` is not a power of two (the fold of
        the other ranks is left to the generator).
    """
    if n & (n - 1):
        return None
    offs = partition(count, n)
    steps: list[Step] = []
    lo, hi, d = 0, n, n // 2
    while d >= 1:
        peer = rank ^ d
        mid = (lo + hi) // 2
        keep, give = ((mid, hi), (lo, mid)) if rank & d else ((lo, mid), (mid, hi))
        klo, khi = offs[keep[0]], offs[keep[1]]
        have = "src" if d == n // 2 else "dst"      # before the first reduction: the input
        mine, got = Span(have, klo, khi), Span("tmp", 0, khi - klo)
        red = (Span("dst", klo, khi), got, mine) if rank & d else (Span("dst", klo, khi), mine, got)
        lo, hi = keep
        d //= 2
        steps.append(Step(peer, Span(have, offs[give[0]], offs[give[1]]), peer, got, red,
                          Span("dst", klo, khi) if d == 0 else None))
    d = 1
    while d < n:
        peer = rank ^ d
        size = hi - lo
        plo = lo + size if (rank & d) == 0 else lo - size
        steps.append(Step(peer, Span("dst", offs[lo], offs[hi]), peer,
                          Span("dst", offs[plo], offs[plo + size])))
        lo, hi = min(lo, plo), max(hi, plo + size)
        d *= 2
    return steps


def fold_cost(nbytes, p, alpha, beta, gamma=0.0) -> tuple[int, float]:
    """``(p', t)``: the power-of-two group size and the time of the fold in and out.

    With ``rem = p - p' > 0``, the fold sends the whole vector in (and reduces it)
    and sends the result back: ``2 alpha + 2 m beta + m gamma``; 0 when ``p`` is
    a power of two.
    """
    p2 = 1 << (p.bit_length() - 1)
    if p2 == p:
        return p2, 0.0
    return p2, 2 * alpha + 2 * nbytes * beta + nbytes * gamma


@register_cost("rabenseifner")
def rabenseifner_cost(nbytes, p, alpha, beta, gamma=0.0, local_size=None):
    """Rabenseifner allreduce time (Thakur, Rabenseifner and Gropp 2005, section 4.4).

    Recursive halving moves ``m/2, m/4, ..., m/p'`` in ``log2 p'`` exchanges,
    recursive doubling the same back; each exchange costs ``alpha + s beta``
    (both partners send at once, on their own links):

    ``t = 2 log2(p') alpha + 2 (p'-1)/p' m beta + (p'-1)/p' m gamma``

    plus the fold of :func:`fold_cost` when ``p`` is not a power of two.
    """
    if p <= 1 or nbytes <= 0:
        return 0.0
    p2, fold = fold_cost(nbytes, p, alpha, beta, gamma)
    part = (p2 - 1) / p2 * nbytes
    return 2 * math.log2(p2) * alpha + 2 * part * beta + part * gamma + fold
