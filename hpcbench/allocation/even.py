"""``even``: the same number of layers on every device (Sky Computing's ``even_allocate``)."""

from __future__ import annotations

import numpy as np

from hpcbench.allocation.instance import Allocation, Instance

__all__ = ["allocate", "even_bounds"]


def even_bounds(num_layers: int, num_stages: int) -> np.ndarray:
    """Stage bounds with ``floor(L / D)`` layers each, the first ``L mod D`` stages one more; shape (D+1,)."""
    base, extra = divmod(num_layers, num_stages)
    sizes = np.full(num_stages, base, dtype=np.int64)
    sizes[:extra] += 1
    return np.concatenate([[0], np.cumsum(sizes)])


def allocate(inst: Instance) -> Allocation:
    """Even split over the devices in their given order; ignores speed, memory and links."""
    inst.check_shape()
    return Allocation(np.arange(inst.num_devices), even_bounds(inst.num_layers, inst.num_devices), "even")
