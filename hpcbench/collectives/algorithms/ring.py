"""Ring allreduce: reduce-scatter then allgather around a ring, pipelined.

Patarasuk and Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
workstations", JPDC 69(2), 2009. Each rank sends and receives
``2 (n-1)/n * count`` elements, the bandwidth optimum; the cost model is
``2 (n-1) alpha + 2 (n-1)/n * bytes / beta``.

The buffer is split into ``n`` blocks (block ``i`` ends fully reduced on rank
``i``) and every block into segments of about :data:`SEGMENT_BYTES`. A segment
is forwarded to the next rank as soon as it has been reduced, so receiving,
reducing and sending of consecutive segments and steps overlap.
"""

from __future__ import annotations

import math

from hpcbench.collectives._core import is_inplace, partition, scratch_view
from hpcbench.collectives.algorithms.registry import register, register_cost, register_schedule
from hpcbench.collectives.persistent import Span, Step

__all__ = ["ring_allreduce", "ring_schedule", "ring_phases", "ring_cost", "SEGMENT_BYTES"]

#: target segment size of the pipeline in bytes
SEGMENT_BYTES = 1 << 19


def ring_phases(tr, tag, src, dst, red, ctx, bounds, reduce_scatter=True, allgather=True,
                segment_bytes=None):
    """Generator of the ring's reduce-scatter and/or allgather phases.

    Parameters
    ----------
    bounds : list of int
        ``n + 1`` block offsets (elements) into ``src``/``dst``.
    reduce_scatter, allgather : bool
        Which phases to run. After the reduce-scatter phase block ``r`` of
        ``dst`` holds the reduction on rank ``r`` (finalized for ``avg``); the
        allgather phase assumes block ``r`` of ``dst`` is this rank's block.
    """
    n, r = tr.world_size, tr.rank
    if n == 1:
        if not is_inplace(src, dst):
            dst[...] = src
        if reduce_scatter:
            red.finalize(dst)
        return
    itemsize = dst.dtype.itemsize
    maxblock = max(bounds[i + 1] - bounds[i] for i in range(n))
    if maxblock == 0:
        return
    seg = segment_bytes or SEGMENT_BYTES
    nseg = max(1, -(-maxblock * itemsize // seg))
    # segment offsets of every block, relative to the buffer
    segs = []
    for i in range(n):
        p = partition(bounds[i + 1] - bounds[i], nseg)
        segs.append([(bounds[i] + p[j], bounds[i] + p[j + 1]) for j in range(nseg)])
    right, left = (r + 1) % n, (r - 1) % n
    inplace = is_inplace(src, dst)
    first = 0 if reduce_scatter else n - 1
    last = 2 * (n - 1) if allgather else n - 1
    tmp = tmpbuf = None
    if reduce_scatter and inplace:
        tmpbuf = ctx.borrow(maxblock * itemsize)
        tmp = scratch_view(tmpbuf, dst.dtype, maxblock)
    sends = {}        # (block, seg) -> latest send request from that segment
    allsends = []
    recvs = [None] * nseg

    def send_block(k):  # block sent at step k
        return (r - k - 1) % n

    def post(k, j):
        """Post step ``k`` segment ``j``: its receive and its send."""
        rb = (r - k - 2) % n
        lo, hi = segs[rb][j]
        if k < n - 1:
            rbuf = tmp[lo - bounds[rb]:hi - bounds[rb]] if inplace else dst[lo:hi]
        else:
            rbuf = dst[lo:hi]
        recvs[j] = tr.irecv(rbuf, left, tag)
        sb = send_block(k)
        slo, shi = segs[sb][j]
        sbuf = src[slo:shi] if k == 0 else dst[slo:shi]
        req = tr.isend(sbuf, right, tag)
        sends[(sb, j)] = req
        allsends.append(req)

    try:
        for j in range(nseg):
            post(first, j)
        for k in range(first, last):
            rb = (r - k - 2) % n
            for j in range(nseg):
                req = recvs[j]
                if not req.test():
                    yield [req]
                lo, hi = segs[rb][j]
                if k < n - 1:
                    d = dst[lo:hi]
                    if inplace:
                        red.reduce(d, d, tmp[lo - bounds[rb]:hi - bounds[rb]])
                    else:
                        red.reduce(d, d, src[lo:hi])
                    if k == n - 2:
                        red.finalize(d)
                if k + 1 < last:
                    # the next receive of segment j goes into block (r-k-3): make sure
                    # the earlier send from that same segment has left
                    if k + 1 >= n - 1:
                        nb = (r - k - 3) % n
                        prev = sends.pop((nb, j), None)
                        if prev is not None and not prev.test():
                            yield [prev]
                    post(k + 1, j)
        pending = [s for s in allsends if not s.test()]
        if pending:
            yield pending
    finally:
        if tmpbuf is not None:
            ctx.give(tmpbuf)


def _one_segment(bounds, itemsize: int) -> bool:
    """True when every block fits in one pipeline segment (then :func:`ring_single` runs)."""
    return max(bounds[i + 1] - bounds[i] for i in range(len(bounds) - 1)) * itemsize <= SEGMENT_BYTES


def ring_single(tr, tag, src, dst, red, ctx, bounds):
    """The ring of :func:`ring_phases` when every block is one segment, with less Python per step.

    The same messages (one block per step to the right neighbour, ``2 (n-1)``
    steps, same tag), the same receive targets and the same reduction
    expressions as :func:`ring_phases` with ``nseg = 1``, so the same result
    bits; what goes is the segment bookkeeping (per-segment offsets, the send
    table, closures) that dominates small messages. Each step waits for its
    receive and its send before the next is posted (a send below the eager
    limit is complete at once; a larger one completes once the neighbour,
    which posted its receive first, has the bytes). The in-place receive
    scratch is cached per (dtype, block) in the context
    (:meth:`~hpcbench.collectives._core.Context.take_scratch`).
    :func:`ring_schedule` describes the same steps for persistent plans.
    """
    n, r = tr.world_size, tr.rank
    right, left = (r + 1) % n, (r - 1) % n
    inplace = src is dst or is_inplace(src, dst)
    tmp = ctx.take_scratch(dst.dtype, max(bounds[i + 1] - bounds[i] for i in range(n))) \
        if inplace else None
    try:
        for k in range(2 * (n - 1)):
            rb, sb = (r - k - 2) % n, (r - k - 1) % n
            rlo, rhi = bounds[rb], bounds[rb + 1]
            d = dst[rlo:rhi]
            rbuf = tmp[:rhi - rlo] if (inplace and k < n - 1) else d
            sbuf = (src if k == 0 else dst)[bounds[sb]:bounds[sb + 1]]
            rq = tr.irecv(rbuf, left, tag)
            sq = tr.isend(sbuf, right, tag)
            if not (rq.test() and sq.test()):
                yield [rq, sq]
            if k < n - 1:
                red.reduce(d, d, rbuf if inplace else src[rlo:rhi])
                if k == n - 2:
                    red.finalize(d)
    finally:
        if tmp is not None:
            ctx.keep_scratch(tmp)


@register("ring", deterministic=True,
          description="ring reduce-scatter + allgather, pipelined (Patarasuk & Yuan 2009)")
def ring_allreduce(tr, tag, src, dst, red, ctx, **_):
    """Ring allreduce of ``src`` into ``dst`` (see module docstring)."""
    bounds = partition(dst.size, tr.world_size)
    if tr.world_size > 1 and dst.size and _one_segment(bounds, dst.dtype.itemsize):
        yield from ring_single(tr, tag, src, dst, red, ctx, bounds)
        return
    yield from ring_phases(tr, tag, src, dst, red, ctx, bounds)


@register_schedule("ring")
def ring_schedule(n: int, rank: int, count: int, itemsize: int,
                  inplace: bool) -> list[Step] | None:
    """Schedule of :func:`ring_single`: the ring whose blocks are one segment each.

    Step ``k`` of ``2 (n - 1)`` sends block ``(r - k - 1) mod n`` to the right
    neighbour and receives block ``(r - k - 2) mod n`` from the left one; the
    first ``n - 1`` steps reduce it (into the scratch first when in place), the
    last of them finalizes the block this rank owns. The same receive targets
    and reduction expressions as :func:`ring_single`, so the same bits. See
    :mod:`hpcbench.collectives.persistent`.

    Returns
    -------
    list of Step, or None
        None when a block exceeds :data:`SEGMENT_BYTES` (the pipelined
        generator runs).
    """
    bounds = partition(count, n)
    if not _one_segment(bounds, itemsize):
        return None
    right, left = (rank + 1) % n, (rank - 1) % n
    steps = []
    for k in range(2 * (n - 1)):
        rb, sb = (rank - k - 2) % n, (rank - k - 1) % n
        rlo, rhi = bounds[rb], bounds[rb + 1]
        d = Span("dst", rlo, rhi)
        rbuf = Span("tmp", 0, rhi - rlo) if (inplace and k < n - 1) else d
        send = Span("src" if k == 0 else "dst", bounds[sb], bounds[sb + 1])
        red = fin = None
        if k < n - 1:
            red = (d, d, rbuf if inplace else Span("src", rlo, rhi))
            fin = d if k == n - 2 else None
        steps.append(Step(right, send, left, rbuf, red, fin))
    return steps


@register_cost("ring")
def ring_cost(nbytes, p, alpha, beta, gamma=0.0, local_size=None):
    """Ring allreduce time over the link model, with its segment pipeline.

    Each of the ``2 (p-1)`` steps moves one block of ``m/p`` bytes per rank,
    cut into ``S = ceil(m / (p * SEGMENT_BYTES))`` segments of ``s = m/(pS)``
    bytes posted back to back. The link serialises a rank's segments (``s
    beta`` each) but not the latency, and segment ``j`` of step ``k + 1``
    leaves once segment ``j`` of step ``k`` has arrived, so a step lasts
    ``T = max(S s beta, alpha + s beta)``; the last step ends when its last
    segment arrives:

    ``t = (2(p-1) - 1) T + S s beta + alpha + (p-1)/p m gamma``.

    With one segment (``S = 1``) this is Patarasuk and Yuan's (2009)
    ``2 (p-1) (alpha + m/p beta) + (p-1)/p m gamma``; with many, latency
    hides behind the link: ``2 (p-1)/p m beta + alpha``.
    """
    if p <= 1 or nbytes <= 0:
        return 0.0
    block = nbytes / p
    nseg = max(1, math.ceil(math.ceil(block) / SEGMENT_BYTES))
    s = block / nseg
    step = max(nseg * s * beta, alpha + s * beta)
    return (2 * (p - 1) - 1) * step + nseg * s * beta + alpha + (p - 1) * block * gamma
