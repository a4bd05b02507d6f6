"""Sparse allreduce of ``(indices, values)`` payloads: allgather and ring variants."""

from __future__ import annotations

import numpy as np
import torch

from hpcbench.collectives.compressed._engine import (allgather_sizes, pack, ring_allgatherv,
                                                     ring_allreduce, unpack)
from hpcbench.collectives.compressed.profile import PhaseProfile
from hpcbench.collectives.compressed.sparse_sum import SparseSum, coalesce, scatter_sum
from hpcbench.collectives.transport import Transport

__all__ = ["sparse_allgather_gen", "sparse_ring_gen", "shared_sparse_gen"]


def _zeroed(out, ctx) -> torch.Tensor:
    """``out`` (flat view) zeroed, or a fresh zero tensor of ``ctx.numel`` elements."""
    if out is None:
        return torch.zeros(ctx.numel, dtype=ctx.dtype)
    return out.view(-1).zero_()


def sparse_allgather_gen(tr: Transport, tag: int, payload, ctx, fixed_size: bool, out=None,
                         output: str = "dense", profile: PhaseProfile | None = None):
    """Generator: allgather every rank's ``(indices, values)``, then sum them.

    A ring allgather of the packed payloads (``P - 1`` steps; at step ``s``
    rank ``r`` forwards block ``r - s`` to ``r + 1``), preceded by an exchange
    of sizes (one int64 pair per rank) unless the compressor is
    ``fixed_size``. With ``output="dense"`` the output is zeroed while the
    first block is on the wire, and once all blocks are in, each rank's
    ``(indices, values)`` is scatter-added in rank order
    (:func:`~hpcbench.collectives.compressed.sparse_sum.scatter_sum`).

    Parameters
    ----------
    out : torch.Tensor, optional
        Dense output to overwrite (``ctx.numel`` elements, ``ctx.dtype``);
        a new tensor if omitted. Ignored with ``output="sparse"``.
    output : {"dense", "sparse"}
        ``"sparse"`` skips the scatter: the result is a
        :class:`~hpcbench.collectives.compressed.sparse_sum.SparseSum` of the
        received parts, in rank order (its ``to_dense()`` is bitwise the dense
        result).
    profile : PhaseProfile, optional
        Receives the ``decode`` phase.

    Returns
    -------
    torch.Tensor or SparseSum
        Flat tensor of ``ctx.numel`` elements in ``ctx.dtype``,
        ``sum_r decompress(payload_r)``; or its sparse form.
    """
    buf, sizes = pack(payload)
    P = tr.size
    if fixed_size or P == 1:
        all_sizes = [sizes] * P
    else:
        all_sizes = yield from allgather_sizes(tr, tag + 2, sizes)
    nbytes = [sum((s + 7) // 8 * 8 for s in ss) if len(ss) > 1 else ss[0] for ss in all_sizes]
    dense = output == "dense"

    def zero_output():  # overlaps the first block's time on the wire
        nonlocal out
        stamp = PhaseProfile.start()
        out = _zeroed(out, ctx)
        if profile is not None:
            profile.stop("decode", stamp)

    blocks = yield from ring_allgatherv(tr, tag, buf, nbytes,
                                        during_first_step=zero_output if dense else None)
    stamp = PhaseProfile.start()
    parts = [unpack(b, ss, payload) for b, ss in zip(blocks, all_sizes)]
    if not dense:
        result = SparseSum(parts, ctx.shape, ctx.dtype)
    else:
        result = scatter_sum(parts, out if P > 1 else _zeroed(out, ctx))
    if profile is not None:
        profile.stop("decode", stamp)
    return result


def shared_sparse_gen(tr: Transport, tag: int, payload, ctx, compressor, output: str = "dense"):
    """Generator: every rank kept the same indices: ring-allreduce the values only.

    Returns the flat dense sum, or with ``output="sparse"`` a one-part
    :class:`SparseSum` of the shared indices and the decoded summed values.
    """
    values = payload[0]
    summed = yield from ring_allreduce(tr, tag, values)
    if output == "sparse":
        idx = ctx.extra["indices"]
        dec = compressor.decompress((summed,), ctx).reshape(-1)
        return SparseSum([(idx, dec[idx.long()])], ctx.shape, ctx.dtype)
    return compressor.decompress((summed,), ctx).reshape(-1)


def _send_sparse(tr, tag, dest, idx, vals):
    """Post count then packed (int64 idx, values) to ``dest``; returns the requests and keep-alive."""
    count = np.array([idx.numel()], dtype=np.int64)
    body, _ = pack((idx.long().contiguous(), vals.contiguous()))
    return [tr.isend(count, dest, tag), tr.isend(body, dest, tag + 1)], (count, body)


def _recv_sparse(tr, tag, source, vdtype):
    """Generator: receive a count, then a packed (int64 idx, values) body."""
    count = np.zeros(1, dtype=np.int64)
    yield [tr.irecv(count, source, tag)]
    n = int(count[0])
    vsize = torch.empty(0, dtype=vdtype).element_size()
    sizes = [8 * n, vsize * n]
    body = np.empty(sum((s + 7) // 8 * 8 for s in sizes), np.uint8)
    yield [tr.irecv(body, source, tag + 1)]
    idx, vals = unpack(body, sizes, (torch.empty(0, dtype=torch.int64), torch.empty(0, dtype=vdtype)))
    return idx, vals


def sparse_ring_gen(tr: Transport, tag: int, payload, ctx, output: str = "dense"):
    """Generator: sparse ring allreduce (reduce-scatter then allgather of sparse segments).

    The index range is cut into ``P`` contiguous segments. Reduce-scatter:
    ``P - 1`` steps, each forwarding one segment's accumulated ``(indices,
    values)`` (coalesced: equal indices summed) to the right neighbour, which
    merges its own entries of that segment. Allgather: the fully reduced
    segments travel once more round the ring. Every message is preceded by
    an 8-byte count. Wire volume grows with the union of the ranks'
    selections, at most ``numel`` pairs per segment. With ``output="sparse"``
    returns the reduced segments as a :class:`SparseSum` (disjoint, sorted).
    """
    P, r = tr.size, tr.rank
    idx, vals = payload[0].long(), payload[1].to(ctx.dtype)
    order = torch.argsort(idx)
    idx, vals = idx[order], vals[order]
    bounds = np.linspace(0, ctx.numel, P + 1).astype(np.int64)
    cuts = torch.searchsorted(idx, torch.from_numpy(bounds)).tolist()
    seg = [(idx[cuts[i]:cuts[i + 1]], vals[cuts[i]:cuts[i + 1]]) for i in range(P)]
    right, left = (r + 1) % P, (r - 1) % P
    for s in range(P - 1):
        send_i, recv_i = (r - s) % P, (r - s - 1) % P
        reqs, keep = _send_sparse(tr, tag, right, *seg[send_i])
        got = yield from _recv_sparse(tr, tag, left, ctx.dtype)
        yield reqs
        seg[recv_i] = coalesce(torch.cat([seg[recv_i][0], got[0]]), torch.cat([seg[recv_i][1], got[1]]))
        del keep
    for s in range(P - 1):
        send_i, recv_i = (r + 1 - s) % P, (r - s) % P
        reqs, keep = _send_sparse(tr, tag + 2, right, *seg[send_i])
        seg[recv_i] = yield from _recv_sparse(tr, tag + 2, left, ctx.dtype)
        yield reqs
        del keep
    if output == "sparse":
        return SparseSum(seg, ctx.shape, ctx.dtype)
    return scatter_sum(seg, torch.zeros(ctx.numel, dtype=ctx.dtype))
