"""What every sparse optimizer shares: per-tensor state keyed by name, the parameter view, the step."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from hpcbench.optim import _kernels
from hpcbench.optim.gradient import SparseGradient, coalesce
from hpcbench.runtime import jit

__all__ = ["SparseOptimizer", "TensorState"]


class TensorState:
    """One tensor's optimizer state.

    Attributes
    ----------
    steps : int
        Steps applied to the tensor so far.
    numel : int
        Elements of the tensor.
    arrays : dict of str to numpy.ndarray
        State arrays of shape (numel,) (e.g. ``momentum_buffer``; float in
        the parameter's dtype, ``last_step`` int32).
    """

    __slots__ = ("steps", "numel", "arrays")

    def __init__(self, numel: int) -> None:
        self.steps = 0
        self.numel = numel
        self.arrays: dict[str, np.ndarray] = {}


_EMPTY_I32 = np.zeros(1, np.int32)


def _flat_view(param) -> np.ndarray:
    """A flat numpy view sharing ``param``'s memory (torch tensor or numpy array)."""
    if isinstance(param, np.ndarray):
        arr = param
    elif hasattr(param, "detach"):
        try:
            arr = param.detach().numpy()
        except TypeError as exc:            # a tensor numpy cannot view (another device, a dtype)
            raise ValueError(f"param must be a float32 or float64 CPU tensor: {exc}") from None
    else:
        raise TypeError(f"param must be a torch.Tensor or numpy.ndarray, got {type(param).__name__}")
    if arr.dtype != np.float32 and arr.dtype != np.float64:
        raise ValueError(f"param must be float32 or float64, got {arr.dtype}")
    if not (arr.flags.c_contiguous and arr.flags.writeable):
        raise ValueError("param must be contiguous and writeable")
    return arr.reshape(-1)


class SparseOptimizer(ABC):
    """Base of the sparse optimizers: applies a sparse gradient in place to the indices it touches.

    Subclasses set :attr:`name`, validate their hyperparameters in
    ``__init__`` and implement :meth:`_apply`. State is kept per tensor
    name (a bucket's or a parameter's), created on its first step.

    Parameters
    ----------
    lr : float
        Learning rate, >= 0; the attribute :attr:`lr` may be changed between
        steps (a schedule, a policy).

    Raises
    ------
    ValueError
        ``lr`` negative or not finite.
    """

    name: ClassVar[str] = ""

    def __init__(self, lr: float) -> None:
        if not (np.isfinite(lr) and lr >= 0):
            raise ValueError(f"lr must be a finite number >= 0, got {lr!r}")
        self.lr = float(lr)
        self._state: dict[str, TensorState] = {}
        self._powers: dict[tuple[float, Any], np.ndarray] = {}

    def step(self, name: str, param, grad, average_over: float = 1) -> SparseGradient:
        """Apply ``grad / average_over`` to ``param`` in place, on the indices ``grad`` touches only.

        Parameters
        ----------
        name : str
            Key of the tensor's state (as the compressed allreduce's ``name``).
        param : torch.Tensor or numpy.ndarray
            The parameter (any shape, contiguous, float32 or float64, CPU);
            its flattened elements are updated in place.
        grad : SparseSum, SparseGradient or (indices, values)
            The sparse gradient: a compressed allreduce's ``output="sparse"``
            result is taken as it is (see :func:`hpcbench.optim.gradient.coalesce`).
        average_over : float, default 1
            The summed values are divided by it first (the world size for
            the mean gradient, as the dense synchroniser divides by it).

        Returns
        -------
        SparseGradient
            The coalesced gradient that was applied (before the division).

        Raises
        ------
        ValueError
            ``param`` is not a contiguous float CPU tensor, its size differs
            from the one this ``name`` was first stepped with, ``average_over``
            is not positive, or ``grad`` is malformed (see ``coalesce``).
        TypeError
            ``param`` or ``grad`` has an unsupported type.
        """
        x = _flat_view(param)
        if not (np.isfinite(average_over) and average_over > 0):
            raise ValueError(f"average_over must be a positive number, got {average_over!r}")
        state = self._state.get(name)
        if state is None:
            state = self._state[name] = TensorState(x.shape[0])
        elif state.numel != x.shape[0]:
            raise ValueError(f"tensor {name!r} has {x.shape[0]} elements, {state.numel} at its first step")
        g = coalesce(grad, x.shape[0], x.dtype, check_range=False)
        if g.nnz:
            bad = self._apply(x, g, state, x.dtype.type(average_over), jit.enabled())
            if bad >= 0:
                raise ValueError(f"index {int(g.indices[bad])} is out of range for {x.shape[0]} elements")
        state.steps += 1
        return g

    def state(self, name: str) -> dict[str, np.ndarray]:
        """The state arrays of tensor ``name`` (views, not copies; empty before its first step)."""
        s = self._state.get(name)
        return dict(s.arrays) if s is not None else {}

    def steps(self, name: str) -> int:
        """Steps applied to tensor ``name`` so far."""
        s = self._state.get(name)
        return s.steps if s is not None else 0

    # -- for subclasses ------------------------------------------------------------------------
    def _array(self, state: TensorState, key: str, dtype) -> np.ndarray:
        """State array ``key`` of the tensor, zero-initialised on first use."""
        arr = state.arrays.get(key)
        if arr is None:
            arr = state.arrays[key] = np.zeros(state.numel, dtype)
        return arr

    def _last(self, state: TensorState, smart: bool) -> np.ndarray:
        """The int32 last-update step of each index (a 1-element dummy when not tracked)."""
        return self._array(state, "last_step", np.int32) if smart else _EMPTY_I32

    def _table(self, base: float, count: int, dtype) -> np.ndarray:
        """At least ``count`` powers ``base**k`` in ``dtype`` (grown by doubling, values never change)."""
        key = (base, np.dtype(dtype))
        table = self._powers.get(key)
        if table is None or table.shape[0] < count:
            table = self._powers[key] = _kernels.powers(base, max(count, 2 * (0 if table is None else
                                                                               table.shape[0]), 64), dtype)
        return table

    @abstractmethod
    def _apply(self, x: np.ndarray, g: SparseGradient, state: TensorState, avg, compiled: bool) -> int:
        """Update ``x`` at ``g.indices`` from ``g.values / avg``; ``state.steps`` is this step's number.

        Returns the position of the first index out of range (nothing updated), or -1.
        """
