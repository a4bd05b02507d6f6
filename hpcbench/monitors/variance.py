"""Gradient variance across workers, as KungFu's online monitor.

KungFu (Mai et al., OSDI'20; ``MonitorGradientVarianceOptimizer``) measures
how much the workers' gradients disagree: for every parameter tensor, the
elementwise variance over the ``n`` workers,

``Var[g] = mean_i(g_i^2) - (mean_i g_i)^2``,

then the Frobenius norm of that variance tensor, summed over tensors. The mean
gradient is the training allreduce's result; the mean of the squares costs a
second allreduce of the same size.

``estimator: trace`` measures the same disagreement without that allreduce:
the *sum* of the elementwise variances over every parameter, i.e. the trace
of the covariance of the workers' gradients,

``tr Cov[g] = sum_j Var[g_j] = (1/n) sum_i |g_i|^2 - |mean_i g_i|^2``,

from each worker's squared gradient norm ``|g_i|^2`` (which the runner takes
while the buckets are reduced, for the gradient noise scale) and the squared
norm of the synchronised gradient: one allreduce of one float64 scalar.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch

from hpcbench.monitors.base import GradientView, Monitor
from hpcbench.monitors.norms import sq_norm_part

__all__ = ["GradientVariance", "gradient_variance", "trace_variance", "ESTIMATORS"]

#: KungFu's elementwise variance (a second full allreduce) or the trace of the covariance (one scalar)
ESTIMATORS = ("elementwise", "trace")


def gradient_variance(mean_sq, mean) -> float:
    """KungFu's summed gradient variance from per-tensor means.

    Parameters
    ----------
    mean_sq : sequence of Tensor
        ``mean_i(g_i^2)`` per parameter tensor (any float dtype).
    mean : sequence of Tensor
        ``mean_i(g_i)`` per parameter tensor, same shapes.

    Returns
    -------
    float
        ``sum_t || mean_sq_t - mean_t^2 ||_F``, computed in float64.
    """
    total = 0.0
    for sq, m in zip(mean_sq, mean):
        m64 = m.detach().reshape(-1).to(torch.float64)
        var = sq.detach().reshape(-1).to(torch.float64) - m64 * m64
        total += float(torch.linalg.vector_norm(var))
    return total


def trace_variance(mean_local_sq: float, global_sq: float) -> float:
    """Trace of the covariance of the workers' gradients from squared norms.

    ``tr Cov[g] = (1/n) sum_i |g_i|^2 - |g_bar|^2`` (population covariance
    over the ``n`` workers, ``g_bar = (1/n) sum_i g_i``), which equals the
    sum over all parameters of KungFu's elementwise variance
    ``mean_i(g_i^2) - (mean_i g_i)^2`` before its Frobenius norm.

    Parameters
    ----------
    mean_local_sq : float
        ``(1/n) sum_i |g_i|^2``, in (gradient units)^2.
    global_sq : float
        ``|g_bar|^2``, in (gradient units)^2.

    Returns
    -------
    float
        The difference, in (gradient units)^2. Never negative in exact
        arithmetic; with squared norms of relative error ``e`` (about 2e-6,
        :mod:`hpcbench.monitors.norms`) it is exact to about ``e |g_bar|^2``,
        so when the workers nearly agree (one worker: 0 exactly) it can come
        out slightly negative; it is returned as it is (no clipping), so that
        averages over steps stay unbiased.
    """
    return float(mean_local_sq) - float(global_sq)


class GradientVariance(Monitor):
    """Sum over parameter tensors of the Frobenius norm of the gradient variance over workers.

    ``grad_variance = sum_t || mean_i(g_{i,t}^2) - (mean_i g_{i,t})^2 ||_F``
    (KungFu's definition, ``kungfu/tensorflow/optimizers/grad_variance.py``),
    in (gradient units)^2. ``mean_i g_i`` is ``GradientView.global_grads``
    (the training allreduce, reused); ``mean_i(g_i^2)`` is one extra
    allreduce (``op="avg"``) of all squared local gradients packed into one
    float32 buffer, through hpcbench's collectives, like KungFu's fused
    ``group_all_reduce``.

    Differences from KungFu's code: the subtraction and the norms are done in
    float64 (KungFu stays in float32; the difference of two nearly equal
    squares loses digits there), the squares travel in float32 as in KungFu;
    and the allreduce is ``deterministic`` (the result bits are the same on
    every rank), so every rank returns the same value when the synchronised
    gradients are the same on every rank (true of every allreduce
    synchroniser). At world size 1 the variance is 0 up to rounding.

    With ``estimator="trace"`` the output is instead :func:`trace_variance`
    (the sum of the elementwise variances over all parameters, the trace of
    the covariance of the workers' gradients), from ``GradientView.local_sq_norm``
    (computed by the runner while the buckets are reduced) and the squared
    norm of the synchronised gradient, with one allreduce of a single float64
    scalar instead of the full-size one, and no copy of the local gradients.
    KungFu has no such estimator; it is hpcbench's, to have a variance signal
    cheap enough to leave on at every step (measured in docs/adaptive.md).
    The two outputs are different norms of the same variance tensor ``V``
    (elementwise: ``sum_t ||V_t||_F``; trace: ``sum_t sum_j V_tj``), so they
    are not interchangeable numbers, but both are 0 exactly when all workers'
    gradients agree and grow with their disagreement. A trace monitor's
    :attr:`label` is ``variance_trace``, so both can run in one job
    (``interleave_monitors``); its column is ``variance_trace_grad_variance``.

    Parameters
    ----------
    interval : int, default 1
        Steps between observations, >= 1.
    algorithm : str, default "auto"
        Allreduce algorithm of the squared gradients (a name of
        :func:`hpcbench.collectives.algorithms.names`, or ``"auto"``).
    estimator : {"elementwise", "trace"}, default "elementwise"
        KungFu's definition, or the trace of the covariance.

    Raises
    ------
    ValueError
        Unknown ``algorithm`` or one that is not deterministic, or an unknown
        ``estimator``; the message names the option.
    """

    name: ClassVar[str] = "variance"
    needs_local_grads: ClassVar[bool] = True
    outputs: ClassVar[tuple[str, ...]] = ("grad_variance",)

    def __init__(self, interval: int = 1, *, algorithm: str = "auto", estimator: str = "elementwise") -> None:
        super().__init__(interval)
        from hpcbench.collectives import algorithms

        allowed = ["auto"] + [a for a in algorithms.names() if algorithms.get(a).deterministic]
        if algorithm not in allowed:
            raise ValueError(f"variance option algorithm: must be one of {', '.join(allowed)} "
                             f"(deterministic allreduce algorithms), got {algorithm!r}")
        if estimator not in ESTIMATORS:
            raise ValueError(f"variance option estimator: must be one of {', '.join(ESTIMATORS)}, "
                             f"got {estimator!r}")
        self.algorithm = algorithm
        self.estimator = estimator
        self.needs_local_grads = estimator == "elementwise"
        if estimator == "trace":
            self.label = "variance_trace"
        self._buf: torch.Tensor | None = None

    def observe(self, view: GradientView) -> dict[str, float]:
        """Allreduce the squared local gradients (or, ``trace``, the squared norms) and return
        ``{"grad_variance": value}`` (collective).

        Raises
        ------
        ValueError
            ``view.local_grads`` is None or does not match ``view.global_grads`` (elementwise).
        """
        from hpcbench.collectives.api import allreduce

        if self.estimator == "trace":
            return {"grad_variance": self._trace(view)}

        local, glob = view.local_grads, view.global_grads
        if local is None:
            raise ValueError("variance monitor: GradientView.local_grads is None "
                             "(the runner must copy local gradients when needs_local_grads)")
        if len(local) != len(glob) or any(a.numel() != b.numel() for a, b in zip(local, glob)):
            raise ValueError("variance monitor: local_grads and global_grads differ in shapes")
        sizes = [g.numel() for g in local]
        total = sum(sizes)
        if self._buf is None or self._buf.numel() != total:
            self._buf = torch.empty(total, dtype=torch.float32)
        buf = self._buf
        parts = list(torch.split(buf, sizes))
        for part, g in zip(parts, local):
            flat = g.detach().reshape(-1)
            torch.mul(flat, flat, out=part)
        if view.comm.size > 1 and total:
            allreduce(buf, buf, op="avg", algorithm=self.algorithm, deterministic=True,
                      comm=view.comm, name="monitor.variance")
        return {"grad_variance": gradient_variance(parts, glob)}

    def _trace(self, view: GradientView) -> float:
        """:func:`trace_variance` of this step: the mean of the workers' ``|g_i|^2`` and ``|g_bar|^2`` of the
        synchronised gradients, each rank reading its ``1/P`` share of them (the same on every rank,
        :func:`hpcbench.monitors.norms.sq_norm_part`); one allreduce of two scalars sums both, the same
        bits on every rank."""
        from hpcbench.collectives.api import allreduce

        comm = view.comm
        v = np.array([view.local_sq_norm / comm.size, sq_norm_part(view.global_grads, comm.rank, comm.size)],
                     dtype=np.float64)
        if comm.size > 1:
            allreduce(v, v, op="sum", deterministic=True, comm=comm, name="monitor.variance")
        return trace_variance(float(v[0]), float(v[1]))
