"""Sparse allreduce of ``(indices, values)`` payloads: allgather and ring variants."""

from __future__ import annotations

import numpy as np
import torch

from hpcbench.collectives.compressed import index_codec
from hpcbench.collectives.compressed._engine import (aligned, allgather_sizes, pack,
                                                     ring_allgatherv, ring_allreduce, unpack)
from hpcbench.collectives.compressed.profile import PhaseProfile
from hpcbench.collectives.compressed.sparse_sum import SparseSum, coalesce, scatter_sum
from hpcbench.collectives.transport import Transport

__all__ = ["sparse_allgather_gen", "sparse_ring_gen", "shared_sparse_gen"]


def _zeroed(out, ctx) -> torch.Tensor:
    """``out`` (flat view) zeroed, or a fresh zero tensor of ``ctx.numel`` elements."""
    if out is None:
        return torch.zeros(ctx.numel, dtype=ctx.dtype)
    return out.view(-1).zero_()


_RAW = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _raw(values: torch.Tensor) -> np.ndarray:
    """The values' bytes as a numpy integer array of the same item size (bfloat16 included)."""
    return values.contiguous().view(_RAW[values.element_size()]).numpy()


def sparse_allgather_gen(tr: Transport, tag: int, payload, ctx, fixed_size: bool, out=None,
                         output: str = "dense", profile: PhaseProfile | None = None,
                         on_posted=None):
    """Generator: allgather every rank's ``(indices, values)``, then sum them.

    Each rank's block is its indices in the wire encoding of
    :mod:`~hpcbench.collectives.compressed.index_codec` (Elias-Fano with a
    byte-aligned low part when that is smaller than plain int32; pairs
    sorted by index first, which leaves the sum unchanged since a payload's
    indices are distinct),
    padded to 8 bytes, then its values. Blocks travel by a ring allgather
    (``P - 1`` steps; at step ``s`` rank ``r`` forwards block ``r - s`` to
    ``r + 1``), preceded by an exchange of counts (one int64 per rank) unless
    the compressor is ``fixed_size``. Each received block is decoded while
    the next step is on the wire. With ``output="dense"`` the output is
    zeroed in ``P - 1`` slices, one while each step is on the wire (a 100 MB
    output takes 16 ms to zero on one core of the development machine,
    against 10 ms of wire per step at 1 Gbit/s), and once all blocks are in,
    each rank's ``(indices, values)`` is scatter-added in rank order
    (:func:`~hpcbench.collectives.compressed.sparse_sum.scatter_sum`).

    Parameters
    ----------
    payload : tuple of torch.Tensor
        ``(indices, values)``: distinct int32/int64 positions in the flat
        tensor, shape (k,), and the values, shape (k,).
    out : torch.Tensor, optional
        Dense output to overwrite (``ctx.numel`` elements, ``ctx.dtype``);
        a new tensor if omitted. Ignored with ``output="sparse"``.
    output : {"dense", "sparse"}
        ``"sparse"`` skips the scatter: the result is a
        :class:`~hpcbench.collectives.compressed.sparse_sum.SparseSum` of the
        received parts, in rank order (its ``to_dense()`` is bitwise the dense
        result).
    profile : PhaseProfile, optional
        Receives the ``encode`` time of the wire encoding and the ``decode``
        phase (index decoding, zeroing, scatter-add).
    on_posted : callable, optional
        Called once, with no argument, right after the first messages are
        posted (the error-feedback residual update overlaps the wire there).

    Returns
    -------
    torch.Tensor or SparseSum
        Flat tensor of ``ctx.numel`` elements in ``ctx.dtype``,
        ``sum_r decompress(payload_r)``; or its sparse form.
    """
    stamp = PhaseProfile.start()
    numel, P, r = ctx.numel, tr.world_size, tr.rank
    vdtype = payload[1].dtype
    vsize = payload[1].element_size()
    idx, vraw = index_codec.sort_pairs(payload[0].numpy(), _raw(payload[1]))
    k = int(idx.shape[0])
    ib = index_codec.index_nbytes(k, numel)
    buf = np.empty(aligned(ib) + k * vsize, np.uint8)
    buf[:ib] = index_codec.encode(idx, numel)
    buf[aligned(ib):] = vraw.view(np.uint8)
    own = (torch.from_numpy(idx), torch.from_numpy(vraw).view(vdtype) if k else payload[1])
    if profile is not None:
        profile.stop("encode", stamp)
    if fixed_size or P == 1:
        counts = [k] * P
    else:
        got = yield from allgather_sizes(tr, tag + 2, [k])
        counts = [c[0] for c in got]
    nbytes = [aligned(index_codec.index_nbytes(c, numel)) + c * vsize for c in counts]
    dense = output == "dense"
    parts: list = [None] * P
    parts[r] = own

    # the dense output is zeroed in P - 1 slices, one while each step but the last is on the wire
    slices, zeroed = (max(P - 1, 1) if dense else 0), 0

    def zero_slice():
        nonlocal out, zeroed
        if zeroed >= slices:
            return
        t0 = PhaseProfile.start()
        if out is None:     # a fresh tensor comes zeroed
            out, zeroed = _zeroed(out, ctx), slices
        else:
            out.view(-1)[numel * zeroed // slices:numel * (zeroed + 1) // slices].zero_()
            zeroed += 1
        if profile is not None:
            profile.stop("decode", t0)

    def first_step():  # overlaps the first block's time on the wire
        if on_posted is not None:
            on_posted()
        zero_slice()

    def decode(i, block):
        zero_slice()    # the next step is on the wire (after the last step: nothing left to zero)
        t0 = PhaseProfile.start()
        c = counts[i]
        cb = index_codec.index_nbytes(c, numel)
        vals = (torch.from_numpy(block[aligned(cb):]).view(vdtype) if c
                else torch.empty(0, dtype=vdtype))
        parts[i] = (torch.from_numpy(index_codec.decode(block[:cb], c, numel)), vals)
        if profile is not None:
            profile.stop("decode", t0)

    yield from ring_allgatherv(tr, tag, buf, nbytes, during_first_step=first_step,
                               on_receive=decode)
    stamp = PhaseProfile.start()
    if not dense:
        result = SparseSum(parts, ctx.shape, ctx.dtype)
    else:
        result = scatter_sum(parts, out)
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
    body = np.empty(sum(aligned(s) for s in sizes), np.uint8)
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
    P, r = tr.world_size, tr.rank
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
