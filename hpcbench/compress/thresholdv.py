"""StellaTrain's adaptive threshold sparsifier ("threshold-v"), exactly k elements."""

from __future__ import annotations

import math

import numpy as np
import torch

from hpcbench.compress import _scan
from hpcbench.compress._sparse import SparseCompressor, k_of
from hpcbench.compress.base import Context, Payload, as_flat, check_ratio

__all__ = ["ThresholdVCompressor", "AdaptiveThreshold", "abs_scores"]


def abs_scores(flat: torch.Tensor, buf: np.ndarray | None) -> np.ndarray:
    """``|flat|`` as a float32/float64 numpy array, written into ``buf`` when it fits."""
    if flat.dtype in (torch.float16, torch.bfloat16):
        flat = flat.float()
    x = flat.numpy()
    if buf is not None and buf.shape == x.shape and buf.dtype == x.dtype:
        return np.abs(x, out=buf)
    return np.abs(x)


class AdaptiveThreshold:
    """Pick exactly ``k`` entries of a score vector with a step-adapted threshold.

    The first call selects the exact top-k (``torch.topk``) and sets the
    threshold to the k-th largest score. Later calls make one masked pass,
    ``candidates = nonzero(scores >= threshold)``, then:

    * more than ``k`` candidates: with ``trim="topk"`` keep the ``k`` largest
      candidates (then the selection *is* the exact top-k) and move the
      threshold to ``(1 - margin)`` times the k-th largest score, which raises
      it when too many passed; with ``trim="first"`` keep the first ``k`` in
      memory order, as StellaTrain's scan stops once ``k`` are found, and raise
      the threshold by ``increase``;
    * fewer than ``k``: pad with the first non-candidates in memory order
      (found among the first ``k`` positions of the mask, so O(k) work) and
      lower the threshold by ``decrease`` (1 %).

    Parameters
    ----------
    decrease : float, default 0.01
        Relative lowering when short.
    increase : float, default 0.01
        Relative raising with ``trim="first"`` when ``k`` are found early.
    margin : float, default 0.02
        With ``trim="topk"``, next threshold = ``(1 - margin)`` * k-th score.
    trim : {"topk", "first"}
        How surplus candidates are cut down to ``k``.
    """

    def __init__(self, decrease: float = 0.01, increase: float = 0.01, margin: float = 0.02,
                 trim: str = "topk") -> None:
        for arg, v in (("decrease", decrease), ("increase", increase), ("margin", margin)):
            if not 0.0 <= float(v) < 1.0:
                raise ValueError(f"{arg} must be in [0, 1), got {v!r}")
        if trim not in ("topk", "first"):
            raise ValueError(f"trim must be 'topk' or 'first', got {trim!r}")
        self.decrease, self.increase, self.margin, self.trim = decrease, increase, margin, trim
        self.threshold: dict[str, float] = {}
        self.last_candidates: dict[str, int] = {}
        self._mask: dict[str, np.ndarray] = {}

    def select(self, scores: np.ndarray, k: int, name: str) -> np.ndarray:
        """Indices (int64, shape (k,), distinct) of ``k`` selected scores."""
        n = scores.shape[0]
        if k <= 0:
            return np.zeros(0, np.int64)
        if k >= n:
            return np.arange(n, dtype=np.int64)
        thr = self.threshold.get(name)
        if thr is None or not math.isfinite(thr):
            idx = torch.topk(torch.from_numpy(scores), k, sorted=False).indices.numpy()
            self.threshold[name] = float(scores[idx].min()) * (1.0 - self.margin)
            self.last_candidates[name] = k
            return idx.astype(np.int64, copy=False)
        mask = self._mask.get(name)
        if mask is None or mask.shape[0] != n:
            mask = self._mask[name] = np.empty(n, dtype=bool)
        np.greater_equal(scores, thr, out=mask)
        cand = np.flatnonzero(mask)
        count = cand.shape[0]
        self.last_candidates[name] = count
        if count > k:
            if self.trim == "topk":
                cs = scores[cand]
                part = np.argpartition(cs, count - k)[count - k:]
                idx = cand[part]
                self.threshold[name] = float(cs[part].min()) * (1.0 - self.margin)
            else:
                idx = cand[:k]
                self.threshold[name] = thr * (1.0 + self.increase)
            return idx
        if count == k:
            return cand
        need = k - count
        # among the first count + need positions at most `count` are candidates
        pad = np.flatnonzero(~mask[:count + need])[:need]
        self.threshold[name] = thr * (1.0 - self.decrease)
        return np.concatenate([cand, pad])

    def compiled_ready(self, flat: torch.Tensor, k: int, name: str) -> bool:
        """True when :meth:`select_compiled` applies: float32/64 1-D contiguous, a finite
        threshold from an earlier step, ``trim="topk"``, ``0 < k < n``, compiled loops on."""
        thr = self.threshold.get(name)
        return (thr is not None and math.isfinite(thr) and self.trim == "topk"
                and flat.dtype in _scan.BITS and flat.dim() == 1 and flat.is_contiguous()
                and 0 < k < flat.numel() and _scan.available())

    def select_compiled(self, flat: torch.Tensor, k: int, name: str,
                        add: torch.Tensor | None = None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`select` on ``|flat|`` (of ``flat + add``, added in place) in one compiled pass.

        Same candidates, counts, thresholds and padding as :meth:`select` on
        ``abs(flat)`` (NaN is never a candidate there, so it is dropped here);
        surplus candidates are trimmed by the compiled radix select, which
        may pick other elements among ties at the k-th magnitude than
        ``np.argpartition``. Only when :meth:`compiled_ready`.

        Returns
        -------
        indices : np.ndarray
            int64, shape (k,), distinct.
        raw : np.ndarray
            The selected elements' bits (int32/int64; view as ``flat``'s dtype).
        """
        itype, signless = _scan.BITS[flat.dtype]
        arr = flat.detach().numpy()
        bits = arr.view(itype)
        n = arr.shape[0]
        thr = self.threshold[name]
        t = np.asarray(thr, dtype=arr.dtype).view(itype)[()]    # the float threshold's bits
        cap = 1.5 * self.last_candidates.get(name, k) + 4096
        cand, raw = _scan.scan(arr, bits, signless, t, cap, None if add is None else add.numpy())
        finite = (raw & signless) <= _scan.INF_BITS[flat.dtype]
        if not finite.all():                                      # NaN: never >= thr in select()
            cand, raw = cand[finite], raw[finite]
        count = cand.shape[0]
        self.last_candidates[name] = count
        if count > k:
            idx, raw = _scan.trim(cand, raw, signless, k)
            kth = (raw & signless).min()
            self.threshold[name] = float(np.asarray(kth, itype).view(arr.dtype)) * (1.0 - self.margin)
            return idx, raw
        if count == k:
            return cand, raw
        need = k - count
        free = np.ones(min(n, count + need), bool)
        free[cand[cand < free.shape[0]]] = False
        pad = np.flatnonzero(free)[:need]
        self.threshold[name] = thr * (1.0 - self.decrease)
        return np.concatenate([cand, pad]), np.concatenate([raw, bits[pad]])


class ThresholdVCompressor(SparseCompressor):
    """Adaptive-threshold sparsifier emitting exactly ``k`` elements (StellaTrain).

    Lim et al., "Accelerating Model Training in Multi-cluster Environments
    with Consumer-grade GPUs" (StellaTrain, SIGCOMM 2024), *thresholdv*: the
    threshold starts at the exact k-th magnitude and is adapted step by step
    (see :class:`AdaptiveThreshold`), so that after the first step selection
    is one masked pass over ``|x|`` instead of a top-k.

    Payload ``(indices int32/int64 (k,), values (k,) in the tensor's dtype)``
    with ``k = ceil(ratio * numel)``, always exactly ``k``.

    Parameters
    ----------
    ratio : float, default 0.01
        Fraction of elements **kept**, in (0, 1]. (StellaTrain's code takes
        the fraction *dropped*; pass ``1 - that``.)
    decrease, increase, margin, trim
        See :class:`AdaptiveThreshold`.
    """

    name = "thresholdv"
    unbiased = False
    fixed_size = True
    takes_ratio = True
    approximates_topk = True
    ef_options = {"ratio": 0.05}

    def __init__(self, ratio: float = 0.01, decrease: float = 0.01, increase: float = 0.01,
                 margin: float = 0.02, trim: str = "topk") -> None:
        super().__init__()
        self.ratio = check_ratio(ratio)
        self.selector = AdaptiveThreshold(decrease, increase, margin, trim)
        self._buf: dict[str, np.ndarray] = {}

    def compress(self, tensor: torch.Tensor, name: str) -> tuple[Payload, Context]:
        flat = as_flat(tensor)
        k = k_of(flat.numel(), self.ratio)
        if self.selector.compiled_ready(flat, k, name):
            return self._compiled(flat, tensor, k, name)
        ctx = self._context(tensor, name)
        scores = abs_scores(flat, self._buf.get(name))
        self._buf[name] = scores
        return self._pack(flat, self.selector.select(scores, k, name), ctx)

    def compress_accumulate(self, acc: torch.Tensor, tensor: torch.Tensor,
                            name: str) -> tuple[Payload, Context]:
        """``acc += tensor`` fused into the compiled threshold pass when it applies; as ``compress``."""
        self._check_accumulate(acc, tensor)
        k = k_of(acc.numel(), self.ratio)
        if not (acc.is_contiguous() and self.selector.compiled_ready(acc.view(-1), k, name)):
            return super().compress_accumulate(acc, tensor, name)
        return self._compiled(acc.view(-1), acc, k, name, add=as_flat(tensor.detach()))

    def _compiled(self, flat: torch.Tensor, tensor: torch.Tensor, k: int, name: str,
                  add: torch.Tensor | None = None) -> tuple[Payload, Context]:
        ctx = self._context(tensor, name)
        idx, raw = self.selector.select_compiled(flat, k, name, add=add)
        return self._pack(flat, idx, ctx, torch.from_numpy(raw).view(flat.dtype))

    def __repr__(self) -> str:
        return f"ThresholdVCompressor(ratio={self.ratio}, trim={self.selector.trim!r})"
