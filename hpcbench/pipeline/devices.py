"""Per-rank device speed factors and memory caps from the config's forms.

The speed factors are :func:`hpcbench.traces.speed.speed_factors`, shared
with the training runner.
"""

from __future__ import annotations

import numpy as np

from hpcbench.traces.speed import speed_factors

__all__ = ["speed_factors", "memory_caps"]


def memory_caps(spec, num_devices: int) -> np.ndarray:
    """Memory cap of each device in bytes, shape (num_devices,); ``inf`` for none."""
    if spec is None:
        return np.full(num_devices, np.inf)
    vals = spec if isinstance(spec, list) else [spec]
    return np.resize(np.asarray(vals, dtype=np.float64), num_devices) * 1e6
