"""Sparse SGD with momentum (PyTorch's rule on the touched indices; StellaTrain's CPU optimizer)."""

from __future__ import annotations

import numpy as np

from hpcbench.optim import _kernels
from hpcbench.optim.base import SparseOptimizer, TensorState
from hpcbench.optim.gradient import SparseGradient

__all__ = ["SparseSGD"]

_NO_BUFFER = {np.dtype(np.float32): np.zeros(1, np.float32), np.dtype(np.float64): np.zeros(1, np.float64)}


class SparseSGD(SparseOptimizer):
    """SGD with momentum, dampening, Nesterov and weight decay, on the indices a sparse gradient touches.

    For each touched index ``j`` with gradient ``g`` (the summed value over
    ranks divided by ``average_over``), in the parameter's dtype, as
    ``torch.optim.SGD`` (``_single_tensor_sgd``) does for every element:

    1. ``g = -g`` if ``maximize``;
    2. ``g = g + weight_decay * x[j]``;
    3. with ``momentum != 0``: ``b[j] = g`` at the tensor's first step, else
       ``b[j] = b[j] * mu + (1 - dampening) * g`` with ``mu = momentum``, or
       ``mu = momentum ** k`` with ``smart_momentum`` where ``k`` is the steps
       since ``j`` was last updated; then ``g = g + momentum * b[j]``
       (Nesterov) or ``g = b[j]``;
    4. ``x[j] = x[j] - lr * g``.

    Untouched indices are left as they are (parameter and buffer). Follows
    StellaTrain's ``SGD::optimize_raw`` (``backend/src/optim/sgd copy.cpp``,
    lines 221-262) and PyTorch's documented algorithm.

    Where it equals the dense optimizer on the densified gradient: with
    ``momentum=0`` and ``weight_decay=0`` always (an untouched index has
    gradient 0 and does not move); with momentum, whenever every step
    touches the same indices (the others keep a zero buffer in both). With
    ``smart_momentum`` the buffer of a touched index equals the dense one
    (``k - 1`` untouched steps decayed it by ``momentum ** (k - 1)``, this
    step by one more factor); the dense parameter also moved on the untouched
    steps, by ``-lr * momentum ** s * b`` at the ``s``-th of them, which this
    optimizer leaves out (as StellaTrain). Weight decay applies only to
    touched indices (dense SGD decays every element every step).

    Parameters
    ----------
    lr : float, default 1e-3
    momentum : float, default 0
        >= 0; < 1 with ``smart_momentum``.
    dampening : float, default 0
    weight_decay : float, default 0
        >= 0.
    nesterov : bool, default False
        Needs ``momentum > 0`` and ``dampening == 0`` (as PyTorch).
    maximize : bool, default False
    smart_momentum : bool, default False
        StellaTrain's option: decay a buffer by ``momentum ** k`` for an
        index last updated ``k`` steps ago (one int32 per element more).
        StellaTrain also uses ``momentum ** k`` in the Nesterov term; here the
        Nesterov term keeps ``momentum`` (PyTorch's rule at that step).

    Raises
    ------
    ValueError
        A hyperparameter out of range (the message names it).

    Notes
    -----
    State arrays per tensor (:meth:`SparseOptimizer.state`):
    ``momentum_buffer`` (parameter dtype) with momentum; ``last_step``
    (int32) with ``smart_momentum``.
    """

    name = "sgd"

    def __init__(self, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, maximize: bool = False,
                 smart_momentum: bool = False) -> None:
        super().__init__(lr)
        for key, value in (("momentum", momentum), ("weight_decay", weight_decay)):
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"{key} must be a finite number >= 0, got {value!r}")
        if not np.isfinite(dampening):
            raise ValueError(f"dampening must be finite, got {dampening!r}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("nesterov needs momentum > 0 and dampening == 0 "
                             f"(got momentum={momentum!r}, dampening={dampening!r})")
        if smart_momentum and not momentum < 1:
            raise ValueError(f"smart_momentum needs momentum < 1, got {momentum!r}")
        self.momentum = float(momentum)
        self.dampening = float(dampening)
        self.weight_decay = float(weight_decay)
        self.nesterov = bool(nesterov)
        self.maximize = bool(maximize)
        self.smart_momentum = bool(smart_momentum) and self.momentum != 0

    def _apply(self, x: np.ndarray, g: SparseGradient, state: TensorState, avg, compiled: bool) -> int:
        f = x.dtype.type
        t = state.steps
        if self.momentum != 0:
            buf = self._array(state, "momentum_buffer", x.dtype)
        else:
            buf = _NO_BUFFER[x.dtype]
        smart = self.smart_momentum
        pw = self._table(self.momentum, t + 1, x.dtype) if smart else _NO_BUFFER[x.dtype]
        return _kernels.sgd(compiled, x, g.indices, g.values, avg, buf, self._last(state, smart), pw, f(self.lr),
                     f(self.momentum), f(1.0 - self.dampening), f(self.weight_decay), self.nesterov,
                     self.maximize, t == 0, smart, t)
