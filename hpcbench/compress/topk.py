"""Exact top-k sparsification by magnitude."""

from __future__ import annotations

import torch

from hpcbench.compress._select import TopKSelector
from hpcbench.compress._sparse import SparseCompressor, k_of
from hpcbench.compress.base import Context, Payload, as_flat, check_ratio

__all__ = ["TopKCompressor"]


class TopKCompressor(SparseCompressor):
    """Keep the ``k = ceil(ratio * numel)`` largest-magnitude elements.

    The selected set is the one of ``torch.topk(tensor.abs().flatten(), k)``
    (up to the choice among ties at the k-th magnitude), computed by
    :class:`~hpcbench.compress._select.TopKSelector`: a sampled threshold, one
    chunked candidate pass, one ``np.partition`` of the ~1.16 k candidates;
    large float32/float64 tensors never go through a full ``torch.topk``. Payload
    ``(indices int32/int64 of shape (k,), values of shape (k,) in the tensor's
    dtype)``; indices ascending on the fast path. Biased; use with error
    feedback (Stich et al., 2018; Aji & Heafield, 2017).

    Parameters
    ----------
    ratio : float, default 0.01
        Fraction of elements **kept**, in (0, 1].
    selector : TopKSelector, optional
        Selection engine (sample size, chunk, fallback size); default one.
    """

    name = "topk"
    unbiased = False
    fixed_size = True
    takes_ratio = True
    ef_options = {"ratio": 0.05}

    def __init__(self, ratio: float = 0.01, selector: TopKSelector | None = None) -> None:
        super().__init__()
        self.ratio = check_ratio(ratio)
        self.selector = selector if selector is not None else TopKSelector()

    def compress(self, tensor: torch.Tensor, name: str) -> tuple[Payload, Context]:
        return self._select(as_flat(tensor), tensor, name)

    def compress_accumulate(self, acc: torch.Tensor, tensor: torch.Tensor,
                            name: str) -> tuple[Payload, Context]:
        """``acc += tensor`` fused into the selection's candidate pass; bitwise as ``compress``."""
        self._check_accumulate(acc, tensor)
        if not acc.is_contiguous():
            return super().compress_accumulate(acc, tensor, name)
        return self._select(acc.view(-1), acc, name, add=as_flat(tensor.detach()))

    def _select(self, flat: torch.Tensor, tensor: torch.Tensor, name: str,
                add: torch.Tensor | None = None) -> tuple[Payload, Context]:
        ctx = self._context(tensor, name)
        idx, values = self.selector.select(flat, k_of(flat.numel(), self.ratio), add=add)
        return self._pack(flat, idx, ctx, values)

    def __repr__(self) -> str:
        return f"TopKCompressor(ratio={self.ratio})"
