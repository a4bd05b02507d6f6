"""Profile one worker's compute once: forward, backward and optimizer time, and when each gradient is ready.

The emulated mode (``compute: emulated``) replays this profile instead of
running the model: it waits the forward time, then releases each gradient
bucket at the moment backward would have produced it, then waits the rest of
backward and the optimizer step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:   # a ComputeProfile reaches every rank (pickled); only profile_compute needs torch
    import torch

__all__ = ["ComputeProfile", "profile_compute"]


@dataclass(frozen=True)
class ComputeProfile:
    """One training step's compute on one worker, in seconds (modelled, undilated).

    Attributes
    ----------
    forward_s, backward_s, optimizer_s : float
        Forward (with the loss), backward, and SGD step times.
    param_ready_s : numpy.ndarray of float64, shape (n_params,)
        When each parameter's gradient is accumulated, from the start of
        backward (registration order).
    numels : tuple of int
        Elements of each parameter (registration order).
    source : str
        ``"measured"`` or ``"given"`` (scaled to a configured compute time).
    """

    forward_s: float
    backward_s: float
    optimizer_s: float
    param_ready_s: np.ndarray
    numels: tuple
    source: str = "measured"

    @property
    def compute_s(self) -> float:
        """Forward + backward + optimizer."""
        return self.forward_s + self.backward_s + self.optimizer_s

    def scaled_to(self, compute_s: float) -> "ComputeProfile":
        """The same shares and gradient timeline, stretched to a step of ``compute_s`` seconds."""
        k = compute_s / self.compute_s
        return ComputeProfile(self.forward_s * k, self.backward_s * k, self.optimizer_s * k,
                              self.param_ready_s * k, self.numels, "given")


def profile_compute(model: torch.nn.Module, data, steps: int = 3, lr: float = 0.01) -> ComputeProfile:
    """Time ``steps`` local SGD steps of ``model`` on ``data`` (after one warm-up); medians.

    Parameters
    ----------
    model : torch.nn.Module
        Trained in place (a copy is the caller's business).
    data : object with ``batch(step) -> (x, y)``
    steps : int
        Measured steps (>= 1).
    lr : float
        SGD learning rate.

    Returns
    -------
    ComputeProfile
    """
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    ready = np.zeros(len(params))
    t_bwd = [0.0]
    hooks = [p.register_post_accumulate_grad_hook(
        lambda p, i=i: ready.__setitem__(i, time.perf_counter() - t_bwd[0])) for i, p in enumerate(params)]
    opt = torch.optim.SGD(params, lr=lr)
    rows, readies = [], []
    try:
        for s in range(steps + 1):
            x, y = data.batch(s)
            t0 = time.perf_counter()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            t_bwd[0] = time.perf_counter()
            loss.backward()
            t2 = time.perf_counter()
            opt.step()
            opt.zero_grad(set_to_none=True)
            t3 = time.perf_counter()
            if s:
                rows.append((t_bwd[0] - t0, t2 - t_bwd[0], t3 - t2))
                readies.append(ready.copy())
    finally:
        for h in hooks:
            h.remove()
    f, b, o = np.median(np.array(rows), axis=0)
    return ComputeProfile(float(f), float(b), float(o), np.median(np.array(readies), axis=0),
                          tuple(p.numel() for p in params))
