"""The sparse gradient a sparse optimizer applies: distinct indices and their summed values.

A compressed allreduce with ``output="sparse"`` returns a
:class:`~hpcbench.collectives.compressed.sparse_sum.SparseSum`: per rank, the
``(indices, values)`` it kept (distinct within a part), in rank order. The
dense gradient is the sum of those parts, added in rank order.
:func:`coalesce` turns the parts into one :class:`SparseGradient` without a
pass over the dense tensor: a lone part is used as it is; several parts whose
indices are strictly increasing (every part of the allgather and ring
patterns: :func:`~hpcbench.collectives.compressed.index_codec.sort_pairs`
orders them) are merged (a ``P``-way merge, ``O(nnz log P)``); other parts
are sorted first (stable, ``O(nnz log nnz)``). Values of one index are
summed ``0 + v_0 + v_1 + ...`` in part order, the operations
``SparseSum.to_dense`` does, so ``gradient.values`` is bitwise
``to_dense().view(-1)[gradient.indices]`` (but that a lone part's values are
taken as they are: a ``-0.0`` stays ``-0.0`` where ``to_dense`` adds it to
``+0.0``).

The merge runs compiled (:mod:`hpcbench.runtime.jit`) or, with
``HPCBENCH_JIT=off``, as a stable numpy sort and ``np.add.at`` (the same
additions in the same order: bitwise the same result).
"""

from __future__ import annotations

import numpy as np

from hpcbench.runtime import jit

__all__ = ["SparseGradient", "coalesce"]


class SparseGradient:
    """A sparse gradient of a tensor of ``numel`` elements.

    Attributes
    ----------
    indices : numpy.ndarray of int32 or int64, shape (u,)
        Distinct positions in the flattened tensor (increasing when merged
        from several parts).
    values : numpy.ndarray of float32 or float64, shape (u,)
        The gradient at those positions (sums over ranks, not yet averaged).
    numel : int
        Elements of the dense tensor.
    """

    __slots__ = ("indices", "values", "numel")

    def __init__(self, indices: np.ndarray, values: np.ndarray, numel: int) -> None:
        self.indices = indices
        self.values = values
        self.numel = numel

    @property
    def nnz(self) -> int:
        """Entries (distinct indices)."""
        return int(self.indices.shape[0])

    @property
    def density(self) -> float:
        """``nnz / numel`` (0 for an empty tensor)."""
        return self.nnz / self.numel if self.numel else 0.0


def _numpy(a) -> np.ndarray:
    """A flat numpy view of a tensor or array (no copy for CPU tensors)."""
    if isinstance(a, np.ndarray):
        return a.reshape(-1)
    if hasattr(a, "numpy"):
        return (a.numpy() if not a.requires_grad else a.detach().numpy()).reshape(-1)
    return np.asarray(a).reshape(-1)


def _parts_of(grad) -> tuple[list[tuple[np.ndarray, np.ndarray]], int | None, bool]:
    """``(parts, numel or None, distinct)`` of a SparseSum-like object or an ``(indices, values)`` pair.

    ``distinct``: each part's indices are distinct by contract (a SparseSum's
    or SparseGradient's); a pair's may repeat.
    """
    if hasattr(grad, "parts"):
        return [(_numpy(i), _numpy(v)) for i, v in grad.parts], int(grad.numel), True
    if isinstance(grad, SparseGradient):
        return [(grad.indices, grad.values)], grad.numel, True
    if isinstance(grad, (tuple, list)) and len(grad) == 2:
        return [(_numpy(grad[0]), _numpy(grad[1]))], None, False
    raise TypeError(f"gradient must be a SparseSum, a SparseGradient or an (indices, values) pair, "
                    f"got {type(grad).__name__}")


def coalesce(grad, numel: int, dtype=np.float32, check_range: bool = True) -> SparseGradient:
    """The :class:`SparseGradient` of ``grad``: distinct indices, values summed in part order.

    Parameters
    ----------
    grad : SparseSum, SparseGradient or (indices, values)
        A compressed allreduce's sparse result (any object with ``parts``,
        a sequence of ``(indices, values)`` tensors or arrays whose indices
        are distinct within a part, and ``numel``), or one ``(indices,
        values)`` pair whose indices may repeat (repeats are summed in order).
    numel : int
        Elements of the tensor the gradient belongs to.
    dtype : numpy dtype, default float32
        Dtype of the returned values (the parameter's).
    check_range : bool, default True
        Check that every index lies in ``[0, numel)``. The optimizers pass
        False and check inside their update loop instead (one pass less).

    Returns
    -------
    SparseGradient
        Values in ``dtype``. A lone part with distinct indices is returned
        as it is (no copy when already in ``dtype``, in its own order); a
        merge or sort gives increasing indices.

    Raises
    ------
    TypeError
        ``grad`` is none of the accepted forms, or its indices are not integers.
    ValueError
        ``grad.numel`` differs from ``numel``, indices and values differ in
        length, or (``check_range``) an index lies outside ``[0, numel)``.
    """
    parts = getattr(grad, "parts", None)
    if parts is not None and len(parts) == 1 and grad.numel == numel:      # the common case, kept short
        idx, vals = _numpy(parts[0][0]), _numpy(parts[0][1])
        if idx.shape == vals.shape and idx.dtype.kind in "iu" and idx.shape[0]:
            if vals.dtype != dtype:
                vals = vals.astype(dtype)
            if check_range:
                _check_range(idx, numel)
            return SparseGradient(idx, vals, numel)
    parts, found, distinct = _parts_of(grad)
    if found is not None and found != numel:
        raise ValueError(f"gradient has {found} elements, the parameter {numel}")
    dtype = np.dtype(dtype)
    for idx, vals in parts:
        if idx.shape != vals.shape:
            raise ValueError(f"indices and values differ in length: {idx.shape[0]} and {vals.shape[0]}")
        if idx.dtype.kind not in "iu":
            raise TypeError(f"indices must be integers, got {idx.dtype}")
    parts = [(i, v if v.dtype == dtype else v.astype(dtype)) for i, v in parts if i.shape[0]]
    if not parts:
        return SparseGradient(np.zeros(0, np.int64), np.zeros(0, dtype), numel)
    if len(parts) == 1 and (distinct or _increasing(parts[0][0])):
        if check_range:
            _check_range(parts[0][0], numel)
        return SparseGradient(parts[0][0], parts[0][1], numel)
    idx = np.concatenate([i.astype(np.int64, copy=False) for i, _ in parts])
    vals = np.concatenate([v for _, v in parts])
    _check_range(idx, numel)
    if distinct and jit.enabled():
        offsets = np.zeros(len(parts) + 1, np.int64)
        np.cumsum([i.shape[0] for i, _ in parts], out=offsets[1:])
        out_i, out_v = np.empty_like(idx), np.empty_like(vals)
        u = _merge_kernel()(idx, vals, offsets, out_i, out_v)
        if u >= 0:
            return SparseGradient(out_i[:u], out_v[:u], numel)
    order = np.argsort(idx, kind="stable")      # a part not increasing: sort (equal indices keep part order)
    idx, vals = idx[order], vals[order]
    uniq, first = np.unique(idx, return_index=True)
    if uniq.shape[0] == idx.shape[0]:
        return SparseGradient(uniq, vals + dtype.type(0), numel)      # 0 + v, as to_dense adds
    out = np.zeros(uniq.shape[0], dtype)
    np.add.at(out, np.repeat(np.arange(uniq.shape[0]), np.diff(np.append(first, idx.shape[0]))), vals)
    return SparseGradient(uniq, out, numel)


def _check_range(idx: np.ndarray, numel: int) -> None:
    lo, hi = int(idx.min()), int(idx.max())
    if lo < 0 or hi >= numel:
        raise ValueError(f"index {lo if lo < 0 else hi} is out of range for {numel} elements")


def _increasing(idx: np.ndarray) -> bool:
    """Whether ``idx`` is strictly increasing (compiled when on: one pass, no temporary)."""
    if idx.shape[0] < 2:
        return True
    if jit.enabled():
        return bool(_increasing_kernel()(idx))
    return bool(np.all(idx[1:] > idx[:-1]))


_KERNELS: dict = {}


def _increasing_kernel():
    if "inc" not in _KERNELS:
        @jit.njit
        def increasing(idx):  # pragma: no cover - compiled
            for i in range(1, idx.shape[0]):
                if idx[i] <= idx[i - 1]:
                    return False
            return True
        _KERNELS["inc"] = increasing
    return _KERNELS["inc"]


def _merge_kernel():
    """``merge(idx, vals, offsets, out_i, out_v) -> u``: merge increasing runs, sum equal indices in run order.

    Returns -1 (nothing merged) when a run is not strictly increasing.
    """
    if "merge" not in _KERNELS:
        @jit.njit
        def merge(idx, vals, offsets, out_i, out_v):  # pragma: no cover - compiled
            p = offsets.shape[0] - 1
            for r in range(p):
                for i in range(offsets[r] + 1, offsets[r + 1]):
                    if idx[i] <= idx[i - 1]:
                        return -1          # a run not increasing: the caller sorts instead
            heap_k = np.empty(p, np.int64)      # min-heap of (index, run) by index, then run
            heap_r = np.empty(p, np.int64)
            pos = offsets[:-1].copy()
            n = 0
            for r in range(p):
                if pos[r] < offsets[r + 1]:
                    # sift up
                    c = n
                    heap_k[c], heap_r[c] = idx[pos[r]], r
                    n += 1
                    while c > 0:
                        par = (c - 1) // 2
                        if heap_k[par] < heap_k[c] or (heap_k[par] == heap_k[c] and heap_r[par] < heap_r[c]):
                            break
                        heap_k[par], heap_k[c] = heap_k[c], heap_k[par]
                        heap_r[par], heap_r[c] = heap_r[c], heap_r[par]
                        c = par
            u = -1
            zero = out_v.dtype.type(0)
            while n > 0:
                key, r = heap_k[0], heap_r[0]
                if u < 0 or out_i[u] != key:
                    u += 1
                    out_i[u] = key
                    out_v[u] = zero
                out_v[u] += vals[pos[r]]
                pos[r] += 1
                if pos[r] < offsets[r + 1]:
                    heap_k[0] = idx[pos[r]]
                else:
                    n -= 1
                    heap_k[0], heap_r[0] = heap_k[n], heap_r[n]
                # sift down
                c = 0
                while True:
                    left = 2 * c + 1
                    if left >= n:
                        break
                    m = left
                    right = left + 1
                    if right < n and (heap_k[right] < heap_k[left]
                                      or (heap_k[right] == heap_k[left] and heap_r[right] < heap_r[left])):
                        m = right
                    if heap_k[c] < heap_k[m] or (heap_k[c] == heap_k[m] and heap_r[c] < heap_r[m]):
                        break
                    heap_k[m], heap_k[c] = heap_k[c], heap_k[m]
                    heap_r[m], heap_r[c] = heap_r[c], heap_r[m]
                    c = m
            return u + 1
        _KERNELS["merge"] = merge
    return _KERNELS["merge"]
