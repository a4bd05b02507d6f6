"""Gradient variance across workers, as KungFu's online monitor.

KungFu (Mai et al., OSDI'20; ``MonitorGradientVarianceOptimizer``) measures
how much the workers' gradients disagree: for every parameter tensor, the
elementwise variance over the ``n`` workers,

``Var[g] = mean_i(g_i^2) - (mean_i g_i)^2``,

then the Frobenius norm of that variance tensor, summed over tensors. The mean
gradient is the training allreduce's result; the mean of the squares costs a
second allreduce of the same size.
"""

from __future__ import annotations

from typing import ClassVar

import torch

from hpcbench.monitors.base import GradientView, Monitor

__all__ = ["GradientVariance", "gradient_variance"]


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

    Parameters
    ----------
    interval : int, default 1
        Steps between observations, >= 1.
    algorithm : str, default "auto"
        Allreduce algorithm of the squared gradients (a name of
        :func:`hpcbench.collectives.algorithms.names`, or ``"auto"``).

    Raises
    ------
    ValueError
        Unknown ``algorithm`` or one that is not deterministic; the message
        names the option.
    """

    name: ClassVar[str] = "variance"
    needs_local_grads: ClassVar[bool] = True
    outputs: ClassVar[tuple[str, ...]] = ("grad_variance",)

    def __init__(self, interval: int = 1, *, algorithm: str = "auto") -> None:
        super().__init__(interval)
        from hpcbench.collectives import algorithms

        allowed = ["auto"] + [a for a in algorithms.names() if algorithms.get(a).deterministic]
        if algorithm not in allowed:
            raise ValueError(f"variance option algorithm: must be one of {', '.join(allowed)} "
                             f"(deterministic allreduce algorithms), got {algorithm!r}")
        self.algorithm = algorithm
        self._buf: torch.Tensor | None = None

    def observe(self, view: GradientView) -> dict[str, float]:
        """Allreduce the squared local gradients and return ``{"grad_variance": value}`` (collective).

        Raises
        ------
        ValueError
            ``view.local_grads`` is None or does not match ``view.global_grads``.
        """
        from hpcbench.collectives.api import allreduce

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
