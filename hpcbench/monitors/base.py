"""The contract between a training runner and its online monitors.

A monitor (KungFu's "monitoring" operators: gradient noise scale, gradient
variance; Mai et al., OSDI'20, section 4) looks at one step's gradients on
every worker and returns a few scalars. The runner owns the gradients and the
training allreduce; it hands each monitor a :class:`GradientView` after the
gradients were synchronised, at the steps the monitor asks for.

Monitors live in ``hpcbench/monitors/NAME.py`` and are registered by one line
in :data:`hpcbench.monitors.MONITORS`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import torch

__all__ = ["GradientView", "Monitor"]


@dataclass(frozen=True)
class GradientView:
    """What a monitor sees of one training step, on one rank.

    Attributes
    ----------
    step : int
        Training step (iteration) the gradients belong to, counting from 0.
    local_sq_norm : float
        ``|g_local|^2``: the squared L2 norm, in float64, of this worker's own
        gradient (all parameters, before synchronisation), computed by the
        runner while the gradient buckets are reduced (no extra pass).
    local_grads : sequence of Tensor or None
        This worker's gradients before synchronisation, one float32 tensor per
        parameter (same shapes as the parameters), when a monitor with
        ``needs_local_grads = True`` observes this step; ``None`` otherwise.
    global_grads : sequence of Tensor
        The synchronised gradients (mean over workers), one float32 tensor per
        parameter: what the optimizer applies.
    local_batch : int
        Samples in this worker's batch (``B_small``).
    global_batch : int
        Samples over all workers (``B_big``).
    comm : mpi4py.MPI.Comm
        The workers' communicator (a monitor that needs more communication,
        such as the variance monitor, uses it).
    """

    step: int
    local_sq_norm: float
    local_grads: Sequence[torch.Tensor] | None
    global_grads: Sequence[torch.Tensor]
    local_batch: int
    global_batch: int
    comm: Any


class Monitor(ABC):
    """An online training monitor, run every ``interval`` steps.

    Subclasses declare ``name`` and ``needs_local_grads`` and implement
    :meth:`observe`. Every rank calls :meth:`observe` at the same steps (a
    monitor may use collectives on ``view.comm``); every rank returns the same
    values.

    Parameters
    ----------
    interval : int, default 1
        Steps between observations (``monitor_interval``), >= 1.

    Raises
    ------
    ValueError
        ``interval < 1``.
    """

    #: registry name
    name: ClassVar[str]
    #: whether :meth:`observe` needs ``GradientView.local_grads`` (a copy the runner
    #: makes before synchronising, only at the steps this monitor observes)
    needs_local_grads: ClassVar[bool] = False
    #: the scalar names :meth:`observe` returns (the runner's HDF5 columns)
    outputs: ClassVar[tuple[str, ...]] = ()

    def __init__(self, interval: int = 1) -> None:
        if int(interval) < 1:
            raise ValueError(f"monitor interval must be >= 1, got {interval!r}")
        self.interval = int(interval)
        #: what a run calls this monitor: its variant name and the prefix of its output columns
        #: (``LABEL_OUTPUT``); the registry name unless an option makes it a different measurement
        self.label: str = getattr(self, "name", "")

    def due(self, step: int) -> bool:
        """Whether :meth:`observe` runs at ``step`` (every ``interval`` steps from step 0)."""
        return step % self.interval == 0

    @abstractmethod
    def observe(self, view: GradientView) -> dict[str, float]:
        """Measure one step; returns ``{output name: value}`` (same on every rank)."""
