"""Sparse Adam (PyTorch's rule on the touched indices; StellaTrain's CPU optimizer)."""

from __future__ import annotations

import math

import numpy as np

from hpcbench.optim import _kernels
from hpcbench.optim.base import SparseOptimizer, TensorState
from hpcbench.optim.gradient import SparseGradient

__all__ = ["SparseAdam"]


class SparseAdam(SparseOptimizer):
    """Adam (optionally AMSGrad) on the indices a sparse gradient touches.

    At the tensor's ``t``-th step (from 1; every call counts, as PyTorch's
    per-parameter ``step``), for each touched index ``j`` with gradient ``g``
    (summed over ranks, divided by ``average_over``), in the parameter's
    dtype, as ``torch.optim.Adam`` (``_single_tensor_adam``) does for every
    element:

    1. ``g = -g`` if ``maximize``; ``g = g + weight_decay * x[j]``;
    2. with ``smart_momentum``: ``m[j] *= beta1 ** (k - 1)``,
       ``v[j] *= beta2 ** (k - 1)`` for an index last updated ``k`` steps ago
       (the decay the dense optimizer applied on the untouched steps);
    3. ``m[j] = lerp(m[j], g, 1 - beta1)`` (``torch.lerp``'s two branches),
       ``v[j] = v[j] * beta2 + (1 - beta2) * g * g``;
    4. AMSGrad: ``vmax[j] = max(vmax[j], v[j])`` and ``v`` below is ``vmax[j]``;
    5. ``x[j] = x[j] - (lr / (1 - beta1 ** t)) * (m[j] / (sqrt(v) / sqrt(1 - beta2 ** t) + eps))``.

    Untouched indices keep their parameter and moments. This is StellaTrain's
    ``Adam::optimize_raw`` (``backend/src/optim/adam.cpp``, lines 19-87: a
    per-tensor tick for the bias correction, moments updated on touched
    indices only), with two differences: AMSGrad keeps a maximum per element
    (PyTorch's rule; StellaTrain keeps one scalar per tensor), and the
    optional lazy decay (StellaTrain has it for SGD only).

    Equal to the dense optimizer on the densified gradient at the first step
    (an untouched index has ``m = v = 0`` and does not move), and at every
    step when every step touches the same indices. With ``smart_momentum``
    the moments of a touched index equal the dense ones; the dense parameter
    also moved on the untouched steps (its moments were not zero), which this
    optimizer leaves out.

    Parameters
    ----------
    lr : float, default 1e-3
    betas : (float, float), default (0.9, 0.999)
        Each in [0, 1).
    eps : float, default 1e-8
        >= 0.
    weight_decay : float, default 0
        >= 0 (L2, added to the gradient, as ``torch.optim.Adam``).
    amsgrad, maximize, smart_momentum : bool, default False

    Raises
    ------
    ValueError
        A hyperparameter out of range (the message names it).

    Notes
    -----
    State arrays per tensor (:meth:`SparseOptimizer.state`):
    ``exp_avg``, ``exp_avg_sq`` (parameter dtype); ``max_exp_avg_sq`` with
    AMSGrad; ``last_step`` (int32) with ``smart_momentum``.
    """

    name = "adam"

    def __init__(self, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, maximize: bool = False,
                 smart_momentum: bool = False) -> None:
        super().__init__(lr)
        if len(betas) != 2:
            raise ValueError(f"betas must be two numbers, got {betas!r}")
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"betas[{i}] must be in [0, 1), got {beta!r}")
        for key, value in (("eps", eps), ("weight_decay", weight_decay)):
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"{key} must be a finite number >= 0, got {value!r}")
        self.betas = (float(betas[0]), float(betas[1]))
        self.eps = float(eps)
        self.weight_decay = float(weight_decay)
        self.amsgrad = bool(amsgrad)
        self.maximize = bool(maximize)
        self.smart_momentum = bool(smart_momentum)

    def _apply(self, x: np.ndarray, g: SparseGradient, state: TensorState, avg, compiled: bool) -> int:
        f = x.dtype.type
        t = state.steps + 1
        b1, b2 = self.betas
        m = self._array(state, "exp_avg", x.dtype)
        v = self._array(state, "exp_avg_sq", x.dtype)
        vmax = self._array(state, "max_exp_avg_sq", x.dtype) if self.amsgrad else v
        smart = self.smart_momentum
        pw1 = self._table(b1, t, x.dtype) if smart else m       # not read without smart_momentum
        pw2 = self._table(b2, t, x.dtype) if smart else m
        step_size = self.lr / (1.0 - b1 ** t)
        bc2_sqrt = math.sqrt(1.0 - b2 ** t)
        w1 = f(1.0 - b1)
        return _kernels.adam(compiled, x, g.indices, g.values, avg, m, v, vmax, self._last(state, smart), pw1, pw2, w1,
                      f(1.0) - w1, f(b2), f(1.0 - b2), f(step_size), f(bc2_sqrt), f(self.eps),
                      f(self.weight_decay), self.amsgrad, self.maximize, smart, t)
