"""Reduce/broadcast building blocks over an ordered list of ranks (star, binary tree).

Each rank list is ordered by rank; position 0 is the root. Reductions always
combine contributions in list order (the root's own data first, then the
children or members in order), so the result does not depend on timing.
"""

from __future__ import annotations

from hpcbench.collectives._core import partition, scratch_view

__all__ = ["tree_reduce", "tree_bcast", "star_reduce", "star_bcast", "SEGMENT_BYTES"]

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
    ranks = list(range(tr.size))
    yield from reduce(tr, tag, dst, red, ctx, ranks)
    if tr.rank == 0:
        red.finalize(dst)
    yield from bcast(tr, tag, dst, ranks)
