"""Per-worker throughput model ``f(x) = min((beta / alpha) x, beta)`` and its fit to measured steps.

Source: ``backend/src/engine/batch_rate_alloc_optim.py``: ``SpecialDeque``
(lines 37-57: one smoothed throughput per batch size, momentum 0.9, 0.999
once running), ``MainOptimizer.update`` (lines 345-361: ``batch / bwd``
samples/s, after 4 warm-up records per worker) and ``fit_alpha_betas``
(lines 404-427: Nelder-Mead on the L2 loss, bounds ``alpha >= 16``,
``beta >= 100``, starting from the previous fit; only with >= 4 samples).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

__all__ = ["ThroughputModel", "ThroughputHistory", "fit_throughput", "INITIAL_MODEL", "MIN_ALPHA", "MIN_BETA"]

#: StellaTrain's bounds of the fit (``fit_alpha_betas``: ``bounds=((16, None), (100, None))``)
MIN_ALPHA, MIN_BETA = 16.0, 100.0


@dataclass(frozen=True)
class ThroughputModel:
    """A device's throughput as a function of its batch size.

    ``f(x) = min((beta / alpha) x, beta)`` samples/s: linear up to the batch
    ``alpha`` that saturates the device, then flat at ``beta``. The step's
    backward time at batch ``x`` is ``x / f(x) = max(alpha, x) / beta`` s.

    Attributes
    ----------
    alpha : float
        Saturating batch size (samples).
    beta : float
        Peak throughput (samples/s).
    """

    alpha: float
    beta: float

    def rate(self, x):
        """``f(x)`` in samples/s (array or scalar ``x``)."""
        return np.minimum((self.beta / self.alpha) * np.asarray(x, dtype=np.float64), self.beta)

    def time(self, x):
        """Backward seconds of a batch of ``x`` samples: ``x / f(x)``."""
        return np.asarray(x, dtype=np.float64) / self.rate(x)


#: StellaTrain's model before any fit (``MainOptimizer.__init__``: alphas 10, betas 200)
INITIAL_MODEL = ThroughputModel(10.0, 200.0)


class ThroughputHistory:
    """One worker's measured throughput per batch size (StellaTrain's ``SpecialDeque``).

    Each :meth:`add` of ``(batch, backward_s)`` updates that batch size's
    throughput ``y = momentum * y + (1 - momentum) * batch / backward_s``
    (the first as it is).

    Attributes
    ----------
    momentum : float
        0.9; StellaTrain raises it to 0.999 once running.
    samples : int
        Measurements added (not distinct batch sizes).
    """

    def __init__(self, momentum: float = 0.9) -> None:
        self.momentum = momentum
        self.samples = 0
        self._points: dict[int, float] = {}

    def add(self, batch: int, backward_s: float) -> None:
        """One step's measurement: ``batch`` samples took ``backward_s`` of backward."""
        y = batch / backward_s
        old = self._points.get(batch)
        self._points[batch] = y if old is None else old * self.momentum + y * (1 - self.momentum)
        self.samples += 1

    def points(self) -> tuple[np.ndarray, np.ndarray]:
        """Batch sizes and their smoothed throughputs (samples/s), in first-seen order."""
        return (np.array(list(self._points), dtype=np.float64),
                np.array(list(self._points.values()), dtype=np.float64))

    def __len__(self) -> int:
        return len(self._points)


def fit_throughput(x, y, initial: ThroughputModel = INITIAL_MODEL, min_alpha: float = MIN_ALPHA,
                   min_beta: float = MIN_BETA) -> ThroughputModel:
    """Fit ``alpha, beta`` to measured points by Nelder-Mead on the L2 loss (scipy.optimize).

    Minimises ``sum_k (f(x_k) - y_k)^2`` within the bounds ``alpha >=
    min_alpha``, ``beta >= min_beta``, as StellaTrain's ``fit_alpha_betas``,
    from two starts, keeping the better fit: ``initial`` clipped into the
    bounds (StellaTrain's only start) and the point of the highest measured
    throughput (``alpha`` its batch size, ``beta`` its throughput).

    StellaTrain's first start is its initial ``alpha = 10`` clipped to 16:
    on the bound, scipy's bounded Nelder-Mead simplex collapses onto the face
    ``alpha = 16`` and stays there (on exact points of ``alpha = 32,
    beta = 400`` it ends at ``alpha = 16``, ``beta = 323``), and later fits
    start from that; the second start avoids it.

    Parameters
    ----------
    x : array_like, shape (k,)
        Batch sizes (samples), k >= 1.
    y : array_like, shape (k,)
        Throughputs (samples/s).
    initial : ThroughputModel
        Starting point (StellaTrain: the previous fit).

    Returns
    -------
    ThroughputModel

    Raises
    ------
    ValueError
        No points, or ``x`` and ``y`` differ in length.
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.size == 0 or x.shape != y.shape:
        raise ValueError(f"need equal-length, non-empty x and y, got {x.shape} and {y.shape}")

    def loss(p):
        return float(np.sum((np.minimum((p[1] / p[0]) * x, p[1]) - y) ** 2))

    best = None
    k = int(np.argmax(y))
    for start in ([initial.alpha, initial.beta], [x[k], y[k]]):
        start = np.maximum(start, [min_alpha, min_beta])
        res = minimize(loss, start, method="Nelder-Mead", bounds=((min_alpha, None), (min_beta, None)))
        if best is None or res.fun < best.fun:
            best = res
    return ThroughputModel(float(best.x[0]), float(best.x[1]))
