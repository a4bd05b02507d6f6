"""Reduce/broadcast building blocks over an ordered list of ranks (star, binary tree).

Each rank list is ordered by rank; position 0 is the root. Reductions always
combine contributions in list order (the root's own data first, then the
children or members in order), so the result does not depend on timing.
"""

from __future__ import annotations

import math

from hpcbench.collectives._core import partition, scratch_view

__all__ = ["tree_reduce", "tree_bcast", "star_reduce", "star_bcast", "SEGMENT_BYTES",
           "tree_reduce_cost", "tree_bcast_cost", "star_reduce_cost", "star_bcast_cost"]

#: pipeline segment of the tree in bytes
SEGMENT_BYTES = 1 << 18


def _segments(count: int, itemsize: int) -> list[int]:
    nseg = max(1, -(-count * itemsize // SEGMENT_BYTES))
    return partition(count, nseg)


def _pending(reqs):
    return [q for q in reqs if not q.test()]


def tree_reduce(tr, tag, dst, red, ctx, ranks):
    """Binary-tree reduction towards ``ranks[0]``, pipelined by segments.

    Position ``i`` of ``ranks`` has children ``2i+1`` and ``2i+2``. Leaves
    ``dst`` fully reduced (not finalized) on the root.
    """
    i = ranks.index(tr.rank)
    kids = [ranks[c] for c in (2 * i + 1, 2 * i + 2) if c < len(ranks)]
    parent = ranks[(i - 1) // 2] if i > 0 else None
    count = dst.size
    segs = _segments(count, dst.itemsize)
    tmpbuf = ctx.borrow(max(1, len(kids)) * count * dst.itemsize) if kids else None
    try:
        recvs = []
        if kids:
            tmp = scratch_view(tmpbuf, dst.dtype, len(kids) * count)
            for j in range(len(segs) - 1):
                lo, hi = segs[j], segs[j + 1]
                recvs.append([tr.irecv(tmp[c * count + lo:c * count + hi], kid, tag)
                              for c, kid in enumerate(kids)])
        sends = []
        for j in range(len(segs) - 1):
            lo, hi = segs[j], segs[j + 1]
            if kids:
                p = _pending(recvs[j])
                if p:
                    yield p
                d = dst[lo:hi]
                for c in range(len(kids)):
                    red.reduce(d, d, tmp[c * count + lo:c * count + hi])
            if parent is not None:
                sends.append(tr.isend(dst[lo:hi], parent, tag))
        p = _pending(sends)
        if p:
            yield p
    finally:
        if tmpbuf is not None:
            ctx.give(tmpbuf)


def tree_bcast(tr, tag, dst, ranks):
    """Binary-tree broadcast of ``dst`` from ``ranks[0]``, pipelined by segments."""
    i = ranks.index(tr.rank)
    kids = [ranks[c] for c in (2 * i + 1, 2 * i + 2) if c < len(ranks)]
    parent = ranks[(i - 1) // 2] if i > 0 else None
    segs = _segments(dst.size, dst.itemsize)
    nseg = len(segs) - 1
    recvs = [tr.irecv(dst[segs[j]:segs[j + 1]], parent, tag) for j in range(nseg)] \
        if parent is not None else None
    sends = []
    for j in range(nseg):
        if recvs is not None and not recvs[j].test():
            yield [recvs[j]]
        for kid in kids:
            sends.append(tr.isend(dst[segs[j]:segs[j + 1]], kid, tag))
    p = _pending(sends)
    if p:
        yield p


def star_reduce(tr, tag, dst, red, ctx, ranks):
    """Every rank of ``ranks`` sends to ``ranks[0]``, which reduces in list order."""
    root = ranks[0]
    if tr.rank != root:
        q = tr.isend(dst, root, tag)
        if not q.test():
            yield [q]
        return
    others = ranks[1:]
    if not others:
        return
    count = dst.size
    tmpbuf = ctx.borrow(len(others) * count * dst.itemsize)
    try:
        tmp = scratch_view(tmpbuf, dst.dtype, len(others) * count)
        recvs = [tr.irecv(tmp[c * count:(c + 1) * count], src, tag)
                 for c, src in enumerate(others)]
        for c, q in enumerate(recvs):
            if not q.test():
                yield [q]
            red.reduce(dst, dst, tmp[c * count:(c + 1) * count])
    finally:
        ctx.give(tmpbuf)


def star_bcast(tr, tag, dst, ranks):
    """``ranks[0]`` sends ``dst`` to every other rank of ``ranks``."""
    root = ranks[0]
    if tr.rank != root:
        q = tr.irecv(dst, root, tag)
    else:
        sends = [tr.isend(dst, r, tag) for r in ranks[1:]]
        q = None
    p = [q] if q is not None else sends
    p = _pending(p)
    if p:
        yield p


def reduce_then_bcast(tr, tag, dst, red, ctx, reduce, bcast):
    """Allreduce over all ranks as ``reduce`` to rank 0, finalize there, then ``bcast``."""
    ranks = list(range(tr.world_size))
    yield from reduce(tr, tag, dst, red, ctx, ranks)
    if tr.rank == 0:
        red.finalize(dst)
    yield from bcast(tr, tag, dst, ranks)


# -- cost models over the link model (outgoing links serialise, incoming do not) ----------

def _tree_shape(nbytes, n):
    """``(depth, children of an inner node, segments, segment bytes)`` of the pipelined tree."""
    depth = n.bit_length() - 1                  # position n-1 is the deepest
    nseg = max(1, math.ceil(nbytes / SEGMENT_BYTES))
    return depth, min(2, n - 1), nseg, nbytes / nseg


def tree_reduce_cost(nbytes, n, alpha, beta, gamma=0.0):
    """Pipelined binary-tree reduce of ``m`` bytes over ``n`` ranks, in seconds.

    Each rank sends its ``S`` segments of ``s`` bytes up (its own link: ``s beta``
    each); children send at once (incoming links are not modelled); a node
    forwards segment ``j`` once both children's have come and been reduced
    (``c s gamma``, ``c`` children). Depth ``D = floor(log2 n)``:
    ``t = (D + S - 1) s beta + D alpha + (D + S - 1) c s gamma``.
    """
    if n <= 1 or nbytes <= 0:
        return 0.0
    depth, kids, nseg, s = _tree_shape(nbytes, n)
    return (depth + nseg - 1) * s * (beta + kids * gamma) + depth * alpha


def tree_bcast_cost(nbytes, n, alpha, beta, gamma=0.0):
    """Pipelined binary-tree broadcast of ``m`` bytes over ``n`` ranks, in seconds.

    A node sends each segment to its ``c`` children one after the other on its
    link (``c s beta``), so segments leave every ``c s beta`` and the deepest
    rank has the last one after ``t = D alpha + (D + S - 1) c s beta``.
    """
    if n <= 1 or nbytes <= 0:
        return 0.0
    depth, kids, nseg, s = _tree_shape(nbytes, n)
    return depth * alpha + (depth + nseg - 1) * kids * s * beta


def star_reduce_cost(nbytes, n, alpha, beta, gamma=0.0):
    """Star reduce: the ``n-1`` members send at once on their own links, the root reduces
    in order: ``t = alpha + m beta + (n-1) m gamma``."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    return alpha + nbytes * beta + (n - 1) * nbytes * gamma


def star_bcast_cost(nbytes, n, alpha, beta, gamma=0.0):
    """Star broadcast: the root's link sends ``n-1`` copies one after the other:
    ``t = alpha + (n-1) m beta``."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    return alpha + (n - 1) * nbytes * beta
