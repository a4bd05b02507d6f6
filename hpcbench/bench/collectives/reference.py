"""Inputs of the collective benchmark and the result every rank expects.

Each rank's input is a small-integer pattern of its rank (exact in bfloat16
sums up to 64 ranks), so every rank can compute every other rank's input and
hence the exact reference result locally, without communication.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DTYPES", "ITEMSIZE", "pattern", "as_dtype", "reference", "count_wrong"]

#: element types of the sweep and their sizes in bytes
ITEMSIZE = {"float32": 4, "float64": 8, "bfloat16": 2, "int64": 8}
DTYPES = tuple(ITEMSIZE)
#: relative tolerance of :func:`count_wrong` per element type
_TOLERANCE = {"float32": 1e-5, "float64": 1e-12, "bfloat16": 1e-2, "int64": 0.0}


def pattern(rank: int, count: int, offset: int = 0) -> np.ndarray:
    """Input of ``rank``: ``((i * 7 + rank * 3) % 5) - 2`` for element ``i``, float64 of shape (count,)."""
    i = np.arange(offset, offset + count, dtype=np.int64)
    return (((i * 7 + rank * 3) % 5) - 2).astype(np.float64)


def as_dtype(arr64: np.ndarray, dtype: str, torch_needed: bool):
    """``arr64`` in ``dtype``: a torch tensor for bfloat16 or when ``torch_needed``, else numpy."""
    import torch

    if dtype == "bfloat16":
        return torch.from_numpy(arr64).to(torch.bfloat16)
    a = arr64.astype(dtype)
    return torch.from_numpy(a) if torch_needed else a


def reference(n: int, count: int, redop: str, dtype: str, op: str, rank: int) -> np.ndarray:
    """What ``rank`` must hold after ``op`` over ``n`` ranks (float64).

    ``count`` is the full buffer's element count (``size`` of the row);
    ``avg`` of ``int64`` is the floor of the sum over ``n``.
    """
    if op == "bcast":
        return pattern(0, count)
    if op == "allgather":            # each rank contributed count // n elements
        return np.concatenate([pattern(r, count // n) for r in range(n)])
    stack = np.stack([pattern(r, count) for r in range(n)]) if count else np.zeros((n, 0))
    ref = {"sum": stack.sum(0), "avg": stack.sum(0), "max": stack.max(0), "min": stack.min(0)}[redop]
    if redop == "avg":
        ref = np.floor_divide(ref, n) if dtype == "int64" else ref / n
    if op == "reduce_scatter":
        m = count // n
        ref = ref[rank * m:(rank + 1) * m]
    return ref


def count_wrong(result, ref: np.ndarray, dtype: str) -> int:
    """Elements of ``result`` (numpy or torch) differing from ``ref`` beyond ``dtype``'s tolerance.

    A result of the wrong length counts as entirely wrong (the longer length).
    """
    import torch

    got = result.detach().to("cpu", torch.float64).numpy() if isinstance(result, torch.Tensor) else \
        np.asarray(result, dtype=np.float64)
    got = got.reshape(-1)
    if got.size != ref.size:
        return max(got.size, ref.size)
    tol = _TOLERANCE[dtype]
    return int(np.count_nonzero(np.abs(got - ref) > tol * np.maximum(1.0, np.abs(ref))))
