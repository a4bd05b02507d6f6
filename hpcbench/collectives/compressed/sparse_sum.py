"""The sparse form of a compressed allreduce's result (``output="sparse"``)."""

from __future__ import annotations

from typing import Sequence

import torch

from hpcbench.collectives.compressed import _scatter

__all__ = ["SparseSum", "scatter_sum", "coalesce"]


def scatter_sum(parts, out: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """``out += alpha * scatter(idx, vals)`` for each ``(idx, vals)`` of ``parts`` **in order**.

    Every rank adds the same parts in the same (rank) order, so the float
    additions happen in the same sequence and all ranks get bitwise-equal
    results; the same sequence as one ``index_add_`` of the concatenation
    (the compiled loop of :mod:`~hpcbench.collectives.compressed._scatter`
    when it applies, ``index_add_`` otherwise: bitwise the same).

    Parameters
    ----------
    parts : sequence of (torch.Tensor, torch.Tensor)
        Indices (int32/int64, shape (k,)) into the flat ``out`` and values (shape (k,)).
    out : torch.Tensor
        Flat (1-D) accumulator, modified in place and returned.
    alpha : float, default 1.0
    """
    for idx, vals in parts:
        if idx.numel():
            vals = vals.to(out.dtype)
            if alpha != 1.0:
                out.index_add_(0, idx, vals, alpha=alpha)
            elif _scatter.supported(out, idx, vals):
                _scatter.scatter_add(out, idx, vals)
            else:
                out.index_add_(0, idx, vals)
    return out


def coalesce(idx: torch.Tensor, vals: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum the values of equal indices: sorted unique int64 indices (shape (u,)) and their sums."""
    if idx.numel() == 0:
        return idx.long(), vals
    uniq, inv = torch.unique(idx.long(), sorted=True, return_inverse=True)
    out = torch.zeros(uniq.numel(), dtype=vals.dtype)
    out.index_add_(0, inv, vals)
    return uniq, out


class SparseSum:
    """Sum over ranks of sparse contributions, kept as per-rank ``(indices, values)`` parts.

    The dense result is ``sum over parts of scatter(indices, values)``, the
    parts added **in their stored order** (rank order): every rank holds the
    same parts in the same order, so every rank's :meth:`to_dense` is bitwise
    the same and equals what ``output="dense"`` returns. A sparse optimizer
    (StellaTrain applies updates on the CPU sparsely) uses :meth:`add_to`,
    which costs O(total kept) instead of a pass over the whole tensor.

    Parameters
    ----------
    parts : sequence of (torch.Tensor, torch.Tensor)
        Per contribution: indices (int32 or int64, shape (k_i,), positions in
        the flattened tensor, distinct within a part) and values (shape
        (k_i,), dtype ``dtype``).
    shape : torch.Size
        Shape of the dense tensor.
    dtype : torch.dtype
        Dtype of the dense tensor and of the values.

    Attributes
    ----------
    parts, shape, dtype, numel
        As given; ``numel`` is the dense element count.
    """

    def __init__(self, parts: Sequence[tuple[torch.Tensor, torch.Tensor]], shape, dtype: torch.dtype) -> None:
        self.parts = list(parts)
        self.shape = torch.Size(shape)
        self.dtype = dtype
        self.numel = self.shape.numel()

    @property
    def nnz(self) -> int:
        """Stored entries over all parts (duplicates across parts counted each time)."""
        return int(sum(i.numel() for i, _ in self.parts))

    def add_to(self, tensor: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
        """``tensor += alpha * self`` in place, part by part (rank order); returns ``tensor``.

        Raises
        ------
        ValueError
            If ``tensor`` is not contiguous or its shape differs from :attr:`shape`.
        """
        if tensor.shape != self.shape or not tensor.is_contiguous():
            raise ValueError(f"tensor must be contiguous with shape {tuple(self.shape)}, "
                             f"got {tuple(tensor.shape)}")
        scatter_sum(self.parts, tensor.view(-1), alpha)
        return tensor

    def to_dense(self, out: torch.Tensor | None = None) -> torch.Tensor:
        """The dense sum, shape :attr:`shape`, dtype :attr:`dtype` (written into ``out`` if given)."""
        if out is None:
            out = torch.zeros(self.shape, dtype=self.dtype)
        else:
            out.zero_()
        return self.add_to(out)

    def coalesce(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Sorted unique int64 indices and their summed values (summed in part order).

        Returns
        -------
        indices : torch.Tensor
            int64, shape (u,), ascending.
        values : torch.Tensor
            shape (u,), dtype :attr:`dtype`; equal to ``to_dense().view(-1)[indices]``.
        """
        if not self.parts:
            return torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=self.dtype)
        return coalesce(torch.cat([i.long() for i, _ in self.parts]),
                        torch.cat([v.to(self.dtype) for _, v in self.parts]))

    def __repr__(self) -> str:
        return f"SparseSum(shape={tuple(self.shape)}, dtype={self.dtype}, parts={len(self.parts)}, nnz={self.nnz})"
