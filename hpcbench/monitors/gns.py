"""Gradient noise scale (McCandlish et al. 2018), as KungFu's online monitor.

McCandlish, Kaplan, Amodei and the OpenAI Dota team, "An Empirical Model of
Large-Batch Training" (arXiv:1812.06162), appendix A.1: the gradient of a batch
of ``B`` samples, ``G_B``, has ``E|G_B|^2 = |G|^2 + tr(Sigma) / B``, with ``G``
the true gradient and ``Sigma`` the per-sample gradient covariance. Two batch
sizes give two equations and the unbiased estimates

``|G|^2  ~ (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)``
``tr(S)  ~ (|G_small|^2 - |G_big|^2) / (1/B_small - 1/B_big)``

and the *simple noise scale* ``B_simple = tr(Sigma) / |G|^2`` (the batch size
beyond which larger batches stop paying off). In data-parallel training both
batches come for free: ``G_small`` is a worker's gradient before the
allreduce (``B_small`` its batch) and ``G_big`` the synchronised mean
(``B_big`` the global batch). KungFu (Mai et al., OSDI'20) runs this as a
monitor beside synchronous SGD (``MonitorGradientNoiseScaleOptimizer``).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from hpcbench.monitors.base import GradientView, Monitor
from hpcbench.monitors.norms import sq_norm, sq_norm_part

__all__ = ["GradientNoiseScale", "ESTIMATORS", "sq_norm", "noise_scale_terms"]

#: how ``|G_small|^2`` is taken: one worker's (KungFu's), or the mean over workers
ESTIMATORS = ("local", "mean")


def noise_scale_terms(g_small_sq: float, b_small: float, g_big_sq: float,
                      b_big: float) -> tuple[float, float]:
    """Single-step unbiased estimates of ``|G|^2`` and ``tr(Sigma)`` from two batch sizes.

    McCandlish et al. (2018), appendix A.1, equations A.2-A.3 (the formulas
    of the module docstring).

    Parameters
    ----------
    g_small_sq, g_big_sq : float
        Squared L2 norms of the gradients of ``b_small`` and ``b_big`` samples.
    b_small, b_big : float
        Batch sizes in samples, ``0 < b_small < b_big``.

    Returns
    -------
    (float, float)
        ``(|G|^2, tr(Sigma))`` estimates, in squared gradient units; either
        may be negative for one step (see :class:`GradientNoiseScale`).

    Raises
    ------
    ValueError
        Unless ``0 < b_small < b_big``.
    """
    if not 0 < b_small < b_big:
        raise ValueError(f"noise scale needs 0 < B_small < B_big, got B_small={b_small!r}, "
                         f"B_big={b_big!r}")
    g_sq = (b_big * g_big_sq - b_small * g_small_sq) / (b_big - b_small)
    trace = (g_small_sq - g_big_sq) / (1.0 / b_small - 1.0 / b_big)
    return g_sq, trace


class _EMA:
    """KungFu's exponential moving average: seeded with the first value, then
    ``v <- alpha x + (1 - alpha) v`` (``alpha`` weighs the *newest* value)."""

    __slots__ = ("alpha", "value")

    def __init__(self, alpha: float) -> None:
        self.alpha = alpha
        self.value: float | None = None

    def update(self, x: float) -> float:
        self.value = x if self.value is None else self.alpha * x + (1.0 - self.alpha) * self.value
        return self.value


class GradientNoiseScale(Monitor):
    """Simple gradient noise scale ``B_simple`` of synchronous data-parallel SGD.

    Per observed step, from ``|G_small|^2`` (a worker's gradient, ``B_small``
    samples) and ``|G_big|^2`` (the synchronised mean gradient, ``B_big``
    samples): the single-step estimates ``g_sq`` of ``|G|^2`` and ``trace`` of
    ``tr(Sigma)`` (module docstring, McCandlish et al. 2018, appendix A.1),
    each smoothed by an exponential moving average, and
    ``B_simple = trace_ema / g_sq_ema``.

    No gradient travels for this monitor: ``|G_small|^2`` is the runner's
    ``GradientView.local_sq_norm`` and ``|G_big|^2`` is read from the
    synchronised gradients, each rank reading a ``1/P`` share of them (the same
    on every rank; :func:`hpcbench.monitors.norms.sq_norm_part`, summed in the
    allreduce below: half the reading per rank at 2 ranks). One allreduce of
    three float64 scalars makes every rank use the same inputs (so all ranks
    return the same values): with
    ``estimator="local"`` rank 0's ``|G_small|^2`` and ``B_small`` (KungFu's
    estimate: the master's own gradient), with ``estimator="mean"`` their
    means over workers.

    Why single-step values can be negative: both estimates are differences
    of two noisy squared norms. ``|G_small|^2 - |G_big|^2`` is positive only
    on average (``tr(Sigma) (1/B_small - 1/B_big)``); when the noise is large
    against ``|G|^2`` (small batches, late in training) a step whose worker
    gradient happens to be shorter than the mean gives ``trace < 0``, and one
    whose worker gradient is long gives ``g_sq < 0``. The estimates are
    unbiased, their ratio is not and jumps sign, so, as the paper advises,
    numerator and denominator are averaged *separately* over steps and only
    the ratio of the averages is reported: the EMAs cancel most of the noise
    and are positive once they have seen enough steps. Until ``g_sq_ema``
    is positive ``B_simple`` is NaN.

    The ``"mean"`` estimator averages ``|G_small|^2`` over the ``n`` workers:
    each term has the same expectation, so the estimate stays unbiased and
    the variance of ``|G_small|^2`` drops by up to ``n`` (KungFu uses the
    master's term only).

    World size 1 (``B_big == B_small``): the two equations coincide and
    nothing can be estimated; every output is NaN and the averages are left
    untouched.

    Parameters
    ----------
    interval : int, default 1
        Steps between observations (``monitor_interval``), >= 1.
    alpha : float, default 0.9
        Weight of the newest value in the moving averages, in (0, 1]: KungFu's
        convention and default (``kungfu/ema.hpp``: ``v = alpha x + (1 -
        alpha) v``, seeded with the first value). Smaller values smooth more
        (the paper's own runs average over many steps; 0.9 follows KungFu and
        smooths little).
    estimator : {"local", "mean"}, default "local"
        ``|G_small|^2`` of rank 0 (KungFu) or averaged over workers.

    Raises
    ------
    ValueError
        An option out of range; the message names the option.

    Notes
    -----
    Assumes every worker's batch has the same size (``B_big = n B_small``);
    with ``"mean"``, ``B_small`` is the mean local batch. Outputs:
    ``gns_g_sq``, ``gns_trace`` (single step), ``gns_g_sq_ema``,
    ``gns_trace_ema`` (averages) and ``gns_b_simple`` (samples).
    """

    name: ClassVar[str] = "gns"
    needs_local_grads: ClassVar[bool] = False
    outputs: ClassVar[tuple[str, ...]] = ("gns_g_sq", "gns_trace", "gns_g_sq_ema",
                                          "gns_trace_ema", "gns_b_simple")

    def __init__(self, interval: int = 1, *, alpha: float = 0.9, estimator: str = "local") -> None:
        super().__init__(interval)
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 < alpha <= 1.0:
            raise ValueError(f"gns option alpha: must be a number in (0, 1], got {alpha!r}")
        if estimator not in ESTIMATORS:
            raise ValueError(f"gns option estimator: must be one of {', '.join(ESTIMATORS)}, "
                             f"got {estimator!r}")
        self.alpha = float(alpha)
        self.estimator = estimator
        self._g_sq = _EMA(self.alpha)
        self._trace = _EMA(self.alpha)

    def _agreed_inputs(self, view: GradientView) -> tuple[float, float, float]:
        """``(|G_small|^2, B_small, |G_big|^2)`` agreed by every rank (one scalar allreduce)."""
        from hpcbench.collectives.api import allreduce

        comm = view.comm
        n, rank = comm.size, comm.rank
        weight = 1.0 / n if self.estimator == "mean" else float(rank == 0)
        # |G_big|^2: every rank holds the same synchronised gradients, so each reads its 1/n share
        v = np.array([weight * view.local_sq_norm, weight * view.local_batch,
                      sq_norm_part(view.global_grads, rank, n)], dtype=np.float64)
        if n > 1:
            allreduce(v, v, op="sum", comm=comm, name="monitor.gns")
        return float(v[0]), float(v[1]), float(v[2])

    def observe(self, view: GradientView) -> dict[str, float]:
        """Estimate ``|G|^2``, ``tr(Sigma)`` and ``B_simple`` at this step (collective).

        Parameters
        ----------
        view : GradientView
            ``local_sq_norm``, ``global_grads``, ``local_batch``,
            ``global_batch`` and ``comm`` are used.

        Returns
        -------
        dict of str to float
            The :attr:`outputs`: squared norms in (gradient units)^2,
            ``gns_b_simple`` in samples; NaN where undefined (see class docstring).
        """
        g_small, b_small, g_big = self._agreed_inputs(view)
        b_big = float(view.global_batch)
        nan = math.nan
        if not 0 < b_small < b_big:
            return dict.fromkeys(self.outputs, nan)
        g_sq, trace = noise_scale_terms(g_small, b_small, g_big, b_big)
        g_ema = self._g_sq.update(g_sq)
        s_ema = self._trace.update(trace)
        b_simple = s_ema / g_ema if g_ema > 0 else nan
        return {"gns_g_sq": g_sq, "gns_trace": trace, "gns_g_sq_ema": g_ema,
                "gns_trace_ema": s_ema, "gns_b_simple": b_simple}
